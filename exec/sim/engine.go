package sim

import "math"

// Time is virtual time in picoseconds.
type Time = int64

// Picoseconds per microsecond.
const psPerUs = 1_000_000

// usToPs converts microseconds to picoseconds, rounding to nearest.
func usToPs(us float64) Time { return Time(us*psPerUs + 0.5) }

// Event kinds.
const (
	evWake      uint8 = iota // actor id: continue after a delay
	evFlow                   // flow id, val = version: a flow may have finished
	evTail                   // conn id, val = step: the sender's post becomes visible
	evHead                   // conn id, val = step: the receiver's credit becomes visible
	evStarted                // conn id, val = step: first LL/LL128 lines visible
	evProxyRecv              // conn id, val = step: a slice reaches the receiver's socket proxy
)

// event is one entry of the queue. Events are ordered by time; ties in
// time run in the order they were scheduled, which makes a run
// deterministic.
type event struct {
	t    Time
	val  uint64
	id   int32
	kind uint8
}

// qent is an event as its bucket keeps it (the bucket has its time), in
// 16 bytes.
type qent struct {
	val  uint64
	id   int32
	kind uint8
}

// queue orders events by (time, order of scheduling). Collectives move in
// lockstep, so the events in flight share few distinct times (tens, for
// thousands of events): the queue keeps one FIFO bucket per distinct
// time, and the buckets sorted by time. A push appends to its time's
// bucket (found by a small cache of recent times, else by binary
// search), a pop takes the head of the earliest bucket. Appending in scheduling order
// makes each bucket's FIFO the (time, sequence) order of a heap with
// sequence numbers, so the order of events is exactly that of a priority
// queue on (t, seq).
type queue struct {
	b []bucket
	// order[:k] lists the buckets holding events, by decreasing time (the
	// earliest is last), with their times (searched without touching the
	// buckets); order[k:] are the other buckets, free
	order []slot
	k     int
	// cache[cacheSlot(t)] is one more than the bucket a recent push at
	// time t went to (0: none; a bucket that changed time since fails
	// the check of its time)
	cache [queueCache]int32
}

// queueCache is the number of entries of the queue's cache of buckets.
const queueCache = 16

// cacheSlot is the entry of time t in the queue's cache.
func cacheSlot(t Time) uint64 {
	return uint64(t) * 0x9e3779b97f4a7c15 >> 60
}

// noTime is the time of a free bucket: no event has it.
const noTime = Time(math.MinInt64)

// slot is a bucket in the time order.
type slot struct {
	t  Time
	bi int32
}

// bucket holds the events of one time, in scheduling order: ev[head:n]
// are still to pop (len(ev) is its capacity).
type bucket struct {
	t       Time
	head, n int
	ev      []qent
	id      int32 // index in queue.b
}

// push schedules an event at time t.
func (q *queue) push(t Time, kind uint8, id int32, val uint64) {
	h := cacheSlot(t)
	if l := q.cache[h] - 1; l >= 0 {
		if bk := &q.b[l]; bk.t == t && bk.n < len(bk.ev) {
			bk.ev[bk.n] = qent{val: val, id: id, kind: kind}
			bk.n++
			return
		}
	}
	q.pushSlow(t, h, kind, id, val)
}

// pushSlow is push to a bucket the cache does not have, or to a full one.
func (q *queue) pushSlow(t Time, h uint64, kind uint8, id int32, val uint64) {
	var bk *bucket
	if l := q.cache[h] - 1; l >= 0 && q.b[l].t == t {
		bk = &q.b[l]
	} else {
		bk = q.bucket(t)
		q.cache[h] = bk.id + 1
	}
	if bk.n == len(bk.ev) {
		bk.grow()
	}
	bk.ev[bk.n] = qent{val: val, id: id, kind: kind}
	bk.n++
}

// bucket finds or makes the bucket of time t.
func (q *queue) bucket(t Time) *bucket {
	// Binary search for t in order (decreasing times).
	lo, hi := 0, q.k
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.order[m].t > t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < q.k && q.order[lo].t == t {
		return &q.b[q.order[lo].bi]
	}
	if q.k == len(q.order) {
		q.b = append(q.b, bucket{id: int32(len(q.b))})
		q.order = append(q.order, slot{bi: int32(len(q.b) - 1)})
	}
	// order[k] is free: insert it at lo.
	bi := q.order[q.k].bi
	copy(q.order[lo+1:q.k+1], q.order[lo:q.k])
	q.order[lo] = slot{t: t, bi: bi}
	q.k++
	bk := &q.b[bi]
	bk.t = t
	bk.head, bk.n = 0, 0
	return bk
}

// grow makes room for one more event in a full bucket: a bucket whose
// first half or more has been popped moves its events to the front
// rather than growing (the bucket of the current time keeps receiving
// events while it drains).
func (bk *bucket) grow() {
	if bk.head > 0 && 2*bk.head >= bk.n {
		bk.n = copy(bk.ev, bk.ev[bk.head:bk.n])
		bk.head = 0
		return
	}
	ev := make([]qent, max(16, 2*len(bk.ev)))
	copy(ev, bk.ev[:bk.n])
	bk.ev = ev
}

// pop removes the earliest event (small enough to inline). A drained
// bucket leaves the order (it stays at order[k], free) and takes a time
// no push matches.
func (q *queue) pop() event {
	bk := &q.b[q.order[q.k-1].bi]
	e := bk.ev[bk.head]
	bk.head++
	t := bk.t
	if bk.head == bk.n {
		q.k--
		bk.t = noTime
	}
	return event{t: t, val: e.val, id: e.id, kind: e.kind}
}

// nextTime is the time of the earliest event (the queue must not be
// empty).
func (q *queue) nextTime() Time { return q.order[q.k-1].t }

// empty reports whether no event is left.
func (q *queue) empty() bool { return q.k == 0 }
