package gin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/kernels"
)

// KernelOptions are the NVRTC options gin.cu is compiled with.
var KernelOptions = []string{"-std=c++17", "-default-device"}

type fnKey struct {
	ctx  uintptr
	name string
}

var (
	fnMu    sync.Mutex
	fnCache = map[fnKey]*cuda.Function{}
)

// function returns kernel name of gin.cu on the communicator's context,
// compiling it with NVRTC (through the on-disk cache) on first use.
func (c *Comm) function(name string) (*cuda.Function, error) {
	k := fnKey{c.ctx.Handle(), name}
	fnMu.Lock()
	defer fnMu.Unlock()
	if f, ok := fnCache[k]; ok {
		return f, nil
	}
	arch, err := c.ctx.Device().Arch()
	if err != nil {
		return nil, err
	}
	img, err := cuda.Compile(kernels.Gin, "gin.cu", KernelOptions, arch)
	if err != nil {
		return nil, fmt.Errorf("gin: compile gin.cu for sm_%d: %w", arch, err)
	}
	mod, err := c.ctx.LoadModule(img.Data)
	if err != nil {
		return nil, fmt.Errorf("gin: load gin.cu: %w", err)
	}
	// Every kernel of the module is cached, so the module is loaded once.
	for _, n := range []string{kernels.GinAllToAllName, kernels.GinOrderProbeName} {
		f, err := mod.Function(n)
		if err != nil {
			return nil, fmt.Errorf("gin: %w", err)
		}
		fnCache[fnKey{c.ctx.Handle(), n}] = f
	}
	f, ok := fnCache[k]
	if !ok {
		return nil, fmt.Errorf("gin: no kernel %q in gin.cu", name)
	}
	return f, nil
}

// Status codes the kernels leave in their status word (code << 24).
const (
	statusQueue   = 1
	statusSignal  = 2
	statusFlush   = 3
	statusBarrier = 4
)

// launchState is a kernel's status word in device memory.
type launchState struct {
	c      *Comm
	status cuda.DevicePtr
	what   string
}

func (c *Comm) newLaunchState(what string) (*launchState, error) {
	p, err := c.ctx.MemAlloc(16)
	if err != nil {
		return nil, fmt.Errorf("gin: rank %d: %s status: %w", c.rank, what, err)
	}
	if err := c.ctx.MemsetD8(p, 0, 16); err != nil {
		c.ctx.MemFree(p)
		return nil, err
	}
	return &launchState{c: c, status: p, what: what}, nil
}

// check reads the status word (after the stream synchronised) and the
// proxy's error.
func (l *launchState) check() error {
	var b [4]byte
	if err := l.c.ctx.MemcpyDtoH(b[:], l.status); err != nil {
		return fmt.Errorf("gin: rank %d: %s: %w", l.c.rank, l.what, err)
	}
	var errs []error
	if st := binary.LittleEndian.Uint32(b[:]); st != 0 {
		code, where := st>>24, st&0xffffff
		msg := map[uint32]string{
			statusQueue:   fmt.Sprintf("the descriptor queue stayed full (put to rank %d)", where),
			statusSignal:  fmt.Sprintf("signal %d did not reach its value", where),
			statusFlush:   fmt.Sprintf("context %d did not flush", where),
			statusBarrier: "the barrier did not complete",
		}[code]
		if msg == "" {
			msg = fmt.Sprintf("status %#x", st)
		}
		errs = append(errs, fmt.Errorf("gin: rank %d: %s: %s within %v (a peer lost or its proxy stopped?)", l.c.rank, l.what, msg, l.c.opts.Timeout))
	}
	if err := l.c.Err(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (l *launchState) release() error { return l.c.ctx.MemFree(l.status) }

// AllToAll is a prepared GIN all-to-all: every rank puts bytes for each
// rank (itself included) from window send at offset peer*bytes into that
// rank's window recv at offset rank*bytes.
type AllToAll struct {
	ls               *launchState
	fn               *cuda.Function
	sendWin, recvWin uint32
	bytes            uint64
	chunks           uint32
	signal           uint32
}

// NewAllToAll prepares the all-to-all kernel on two registered windows;
// each rank's slice is cut into chunks puts spread over the contexts
// (0: one per context, at most one per 64 KiB). signal is the signal it
// counts on (not the last, which is the barrier's).
func (c *Comm) NewAllToAll(sendWin, recvWin int, bytes uint64, chunks, signal int) (*AllToAll, error) {
	c.mu.Lock()
	nw := len(c.windows)
	var ws, wr *window
	if sendWin >= 0 && sendWin < nw && recvWin >= 0 && recvWin < nw {
		ws, wr = c.windows[sendWin], c.windows[recvWin]
	}
	c.mu.Unlock()
	if ws == nil {
		return nil, fmt.Errorf("gin: windows %d and %d: %d registered", sendWin, recvWin, nw)
	}
	need := bytes * uint64(c.n)
	if ws.size < need || wr.size < need {
		return nil, fmt.Errorf("gin: all-to-all of %d bytes per rank needs windows of %d bytes (send %d, receive %d)", bytes, need, ws.size, wr.size)
	}
	if signal < 0 || signal >= c.opts.Signals-1 {
		return nil, fmt.Errorf("gin: signal %d: want 0..%d (the last is the barrier's)", signal, c.opts.Signals-2)
	}
	if chunks == 0 {
		chunks = int(min(uint64(c.opts.Contexts), max(bytes>>16, 1)))
	}
	if chunks < 1 || chunks*c.n > c.opts.QueueSlots {
		return nil, fmt.Errorf("gin: %d chunks per slice for %d ranks exceed the %d queue slots", chunks, c.n, c.opts.QueueSlots)
	}
	fn, err := c.function(kernels.GinAllToAllName)
	if err != nil {
		return nil, err
	}
	ls, err := c.newLaunchState("all-to-all")
	if err != nil {
		return nil, err
	}
	return &AllToAll{ls: ls, fn: fn, sendWin: uint32(sendWin), recvWin: uint32(recvWin), bytes: bytes, chunks: uint32(chunks), signal: uint32(signal)}, nil
}

// Chunks is the number of puts per rank's slice.
func (a *AllToAll) Chunks() int { return int(a.chunks) }

// Enqueue launches the kernel on s (it may be captured in a CUDA graph).
func (a *AllToAll) Enqueue(s *cuda.Stream) error {
	c := a.ls.c
	return a.fn.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: 32}, 0, s,
		c.devComm, a.sendWin, a.recvWin, a.bytes, a.chunks, a.signal, c.TimeoutNs(), a.ls.status)
}

// Check reports a kernel that timed out or a failed proxy; call it after
// the stream has synchronised.
func (a *AllToAll) Check() error { return a.ls.check() }

// Release frees the launch's state.
func (a *AllToAll) Release() error { return a.ls.release() }

// OrderProbe runs ginOrderProbe between ranks 0 and 1: rank 0 puts rounds
// of bytes bytes (filled by the kernel) with a signal add and a counter
// increment each; rank 1 checks, as each signal value arrives, that the
// payload of that round is complete. It returns rank 1's count of stale
// words and whether rank 0's counter ran ahead of its completed puts. src
// and dst must be windows srcWin and dstWin of at least rounds*bytes bytes.
func (c *Comm) OrderProbe(s *cuda.Stream, srcWin int, src cuda.DevicePtr, dstWin int, dst cuda.DevicePtr, bytes uint64, rounds int) (stale uint32, counterAhead bool, err error) {
	if bytes%4 != 0 || bytes == 0 || rounds < 1 {
		return 0, false, fmt.Errorf("gin: order probe of %d rounds of %d bytes", rounds, bytes)
	}
	fn, err := c.function(kernels.GinOrderProbeName)
	if err != nil {
		return 0, false, err
	}
	ls, err := c.newLaunchState("order probe")
	if err != nil {
		return 0, false, err
	}
	defer ls.release()
	bad := ls.status.Add(8)
	if err := fn.Launch(cuda.Dim3{X: 1}, cuda.Dim3{X: 256}, 0, s,
		c.devComm, uint32(srcWin), src, uint32(dstWin), dst, bytes, uint32(rounds), c.TimeoutNs(), ls.status, bad); err != nil {
		return 0, false, err
	}
	if err := s.Synchronize(); err != nil {
		return 0, false, err
	}
	if err := ls.check(); err != nil {
		return 0, false, err
	}
	var b [8]byte
	if err := c.ctx.MemcpyDtoH(b[:], bad); err != nil {
		return 0, false, err
	}
	return binary.LittleEndian.Uint32(b[:]), binary.LittleEndian.Uint32(b[4:]) != 0, nil
}
