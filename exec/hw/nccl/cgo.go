//go:build cgo

package nccl

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "twnccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// loadMu serializes loading: the C side keeps one table of entry points.
var loadMu sync.Mutex

// load opens one libnccl.
func load(path string) (ncclAPI, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if C.twnclOpen(cpath, &buf[0], C.int(len(buf))) != 0 {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return cgoNCCL{}, nil
}

type cgoNCCL struct{}

var _ ncclAPI = cgoNCCL{}

func res(r C.int) Result              { return Result(r) }
func hc(h uintptr) C.uintptr_t        { return C.uintptr_t(h) }
func dp(p cuda.DevicePtr) C.ulonglong { return C.ulonglong(p) }
func cnt(n uint64) C.size_t           { return C.size_t(n) }

func (cgoNCCL) version() (int, Result) {
	var v C.int
	r := C.twnclGetVersion(&v)
	return int(v), res(r)
}

func (cgoNCCL) errorString(r Result) string {
	if s := C.twnclGetErrorString(C.int(r)); s != nil {
		return C.GoString(s)
	}
	return fmt.Sprintf("ncclResult %d", int(r))
}

func (cgoNCCL) lastError(comm uintptr) string {
	if s := C.twnclGetLastError(hc(comm)); s != nil {
		return C.GoString(s)
	}
	return ""
}

func (cgoNCCL) hasFinalize() bool {
	name := C.CString("ncclCommFinalize")
	defer C.free(unsafe.Pointer(name))
	return C.twnclHas(name) != 0
}

func (cgoNCCL) getUniqueID() (UniqueID, Result) {
	var id UniqueID
	r := C.twnclGetUniqueId(unsafe.Pointer(&id[0]))
	return id, res(r)
}

func (cgoNCCL) commInitRank(nranks int, id *UniqueID, rank int) (uintptr, Result) {
	var h C.uintptr_t
	r := C.twnclCommInitRank(&h, C.int(nranks), unsafe.Pointer(&id[0]), C.int(rank))
	return uintptr(h), res(r)
}

func (cgoNCCL) commFinalize(comm uintptr) Result { return res(C.twnclCommFinalize(hc(comm))) }
func (cgoNCCL) commDestroy(comm uintptr) Result  { return res(C.twnclCommDestroy(hc(comm))) }
func (cgoNCCL) commAbort(comm uintptr) Result    { return res(C.twnclCommAbort(hc(comm))) }

func (cgoNCCL) commGetAsyncError(comm uintptr) (Result, Result) {
	var e C.int
	r := C.twnclCommGetAsyncError(hc(comm), &e)
	return res(e), res(r)
}

func (cgoNCCL) commCount(comm uintptr) (int, Result) {
	var n C.int
	r := C.twnclCommCount(hc(comm), &n)
	return int(n), res(r)
}

func (cgoNCCL) commCuDevice(comm uintptr) (int, Result) {
	var n C.int
	r := C.twnclCommCuDevice(hc(comm), &n)
	return int(n), res(r)
}

func (cgoNCCL) commUserRank(comm uintptr) (int, Result) {
	var n C.int
	r := C.twnclCommUserRank(hc(comm), &n)
	return int(n), res(r)
}

func (cgoNCCL) allReduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, comm, stream uintptr) Result {
	return res(C.twnclAllReduce(dp(send), dp(recv), cnt(count), C.int(dt), C.int(op), hc(comm), hc(stream)))
}

func (cgoNCCL) allGather(send, recv cuda.DevicePtr, sendcount uint64, dt DataType, comm, stream uintptr) Result {
	return res(C.twnclAllGather(dp(send), dp(recv), cnt(sendcount), C.int(dt), hc(comm), hc(stream)))
}

func (cgoNCCL) reduceScatter(send, recv cuda.DevicePtr, recvcount uint64, dt DataType, op RedOp, comm, stream uintptr) Result {
	return res(C.twnclReduceScatter(dp(send), dp(recv), cnt(recvcount), C.int(dt), C.int(op), hc(comm), hc(stream)))
}

func (cgoNCCL) broadcast(send, recv cuda.DevicePtr, count uint64, dt DataType, root int, comm, stream uintptr) Result {
	return res(C.twnclBroadcast(dp(send), dp(recv), cnt(count), C.int(dt), C.int(root), hc(comm), hc(stream)))
}

func (cgoNCCL) reduce(send, recv cuda.DevicePtr, count uint64, dt DataType, op RedOp, root int, comm, stream uintptr) Result {
	return res(C.twnclReduce(dp(send), dp(recv), cnt(count), C.int(dt), C.int(op), C.int(root), hc(comm), hc(stream)))
}

func (cgoNCCL) send(buf cuda.DevicePtr, count uint64, dt DataType, peer int, comm, stream uintptr) Result {
	return res(C.twnclSend(dp(buf), cnt(count), C.int(dt), C.int(peer), hc(comm), hc(stream)))
}

func (cgoNCCL) recv(buf cuda.DevicePtr, count uint64, dt DataType, peer int, comm, stream uintptr) Result {
	return res(C.twnclRecv(dp(buf), cnt(count), C.int(dt), C.int(peer), hc(comm), hc(stream)))
}

func (cgoNCCL) groupStart() Result { return res(C.twnclGroupStart()) }
func (cgoNCCL) groupEnd() Result   { return res(C.twnclGroupEnd()) }
