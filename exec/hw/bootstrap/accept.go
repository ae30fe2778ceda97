package bootstrap

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// MaxPending bounds the connections of one listener that have not yet
// proved the job's secret (jobs of more ranks allow one per rank, since
// all of them may connect at once). When a new connection arrives with the bound
// reached, the oldest unproven one is closed: a job's own connections
// prove themselves within a round trip, so an attacker must open
// connections faster than that to crowd them out, and silent ones cost
// nothing but a slot until they are evicted or their deadline passes.
const MaxPending = 64

// HandshakeTimeout bounds one connection's handshake (capped by the
// operation timeout): a silent connection is dropped after it.
const HandshakeTimeout = 5 * time.Second

// Acceptor serves a listener: each connection is handled in its own
// goroutine, which calls proven once the connection proved the secret.
// Transient accept errors (EMFILE, ENFILE, ENOBUFS, ECONNABORTED, ...)
// are logged and retried with backoff; only closing the listener ends
// the loop.
type Acceptor struct {
	ln     net.Listener
	max    int
	log    *slog.Logger
	handle func(c net.Conn, proven func())

	mu      sync.Mutex
	pending []net.Conn            // unproven, oldest first
	live    map[net.Conn]struct{} // every connection whose handler runs
	closed  bool
	wg      sync.WaitGroup
	loop    chan struct{}

	// evicted counts unproven connections closed to make room; retried
	// counts transient accept errors survived.
	evicted, retried int
}

// NewAcceptor starts serving ln with at most max unproven connections.
func NewAcceptor(ln net.Listener, max int, log *slog.Logger, handle func(c net.Conn, proven func())) *Acceptor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Acceptor{ln: ln, max: max, log: log, handle: handle, live: map[net.Conn]struct{}{}, loop: make(chan struct{})}
	go a.run()
	return a
}

func (a *Acceptor) run() {
	defer close(a.loop)
	backoff := time.Duration(0)
	for {
		c, err := a.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || a.isClosed() {
				return
			}
			// NCCL's and net/http's answer to EMFILE and friends: wait
			// and try again; the error is the host's state, not ours.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			a.mu.Lock()
			a.retried++
			a.mu.Unlock()
			a.log.Warn("bootstrap: accept failed; retrying", "err", err, "after", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		a.mu.Lock()
		if a.closed {
			a.mu.Unlock()
			c.Close()
			return
		}
		if len(a.pending) >= a.max {
			old := a.pending[0]
			a.pending = a.pending[1:]
			a.evicted++
			old.Close()
		}
		a.pending = append(a.pending, c)
		a.live[c] = struct{}{}
		a.wg.Add(1)
		a.mu.Unlock()
		go func() {
			defer a.wg.Done()
			a.handle(c, func() { a.prove(c) })
			a.mu.Lock()
			delete(a.live, c)
			a.unpend(c)
			a.mu.Unlock()
		}()
	}
}

func (a *Acceptor) isClosed() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.closed
}

func (a *Acceptor) prove(c net.Conn) {
	a.mu.Lock()
	a.unpend(c)
	a.mu.Unlock()
}

func (a *Acceptor) unpend(c net.Conn) {
	for i, p := range a.pending {
		if p == c {
			a.pending = append(a.pending[:i], a.pending[i+1:]...)
			return
		}
	}
}

// Pending is the number of unproven connections.
func (a *Acceptor) Pending() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.pending)
}

// Counts is the number of unproven connections evicted and of transient
// accept errors survived.
func (a *Acceptor) Counts() (evicted, retried int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.evicted, a.retried
}

// Close stops accepting, closes every connection whose handler still
// runs, and waits for the handlers.
func (a *Acceptor) Close() {
	a.mu.Lock()
	a.closed = true
	for c := range a.live {
		c.Close()
	}
	a.mu.Unlock()
	a.ln.Close()
	<-a.loop
	a.wg.Wait()
}
