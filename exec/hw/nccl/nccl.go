// Package nccl is a binding of the system's libnccl, loaded with dlopen at
// run time (no NCCL or CUDA header or library is needed to build it), for
// running the same collectives as twinccl side by side with NCCL
// (cmd/run --baseline nccl).
//
// Device buffers are [cuda.DevicePtr] values and streams are [cuda.Stream]s
// of package cuda, whose primary contexts are the contexts NCCL's CUDA
// runtime uses. Each call locks the calling goroutine to its OS thread for
// its duration and makes the communicator's context current first. NCCL's
// group state (ncclGroupStart/ncclGroupEnd) is per OS thread, so a group
// must be issued from one locked thread: use [Lib.Group] or lock the thread
// yourself (runtime.LockOSThread, [cuda.Context.LockThread]).
//
// Built with CGO_ENABLED=0, [Open] reports [cuda.ErrNoCgo].
package nccl

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// Library names tried by [Open] after $TWINCCL_NCCL_LIB.
var Libraries = []string{"libnccl.so.2", "libnccl.so"}

// pyDirs are the directories of NVIDIA's Python wheels that hold libnccl.
var pyDirs = []string{"nvidia/nccl/lib", "nvidia/cu13/lib"}

// Result is an ncclResult_t. A non-zero Result is an error.
type Result int

// ncclResult_t values (nccl.h).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
)

var resultNames = [...]string{"ncclSuccess", "ncclUnhandledCudaError", "ncclSystemError",
	"ncclInternalError", "ncclInvalidArgument", "ncclInvalidUsage", "ncclRemoteError", "ncclInProgress"}

// Error implements error.
func (r Result) Error() string {
	name := fmt.Sprintf("ncclResult %d", int(r))
	if r >= 0 && int(r) < len(resultNames) {
		name = resultNames[r]
	}
	if l := loadedLib.Load(); l != nil {
		return fmt.Sprintf("%s: %s", name, l.api.errorString(r))
	}
	return name
}

// Error is a failed NCCL call.
type Error struct {
	Call string // e.g. "ncclAllReduce"
	Code Result
	Text string // ncclGetErrorString
	Last string // ncclGetLastError of the communicator, when available
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Text, int(e.Code))
	if e.Last != "" {
		s += ": " + e.Last
	}
	return s
}

// Unwrap returns the Result, so that errors.Is(err, nccl.RemoteError) works.
func (e *Error) Unwrap() error { return e.Code }

// DataType is an ncclDataType_t.
type DataType int

// Data types (nccl.h).
const (
	Int8     DataType = 0
	Uint8    DataType = 1
	Int32    DataType = 2
	Uint32   DataType = 3
	Int64    DataType = 4
	Uint64   DataType = 5
	Float16  DataType = 6
	Float32  DataType = 7
	Float64  DataType = 8
	Bfloat16 DataType = 9
)

// Size returns the size of one element in bytes.
func (t DataType) Size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Float16, Bfloat16:
		return 2
	case Int32, Uint32, Float32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// RedOp is an ncclRedOp_t.
type RedOp int

// Reduction operations (nccl.h).
const (
	Sum  RedOp = 0
	Prod RedOp = 1
	Max  RedOp = 2
	Min  RedOp = 3
	Avg  RedOp = 4
)

// ncclAPI is the C side (cgo.go).
type ncclAPI interface {
	version() (int, Result)
	errorString(r Result) string
	lastError(comm uintptr) string
	hasFinalize() bool
	getUniqueID() (UniqueID, Result)
	commInitRank(nranks int, id *UniqueID, rank int) (uintptr, Result)
	commFinalize(comm uintptr) Result
	commDestroy(comm uintptr) Result
	commAbort(comm uintptr) Result
	commGetAsyncError(comm uintptr) (Result, Result)
	commCount(comm uintptr) (int, Result)
	commCuDevice(comm uintptr) (int, Result)
	commUserRank(comm uintptr) (int, Result)
	allReduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, comm, stream uintptr) Result
	allGather(send, recv cuda.DevicePtr, sendcount uint64, dt DataType, comm, stream uintptr) Result
	reduceScatter(send, recv cuda.DevicePtr, recvcount uint64, dt DataType, op RedOp, comm, stream uintptr) Result
	broadcast(send, recv cuda.DevicePtr, count uint64, dt DataType, root int, comm, stream uintptr) Result
	reduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, root int, comm, stream uintptr) Result
	send(buf cuda.DevicePtr, count uint64, dt DataType, peer int, comm, stream uintptr) Result
	recv(buf cuda.DevicePtr, count uint64, dt DataType, peer int, comm, stream uintptr) Result
	groupStart() Result
	groupEnd() Result
}

// Lib is the loaded libnccl.
type Lib struct {
	api     ncclAPI
	path    string
	version int
}

var (
	openOnce  sync.Once
	openLib   *Lib
	openErr   error
	loadedLib atomic.Pointer[Lib]
)

// Open loads libnccl: the path in $TWINCCL_NCCL_LIB if set, otherwise
// libnccl.so.2 as the dynamic loader finds it, otherwise one from NVIDIA's
// Python wheel (nvidia/nccl/lib under site-packages). The result is shared
// by the process. Errors wrap [cuda.ErrUnavailable].
func Open() (*Lib, error) {
	openOnce.Do(func() { openLib, openErr = open() })
	return openLib, openErr
}

func open() (*Lib, error) {
	var tried []string
	for _, path := range cuda.LibraryCandidates("TWINCCL_NCCL_LIB", Libraries, pyDirs) {
		api, err := load(path)
		if err != nil {
			if errors.Is(err, cuda.ErrNoCgo) {
				return nil, err
			}
			tried = append(tried, err.Error())
			continue
		}
		v, r := api.version()
		if r != Success {
			tried = append(tried, fmt.Sprintf("%s: ncclGetVersion: %d", path, int(r)))
			continue
		}
		l := &Lib{api: api, path: path, version: v}
		loadedLib.Store(l)
		return l, nil
	}
	return nil, fmt.Errorf("%w: libnccl not found (set TWINCCL_NCCL_LIB to its path):\n  %s",
		cuda.ErrUnavailable, strings.Join(tried, "\n  "))
}

// Path returns the path the library was loaded from, as given to dlopen.
func (l *Lib) Path() string { return l.path }

// Version returns NCCL's version code (ncclGetVersion), e.g. 22809 for
// 2.28.9.
func (l *Lib) Version() int { return l.version }

// VersionString returns the version as "2.28.9".
func (l *Lib) VersionString() string {
	v := l.version
	if v >= 10000 {
		return fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return fmt.Sprintf("%d.%d.%d", v/1000, v/100%10, v%100)
}

func (l *Lib) check(call string, r Result, comm uintptr) error {
	if r == Success {
		return nil
	}
	e := &Error{Call: call, Code: r, Text: l.api.errorString(r)}
	if comm != 0 {
		e.Last = l.api.lastError(comm)
	}
	return e
}

// UniqueID is an ncclUniqueId: 128 opaque bytes made by one rank
// ([Lib.GetUniqueID]) and sent to all others before [Lib.CommInitRank].
type UniqueID [128]byte

// GetUniqueID makes a new unique id (ncclGetUniqueId). It starts NCCL's
// bootstrap root in this process.
func (l *Lib) GetUniqueID() (UniqueID, error) {
	id, r := l.api.getUniqueID()
	return id, l.check("ncclGetUniqueId", r, 0)
}

// Comm is an NCCL communicator.
type Comm struct {
	lib    *Lib
	h      uintptr
	ctx    *cuda.Context
	rank   int
	nranks int
	closed atomic.Bool
}

// withCtx runs fn on a locked OS thread with ctx current.
func withCtx(ctx *cuda.Context, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := ctx.SetCurrent(); err != nil {
		return err
	}
	return fn()
}

// CommInitRank joins communicator id as rank of nranks on ctx's device
// (ncclCommInitRank, with ctx current). It blocks until all ranks have
// joined.
func (l *Lib) CommInitRank(ctx *cuda.Context, nranks int, id UniqueID, rank int) (*Comm, error) {
	if nranks <= 0 || rank < 0 || rank >= nranks {
		return nil, fmt.Errorf("nccl: rank %d of %d", rank, nranks)
	}
	var h uintptr
	err := withCtx(ctx, func() error {
		var r Result
		h, r = l.api.commInitRank(nranks, &id, rank)
		return l.check("ncclCommInitRank", r, 0)
	})
	if err != nil {
		return nil, fmt.Errorf("rank %d of %d on device %d: %w", rank, nranks, ctx.Device().Ordinal(), err)
	}
	return &Comm{lib: l, h: h, ctx: ctx, rank: rank, nranks: nranks}, nil
}

// Rank returns the communicator's rank of this process.
func (c *Comm) Rank() int { return c.rank }

// Size returns the number of ranks.
func (c *Comm) Size() int { return c.nranks }

// Context returns the context the communicator was created on.
func (c *Comm) Context() *cuda.Context { return c.ctx }

// CuDevice returns the CUDA device ordinal of the communicator
// (ncclCommCuDevice).
func (c *Comm) CuDevice() (int, error) {
	d, r := c.lib.api.commCuDevice(c.h)
	return d, c.lib.check("ncclCommCuDevice", r, c.h)
}

// Count returns the number of ranks as NCCL reports it (ncclCommCount).
func (c *Comm) Count() (int, error) {
	n, r := c.lib.api.commCount(c.h)
	return n, c.lib.check("ncclCommCount", r, c.h)
}

// UserRank returns this rank as NCCL reports it (ncclCommUserRank).
func (c *Comm) UserRank() (int, error) {
	n, r := c.lib.api.commUserRank(c.h)
	return n, c.lib.check("ncclCommUserRank", r, c.h)
}

// AsyncError returns the communicator's asynchronous error
// (ncclCommGetAsyncError): nil while healthy, an *Error with Call
// "ncclCommGetAsyncError" and the asynchronous Result otherwise.
func (c *Comm) AsyncError() error {
	ae, r := c.lib.api.commGetAsyncError(c.h)
	if err := c.lib.check("ncclCommGetAsyncError", r, c.h); err != nil {
		return err
	}
	if ae == Success || ae == InProgress {
		return nil
	}
	return c.lib.check("ncclCommGetAsyncError", ae, c.h)
}

// Finalize flushes the communicator's outstanding work (ncclCommFinalize,
// NCCL >= 2.14; a no-op before).
func (c *Comm) Finalize() error {
	if !c.lib.api.hasFinalize() {
		return nil
	}
	return withCtx(c.ctx, func() error {
		return c.lib.check("ncclCommFinalize", c.lib.api.commFinalize(c.h), c.h)
	})
}

// Destroy frees the communicator (ncclCommDestroy). Destroying or aborting
// twice is an error.
func (c *Comm) Destroy() error {
	if !c.closed.CompareAndSwap(false, true) {
		return errors.New("nccl: communicator already destroyed")
	}
	return withCtx(c.ctx, func() error {
		return c.lib.check("ncclCommDestroy", c.lib.api.commDestroy(c.h), 0)
	})
}

// Abort frees the communicator, abandoning outstanding work
// (ncclCommAbort), e.g. after a peer failed.
func (c *Comm) Abort() error {
	if !c.closed.CompareAndSwap(false, true) {
		return errors.New("nccl: communicator already destroyed")
	}
	return withCtx(c.ctx, func() error {
		return c.lib.check("ncclCommAbort", c.lib.api.commAbort(c.h), 0)
	})
}

func (c *Comm) enqueue(call string, fn func(stream uintptr) Result, s *cuda.Stream) error {
	return withCtx(c.ctx, func() error { return c.lib.check(call, fn(s.Handle()), c.h) })
}

// AllReduce reduces count elements of every rank's send buffer into every
// rank's recv buffer (ncclAllReduce). send may equal recv.
func (c *Comm) AllReduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, s *cuda.Stream) error {
	return c.enqueue("ncclAllReduce", func(st uintptr) Result {
		return c.lib.api.allReduce(send, recv, count, dt, op, c.h, st)
	}, s)
}

// AllGather gathers sendcount elements from every rank into recv, rank
// by rank (ncclAllGather).
func (c *Comm) AllGather(send, recv cuda.DevicePtr, sendcount uint64, dt DataType, s *cuda.Stream) error {
	return c.enqueue("ncclAllGather", func(st uintptr) Result {
		return c.lib.api.allGather(send, recv, sendcount, dt, c.h, st)
	}, s)
}

// ReduceScatter reduces nranks*recvcount elements and leaves block rank of
// the result in recv (ncclReduceScatter).
func (c *Comm) ReduceScatter(send, recv cuda.DevicePtr, recvcount uint64, dt DataType, op RedOp, s *cuda.Stream) error {
	return c.enqueue("ncclReduceScatter", func(st uintptr) Result {
		return c.lib.api.reduceScatter(send, recv, recvcount, dt, op, c.h, st)
	}, s)
}

// Broadcast copies count elements of root's send buffer to every rank's
// recv buffer (ncclBroadcast).
func (c *Comm) Broadcast(send, recv cuda.DevicePtr, count uint64, dt DataType, root int, s *cuda.Stream) error {
	return c.enqueue("ncclBroadcast", func(st uintptr) Result {
		return c.lib.api.broadcast(send, recv, count, dt, root, c.h, st)
	}, s)
}

// Reduce reduces count elements of every rank's send buffer into root's
// recv buffer (ncclReduce).
func (c *Comm) Reduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, root int, s *cuda.Stream) error {
	return c.enqueue("ncclReduce", func(st uintptr) Result {
		return c.lib.api.reduce(send, recv, count, dt, op, root, c.h, st)
	}, s)
}

// Send sends count elements to peer (ncclSend); pair it with the peer's
// Recv, within a group when ranks exchange both ways.
func (c *Comm) Send(buf cuda.DevicePtr, count uint64, dt DataType, peer int, s *cuda.Stream) error {
	return c.enqueue("ncclSend", func(st uintptr) Result {
		return c.lib.api.send(buf, count, dt, peer, c.h, st)
	}, s)
}

// Recv receives count elements from peer (ncclRecv).
func (c *Comm) Recv(buf cuda.DevicePtr, count uint64, dt DataType, peer int, s *cuda.Stream) error {
	return c.enqueue("ncclRecv", func(st uintptr) Result {
		return c.lib.api.recv(buf, count, dt, peer, c.h, st)
	}, s)
}

// GroupStart opens a group (ncclGroupStart). NCCL's group state belongs to
// the OS thread: the calling goroutine must be locked to its thread until
// the matching GroupEnd. [Lib.Group] does this.
func (l *Lib) GroupStart() error { return l.check("ncclGroupStart", l.api.groupStart(), 0) }

// GroupEnd closes a group and launches its operations (ncclGroupEnd).
func (l *Lib) GroupEnd() error { return l.check("ncclGroupEnd", l.api.groupEnd(), 0) }

// Group runs fn between GroupStart and GroupEnd on one locked OS thread.
// GroupEnd is called even when fn fails, and fn's error wins.
func (l *Lib) Group(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := l.GroupStart(); err != nil {
		return err
	}
	ferr := fn()
	gerr := l.GroupEnd()
	if ferr != nil {
		return ferr
	}
	return gerr
}
