// Command libnccl is twinccl's drop-in NCCL library: `make lib` builds it
// with -buildmode=c-shared into bin/libnccl.so.2 (and bin/libtwinccl.so).
// shim.c defines NCCL 2.28's C functions (include/nccl.h) over the Go
// entry points below, which run package ncclapi; see
// docs/guide/library.md.
package main

/*
#cgo CFLAGS: -I${SRCDIR}/../../../../include -DTWINCCL_NO_CUDA_RUNTIME
#cgo LDFLAGS: -ldl
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
*/
import "C"

import (
	"sync"
	"syscall"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/ncclapi"
	"github.com/twinccl/twinccl/model"
)

func main() {}

// Version is NCCL_VERSION_CODE of the API implemented: 2.28.9.
const Version = 22809

// Communicator handles: the ncclComm_t an application holds is the
// address of a small C allocation, so that it is a real, unique pointer
// that Go's garbage collector never moves; the communicator is found by
// that address, so a stale or foreign handle is an error, not a crash.
var (
	commMu sync.Mutex
	comms  = map[uintptr]handle{}
)

// handle is a live communicator and the C allocation naming it.
type handle struct {
	comm *ncclapi.Comm
	mem  unsafe.Pointer
}

func register(c *ncclapi.Comm) C.uintptr_t {
	p := C.calloc(1, 64)
	commMu.Lock()
	comms[uintptr(p)] = handle{c, p}
	commMu.Unlock()
	return C.uintptr_t(uintptr(p))
}

func lookup(h C.uintptr_t) (*ncclapi.Comm, error) {
	if h == 0 {
		return nil, &ncclapi.Error{Code: ncclapi.InvalidArgument, Msg: "comm is NULL"}
	}
	commMu.Lock()
	c := comms[uintptr(h)].comm
	commMu.Unlock()
	if c == nil {
		return nil, &ncclapi.Error{Code: ncclapi.InvalidArgument, Msg: "comm is not a live communicator of this library (destroyed, or never made by ncclCommInit*)"}
	}
	return c, nil
}

func unregister(h C.uintptr_t) {
	commMu.Lock()
	hd, ok := comms[uintptr(h)]
	delete(comms, uintptr(h))
	commMu.Unlock()
	if ok {
		C.free(hd.mem)
	}
}

func ret(fn string, err error) C.int { return C.int(ncclapi.Fail(fn, err)) }

func invalid(msg string) error { return &ncclapi.Error{Code: ncclapi.InvalidArgument, Msg: msg} }

// tid is the calling thread: groups are per thread, as in NCCL. A call
// from C runs its Go code on the calling thread.
func tid() int { return syscall.Gettid() }

//export twGetVersion
func twGetVersion(v *C.int) C.int {
	if v == nil {
		return ret("ncclGetVersion", invalid("version is NULL"))
	}
	*v = Version
	return 0
}

//export twGetUniqueId
func twGetUniqueId(out *C.char) C.int {
	if out == nil {
		return ret("ncclGetUniqueId", invalid("uniqueId is NULL"))
	}
	id, err := ncclapi.GetUniqueID()
	if err != nil {
		return ret("ncclGetUniqueId", err)
	}
	b, err := id.Encode()
	if err != nil {
		return ret("ncclGetUniqueId", err)
	}
	C.memcpy(unsafe.Pointer(out), unsafe.Pointer(&b[0]), ncclapi.IDBytes)
	return 0
}

// errorStrings are ncclGetErrorString's C strings, made once.
var errorStrings = func() []*C.char {
	s := make([]*C.char, ncclapi.NumResults+1)
	for r := ncclapi.Result(0); r <= ncclapi.NumResults; r++ {
		s[r] = C.CString(ncclapi.ErrorString(r))
	}
	return s
}()

//export twErrorString
func twErrorString(r C.int) *C.char {
	if r < 0 || int(r) >= len(errorStrings)-1 {
		return errorStrings[len(errorStrings)-1]
	}
	return errorStrings[r]
}

//export twLastError
func twLastError(buf *C.char, n C.int) {
	msg := ncclapi.LastError()
	if len(msg) >= int(n) {
		msg = msg[:n-1]
	}
	b := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	copy(b, msg)
	b[len(msg)] = 0
}

//export twCommInitRank
func twCommInitRank(fn *C.char, out *C.uintptr_t, nranks C.int, id *C.char, rank, dev, blocking C.int) C.int {
	name := C.GoString(fn)
	if out == nil {
		return ret(name, invalid("comm is NULL"))
	}
	*out = 0
	u, err := ncclapi.DecodeUniqueID(C.GoBytes(unsafe.Pointer(id), ncclapi.IDBytes))
	if err != nil {
		return ret(name, err)
	}
	create := func() error {
		c, err := ncclapi.InitRank(u, int(nranks), int(rank), int(dev), ncclapi.Config{Blocking: blocking != 0})
		if err != nil {
			return err
		}
		*out = register(c)
		return nil
	}
	if ncclapi.Defer(tid(), create) {
		return 0
	}
	return ret(name, create())
}

//export twCommInitAll
func twCommInitAll(out *C.uintptr_t, ndev C.int, devlist *C.int) C.int {
	if out == nil {
		return ret("ncclCommInitAll", invalid("comm is NULL"))
	}
	if ndev < 1 {
		return ret("ncclCommInitAll", invalid("ndev must be at least 1"))
	}
	devs := make([]int, ndev)
	for i := range devs {
		devs[i] = i
		if devlist != nil {
			devs[i] = int(unsafe.Slice(devlist, int(ndev))[i])
		}
	}
	cs, err := ncclapi.InitAll(devs)
	if err != nil {
		return ret("ncclCommInitAll", err)
	}
	outs := unsafe.Slice(out, int(ndev))
	for i, c := range cs {
		outs[i] = register(c)
	}
	return 0
}

//export twCommSplit
func twCommSplit(comm C.uintptr_t, color, key C.int, out *C.uintptr_t, blocking C.int) C.int {
	c, err := lookup(comm)
	if err != nil {
		return ret("ncclCommSplit", err)
	}
	if out == nil {
		return ret("ncclCommSplit", invalid("newcomm is NULL"))
	}
	*out = 0
	create := func() error {
		nc, err := c.Split(int(color), int(key), ncclapi.Config{Blocking: blocking != 0})
		if err != nil || nc == nil {
			return err
		}
		*out = register(nc)
		return nil
	}
	if ncclapi.Defer(tid(), create) {
		return 0
	}
	return ret("ncclCommSplit", create())
}

//export twCommFinalize
func twCommFinalize(comm C.uintptr_t) C.int {
	c, err := lookup(comm)
	if err != nil {
		return ret("ncclCommFinalize", err)
	}
	return ret("ncclCommFinalize", c.Finalize())
}

//export twCommDestroy
func twCommDestroy(comm C.uintptr_t, abort C.int) C.int {
	fn := "ncclCommDestroy"
	if abort != 0 {
		fn = "ncclCommAbort"
	}
	if comm == 0 {
		return 0 // NCCL: destroying or aborting NULL is a no-op
	}
	c, err := lookup(comm)
	if err != nil {
		return ret(fn, err)
	}
	unregister(comm)
	if abort != 0 {
		return ret(fn, c.Abort())
	}
	return ret(fn, c.Destroy())
}

//export twCommQuery
func twCommQuery(what C.int, comm C.uintptr_t, out *C.int) C.int {
	fn := [...]string{"ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclCommGetAsyncError"}[what]
	c, err := lookup(comm)
	if err != nil {
		return ret(fn, err)
	}
	if out == nil {
		return ret(fn, invalid("output pointer is NULL"))
	}
	switch what {
	case 0:
		*out = C.int(c.NRanks)
	case 1:
		*out = C.int(c.Dev)
	case 2:
		*out = C.int(c.Rank)
	case 3:
		err := c.AsyncError()
		if err != nil {
			ncclapi.Fail(fn, err)
		}
		*out = C.int(ncclapi.Code(err))
	}
	return 0
}

// collNames are the C functions of twColl's coll argument (model's
// numbering).
var collNames = map[model.Collective]string{
	model.CollBroadcast: "ncclBroadcast", model.CollReduce: "ncclReduce", model.CollAllGather: "ncclAllGather",
	model.CollReduceScatter: "ncclReduceScatter", model.CollAllReduce: "ncclAllReduce", model.CollSend: "ncclSend",
	model.CollRecv: "ncclRecv", model.CollAlltoAll: "ncclAlltoAll",
}

//export twColl
func twColl(coll C.int, send, recv C.uintptr_t, count C.size_t, dtype, op, root C.int, comm, stream C.uintptr_t) C.int {
	k := ncclapi.Call{Coll: model.Collective(coll), Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count),
		Dtype: int32(dtype), Op: int32(op), Root: int(root), Stream: uintptr(stream)}
	fn := collNames[k.Coll]
	if err := k.CheckArgs(); err != nil {
		return ret(fn, err)
	}
	c, err := lookup(comm)
	if err != nil {
		return ret(fn, err)
	}
	return ret(fn, ncclapi.Enqueue(tid(), c, k))
}

//export twRooted
func twRooted(gather C.int, send, recv C.uintptr_t, count C.size_t, dtype, root C.int, comm, stream C.uintptr_t) C.int {
	g, fn := ncclapi.Gather, "ncclGather"
	if gather == 0 {
		g, fn = ncclapi.Scatter, "ncclScatter"
	}
	k := ncclapi.Call{Coll: model.CollBroadcast, Send: uintptr(send), Recv: uintptr(recv), Count: uint64(count), Dtype: int32(dtype), Root: int(root), Stream: uintptr(stream)}
	if err := k.CheckArgs(); err != nil {
		return ret(fn, err)
	}
	c, err := lookup(comm)
	if err != nil {
		return ret(fn, err)
	}
	return ret(fn, ncclapi.EnqueueRooted(tid(), c, g, k))
}

//export twGroupStart
func twGroupStart() C.int {
	ncclapi.GroupStart(tid())
	return 0
}

//export twGroupEnd
func twGroupEnd() C.int { return ret("ncclGroupEnd", ncclapi.GroupEnd(tid())) }

//export twMemAlloc
func twMemAlloc(out *C.uintptr_t, size C.size_t, dev C.int) C.int {
	if out == nil {
		return ret("ncclMemAlloc", invalid("ptr is NULL"))
	}
	p, err := ncclapi.MemAlloc(int(dev), uint64(size))
	if err != nil {
		return ret("ncclMemAlloc", err)
	}
	*out = C.uintptr_t(p)
	return 0
}

//export twMemFree
func twMemFree(p C.uintptr_t) C.int {
	if p == 0 {
		return 0
	}
	return ret("ncclMemFree", ncclapi.MemFree(uintptr(p)))
}

//export twUnimplemented
func twUnimplemented(fn *C.char) C.int {
	name := C.GoString(fn)
	return ret(name, &ncclapi.Error{Code: ncclapi.InvalidUsage, Msg: "not implemented by twinccl (see docs/guide/library.md for the functions it implements)"})
}

//export twBadConfig
func twBadConfig(fn *C.char) C.int {
	return ret(C.GoString(fn), invalid("config was not initialised with NCCL_CONFIG_INITIALIZER (wrong magic or size)"))
}
