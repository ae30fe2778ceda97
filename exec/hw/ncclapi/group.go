package ncclapi

import (
	"sync"
)

// Groups are per thread, as NCCL's (ncclGroupStart/End keep a
// thread-local depth): the C entry points pass the calling thread's id.
// Between the outermost ncclGroupStart and its ncclGroupEnd, calls are
// recorded; ncclGroupEnd first makes the communicators whose creation
// was deferred (ncclCommInitRank, ncclCommSplit of several ranks driven
// by this one thread), all at once since they bootstrap with each other,
// then runs every communicator's calls at once, one goroutine per
// communicator, since a launch's preparation may wait for the peers'.
type group struct {
	depth   int
	creates []func() error
	comms   []*Comm
	calls   map[*Comm][]Call
}

var (
	groupMu sync.Mutex
	groups  = map[int]*group{}
)

// GroupStart is ncclGroupStart on thread tid.
func GroupStart(tid int) {
	groupMu.Lock()
	defer groupMu.Unlock()
	g := groups[tid]
	if g == nil {
		g = &group{calls: map[*Comm][]Call{}}
		groups[tid] = g
	}
	g.depth++
}

// InGroup reports whether thread tid is inside a group.
func InGroup(tid int) bool {
	groupMu.Lock()
	defer groupMu.Unlock()
	return groups[tid] != nil
}

// GroupEnd is ncclGroupEnd on thread tid: the outermost one runs the
// group and returns its first error (an error of a call inside the group
// is also returned here, as NCCL does).
func GroupEnd(tid int) error {
	groupMu.Lock()
	g := groups[tid]
	if g == nil {
		groupMu.Unlock()
		return errorf(InvalidUsage, "ncclGroupEnd without a matching ncclGroupStart")
	}
	g.depth--
	if g.depth > 0 {
		groupMu.Unlock()
		return nil
	}
	delete(groups, tid)
	groupMu.Unlock()
	if err := all(len(g.creates), func(i int) error { return g.creates[i]() }); err != nil {
		return err
	}
	return all(len(g.comms), func(i int) error { return g.comms[i].run(g.calls[g.comms[i]]) })
}

// all runs f(0..n-1) at once and returns the first error by index.
func all(n int, f func(i int) error) error {
	if n == 1 {
		return f(0)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return firstCoded(errs)
}

// Defer records a communicator creation in thread tid's group and reports
// true, or reports false outside a group (the caller then runs it).
func Defer(tid int, create func() error) bool {
	groupMu.Lock()
	defer groupMu.Unlock()
	g := groups[tid]
	if g == nil {
		return false
	}
	g.creates = append(g.creates, create)
	return true
}

// Enqueue is a collective or point-to-point call on c from thread tid:
// checked now, run now outside a group, at ncclGroupEnd inside one. A
// send or receive outside a group is a group of one call.
func Enqueue(tid int, c *Comm, k Call) error {
	if err := k.check(c); err != nil {
		return err
	}
	groupMu.Lock()
	g := groups[tid]
	if g != nil {
		if _, ok := g.calls[c]; !ok {
			g.comms = append(g.comms, c)
		}
		g.calls[c] = append(g.calls[c], k)
		groupMu.Unlock()
		return nil
	}
	groupMu.Unlock()
	return c.run([]Call{k})
}
