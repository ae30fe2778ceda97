package sim

import (
	"fmt"
	"slices"

	fabfile "github.com/twinccl/twinccl/model/fabric"

	"github.com/twinccl/twinccl/model"
)

// fabricNet is a fabric file attached to a Machine: the links between its
// leaves and the spine as resources, shared by every NET transfer that
// crosses them. Within a leaf the switch is non-blocking and the NICs'
// own links (the NET links of the System) are the only limit.
type fabricNet struct {
	f *fabfile.Fabric
	// up and down are the resources from a leaf to the spine and back:
	// one per leaf under adaptive routing (all its uplinks together), one
	// per uplink under static ECMP.
	up, down map[fabricPort]int32
	// rail is each NET node's index among its host's NETs, by device.
	rail map[*model.Node]int
}

// fabricPort is one leaf's spine-facing capacity: all of it (uplink -1)
// or one uplink.
type fabricPort struct {
	leaf   fabfile.LeafID
	uplink int
}

// SetFabric attaches a fabric (nil detaches it; routes are rebuilt). The
// links from every leaf to the spine become resources of capacity
// (bandwidth of the NICs under the leaf) / oversubscription, with the NET
// links' efficiency of the calibration; each is one resource under
// adaptive routing and split evenly into the leaf's uplinks under ECMP.
//
// Calls over several hosts no longer fold onto one host in the fast mode:
// leaves group hosts, so the network is not symmetric under a rotation by
// one host.
func (m *Machine) SetFabric(f *fabfile.Fabric) error {
	m.routes = map[routeKey]*route{}
	if f == nil {
		m.fab = nil
		m.symChecked = false
		return nil
	}
	if err := f.Check(len(m.Cluster.Nodes)); err != nil {
		return err
	}
	fn := &fabricNet{f: f, up: map[fabricPort]int32{}, down: map[fabricPort]int32{}, rail: map[*model.Node]int{}}
	bw := map[fabfile.LeafID]float64{}
	for j, n := range m.Cluster.Nodes {
		nets := slices.Clone(n.System.Nodes[model.NET])
		slices.SortStableFunc(nets, func(a, b *model.Node) int { return a.NET.Dev - b.NET.Dev })
		for r, nd := range nets {
			fn.rail[nd] = r
			bw[f.LeafOf(fabfile.Port{Host: j, Rail: r})] += float64(nd.NET.BW)
		}
	}
	leaves := make([]fabfile.LeafID, 0, len(bw))
	for l := range bw {
		leaves = append(leaves, l)
	}
	slices.SortFunc(leaves, func(a, b fabfile.LeafID) int {
		if a.Group != b.Group {
			return a.Group - b.Group
		}
		return a.Rail - b.Rail
	})
	eff := m.calib.Link(model.LinkNET).Eff
	if f.Spine != nil {
		for _, l := range leaves {
			total := bw[l] / f.Leaf.Oversubscription * eff * 1e-3
			ports := []int{-1}
			if !f.AdaptiveRouting {
				ports = ports[:0]
				for k := 0; k < f.Leaf.Uplinks; k++ {
					ports = append(ports, k)
				}
			}
			for _, k := range ports {
				c := total / float64(len(ports))
				fn.up[fabricPort{l, k}] = m.addFabricRes(fmt.Sprintf("fabric:%s%s->spine", l, uplinkName(k)), c)
				fn.down[fabricPort{l, k}] = m.addFabricRes(fmt.Sprintf("fabric:spine->%s%s", l, uplinkName(k)), c)
			}
		}
	}
	m.fab = fn
	// The fast mode's rotation by one host does not hold: see above.
	m.symChecked, m.symmetric = true, false
	return nil
}

func uplinkName(k int) string {
	if k < 0 {
		return ""
	}
	return fmt.Sprintf(".up%d", k)
}

// addFabricRes appends a switch link resource (capacity in bytes/ps).
func (m *Machine) addFabricRes(name string, capacity float64) int32 {
	m.res = append(m.res, resource{name: name, cap: capacity})
	m.resType = append(m.resType, model.LinkNET)
	m.extra = append(m.extra, extraLink)
	return int32(len(m.res) - 1)
}

// fabricHop adds to a NET route the fabric links between the sender's NET
// (on cluster node ha) and the receiver's (on hb), and the latency of the
// switches passed beyond the first.
func (m *Machine) fabricHop(rt *route, ha int, neta *model.Node, hb int, netb *model.Node, channel int) error {
	fn := m.fab
	if fn == nil {
		return nil
	}
	ra, oka := fn.rail[neta]
	rb, okb := fn.rail[netb]
	if !oka || !okb {
		return fmt.Errorf("fabric %s: NET %s or %s is not on the cluster", fn.f.File, neta.Name(), netb.Name())
	}
	h, err := fn.f.Route(fabfile.Port{Host: ha, Rail: ra}, fabfile.Port{Host: hb, Rail: rb}, channel)
	if err != nil {
		return err
	}
	if !h.ViaSpine {
		return nil
	}
	rt.res = append(rt.res, fn.up[fabricPort{h.Up, h.Uplink}], fn.down[fabricPort{h.Down, h.Uplink}])
	rt.lat += usToPs(h.ExtraLatencyUs)
	return nil
}
