package transport

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
)

// FlushFunc is the flush hook of the net transport: the progress loop
// calls it after a receive completed and before the step is handed to the
// device (NCCL's GPUDirect flush, an iflush read-back that makes data
// written by the NIC visible to the GPU). data is the received payload in
// the connection's memory (Simple) or in the proxy's staging buffer
// (LL, LL128). The host device needs none: its default is a no-op.
type FlushFunc func(c *Conn, step uint64, data []byte) error

// netConn is the proxy state of one side of a net connection: NCCL's
// posted/transmitted/received/done counters and the requests in flight.
type netConn struct {
	send SendComm
	recv RecvComm

	// Counters (absolute steps), for traces and tests. Sender: posted
	// (isend issued), transmitted (isend done), done (credit returned).
	// Receiver: posted (header read, payload wanted), received (payload
	// in), transmitted (flushed), done (handed to the device).
	Posted, Transmitted, Received, Done atomic.Uint64
	// Flushes counts calls of the flush hook.
	Flushes atomic.Uint64

	failed atomic.Bool // the progress loop dropped it after an error
	kick   func()      // wakes the progress loop (set when attached)
	// timeouts counts the wake-ups of its progress loop by the idle
	// timer (set when attached; see NetCounters.Timeouts)
	timeouts *atomic.Uint64

	// Progress state, owned by the progress goroutine.
	hdrs     [model.ProgSlots][HeaderSize]byte
	inflight []netOp
	next     uint64 // sender: next step to post
	hdrReq   Request
	hdrBuf   [HeaderSize]byte
	hdrOK    bool // hdrBuf holds a header waiting for credit
	staging  [model.NumProtocols][]byte
	bye      bool // receiver: the sender said goodbye
}

func (n *netConn) notify() {
	if n.kick != nil {
		n.kick()
	}
}

func (n *netConn) close() error {
	if n.send != nil {
		return n.send.Close()
	}
	return n.recv.Close()
}

// netOp is one transfer in flight (or a step skipped by rounding: req nil).
type netOp struct {
	req  Request
	end  uint64 // absolute step after the transfer
	slot int
	e    FifoEntry
	buf  []byte // receiver: where the payload lands
}

// progress is the proxy's progress loop: one goroutine on a locked OS
// thread that drives every net connection of a rank step by step,
// polling the device counters and the plugin's requests (NCCL's
// proxyProgress). It sleeps when nothing moved for a while and is woken
// by the device (Conn.Notify) or by a completed request.
type progress struct {
	comm  *bootstrap.Comm
	log   *slog.Logger
	flush FlushFunc

	mu     sync.Mutex
	add    []*Conn
	remove []*Conn
	stopCh chan struct{}
	kick   chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup // failure reports
	conns  []*Conn        // owned by the loop
	// polled is set when a device moves the counters without calling
	// Conn.Notify (see ProxyService.PollCounters).
	polled atomic.Bool
	// timeouts counts the loop's wake-ups by its idle timer rather than
	// by an event
	timeouts atomic.Uint64
}

func newProgress(comm *bootstrap.Comm, log *slog.Logger, flush FlushFunc) *progress {
	if flush == nil {
		flush = func(*Conn, uint64, []byte) error { return nil }
	}
	p := &progress{comm: comm, log: log, flush: flush, stopCh: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
	go p.loop()
	return p
}

// wake makes a sleeping loop look at its connections again.
func (p *progress) wake() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// attach hands a connected net connection to the loop.
func (p *progress) attach(c *Conn) {
	if c.net.send != nil {
		c.net.send.SetWake(p.wake)
	} else {
		c.net.recv.SetWake(p.wake)
	}
	c.net.kick = p.wake
	c.net.timeouts = &p.timeouts
	p.mu.Lock()
	p.add = append(p.add, c)
	p.mu.Unlock()
	p.wake()
}

// detach removes c from the loop (the caller closes it afterwards); it
// returns once the loop let go of it.
func (p *progress) detach(c *Conn) {
	p.mu.Lock()
	p.remove = append(p.remove, c)
	p.mu.Unlock()
	p.wake()
	for {
		p.mu.Lock()
		pending := false
		for _, x := range p.remove {
			if x == c {
				pending = true
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			return
		default:
		}
		if !pending {
			return
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// stop ends the loop: senders say goodbye (a header with step -1) after
// what they have in flight, so that receivers close without reporting a
// loss; then every connection's comm is closed by the caller.
func (p *progress) stop() {
	select {
	case <-p.stopCh:
	default:
		close(p.stopCh)
	}
	<-p.done
	p.wg.Wait()
}

func (p *progress) loop() {
	defer close(p.done)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	idle := 0
	timer := time.NewTimer(progressSleep)
	timer.Stop()
	var bo Backoff
	var quiet time.Time // when the connections last stopped moving (polled mode)
	for {
		select {
		case <-p.stopCh:
			p.goodbye()
			return
		default:
		}
		p.mu.Lock()
		p.conns = append(p.conns, p.add...)
		p.add = p.add[:0]
		for _, r := range p.remove {
			for i, c := range p.conns {
				if c == r {
					p.conns = append(p.conns[:i], p.conns[i+1:]...)
					break
				}
			}
		}
		p.remove = p.remove[:0]
		p.mu.Unlock()
		moved := false
		keep := p.conns[:0]
		for _, c := range p.conns {
			var ok bool
			var err error
			if c.Send {
				ok, err = p.sendProgress(c)
			} else {
				ok, err = p.recvProgress(c)
			}
			moved = moved || ok
			if err != nil {
				c.net.failed.Store(true)
				p.fail(c, err)
				continue
			}
			if !c.net.bye {
				keep = append(keep, c)
			}
		}
		clear(p.conns[len(keep):])
		p.conns = keep
		if moved {
			idle = 0
			quiet = time.Time{}
			bo.Reset()
			continue
		}
		// Every event that lets a connection move wakes the loop: the
		// device's Notify after it moved a counter, and the plugin when a
		// request completes (armed just before the loop blocks). So after
		// a short spin it blocks (the timer only bounds a missed wake-up).
		if idle++; idle < progressSpin {
			continue
		}
		if p.polled.Load() {
			// A device that moves counters without Notify: keep polling
			// (spin, yield, then brief sleeps) for a while after the last
			// movement or wake-up, then block.
			if quiet.IsZero() {
				quiet = time.Now()
			}
			if time.Since(quiet) < PolledIdle {
				if !bo.Sleeping() {
					bo.Wait()
					continue
				}
				// Past the spin and yield phases: nap, but wake at once
				// on a Notify. A plain sleep held a sender's first steps
				// after an idle spell (a peer late at a barrier) for a
				// timer tick, about a millisecond: whole timed
				// repetitions of small collectives ran 20 us a call slow.
				if p.nap(timer, BackoffSleep) == napWoken {
					quiet = time.Time{}
					bo.Reset()
				}
				continue
			}
		}
		p.armWakes()
		switch p.nap(timer, progressSleep) {
		case napWoken:
			quiet = time.Time{}
			bo.Reset()
		case napExpired:
			p.timeouts.Add(1)
		}
	}
}

// napEnd is how a nap of the progress loop ended.
type napEnd int

const (
	napWoken   napEnd = iota // a wake-up (Notify, a completion)
	napStopped               // the loop's stop
	napExpired               // its time ran out
)

// nap waits up to d for a wake-up or the stop; timer is the loop's
// stopped timer.
func (p *progress) nap(timer *time.Timer, d time.Duration) napEnd {
	timer.Reset(d)
	defer timer.Stop()
	select {
	case <-p.kick:
		return napWoken
	case <-p.stopCh:
		return napStopped
	case <-timer.C:
		return napExpired
	}
}

// armWakes arms the wake-up of every connection's comm that needs it
// (WakeArmer) before the loop blocks.
func (p *progress) armWakes() {
	for _, c := range p.conns {
		var comm any = c.net.recv
		if c.net.send != nil {
			comm = c.net.send
		}
		if a, ok := comm.(WakeArmer); ok {
			a.ArmWake()
		}
	}
}

// Idle policy of the progress loop: polls without progress before it
// blocks, and the longest block.
const (
	progressSpin  = 16
	progressSleep = 5 * time.Millisecond
)

// goodbye sends the closing header on every send side, after what is in
// flight, and waits (briefly) for them.
func (p *progress) goodbye() {
	var bye [HeaderSize]byte
	binary.LittleEndian.PutUint64(bye[16:], ^uint64(0))
	var reqs []Request
	for _, c := range p.conns {
		if c.net.send != nil && !c.net.failed.Load() {
			if r, err := c.net.send.Isend(bye[:], nil); err == nil {
				reqs = append(reqs, r)
			}
		}
	}
	deadline := time.Now().Add(time.Second)
	for _, r := range reqs {
		for time.Now().Before(deadline) {
			// An error: the peer is gone already, nobody to tell.
			if done, err := r.Test(); done || err != nil {
				break
			}
			time.Sleep(20 * time.Microsecond)
		}
	}
}

// lossGrace is how long a broken data connection waits for the liveness
// connections before it blames its peer: a peer that aborts because a
// third rank died reports that rank on them, and the report may still be
// in flight when its sockets close.
const lossGrace = 100 * time.Millisecond

// fail reports a broken connection, after the grace period, unless the
// set is closing or a loss was reported meanwhile. It does not block the
// loop.
func (p *progress) fail(c *Conn, err error) {
	select {
	case <-p.stopCh:
		return
	default:
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(lossGrace)
		defer t.Stop()
		select {
		case <-p.comm.Lost():
			return // already attributed
		case <-p.stopCh:
			return
		case <-t.C:
		}
		p.comm.PeerLost(c.Peer, fmt.Errorf("net %v: %w", c.Key, err))
	}()
}

func putHeader(h []byte, e FifoEntry) {
	binary.LittleEndian.PutUint64(h[0:], uint64(e.Size))
	binary.LittleEndian.PutUint64(h[8:], uint64(e.Wire))
	binary.LittleEndian.PutUint64(h[16:], uint64(e.Step))
	binary.LittleEndian.PutUint32(h[24:], uint32(e.Steps))
	binary.LittleEndian.PutUint32(h[28:], uint32(e.Proto))
}

func getHeader(h []byte) FifoEntry {
	return FifoEntry{
		Size:  int64(binary.LittleEndian.Uint64(h[0:])),
		Wire:  int64(binary.LittleEndian.Uint64(h[8:])),
		Step:  int64(binary.LittleEndian.Uint64(h[16:])),
		Steps: int32(binary.LittleEndian.Uint32(h[24:])),
		Proto: int32(binary.LittleEndian.Uint32(h[28:])),
	}
}

// validEntry checks a fifo entry or header against the slot ring.
func validEntry(e FifoEntry) error {
	pr := model.Protocol(e.Proto)
	if pr < 0 || pr >= model.NumProtocols || e.Step < 0 || e.Steps < 1 || e.Steps > model.ProgSlots || e.Size < 0 || e.Wire < e.Size && pr == model.ProtoSimple {
		return fmt.Errorf("malformed step %+v", e)
	}
	slot := int(uint64(e.Step) % model.ProgSlots)
	if e.Wire < 0 || e.Wire > int64(model.ProtoBuffSize(pr)-slot*SlotStride(pr)) {
		return fmt.Errorf("step %+v does not fit the %s buffer", e, pr)
	}
	return nil
}

// sendProgress advances the send side: steps the device posted (tail)
// are sent with their fifo entry as header, up to ProgSlots in flight
// (posted); finished sends (transmitted) return the credit to the device
// in order (done, head). Steps the device skipped when it rounded its step
// counter are passed over.
func (p *progress) sendProgress(c *Conn) (bool, error) {
	n, m := c.net, c.Mem
	moved := false
	for tail := m.Tail(); n.next < tail && len(n.inflight) < model.ProgSlots; {
		slot := int(n.next % model.ProgSlots)
		e := m.Fifo(slot)
		if e.Step != int64(n.next) || e.Size < 0 {
			n.inflight = append(n.inflight, netOp{end: n.next + 1, slot: -1})
			n.next++
			moved = true
			continue
		}
		if err := validEntry(e); err != nil {
			return moved, fmt.Errorf("send to rank %d: %w", c.Peer, err)
		}
		putHeader(n.hdrs[slot][:], e)
		r, err := n.send.Isend(n.hdrs[slot][:], m.Slot(model.Protocol(e.Proto), slot)[:e.Wire])
		if err != nil {
			return moved, fmt.Errorf("send to rank %d: %w", c.Peer, err)
		}
		n.next += uint64(e.Steps)
		n.inflight = append(n.inflight, netOp{req: r, end: n.next, slot: slot})
		n.Posted.Store(n.next)
		moved = true
	}
	k := 0
	for ; k < len(n.inflight); k++ {
		op := &n.inflight[k]
		if op.req != nil {
			done, err := op.req.Test()
			if err != nil {
				return moved, fmt.Errorf("send to rank %d: %w", c.Peer, err)
			}
			if !done {
				break
			}
			m.SetFifo(op.slot, FifoEntry{Size: -1, Step: -1})
		}
		n.Transmitted.Store(op.end)
		n.Done.Store(op.end)
		m.SetHead(op.end)
		moved = true
	}
	if k > 0 {
		n.inflight = append(n.inflight[:0], n.inflight[k:]...)
	}
	return moved, nil
}

// recvProgress advances the receive side: a header is always being read;
// once the device released the slots it names (head), the payload is
// received into them (Simple) or into a staging buffer (LL, LL128);
// completed receives are flushed and handed to the device in order:
// Simple through the fifo entry and the tail counter, LL and LL128 by
// storing their flagged lines, which the device polls (the tail is not
// used for them).
func (p *progress) recvProgress(c *Conn) (bool, error) {
	n, m := c.net, c.Mem
	moved := false
	for {
		if n.hdrReq == nil && !n.hdrOK && !n.bye {
			r, err := n.recv.IrecvHeader(n.hdrBuf[:])
			if err != nil {
				return moved, fmt.Errorf("receive from rank %d: %w", c.Peer, err)
			}
			n.hdrReq = r
		}
		if n.hdrReq != nil {
			done, err := n.hdrReq.Test()
			if err != nil {
				return moved, fmt.Errorf("receive from rank %d: %w", c.Peer, err)
			}
			if !done {
				break
			}
			n.hdrReq, n.hdrOK = nil, true
			moved = true
		}
		if !n.hdrOK {
			break
		}
		e := getHeader(n.hdrBuf[:])
		if e.Step == -1 {
			n.hdrOK, n.bye = false, true // the sender said goodbye
			break
		}
		if err := validEntry(e); err != nil {
			return moved, fmt.Errorf("receive from rank %d: %w", c.Peer, err)
		}
		end := uint64(e.Step) + uint64(e.Steps)
		n.Posted.Store(end)
		if m.Head()+model.ProgSlots < end || len(n.inflight) >= model.ProgSlots {
			break // wait for the device to release the slots
		}
		pr := model.Protocol(e.Proto)
		slot := int(uint64(e.Step) % model.ProgSlots)
		var buf []byte
		if pr == model.ProtoSimple {
			buf = m.Slot(pr, slot)[:e.Wire]
		} else {
			if n.staging[pr] == nil {
				n.staging[pr] = make([]byte, model.ProtoBuffSize(pr))
			}
			off := slot * SlotStride(pr)
			buf = n.staging[pr][off : off+int(e.Wire)]
		}
		r, err := n.recv.Irecv(buf)
		if err != nil {
			return moved, fmt.Errorf("receive from rank %d: %w", c.Peer, err)
		}
		n.inflight = append(n.inflight, netOp{req: r, end: end, slot: slot, e: e, buf: buf})
		n.hdrOK = false
		moved = true
	}
	k := 0
	for ; k < len(n.inflight); k++ {
		op := &n.inflight[k]
		done, err := op.req.Test()
		if err != nil {
			return moved, fmt.Errorf("receive from rank %d: %w", c.Peer, err)
		}
		if !done {
			break
		}
		n.Received.Store(op.end)
		n.Flushes.Add(1)
		if err := p.flush(c, uint64(op.e.Step), op.buf); err != nil {
			return moved, fmt.Errorf("flush of step %d from rank %d: %w", op.e.Step, c.Peer, err)
		}
		n.Transmitted.Store(op.end)
		switch pr := model.Protocol(op.e.Proto); pr {
		case model.ProtoSimple:
			m.SetFifo(op.slot, op.e)
			m.SetTail(op.end)
		default:
			m.SetFifo(op.slot, op.e)
			storeLines(pr, m.Slot(pr, op.slot)[:len(op.buf)], op.buf)
		}
		n.Done.Store(op.end)
		moved = true
	}
	if k > 0 {
		n.inflight = append(n.inflight[:0], n.inflight[k:]...)
	}
	return moved, nil
}

// storeLines copies received LL or LL128 lines into the connection's
// slot so that the device, which polls the flags, never sees a flag
// before its data. An LL word carries its own flag, so whole words are
// all it needs: each is stored with one aligned 8-byte store, which is
// single-copy atomic on the 64-bit machines this runs on (amd64, arm64).
// They are plain stores, not atomic.StoreUint64: on amd64 that is a
// locked exchange, a full barrier per word, and on lines the GPU is
// polling over PCIe it cost about 70 ns a word, some 300 µs for a 32 KiB
// slot, which made every LL step over the net transport take that long.
// An LL128 line's 15 data words are stored before its flag word, which
// is stored last with a release store.
func storeLines(pr model.Protocol, dst, src []byte) {
	n := len(src) / 8
	if n == 0 {
		return
	}
	d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), n)
	s := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n)
	if pr == model.ProtoLL {
		storeWords(d, s)
		return
	}
	const w = model.LL128LineBytes / 8
	for l := 0; l+w <= n; l += w {
		copy(d[l:l+w-1], s[l:l+w-1])
		atomic.StoreUint64(&d[l+w-1], s[l+w-1])
	}
}

// storeWords stores src into dst word by word, each with one 8-byte
// store (a loop, not copy: memmove may move a word in pieces).
func storeWords(dst, src []uint64) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = v
	}
}
