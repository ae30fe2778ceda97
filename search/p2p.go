package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// connectP2PChannels is NCCL 2.28.9's ncclTopoComputeP2pChannels: the
// number of p2p channels (p2pnChannels, the same on every rank) and the
// channels per peer of the ranks of cluster node cnode (each rank computes
// it over all GPUs of its own system, so every rank of a node gets the
// same value). nChannels is the communicator's final channel count.
func connectP2PChannels(c *model.Cluster, cnode, nChannels int, opts ConnectOptions) (p2pn, perPeer int, err error) {
	p2pn = min(nChannels, opts.MaxP2PNChannels)
	p2pn = max(p2pn, opts.MinP2PNChannels)

	sys := c.Nodes[cnode].System
	minChannels := p2pn
	byRank := map[int]*model.Node{}
	for _, g := range sys.Nodes[model.GPU] {
		byRank[g.GPU.Rank] = g
	}
	for _, g := range sys.Nodes[model.GPU] {
		for r := 0; r < c.NRanks; r++ {
			n := p2pPeerChannels(sys, g, byRank[r], c.NRanks, p2pn, opts)
			if n >= 0 {
				minChannels = min(minChannels, n)
			}
		}
	}
	// Powers of two, as the p2p channel mapping requires.
	perPeer = p2pPow2Up(minChannels)
	p2pn = p2pPow2Up(p2pn)
	p2pn = min(p2pn, p2pPow2Down(max(1, maxChannelsForArgsBytes(opts.WorkArgsBytes))))
	perPeer = min(perPeer, p2pn)
	if perPeer < 1 || p2pn < 1 {
		return 0, 0, fmt.Errorf("p2p channels: %d channels, %d per peer", p2pn, perPeer)
	}
	return p2pn, perPeer, nil
}

// p2pPeerChannels is ncclTopoGetNchannels: the channels GPU g would use
// toward a peer. peer is the peer's GPU when it is in g's system (nil for
// a peer reached through the network). It returns -1 for g itself. p2pn
// is p2pnChannels before rounding.
func p2pPeerChannels(sys *model.System, g, peer *model.Node, nRanks, p2pn int, opts ConnectOptions) int {
	if peer != nil {
		if peer == g {
			return -1
		}
		path := peer.Path(g)
		if path.Type == model.PathNVL {
			nvlBW := model.NVLinkBW(g.GPU.SM)
			return 2 * max(1, int(path.BW/nvlBW))
		}
		return 2
	}
	if opts.NChannelsPerNetPeer > 0 {
		return opts.NChannelsPerNetPeer
	}
	// Two channels per peer, fewer when that would put more than four
	// operations per channel, but enough to drive the NICs.
	nChannelsMax := 2
	for nChannelsMax*nRanks > p2pn*4 && nChannelsMax > 1 {
		nChannelsMax /= 2
	}
	return max(p2pNetCountByBW(sys, g), nChannelsMax)
}

// p2pNetCountByBW is 2.28.9's getLocalNetCountByBw: how many of g's local
// NETs (ncclTopoGetLocal order) it takes for their bandwidth to reach the
// bandwidth of g's own link to a CPU. A GPU without a direct CPU link
// (behind a PCI switch) counts 0.
func p2pNetCountByBW(sys *model.System, g *model.Node) int {
	var gpuBW float32
	for _, l := range g.Links {
		if l.Remote.Type == model.CPU {
			gpuBW = l.BW
		}
	}
	count := 0
	var total float32
	for _, n := range p2pLocalNets(sys, g) {
		if total >= gpuBW {
			break
		}
		total += g.Path(n).BW
		count++
	}
	return count
}

// p2pLocalNets is ncclTopoGetLocal(GPU g -> NET): the NETs of highest path
// bandwidth, ties broken by lowest path type, in index order. Like NCCL it
// starts from bandwidth 0 and type DIS, so when no NET is reachable every
// NET counts.
func p2pLocalNets(sys *model.System, g *model.Node) []*model.Node {
	if g.Paths[model.NET] == nil {
		return nil
	}
	minType, maxBW := model.PathDIS, float32(0)
	var out []*model.Node
	for i, n := range sys.Nodes[model.NET] {
		p := g.PathTo(model.NET, i)
		if p.BW > maxBW || (p.BW == maxBW && p.Type < minType) {
			maxBW, minType = p.BW, p.Type
			out = out[:0]
		}
		if p.BW == maxBW && p.Type == minType {
			out = append(out, n)
		}
	}
	return out
}

// p2pPow2Up is NCCL's pow2Up: the smallest power of two at or above x (1
// for x <= 1).
func p2pPow2Up(x int) int {
	y := 1
	for y < x {
		y <<= 1
	}
	return y
}

// p2pPow2Down is NCCL's pow2Down: the largest power of two at or below x
// (x >= 1).
func p2pPow2Down(x int) int {
	y := 1
	for y*2 <= x {
		y <<= 1
	}
	return y
}
