// Package fabric describes the network above the NICs, which NCCL's
// topology XML does not record: the switches the NICs of a cluster's hosts
// plug into (one leaf per group of hosts, or one per rail of a group in a
// rail-optimised cluster), the spine that joins the leaves, the leaves'
// oversubscription and whether the switches route adaptively. It is read
// from a small YAML file beside the XML (see docs/guide/fabric.md) and
// tells the simulator which switch links a NIC-to-NIC transfer crosses.
package fabric

import (
	"fmt"
	"hash/fnv"
)

// Leaf kinds.
const (
	// KindRail is a rail-optimised leaf level: NIC i of every host of a
	// group plugs into the group's leaf i, so traffic between NICs of the
	// same index stays on one switch and traffic across rails goes up to
	// the spine.
	KindRail = "rail"
	// KindToR is a top-of-rack leaf level: every NIC of a group's hosts
	// plugs into the group's one leaf.
	KindToR = "tor"
)

// Fabric is a two-tier switched network: leaves, and an optional spine
// above them.
type Fabric struct {
	// File is where the fabric was read from (for error messages).
	File string
	// Name is a free-form description.
	Name string
	// Hosts, when not 0, is the number of hosts the fabric is written for;
	// a cluster with another number is refused.
	Hosts int
	Leaf  Leaf
	// Spine is nil for a single leaf level (every host in one group).
	Spine *Spine
	// AdaptiveRouting spreads every transfer that crosses the spine over
	// all uplinks of its leaf (InfiniBand adaptive routing, Spectrum-X);
	// without it each transfer takes one uplink chosen by a hash of its
	// end points and channel (static ECMP), and transfers that hash to the
	// same uplink share it.
	AdaptiveRouting bool
}

// Leaf is the level the NICs plug into.
type Leaf struct {
	// Kind is KindRail or KindToR.
	Kind string
	// Hosts is the number of consecutive hosts (in cluster node order)
	// under one leaf, or one set of rail leaves.
	Hosts int
	// Uplinks is the number of links from one leaf to the spine.
	Uplinks int
	// Oversubscription is the ratio of a leaf's NIC-facing bandwidth to
	// its spine-facing bandwidth (1: non-blocking, 2: 2:1).
	Oversubscription float64
	// LatencyUs is the latency of one pass through a leaf switch.
	LatencyUs float64
}

// Spine is the level above the leaves; it is non-blocking: its only limit
// is the leaves' uplinks.
type Spine struct {
	// LatencyUs is the latency of one pass through a spine switch.
	LatencyUs float64
}

// Port is a NIC of the cluster: its host (cluster node index) and rail
// (the index of the NIC among its host's NET devices, by device number).
type Port struct {
	Host, Rail int
}

// LeafID names one leaf switch: its group of hosts and, on a rail level,
// its rail (0 on a ToR level).
type LeafID struct {
	Group, Rail int
}

func (l LeafID) String() string { return fmt.Sprintf("leaf%d.%d", l.Group, l.Rail) }

// LeafOf is the leaf a NIC plugs into.
func (f *Fabric) LeafOf(p Port) LeafID {
	id := LeafID{Group: p.Host / f.Leaf.Hosts}
	if f.Leaf.Kind == KindRail {
		id.Rail = p.Rail
	}
	return id
}

// Hop is how a transfer between two NICs crosses the fabric.
type Hop struct {
	// ViaSpine is set when the two NICs are under different leaves.
	ViaSpine bool
	// Up and Down are the sender's and the receiver's leaves.
	Up, Down LeafID
	// Uplink is the uplink taken under static ECMP, -1 under adaptive
	// routing (the transfer spreads over all of them) or within a leaf.
	Uplink int
	// ExtraLatencyUs is the latency of the switches passed beyond the
	// first one (the first is part of a NIC-to-NIC latency): a second
	// leaf and a spine switch when ViaSpine, else 0.
	ExtraLatencyUs float64
}

// Route is the way from NIC a to NIC b for a transfer of channel ch (the
// channel only picks the ECMP uplink). Hosts outside a fabric written for
// fewer hosts, or leaves without a spine to join them, are errors naming
// the file.
func (f *Fabric) Route(a, b Port, ch int) (Hop, error) {
	if f.Hosts > 0 && (a.Host >= f.Hosts || b.Host >= f.Hosts) {
		return Hop{}, fmt.Errorf("%s: host %d is outside the fabric's %d hosts", f.File, max(a.Host, b.Host), f.Hosts)
	}
	h := Hop{Up: f.LeafOf(a), Down: f.LeafOf(b), Uplink: -1}
	if h.Up == h.Down {
		return h, nil
	}
	if f.Spine == nil {
		return Hop{}, fmt.Errorf("%s: NICs %d.%d and %d.%d are under different leaves (%s, %s) and the fabric has no spine",
			f.File, a.Host, a.Rail, b.Host, b.Rail, h.Up, h.Down)
	}
	h.ViaSpine = true
	h.ExtraLatencyUs = f.Leaf.LatencyUs + f.Spine.LatencyUs
	if !f.AdaptiveRouting {
		h.Uplink = ecmp(a, b, ch, f.Leaf.Uplinks)
	}
	return h, nil
}

// ecmp is a static hash of a transfer's end points and channel onto one of
// n uplinks (FNV-1a: deterministic across runs and platforms).
func ecmp(a, b Port, ch, n int) int {
	h := fnv.New32a()
	var buf [20]byte
	for i, v := range []int{a.Host, a.Rail, b.Host, b.Rail, ch} {
		u := uint32(v)
		buf[4*i], buf[4*i+1], buf[4*i+2], buf[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	h.Write(buf[:])
	return int(h.Sum32() % uint32(n))
}

// Groups is the number of leaf groups that hosts hosts fill.
func (f *Fabric) Groups(hosts int) int {
	return (hosts + f.Leaf.Hosts - 1) / f.Leaf.Hosts
}

// Check verifies that the fabric can hold a cluster of hosts hosts.
func (f *Fabric) Check(hosts int) error {
	if f.Hosts > 0 && hosts != f.Hosts {
		return fmt.Errorf("%s: written for %d hosts, the cluster has %d", f.File, f.Hosts, hosts)
	}
	if hosts < 1 {
		return fmt.Errorf("%s: a cluster of %d hosts", f.File, hosts)
	}
	if f.Spine == nil && f.Groups(hosts) > 1 {
		return fmt.Errorf("%s: %d hosts fill %d leaf groups of %d and the fabric has no spine to join them", f.File, hosts, f.Groups(hosts), f.Leaf.Hosts)
	}
	return nil
}
