package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// ComputeGraphs runs NCCL's init-time searches on one node's system, in
// NCCL's order: ring (1 to 32 channels), tree (as many channels as the
// ring), then CollNet chain and direct, then NVLS. Graphs that are not
// searched (CollNet or NVLS off) are model.EmptyGraph. As in NCCL, one
// search may leave bandwidth changes that the next one sees; the system is
// restored exactly when ComputeGraphs returns. The search reserves
// bandwidth on s while it runs: s must not be used concurrently.
func ComputeGraphs(s *model.System, opts SearchOptions) ([model.NumGraphs]*model.Graph, error) {
	var out [model.NumGraphs]*model.Graph
	for id := range out {
		out[id] = model.EmptyGraph(model.GraphID(id))
	}
	if err := checkSearchInput(s, opts); err != nil {
		return out, err
	}
	snap := snapshotBandwidths(s)
	defer snap.restore(s)
	c := newChanSearch(s, opts)

	ring := out[model.GraphRing]
	ring.MinChannels, ring.MaxChannels = 1, model.MaxChannels/2
	if err := c.compute(ring); err != nil {
		return out, fmt.Errorf("ring graph: %w", err)
	}
	tree := out[model.GraphTree]
	tree.MinChannels, tree.MaxChannels = ring.NChannels(), ring.NChannels()
	if err := c.compute(tree); err != nil {
		return out, fmt.Errorf("tree graph: %w", err)
	}
	if opts.CollNetEnable {
		chain := out[model.GraphCollNetChain]
		chain.MinChannels, chain.MaxChannels = ring.NChannels(), ring.NChannels()
		if err := c.compute(chain); err != nil {
			return out, fmt.Errorf("collnet chain graph: %w", err)
		}
		direct := out[model.GraphCollNetDirect]
		direct.MinChannels, direct.MaxChannels = 1, model.MaxChannels
		if err := c.compute(direct); err != nil {
			return out, fmt.Errorf("collnet direct graph: %w", err)
		}
	}
	if opts.NVLSEnable && NVLSCapable(s, opts.NVLSForce) {
		nvls := out[model.GraphNVLS]
		nvls.MinChannels, nvls.MaxChannels = 1, model.MaxChannels
		if err := c.compute(nvls); err != nil {
			return out, fmt.Errorf("nvls graph: %w", err)
		}
	}
	return out, nil
}

// ComputeGraph runs one search (ncclTopoCompute): g carries ID, Pattern,
// CollNet, MinChannels and MaxChannels in, and receives the result. The
// system is unchanged afterwards.
func ComputeGraph(s *model.System, g *model.Graph, opts SearchOptions) error {
	if g == nil {
		return fmt.Errorf("search: nil graph")
	}
	if err := checkSearchInput(s, opts); err != nil {
		return err
	}
	snap := snapshotBandwidths(s)
	defer snap.restore(s)
	if err := newChanSearch(s, opts).compute(g); err != nil {
		return fmt.Errorf("graph %d: %w", g.ID, err)
	}
	return nil
}

// checkSearchInput rejects what the search cannot work on.
func checkSearchInput(s *model.System, opts SearchOptions) error {
	if s == nil {
		return fmt.Errorf("search: nil system")
	}
	if len(s.Nodes[model.GPU]) == 0 {
		return fmt.Errorf("search: system has no GPU")
	}
	if len(s.Nodes[model.CPU]) == 0 {
		return fmt.Errorf("search: system has no CPU")
	}
	if opts.CrossNic < 0 || opts.CrossNic > 2 {
		return fmt.Errorf("search: cross NIC setting %d out of range 0..2", opts.CrossNic)
	}
	return nil
}

// bandwidthSnapshot holds every link and NET bandwidth of a system.
type bandwidthSnapshot struct {
	links []float32
	nets  []float32
}

func snapshotBandwidths(s *model.System) bandwidthSnapshot {
	var b bandwidthSnapshot
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			for _, l := range n.Links {
				b.links = append(b.links, l.BW)
			}
		}
	}
	for _, n := range s.Nodes[model.NET] {
		b.nets = append(b.nets, n.NET.BW)
	}
	return b
}

func (b bandwidthSnapshot) restore(s *model.System) {
	i := 0
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			for _, l := range n.Links {
				l.BW = b.links[i]
				i++
			}
		}
	}
	for j, n := range s.Nodes[model.NET] {
		n.NET.BW = b.nets[j]
	}
}

// Per-channel bandwidths the search tries, from fastest down, by GPU
// generation; intra-node systems and systems with a network use different
// lists. The sm100 lists are 2.28.9's (later releases add 45 intra-node and
// 80 and 86 inter-node).
var (
	speedsIntra      = []float32{40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0}
	speedsInter      = []float32{48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0, 2.4, 1.2, 0.24, 0.12}
	speedsIntraSM90  = []float32{60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0}
	speedsInterSM90  = []float32{48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12}
	speedsIntraSM100 = []float32{90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0}
	speedsInterSM100 = []float32{96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2, 0.24, 0.12}
)

// speedArray picks the bandwidth list for a system.
func speedArray(inter bool, ccMin int) []float32 {
	switch {
	case !inter && ccMin >= 100:
		return speedsIntraSM100
	case !inter && ccMin >= 90:
		return speedsIntraSM90
	case !inter:
		return speedsIntra
	case ccMin >= 100:
		return speedsInterSM100
	case ccMin >= 90:
		return speedsInterSM90
	}
	return speedsInter
}

// minCompCap is the lowest compute capability of the system's GPUs.
func minCompCap(s *model.System) int {
	cc := s.Nodes[model.GPU][0].GPU.SM
	for _, g := range s.Nodes[model.GPU] {
		cc = min(cc, g.GPU.SM)
	}
	return cc
}

// gpuPathTypeRange returns the best and worst path types from any GPU to
// the nodes of type t, a GPU's path to itself excepted
// (ncclTopoGetGpuMinPath/MaxPath).
func gpuPathTypeRange(s *model.System, t model.NodeType) (lo, hi model.PathType) {
	lo, hi = model.PathSYS, model.PathLOC
	for i, g := range s.Nodes[model.GPU] {
		paths := g.Paths[t]
		if paths == nil {
			continue
		}
		for j := range s.Nodes[t] {
			if t == model.GPU && i == j {
				continue
			}
			typ := g.PathTo(t, j).Type
			lo, hi = min(lo, typ), max(hi, typ)
		}
	}
	return lo, hi
}

// splitNVLink reports two NVLink islands of more than one GPU each
// (ncclTopoSplitNvLink).
func splitNVLink(s *model.System) bool {
	gpus := s.Nodes[model.GPU]
	domain := make([]int, len(gpus))
	for g := range gpus {
		domain[g] = g
	}
	for g, gpu := range gpus {
		for p := g + 1; p < len(gpus); p++ {
			if gpu.PathTo(model.GPU, p).Type == model.PathNVL {
				domain[p] = domain[g]
			}
		}
	}
	count := make([]int, len(gpus))
	for g := range gpus {
		count[domain[g]]++
	}
	islands := 0
	for _, n := range count {
		if n > 1 {
			islands++
		}
	}
	return islands == 2
}
