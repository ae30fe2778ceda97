package transport

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// inlineComm is a socket connection without helper goroutines, NCCL's
// socket plugin by default (NCCL_SOCKET_NTHREADS unset or 0): one socket,
// whose transfers the caller moves itself. Requests queue in the order
// they are posted; Isend, Irecv and every Test move the queue as far as
// the socket lets them without blocking (non-blocking read and write
// system calls on the socket), so a message that arrived is taken by the
// proxy's next poll, with no goroutine to wake between the socket and the
// proxy. This is where the helper mode spends most of a small message's
// time: a hand-off to the helper and back per message.
//
// A proxy that blocks when idle still needs a wake-up when the socket
// becomes readable (or writable, after a full send buffer): a waiter
// goroutine, armed by ArmWake before the proxy blocks, parks on the socket
// in Go's network poller, moves the queue itself when the socket is
// ready, and calls the wake function. A proxy that keeps polling never
// arms it, so a message costs no goroutine wake-up.
//
// The steady state allocates nothing: finished requests are reused (a
// Request ends with the Test that reports it done) and the queue keeps
// its array, so that a long run of collectives gives the garbage
// collector no work: its pauses showed as whole repetitions of a
// small-message benchmark running some microseconds a call slower.
type inlineComm struct {
	conn net.Conn
	raw  syscall.RawConn
	fd   int
	peer int
	send bool // the send side (writes) or the receive side (reads)
	// gather writes a message's header and payload with one system call
	// (SocketOptions.Gather)
	gather bool
	// ahead, on the receive side, is the read-ahead buffer
	// (SocketOptions.ReadAhead; nil: none): a read for a request smaller
	// than it fills it as far as the socket has bytes, and the requests
	// after take theirs from ahead[aheadOff:aheadLen] before reading
	// again, so that a small message's header and payload cost one
	// system call
	ahead              []byte
	aheadOff, aheadLen int
	// ioCalls counts the system calls that moved bytes (for tests)
	ioCalls int

	mu     sync.Mutex
	queue  []*inlineReq // queue[head:] are waiting, in order
	head   int
	free   []*inlineReq // ended requests, for reuse
	err    error        // sticky: the first failure, or the close
	closed bool
	wake   atomic.Pointer[func()]
	arm    chan struct{} // wakes the waiter (buffered: one pending arm)
	done   chan struct{} // closed when the waiter returned
	// ready is the waiter's callback for the network poller, made once;
	// readyMoved is what it found (both owned by the waiter)
	ready      func(uintptr) bool
	readyMoved bool
}

// inlineReq is a request of an inlineComm: up to two buffers moved in
// order (header and payload).
type inlineReq struct {
	c    *inlineComm
	bufs [2][]byte
	part int // the buffer being moved
	off  int // bytes of it moved
	done bool
	err  error
	// ended is set once a Test reported the request done: it is on the
	// free list, and a further Test is the caller's mistake
	ended bool
}

// errInlineClosed is the error of requests still queued when the
// connection is closed.
var errInlineClosed = errors.New("connection closed")

// errEnded is the error of a Test of a request that an earlier Test
// reported done (the request may be serving another transfer by then).
var errEnded = errors.New("request tested after a Test reported it done")

// newInlineComm takes over conn, a TCP socket that the Go runtime put in
// non-blocking mode (as it does every socket of package net).
func newInlineComm(conn net.Conn, peer int, send bool) (*inlineComm, error) {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return nil, fmt.Errorf("socket plugin: connection with rank %d is a %T, not a socket", peer, conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("socket plugin: connection with rank %d: %w", peer, err)
	}
	fd := -1
	if err := raw.Control(func(f uintptr) { fd = int(f) }); err != nil {
		return nil, fmt.Errorf("socket plugin: connection with rank %d: %w", peer, err)
	}
	c := &inlineComm{conn: conn, raw: raw, fd: fd, peer: peer, send: send, arm: make(chan struct{}, 1), done: make(chan struct{})}
	c.ready = c.pollReady
	go c.waiter()
	return c, nil
}

// Isend queues hdr then data and starts writing them.
func (c *inlineComm) Isend(hdr, data []byte) (Request, error) { return c.post(hdr, data) }

// IrecvHeader queues the read of the next header.
func (c *inlineComm) IrecvHeader(hdr []byte) (Request, error) { return c.post(hdr, nil) }

// Irecv queues the read of a payload.
func (c *inlineComm) Irecv(data []byte) (Request, error) { return c.post(data, nil) }

// SetWake registers the function the waiter calls when the socket moved.
func (c *inlineComm) SetWake(f func()) { c.wake.Store(&f) }

// ArmWake makes the waiter call the wake function when the queue moves
// next (at once if the socket is ready already).
func (c *inlineComm) ArmWake() {
	select {
	case c.arm <- struct{}{}:
	default:
	}
}

func (c *inlineComm) post(a, b []byte) (Request, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("socket plugin: connection with rank %d closed", c.peer)
	}
	var r *inlineReq
	if n := len(c.free); n > 0 {
		r, c.free = c.free[n-1], c.free[:n-1]
		*r = inlineReq{c: c}
	} else {
		r = &inlineReq{c: c}
	}
	r.bufs = [2][]byte{a, b}
	if c.err != nil {
		r.done, r.err = true, c.err
		return r, nil
	}
	c.queue = append(c.queue, r)
	c.advance()
	return r, nil
}

// Test moves the queue and reports whether r is done, with its error; a
// done request goes back to the free list.
func (r *inlineReq) Test() (bool, error) {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.ended {
		return true, fmt.Errorf("socket plugin: connection with rank %d: %w", c.peer, errEnded)
	}
	if !r.done {
		c.advance()
	}
	done, err := r.done, r.err
	if done {
		*r = inlineReq{c: c, ended: true}
		c.free = append(c.free, r)
	}
	return done, err
}

// advance moves the queued requests in order with non-blocking system
// calls (c.mu held); blocked is true when requests remain because the
// socket would block. A failure ends every queued request with the error.
func (c *inlineComm) advance() (blocked bool) {
	for c.head < len(c.queue) {
		r := c.queue[c.head]
		for r.part < len(r.bufs) {
			b := r.bufs[r.part][r.off:]
			if len(b) == 0 {
				r.part, r.off = r.part+1, 0
				continue
			}
			var n int
			var err error
			if next := r.bufs[1]; c.send && c.gather && r.part == 0 && len(next) > 0 {
				n, err = sendv(c.fd, b, next)
				if n > len(b) {
					r.part, r.off, n = 1, 0, n-len(b)
				}
			} else if c.ahead != nil {
				var sys bool
				if n, sys, err = c.readAhead(b); !sys && err == nil {
					r.off += n // from the buffer: no system call
					continue
				}
			} else {
				n, err = c.io(b)
			}
			switch {
			case err == syscall.EAGAIN:
				return true
			case err == syscall.EINTR:
				continue
			case err != nil:
				c.fail(fmt.Errorf("socket plugin: connection with rank %d: %w", c.peer, err))
				return false
			case n == 0:
				c.fail(fmt.Errorf("socket plugin: rank %d closed the connection", c.peer))
				return false
			}
			r.off += n
			c.ioCalls++
		}
		r.done = true
		c.pop()
	}
	return false
}

// pop takes the first waiting request off the queue (c.mu held); the
// array is reused once the queue is empty.
func (c *inlineComm) pop() {
	c.queue[c.head] = nil
	if c.head++; c.head == len(c.queue) {
		c.queue, c.head = c.queue[:0], 0
	}
}

// io is one non-blocking read or write on the socket (no SIGPIPE when the
// peer is gone: EPIPE comes back as an error).
func (c *inlineComm) io(b []byte) (int, error) {
	if c.send {
		return syscall.SendmsgN(c.fd, b, nil, nil, syscall.MSG_NOSIGNAL|syscall.MSG_DONTWAIT)
	}
	return syscall.Read(c.fd, b)
}

// readAhead reads into b on the receive side with a read-ahead buffer
// (c.mu held): from the bytes buffered by an earlier read if there are any
// (sys false), else with one read system call, into b directly when b is
// at least the buffer's size, otherwise into the buffer, whose first
// bytes then go to b and the rest wait for the requests after.
func (c *inlineComm) readAhead(b []byte) (n int, sys bool, err error) {
	if c.aheadOff < c.aheadLen {
		n = copy(b, c.ahead[c.aheadOff:c.aheadLen])
		c.aheadOff += n
		return n, false, nil
	}
	if len(b) >= len(c.ahead) {
		n, err = syscall.Read(c.fd, b)
		return n, true, err
	}
	m, err := syscall.Read(c.fd, c.ahead)
	if err != nil || m <= 0 {
		return m, true, err
	}
	n = copy(b, c.ahead[:m])
	c.aheadOff, c.aheadLen = n, m
	return n, true, nil
}

// sendv writes a then b (both non-empty) with one non-blocking sendmsg
// system call, without SIGPIPE, and returns the bytes written.
func sendv(fd int, a, b []byte) (int, error) {
	return unix.SendmsgBuffers(fd, [][]byte{a, b}, nil, nil, unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT)
}

// fail ends every queued request with err (c.mu held); later requests
// fail at once.
func (c *inlineComm) fail(err error) {
	if c.err == nil {
		c.err = err
	}
	for _, r := range c.queue[c.head:] {
		r.done, r.err = true, c.err
	}
	clear(c.queue)
	c.queue, c.head = c.queue[:0], 0
}

// waiter waits, each time it is armed, for the socket to become ready
// (in the network poller: Go's RawConn parks until the socket is readable
// or writable), moves the queue, and wakes the proxy. It returns when the
// connection is closed.
func (c *inlineComm) waiter() {
	defer close(c.done)
	wait := c.raw.Read
	if c.send {
		wait = c.raw.Write
	}
	for range c.arm {
		c.readyMoved = false
		if err := wait(c.ready); err != nil {
			return // closed
		}
		if w := c.wake.Load(); w != nil && c.readyMoved {
			(*w)()
		}
	}
}

// pollReady is the waiter's callback from the network poller: it moves
// the queue and reports whether the waiter is done waiting (the queue no
// longer blocked on the socket, or the connection closed).
func (c *inlineComm) pollReady(uintptr) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return true
	}
	before := len(c.queue) - c.head
	blocked := c.advance()
	c.readyMoved = c.readyMoved || len(c.queue)-c.head != before || c.err != nil
	return !blocked
}

// Close fails what is queued, closes the socket (a waiter parked on it
// returns) and waits for the waiter.
func (c *inlineComm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.fail(fmt.Errorf("socket plugin: connection with rank %d: %w", c.peer, errInlineClosed))
	close(c.arm)
	c.mu.Unlock()
	err := c.conn.Close()
	<-c.done
	return err
}
