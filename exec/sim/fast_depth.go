package sim

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// Depth extrapolation is the fast mode of the pipelined calls that no
// symmetry folds: NCCL's double binary tree across hosts (beyond the
// mirror that exchanges its two trees, hostSyms, no host permutation maps
// both trees onto themselves; nor is there a coarser exact quotient:
// colour refinement of the two trees, with the side every child hangs
// on, separates every host of 16, 128 or 1,024) and the chains of the
// rooted collectives (Broadcast and Reduce on rings), whose root breaks
// the host rotation.
//
// On identical hosts such a call is a pipeline whose every host does the
// same work per step; adding a level to the pipeline (one host more along
// a chain, one level more in a tree) adds the same hop to its critical
// path and leaves the steady state alone. Its time is then an affine
// function of the pipeline's depth D (in hosts crossed): T(D) = a + b*D.
// The fast mode measures T step-accurately on three smaller copies of the
// cluster (probes of the same shape: the same host file, algorithm, protocol,
// channels and chunks) and extrapolates from the two largest. The
// increments of the two probe pairs must agree for the model to hold; the
// levels extrapolated times the change of the increment is the estimate
// of the error that Result.Fast states: it holds while the increment's
// change at least halves from one doubling of the hosts to the next, as
// it does in the tests, and is zero when the increments are equal, as
// they are for calls of a few steps per channel.

// depthRule describes how the pipeline of one kind of call deepens with
// the number of hosts. A new pipelined algorithm (NVLS trees, whose
// inter-host part is the same double binary tree) plugs in by adding a
// rule to depthRules.
type depthRule struct {
	name string
	// applies reports whether the rule covers a call of coll with algo.
	applies func(coll model.Collective, algo model.Algorithm) bool
	// probes are the host counts of the probes of a cluster of n hosts,
	// smaller copies of the same shape (the two largest give the slope,
	// the smallest checks it), or why there are none.
	probes func(n int) ([]int, string)
	// depth is the number of hosts the pipeline of the Program crosses on
	// its longest path, over the used channels.
	depth func(m *Machine, h *model.Program, chans []int) (int, error)
}

// nProbes is the number of probes a depth extrapolation runs.
const nProbes = 3

// treeProbes are the probes of a double binary tree over n hosts: n's
// odd part m times the three smallest powers of two that give an even
// count of at least 4. NCCL's binary tree over n positions is the
// complete tree over the next power of two cut at n, so that its shape
// depends on m: m*2^k and m*2^(k+1) hosts differ by one level of the same
// shape (other counts of the same depth do not: 12 and 16 hosts differ),
// and an even count's second tree is the first one mirrored (an odd
// count's is shifted).
func treeProbes(n int) ([]int, string) {
	m := n >> bits.TrailingZeros(uint(n))
	k := m * 2
	for k < 4 {
		k *= 2
	}
	ps := []int{k, 2 * k, 4 * k}
	if n%2 != 0 || ps[nProbes-1] >= n {
		return nil, fmt.Sprintf("a tree over %d hosts has no three smaller copies of its shape (%d times a power of two, even, from 4 hosts)", n, m)
	}
	return ps, ""
}

// chainProbes are the probes of a chain through n hosts.
func chainProbes(n int) ([]int, string) {
	ps := []int{4, 8, 16}
	if ps[nProbes-1] >= n {
		return nil, fmt.Sprintf("%d hosts: no three smaller probes (%v)", n, ps)
	}
	return ps, ""
}

// depthRules are the pipelines depth extrapolation knows.
var depthRules = []depthRule{
	{
		name:    "tree",
		applies: func(_ model.Collective, a model.Algorithm) bool { return a == model.AlgoTree },
		probes:  treeProbes,
		depth:   treeDepth,
	},
	{
		name: "chain",
		applies: func(c model.Collective, a model.Algorithm) bool {
			return a == model.AlgoRing && (c == model.CollBroadcast || c == model.CollReduce)
		},
		probes: chainProbes,
		depth:  chainDepth,
	},
}

// treeDepth is the largest number of host changes on a path from a rank
// to its tree's root, over the channels, in the Plan's trees (NCCL's
// double binary tree across hosts, chains inside).
func treeDepth(m *Machine, h *model.Program, chans []int) (int, error) {
	return treeDepthBy(m, h, chans, func(r, ch int) (int, bool) {
		t := m.Plan.Ranks[r].Tree
		if ch >= len(t) {
			return 0, false
		}
		return t[ch].Up, true
	})
}

// treeDepthBy is treeDepth over the trees that up describes: rank r's
// parent on channel ch (negative at a root; false when r has no tree on
// ch). An NVLS tree's rule gives its own parents here.
func treeDepthBy(m *Machine, h *model.Program, chans []int, up func(r, ch int) (int, bool)) (int, error) {
	best := 0
	for _, ch := range chans {
		for r := range h.NRanks {
			d, cur := 0, r
			for steps := 0; ; steps++ {
				p, ok := up(cur, ch)
				if !ok || steps > h.NRanks {
					return 0, fmt.Errorf("channel %d: rank %d has no path to a root", ch, r)
				}
				if p < 0 {
					break
				}
				if m.rankNode[p] != m.rankNode[cur] {
					d++
				}
				cur = p
			}
			best = max(best, d)
		}
	}
	return best, nil
}

// chainDepth is the largest number of host changes along a channel's
// chain from the root to its last rank.
func chainDepth(m *Machine, h *model.Program, chans []int) (int, error) {
	best := 0
	for _, ch := range chans {
		if ch >= len(m.Plan.Rings) || len(m.Plan.Rings[ch]) != h.NRanks {
			return 0, fmt.Errorf("channel %d has no ring over %d ranks", ch, h.NRanks)
		}
		ring := m.Plan.Rings[ch]
		at := slices.Index(ring, h.Root)
		if at < 0 {
			return 0, fmt.Errorf("channel %d: root %d is not on the ring", ch, h.Root)
		}
		d := 0
		for i := 1; i < len(ring); i++ {
			if m.rankNode[ring[(at+i)%len(ring)]] != m.rankNode[ring[(at+i-1)%len(ring)]] {
				d++
			}
		}
		best = max(best, d)
	}
	return best, nil
}

// depthProbe is one probe's measurement.
type depthProbe struct {
	nodes, depth int
	r            *Result
}

// extrapolateDepth runs the call c (whose generator on s is g) on the
// probes and extrapolates its time to s's cluster, or says why it cannot.
//
// errUs is the extrapolation's error estimate in microseconds.
func (s *Simulator) extrapolateDepth(c Call, g *model.ProgGen, cr CallResult) (r *Result, errUs float64, why string) {
	h := g.Header()
	var rule *depthRule
	for i := range depthRules {
		if depthRules[i].applies(h.Coll, h.Algo) {
			rule = &depthRules[i]
		}
	}
	cl := s.Search.Cluster
	n := len(cl.Nodes)
	switch {
	case rule == nil:
		return nil, 0, fmt.Sprintf("no depth rule for %s/%s", h.Coll, h.Algo)
	case !cl.Replicated || !s.Machine.hostsIdentical():
		return nil, 0, "hosts are not copies of one host"
	case len(g.Parts()) == 0:
		return nil, 0, "empty call"
	}
	hostCounts, why := rule.probes(n)
	if hostCounts == nil {
		return nil, 0, why
	}
	chans := g.Channels()
	depth, err := rule.depth(s.Machine, h, chans)
	if err != nil {
		return nil, 0, err.Error()
	}
	probes := make([]depthProbe, nProbes)
	sims := make([]*Simulator, nProbes)
	gens := make([]*model.ProgGen, nProbes)
	pc := c
	pc.Algo, pc.Proto, pc.NChannels = cr.Algo, cr.Proto, chans[len(chans)-1]+1
	local := 0
	for a, r := range cl.Nodes[s.Machine.rankNode[c.Root]].Ranks {
		if r == c.Root {
			local = a
		}
	}
	pc.Root = cl.Nodes[0].Ranks[local]
	for i, k := range hostCounts {
		ps, err := s.probe(k)
		if err != nil {
			return nil, 0, fmt.Sprintf("probe of %d hosts: %v", k, err)
		}
		pg, _, err := ps.Generator(pc)
		if err != nil {
			return nil, 0, fmt.Sprintf("probe of %d hosts: %v", k, err)
		}
		if why := sameSchedule(h, pg.Header(), g.Parts(), pg.Parts()); why != "" {
			return nil, 0, fmt.Sprintf("probe of %d hosts: %s", k, why)
		}
		d, err := rule.depth(ps.Machine, pg.Header(), pg.Channels())
		if err != nil {
			return nil, 0, fmt.Sprintf("probe of %d hosts: %v", k, err)
		}
		if i > 0 && d <= probes[i-1].depth || d >= depth {
			return nil, 0, fmt.Sprintf("probe depths %d after %d do not lead up to %d", d, probes[max(i-1, 0)].depth, depth)
		}
		probes[i] = depthProbe{nodes: k, depth: d}
		sims[i], gens[i] = ps, pg
	}
	// The probes are independent engines: the two cores run them side by
	// side, the largest alone.
	s.forwardProgress(sims, gens)
	errs := make([]error, len(probes))
	var wg sync.WaitGroup
	run := func(i int) {
		// A probe runs reduced by its own exact symmetries where it has
		// them (the double binary tree's mirror halves it).
		if estimateSlices(gens[i]) <= MaxAggregateSlices {
			probes[i].r, errs[i] = sims[i].runFastProgram(gens[i].Program(), "", nil)
		} else {
			probes[i].r, errs[i] = sims[i].Machine.RunGen(gens[i], nil)
		}
	}
	last := len(probes) - 1
	wg.Add(1)
	go func() { defer wg.Done(); run(last) }()
	for i := range last {
		run(i)
	}
	wg.Wait()
	for i, e := range errs {
		if e != nil {
			return nil, 0, fmt.Sprintf("probe of %d hosts: %v", probes[i].nodes, e)
		}
	}
	r, errUs = extrapolated(rule.name, probes, depth, h.NRanks)
	return r, errUs, ""
}

// extrapolated is the Result at depth from the probes' (see
// extrapolateDepth): time and kernel time affine in depth through the two
// largest probes; counters summed over the probes (the work done).
func extrapolated(name string, probes []depthProbe, depth, nranks int) (*Result, float64) {
	k := len(probes) - 1
	a, b := probes[k-1], probes[k]
	slope := func(x, y depthProbe, f func(*Result) float64) float64 {
		return (f(y.r) - f(x.r)) / float64(y.depth-x.depth)
	}
	timeOf := func(r *Result) float64 { return r.TimeUs }
	kernOf := func(r *Result) float64 { return r.KernelUs }
	levels := float64(depth - b.depth)
	inc := slope(a, b, timeOf)
	r := &Result{
		TimeUs:    b.r.TimeUs + levels*inc,
		KernelUs:  b.r.KernelUs + levels*slope(a, b, kernOf),
		LoopCalls: b.r.LoopCalls,
	}
	// Every rank of a call this deep ends within a few hops of the last:
	// each stands at the call's kernel time.
	r.RankKernelUs = make([]float64, nranks)
	for i := range r.RankKernelUs {
		r.RankKernelUs[i] = r.KernelUs
	}
	for _, p := range probes {
		r.Events += p.r.Events
		r.Slices += p.r.Slices
		r.Reshares += p.r.Reshares
	}
	errUs := 0.0
	if k >= 2 {
		errUs = levels * abs(inc-slope(probes[k-2], a, timeOf))
	}
	var hosts, depths []int
	for _, p := range probes {
		hosts = append(hosts, p.nodes)
		depths = append(depths, p.depth)
	}
	r.Fast = fmt.Sprintf("%s depth extrapolated from %v hosts (depth %v) to depth %d: %.3f us per level, estimated error %.3f us",
		name, hosts, depths, depth, inc, errUs)
	return r, errUs
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// sameSchedule reports why a probe's Program header or channel shares
// differ from the target's (empty when they match): a probe must run the
// same steps per channel for the extrapolation to hold.
func sameSchedule(a, b *model.Program, pa, pb []model.CollPart) string {
	switch {
	case a.Coll != b.Coll || a.Algo != b.Algo || a.Proto != b.Proto:
		return fmt.Sprintf("runs %s/%s/%s, not %s/%s/%s", b.Coll, b.Algo, b.Proto, a.Coll, a.Algo, a.Proto)
	case a.StepBytes != b.StepBytes || a.SlicesPerChunk != b.SlicesPerChunk || a.StepsPerSlice != b.StepsPerSlice || a.Credits != b.Credits:
		return "other step, slice or credit sizes"
	case a.Threads != b.Threads:
		return fmt.Sprintf("%d threads, not %d", b.Threads, a.Threads)
	case !slices.Equal(pa, pb):
		return "other channel shares or chunk sizes"
	}
	return ""
}

// probe is a Simulator of the first k hosts of s's cluster (identical
// copies of one host file), searched with s's options, on s's
// calibration and settings, step-accurate, timed as s's Machine times
// its calls now.
func (s *Simulator) probe(k int) (*Simulator, error) {
	cl := s.Search.Cluster
	sub := &model.Cluster{File: cl.File, MNNVL: cl.MNNVL, Replicated: true, Nodes: cl.Nodes[:k]}
	for _, nd := range sub.Nodes {
		sub.NRanks += len(nd.Ranks)
	}
	res, err := search.Run(sub, s.Search.Options)
	if err != nil {
		return nil, err
	}
	ps, err := NewSimulator(res, s.Machine.calib)
	if err != nil {
		return nil, err
	}
	ps.Machine.SetSettings(s.Machine.settings)
	ps.Machine.LoopCalls, ps.Machine.EagerCalls = s.Machine.LoopCalls, s.Machine.EagerCalls
	ps.Loop, ps.Eager, ps.Harness = s.Loop, s.Eager, s.Harness
	return ps, nil
}

// fastDepth is extrapolateDepth for RunRecord's fast path: nil and the
// reasons so far (foldWhy, the ring fold's) when it does not apply. A
// recorded run needs every slice of the real cluster, which no probe has.
func (s *Simulator) fastDepth(c Call, g *model.ProgGen, cr CallResult, rec func(*SliceEvent), foldWhy string) (*Result, string) {
	if rec != nil {
		return nil, foldWhy + "; depth extrapolation: the slices are recorded"
	}
	r, errUs, why := s.extrapolateDepth(c, g, cr)
	if r == nil {
		return nil, foldWhy + "; depth extrapolation: " + why
	}
	if tol := tolerance(s.Mode, func() int64 { return estimateSlices(g) * s.Machine.runCalls() }); errUs > tol*r.TimeUs {
		return nil, fmt.Sprintf("%s; depth extrapolation: estimated error %.3f us of %.3f us, above the %s mode's %.3g%%", foldWhy, errUs, r.TimeUs, s.Mode, 100*tol)
	}
	return r, foldWhy
}

// forwardProgress reports the probes' progress, together, to s's Machine's
// Progress (replay sim's bar): each probe's share of the whole is its
// estimated slices, and its runs report from two goroutines, one at a
// time.
func (s *Simulator) forwardProgress(sims []*Simulator, gens []*model.ProgGen) {
	up := s.Machine.Progress
	if up == nil {
		return
	}
	var mu sync.Mutex
	est := make([]float64, len(sims))
	frac := make([]float64, len(sims))
	var sum float64
	for i, g := range gens {
		est[i] = float64(max(estimateSlices(g), 1))
		sum += est[i]
	}
	const scale = 1 << 20
	for i, ps := range sims {
		ps.Machine.Progress = func(done, total int64) {
			if total <= 0 {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			frac[i] = min(float64(done)/float64(total), 1)
			var d float64
			for j := range frac {
				d += frac[j] * est[j]
			}
			up(int64(d/sum*scale), scale)
		}
	}
}
