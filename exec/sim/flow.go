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
	w    float64
	last Time
	// end is when the flow completes at its current rate; its completion
	// event is queued at due (queued), which may be earlier: a rate cut
	// leaves the event where it is, and the event re-queues itself at end
	// when it fires (one event instead of one per cut).
	end, due Time
	queued   bool
	ver      uint64
	owner    int32 // actor to notify
	active   bool
	frozen   bool
	mark     uint32
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
	byCap     []int32
	// reshares counts sharing recomputations (statistics).
	reshares uint64
	// weighted says a flow of weight other than 1 has started
	weighted bool
	// pending are the resources whose flows changed since the last
	// sharing: flows start and end in bursts at one time, and one sharing
	// after the burst (settle) gives the rates every flow runs at once
	// time moves on, as one after each change would, at a fraction of
	// the cost
	pending []int32
}

// settle recomputes the sharing of the resources whose flows changed, if
// any; the engine calls it before time moves on.
func (f *fabric) settle(q *queue, now Time) {
	// One connected component at a time: the filling's cost grows faster
	// than its size, and a burst touches many independent components.
	g0 := f.gen
	var seed [1]int32
	for _, r := range f.pending {
		// skip a resource some sharing of this settle covered (mark in
		// (g0, gen], wrap-safe)
		if d := f.res[r].mark - g0; d == 0 || d > f.gen-g0 {
			seed[0] = r
			f.reshare(q, now, seed[:])
		}
	}
	f.pending = f.pending[:0]
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
	f.pending = append(f.pending, res...)
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
		f.pending = append(f.pending, res...)
	}
}

// schedule sets flow id's completion at its current rate (rem and rate
// as of now) and makes sure an event is queued no later than that.
func (f *fabric) schedule(q *queue, now Time, id int32) {
	fl := &f.flows[id]
	dt := Time(0)
	if fl.rem > 0 {
		if fl.rate <= 0 {
			// starved: rescheduled when the sharing changes
			fl.ver++
			fl.queued = false
			return
		}
		d := math.Ceil(fl.rem / fl.rate)
		if d > 1e18 {
			d = 1e18
		}
		dt = Time(d)
	}
	fl.end = now + dt
	if fl.queued && fl.due <= fl.end {
		return // the queued event fires first and re-queues itself
	}
	fl.ver++
	fl.due, fl.queued = fl.end, true
	q.push(fl.end, evFlow, id, fl.ver)
}

// done reports whether the evFlow event (id, ver) at now completes the
// flow. An event made stale by a later one is not; an event that fires
// before its flow's end (its rate was cut since) re-queues itself at the
// end and is not either.
func (f *fabric) done(q *queue, now Time, id int32, ver uint64) bool {
	fl := &f.flows[id]
	if !fl.active || fl.ver != ver {
		return false
	}
	if now < fl.end {
		fl.ver++
		fl.due = fl.end
		q.push(fl.end, evFlow, id, fl.ver)
		return false
	}
	fl.queued = false
	return true
}

// reshare recomputes the max-min fair rates of the connected component of
// flows and resources reachable from seeds (progressive filling), and
// reschedules the flows whose rate changed.
func (f *fabric) reshare(q *queue, now Time, seeds []int32) {
	f.reshares++
	f.gen++
	g := f.gen
	cr := f.compRes[:0]
	cf := f.compFlows[:0]
	old := f.oldRate[:0]
	for _, r := range seeds {
		if rs := &f.res[r]; rs.mark != g {
			rs.mark = g
			rs.remCap = rs.cap
			rs.nUnf = f.weight(rs)
			cr = append(cr, r)
		}
	}
	for i := 0; i < len(cr); i++ {
		for _, fid := range f.res[cr[i]].flows {
			fl := &f.flows[fid]
			if fl.mark == g {
				continue
			}
			fl.mark = g
			cf = append(cf, fid)
			// Bring the flow to now at its old rate.
			if dt := now - fl.last; dt > 0 {
				fl.rem -= fl.rate * float64(dt)
				if fl.rem < 0 {
					fl.rem = 0
				}
			}
			fl.last = now
			fl.frozen = false
			old = append(old, fl.rate)
			for _, r := range fl.res {
				if rs := &f.res[r]; rs.mark != g {
					rs.mark = g
					rs.remCap = rs.cap
					rs.nUnf = f.weight(rs)
					cr = append(cr, r)
				}
			}
		}
	}
	f.oldRate = old
	// The flows by private cap (ties in component order): a flow whose cap
	// is below every resource's fair share freezes at its cap, and
	// freezing it only raises the shares, so every such flow freezes in
	// one pass, in the order the lowest-cap-first filling takes them.
	byCap := append(f.byCap[:0], cf...)
	slices.SortStableFunc(byCap, func(a, b int32) int { return cmp.Compare(f.flows[a].cap, f.flows[b].cap) })
	f.byCap = byCap
	next := 0
	left := len(cf)
	for left > 0 {
		best := math.Inf(1)
		bestRes := int32(-1)
		for _, r := range cr {
			rs := &f.res[r]
			if rs.nUnf > 0 {
				if s := rs.remCap / rs.nUnf; s < best {
					best, bestRes = s, r
				}
			}
		}
		capped := false
		for ; next < len(byCap); next++ {
			fl := &f.flows[byCap[next]]
			if fl.frozen {
				continue
			}
			if !(fl.cap < best) {
				break
			}
			f.freeze(byCap[next], max(fl.cap, 0))
			left--
			capped = true
		}
		if capped {
			continue // the shares rose: find the bottleneck again
		}
		if bestRes < 0 {
			break // no resource constrains the rest (cannot happen: every flow here has one)
		}
		for _, fid := range f.res[bestRes].flows {
			if !f.flows[fid].frozen {
				f.freeze(fid, max(best, 0))
				left--
			}
		}
	}
	for i, fid := range cf {
		if f.flows[fid].rate != old[i] {
			f.schedule(q, now, fid)
		}
	}
	for _, r := range cr {
		rs := &f.res[r]
		rs.load = 0
		for _, fid := range rs.flows {
			fl := &f.flows[fid]
			rs.load += fl.w * fl.rate
		}
		rs.peak = max(rs.peak, rs.load)
	}
	f.compRes, f.compFlows = cr, cf
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

func (f *fabric) freeze(fid int32, rate float64) {
	fl := &f.flows[fid]
	fl.frozen = true
	fl.rate = rate
	for _, r := range fl.res {
		rs := &f.res[r]
		rs.remCap -= fl.w * rate
		if rs.remCap < 0 {
			rs.remCap = 0
		}
		rs.nUnf -= fl.w
	}
}
