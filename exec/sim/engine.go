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

func (q *queue) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.t < b.t || (a.t == b.t && a.seq < b.seq)
}

func (q *queue) push(t Time, kind uint8, id int32, val uint64) {
	q.seq++
	q.h = append(q.h, event{t: t, seq: q.seq, val: val, id: id, kind: kind})
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *queue) pop() event {
	top := q.h[0]
	n := len(q.h) - 1
	q.h[0] = q.h[n]
	q.h = q.h[:n]
	i := 0
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && q.less(r, l) {
			m = r
		}
		if !q.less(m, i) {
			break
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
	return top
}

func (q *queue) empty() bool { return len(q.h) == 0 }
