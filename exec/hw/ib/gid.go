package ib

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// GIDConfig is how a port's GID index is chosen (NCCL's
// ncclIbGetGidIndex and its variables).
type GIDConfig struct {
	// Index, when not negative, is the GID index used on RoCE ports
	// (NCCL_IB_GID_INDEX; like NCCL, InfiniBand ports ignore it).
	Index int
	// Family is the address family RoCE GIDs are chosen from: 4 or 6
	// (NCCL_IB_ADDR_FAMILY AF_INET, the default, or AF_INET6).
	Family int
	// RoCEVersion is the RoCE version preferred among GIDs of that family
	// (NCCL_IB_ROCE_VERSION_NUM, default 2).
	RoCEVersion int
	// Range, when set, keeps RoCE GIDs to one address prefix of Family
	// (NCCL_IB_ADDR_RANGE).
	Range *net.IPNet
	// FLIDIndex is the GID index an InfiniBand port uses when its GID
	// there carries a routable FLID (NCCL_IB_ROUTABLE_FLID_GID_INDEX,
	// default 1); otherwise such a port uses index 0.
	FLIDIndex int
}

// DefaultGIDConfig is NCCL's default: select (no forced index), IPv4,
// RoCE v2, FLID index 1.
func DefaultGIDConfig() GIDConfig {
	return GIDConfig{Index: -1, Family: 4, RoCEVersion: 2, FLIDIndex: 1}
}

// envLookup returns the first of TWINCCL_<name> and NCCL_<name> that
// lookup finds set, and which one it was.
func envLookup(lookup func(string) (string, bool), name string) (string, string, bool) {
	for _, n := range []string{"TWINCCL_" + name, "NCCL_" + name} {
		if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
			return strings.TrimSpace(v), n, true
		}
	}
	return "", "", false
}

// GIDConfigFromEnv reads TWINCCL_IB_GID_INDEX, TWINCCL_IB_ADDR_FAMILY,
// TWINCCL_IB_ROCE_VERSION_NUM, TWINCCL_IB_ADDR_RANGE and
// TWINCCL_IB_ROUTABLE_FLID_GID_INDEX (the NCCL_* names when ours are
// unset) through lookup (os.LookupEnv when nil) over DefaultGIDConfig; a
// value that does not parse is an error naming the variable.
func GIDConfigFromEnv(lookup func(string) (string, bool)) (GIDConfig, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	c := DefaultGIDConfig()
	ints := []struct {
		name string
		dst  *int
		ok   func(int) bool
	}{
		{"IB_GID_INDEX", &c.Index, func(v int) bool { return v >= -1 && v < 1<<16 }},
		{"IB_ROCE_VERSION_NUM", &c.RoCEVersion, func(v int) bool { return v == 1 || v == 2 }},
		{"IB_ROUTABLE_FLID_GID_INDEX", &c.FLIDIndex, func(v int) bool { return v >= 0 && v < 1<<16 }},
	}
	for _, x := range ints {
		v, n, ok := envLookup(lookup, x.name)
		if !ok {
			continue
		}
		i, err := strconv.Atoi(v)
		if err != nil || !x.ok(i) {
			return c, fmt.Errorf("ib plugin: %s=%q is not a valid value", n, v)
		}
		*x.dst = i
	}
	if v, n, ok := envLookup(lookup, "IB_ADDR_FAMILY"); ok {
		switch v {
		case "AF_INET":
			c.Family = 4
		case "AF_INET6":
			c.Family = 6
		default:
			return c, fmt.Errorf("ib plugin: %s=%q: want AF_INET or AF_INET6", n, v)
		}
	}
	if v, n, ok := envLookup(lookup, "IB_ADDR_RANGE"); ok {
		_, r, err := net.ParseCIDR(v)
		if err != nil {
			return c, fmt.Errorf("ib plugin: %s=%q: %w", n, v, err)
		}
		if fam := familyOfRange(r); fam != c.Family {
			return c, fmt.Errorf("ib plugin: %s=%q is an IPv%d range but the address family is IPv%d", n, v, fam, c.Family)
		}
		c.Range = r
	}
	return c, nil
}

func familyOfRange(r *net.IPNet) int {
	if r.IP.To4() != nil {
		return 4
	}
	return 6
}

// gidFamily is 4 for an IPv4-mapped GID (unicast ::ffff:a.b.c.d or the
// multicast ff0e::ffff:a.b.c.d), else 6.
func gidFamily(g [16]byte) int {
	mapped := [12]byte{10: 0xff, 11: 0xff}
	mcast := [12]byte{0: 0xff, 1: 0x0e, 10: 0xff, 11: 0xff}
	if [12]byte(g[:12]) == mapped || [12]byte(g[:12]) == mcast {
		return 4
	}
	return 6
}

// gidValid reports whether a GID is configured (neither all zero nor
// fe80:: with nothing after the prefix) and not link-local (fe80::/64).
func gidValid(g [16]byte) bool {
	be := binary.BigEndian
	w0, rest := be.Uint32(g[0:]), be.Uint32(g[4:])|be.Uint32(g[8:])|be.Uint32(g[12:])
	configured := !(w0|rest == 0 || w0 == 0xfe800000 && rest == 0)
	linkLocal := w0 == 0xfe800000 && be.Uint32(g[4:]) == 0
	return configured && !linkLocal
}

// gidInRange reports whether g lies in r (always, when r is nil): an IPv4
// range is matched against the GID's last four bytes.
func gidInRange(g [16]byte, r *net.IPNet) bool {
	if r == nil {
		return true
	}
	if r.IP.To4() != nil {
		return r.Contains(net.IP(g[12:16]))
	}
	return r.Contains(net.IP(g[:]))
}

// roceVersion is the RoCE version number of an entry's type (1 for the
// "IB/RoCE v1" type, -1 when unknown).
func roceVersion(t verbs.GIDType) int {
	switch t {
	case verbs.GIDTypeIB, verbs.GIDTypeRoCEv1:
		return 1
	case verbs.GIDTypeRoCEv2:
		return 2
	}
	return -1
}

// gidFLID is the FLID field of a GID (its bytes 4 and 5).
func gidFLID(g [16]byte) uint16 { return binary.BigEndian.Uint16(g[4:]) }

// SelectGID chooses the GID index of a port from its table, by NCCL's
// rules. InfiniBand: c.FLIDIndex when the GID there has a routable FLID,
// else 0. RoCE: c.Index when it is set; otherwise, starting from index 0,
// each later entry replaces the current choice when it is of the wanted
// family (and range) and the current one is not, or, both being of that
// family, when it is a valid (configured, not link-local) GID of the
// wanted RoCE version while the current one is invalid or of another
// version. On a usual RoCE NIC (link-local v1 and v2, then IPv4-mapped v1
// and v2) that is the IPv4-mapped RoCE v2 entry.
func SelectGID(link verbs.LinkLayer, table []verbs.GIDEntry, c GIDConfig) (int, error) {
	if len(table) == 0 {
		return 0, fmt.Errorf("empty GID table")
	}
	if link != verbs.LinkEthernet {
		if c.FLIDIndex > 0 && c.FLIDIndex < len(table) && gidFLID(table[c.FLIDIndex].GID) != 0 {
			return c.FLIDIndex, nil
		}
		return 0, nil
	}
	if c.Index >= 0 {
		if c.Index >= len(table) {
			return 0, fmt.Errorf("GID index %d is out of the table of %d entries", c.Index, len(table))
		}
		return c.Index, nil
	}
	cur := 0
	for cand := 1; cand < len(table); cand++ {
		g, n := table[cur], table[cand]
		famOK := gidFamily(n.GID) == c.Family && gidInRange(n.GID, c.Range)
		switch {
		case famOK && gidFamily(n.GID) != gidFamily(g.GID):
			cur = cand
		case famOK && gidValid(n.GID):
			v := roceVersion(n.Type)
			if v == c.RoCEVersion && (roceVersion(g.Type) != v || !gidValid(g.GID)) {
				cur = cand
			}
		}
	}
	return cur, nil
}

// readGIDTable reads a port's GID table.
func readGIDTable(ctx verbs.Context, port, n int) ([]verbs.GIDEntry, error) {
	t := make([]verbs.GIDEntry, n)
	for i := range t {
		e, err := ctx.QueryGID(port, i)
		if err != nil {
			return nil, err
		}
		t[i] = e
	}
	return t, nil
}
