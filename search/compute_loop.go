package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// computeState is what ncclTopoCompute keeps across the attempts of one
// search.
type computeState struct {
	graph, tmp                 *chanGraph
	ccMin                      int
	crossNic                   int
	trySame                    int
	minTypeIntra, maxTypeIntra model.PathType
	minTypeInter, maxTypeInter model.PathType
	amdCPU                     bool
	speeds                     []float32
	speedIndex                 int
	globalBudget               int64
}

// compute is ncclTopoCompute on model.Graph g.
func (c *chanSearch) compute(g *model.Graph) error {
	st, err := c.setup(g)
	if err != nil {
		return err
	}
	if st != nil {
		if err := c.run(st); err != nil {
			return err
		}
		if err := c.fallback(st.graph); err != nil {
			return err
		}
		c.export(st.graph, g)
	}
	return nil
}

// setup initialises the graph and the search bounds. It returns nil when
// there is nothing to search (NVLS without NVSwitch or before sm90), after
// filling g.
func (c *chanSearch) setup(g *model.Graph) (*computeState, error) {
	s := c.sys
	graph := newChanGraph(c.ngpus)
	graph.id, graph.pattern, graph.collNet = g.ID, g.Pattern, g.CollNet
	graph.minChannels, graph.maxChannels = g.MinChannels, g.MaxChannels
	if graph.maxChannels > model.MaxChannels || graph.minChannels < 0 {
		return nil, fmt.Errorf("channel bounds %d..%d outside 0..%d", graph.minChannels, graph.maxChannels, model.MaxChannels)
	}
	st := &computeState{graph: graph, ccMin: minCompCap(s), globalBudget: globalSearchBudget}
	p := graph.pattern
	if len(c.nets) > 1 && (p == model.PatternRing || p == model.PatternBalancedTree || p == model.PatternSplitTree) {
		st.crossNic = c.opts.CrossNic
	}
	if st.crossNic == 1 {
		graph.crossNic = 1
	}
	st.minTypeIntra, st.maxTypeIntra = model.PathLOC, model.PathSYS
	st.minTypeInter, st.maxTypeInter = model.PathPIX, model.PathSYS
	if c.ngpus > 1 {
		st.minTypeIntra, st.maxTypeIntra = gpuPathTypeRange(s, model.GPU)
	}
	if c.inter {
		st.minTypeInter, st.maxTypeInter = gpuPathTypeRange(s, model.NET)
		st.maxTypeIntra = st.maxTypeInter
	}
	graph.typeIntra, graph.typeInter = st.minTypeIntra, st.minTypeInter
	st.trySame = 1
	if p == model.PatternNVLS {
		st.trySame = 0
	}
	graph.sameChannels = st.trySame
	cpu := s.Nodes[model.CPU][0].CPU
	st.amdCPU = cpu.Arch == model.CPUArchX86 && cpu.Vendor == model.CPUVendorAMD

	if p == model.PatternNVLS && (c.nvs == nil || st.ccMin < 90) {
		c.export(graph, g)
		return nil, nil
	}
	if p == model.PatternNVLS {
		graph.maxChannels = min(32, c.ngpus) // NCCL_MAX_NVLS_ARITY
	}
	if p == model.PatternCollNetDirect {
		graph.maxChannels = min(8, c.ngpus) // NCCL_MAX_DIRECT_ARITY+1
	}
	if c.ngpus == 1 && p != model.PatternRing {
		graph.pattern = model.PatternTree
	}
	if !c.inter && graph.pattern == model.PatternNVLS {
		// Intra-node NVLS pulls evenly from all GPUs.
		graph.minChannels = graph.maxChannels
	}
	if graph.pattern == model.PatternRing && splitNVLink(s) && graph.maxChannels >= 2 && graph.minChannels == 1 {
		// Trees need two channels across the islands, and as many as rings.
		graph.minChannels = 2
	}
	st.tmp = newChanGraph(c.ngpus)
	st.tmp.copyFrom(graph)

	st.speeds = speedArray(c.inter, st.ccMin)
	totalBW := s.TotalBW
	if c.ngpus > 1 && graph.pattern != model.PatternRing {
		totalBW = float32(float64(totalBW) * (float64(c.ngpus) / float64(c.ngpus-1)))
	}
	last := len(st.speeds) - 1
	for (st.speeds[st.speedIndex] > s.MaxBW || st.speeds[st.speedIndex]*float32(graph.minChannels) > totalBW) && st.speedIndex < last {
		st.speedIndex++
	}
	st.tmp.bwIntra, st.tmp.bwInter = st.speeds[st.speedIndex], st.speeds[st.speedIndex]
	return st, nil
}

// attemptBudget is the budget of one search attempt.
func attemptBudget(tmp *chanGraph) int {
	switch {
	case tmp.sameChannels != 0:
		return sameChannelsSearchBudget
	case tmp.pattern == model.PatternTree:
		return treeSearchBudget
	}
	return searchBudget
}

// run is ncclTopoCompute's relaxation loop: search with the current
// constraints, relax them one at a time until a solution appears (pass 1),
// then try raising the bandwidth of that solution (pass 2).
func (c *chanSearch) run(st *computeState) error {
	graph, tmp := st.graph, st.tmp
	pass := 1
	for {
		budget := attemptBudget(tmp)
		tmp.nChannels = 0
		st.globalBudget -= int64(budget)
		c.best = graph
		if err := c.searchRec(tmp, &budget); err != nil {
			return err
		}
		done := budget == -1 || float32(graph.nChannels)*graph.bwInter >= c.sys.TotalBW
		if !done && pass == 1 && c.relax(st, budget) {
			continue
		}
		if pass == 1 {
			budget = -1
			dupChannels(graph, st.ccMin, c.ngpus)
			tmp.copyFrom(graph)
			st.speedIndex = 0
			for st.speeds[st.speedIndex] > graph.bwInter && st.speedIndex < len(st.speeds)-1 {
				st.speedIndex++
			}
			tmp.bwIntra, tmp.bwInter = st.speeds[st.speedIndex], st.speeds[st.speedIndex]
			tmp.minChannels = graph.nChannels
			pass = 2
		}
		if budget != 0 && st.speedIndex > 0 && c.raise(st) {
			continue
		}
		tmp.copyFrom(graph)
		return nil
	}
}

// relax loosens one constraint of pass 1 after an unsuccessful attempt, in
// NCCL's order: different channels, a simpler tree, worse intra-node then
// inter-node paths, crossing NICs, lower bandwidth. It reports whether to
// search again; otherwise pass 1 is over.
func (c *chanSearch) relax(st *computeState, budget int) bool {
	graph, tmp := st.graph, st.tmp
	if tmp.sameChannels == 1 && !(st.amdCPU && tmp.typeIntra == model.PathSYS) {
		tmp.sameChannels = 0
		return true
	}
	tmp.sameChannels = st.trySame
	if budget != -1 {
		st.globalBudget += int64(budget)
	} else {
		st.globalBudget = globalSearchBudget
	}
	if st.globalBudget < 0 && graph.nChannels > 0 {
		return false
	}
	if st.ccMin >= 90 && tmp.pattern == model.PatternBalancedTree {
		tmp.pattern = model.PatternTree
		return true
	}
	tmp.pattern = graph.pattern
	maxIntra := st.maxTypeIntra
	if c.inter {
		maxIntra = tmp.typeInter
	}
	if tmp.typeIntra < maxIntra && (graph.nChannels == 0 || tmp.typeIntra < graph.typeIntra) {
		tmp.typeIntra++
		if tmp.typeIntra < model.PathDIS {
			return true
		}
	}
	tmp.typeIntra = st.minTypeIntra
	if c.inter && tmp.typeInter < st.maxTypeInter &&
		(graph.nChannels == 0 || tmp.typeInter < graph.typeInter || tmp.typeInter < model.PathPXN) {
		tmp.typeInter++
		if tmp.typeInter < model.PathDIS {
			return true
		}
	}
	tmp.typeInter = st.minTypeInter
	if st.crossNic == 2 && tmp.crossNic == 0 &&
		(graph.pattern == model.PatternRing || graph.pattern == model.PatternBalancedTree) {
		tmp.crossNic = 2
		return true
	}
	tmp.crossNic = 0
	if st.crossNic == 1 {
		tmp.crossNic = 1
	}
	last := len(st.speeds) - 1
	if st.speedIndex < last && (graph.nChannels == 0 || float64(st.speeds[st.speedIndex+1]/graph.bwInter) > .49) {
		st.speedIndex++
		tmp.bwIntra, tmp.bwInter = st.speeds[st.speedIndex], st.speeds[st.speedIndex]
		return true
	}
	st.speedIndex = 0
	for st.speeds[st.speedIndex] > c.sys.MaxBW && st.speedIndex < last {
		st.speedIndex++
	}
	tmp.bwIntra, tmp.bwInter = st.speeds[st.speedIndex], st.speeds[st.speedIndex]
	return false
}

// raise sets up a pass-2 attempt at the next higher bandwidth, if the
// pattern allows one: rings raise both bandwidths, NVLS the inter-node one
// at a fixed channel count, trees the intra-node one while it stays below
// twice the inter-node one.
func (c *chanSearch) raise(st *computeState) bool {
	graph, tmp := st.graph, st.tmp
	switch {
	case graph.pattern == model.PatternRing:
		st.speedIndex--
		tmp.bwIntra, tmp.bwInter = st.speeds[st.speedIndex], st.speeds[st.speedIndex]
		return true
	case graph.pattern == model.PatternNVLS && tmp.bwInter == graph.bwInter && tmp.bwInter < tmp.bwIntra*2:
		tmp.minChannels, tmp.maxChannels = graph.nChannels, graph.nChannels
		st.speedIndex--
		tmp.bwInter = st.speeds[st.speedIndex]
		return true
	case tmp.bwIntra == graph.bwIntra && tmp.bwIntra < tmp.bwInter*2:
		st.speedIndex--
		tmp.bwIntra = st.speeds[st.speedIndex]
		return true
	}
	return false
}

// dupChannels doubles the channels of a fast enough solution, splitting
// its per-channel bandwidth (ncclTopoDupChannels).
func dupChannels(g *chanGraph, ccMin, ngpus int) {
	nc := g.nChannels
	if nc == 0 || g.pattern == model.PatternNVLS || g.bwIntra < 25 || (ccMin > 80 && g.bwIntra < 50 && nc > 4) {
		return
	}
	dup := min(nc*2, g.maxChannels)
	copy(g.intra[nc*ngpus:dup*ngpus], g.intra[:(dup-nc)*ngpus])
	copy(g.inter[nc*2:dup*2], g.inter[:(dup-nc)*2])
	div := float32((dup + nc - 1) / nc)
	g.bwIntra /= div
	g.bwInter /= div
	g.nChannels = dup
}

// fallback gives a graph without any channel one channel in GPU index
// order at a token bandwidth, leaving through the first NETs GPU 0 and the
// last GPU prefer (except CollNet and NVLS graphs).
func (c *chanSearch) fallback(graph *chanGraph) error {
	if graph.nChannels != 0 || graph.collNet || graph.pattern == model.PatternNVLS {
		return nil
	}
	for i, gpu := range c.gpus {
		graph.intra[i] = gpu.GPU.Rank
	}
	graph.bwIntra = 0.1
	graph.typeIntra = model.PathSYS
	for k, gi := range []int{0, c.ngpus - 1} {
		nets, err := c.selectNets(-1, gi)
		if err != nil {
			return fmt.Errorf("fallback channel: %w", err)
		}
		graph.inter[k] = model.NoNet
		if len(nets) > 0 {
			graph.inter[k] = int64(c.nets[nets[0]].ID)
		}
	}
	if graph.inter[0] != model.NoNet && graph.inter[1] != model.NoNet {
		graph.bwInter = 0.1
		graph.typeInter = model.PathSYS
	} else {
		graph.inter[0], graph.inter[1] = model.NoNet, model.NoNet
		graph.bwInter = 0
		graph.typeInter = model.PathDIS
	}
	graph.nChannels = 1
	return nil
}

// export writes the search result into g.
func (c *chanSearch) export(graph *chanGraph, g *model.Graph) {
	g.Pattern, g.CollNet = graph.pattern, graph.collNet
	g.MinChannels, g.MaxChannels = graph.minChannels, graph.maxChannels
	g.BWIntra, g.BWInter, g.LatencyInter = graph.bwIntra, graph.bwInter, graph.latencyInter
	g.TypeIntra, g.TypeInter = graph.typeIntra, graph.typeInter
	g.SameChannels, g.NHops, g.CrossNic = graph.sameChannels, graph.nHops, graph.crossNic
	g.Channels = make([]model.GraphChannel, graph.nChannels)
	for ch := range g.Channels {
		intra := make([]int, c.ngpus)
		copy(intra, graph.intra[ch*c.ngpus:])
		inter := [2]int64{model.NoNet, model.NoNet}
		if c.inter {
			inter = [2]int64{graph.inter[2*ch], graph.inter[2*ch+1]}
		}
		g.Channels[ch] = model.GraphChannel{Intra: intra, Inter: inter}
	}
}
