package sim

import (
	"fmt"
	"math"
	"slices"

	"github.com/twinccl/twinccl/model"
)

// Mode selects how a Simulator executes a call.
type Mode uint8

// Modes.
const (
	// ModeAccurate runs every slice of every lane of the Program (the
	// step-accurate engine). It is the zero value.
	ModeAccurate Mode = iota
	// ModeFast folds a ring collective whose hosts are identical onto one
	// host and runs only that host's lanes; other calls run reduced by
	// their host symmetries and identical channels where the Program has
	// them (see Simulator.Fold); trees and rooted chains over many hosts
	// are extrapolated from probes in their depth (fast_depth.go); calls
	// with none of these run step-accurate, and Result.Fast says why.
	ModeFast
	// ModeAuto is ModeFast for calls whose step-accurate run would execute
	// more than AutoFastSlices slices, ModeAccurate for the others; of
	// the approximate reductions it takes only those within
	// AutoApproxTolerance.
	ModeAuto
)

// AutoFastSlices is the estimated number of slices of a step-accurate run
// (the timing loop's calls counted, Machine.LoopCalls) above which
// ModeAuto folds a call (a run of that size takes a few seconds).
const AutoFastSlices = 4_000_000

// AutoApproxTolerance is the largest error, relative to the call's time,
// that ModeAuto accepts from the fast mode's approximate reductions, as
// they estimate it themselves (the ring fold of a count that splits
// unevenly, folded.skew; the depth extrapolation, fast_depth.go), for
// calls whose step-accurate run is within MaxAggregateSlices. Beyond, the
// step-accurate run takes hours and ModeAuto takes them whatever their
// estimate, which Result.Fast states; so does ModeFast always. Exact
// folds ModeAuto takes for every call above AutoFastSlices.
const AutoApproxTolerance = 0.01

// tolerance is the relative error estimate a mode accepts from an
// approximate reduction of a call of (estimated) slices.
func tolerance(mode Mode, slices func() int64) float64 {
	switch {
	case mode == ModeFast:
		return math.Inf(1)
	case mode == ModeAuto && slices() > MaxAggregateSlices:
		return math.Inf(1)
	case mode == ModeAuto:
		return AutoApproxTolerance
	}
	return 0
}

// String returns the mode's flag name.
func (m Mode) String() string {
	switch m {
	case ModeAccurate:
		return "accurate"
	case ModeFast:
		return "fast"
	case ModeAuto:
		return "auto"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ParseMode reads a mode name (accurate, fast, auto).
func ParseMode(s string) (Mode, error) {
	switch s {
	case "accurate", "step", "exact":
		return ModeAccurate, nil
	case "fast":
		return ModeFast, nil
	case "auto", "":
		return ModeAuto, nil
	}
	return 0, fmt.Errorf("unknown simulation mode %q (accurate, fast, auto)", s)
}

// folded is a ring Program folded onto the ranks of cluster node 0.
//
// The fold relies on the rotational symmetry of a ring collective over
// identical hosts: when every ring of the call leaves each host from the
// same local GPU, over the same NIC, towards the same local GPU of the next
// host (a rotation by one host maps every ring onto itself), and every
// rank moves chunks of the same size, then the ranks at the same local
// position of every host run the same slices at the same virtual times,
// and every host's links carry the same flows. One host's lanes then stand
// for all: its outgoing ring connections are closed onto its own ranks
// (the rank at the same local position as the real receiver), and the
// resources the real route crosses on the receiving host are replaced by
// the same resources of host 0, which the folded host's own incoming
// connections load exactly as the real ones would. The contention of the
// other hosts is thus accounted for by construction, at 1/hosts of the
// cost of the step-accurate run.
type folded struct {
	prog   *model.Program
	routes []*route
	hosts  int
	// local[r] is rank r's position on its node; rep[a] the rank of node 0
	// at position a.
	local []int32
	rep   []int32
	// conns maps the real Program's connections (channel-major, then rank:
	// GenerateProgram's ring order) to the folded ones; from/to/channel
	// of the real ones.
	real []model.ProgConn
	fold []int32
	// merged is the number of channels that ran as another one.
	merged int
	// perm names the channel permutation of the rotation ("" for none).
	perm string
	// skew is, where ranks move chunks of other sizes than their
	// representatives at the same step (a count that splits unevenly),
	// the largest share of a lane's elements moved in chunks of another
	// size than its representative's (the sum of the size differences
	// over the lane's own): the folded run moves that share differently,
	// and its time is off by at most as much. 0 when the fold is exact.
	skew float64
}

// sizeSkew reports whether two lanes run the same calls but for their
// sizes, and the sum of their size differences relative to b's elements.
func sizeSkew(a, b []model.ProgOp) (float64, bool) {
	if len(a) != len(b) {
		return 0, false
	}
	var diff, total float64
	for i := range a {
		u, v := &a[i], &b[i]
		if u.Kind != v.Kind || u.Flags != v.Flags || u.RecvStep != v.RecvStep || u.SendStep != v.SendStep {
			return 0, false
		}
		diff += math.Abs(float64(u.N - v.N))
		total += float64(v.N)
	}
	return diff / max(total, 1), true
}

// sameChannel reports whether two channels of a fold behave alike: the
// same next ranks, the same routes and the same primitive calls. Channels
// through socket proxies never do (see mergeable).
func sameChannel(nextA, nextB []int, rtA, rtB []*route, la, lb []model.ProgLane) bool {
	if len(la) != len(lb) {
		return false
	}
	for a := range nextA {
		if nextA[a] != nextB[a] {
			return false
		}
		x, y := rtA[a], rtB[a]
		if !mergeable(x) || !mergeable(y) || x.lat != y.lat || x.capGBps != y.capGBps || x.transport != y.transport ||
			!slices.Equal(x.res, y.res) || !slices.Equal(x.recvRes, y.recvRes) {
			return false
		}
	}
	for i := range la {
		if len(la[i].Ops) != len(lb[i].Ops) {
			return false
		}
		for j := range la[i].Ops {
			u, v := la[i].Ops[j], lb[i].Ops[j]
			if u.Kind != v.Kind || u.Flags != v.Flags || u.N != v.N || u.RecvStep != v.RecvStep || u.SendStep != v.SendStep {
				return false
			}
		}
	}
	return true
}

// hostsIdentical reports whether every host of the machine has the same
// resources (same link names after the host prefix, same capacities and
// latencies) in the same order, and the same ranks count.
func (m *Machine) hostsIdentical() bool {
	if m.symChecked {
		return m.symmetric
	}
	m.symChecked = true
	h := len(m.Cluster.Nodes)
	if h < 2 {
		return false
	}
	n0 := m.hostRes[1] - m.hostRes[0]
	p := len(m.Cluster.Nodes[0].Ranks)
	for j := 1; j < h; j++ {
		if m.hostRes[j+1]-m.hostRes[j] != n0 || len(m.Cluster.Nodes[j].Ranks) != p {
			return false
		}
		pre0, prej := fmt.Sprintf("h%d:", 0), fmt.Sprintf("h%d:", j)
		for i := int32(0); i < n0; i++ {
			a, b := &m.res[m.hostRes[0]+i], &m.res[m.hostRes[j]+i]
			if a.cap != b.cap || a.lat != b.lat || m.resType[m.hostRes[0]+i] != m.resType[m.hostRes[j]+i] ||
				len(a.name) < len(pre0) || len(b.name) < len(prej) || a.name[len(pre0):] != b.name[len(prej):] {
				return false
			}
		}
		for a, r := range m.Cluster.Nodes[j].Ranks {
			g0 := m.Cluster.Nodes[0].System.GPUByRank(m.Cluster.Nodes[0].Ranks[a])
			gj := m.Cluster.Nodes[j].System.GPUByRank(r)
			if g0 == nil || gj == nil || g0.Name() != gj.Name() {
				return false
			}
		}
	}
	m.symmetric = true
	return true
}

// toHost0 maps a resource of any host to the same resource of host 0.
func (m *Machine) toHost0(id int32) int32 {
	for j := 1; j+1 < len(m.hostRes); j++ {
		if id >= m.hostRes[j] && id < m.hostRes[j+1] {
			return id - m.hostRes[j] + m.hostRes[0]
		}
	}
	return id
}

// fold folds the ring Program of generator g onto cluster node 0, or
// returns a reason why it cannot; where a count that splits unevenly
// gives ranks chunks of other sizes at the same step, only within the
// mode's tolerance (see folded.skew).
func (m *Machine) fold(g *model.ProgGen, mode Mode) (*folded, string) {
	h := g.Header()
	cl := m.Cluster
	switch {
	case h.Algo != model.AlgoRing:
		return nil, "not a ring algorithm"
	case h.Coll != model.CollAllReduce && h.Coll != model.CollAllGather && h.Coll != model.CollReduceScatter:
		return nil, fmt.Sprintf("%s is not rotationally symmetric", h.Coll)
	case len(cl.Nodes) < 2:
		return nil, "one host"
	case h.Count == 0 || len(g.Parts()) == 0:
		return nil, "empty call"
	case !m.hostsIdentical():
		return nil, "hosts differ"
	}
	n := h.NRanks
	hosts := len(cl.Nodes)
	p := len(cl.Nodes[0].Ranks)
	f := &folded{hosts: hosts, local: make([]int32, n), rep: make([]int32, p)}
	for _, nd := range cl.Nodes {
		for a, r := range nd.Ranks {
			f.local[r] = int32(a)
		}
	}
	for a, r := range cl.Nodes[0].Ranks {
		f.rep[a] = int32(r)
	}
	plan := m.Plan
	chans := g.Channels()
	ix := make([]int, n)
	// next[k][a]: the rank the representative at position a sends to on
	// channel k (a real rank, maybe on another host).
	next := make([][]int, len(chans))
	for k, ch := range chans {
		if ch >= len(plan.Rings) || len(plan.Rings[ch]) != n {
			return nil, "ring missing"
		}
		ring := plan.Rings[ch]
		for i, r := range ring {
			ix[r] = i
		}
		next[k] = make([]int, p)
		for a := range p {
			next[k][a] = ring[(ix[f.rep[a]]+1)%n]
		}
	}
	// The rotation by one host maps channel k of a host onto channel
	// sig(k, 1) of the next (NCCL's cross-NIC alternation, see chanPerms):
	// a rank on host h runs channel k as the representative at its
	// position runs sig(k, h).
	var sig func(k, h int) int
	why := ""
	for _, cand := range chanPerms(hosts, len(chans)) {
		if chans[0]%2 != 0 && cand.name != "" {
			continue // c^1 would leave the channels used
		}
		s := func(k, h int) int { return int(cand.perm(int32(chans[k]), h)) - chans[0] }
		if why = m.ringRotates(plan, chans, next, f.local, s); why == "" {
			sig, f.perm = s, cand.name
			break
		}
	}
	if sig == nil {
		return nil, why
	}
	// Real routes of the representatives' ring connections, per channel.
	rts := make([][]*route, len(chans))
	for k, ch := range chans {
		rts[k] = make([]*route, p)
		for a := range p {
			rt, err := m.route(int(f.rep[a]), next[k][a], ch)
			if err != nil {
				return nil, err.Error()
			}
			rts[k][a] = rt
		}
	}
	// Representative lanes, per channel and position.
	lanes := make([][]model.ProgLane, len(chans))
	for k, ch := range chans {
		for a := range p {
			r := int(f.rep[a])
			if g.NumLanes(r, ch) != 1 {
				return nil, "a ring rank without exactly one lane per channel"
			}
			lanes[k] = append(lanes[k], g.Lane(r, ch, 0, nil))
		}
	}
	// A rank's ring lane is a function of its ring index, which the
	// rotation shifts by one host's ranks: the lanes of host 1 must run
	// the calls of their representatives (on the channel the rotation
	// maps theirs to) for every host's to. A count that splits unevenly
	// into chunks gives ranks chunks of other sizes at the same step.
	for k, ch := range chans {
		k2 := sig(k, 1)
		for a := range p {
			r := cl.Nodes[1].Ranks[a]
			if g.NumLanes(r, ch) != 1 {
				return nil, "a ring rank without exactly one lane per channel"
			}
			l := g.Lane(r, ch, 0, nil)
			if sameOps(l.Ops, lanes[k2][a].Ops) {
				continue
			}
			sk, ok := sizeSkew(l.Ops, lanes[k2][a].Ops)
			if !ok {
				return nil, fmt.Sprintf("ranks %d and %d run different calls on channel %d", r, f.rep[a], ch)
			}
			f.skew = max(f.skew, sk)
		}
	}
	if tol := tolerance(mode, func() int64 { return estimateSlices(g) * m.runCalls() }); f.skew > tol {
		return nil, fmt.Sprintf("ranks move up to %.3g%% of their elements in chunks of other sizes than their representatives (a count that splits unevenly), above the %s mode's %.3g%%",
			100*f.skew, mode, 100*tol)
	}
	if f.perm != "" {
		// The channels the rotation exchanges must run the same calls.
		for k := range chans {
			k2 := sig(k, 1)
			for a := range p {
				if !sameOps(lanes[k][a].Ops, lanes[k2][a].Ops) {
					return nil, fmt.Sprintf("channels %d and %d, exchanged between hosts, run different calls", chans[k], chans[k2])
				}
			}
		}
	}
	// Channels with the same ring, the same routes and the same primitive
	// calls (sizes and steps; buffer offsets do not matter) behave alike:
	// the first of them runs, weighing as many as it stands for on every
	// link.
	lead := make([]int, len(chans)) // index into chans of the class leader
	slot := make([]int, len(chans)) // folded channel slot of each leader
	var leaders []int
	for k := range chans {
		lead[k] = k
		for _, j := range leaders {
			if sameChannel(next[j], next[k], rts[j], rts[k], lanes[j], lanes[k]) {
				lead[k] = j
				break
			}
		}
		if lead[k] == k {
			slot[k] = len(leaders)
			leaders = append(leaders, k)
		}
	}
	for k := range chans {
		// The rotation must map classes of channels onto classes.
		if lead[sig(k, 1)] != lead[sig(lead[k], 1)] {
			return nil, fmt.Sprintf("channel %d's class is not mapped onto one class by the rotation", chans[k])
		}
	}
	weight := make([]float64, len(chans))
	for k := range chans {
		weight[lead[k]]++
	}
	fp := *h
	fp.Conns = make([]model.ProgConn, 0, len(leaders)*p)
	f.routes = make([]*route, 0, len(leaders)*p)
	// recvOf[slot*p+b] is the folded connection that the representative at
	// position b receives on the leader of that slot: the one whose real
	// receiver runs as it.
	recvOf := make([]int32, len(leaders)*p)
	for i := range recvOf {
		recvOf[i] = -1
	}
	for _, k := range leaders {
		for a := range p {
			rn := next[k][a]
			b := f.local[rn]
			at := slot[lead[sig(k, m.rankNode[rn])]]*p + int(b)
			if recvOf[at] >= 0 {
				return nil, "a folded lane would receive twice"
			}
			recvOf[at] = int32(len(fp.Conns))
			fp.Conns = append(fp.Conns, model.ProgConn{Channel: int32(chans[k]), From: f.rep[a], To: f.rep[b]})
			f.routes = append(f.routes, rts[k][a].remapped(m.toHost0, weight[k]))
		}
	}
	// Ring lanes receive on the connection of their ring predecessor and
	// send on their own; renumber both into the folded connections. Lanes
	// go rank-major, as GenerateProgram orders them.
	for a := range p {
		for _, k := range leaders {
			l := lanes[k][a]
			rc := recvOf[slot[k]*p+a]
			if rc < 0 {
				return nil, "a folded lane receives from no one"
			}
			l.Recv = []int32{rc}
			l.Send = []int32{int32(slot[k]*p + a)}
			fp.Lanes = append(fp.Lanes, l)
		}
	}
	f.merged = len(chans) - len(leaders)
	f.prog = &fp
	// The real connections, in GenerateProgram's order, and their folds.
	f.real = h.Conns
	f.fold = make([]int32, len(h.Conns))
	for i, c := range h.Conns {
		k := i / n
		if k >= len(chans) || int(c.Channel) != chans[k] {
			return nil, "unexpected connection order"
		}
		f.fold[i] = int32(slot[lead[sig(k, m.rankNode[c.From])]]*p) + f.local[c.From]
	}
	return f, ""
}

// ringRotates reports why rotating the ranks by one host, with channel
// index k going to sig(k, 1), does not map the rings of chans onto
// themselves (empty when it does): every rank must send to the rank at
// the position and host offset its representative (host 0, same
// position, channel sig(k, host)) sends to.
func (m *Machine) ringRotates(plan *model.Plan, chans []int, next [][]int, local []int32, sig func(k, h int) int) string {
	hosts := len(m.Cluster.Nodes)
	n := len(local)
	ix := make([]int, n)
	for k, ch := range chans {
		ring := plan.Rings[ch]
		for i, r := range ring {
			ix[r] = i
		}
		for r := range n {
			k2 := sig(k, m.rankNode[r])
			if k2 < 0 || k2 >= len(chans) {
				return fmt.Sprintf("channel %d has no counterpart on host %d", ch, m.rankNode[r])
			}
			nx := ring[(ix[r]+1)%n]
			rn := next[k2][local[r]]
			d := (m.rankNode[nx] - m.rankNode[r] + hosts) % hosts
			if local[nx] != local[rn] || d != m.rankNode[rn]%hosts {
				return fmt.Sprintf("ring %d is not symmetric under a rotation by one host", ch)
			}
		}
	}
	return ""
}

// runCalls is the number of calls a run of a Program executes: the
// timing loop's aligning call and its timed ones (Machine.LoopCalls), or
// one.
func (m *Machine) runCalls() int64 {
	if m.LoopCalls > 0 {
		return int64(m.LoopCalls) + 1
	}
	return 1
}

// estimateSlices is the number of slices a step-accurate run of g would
// execute, from one lane per channel (ring lanes of a call are alike).
func estimateSlices(g *model.ProgGen) int64 {
	h := g.Header()
	var total int64
	var ops []model.ProgOp
	var sl []model.ProgSlice
	for _, ch := range g.Channels() {
		l := g.Lane(0, ch, 0, ops)
		ops = l.Ops
		var per int64
		for _, op := range l.Ops {
			sl = h.Slices(op, sl[:0])
			per += int64(len(sl))
		}
		total += per * int64(g.NumLanes(0, ch)) * int64(h.NRanks)
	}
	return total
}

// runFolded runs a folded Program and expands its result to the real
// ranks, connections and links.
func (m *Machine) runFolded(f *folded, rec func(*SliceEvent)) (*Result, error) {
	// A fold under a channel permutation connects a lane of one channel
	// to the lane of the channel the rotation maps it to (the engine
	// follows connections, whatever their channel), which no real Program
	// does, and which Validate refuses: fold checked that every folded
	// lane receives and sends exactly once.
	run := m.run
	if f.perm != "" {
		run = func(p *model.Program, routes []*route, rec func(*SliceEvent)) (*Result, error) {
			return m.exec(p, routes, rec, nil)
		}
	}
	r, err := run(f.prog, f.routes, rec)
	if err != nil {
		return nil, err
	}
	n := len(f.local)
	rk := make([]float64, n)
	for i := range rk {
		rk[i] = r.RankKernelUs[f.rep[f.local[i]]]
	}
	r.RankKernelUs = rk
	conns := make([]ConnStats, len(f.real))
	for i, c := range f.real {
		cs := r.Conns[f.fold[i]]
		cs.From, cs.To, cs.Channel = int(c.From), int(c.To), int(c.Channel)
		conns[i] = cs
	}
	r.Conns = conns
	// Host 0's links stand for every host's.
	m.expandHostLinks(r, f.hosts)
	r.Folded = f.hosts
	r.Merged = f.merged
	r.Fast = fmt.Sprintf("ring folded: %d hosts onto one", f.hosts)
	if f.perm != "" {
		r.Fast += " (" + f.perm + ")"
	}
	if f.merged > 0 {
		r.Fast += fmt.Sprintf(", %d identical channel(s) merged", f.merged)
	}
	if f.skew > 0 {
		r.Fast += fmt.Sprintf("; approximate: ranks move up to %.3g%% of their elements in chunks of other sizes than their representatives", 100*f.skew)
	}
	return r, nil
}
