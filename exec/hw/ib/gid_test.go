package ib_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
)

func gid(s string) [16]byte {
	var g [16]byte
	copy(g[:], net.ParseIP(s).To16())
	return g
}

func ent(s string, t verbs.GIDType) verbs.GIDEntry { return verbs.GIDEntry{GID: gid(s), Type: t} }

const (
	v1  = verbs.GIDTypeRoCEv1
	v2  = verbs.GIDTypeRoCEv2
	unk = verbs.GIDTypeUnknown
)

// TestSelectGID checks the choice on synthetic GID tables.
func TestSelectGID(t *testing.T) {
	ll := "fe80::ac0:ebff:fe3d:ca54"
	// A RoCE NIC as show_gids lists it: link-local, then IPv4, v1 and v2.
	mlx := []verbs.GIDEntry{ent(ll, v1), ent(ll, v2), ent("::ffff:10.110.0.33", v1), ent("::ffff:10.110.0.33", v2)}
	withV6 := append(append([]verbs.GIDEntry(nil), mlx...), ent("2001:db8::33", v1), ent("2001:db8::33", v2))
	twoNets := append(append([]verbs.GIDEntry(nil), mlx...), ent("::ffff:192.168.1.5", v1), ent("::ffff:192.168.1.5", v2))
	_, r192, _ := net.ParseCIDR("192.168.0.0/16")
	_, r2001, _ := net.ParseCIDR("2001:db8::/32")
	def := ib.DefaultGIDConfig()
	with := func(f func(*ib.GIDConfig)) ib.GIDConfig { c := def; f(&c); return c }
	var flid [16]byte = gid("fe80::2:1:0:0:1")
	flid[4], flid[5] = 0x12, 0x34
	cases := []struct {
		name  string
		link  verbs.LinkLayer
		table []verbs.GIDEntry
		cfg   ib.GIDConfig
		want  int
	}{
		{"RoCE: IPv4-mapped RoCE v2", verbs.LinkEthernet, mlx, def, 3},
		{"RoCE v1 asked", verbs.LinkEthernet, mlx, with(func(c *ib.GIDConfig) { c.RoCEVersion = 1 }), 2},
		{"v2 listed before v1", verbs.LinkEthernet, []verbs.GIDEntry{ent(ll, v1), ent(ll, v2), ent("::ffff:10.0.0.1", v2), ent("::ffff:10.0.0.1", v1)}, def, 2},
		{"types unknown: first IPv4", verbs.LinkEthernet, []verbs.GIDEntry{ent(ll, unk), ent(ll, unk), ent("::ffff:10.0.0.1", unk), ent("::ffff:10.0.0.1", unk)}, def, 2},
		{"unconfigured entries skipped", verbs.LinkEthernet, []verbs.GIDEntry{ent(ll, v1), ent("::", v2), ent("::", v2), ent("::ffff:10.0.0.1", v2)}, def, 3},
		{"IPv6 asked, global IPv6 present", verbs.LinkEthernet, withV6, with(func(c *ib.GIDConfig) { c.Family = 6 }), 5},
		{"IPv6 asked, only link-local", verbs.LinkEthernet, mlx, with(func(c *ib.GIDConfig) { c.Family = 6 }), 0},
		{"IPv4 among IPv6", verbs.LinkEthernet, withV6, def, 3},
		{"IPv4 range", verbs.LinkEthernet, twoNets, with(func(c *ib.GIDConfig) { c.Range = r192 }), 5},
		{"no range: the first IPv4 v2", verbs.LinkEthernet, twoNets, def, 3},
		{"IPv6 range", verbs.LinkEthernet, withV6, with(func(c *ib.GIDConfig) { c.Family, c.Range = 6, r2001 }), 5},
		{"forced index", verbs.LinkEthernet, mlx, with(func(c *ib.GIDConfig) { c.Index = 1 }), 1},
		{"IB: index 0", verbs.LinkIB, []verbs.GIDEntry{ent("fe80::2:c903:a:1b2c", verbs.GIDTypeIB), ent("fe80::2:c903:a:1b2d", verbs.GIDTypeIB)}, def, 0},
		{"IB ignores a forced index", verbs.LinkIB, []verbs.GIDEntry{ent("fe80::1", verbs.GIDTypeIB), ent("fe80::2", verbs.GIDTypeIB)}, with(func(c *ib.GIDConfig) { c.Index = 1 }), 0},
		{"IB: routable FLID at index 1", verbs.LinkIB, []verbs.GIDEntry{ent("fe80::1", verbs.GIDTypeIB), {GID: flid, Type: verbs.GIDTypeIB}}, def, 1},
	}
	for _, c := range cases {
		got, err := ib.SelectGID(c.link, c.table, c.cfg)
		if err != nil || got != c.want {
			t.Errorf("%s: index %d, %v; want %d", c.name, got, err, c.want)
		}
	}
	if _, err := ib.SelectGID(verbs.LinkEthernet, mlx, with(func(c *ib.GIDConfig) { c.Index = 4 })); err == nil || !strings.Contains(err.Error(), "out of the table of 4") {
		t.Errorf("forced index 4 of 4 entries: %v", err)
	}
	if _, err := ib.SelectGID(verbs.LinkEthernet, nil, def); err == nil {
		t.Error("empty table accepted")
	}
}

func TestGIDConfigFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1], true
				}
			}
			return "", false
		}
	}
	c, err := ib.GIDConfigFromEnv(env())
	if err != nil || c.Index != -1 || c.Family != 4 || c.RoCEVersion != 2 || c.FLIDIndex != 1 || c.Range != nil {
		t.Errorf("defaults: %+v, %v", c, err)
	}
	c, err = ib.GIDConfigFromEnv(env("NCCL_IB_GID_INDEX", "3", "TWINCCL_IB_GID_INDEX", "5", "NCCL_IB_ADDR_FAMILY", "AF_INET6",
		"NCCL_IB_ROCE_VERSION_NUM", "1", "NCCL_IB_ADDR_RANGE", "fd00::/8"))
	if err != nil || c.Index != 5 || c.Family != 6 || c.RoCEVersion != 1 || c.Range == nil || c.Range.String() != "fd00::/8" {
		t.Errorf("set: %+v, %v", c, err)
	}
	for _, kv := range [][]string{
		{"NCCL_IB_GID_INDEX", "x"}, {"TWINCCL_IB_GID_INDEX", "-2"}, {"NCCL_IB_ROCE_VERSION_NUM", "3"}, {"NCCL_IB_ADDR_FAMILY", "inet"},
		{"NCCL_IB_ADDR_RANGE", "10.0.0.0"}, {"NCCL_IB_ADDR_RANGE", "fd00::/8"}, {"NCCL_IB_ROUTABLE_FLID_GID_INDEX", "-1"},
	} {
		if _, err := ib.GIDConfigFromEnv(env(kv...)); err == nil || !strings.Contains(err.Error(), kv[0]) {
			t.Errorf("%s=%s: %v; want an error naming the variable", kv[0], kv[1], err)
		}
	}
}

// TestGIDIndexReachesTheQPs: the chosen index is the one the queue pairs
// use. The soft devices' link-local GIDs (indexes 0 and 1) reach nobody:
// forcing index 0 connects (nothing is sent yet) but the first transfer
// fails with an error naming the peer; index 2 (IPv4-mapped RoCE v1)
// works, as does the default choice (index 3).
func TestGIDIndexReachesTheQPs(t *testing.T) {
	for _, c := range []struct {
		index int
		ok    bool
	}{{-1, true}, {2, true}, {0, false}} {
		cfg := ib.DefaultGIDConfig()
		cfg.Index = c.index
		p := newPairWith(t, pairOpt{devs: [2]int{1, 1}, qps: 1, gid: cfg})
		sc, rc := p.connect(t)
		sr, err := sc.Isend(make([]byte, transport.HeaderSize), make([]byte, 1000))
		if err != nil {
			t.Fatal(err)
		}
		hr, err := rc.IrecvHeader(make([]byte, transport.HeaderSize))
		if err != nil {
			t.Fatal(err)
		}
		err = wait(t, hr, 10*time.Second, sr)
		switch {
		case c.ok && err != nil:
			t.Errorf("GID index %d: %v", c.index, err)
		case !c.ok && (err == nil || !strings.Contains(err.Error(), "rank")):
			t.Errorf("GID index %d: %v; want an error naming the peer", c.index, err)
		}
		t.Logf("GID index %d: %v", c.index, err)
		sc.Close()
		rc.Close()
	}
}
