// Package gin is GPU-initiated networking (GIN) for twinccl's GPU ranks
// over a proxy backend: kernels call the device API of kernels/gin.cu
// (put with a remote signal and a local counter, readSignal, waitSignal,
// flush, a barrier), and a proxy goroutine per rank executes the puts.
//
// What NCCL 2.28 does with a NIC (the GPU writes work requests and rings
// a doorbell; an RDMA write carries the payload and an atomic on the same
// queue pair updates the peer's signal after it) is done here by the
// proxy over P2P: the GPU writes a descriptor into a ring in host memory
// mapped for it; the proxy copies the payload into the peer's window
// (CUDA IPC mapping, one stream per context, so the copies of a context
// run in order on a copy engine), and when the copy has completed it adds
// to the peer's signal, increments the own counter and advances the
// context's completion count, always in the order the puts were issued.
// So the rules of the device API hold: a signal never moves before the
// payload of its put and of every earlier put of the same context to that
// peer has landed; a counter moves once the source was read; flush
// returns when every issued put has left its source.
//
// Signals live in a /dev/shm file per rank that every rank's proxy maps
// (so any proxy can update any rank's signals with CPU atomics) and the
// rank's GPU polls through a host registration; counters and descriptor
// rings are pinned host memory of the rank. Windows are device buffers
// registered collectively ([Comm.RegisterWindow]) and named by index;
// puts address them by offset.
//
// Only the P2P path between GPUs of one host exists: socket and ib
// backends (a staged copy through the net plugin) are not written.
package gin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/kernels"
)

// Options size a GIN communicator. Zero fields take the defaults.
type Options struct {
	// Contexts is the number of independent queues (1..8; default 4).
	Contexts int
	// Signals and Counters are the sizes of the signal and counter
	// tables (default 1024 each). The last signal is the barrier's.
	Signals, Counters int
	// QueueSlots is the descriptor ring size of every context (a power
	// of two; default 1024).
	QueueSlots int
	// Timeout bounds every wait of the kernels and of the host.
	Timeout time.Duration
	// Log receives diagnostics (nil: discarded).
	Log *slog.Logger
}

func (o *Options) defaults() error {
	if o.Contexts == 0 {
		o.Contexts = 4
	}
	if o.Signals == 0 {
		o.Signals = 1024
	}
	if o.Counters == 0 {
		o.Counters = 1024
	}
	if o.QueueSlots == 0 {
		o.QueueSlots = 1024
	}
	if o.Timeout == 0 {
		o.Timeout = 30 * time.Second
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	switch {
	case o.Contexts < 1 || o.Contexts > kernels.GinMaxContexts:
		return fmt.Errorf("gin: %d contexts: want 1..%d", o.Contexts, kernels.GinMaxContexts)
	case o.Signals < 2 || o.Signals > 1<<20:
		return fmt.Errorf("gin: %d signals: want 2..%d", o.Signals, 1<<20)
	case o.Counters < 1 || o.Counters > 1<<20:
		return fmt.Errorf("gin: %d counters: want 1..%d", o.Counters, 1<<20)
	case o.QueueSlots < 2 || o.QueueSlots > 1<<16 || o.QueueSlots&(o.QueueSlots-1) != 0:
		return fmt.Errorf("gin: %d queue slots: want a power of two in 2..%d", o.QueueSlots, 1<<16)
	}
	return nil
}

// shmDir is where signal tables are created (a variable for tests).
var shmDir = "/dev/shm"

// Comm is one rank's GIN communicator.
type Comm struct {
	bc      *bootstrap.Comm
	ctx     *cuda.Context
	rank, n int
	opts    Options

	sigMem   []byte         // own signal table (mmap of the shm file)
	sigHost  *cuda.HostMem  // its registration for the GPU
	peerSigs [][]byte       // every rank's signal table, mapped here (own included)
	ctrs     *cuda.HostMem  // own counters
	queues   []*queue       // one per context
	devMem   cuda.DevicePtr // GinDevComm, then tickets, barrier epoch
	devComm  cuda.DevicePtr

	mu      sync.Mutex
	windows []*window

	stop     chan struct{}
	stopped  chan struct{}
	proxyErr atomic.Pointer[error]
	closed   bool
}

// queue is one context: the descriptor ring and its host-side state.
type queue struct {
	mem     *cuda.HostMem // ring, then consumed and done words
	slots   uint64
	stream  *cuda.Stream
	next    uint64 // next ticket to take
	done    uint64
	pending []pending
	free    []*cuda.Event
}

// pending is a put taken from the ring whose completion is not applied.
type pending struct {
	d  desc
	ev *cuda.Event // nil for an empty put
}

// desc is GinDesc decoded.
type desc struct {
	srcOff, dstOff, bytes        uint64
	srcWin, dstWin, peer, signal uint32
	sigValue                     uint64
	sigOp, counter, ctrOp        uint32
}

// window is a registered buffer: its size and every rank's address of it
// as seen from this process.
type window struct {
	size   uint64
	addr   []cuda.DevicePtr
	opened []bool // addr[r] came from IpcOpenMemHandle
}

// maxInFlight bounds the puts of one context the proxy has started and
// not completed.
const maxInFlight = 64

// idleSpins is how many empty polls (tens of nanoseconds each) the proxy
// makes before it starts sleeping between polls.
const idleSpins = 1 << 18

// New creates the rank's GIN communicator on ctx. Every rank of bc calls
// it (it exchanges the signal tables).
func New(bc *bootstrap.Comm, ctx *cuda.Context, opts Options) (c *Comm, err error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	c = &Comm{bc: bc, ctx: ctx, rank: bc.Rank(), n: bc.NRanks(), opts: opts, stop: make(chan struct{}), stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			c.release()
			err = fmt.Errorf("gin: rank %d: %w", c.rank, err)
		}
	}()
	if err := c.mapSignals(); err != nil {
		return nil, err
	}
	if c.ctrs, err = ctx.MemHostAlloc(8 * opts.Counters); err != nil {
		return nil, fmt.Errorf("counters: %w", err)
	}
	ringBytes := opts.QueueSlots*kernels.GinDescSize + 128
	for i := 0; i < opts.Contexts; i++ {
		q := &queue{slots: uint64(opts.QueueSlots)}
		c.queues = append(c.queues, q)
		if q.mem, err = ctx.MemHostAlloc(ringBytes); err != nil {
			return nil, fmt.Errorf("context %d ring: %w", i, err)
		}
		if q.stream, err = ctx.NewStream(cuda.StreamNonBlocking); err != nil {
			return nil, fmt.Errorf("context %d stream: %w", i, err)
		}
	}
	// GinDevComm, then a ticket counter per context and the barrier epoch.
	devBytes := uint64(kernels.GinDevCommSize + 8*(opts.Contexts+1))
	if c.devMem, err = ctx.MemAlloc(devBytes); err != nil {
		return nil, fmt.Errorf("device state: %w", err)
	}
	c.devComm = c.devMem
	if err := ctx.MemcpyHtoD(c.devMem, c.devCommBytes(devBytes)); err != nil {
		return nil, fmt.Errorf("device state: %w", err)
	}
	go c.proxy()
	return c, nil
}

// devCommBytes encodes GinDevComm and zeroes the counters after it.
func (c *Comm) devCommBytes(total uint64) []byte {
	b := make([]byte, total)
	le := binary.LittleEndian
	le.PutUint32(b[0:], uint32(c.rank))
	le.PutUint32(b[4:], uint32(c.n))
	le.PutUint32(b[8:], uint32(c.opts.Contexts))
	le.PutUint64(b[16:], uint64(c.sigHost.DevicePtr()))
	le.PutUint64(b[24:], uint64(c.ctrs.DevicePtr()))
	tickets := uint64(c.devMem) + kernels.GinDevCommSize
	le.PutUint64(b[32:], tickets+8*uint64(c.opts.Contexts)) // barrier epoch
	le.PutUint32(b[40:], uint32(c.opts.Signals-1))
	for i, q := range c.queues {
		o := kernels.GinDevCommHeader + i*kernels.GinQueueSize
		ring := uint64(q.mem.DevicePtr())
		le.PutUint64(b[o:], ring)
		le.PutUint64(b[o+8:], ring+q.slots*kernels.GinDescSize)     // consumed
		le.PutUint64(b[o+16:], ring+q.slots*kernels.GinDescSize+64) // done
		le.PutUint64(b[o+24:], tickets+8*uint64(i))
		le.PutUint64(b[o+32:], q.slots)
	}
	return b
}

// mapSignals creates this rank's signal table, exchanges the names and
// maps every rank's table. The files are unlinked once all have mapped
// them, so a killed process leaves nothing behind.
func (c *Comm) mapSignals() error {
	size := 8 * c.opts.Signals
	name := fmt.Sprintf("twgin-%x-%d-%d", c.bc.Magic()&0xffffffff, os.Getpid(), c.rank)
	path := filepath.Join(shmDir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("signal table: %w", err)
	}
	defer os.Remove(path)
	c.sigMem, err = mapFile(f, size)
	f.Close()
	if err != nil {
		return err
	}
	if c.sigHost, err = c.ctx.MemHostRegister(unsafe.Pointer(&c.sigMem[0]), size); err != nil {
		return fmt.Errorf("register the signal table: %w", err)
	}
	names, err := c.bc.AllGather([]byte(name))
	if err != nil {
		return fmt.Errorf("exchange signal tables: %w", err)
	}
	c.peerSigs = make([][]byte, c.n)
	for r, b := range names {
		peerName := string(b)
		if filepath.Base(peerName) != peerName || peerName == "" || peerName == "." || peerName == ".." {
			return fmt.Errorf("rank %d named its signal table %q", r, peerName)
		}
		f, err := os.OpenFile(filepath.Join(shmDir, peerName), os.O_RDWR, 0)
		if err != nil {
			return fmt.Errorf("rank %d's signal table: %w", r, err)
		}
		m, err := mapFile(f, size)
		f.Close()
		if err != nil {
			return fmt.Errorf("rank %d's signal table: %w", r, err)
		}
		c.peerSigs[r] = m
	}
	if err := c.bc.Barrier(); err != nil {
		return fmt.Errorf("signal tables: %w", err)
	}
	return nil
}

// mapFile sizes f to size bytes when it is new, checks its size and maps it.
func mapFile(f *os.File, size int) ([]byte, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() == 0 {
		if err := f.Truncate(int64(size)); err != nil {
			return nil, fmt.Errorf("size %s: %w", f.Name(), err)
		}
	} else if st.Size() != int64(size) {
		return nil, fmt.Errorf("%s holds %d bytes, want %d", f.Name(), st.Size(), size)
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", f.Name(), err)
	}
	return m, nil
}

// Rank and NRanks describe the communicator.
func (c *Comm) Rank() int { return c.rank }

// NRanks is the number of ranks.
func (c *Comm) NRanks() int { return c.n }

// Contexts is the number of contexts.
func (c *Comm) Contexts() int { return c.opts.Contexts }

// DevComm is the device address of the GinDevComm kernels take.
func (c *Comm) DevComm() cuda.DevicePtr { return c.devComm }

// Context is the CUDA context of the rank.
func (c *Comm) Context() *cuda.Context { return c.ctx }

// TimeoutNs is the kernels' wait bound in nanoseconds.
func (c *Comm) TimeoutNs() uint64 { return uint64(c.opts.Timeout.Nanoseconds()) }

// regInfo is what a rank tells the others about a window.
type regInfo struct {
	pid  uint64
	ptr  uint64
	size uint64
	ipc  cuda.IpcMemHandle
}

const regInfoSize = 24 + len(cuda.IpcMemHandle{})

// RegisterWindow registers size bytes at p (the start of a cuMemAlloc
// allocation, as CUDA IPC shares whole allocations) as the next window on
// every rank and returns its index. Every rank calls it in the same order.
func (c *Comm) RegisterWindow(p cuda.DevicePtr, size uint64) (int, error) {
	ipc, err := c.ctx.IpcGetMemHandle(p)
	if err != nil {
		return 0, fmt.Errorf("gin: rank %d: window: %w", c.rank, err)
	}
	b := make([]byte, regInfoSize)
	le := binary.LittleEndian
	le.PutUint64(b, uint64(os.Getpid()))
	le.PutUint64(b[8:], uint64(p))
	le.PutUint64(b[16:], size)
	copy(b[24:], ipc[:])
	all, err := c.bc.AllGather(b)
	if err != nil {
		return 0, fmt.Errorf("gin: rank %d: exchange a window: %w", c.rank, err)
	}
	w := &window{size: size, addr: make([]cuda.DevicePtr, c.n), opened: make([]bool, c.n)}
	for r, x := range all {
		if len(x) != regInfoSize {
			c.closeWindow(w)
			return 0, fmt.Errorf("gin: rank %d: window info of %d bytes from rank %d", c.rank, len(x), r)
		}
		var ri regInfo
		ri.pid, ri.ptr, ri.size = le.Uint64(x), le.Uint64(x[8:]), le.Uint64(x[16:])
		copy(ri.ipc[:], x[24:])
		if ri.size != size {
			c.closeWindow(w)
			return 0, fmt.Errorf("gin: rank %d: window of %d bytes, rank %d registered %d", c.rank, size, r, ri.size)
		}
		if ri.pid == uint64(os.Getpid()) {
			w.addr[r] = cuda.DevicePtr(ri.ptr)
			continue
		}
		if w.addr[r], err = c.ctx.IpcOpenMemHandle(ri.ipc); err != nil {
			c.closeWindow(w)
			return 0, fmt.Errorf("gin: rank %d: open rank %d's window: %w", c.rank, r, err)
		}
		w.opened[r] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.windows = append(c.windows, w)
	return len(c.windows) - 1, nil
}

func (c *Comm) closeWindow(w *window) error {
	var errs []error
	for r, o := range w.opened {
		if o {
			errs = append(errs, c.ctx.IpcCloseMemHandle(w.addr[r]))
			w.opened[r] = false
		}
	}
	return errors.Join(errs...)
}

// Err is the proxy's first error (a bad descriptor or a failed copy), or nil.
func (c *Comm) Err() error {
	if p := c.proxyErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Signal reads this rank's signal i (host side, for tests and tools).
func (c *Comm) Signal(i int) uint64 {
	return atomic.LoadUint64(word(c.sigMem, i))
}

// Counter reads this rank's counter i.
func (c *Comm) Counter(i int) uint64 {
	return atomic.LoadUint64(word(c.ctrs.Bytes(), i))
}

// word is the i-th 64-bit word of b.
func word(b []byte, i int) *uint64 { return (*uint64)(unsafe.Pointer(&b[8*i])) }

// Close stops the proxy and releases everything. Ranks should meet at a
// barrier before, so that no peer still puts into this rank's windows.
func (c *Comm) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.stop)
	<-c.stopped
	return c.release()
}

func (c *Comm) release() error {
	var errs []error
	c.mu.Lock()
	for _, w := range c.windows {
		errs = append(errs, c.closeWindow(w))
	}
	c.windows = nil
	c.mu.Unlock()
	for _, q := range c.queues {
		if q.stream != nil {
			errs = append(errs, q.stream.Synchronize(), q.stream.Destroy())
		}
		for _, p := range q.pending {
			if p.ev != nil {
				q.free = append(q.free, p.ev)
			}
		}
		for _, e := range q.free {
			errs = append(errs, e.Destroy())
		}
		if q.mem != nil {
			errs = append(errs, q.mem.Free())
		}
	}
	c.queues = nil
	if c.devMem != 0 {
		errs = append(errs, c.ctx.MemFree(c.devMem))
		c.devMem = 0
	}
	if c.ctrs != nil {
		errs = append(errs, c.ctrs.Free())
		c.ctrs = nil
	}
	if c.sigHost != nil {
		errs = append(errs, c.sigHost.Free())
		c.sigHost = nil
	}
	for _, m := range c.peerSigs {
		if m != nil {
			errs = append(errs, syscall.Munmap(m))
		}
	}
	c.peerSigs = nil
	if c.sigMem != nil {
		errs = append(errs, syscall.Munmap(c.sigMem))
		c.sigMem = nil
	}
	return errors.Join(errs...)
}

// proxy takes descriptors and completes puts until Close, on one OS
// thread with the rank's context current.
func (c *Comm) proxy() {
	defer close(c.stopped)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.ctx.SetCurrent(); err != nil {
		c.fail(fmt.Errorf("gin: rank %d: proxy: %w", c.rank, err))
		return
	}
	idle := 0
	for {
		select {
		case <-c.stop:
			return
		default:
		}
		if c.Err() != nil {
			time.Sleep(time.Millisecond)
			continue
		}
		busy := false
		for i, q := range c.queues {
			took, err := c.take(i, q)
			if err == nil {
				var done bool
				done, err = c.complete(q)
				busy = busy || took || done
			}
			if err != nil {
				c.fail(fmt.Errorf("gin: rank %d: context %d: %w", c.rank, i, err))
				break
			}
		}
		if busy {
			idle = 0
			continue
		}
		// Spin while work is likely (the thread is the proxy's own: a
		// yield would cost a scheduler round trip per poll, several
		// microseconds of every put's latency), then poll gently.
		idle++
		if idle > idleSpins {
			time.Sleep(20 * time.Microsecond)
		}
	}
}

func (c *Comm) fail(err error) {
	if c.proxyErr.CompareAndSwap(nil, &err) {
		c.opts.Log.Error("gin proxy failed", "rank", c.rank, "err", err)
	}
}

// take starts the puts published in q's ring, in ticket order.
func (c *Comm) take(ctxIdx int, q *queue) (bool, error) {
	ring := q.mem.Bytes()
	took := false
	for len(q.pending) < maxInFlight {
		slot := ring[(q.next%q.slots)*kernels.GinDescSize:][:kernels.GinDescSize]
		seq := atomic.LoadUint64(word(slot, kernels.GinDescSeqOffset/8))
		if seq != q.next+1 {
			break
		}
		d := decode(slot)
		ws, wd, err := c.validate(d)
		if err != nil {
			return took, fmt.Errorf("put %d: %w", q.next, err)
		}
		p := pending{d: d}
		if d.bytes > 0 {
			src := ws.addr[c.rank].Add(d.srcOff)
			dst := wd.addr[d.peer].Add(d.dstOff)
			if err := c.ctx.MemcpyDtoDAsync(dst, src, d.bytes, q.stream); err != nil {
				return took, fmt.Errorf("put %d: copy %d bytes to rank %d: %w", q.next, d.bytes, d.peer, err)
			}
			ev, err := q.event(c.ctx)
			if err != nil {
				return took, err
			}
			if err := ev.Record(q.stream); err != nil {
				return took, err
			}
			p.ev = ev
		}
		q.pending = append(q.pending, p)
		q.next++
		atomic.StoreUint64(word(ring, int(q.slots)*kernels.GinDescSize/8), q.next)
		took = true
	}
	return took, nil
}

// complete applies, in ticket order, the actions of the puts whose copies
// have finished: the peer's signal, then the own counter, then done.
func (c *Comm) complete(q *queue) (bool, error) {
	ring := q.mem.Bytes()
	n := 0
	for n < len(q.pending) {
		p := &q.pending[n]
		if p.ev != nil {
			ok, err := p.ev.Query()
			if err != nil {
				return n > 0, fmt.Errorf("copy to rank %d: %w", p.d.peer, err)
			}
			if !ok {
				break
			}
			q.free = append(q.free, p.ev)
		}
		switch p.d.sigOp {
		case kernels.GinSigAdd:
			atomic.AddUint64(word(c.peerSigs[p.d.peer], int(p.d.signal)), p.d.sigValue)
		case kernels.GinSigSet:
			atomic.StoreUint64(word(c.peerSigs[p.d.peer], int(p.d.signal)), p.d.sigValue)
		}
		if p.d.ctrOp == kernels.GinCtrInc {
			atomic.AddUint64(word(c.ctrs.Bytes(), int(p.d.counter)), 1)
		}
		q.done++
		atomic.StoreUint64(word(ring, int(q.slots)*kernels.GinDescSize/8+8), q.done)
		n++
	}
	if n > 0 {
		q.pending = append(q.pending[:0], q.pending[n:]...)
	}
	return n > 0, nil
}

// event returns a free completion event of q.
func (q *queue) event(ctx *cuda.Context) (*cuda.Event, error) {
	if k := len(q.free); k > 0 {
		e := q.free[k-1]
		q.free = q.free[:k-1]
		return e, nil
	}
	return ctx.NewEvent(cuda.EventDisableTiming)
}

func decode(b []byte) desc {
	le := binary.LittleEndian
	return desc{
		srcOff: le.Uint64(b[0:]), dstOff: le.Uint64(b[8:]), bytes: le.Uint64(b[16:]),
		srcWin: le.Uint32(b[24:]), dstWin: le.Uint32(b[28:]), peer: le.Uint32(b[32:]), signal: le.Uint32(b[36:]),
		sigValue: le.Uint64(b[40:]), counter: le.Uint32(b[48:]),
		sigOp: le.Uint32(b[52:]) & 0xff, ctrOp: le.Uint32(b[52:]) >> 8,
	}
}

// validate checks a descriptor against the communicator, so that a
// kernel with a bad index or offset fails the proxy with a clear error
// rather than writing outside a window, and returns the source and
// destination windows of a non-empty put.
func (c *Comm) validate(d desc) (src, dst *window, err error) {
	if int(d.peer) >= c.n {
		return nil, nil, fmt.Errorf("peer %d outside %d ranks", d.peer, c.n)
	}
	if d.sigOp > kernels.GinSigSet {
		return nil, nil, fmt.Errorf("unknown signal action %d", d.sigOp)
	}
	if d.sigOp != 0 && int(d.signal) >= c.opts.Signals {
		return nil, nil, fmt.Errorf("signal %d outside %d", d.signal, c.opts.Signals)
	}
	if d.ctrOp > kernels.GinCtrInc {
		return nil, nil, fmt.Errorf("unknown counter action %d", d.ctrOp)
	}
	if d.ctrOp != 0 && int(d.counter) >= c.opts.Counters {
		return nil, nil, fmt.Errorf("counter %d outside %d", d.counter, c.opts.Counters)
	}
	if d.bytes == 0 {
		return nil, nil, nil
	}
	c.mu.Lock()
	nw := len(c.windows)
	var ws, wd *window
	if int(d.srcWin) < nw {
		ws = c.windows[d.srcWin]
	}
	if int(d.dstWin) < nw {
		wd = c.windows[d.dstWin]
	}
	c.mu.Unlock()
	if ws == nil || wd == nil {
		return nil, nil, fmt.Errorf("window %d or %d not registered (%d windows)", d.srcWin, d.dstWin, nw)
	}
	if d.srcOff > ws.size || d.bytes > ws.size-d.srcOff {
		return nil, nil, fmt.Errorf("source bytes [%d, +%d) outside window %d of %d bytes", d.srcOff, d.bytes, d.srcWin, ws.size)
	}
	if d.dstOff > wd.size || d.bytes > wd.size-d.dstOff {
		return nil, nil, fmt.Errorf("destination bytes [%d, +%d) outside window %d of %d bytes", d.dstOff, d.bytes, d.dstWin, wd.size)
	}
	return ws, wd, nil
}
