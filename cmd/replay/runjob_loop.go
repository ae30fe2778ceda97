package main

import (
	"fmt"
	"math"
	"sort"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// streamKey is one stream of one job rank.
type streamKey struct {
	rank   int32
	stream uint64
}

// jobQueues is the order the calls of a job start in: per (job rank,
// stream) the calls in issue order, and which are next.
type jobQueues struct {
	queues map[streamKey][]*runCall
	keys   []streamKey // sorted: the order heads looks at them
	head   map[streamKey]int
	free   map[streamKey]float64 // ns when the stream's last call's launch passed
	// queued are the calls pending (startAt known) or in flight
	queued  map[*runCall]bool
	startAt map[*runCall]float64 // ns
	pending []*runCall
}

func newJobQueues(calls []*runCall) *jobQueues {
	q := &jobQueues{queues: map[streamKey][]*runCall{}, head: map[streamKey]int{}, free: map[streamKey]float64{},
		queued: map[*runCall]bool{}, startAt: map[*runCall]float64{}}
	for _, c := range calls {
		for i := range c.rows {
			k := streamKey{jobRank(c, &c.rows[i]), c.rows[i].Stream}
			q.queues[k] = append(q.queues[k], c)
		}
	}
	for k, cs := range q.queues {
		sort.SliceStable(cs, func(i, j int) bool {
			ea, eb := enqueueOf(cs[i], k.rank), enqueueOf(cs[j], k.rank)
			if ea != eb {
				return ea < eb
			}
			return runKeyLess(cs[i], cs[j])
		})
		q.keys = append(q.keys, k)
	}
	sort.Slice(q.keys, func(i, j int) bool {
		return q.keys[i].rank < q.keys[j].rank || q.keys[i].rank == q.keys[j].rank && q.keys[i].stream < q.keys[j].stream
	})
	return q
}

// heads queues the calls that head the queue of every stream they run
// on, with the time they may start: when those streams are free and, with
// host gaps, no earlier than recorded after the rank's first call.
func (q *jobQueues) heads(firstEnqueue map[int32]int64, hostGaps bool) {
	for _, hk := range q.keys {
		cs := q.queues[hk]
		if q.head[hk] >= len(cs) {
			continue
		}
		c := cs[q.head[hk]]
		if c.done || q.queued[c] {
			continue
		}
		ok := true
		start := 0.0
		for i := range c.rows {
			r := &c.rows[i]
			k := streamKey{jobRank(c, r), r.Stream}
			if s := q.queues[k]; q.head[k] >= len(s) || s[q.head[k]] != c {
				ok = false
				break
			}
			start = max(start, q.free[k])
			if f, has := firstEnqueue[k.rank]; has && hostGaps && r.EnqueueNs >= f {
				start = max(start, float64(r.EnqueueNs-f))
			}
		}
		if ok {
			q.queued[c], q.startAt[c] = true, start
			q.pending = append(q.pending, c)
		}
	}
}

// replay runs the calls: a call starts when it heads the queue of every
// (job rank, stream) it runs on, those streams' previous calls ended (and
// their launch passed), and, with host gaps, no earlier than recorded;
// calls in flight together share the job's links (sim.Job). A call that
// starts with none in flight and ends before any pending call starts runs
// on its own, as "replay sim" runs it (with --mode, its slices cached for
// identical calls): nothing could share its links.
func (jr *jobReplay) replay(bar *progressBar) error {
	q := newJobQueues(jr.calls)
	jr.predStart, jr.recStart = -1, -1
	done := 0
	q.heads(jr.firstEnqueue, jr.hostGaps)
	for done < len(jr.calls) {
		limit := sim.Time(math.MaxInt64)
		for _, c := range q.pending {
			limit = min(limit, psOf(q.startAt[c]))
		}
		if len(q.pending) == 0 && jr.job.InFlight() == 0 {
			return fmt.Errorf("%s: the calls cannot be ordered by stream: every rank waits for a call another rank issues later (inconsistent trace)", jr.in)
		}
		fin, err := jr.job.Advance(limit)
		if err != nil {
			return fmt.Errorf("%s: %w", jr.in, err)
		}
		for _, f := range fin {
			if err := jr.finished(q, jr.calls[f.Tag], f); err != nil {
				return err
			}
			done++
		}
		if len(fin) > 0 {
			q.heads(jr.firstEnqueue, jr.hostGaps)
			continue
		}
		// The job reached the earliest pending start: start those calls.
		now := jr.job.Now()
		sort.SliceStable(q.pending, func(i, j int) bool { return runKeyLess(q.pending[i], q.pending[j]) })
		var starting, later []*runCall
		for _, c := range q.pending {
			if psOf(q.startAt[c]) > now {
				later = append(later, c)
			} else {
				starting = append(starting, c)
			}
		}
		q.pending = later
		if len(starting) == 1 && jr.job.InFlight() == 0 && jr.lone {
			ran, err := jr.runAlone(q, starting[0], now)
			if err != nil {
				return err
			}
			if ran {
				done++
				q.heads(jr.firstEnqueue, jr.hostGaps)
				continue
			}
		}
		for _, c := range starting {
			if err := jr.start(c); err != nil {
				return err
			}
			bar.setLabel(fmt.Sprintf("call %d/%d at %.0f us", done+1, len(jr.calls), float64(now)/1e6))
		}
		if jr.evErr != nil {
			return jr.evErr
		}
	}
	jr.flushEvents()
	return jr.evErr
}

// runAlone runs call c by itself from now when it ends before any pending
// call starts, and reports whether it did. The isolated result of every
// distinct call of a communicator is kept, its slices too while they fit
// the cache.
func (jr *jobReplay) runAlone(q *jobQueues, c *runCall, now sim.Time) (bool, error) {
	cm := c.group
	key := commCall{cm, c.call}
	m, ok := jr.memo[key]
	var fresh []sim.SliceEvent // this call's slices when just simulated
	if !ok {
		cr, err := cm.sim.RunRecord(c.call, func(e *sim.SliceEvent) { fresh = append(fresh, *e) })
		if err != nil {
			return false, fmt.Errorf("%s: communicator %#x call %d: %w", jr.in, c.comm, c.seq, err)
		}
		m = runMemo{cr: cr}
		if jr.cachedSlices+int64(len(fresh)) <= runCacheSlices {
			m.evs, m.cached = fresh, true
			jr.cachedSlices += int64(len(fresh))
		}
		jr.memo[key] = m
	}
	end := now + psOf(m.cr.KernelUs*1e3)
	for _, o := range q.pending {
		if psOf(q.startAt[o]) < end {
			return false, nil // a call would start while it runs: they share the links
		}
	}
	switch {
	case m.cached:
		fresh = m.evs
	case fresh == nil: // simulated before, its slices not kept: again
		if _, err := cm.sim.RunRecord(c.call, func(e *sim.SliceEvent) { fresh = append(fresh, *e) }); err != nil {
			return false, fmt.Errorf("%s: communicator %#x call %d: %w", jr.in, c.comm, c.seq, err)
		}
	}
	for i := range fresh {
		jr.addEvent(c, now, &fresh[i])
	}
	c.chose = m.cr
	f := sim.Finished{Tag: c.idx, Start: now, End: end, RankEnd: make([]sim.Time, len(c.rows)),
		Slices: m.cr.Slices, LaunchUs: m.cr.TimeUs - m.cr.KernelUs}
	for r := range f.RankEnd {
		if r < len(m.cr.RankKernelUs) {
			f.RankEnd[r] = now + psOf(m.cr.RankKernelUs[r]*1e3)
		}
	}
	if err := jr.finished(q, c, f); err != nil {
		return false, err
	}
	// The job's clock moves on to the call's end (nothing is in flight).
	if _, err := jr.job.Advance(end); err != nil {
		return false, fmt.Errorf("%s: %w", jr.in, err)
	}
	return true, jr.evErr
}

// commCall identifies identical calls of one communicator.
type commCall struct {
	cm   *runComm
	call sim.Call
}

// addEvent records a slice of call c whose times count from start (ps).
func (jr *jobReplay) addEvent(c *runCall, start sim.Time, e *sim.SliceEvent) {
	jr.evBuf = append(jr.evBuf, simEventRow(c.comm, c.seq, float64(start)/1e3, e))
	if len(jr.evBuf) >= 4096 {
		jr.flushEvents()
	}
}

// finished records a call that ended: its rows, its streams free again
// after its launch cost, the makespans.
func (jr *jobReplay) finished(q *jobQueues, c *runCall, f sim.Finished) error {
	cm := c.group
	startNs, endNs := float64(f.Start)/1e3, float64(f.End)/1e3
	rows := make([]traces.CallRow, 0, len(c.rows))
	recK, predK := math.Inf(1), math.Inf(1)
	for _, r := range c.rows {
		predK = min(predK, float64(f.RankEnd[r.Rank]-f.Start)/1e3)
		if r.StartNs >= 0 && r.EndNs > r.StartNs {
			recK = min(recK, float64(r.EndNs-r.StartNs))
			jr.recEnd, cm.recEnd = max(jr.recEnd, r.EndNs), max(cm.recEnd, r.EndNs)
			if jr.recStart < 0 || r.StartNs < jr.recStart {
				jr.recStart = r.StartNs
			}
			if cm.recStart < 0 || r.StartNs < cm.recStart {
				cm.recStart = r.StartNs
			}
		}
		k := streamKey{jobRank(c, &r), r.Stream}
		o := r
		o.EnqueueNs, o.StartNs, o.EndNs = int64(startNs), int64(startNs), int64(float64(f.RankEnd[r.Rank])/1e3)
		o.Source = traces.SourceSim
		if c.chose.Result != nil || c.chose.NChannels > 0 {
			o.Algorithm, o.Protocol, o.Channels = c.chose.Algo.String(), c.chose.Proto.String(), int32(c.chose.NChannels)
			if c.call.Coll.IsP2P() {
				o.Algorithm = ""
			}
		}
		rows = append(rows, o)
		q.free[k] = endNs + f.LaunchUs*1e3
		q.head[k]++
	}
	if !math.IsInf(recK, 1) {
		cm.recKernels += recK
	}
	cm.predKernels += predK
	if c.call.Count > 0 {
		if jr.predStart < 0 || startNs < jr.predStart {
			jr.predStart = startNs
		}
		if cm.predStart < 0 || startNs < cm.predStart {
			cm.predStart = startNs
		}
	}
	jr.predEnd = max(jr.predEnd, endNs+f.LaunchUs*1e3)
	cm.predEnd = max(cm.predEnd, endNs+f.LaunchUs*1e3)
	if err := jr.cw.Append(rows...); err != nil {
		return fmt.Errorf("call trace: %w", err)
	}
	c.done = true
	return nil
}

// start puts a call in flight on its communicator.
func (jr *jobReplay) start(c *runCall) error {
	cm := c.group
	rec := func(e *sim.SliceEvent) { jr.addEvent(c, 0, e) }
	var err error
	if c.call.Coll.IsP2P() {
		var p *model.Program
		if p, c.chose, err = cm.sim.Program(c.call); err == nil {
			err = jr.job.Start(cm.sim.Machine, cm.hosts, p, c.idx, rec)
		}
	} else {
		var g *model.ProgGen
		if g, c.chose, err = cm.sim.Generator(c.call); err == nil {
			err = jr.job.StartGen(cm.sim.Machine, cm.hosts, g, c.idx, rec)
		}
	}
	if err != nil {
		return fmt.Errorf("%s: communicator %#x call %d: %w", jr.in, c.comm, c.seq, err)
	}
	return nil
}
