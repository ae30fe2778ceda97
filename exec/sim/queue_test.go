package sim

import (
	"container/heap"
	"math/rand"
	"testing"
)

// refQueue is a binary heap on (time, sequence): the order the bucket
// queue must reproduce.
type refQueue []event

func (h refQueue) Len() int { return len(h) }
func (h refQueue) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].val < h[j].val
}
func (h refQueue) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *refQueue) Push(x any)   { *h = append(*h, x.(event)) }
func (h *refQueue) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// TestQueueOrder checks the bucket queue against the (time, sequence)
// order of a priority queue, with pushes at the current time while its
// bucket drains (where a bucket compacts instead of growing).
func TestQueueOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	var q queue
	var ref refQueue
	var seq uint64
	push := func(at Time) {
		q.push(at, evWake, 0, seq)
		heap.Push(&ref, event{t: at, val: seq})
		seq++
	}
	for i := 0; i < 64; i++ {
		push(Time(rng.Intn(8)))
	}
	steps, compacted := 0, 0
	for ; ref.Len() > 0; steps++ {
		want := heap.Pop(&ref).(event)
		e := q.pop()
		if e.t != want.t || e.val != want.val {
			t.Fatalf("step %d: popped (%d, %d), want (%d, %d)", steps, e.t, e.val, want.t, want.val)
		}
		if steps < 100000 {
			for n := rng.Intn(4); n > 0; n-- {
				at := e.t + Time(rng.Intn(4))
				if rng.Intn(2) == 0 {
					at = e.t // appended to the draining bucket
				}
				for _, sl := range q.order[:q.k] {
					if bk := &q.b[sl.bi]; bk.t == at && bk.head > 0 && bk.n == len(bk.ev) {
						compacted++
					}
				}
				push(at)
			}
		}
	}
	if !q.empty() {
		t.Fatalf("queue not drained: %d times left", q.k)
	}
	if steps < 100000 || compacted == 0 {
		t.Fatalf("%d steps, %d full draining buckets: the test did not exercise the queue", steps, compacted)
	}
}
