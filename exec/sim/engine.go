package sim

// Time is virtual time in picoseconds.
type Time = int64

// Picoseconds per microsecond.
const psPerUs = 1_000_000

// usToPs converts microseconds to picoseconds, rounding to nearest.
func usToPs(us float64) Time { return Time(us*psPerUs + 0.5) }

// Event kinds.
const (
	evWake    uint8 = iota // actor id: continue after a delay
	evFlow                 // flow id, val = version: a flow may have finished
	evTail                 // conn id, val = step: the sender's post becomes visible
	evHead                 // conn id, val = step: the receiver's credit becomes visible
	evStarted              // conn id, val = step: first LL/LL128 lines visible
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

// queue orders events by (time, order of scheduling). Collectives move in
// lockstep, so the events in flight share few distinct times (tens, for
// thousands of events): the queue keeps one FIFO bucket per distinct
// time, and the buckets sorted by time. A push appends to its time's
// bucket (found by a cache of the last one, else by binary search), a pop
// takes the head of the earliest bucket. Appending in scheduling order
// makes each bucket's FIFO the (time, sequence) order of a heap with
// sequence numbers, so the order of events is exactly that of a priority
// queue on (t, seq).
type queue struct {
	b []bucket
	// order lists the buckets holding events, by decreasing time (the
	// earliest is last), with their times (searched without touching the
	// buckets)
	order []slot
	free  []int32
	// last is one more than the bucket the last push went to (0: none)
	last int32
	n    int
}

// slot is a bucket in the time order.
type slot struct {
	t  Time
	bi int32
}

// bucket holds the events of one time, in scheduling order from head on.
type bucket struct {
	t    Time
	head int
	ev   []event
}

func (q *queue) push(t Time, kind uint8, id int32, val uint64) {
	q.n++
	e := event{t: t, val: val, id: id, kind: kind}
	if l := q.last - 1; l >= 0 && q.b[l].t == t {
		q.b[l].add(e)
		return
	}
	// Binary search for t in order (decreasing times).
	lo, hi := 0, len(q.order)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if q.order[m].t > t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo < len(q.order) && q.order[lo].t == t {
		bi := q.order[lo].bi
		q.b[bi].add(e)
		q.last = bi + 1
		return
	}
	var bi int32
	if n := len(q.free); n > 0 {
		bi = q.free[n-1]
		q.free = q.free[:n-1]
	} else {
		q.b = append(q.b, bucket{})
		bi = int32(len(q.b) - 1)
	}
	bk := &q.b[bi]
	bk.t = t
	bk.head = 0
	bk.ev = append(bk.ev[:0], e)
	q.order = append(q.order, slot{})
	copy(q.order[lo+1:], q.order[lo:])
	q.order[lo] = slot{t: t, bi: bi}
	q.last = bi + 1
}

// add appends e to the bucket. A full bucket whose first half or more
// has been popped moves its events to the front rather than growing (the
// bucket of the current time keeps receiving events while it drains).
func (bk *bucket) add(e event) {
	if len(bk.ev) == cap(bk.ev) && bk.head > 0 && 2*bk.head >= len(bk.ev) {
		n := copy(bk.ev, bk.ev[bk.head:])
		bk.ev = bk.ev[:n]
		bk.head = 0
	}
	bk.ev = append(bk.ev, e)
}

func (q *queue) pop() event {
	q.n--
	k := len(q.order) - 1
	bi := q.order[k].bi
	bk := &q.b[bi]
	e := bk.ev[bk.head]
	bk.head++
	if bk.head == len(bk.ev) {
		q.order = q.order[:k]
		q.free = append(q.free, bi)
		if q.last == bi+1 {
			q.last = 0
		}
	}
	return e
}

func (q *queue) empty() bool { return q.n == 0 }
