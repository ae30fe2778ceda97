//go:build cgo

package cuda

/*
#cgo LDFLAGS: -ldl
#cgo noescape twcMemcpyHtoD
#cgo nocallback twcMemcpyHtoD
#cgo noescape twcMemcpyDtoH
#cgo nocallback twcMemcpyDtoH
#cgo noescape twcLaunchKernel
#cgo nocallback twcLaunchKernel
#include <stdlib.h>
#include "twcuda.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// loadDriver opens the driver library and resolves the entry points.
func loadDriver(path string, abi int) (driverAPI, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	switch C.twcOpen(cpath, C.int(abi), &buf[0], C.int(len(buf))) {
	case 0:
		return cgoDriver{}, nil
	case 1:
		return nil, fmt.Errorf("%w: load %s: %s", ErrUnavailable, path, C.GoString(&buf[0]))
	case 2:
		return nil, fmt.Errorf("%w: %s has no cuGetProcAddress_v2 (a driver older than CUDA 12)", ErrUnavailable, path)
	default:
		return nil, fmt.Errorf("%w: %s: cuGetProcAddress_v2 cannot resolve %s at CUDA ABI %d", ErrUnavailable, path, C.GoString(&buf[0]), abi)
	}
}

type cgoDriver struct{}

var _ driverAPI = cgoDriver{}

func res(r C.twResult) Result   { return Result(r) }
func hnd(h uintptr) C.twHandle  { return C.twHandle(h) }
func dp(p DevicePtr) C.twDevPtr { return C.twDevPtr(p) }

func (cgoDriver) init() Result { return res(C.twcInit()) }

func (cgoDriver) errorName(r Result) (string, string) {
	var name, text string
	if s := C.twcErrorName(C.twResult(r)); s != nil {
		name = C.GoString(s)
	}
	if s := C.twcErrorString(C.twResult(r)); s != nil {
		text = C.GoString(s)
	}
	return name, text
}

func (cgoDriver) driverVersion() (int, Result) {
	var v C.int
	r := C.twcDriverGetVersion(&v)
	return int(v), res(r)
}

func (cgoDriver) deviceCount() (int, Result) {
	var n C.int
	r := C.twcDeviceGetCount(&n)
	return int(n), res(r)
}

func (cgoDriver) deviceGet(ordinal int) (int32, Result) {
	var d C.int
	r := C.twcDeviceGet(&d, C.int(ordinal))
	return int32(d), res(r)
}

func (cgoDriver) deviceName(dev int32) (string, Result) {
	var buf [256]C.char
	r := C.twcDeviceGetName(&buf[0], C.int(len(buf)), C.int(dev))
	if r != 0 {
		return "", res(r)
	}
	return C.GoString(&buf[0]), Success
}

func (cgoDriver) devicePCIBusID(dev int32) (string, Result) {
	var buf [64]C.char
	r := C.twcDeviceGetPCIBusId(&buf[0], C.int(len(buf)), C.int(dev))
	if r != 0 {
		return "", res(r)
	}
	return C.GoString(&buf[0]), Success
}

func (cgoDriver) deviceAttribute(dev int32, attr int) (int, Result) {
	var v C.int
	r := C.twcDeviceGetAttribute(&v, C.int(attr), C.int(dev))
	return int(v), res(r)
}

func (cgoDriver) deviceTotalMem(dev int32) (uint64, Result) {
	var n C.size_t
	r := C.twcDeviceTotalMem(&n, C.int(dev))
	return uint64(n), res(r)
}

func (cgoDriver) deviceCanAccessPeer(dev, peer int32) (bool, Result) {
	var v C.int
	r := C.twcDeviceCanAccessPeer(&v, C.int(dev), C.int(peer))
	return v != 0, res(r)
}

func (cgoDriver) primaryCtxRetain(dev int32) (uintptr, Result) {
	var h C.twHandle
	r := C.twcPrimaryCtxRetain(&h, C.int(dev))
	return uintptr(h), res(r)
}

func (cgoDriver) primaryCtxRelease(dev int32) Result { return res(C.twcPrimaryCtxRelease(C.int(dev))) }
func (cgoDriver) ctxSetCurrent(ctx uintptr) Result   { return res(C.twcCtxSetCurrent(hnd(ctx))) }
func (cgoDriver) ctxSynchronize(ctx uintptr) Result  { return res(C.twcCtxSynchronize(hnd(ctx))) }
func (cgoDriver) ctxEnablePeerAccess(ctx, peer uintptr) Result {
	return res(C.twcCtxEnablePeerAccess(hnd(ctx), hnd(peer)))
}

func (cgoDriver) memGetInfo(ctx uintptr) (uint64, uint64, Result) {
	var f, t C.size_t
	r := C.twcMemGetInfo(hnd(ctx), &f, &t)
	return uint64(f), uint64(t), res(r)
}

func (cgoDriver) memAlloc(ctx uintptr, n uint64) (DevicePtr, Result) {
	var p C.twDevPtr
	r := C.twcMemAlloc(hnd(ctx), &p, C.size_t(n))
	return DevicePtr(p), res(r)
}

func (cgoDriver) memFree(ctx uintptr, p DevicePtr) Result { return res(C.twcMemFree(hnd(ctx), dp(p))) }

func (cgoDriver) memHostAlloc(ctx uintptr, n uint64, flags uint32) (unsafe.Pointer, Result) {
	var p unsafe.Pointer
	r := C.twcMemHostAlloc(hnd(ctx), &p, C.size_t(n), C.unsigned(flags))
	return p, res(r)
}

func (cgoDriver) memHostGetDevicePointer(ctx uintptr, p unsafe.Pointer) (DevicePtr, Result) {
	var d C.twDevPtr
	r := C.twcMemHostGetDevicePointer(hnd(ctx), &d, p)
	return DevicePtr(d), res(r)
}

func (cgoDriver) memFreeHost(ctx uintptr, p unsafe.Pointer) Result {
	return res(C.twcMemFreeHost(hnd(ctx), p))
}

func (cgoDriver) memHostRegister(ctx uintptr, p unsafe.Pointer, n uint64, flags uint32) Result {
	return res(C.twcMemHostRegister(hnd(ctx), p, C.size_t(n), C.unsigned(flags)))
}

func (cgoDriver) memHostUnregister(ctx uintptr, p unsafe.Pointer) Result {
	return res(C.twcMemHostUnregister(hnd(ctx), p))
}

func (cgoDriver) memcpyHtoD(ctx uintptr, dst DevicePtr, src unsafe.Pointer, n uint64, s uintptr, async bool) Result {
	if async {
		return res(C.twcMemcpyHtoDAsync(hnd(ctx), dp(dst), src, C.size_t(n), hnd(s)))
	}
	return res(C.twcMemcpyHtoD(hnd(ctx), dp(dst), src, C.size_t(n)))
}

func (cgoDriver) memcpyDtoH(ctx uintptr, dst unsafe.Pointer, src DevicePtr, n uint64, s uintptr, async bool) Result {
	if async {
		return res(C.twcMemcpyDtoHAsync(hnd(ctx), dst, dp(src), C.size_t(n), hnd(s)))
	}
	return res(C.twcMemcpyDtoH(hnd(ctx), dst, dp(src), C.size_t(n)))
}

func (cgoDriver) memcpyDtoD(ctx uintptr, dst, src DevicePtr, n uint64, s uintptr, async bool) Result {
	if async {
		return res(C.twcMemcpyDtoDAsync(hnd(ctx), dp(dst), dp(src), C.size_t(n), hnd(s)))
	}
	return res(C.twcMemcpyDtoD(hnd(ctx), dp(dst), dp(src), C.size_t(n)))
}

func (cgoDriver) memsetD8(ctx uintptr, d DevicePtr, v uint8, n uint64, s uintptr, async bool) Result {
	if async {
		return res(C.twcMemsetD8Async(hnd(ctx), dp(d), C.uchar(v), C.size_t(n), hnd(s)))
	}
	return res(C.twcMemsetD8(hnd(ctx), dp(d), C.uchar(v), C.size_t(n)))
}

func (cgoDriver) memsetD32(ctx uintptr, d DevicePtr, v uint32, n uint64, s uintptr, async bool) Result {
	if async {
		return res(C.twcMemsetD32Async(hnd(ctx), dp(d), C.unsigned(v), C.size_t(n), hnd(s)))
	}
	return res(C.twcMemsetD32(hnd(ctx), dp(d), C.unsigned(v), C.size_t(n)))
}

func (cgoDriver) streamCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var h C.twHandle
	r := C.twcStreamCreate(hnd(ctx), &h, C.unsigned(flags))
	return uintptr(h), res(r)
}

func (cgoDriver) streamDestroy(ctx, s uintptr) Result {
	return res(C.twcStreamDestroy(hnd(ctx), hnd(s)))
}
func (cgoDriver) streamSynchronize(ctx, s uintptr) Result {
	return res(C.twcStreamSynchronize(hnd(ctx), hnd(s)))
}
func (cgoDriver) streamQuery(ctx, s uintptr) Result { return res(C.twcStreamQuery(hnd(ctx), hnd(s))) }
func (cgoDriver) streamWaitEvent(ctx, s, e uintptr) Result {
	return res(C.twcStreamWaitEvent(hnd(ctx), hnd(s), hnd(e)))
}

func (cgoDriver) eventCreate(ctx uintptr, flags uint32) (uintptr, Result) {
	var h C.twHandle
	r := C.twcEventCreate(hnd(ctx), &h, C.unsigned(flags))
	return uintptr(h), res(r)
}

func (cgoDriver) eventDestroy(ctx, e uintptr) Result { return res(C.twcEventDestroy(hnd(ctx), hnd(e))) }
func (cgoDriver) eventRecord(ctx, e, s uintptr) Result {
	return res(C.twcEventRecord(hnd(ctx), hnd(e), hnd(s)))
}
func (cgoDriver) eventSynchronize(ctx, e uintptr) Result {
	return res(C.twcEventSynchronize(hnd(ctx), hnd(e)))
}
func (cgoDriver) eventQuery(ctx, e uintptr) Result { return res(C.twcEventQuery(hnd(ctx), hnd(e))) }

func (cgoDriver) eventElapsedTime(ctx, start, end uintptr) (float32, Result) {
	var ms C.float
	r := C.twcEventElapsedTime(hnd(ctx), &ms, hnd(start), hnd(end))
	return float32(ms), res(r)
}

func (cgoDriver) moduleLoadData(ctx uintptr, image []byte) (uintptr, string, Result) {
	var h C.twHandle
	var log [8192]C.char
	r := C.twcModuleLoadData(hnd(ctx), &h, unsafe.Pointer(&image[0]), &log[0], C.size_t(len(log)))
	if r != 0 {
		return 0, C.GoString(&log[0]), res(r)
	}
	return uintptr(h), "", Success
}

func (cgoDriver) moduleUnload(ctx, m uintptr) Result { return res(C.twcModuleUnload(hnd(ctx), hnd(m))) }

func (cgoDriver) moduleGetFunction(ctx, m uintptr, name string) (uintptr, Result) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var h C.twHandle
	r := C.twcModuleGetFunction(hnd(ctx), &h, hnd(m), cname)
	return uintptr(h), res(r)
}

func (cgoDriver) moduleGetGlobal(ctx, m uintptr, name string) (DevicePtr, uint64, Result) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var p C.twDevPtr
	var n C.size_t
	r := C.twcModuleGetGlobal(hnd(ctx), &p, &n, hnd(m), cname)
	return DevicePtr(p), uint64(n), res(r)
}

func (cgoDriver) funcSetAttribute(ctx, f uintptr, attr, v int) Result {
	return res(C.twcFuncSetAttribute(hnd(ctx), hnd(f), C.int(attr), C.int(v)))
}

func (cgoDriver) funcGetAttribute(ctx, f uintptr, attr int) (int, Result) {
	var v C.int
	r := C.twcFuncGetAttribute(hnd(ctx), &v, C.int(attr), hnd(f))
	return int(v), res(r)
}

func (cgoDriver) launchKernel(ctx, f uintptr, grid, block Dim3, shmem uint32, s uintptr, args *KernelArgs) Result {
	var blob unsafe.Pointer
	var offs *C.uint32_t
	if len(args.blob) > 0 {
		blob = unsafe.Pointer(&args.blob[0])
	}
	if len(args.offs) > 0 {
		offs = (*C.uint32_t)(unsafe.Pointer(&args.offs[0]))
	}
	return res(C.twcLaunchKernel(hnd(ctx), hnd(f),
		C.unsigned(grid.X), C.unsigned(grid.Y), C.unsigned(grid.Z),
		C.unsigned(block.X), C.unsigned(block.Y), C.unsigned(block.Z),
		C.unsigned(shmem), hnd(s), blob, C.size_t(len(args.blob)), offs, C.int(len(args.offs))))
}

func (cgoDriver) ipcGetMemHandle(ctx uintptr, p DevicePtr) (IpcMemHandle, Result) {
	var h IpcMemHandle
	r := C.twcIpcGetMemHandle(hnd(ctx), unsafe.Pointer(&h[0]), dp(p))
	return h, res(r)
}

func (cgoDriver) ipcOpenMemHandle(ctx uintptr, h *IpcMemHandle, flags uint32) (DevicePtr, Result) {
	var p C.twDevPtr
	r := C.twcIpcOpenMemHandle(hnd(ctx), &p, unsafe.Pointer(&h[0]), C.unsigned(flags))
	return DevicePtr(p), res(r)
}

func (cgoDriver) ipcCloseMemHandle(ctx uintptr, p DevicePtr) Result {
	return res(C.twcIpcCloseMemHandle(hnd(ctx), dp(p)))
}

func (cgoDriver) ipcGetEventHandle(ctx, e uintptr) (IpcEventHandle, Result) {
	var h IpcEventHandle
	r := C.twcIpcGetEventHandle(hnd(ctx), unsafe.Pointer(&h[0]), hnd(e))
	return h, res(r)
}

func (cgoDriver) ipcOpenEventHandle(ctx uintptr, h *IpcEventHandle) (uintptr, Result) {
	var e C.twHandle
	r := C.twcIpcOpenEventHandle(hnd(ctx), &e, unsafe.Pointer(&h[0]))
	return uintptr(e), res(r)
}

func (cgoDriver) streamBeginCapture(ctx, s uintptr, mode int) Result {
	return res(C.twcStreamBeginCapture(hnd(ctx), hnd(s), C.int(mode)))
}

func (cgoDriver) streamEndCapture(ctx, s uintptr) (uintptr, Result) {
	var g C.twHandle
	r := C.twcStreamEndCapture(hnd(ctx), hnd(s), &g)
	return uintptr(g), res(r)
}

func (cgoDriver) graphInstantiate(ctx, g uintptr, flags uint64) (uintptr, Result) {
	var ge C.twHandle
	r := C.twcGraphInstantiate(hnd(ctx), &ge, hnd(g), C.ulonglong(flags))
	return uintptr(ge), res(r)
}

func (cgoDriver) graphLaunch(ctx, ge, s uintptr) Result {
	return res(C.twcGraphLaunch(hnd(ctx), hnd(ge), hnd(s)))
}

func (cgoDriver) graphExecDestroy(ctx, ge uintptr) Result {
	return res(C.twcGraphExecDestroy(hnd(ctx), hnd(ge)))
}

func (cgoDriver) graphDestroy(ctx, g uintptr) Result { return res(C.twcGraphDestroy(hnd(ctx), hnd(g))) }

func (cgoDriver) memGetHandleForAddressRange(ctx uintptr, p DevicePtr, n uint64) (int, Result) {
	var fd C.int
	r := res(C.twcMemGetHandleForAddressRange(hnd(ctx), &fd, dp(p), C.size_t(n)))
	return int(fd), r
}
