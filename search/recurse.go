package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// Search budgets, counted in calls of recGPU as NCCL counts them
// (NCCL_SEARCH_*TIMEOUT in search.cc). No wall clock is involved.
const (
	globalSearchBudget       = 1 << 19
	searchBudget             = 1 << 14
	treeSearchBudget         = 1 << 14
	sameChannelsSearchBudget = 1 << 8
	pciOrderSearchBudget     = 1 << 10
)

// Ways of choosing the next GPU of a channel (FORCED_ORDER_*).
const (
	orderFree   = 0 // sorted candidates (ncclTopoSearchNextGpuSort)
	orderPCI    = 1 // GPU index order
	orderReplay = 2 // the previous channel's order
)

// chanGraph is the working form of a graph during the search (struct
// ncclTopoGraph): channel i's ranks are intra[i*ngpus:(i+1)*ngpus], its
// entry and exit NET ids inter[2i] and inter[2i+1]. Copies between graphs
// copy everything, as NCCL's memcpy of the whole structure does.
type chanGraph struct {
	id           model.GraphID
	pattern      model.Pattern
	collNet      bool
	minChannels  int
	maxChannels  int
	nChannels    int
	bwIntra      float32
	bwInter      float32
	latencyInter float32
	typeIntra    model.PathType
	typeInter    model.PathType
	sameChannels int
	nHops        int
	crossNic     int
	intra        []int
	inter        []int64
}

func newChanGraph(ngpus int) *chanGraph {
	return &chanGraph{intra: make([]int, model.MaxChannels*ngpus), inter: make([]int64, model.MaxChannels*2)}
}

// copyFrom makes g an exact copy of o (both have the same array sizes).
func (g *chanGraph) copyFrom(o *chanGraph) {
	intra, inter := g.intra, g.inter
	*g = *o
	g.intra, g.inter = intra, inter
	copy(g.intra, o.intra)
	copy(g.inter, o.inter)
}

// isTreePattern reports the patterns whose paths must also be usable in
// the reverse direction.
func isTreePattern(p model.Pattern) bool {
	return p == model.PatternBalancedTree || p == model.PatternTree || p == model.PatternSplitTree
}

// chanSearch is one node's channel search: the system it reserves
// bandwidth on, per-GPU channel membership bits and the best graph found
// so far (NCCL's saveGraph).
type chanSearch struct {
	sys    *model.System
	opts   SearchOptions
	gpus   []*model.Node
	nets   []*model.Node
	nvs    *model.Node // the NVSwitch node, or nil
	ngpus  int
	inter  bool
	used   []uint64 // used[g] bit c: GPU g is in channel c of the graph being built
	best   *chanGraph
	scores []gpuScore // scratch for nextGPUs
	stack  []int      // candidate next GPUs of the nested nextStep calls
	cache  netCache
}

func newChanSearch(s *model.System, opts SearchOptions) *chanSearch {
	c := &chanSearch{
		sys: s, opts: opts, gpus: s.Nodes[model.GPU], nets: s.Nodes[model.NET],
		ngpus: len(s.Nodes[model.GPU]), inter: s.Inter,
	}
	if len(s.Nodes[model.NVS]) > 0 {
		c.nvs = s.Nodes[model.NVS][0]
	}
	c.used = make([]uint64, c.ngpus)
	c.scores = make([]gpuScore, 0, c.ngpus)
	c.stack = make([]int, 0, 4*c.ngpus)
	c.cache.init(c.ngpus)
	return c
}

// tryGPU moves the channel from `from` to GPU gi and continues the channel
// from there (ncclTopoSearchTryGpu).
func (c *chanSearch) tryGPU(g *chanGraph, step, backToNet, backToFirstRank, order int, budget *int, from *model.Node, gi int) error {
	flag := uint64(1) << uint(g.nChannels)
	gpu := c.gpus[gi]
	ok, err := c.followPath(g, from, gpu, 1)
	if err != nil || !ok {
		return err
	}
	c.used[gi] ^= flag
	err = c.recGPU(g, gi, step, backToNet, backToFirstRank, order, budget)
	c.used[gi] ^= flag
	if _, err2 := c.followPath(g, from, gpu, -1); err == nil {
		err = err2
	}
	return err
}

// better reports whether g should replace the best graph so far
// (ncclTopoCompareGraphs).
func (c *chanSearch) better(g, ref *chanGraph) bool {
	if g.nChannels < g.minChannels {
		return false
	}
	if g.pattern == model.PatternNVLS {
		return (g.nChannels > ref.nChannels && g.nChannels <= c.ngpus) ||
			float32(g.nChannels)*g.bwInter > float32(ref.nChannels)*ref.bwInter
	}
	cur, old := float32(g.nChannels)*g.bwIntra, float32(ref.nChannels)*ref.bwIntra
	if cur != old {
		return cur > old
	}
	return g.pattern == ref.pattern && g.crossNic == ref.crossNic && g.nHops < ref.nHops
}

// completeChannel counts the channel just built, keeps the graph if it is
// the best so far and searches for one more channel.
func (c *chanSearch) completeChannel(g *chanGraph, budget *int) error {
	g.nChannels++
	defer func() { g.nChannels-- }()
	if c.better(g, c.best) {
		c.best.copyFrom(g)
		if g.nChannels == g.maxChannels {
			*budget = -1
		}
	}
	if g.nChannels < g.maxChannels {
		return c.searchRec(g, budget)
	}
	return nil
}

// recGPU places GPU gi at position step of the current channel and
// continues the channel (ncclTopoSearchRecGpu). Each call spends one unit
// of budget.
func (c *chanSearch) recGPU(g *chanGraph, gi, step, backToNet, backToFirstRank, order int, budget *int) error {
	if *budget <= 0 {
		return nil
	}
	*budget--
	if step == c.ngpus {
		return c.completeChannel(g, budget)
	}
	g.intra[g.nChannels*c.ngpus+step] = c.gpus[gi].GPU.Rank
	switch {
	case step == backToNet:
		if c.inter {
			return c.backToNet(g, gi, step, backToFirstRank, order, budget)
		}
		return nil
	case g.pattern == model.PatternNVLS:
		return c.tryNVLS(g, gi, budget)
	case g.pattern == model.PatternCollNetDirect:
		return c.tryCollNetDirect(g, gi, budget)
	case step < c.ngpus-1:
		return c.nextStep(g, gi, step, backToNet, backToFirstRank, order, budget)
	case step == backToFirstRank:
		return c.closeRing(g, gi, step, backToNet, order, budget)
	default:
		return c.recGPU(g, gi, c.ngpus, -1, -1, order, budget)
	}
}

// nextStep tries the candidates for the GPU after gi in the channel. The
// candidates live on a stack shared by the nested calls.
func (c *chanSearch) nextStep(g *chanGraph, gi, step, backToNet, backToFirstRank, order int, budget *int) error {
	base := len(c.stack)
	defer func() { c.stack = c.stack[:base] }()
	switch order {
	case orderPCI:
		c.stack = append(c.stack, step+1)
	case orderReplay:
		r, err := c.replayGPU(g, step)
		if err != nil {
			return err
		}
		c.stack = append(c.stack, r)
	default:
		sortNet := -1
		if backToNet == -1 {
			sortNet = 0
		} else if backToNet == step+1 {
			sortNet = 1
		}
		var err error
		if c.stack, err = c.nextGPUs(g, gi, sortNet, c.stack); err != nil {
			return err
		}
	}
	top := len(c.stack)
	for i := base; i < top; i++ {
		if err := c.tryGPU(g, step+1, backToNet, backToFirstRank, order, budget, c.gpus[gi], c.stack[i]); err != nil {
			return err
		}
	}
	return nil
}

// closeRing goes from the last GPU of an intra-node ring back to its first.
func (c *chanSearch) closeRing(g *chanGraph, gi, step, backToNet, order int, budget *int) error {
	first, err := c.gpuOfRank(g.intra[g.nChannels*c.ngpus])
	if err != nil {
		return err
	}
	from, to := c.gpus[gi], c.gpus[first]
	ok, err := c.followPath(g, from, to, 1)
	if err != nil || !ok {
		return err
	}
	err = c.recGPU(g, first, step+1, backToNet, -1, order, budget)
	if _, err2 := c.followPath(g, from, to, -1); err == nil {
		err = err2
	}
	return err
}

// backToNet leaves the channel from GPU gi to a NET (the exit NET of a
// ring, the tree's return path), then continues the channel.
func (c *chanSearch) backToNet(g *chanGraph, gi, step, backToFirstRank, order int, budget *int) error {
	start, err := c.netOfID(g.inter[g.nChannels*2])
	if err != nil {
		return err
	}
	nets, err := c.selectNets(g.typeInter, gi)
	if err != nil {
		return err
	}
	gpu := c.gpus[gi]
	for _, n := range nets {
		if !c.checkNet(g, start, n, step) {
			continue
		}
		nextBackToNet := -1
		saved := g.bwInter
		if g.pattern == model.PatternBalancedTree {
			// The two first GPUs each carry half of the NET traffic.
			if step == 0 {
				nextBackToNet = 1
			}
			g.bwInter /= 2
		}
		net := c.nets[n]
		ok, err := c.followPath(g, gpu, net, 1)
		g.bwInter = saved
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		g.inter[g.nChannels*2+1] = int64(net.ID)
		err = c.recGPU(g, gi, step, nextBackToNet, backToFirstRank, order, budget)
		if g.pattern == model.PatternBalancedTree {
			g.bwInter /= 2
		}
		_, err2 := c.followPath(g, gpu, net, -1)
		g.bwInter = saved
		if err != nil {
			return err
		}
		if err2 != nil {
			return err2
		}
	}
	return nil
}

// tryNVLS checks that every GPU can exchange the NVLS traffic with the
// NVSwitch when GPU gi is the head (twice the traffic for the head), and
// completes the channel if so (ncclTopoSearchTryNvls).
func (c *chanSearch) tryNVLS(g *chanGraph, gi int, budget *int) error {
	mult := func(d int) float32 {
		if d == gi {
			return 2
		}
		return 1
	}
	var firstErr error
	keep := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	d0, ok := 0, false
	for {
		var err error
		ok, err = c.followPath(g, c.nvs, c.gpus[d0], mult(d0))
		keep(err)
		d0++
		if !ok || d0 >= c.ngpus || firstErr != nil {
			break
		}
	}
	if !ok {
		d0--
	} else {
		d1 := 0
		for {
			var err error
			ok, err = c.followPath(g, c.gpus[d1], c.nvs, mult(d1))
			keep(err)
			d1++
			if !ok || d1 >= c.ngpus || firstErr != nil {
				break
			}
		}
		if !ok {
			d1--
		} else if firstErr == nil {
			keep(c.recGPU(g, -1, c.ngpus, -1, -1, orderFree, budget))
		}
		for d1 > 0 {
			d1--
			_, err := c.followPath(g, c.gpus[d1], c.nvs, -mult(d1))
			keep(err)
		}
	}
	for d0 > 0 {
		d0--
		_, err := c.followPath(g, c.nvs, c.gpus[d0], -mult(d0))
		keep(err)
	}
	return firstErr
}

// tryCollNetDirect checks that head gi can exchange a share of the
// traffic with every GPU in both directions, and if so completes the
// channel with the head first and the other ranks in index order
// (ncclTopoSearchTryCollnetDirect).
func (c *chanSearch) tryCollNetDirect(g *chanGraph, gi int, budget *int) error {
	mul := float32(1.0 / float64(float32(c.ngpus-1)))
	head := c.gpus[gi]
	var firstErr error
	keep := func(err error) {
		if firstErr == nil {
			firstErr = err
		}
	}
	fwd, ok := 0, false
	for {
		var err error
		ok, err = c.followPath(g, head, c.gpus[fwd], mul)
		keep(err)
		if !ok || firstErr != nil {
			break
		}
		if fwd++; fwd >= c.ngpus {
			break
		}
	}
	if ok && firstErr == nil {
		bwd := 0
		for {
			var err error
			ok, err = c.followPath(g, c.gpus[bwd], head, mul)
			keep(err)
			if !ok || firstErr != nil {
				break
			}
			if bwd++; bwd >= c.ngpus {
				break
			}
		}
		if ok && firstErr == nil {
			step := 1
			for i, gpu := range c.gpus {
				if i != gi {
					g.intra[g.nChannels*c.ngpus+step] = gpu.GPU.Rank
					step++
				}
			}
			keep(c.recGPU(g, -1, c.ngpus, -1, -1, orderFree, budget))
		}
		for bwd > 0 {
			bwd--
			_, err := c.followPath(g, c.gpus[bwd], head, -mul)
			keep(err)
		}
	}
	for fwd > 0 {
		fwd--
		_, err := c.followPath(g, head, c.gpus[fwd], -mul)
		keep(err)
	}
	return firstErr
}

// recNet starts a new channel from a NET (ncclTopoSearchRecNet): NETs are
// tried in selection order, rotated by the channel index, with the
// channel's bandwidth taken from every port of the same NIC.
func (c *chanSearch) recNet(g *chanGraph, backToNet, backToFirstRank int, budget *int) error {
	// NCCL holds the bandwidth in an int here: fractional speeds truncate.
	bw := float32(int(g.bwInter))
	nets, err := c.selectNets(g.typeInter, -1)
	if err != nil {
		return err
	}
	headsOnly := g.pattern == model.PatternNVLS || g.pattern == model.PatternCollNetDirect
	found := false
	for i := range nets {
		if headsOnly && found {
			break
		}
		n := nets[(g.nChannels+i)%len(nets)]
		net := c.nets[n]
		if g.collNet && net.NET.CollSupport == 0 {
			continue
		}
		if net.NET.BW < bw {
			continue
		}
		if g.pattern == model.PatternRing && g.crossNic == 2 && g.nChannels&1 == 1 && int64(net.ID) != g.inter[(g.nChannels-1)*2+1] {
			continue
		}
		g.inter[g.nChannels*2] = int64(net.ID)
		g.latencyInter = net.NET.Latency
		c.takeNICBandwidth(net, bw)
		var skipRestore bool
		if headsOnly {
			found, err = c.netHead(g, n, backToNet, backToFirstRank, budget, len(nets))
		} else {
			skipRestore, err = c.netChannel(g, n, backToNet, backToFirstRank, budget)
		}
		if err != nil {
			return err
		}
		if skipRestore {
			// NCCL skips the give-back for a NET that reaches no GPU; the
			// loss lasts until the end of ComputeGraphs.
			continue
		}
		c.takeNICBandwidth(net, -bw)
	}
	return nil
}

// takeNICBandwidth subtracts bw from every NET sharing net's NIC port.
func (c *chanSearch) takeNICBandwidth(net *model.Node, bw float32) {
	for _, o := range c.nets {
		if o.NET.Asic == net.NET.Asic && o.NET.Port == net.NET.Port {
			o.NET.BW -= bw
		}
	}
}

// netHead tries the NET's local GPU as the head of an NVLS or CollNet
// direct channel, unless it already heads one. It reports whether it tried.
func (c *chanSearch) netHead(g *chanGraph, n, backToNet, backToFirstRank int, budget *int, netCount int) (bool, error) {
	if g.nChannels >= netCount {
		return false, nil
	}
	gi := c.nets[n].NET.LocalGPU
	if gi < 0 || gi >= c.ngpus {
		return false, nil
	}
	rank := c.gpus[gi].GPU.Rank
	for ch := 0; ch < g.nChannels; ch++ {
		if g.intra[ch*c.ngpus] == rank {
			return false, nil
		}
	}
	return true, c.tryGPU(g, 0, backToNet, backToFirstRank, orderFree, budget, c.nets[n], gi)
}

// netChannel builds a ring or tree channel entering through NET n: replay
// the previous channel, or try the PCI order (first channel, no NVSwitch),
// the NET's local GPU and the other closest GPUs. It reports true when the
// NET reaches no GPU (NCCL then skips the bandwidth give-back).
func (c *chanSearch) netChannel(g *chanGraph, n, backToNet, backToFirstRank int, budget *int) (bool, error) {
	net := c.nets[n]
	if g.nChannels > 0 && g.sameChannels == 1 {
		gi, err := c.replayGPU(g, -1)
		if err != nil {
			return false, err
		}
		return false, c.tryGPU(g, 0, backToNet, backToFirstRank, orderReplay, budget, net, gi)
	}
	if g.nChannels == 0 && c.nvs == nil {
		// The PCI order sets a reference with a small budget of its own.
		t := pciOrderSearchBudget
		if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderPCI, &t, net, 0); err != nil {
			return false, err
		}
		if t == -1 {
			*budget = -1
		}
	}
	localGPU := net.NET.LocalGPU
	if localGPU != -1 {
		if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderFree, budget, net, localGPU); err != nil {
			return false, err
		}
	}
	locals, typ := c.cache.closestGPUs(c, n)
	if typ == model.PathDIS {
		return true, nil
	}
	for _, gi := range locals {
		if gi == localGPU {
			continue
		}
		if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderFree, budget, net, gi); err != nil {
			return false, err
		}
	}
	return false, nil
}

// searchParams returns the step at which a channel returns to the NET and
// the step at which an intra-node ring returns to its first GPU
// (ncclTopoSearchParams); -1 means never.
func (c *chanSearch) searchParams(p model.Pattern) (backToNet, backToFirstRank int) {
	if c.inter {
		switch p {
		case model.PatternRing:
			return c.ngpus - 1, -1
		case model.PatternSplitTree:
			return 1, -1
		}
		return 0, -1
	}
	if p == model.PatternRing {
		return -1, c.ngpus - 1
	}
	return -1, -1
}

// searchRec searches for one more channel (ncclTopoSearchRec).
func (c *chanSearch) searchRec(g *chanGraph, budget *int) error {
	backToNet, backToFirstRank := c.searchParams(g.pattern)
	if c.inter {
		return c.recNet(g, backToNet, backToFirstRank, budget)
	}
	if g.pattern == model.PatternNVLS {
		return c.tryGPU(g, 0, backToNet, backToFirstRank, orderFree, budget, nil, g.nChannels)
	}
	if g.nChannels == 0 {
		if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderPCI, budget, nil, 0); err != nil {
			return err
		}
	} else {
		gi, err := c.replayGPU(g, -1)
		if err != nil {
			return err
		}
		if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderReplay, budget, nil, gi); err != nil {
			return err
		}
	}
	if g.sameChannels == 0 || g.nChannels == 0 {
		for gi := range c.gpus {
			if err := c.tryGPU(g, 0, backToNet, backToFirstRank, orderFree, budget, nil, gi); err != nil {
				return err
			}
		}
	}
	return nil
}

// replayGPU returns the GPU at position step+1 of the previous channel
// (ncclTopoReplayGetGpu).
func (c *chanSearch) replayGPU(g *chanGraph, step int) (int, error) {
	if g.nChannels == 0 {
		return -1, fmt.Errorf("replaying a channel before the first one")
	}
	return c.gpuOfRank(g.intra[(g.nChannels-1)*c.ngpus+step+1])
}

// gpuOfRank returns the index of the GPU with a rank.
func (c *chanSearch) gpuOfRank(rank int) (int, error) {
	for i, g := range c.gpus {
		if g.GPU.Rank == rank {
			return i, nil
		}
	}
	return -1, fmt.Errorf("no GPU with rank %d", rank)
}

// netOfID returns the NET node with an id.
func (c *chanSearch) netOfID(id int64) (*model.Node, error) {
	for _, n := range c.nets {
		if int64(n.ID) == id {
			return n, nil
		}
	}
	return nil, fmt.Errorf("no NET with id %#x", id)
}
