package model

import "fmt"

// NetDevs picks the NET devices a NET connection from rank from (on
// cluster node na) to rank to (on node nb) leaves and enters through on a
// channel, as NCCL 2.28.9's ncclTopoGetNetDev (src/graph/search.cc) does
// for the sender (net.cc's sendSetup) and the receiver (recvSetup):
//
//   - a ring or tree connection honours the graph: the channel's entry NET
//     (graph inter[2c]) for the rank that starts the channel's chain on its
//     node, the exit NET (inter[2c+1]) for the others, so NCCL_CROSS_NIC and
//     the search's NIC choice decide which rail a ring crosses;
//   - a p2p connection (no graph): the receiver uses its local NET; the
//     sender starts from its own and, NCCL_P2P_PXN_LEVEL being 2 by
//     default, takes the NET local to the GPU of its host with the peer's
//     device index when that GPU is NVLinked to it and reaches the NET
//     within PXB (P2C with NCCL_PXN_C2C): PXN keeps an AlltoAll on the
//     receiver's rail. crossNicOff (NCCL_CROSS_NIC=0) takes that NET in any
//     case, PXN or not; otherwise NCCL_PXN_DISABLE keeps the sender's own.
//
// A plan without aligned graphs (a synthetic one) uses the local NETs.
func (cl *Cluster) NetDevs(p *Plan, na, from, nb, to, channel int, crossNicOff bool) (send, recv *Node, err error) {
	if na < 0 || na >= len(cl.Nodes) || nb < 0 || nb >= len(cl.Nodes) {
		return nil, nil, fmt.Errorf("connection %d->%d: node %d or %d outside the cluster's %d", from, to, na, nb, len(cl.Nodes))
	}
	sa, sb := cl.Nodes[na].System, cl.Nodes[nb].System
	ga, gb := sa.GPUByRank(from), sb.GPUByRank(to)
	if ga == nil || gb == nil {
		return nil, nil, fmt.Errorf("connection %d->%d: a rank has no GPU on its node", from, to)
	}
	if id := graphOfConn(p, len(cl.Nodes), from, to, channel); id >= 0 {
		send, err = graphNet(p, sa, na, from, id, channel)
		if err != nil {
			return nil, nil, err
		}
		recv, err = graphNet(p, sb, nb, to, id, channel)
		if err != nil {
			return nil, nil, err
		}
		if send != nil && recv != nil {
			return send, recv, nil
		}
	}
	if recv, err = sb.LocalNet(gb, channel); err != nil {
		return nil, nil, err
	}
	if send, err = sa.LocalNet(ga, channel); err != nil {
		return nil, nil, err
	}
	if sa.Params.PXNDisable && !crossNicOff {
		return send, recv, nil
	}
	// The GPU of our host with the peer's device index, and its NET.
	var peer *Node
	for _, g := range sa.Nodes[GPU] {
		if g.GPU.Dev == gb.GPU.Dev && SystemIDOf(g.ID) == SystemIDOf(ga.ID) {
			peer = g
			break
		}
	}
	if peer == nil {
		return send, recv, nil
	}
	n, err := sa.LocalNet(peer, channel)
	if err != nil {
		return nil, nil, err
	}
	if crossNicOff {
		return n, recv, nil
	}
	if sa.Params.PXNDisable {
		return send, recv, nil
	}
	lg, err := sa.localGPU(n)
	if err != nil {
		return nil, nil, err
	}
	pxnMax := PathPXB
	if sa.Params.PXNC2C {
		pxnMax = PathP2C
	}
	if lg != nil && lg.Path(ga).Type <= PathNVL && lg.Path(n).Type <= pxnMax {
		return n, recv, nil
	}
	return send, recv, nil
}

// graphOfConn is the graph whose channel connects from to to on a channel:
// the ring when to is from's next on it, the tree when they are tree
// neighbours, -1 otherwise (a p2p connection) or without aligned graphs.
func graphOfConn(p *Plan, nodes, from, to, channel int) GraphID {
	if p == nil || len(p.NodeAlignedGraphs) != nodes || from >= len(p.Ranks) {
		return -1
	}
	rc := p.Ranks[from]
	if channel < len(rc.Ring) && rc.Ring[channel].Next == to {
		return GraphRing
	}
	if channel < len(rc.Tree) {
		t := rc.Tree[channel]
		if t.Up == to || t.Down[0] == to || t.Down[1] == to || t.Down[2] == to {
			return GraphTree
		}
	}
	return -1
}

// graphNet is the NET rank (on cluster node n) uses on a channel of graph
// id, nil when the graph has no NET there.
func graphNet(p *Plan, s *System, n, rank int, id GraphID, channel int) (*Node, error) {
	g := p.NodeAlignedGraphs[n][id]
	if g == nil || g.NChannels() == 0 {
		return nil, nil
	}
	ch := g.Channels[channel%g.NChannels()]
	idx := 1
	if len(ch.Intra) > 0 && ch.Intra[0] == rank {
		idx = 0
	}
	netID := ch.Inter[idx]
	if netID == NoNet {
		return nil, nil
	}
	for _, nd := range s.Nodes[NET] {
		if nd.ID == uint64(netID) {
			return nd, nil
		}
	}
	return nil, fmt.Errorf("the %s graph's channel %d names NET id %#x, which rank %d's host lacks", g.Pattern, channel, netID, rank)
}
