package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// netCache memoizes the NET choices of a search. They depend only on the
// system's paths, which the search does not change (it changes link and
// NET bandwidths only).
type netCache struct {
	ngpus    int
	selected [][]int // by (typeInter+1)*(ngpus+1) + gpu+1
	done     []bool
	closest  [][]int // GPUs closest to each NET
	closestT []model.PathType
	haveNet  []bool
}

func (nc *netCache) init(ngpus int) {
	nc.ngpus = ngpus
	n := (int(model.PathDIS) + 2) * (ngpus + 1)
	nc.selected = make([][]int, n)
	nc.done = make([]bool, n)
}

// selectNets returns the indices of the NETs to try, in order
// (ncclTopoSelectNets): first the NETs the GPUs prefer per channel
// (ncclTopoGetLocalNet), then any NET whose path type from a GPU is at most
// typeInter, by increasing type. gpu -1 considers every GPU.
func (c *chanSearch) selectNets(typeInter model.PathType, gpu int) ([]int, error) {
	t := max(int(typeInter), -1)
	t = min(t, int(model.PathDIS))
	key := (t+1)*(c.ngpus+1) + gpu + 1
	if c.cache.done[key] {
		return c.cache.selected[key], nil
	}
	var nets []int
	var err error
	if len(c.sys.HostHashes) > 1 && c.opts.MNNVLScatterNets {
		nets, err = c.preferredNetsGPUFirst(gpu, nets)
	} else {
		nets, err = c.preferredNetsChannelFirst(gpu, nets)
	}
	if err != nil {
		return nil, err
	}
	for pt := 0; pt <= t; pt++ {
		for g, node := range c.gpus {
			if gpu != -1 && gpu != g {
				continue
			}
			for n := 0; n < len(c.nets) && n < model.MaxChannels; n++ {
				if node.PathTo(model.NET, n).Type == model.PathType(pt) {
					nets = appendNew(nets, n)
				}
			}
		}
	}
	c.cache.selected[key], c.cache.done[key] = nets, true
	return nets, nil
}

// appendNew appends n to list unless it is there already.
func appendNew(list []int, n int) []int {
	for _, x := range list {
		if x == n {
			return list
		}
	}
	return append(list, n)
}

// localNetIndex is the index of the NET GPU gi uses for a channel.
func (c *chanSearch) localNetIndex(gi, channel int) (int, error) {
	net, err := c.sys.LocalNet(c.gpus[gi], channel)
	if err != nil {
		return -1, fmt.Errorf("selecting NETs: %w", err)
	}
	return net.Index, nil
}

// preferredNetsChannelFirst appends, GPU by GPU, the NETs each GPU uses on
// successive channels until its choice repeats
// (ncclTopoPrefNetsChannelFirst).
func (c *chanSearch) preferredNetsChannelFirst(gpu int, nets []int) ([]int, error) {
	for g := range c.gpus {
		if gpu != -1 && gpu != g {
			continue
		}
		var local []int
		for ch := 0; ch < model.MaxChannels; ch++ {
			n, err := c.localNetIndex(g, ch)
			if err != nil {
				return nil, err
			}
			if len(local) > 0 && n == local[0] {
				break
			}
			local = append(local, n)
		}
		for _, n := range local {
			nets = appendNew(nets, n)
		}
	}
	return nets, nil
}

// preferredNetsGPUFirst appends, channel by channel, the NET of every GPU
// until each GPU's choice repeats (ncclTopoPrefNetsGpuFirst, used on
// multi-host NVLink systems).
func (c *chanSearch) preferredNetsGPUFirst(gpu int, nets []int) ([]int, error) {
	ids := []int{gpu}
	if gpu == -1 {
		ids = make([]int, c.ngpus)
		for g := range ids {
			ids[g] = g
		}
	}
	first := make([]int, len(ids))
	remaining := len(ids)
	for ch := 0; ch < model.MaxChannels && remaining > 0; ch++ {
		for i, g := range ids {
			if g == -1 {
				continue
			}
			n, err := c.localNetIndex(g, ch)
			if err != nil {
				return nil, err
			}
			if ch == 0 {
				first[i] = n
			} else if first[i] == n {
				ids[i] = -1
				remaining--
				continue
			}
			nets = appendNew(nets, n)
		}
	}
	return nets, nil
}

// closestGPUs returns the GPUs NET n reaches with the best bandwidth, then
// the best path type, and that type (ncclTopoGetLocal from a NET); DIS
// when the NET reaches no GPU.
func (nc *netCache) closestGPUs(c *chanSearch, n int) ([]int, model.PathType) {
	if nc.haveNet == nil {
		nc.closest = make([][]int, len(c.nets))
		nc.closestT = make([]model.PathType, len(c.nets))
		nc.haveNet = make([]bool, len(c.nets))
	}
	if !nc.haveNet[n] {
		nc.closest[n], nc.closestT[n] = bestLocal(c.nets[n], model.GPU, len(c.gpus))
		nc.haveNet[n] = true
	}
	return nc.closest[n], nc.closestT[n]
}

// bestLocal lists the nodes of type t (count of them) that n reaches with
// the highest bandwidth, ties going to the lowest path type.
func bestLocal(n *model.Node, t model.NodeType, count int) ([]int, model.PathType) {
	minType, maxBW := model.PathDIS, float32(0)
	var out []int
	for i := 0; i < count; i++ {
		p := n.PathTo(t, i)
		if p.BW > maxBW || (p.BW == maxBW && p.Type < minType) {
			maxBW, minType = p.BW, p.Type
			out = out[:0]
		}
		if p.BW == maxBW && p.Type == minType {
			out = append(out, i)
		}
	}
	return out, minType
}

// checkNet reports whether a channel that entered through start may leave
// through NET n at this step (ncclTopoSearchCheckNet). Trees use the same
// NET both ways; crossNic 2 rings mirror channel pairs; without crossNic
// the exit must be a port of the entry NIC; a balanced tree's second GPU
// uses the NET chosen by the first.
func (c *chanSearch) checkNet(g *chanGraph, start *model.Node, n, step int) bool {
	net := c.nets[n]
	if g.pattern == model.PatternTree && net != start {
		return false
	}
	if g.pattern == model.PatternRing && g.crossNic == 2 {
		if g.nChannels&1 == 1 && int64(net.ID) != g.inter[(g.nChannels-1)*2] {
			return false
		}
	} else if g.crossNic == 0 && (net.NET.Asic != start.NET.Asic || net.NET.Port != start.NET.Port) {
		return false
	}
	if g.pattern == model.PatternBalancedTree && step != 0 && int64(net.ID) != g.inter[g.nChannels*2+1] {
		return false
	}
	return true
}
