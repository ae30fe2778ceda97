package sim

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// netDevs picks the NET devices a NET connection from rank from to rank to
// leaves and enters through on a channel, as NCCL 2.28.9's
// ncclTopoGetNetDev (src/graph/search.cc) does for the sender (net.cc's
// sendSetup) and the receiver (recvSetup):
//
//   - a ring or tree connection honours the graph: the channel's entry NET
//     (graph inter[2c]) for the rank that starts the channel's chain on its
//     node, the exit NET (inter[2c+1]) for the others; so NCCL_CROSS_NIC and
//     the search's NIC choice decide which rail a ring crosses;
//   - a p2p connection (no graph): the receiver uses its local NET; the
//     sender starts from its own and, since NCCL_P2P_PXN_LEVEL is 2 by
//     default, takes the NET local to the GPU of its host with the peer's
//     device index when that GPU is NVLinked to it and reaches the NET
//     within PXB (P2C with NCCL_PXN_C2C): PXN keeps alltoall on the
//     receiver's rail. With Settings.CrossNicOff (NCCL_CROSS_NIC=0) that
//     NET is taken in any case.
//
// A plan without aligned graphs (a synthetic one) uses the local NETs.
func (m *Machine) netDevs(sa *model.System, ga *model.Node, sb *model.System, gb *model.Node, channel int) (neta, netb *model.Node, err error) {
	from, to := ga.GPU.Rank, gb.GPU.Rank
	if id := m.graphOf(from, to, channel); id >= 0 {
		neta, err = m.graphNet(sa, from, id, channel)
		if err != nil {
			return nil, nil, err
		}
		netb, err = m.graphNet(sb, to, id, channel)
		if err != nil {
			return nil, nil, err
		}
		if neta != nil && netb != nil {
			return neta, netb, nil
		}
	}
	if netb, err = sb.LocalNet(gb, channel); err != nil {
		return nil, nil, err
	}
	if neta, err = sa.LocalNet(ga, channel); err != nil {
		return nil, nil, err
	}
	if s := sa.Params; s.PXNDisable {
		return neta, netb, nil
	}
	// The GPU of our host with the peer's device index, and its NET.
	var peer *model.Node
	for _, g := range sa.Nodes[model.GPU] {
		if g.GPU.Dev == gb.GPU.Dev && model.SystemIDOf(g.ID) == model.SystemIDOf(ga.ID) {
			peer = g
			break
		}
	}
	if peer == nil {
		return neta, netb, nil
	}
	n, err := sa.LocalNet(peer, channel)
	if err != nil {
		return nil, nil, err
	}
	if m.settings.CrossNicOff {
		return n, netb, nil
	}
	lg, err := sa.LocalGPUOf(n)
	if err != nil {
		return nil, nil, err
	}
	pxnMax := model.PathPXB
	if sa.Params.PXNC2C {
		pxnMax = model.PathP2C
	}
	if lg != nil && lg.Path(ga).Type <= model.PathNVL && lg.Path(n).Type <= pxnMax {
		return n, netb, nil
	}
	return neta, netb, nil
}

// graphOf is the graph whose channel connects from to to on a channel: the
// ring when to is from's next on it, the tree when they are tree
// neighbours, -1 otherwise (a p2p connection) or without aligned graphs.
func (m *Machine) graphOf(from, to, channel int) model.GraphID {
	p := m.Plan
	if len(p.NodeAlignedGraphs) != len(m.Cluster.Nodes) || from >= len(p.Ranks) {
		return -1
	}
	rc := p.Ranks[from]
	if channel < len(rc.Ring) && rc.Ring[channel].Next == to {
		return model.GraphRing
	}
	if channel < len(rc.Tree) {
		t := rc.Tree[channel]
		if t.Up == to || t.Down[0] == to || t.Down[1] == to || t.Down[2] == to {
			return model.GraphTree
		}
	}
	return -1
}

// graphNet is the NET rank uses on a channel of graph id (nil when the
// graph has no NET there).
func (m *Machine) graphNet(s *model.System, rank int, id model.GraphID, channel int) (*model.Node, error) {
	g := m.Plan.NodeAlignedGraphs[m.rankNode[rank]][id]
	if g == nil || g.NChannels() == 0 {
		return nil, nil
	}
	ch := g.Channels[channel%g.NChannels()]
	idx := 1
	if len(ch.Intra) > 0 && ch.Intra[0] == rank {
		idx = 0
	}
	netID := ch.Inter[idx]
	if netID == model.NoNet {
		return nil, nil
	}
	for _, n := range s.Nodes[model.NET] {
		if n.ID == uint64(netID) {
			return n, nil
		}
	}
	return nil, fmt.Errorf("the %s graph's channel %d names NET id %#x, which rank %d's host lacks", g.Pattern, channel, netID, rank)
}
