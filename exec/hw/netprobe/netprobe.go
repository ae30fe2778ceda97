// Package netprobe measures what a host's TCP stack gives a socket
// network proxy at the moment it runs: the one-way latency of a small
// message between two busy-polling threads, and the copy throughput of a
// bulk transfer in one direction and in both at once.
//
// NCCL's socket plugin (and twinccl's) moves every byte through the
// kernel's TCP stack on a proxy thread per rank, so on loopback (ranks of
// one machine posing as hosts) its times follow how fast that machine's
// CPUs copy and switch at the time; the same machine moved them by 40-60%
// from one start to the next. A probe recorded beside the timings lets
// the simulator scale its socket constants to the host that ran them.
package netprobe

import (
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sort"
	"syscall"
	"time"
)

// Result is one probe of a host's sockets.
type Result struct {
	// LatencyUs is the one-way time of an 8-byte message between two
	// busy-polling threads (half the median round trip), microseconds.
	LatencyUs float64 `json:"latency_us"`
	// OneWayGBps is the throughput of a bulk transfer in one direction,
	// BothWaysGBps that of each direction while both run at once, 1e9
	// bytes per second.
	OneWayGBps   float64 `json:"one_way_GBps"`
	BothWaysGBps float64 `json:"both_ways_GBps"`
	// Addr is the address the probe ran on.
	Addr string `json:"addr"`
}

// String is the result on one line, as run netprobe and run gpu print it.
func (r Result) String() string {
	return fmt.Sprintf("latency %.2f us, one way %.2f GB/s, both ways %.2f GB/s each", r.LatencyUs, r.OneWayGBps, r.BothWaysGBps)
}

// Options set a probe's size. The zero value takes the defaults.
type Options struct {
	// Addr is the local address to listen on ("127.0.0.1:0" if empty).
	Addr string
	// Bytes is the size of each bulk transfer (32 MiB if 0), Chunk the
	// size of one write (512 KiB if 0).
	Bytes, Chunk int
	// RoundTrips is the number of timed round trips (1000 if 0).
	RoundTrips int
	// Repeats is how many times each measurement runs; the best is kept
	// (3 if 0).
	Repeats int
	// Timeout bounds the whole probe (10 s if 0).
	Timeout time.Duration
}

func (o *Options) defaults() {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	if o.Bytes <= 0 {
		o.Bytes = 32 << 20
	}
	if o.Chunk <= 0 {
		o.Chunk = 512 << 10
	}
	if o.RoundTrips <= 0 {
		o.RoundTrips = 1000
	}
	if o.Repeats <= 0 {
		o.Repeats = 3
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
}

// Loopback probes the sockets of this host: both ends run in this
// process, each on its own locked OS thread.
func Loopback(o Options) (Result, error) {
	o.defaults()
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return Result{}, fmt.Errorf("netprobe: listen on %s: %w", o.Addr, err)
	}
	defer ln.Close()
	deadline := time.Now().Add(o.Timeout)
	a, b, err := pair(ln, deadline)
	if err != nil {
		return Result{}, err
	}
	defer a.Close()
	defer b.Close()
	r := Result{Addr: ln.Addr().String()}
	for i := 0; i < o.Repeats; i++ {
		lat, err := pingPong(a, b, o.RoundTrips)
		if err != nil {
			return Result{}, fmt.Errorf("netprobe: round trips: %w", err)
		}
		one, err := bulk(a, b, o.Bytes, o.Chunk, false)
		if err != nil {
			return Result{}, fmt.Errorf("netprobe: one-way transfer: %w", err)
		}
		both, err := bulk(a, b, o.Bytes, o.Chunk, true)
		if err != nil {
			return Result{}, fmt.Errorf("netprobe: two-way transfer: %w", err)
		}
		if i == 0 || lat < r.LatencyUs {
			r.LatencyUs = lat
		}
		r.OneWayGBps = max(r.OneWayGBps, one)
		r.BothWaysGBps = max(r.BothWaysGBps, both)
	}
	return r, nil
}

// pair connects a client to ln and returns both ends, with TCP_NODELAY
// (as NCCL's sockets) and deadline set.
func pair(ln net.Listener, deadline time.Time) (*net.TCPConn, *net.TCPConn, error) {
	type accepted struct {
		c   net.Conn
		err error
	}
	ch := make(chan accepted, 1)
	go func() {
		c, err := ln.Accept()
		ch <- accepted{c, err}
	}()
	d := net.Dialer{Deadline: deadline}
	c, err := d.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, fmt.Errorf("netprobe: connect to %s: %w", ln.Addr(), err)
	}
	var s accepted
	select {
	case s = <-ch:
	case <-time.After(time.Until(deadline)):
		s.err = errors.New("timed out")
	}
	if s.err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("netprobe: accept on %s: %w", ln.Addr(), s.err)
	}
	a, b := c.(*net.TCPConn), s.c.(*net.TCPConn)
	for _, x := range []*net.TCPConn{a, b} {
		x.SetNoDelay(true)
		x.SetDeadline(deadline)
	}
	return a, b, nil
}

// pingPong returns half the median round trip (us) of an 8-byte message
// echoed by b, both ends polling their sockets without blocking.
func pingPong(a, b *net.TCPConn, n int) (float64, error) {
	echo := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, 8)
		for i := 0; i < n+n/10; i++ {
			if err := spinRead(b, buf); err != nil {
				echo <- err
				return
			}
			if _, err := b.Write(buf); err != nil {
				echo <- err
				return
			}
		}
		echo <- nil
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg := []byte("12345678")
	buf := make([]byte, 8)
	rtts := make([]float64, 0, n)
	for i := 0; i < n+n/10; i++ {
		t0 := time.Now()
		if _, err := a.Write(msg); err != nil {
			return 0, err
		}
		if err := spinRead(a, buf); err != nil {
			return 0, err
		}
		if i >= n/10 { // the first tenth warms up
			rtts = append(rtts, time.Since(t0).Seconds()*1e6)
		}
	}
	if err := <-echo; err != nil {
		return 0, err
	}
	sort.Float64s(rtts)
	return rtts[len(rtts)/2] / 2, nil
}

// spinRead fills buf from c, retrying the non-blocking read at once
// instead of parking in the poller (a proxy thread busy-polls).
func spinRead(c *net.TCPConn, buf []byte) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	got := 0
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		for got < len(buf) {
			k, err := syscall.Read(int(fd), buf[got:])
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR:
				continue
			case err != nil:
				rerr = err
				return true
			case k == 0:
				rerr = io.ErrUnexpectedEOF
				return true
			}
			got += k
		}
		return true
	})
	if err != nil {
		return err
	}
	return rerr
}

// bulk sends size bytes from a to b in chunk writes (and as many from b
// to a at the same time when both) and returns the throughput of one
// direction, 1e9 bytes per second.
func bulk(a, b *net.TCPConn, size, chunk int, both bool) (float64, error) {
	errs := make(chan error, 4)
	send := func(c *net.TCPConn) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, chunk)
		for left := size; left > 0; left -= chunk {
			if _, err := c.Write(buf[:min(chunk, left)]); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}
	recv := func(c *net.TCPConn) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		buf := make([]byte, chunk)
		var err error
		for got := 0; err == nil && got < size; {
			var k int
			k, err = c.Read(buf[:min(chunk, size-got)])
			got += k
		}
		errs <- err
	}
	t0 := time.Now()
	n := 2
	go send(a)
	go recv(b)
	if both {
		n = 4
		go send(b)
		go recv(a)
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			return 0, err
		}
	}
	return float64(size) / time.Since(t0).Seconds() / 1e9, nil
}
