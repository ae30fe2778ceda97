package sim

import (
	"cmp"
	"math"
	"slices"
)

// resource is a shared link (or network port): a capacity in bytes per
// picosecond shared max-min fairly by the flows that cross it.
//
// The fields that every flow start and end touch come first, within one
// cache line; the struct is padded to two lines so that every resource of
// the fabric's array starts on a line.
type resource struct {
	cap float64 // bytes/ps
	// sum of the private caps of its flows: while it stays below cap, the
	// resource constrains none of them (the fast path of start/finish)
	sumCap float64
	// sum of the rates of its flows, and its peak (conservation checks)
	load, peak float64
	// wire bytes carried by finished flows
	bytes float64
	flows []int32 // active flows, in arrival order
	// scratch of the sharing computation: remaining capacity and the
	// weight of the flows not yet frozen (flow weights are whole numbers,
	// so their sum is exact in any order)
	remCap float64
	nUnf   float64
	mark   uint32
	lat    Time
	name   string
	_      [16]byte
}

// flow is one transfer in progress: wire bytes over the resources of a
// route, at a rate recomputed whenever the sharing changes.
type flow struct {
	res  []int32 // resources of the route (shared with the route)
	acct float64 // wire bytes accounted to its resources when it ends
	rem  float64 // wire bytes still to move at last
	rate float64 // bytes/ps
	cap  float64 // private rate cap (bytes/ps), +Inf when none
	// w is the number of identical transfers the flow stands for (the
	// fast mode merges identical channels): it loads its resources w times
	// its rate.
	w      float64
	last   Time
	ver    uint64
	owner  int32 // actor to notify
	active bool
	frozen bool
	mark   uint32
}

// fabric is the set of resources and the flows in progress.
type fabric struct {
	res   []resource
	flows []flow
	free  []int32
	gen   uint32
	// component scratch
	compRes   []int32
	compFlows []int32
	oldRate   []float64
	byCap     []capRank
	// reshares counts sharing recomputations (statistics).
	reshares uint64
	// weighted says a flow of weight other than 1 has started
	weighted bool
	// batch defers the sharing recomputations that starts and ends ask for
	// to flush, which the event loop calls once every event of the current
	// time has run: the max-min rates depend only on the set of flows in
	// progress, so one recomputation after the last change of a time gives
	// the rates that one after each change would end with (collectives
	// move in lockstep: nearly every recomputation shares its time with
	// others, often on the same resources). pending holds the resources
	// whose sharing is out of date; a flow started meanwhile has no rate
	// and no completion event until the flush.
	batch   bool
	pending []int32
}

// addResource appends a resource and returns its id.
func (f *fabric) addResource(name string, gbps float64, lat Time) int32 {
	f.res = append(f.res, resource{name: name, cap: gbps * 1e-3, lat: lat})
	return int32(len(f.res) - 1)
}

// start begins a flow of wire bytes over res, capped at capBpps (bytes
// per ps), owned by actor owner. Completion is announced by an evFlow
// event on q.
//
// The flow stands for w identical transfers (w >= 1): it weighs w times on
// the sharing of its resources, and accounts w times its bytes.
func (f *fabric) start(q *queue, now Time, res []int32, wire, acct float64, capBpps, w float64, owner int32) int32 {
	var id int32
	if n := len(f.free); n > 0 {
		id = f.free[n-1]
		f.free = f.free[:n-1]
	} else {
		f.flows = append(f.flows, flow{})
		id = int32(len(f.flows) - 1)
	}
	fl := &f.flows[id]
	if w != 1 {
		f.weighted = true
	}
	ver := fl.ver + 1
	*fl = flow{res: res, acct: acct, rem: wire, cap: capBpps, w: w, last: now, ver: ver, owner: owner, active: true}
	if len(res) == 0 {
		// A private transfer: no sharing, its cap is its rate.
		fl.rate = capBpps
		f.schedule(q, now, id)
		return id
	}
	free := true
	for _, r := range res {
		rs := &f.res[r]
		rs.flows = append(rs.flows, id)
		rs.sumCap += w * capBpps
		free = free && rs.sumCap <= rs.cap
	}
	if free {
		// Every resource of the route has room for all its flows at their
		// caps: the new flow runs at its cap and nobody else's rate moves.
		fl.rate = capBpps
		for _, r := range res {
			rs := &f.res[r]
			rs.load += w * capBpps
			rs.peak = max(rs.peak, rs.load)
		}
		f.schedule(q, now, id)
		return id
	}
	if f.batch {
		fl.rate = 0
		f.pending = append(f.pending, res...)
		return id
	}
	f.reshare(q, now, res)
	return id
}

// finish retires a completed flow and reshares its resources.
func (f *fabric) finish(q *queue, now Time, id int32) {
	fl := &f.flows[id]
	fl.active = false
	fl.ver++
	free := true
	for _, r := range fl.res {
		rs := &f.res[r]
		free = free && rs.sumCap <= rs.cap
		rs.sumCap -= fl.w * fl.cap
		rs.load -= fl.w * fl.rate
		rs.bytes += fl.w * fl.acct
		for i, x := range rs.flows {
			if x == id {
				copy(rs.flows[i:], rs.flows[i+1:])
				rs.flows = rs.flows[:len(rs.flows)-1]
				break
			}
		}
		if len(rs.flows) == 0 {
			rs.sumCap, rs.load = 0, 0 // no rounding drift across idle periods
		}
	}
	res := fl.res
	f.free = append(f.free, id)
	if len(res) > 0 && !free {
		// Some resource of the route may have held other flows back.
		if f.batch {
			f.pending = append(f.pending, res...)
			return
		}
		f.reshare(q, now, res)
	}
}

// flush runs the sharing recomputation that batched starts and ends left
// pending (see fabric.batch), at now.
func (f *fabric) flush(q *queue, now Time) {
	// One recomputation per connected component: the filling scans its
	// component's resources once per round, so one over their union would
	// cost the square of the number of components.
	g0 := f.gen
	for i, r := range f.pending {
		if f.res[r].mark-g0-1 < f.gen-g0 {
			continue // in the component of an earlier seed of this flush
		}
		f.reshare(q, now, f.pending[i:i+1])
	}
	f.pending = f.pending[:0]
}

// schedule posts the completion event of flow id at its current rate.
func (f *fabric) schedule(q *queue, now Time, id int32) {
	fl := &f.flows[id]
	fl.ver++
	dt := Time(0)
	if fl.rem > 0 {
		if fl.rate <= 0 {
			return // starved: rescheduled when the sharing changes
		}
		d := math.Ceil(fl.rem / fl.rate)
		if d > 1e18 {
			d = 1e18
		}
		dt = Time(d)
	}
	q.push(now+dt, evFlow, id, fl.ver)
}

// current reports whether an evFlow event (id, ver) is the flow's
// current completion (rate changes make earlier events stale).
func (f *fabric) current(id int32, ver uint64) bool {
	fl := &f.flows[id]
	return fl.active && fl.ver == ver
}

// reshare recomputes the max-min fair rates of the connected component of
// flows and resources reachable from seeds (progressive filling), and
// reschedules the flows whose rate changed.
func (f *fabric) reshare(q *queue, now Time, seeds []int32) {
	f.reshares++
	f.gen++
	g := f.gen
	// Local copies of the arrays: stores through the flows and resources
	// below would otherwise make the compiler reload f's slice headers.
	res, flows := f.res, f.flows
	cr := f.compRes[:0]
	cf := f.compFlows[:0]
	old := f.oldRate[:0]
	for _, r := range seeds {
		if rs := &res[r]; rs.mark != g {
			rs.mark = g
			rs.remCap = rs.cap
			rs.nUnf = f.weight(rs)
			cr = append(cr, r)
		}
	}
	for i := 0; i < len(cr); i++ {
		for _, fid := range res[cr[i]].flows {
			fl := &flows[fid]
			if fl.mark == g {
				continue
			}
			fl.mark = g
			cf = append(cf, fid)
			// Bring the flow to now at its old rate.
			if dt := now - fl.last; dt > 0 {
				fl.rem = max(fl.rem-fl.rate*float64(dt), 0)
			}
			fl.last = now
			fl.frozen = false
			old = append(old, fl.rate)
			for _, r := range fl.res {
				if rs := &res[r]; rs.mark != g {
					rs.mark = g
					rs.remCap = rs.cap
					rs.nUnf = f.weight(rs)
					cr = append(cr, r)
				}
			}
		}
	}
	f.oldRate = old
	// Progressive filling: the flows whose cap is below every resource's
	// fair share run at their caps, smallest first; else the resource
	// with the smallest share freezes its flows at it. Freezing a flow
	// below a share only raises the shares, so the flows are visited in
	// cap order once (ties in component order).
	byCap := f.byCap[:0]
	for i, fid := range cf {
		byCap = append(byCap, capRank{cap: flows[fid].cap, i: int32(i)})
	}
	slices.SortFunc(byCap, func(a, b capRank) int {
		if c := cmp.Compare(a.cap, b.cap); c != 0 {
			return c
		}
		return cmp.Compare(a.i, b.i)
	})
	f.byCap = byCap
	left, next := len(cf), 0
	for left > 0 {
		best := math.Inf(1)
		bestRes := int32(-1)
		for _, r := range cr {
			rs := &res[r]
			if rs.nUnf > 0 {
				if s := rs.remCap / rs.nUnf; s < best {
					best, bestRes = s, r
				}
			}
		}
		best = max(best, 0)
		if next < len(byCap) && byCap[next].cap < best {
			for ; next < len(byCap) && byCap[next].cap < best; next++ {
				if fid := cf[byCap[next].i]; !flows[fid].frozen {
					freeze(res, &flows[fid], byCap[next].cap)
					left--
				}
			}
			continue
		}
		if bestRes < 0 {
			break // no resource constrains the rest (cannot happen: every flow here has one)
		}
		for _, fid := range res[bestRes].flows {
			if fl := &flows[fid]; !fl.frozen {
				freeze(res, fl, best)
				left--
			}
		}
	}
	for i, fid := range cf {
		if flows[fid].rate != old[i] {
			f.schedule(q, now, fid)
		}
	}
	for _, r := range cr {
		rs := &res[r]
		load := 0.0
		for _, fid := range rs.flows {
			fl := &flows[fid]
			load += fl.w * fl.rate
		}
		rs.load = load
		rs.peak = max(rs.peak, load)
	}
	f.compRes, f.compFlows = cr, cf
}

// capRank is a flow of a sharing's component (its index there) by cap.
type capRank struct {
	cap float64
	i   int32
}

// weight is the sum of the weights of the flows of a resource.
func (f *fabric) weight(rs *resource) float64 {
	if !f.weighted {
		return float64(len(rs.flows))
	}
	w := 0.0
	for _, fid := range rs.flows {
		w += f.flows[fid].w
	}
	return w
}

// freeze fixes flow fl's rate in a sharing and takes it off what its
// resources have left to share.
func freeze(res []resource, fl *flow, rate float64) {
	fl.frozen = true
	fl.rate = rate
	for _, r := range fl.res {
		rs := &res[r]
		rs.remCap = max(rs.remCap-fl.w*rate, 0)
		rs.nUnf -= fl.w
	}
}
