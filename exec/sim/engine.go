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

// event is one entry of the queue. Events are ordered by (t, seq): ties
// in time run in the order they were scheduled, which makes a run
// deterministic.
type event struct {
	t    Time
	seq  uint64
	val  uint64
	id   int32
	kind uint8
}

// queue is a binary min-heap of events, specialised (no interfaces) so the
// hot path does not allocate or dispatch dynamically.
type queue struct {
	h   []event
	seq uint64
}

// before orders events by (time, sequence number).
func before(a, b *event) bool {
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

// The heap is 4-ary: half the depth of a binary heap, and the four
// children of a node share a cache line or two. Sifting moves a hole
// instead of swapping.
func (q *queue) push(t Time, kind uint8, id int32, val uint64) {
	q.seq++
	e := event{t: t, seq: q.seq, val: val, id: id, kind: kind}
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !before(&e, &q.h[p]) {
			break
		}
		q.h[i] = q.h[p]
		i = p
	}
	q.h[i] = e
}

func (q *queue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	e := q.h[n]
	q.h = q.h[:n]
	if n == 0 {
		return top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if before(&q.h[j], &q.h[m]) {
				m = j
			}
		}
		if !before(&q.h[m], &e) {
			break
		}
		q.h[i] = q.h[m]
		i = m
	}
	q.h[i] = e
	return top
}

func (q *queue) empty() bool { return len(q.h) == 0 }
