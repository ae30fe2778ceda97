package search

import (
	"github.com/twinccl/twinccl/model"
)

// gpuScore ranks a candidate next GPU (struct ncclGpuScore). Bandwidths
// are truncated to integers as in NCCL.
type gpuScore struct {
	g          int
	startIndex int
	intraNhops int
	intraBW    int
	interNhops int
	interPciBW int
	interBW    int
}

// compareScores orders candidates, most important key first
// (cmpScore); negative means a comes first.
func compareScores(a, b *gpuScore) int {
	if d := b.interBW - a.interBW; d != 0 {
		return d
	}
	if d := b.interPciBW - a.interPciBW; d != 0 {
		return d
	}
	if d := a.interNhops - b.interNhops; d != 0 {
		return d
	}
	if d := b.intraBW - a.intraBW; d != 0 {
		return d
	}
	if d := a.intraNhops - b.intraNhops; d != 0 {
		return d
	}
	return a.startIndex - b.startIndex
}

// gpuPciBW is the bandwidth of a GPU's PCI link, the smaller of both
// directions, truncated (gpuPciBw); -1 without a PCI link.
func gpuPciBW(gpu *model.Node) int {
	for _, up := range gpu.Links {
		if up.Type != model.LinkPCI {
			continue
		}
		for _, down := range up.Remote.Links {
			if down.Remote == gpu {
				return int(min(up.BW, down.BW))
			}
		}
	}
	return -1
}

// nextGPUs appends to next the GPUs to try after gi, best first
// (ncclTopoSearchNextGpuSort). sortNet is 1 when the next GPU returns to
// the NET (its NET path then matters most), -1 when a later GPU does, 0
// for intra-node channels.
func (c *chanSearch) nextGPUs(g *chanGraph, gi, sortNet int, next []int) ([]int, error) {
	if c.nvs != nil {
		// Only the index neighbours survive, in an order that does not
		// depend on the scores: skip the sort.
		return c.neighbourGPUs(g, gi, next), nil
	}
	flag := uint64(1) << uint(g.nChannels)
	paths := c.gpus[gi].Paths[model.GPU]
	var netPaths []model.Path
	if sortNet != 0 {
		net, err := c.netOfID(g.inter[g.nChannels*2])
		if err != nil {
			return next, err
		}
		netPaths = net.Paths[model.GPU]
	}
	scores := c.scores[:0]
	for i := 1; i < c.ngpus; i++ {
		o := (gi + i) % c.ngpus
		if o >= len(paths) || paths[o].Count() == 0 || c.used[o]&flag != 0 {
			continue
		}
		s := gpuScore{g: o, startIndex: i, intraNhops: paths[o].Count(), intraBW: int(paths[o].BW)}
		if netPaths != nil {
			s.interNhops = netPaths[o].Count()
			s.interPciBW = gpuPciBW(c.gpus[o])
			s.interBW = int(netPaths[o].BW)
		}
		scores = append(scores, s)
	}
	sortScores(scores)
	if sortNet == -1 && sameIntraScores(scores) {
		for i := len(scores) - 1; i >= 0; i-- {
			next = append(next, scores[i].g)
		}
	} else {
		for i := range scores {
			next = append(next, scores[i].g)
		}
	}
	c.scores = scores
	return next, nil
}

// candidate reports whether GPU o may follow gi in the channel being
// built: reachable and not in it yet.
func (c *chanSearch) candidate(g *chanGraph, gi, o int) bool {
	paths := c.gpus[gi].Paths[model.GPU]
	return o != gi && o < len(paths) && paths[o].Count() != 0 && c.used[o]&(uint64(1)<<uint(g.nChannels)) == 0
}

// neighbourGPUs appends the candidates NCCL keeps on NVSwitch systems:
// only the index neighbours of gi, which talk to few peers. NCCL moves
// each preferred neighbour to the front of the sorted list in turn (for
// rings the next then the previous GPU, for split and balanced trees the
// previous then the next, otherwise the next) and keeps as many as it
// found, so the last one moved comes first.
func (c *chanSearch) neighbourGPUs(g *chanGraph, gi int, next []int) []int {
	prev, nxt := (gi-1+c.ngpus)%c.ngpus, (gi+1)%c.ngpus
	var buf [2]int
	first := buf[:0]
	switch g.pattern {
	case model.PatternRing:
		first = append(first, nxt, prev)
	case model.PatternSplitTree, model.PatternBalancedTree:
		first = append(first, prev, nxt)
	default:
		first = append(first, nxt)
	}
	if nxt == prev && len(first) == 2 {
		first = first[:1]
	}
	for i := len(first) - 1; i >= 0; i-- {
		if c.candidate(g, gi, first[i]) {
			next = append(next, first[i])
		}
	}
	return next
}

// sortScores sorts candidates with compareScores (a total order, so any
// sort gives NCCL's qsort result).
func sortScores(s []gpuScore) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && compareScores(&s[j], &s[j-1]) < 0; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// sameIntraScores reports whether every candidate has the same intra-node
// bandwidth and hop count (cmpIntraScores == 0).
func sameIntraScores(s []gpuScore) bool {
	for i := 1; i < len(s); i++ {
		if s[i].intraBW != s[0].intraBW || s[i].intraNhops != s[0].intraNhops {
			return false
		}
	}
	return true
}
