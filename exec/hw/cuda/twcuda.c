//go:build cgo

// CUDA driver trampolines. See twcuda.h.

#include "twcuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { char reserved[64]; } twIpcHandle; // CUipcMemHandle, CUipcEventHandle
typedef void* H; // any CUDA handle (CUcontext, CUstream, ...)
typedef int CUjit_option;

typedef twResult (*pfnGetProcAddress)(const char*, void**, int, unsigned long long, int*);

// X(name, return type and parameter list of the entry point)
#define TWC_FUNCS(X) \
	X(cuInit, (unsigned)) \
	X(cuGetErrorName, (twResult, const char**)) \
	X(cuGetErrorString, (twResult, const char**)) \
	X(cuDriverGetVersion, (int*)) \
	X(cuDeviceGetCount, (int*)) \
	X(cuDeviceGet, (int*, int)) \
	X(cuDeviceGetName, (char*, int, int)) \
	X(cuDeviceGetPCIBusId, (char*, int, int)) \
	X(cuDeviceGetAttribute, (int*, int, int)) \
	X(cuDeviceTotalMem, (size_t*, int)) \
	X(cuDeviceCanAccessPeer, (int*, int, int)) \
	X(cuDevicePrimaryCtxRetain, (H*, int)) \
	X(cuDevicePrimaryCtxRelease, (int)) \
	X(cuCtxSetCurrent, (H)) \
	X(cuCtxSynchronize, (void)) \
	X(cuCtxEnablePeerAccess, (H, unsigned)) \
	X(cuMemGetInfo, (size_t*, size_t*)) \
	X(cuMemAlloc, (twDevPtr*, size_t)) \
	X(cuMemFree, (twDevPtr)) \
	X(cuMemHostAlloc, (void**, size_t, unsigned)) \
	X(cuMemHostGetDevicePointer, (twDevPtr*, void*, unsigned)) \
	X(cuMemFreeHost, (void*)) \
	X(cuMemHostRegister, (void*, size_t, unsigned)) \
	X(cuMemHostUnregister, (void*)) \
	X(cuMemcpyHtoD, (twDevPtr, const void*, size_t)) \
	X(cuMemcpyDtoH, (void*, twDevPtr, size_t)) \
	X(cuMemcpyDtoD, (twDevPtr, twDevPtr, size_t)) \
	X(cuMemcpyHtoDAsync, (twDevPtr, const void*, size_t, H)) \
	X(cuMemcpyDtoHAsync, (void*, twDevPtr, size_t, H)) \
	X(cuMemcpyDtoDAsync, (twDevPtr, twDevPtr, size_t, H)) \
	X(cuMemsetD8, (twDevPtr, unsigned char, size_t)) \
	X(cuMemsetD8Async, (twDevPtr, unsigned char, size_t, H)) \
	X(cuMemsetD32, (twDevPtr, unsigned, size_t)) \
	X(cuMemsetD32Async, (twDevPtr, unsigned, size_t, H)) \
	X(cuStreamCreate, (H*, unsigned)) \
	X(cuStreamDestroy, (H)) \
	X(cuStreamSynchronize, (H)) \
	X(cuStreamQuery, (H)) \
	X(cuStreamWaitEvent, (H, H, unsigned)) \
	X(cuEventCreate, (H*, unsigned)) \
	X(cuEventDestroy, (H)) \
	X(cuEventRecord, (H, H)) \
	X(cuEventSynchronize, (H)) \
	X(cuEventQuery, (H)) \
	X(cuEventElapsedTime, (float*, H, H)) \
	X(cuModuleLoadDataEx, (H*, const void*, unsigned, CUjit_option*, void**)) \
	X(cuModuleUnload, (H)) \
	X(cuModuleGetFunction, (H*, H, const char*)) \
	X(cuModuleGetGlobal, (twDevPtr*, size_t*, H, const char*)) \
	X(cuFuncSetAttribute, (H, int, int)) \
	X(cuFuncGetAttribute, (int*, int, H)) \
	X(cuLaunchKernel, (H, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, H, void**, void**)) \
	X(cuIpcGetMemHandle, (twIpcHandle*, twDevPtr)) \
	X(cuIpcOpenMemHandle, (twDevPtr*, twIpcHandle, unsigned)) \
	X(cuIpcCloseMemHandle, (twDevPtr)) \
	X(cuIpcGetEventHandle, (twIpcHandle*, H)) \
	X(cuIpcOpenEventHandle, (H*, twIpcHandle)) \
	X(cuStreamBeginCapture, (H, int)) \
	X(cuStreamEndCapture, (H, H*)) \
	X(cuGraphInstantiateWithFlags, (H*, H, unsigned long long)) \
	X(cuGraphLaunch, (H, H)) \
	X(cuGraphExecDestroy, (H)) \
	X(cuGraphDestroy, (H))

#define TWC_DECLARE(name, params) static twResult (*p_##name) params;
TWC_FUNCS(TWC_DECLARE)

static void* twcLib;
static pfnGetProcAddress twcGPA; // kept for the entry points resolved lazily
static int twcABI;

// CU_GET_PROC_ADDRESS_LEGACY_STREAM: the legacy default stream semantics for
// stream 0, whatever the entry point's per-thread variant.
#define TWC_PROC_FLAGS 1ULL

int twcOpen(const char* libPath, int abi, char* err, int errlen) {
	twcLib = dlopen(libPath, RTLD_NOW | RTLD_LOCAL);
	if (twcLib == NULL) {
		const char* e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return 1;
	}
	pfnGetProcAddress gpa = (pfnGetProcAddress)dlsym(twcLib, "cuGetProcAddress_v2");
	if (gpa == NULL) {
		snprintf(err, errlen, "cuGetProcAddress_v2");
		return 2;
	}
	twcGPA = gpa;
	twcABI = abi;
	int status;
	twResult r;
#define TWC_RESOLVE(name, params) \
	status = 0; \
	r = gpa(#name, (void**)&p_##name, abi, TWC_PROC_FLAGS, &status); \
	if (r != 0 || status != 0 || p_##name == NULL) { \
		snprintf(err, errlen, "%s (CUresult %d, symbol status %d)", #name, r, status); \
		return 3; \
	}
	TWC_FUNCS(TWC_RESOLVE)
#undef TWC_RESOLVE
	return 0;
}

twResult twcInit(void) { return p_cuInit(0); }

const char* twcErrorName(twResult r) {
	const char* s = NULL;
	if (p_cuGetErrorName == NULL || p_cuGetErrorName(r, &s) != 0) return NULL;
	return s;
}

const char* twcErrorString(twResult r) {
	const char* s = NULL;
	if (p_cuGetErrorString == NULL || p_cuGetErrorString(r, &s) != 0) return NULL;
	return s;
}

twResult twcDriverGetVersion(int* v) { return p_cuDriverGetVersion(v); }
twResult twcDeviceGetCount(int* n) { return p_cuDeviceGetCount(n); }
twResult twcDeviceGet(int* dev, int ordinal) { return p_cuDeviceGet(dev, ordinal); }
twResult twcDeviceGetName(char* buf, int len, int dev) { return p_cuDeviceGetName(buf, len, dev); }
twResult twcDeviceGetPCIBusId(char* buf, int len, int dev) { return p_cuDeviceGetPCIBusId(buf, len, dev); }
twResult twcDeviceGetAttribute(int* v, int attr, int dev) { return p_cuDeviceGetAttribute(v, attr, dev); }
twResult twcDeviceTotalMem(size_t* bytes, int dev) { return p_cuDeviceTotalMem(bytes, dev); }
twResult twcDeviceCanAccessPeer(int* can, int dev, int peer) { return p_cuDeviceCanAccessPeer(can, dev, peer); }

twResult twcPrimaryCtxRetain(twHandle* ctx, int dev) {
	H c = NULL;
	twResult r = p_cuDevicePrimaryCtxRetain(&c, dev);
	*ctx = (twHandle)c;
	return r;
}
twResult twcPrimaryCtxRelease(int dev) { return p_cuDevicePrimaryCtxRelease(dev); }
twResult twcCtxSetCurrent(twHandle ctx) { return p_cuCtxSetCurrent((H)ctx); }

// SETCTX makes ctx current on this OS thread (a thread-local store in the
// driver) before the call that follows.
#define SETCTX(ctx) do { twResult _r = p_cuCtxSetCurrent((H)(ctx)); if (_r != 0) return _r; } while (0)

twResult twcCtxSynchronize(twHandle ctx) { SETCTX(ctx); return p_cuCtxSynchronize(); }
twResult twcCtxEnablePeerAccess(twHandle ctx, twHandle peer) { SETCTX(ctx); return p_cuCtxEnablePeerAccess((H)peer, 0); }

twResult twcMemGetInfo(twHandle ctx, size_t* f, size_t* t) { SETCTX(ctx); return p_cuMemGetInfo(f, t); }
twResult twcMemAlloc(twHandle ctx, twDevPtr* p, size_t n) { SETCTX(ctx); return p_cuMemAlloc(p, n); }
twResult twcMemFree(twHandle ctx, twDevPtr p) { SETCTX(ctx); return p_cuMemFree(p); }
twResult twcMemHostAlloc(twHandle ctx, void** p, size_t n, unsigned flags) { SETCTX(ctx); return p_cuMemHostAlloc(p, n, flags); }
twResult twcMemHostGetDevicePointer(twHandle ctx, twDevPtr* d, void* p) { SETCTX(ctx); return p_cuMemHostGetDevicePointer(d, p, 0); }
twResult twcMemFreeHost(twHandle ctx, void* p) { SETCTX(ctx); return p_cuMemFreeHost(p); }
twResult twcMemHostRegister(twHandle ctx, void* p, size_t n, unsigned flags) { SETCTX(ctx); return p_cuMemHostRegister(p, n, flags); }
twResult twcMemHostUnregister(twHandle ctx, void* p) { SETCTX(ctx); return p_cuMemHostUnregister(p); }
twResult twcMemcpyHtoD(twHandle ctx, twDevPtr dst, const void* src, size_t n) { SETCTX(ctx); return p_cuMemcpyHtoD(dst, src, n); }
twResult twcMemcpyDtoH(twHandle ctx, void* dst, twDevPtr src, size_t n) { SETCTX(ctx); return p_cuMemcpyDtoH(dst, src, n); }
twResult twcMemcpyDtoD(twHandle ctx, twDevPtr dst, twDevPtr src, size_t n) { SETCTX(ctx); return p_cuMemcpyDtoD(dst, src, n); }
twResult twcMemcpyHtoDAsync(twHandle ctx, twDevPtr dst, const void* src, size_t n, twHandle s) { SETCTX(ctx); return p_cuMemcpyHtoDAsync(dst, src, n, (H)s); }
twResult twcMemcpyDtoHAsync(twHandle ctx, void* dst, twDevPtr src, size_t n, twHandle s) { SETCTX(ctx); return p_cuMemcpyDtoHAsync(dst, src, n, (H)s); }
twResult twcMemcpyDtoDAsync(twHandle ctx, twDevPtr dst, twDevPtr src, size_t n, twHandle s) { SETCTX(ctx); return p_cuMemcpyDtoDAsync(dst, src, n, (H)s); }
twResult twcMemsetD8(twHandle ctx, twDevPtr d, unsigned char v, size_t n) { SETCTX(ctx); return p_cuMemsetD8(d, v, n); }
twResult twcMemsetD8Async(twHandle ctx, twDevPtr d, unsigned char v, size_t n, twHandle s) { SETCTX(ctx); return p_cuMemsetD8Async(d, v, n, (H)s); }
twResult twcMemsetD32(twHandle ctx, twDevPtr d, unsigned v, size_t n) { SETCTX(ctx); return p_cuMemsetD32(d, v, n); }
twResult twcMemsetD32Async(twHandle ctx, twDevPtr d, unsigned v, size_t n, twHandle s) { SETCTX(ctx); return p_cuMemsetD32Async(d, v, n, (H)s); }

twResult twcStreamCreate(twHandle ctx, twHandle* s, unsigned flags) {
	SETCTX(ctx);
	H h = NULL;
	twResult r = p_cuStreamCreate(&h, flags);
	*s = (twHandle)h;
	return r;
}
twResult twcStreamDestroy(twHandle ctx, twHandle s) { SETCTX(ctx); return p_cuStreamDestroy((H)s); }
twResult twcStreamSynchronize(twHandle ctx, twHandle s) { SETCTX(ctx); return p_cuStreamSynchronize((H)s); }
twResult twcStreamQuery(twHandle ctx, twHandle s) { SETCTX(ctx); return p_cuStreamQuery((H)s); }
twResult twcStreamWaitEvent(twHandle ctx, twHandle s, twHandle e) { SETCTX(ctx); return p_cuStreamWaitEvent((H)s, (H)e, 0); }

twResult twcEventCreate(twHandle ctx, twHandle* e, unsigned flags) {
	SETCTX(ctx);
	H h = NULL;
	twResult r = p_cuEventCreate(&h, flags);
	*e = (twHandle)h;
	return r;
}
twResult twcEventDestroy(twHandle ctx, twHandle e) { SETCTX(ctx); return p_cuEventDestroy((H)e); }
twResult twcEventRecord(twHandle ctx, twHandle e, twHandle s) { SETCTX(ctx); return p_cuEventRecord((H)e, (H)s); }
twResult twcEventSynchronize(twHandle ctx, twHandle e) { SETCTX(ctx); return p_cuEventSynchronize((H)e); }
twResult twcEventQuery(twHandle ctx, twHandle e) { SETCTX(ctx); return p_cuEventQuery((H)e); }
twResult twcEventElapsedTime(twHandle ctx, float* ms, twHandle start, twHandle end) { SETCTX(ctx); return p_cuEventElapsedTime(ms, (H)start, (H)end); }

// CUjit_option values (cuda.h).
#define TWC_JIT_ERROR_LOG_BUFFER 5
#define TWC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

twResult twcModuleLoadData(twHandle ctx, twHandle* m, const void* image, char* errlog, size_t errlen) {
	SETCTX(ctx);
	CUjit_option opts[2] = {TWC_JIT_ERROR_LOG_BUFFER, TWC_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
	void* vals[2] = {errlog, (void*)(uintptr_t)errlen};
	if (errlen > 0) errlog[0] = 0;
	H h = NULL;
	twResult r = p_cuModuleLoadDataEx(&h, image, errlen > 0 ? 2 : 0, opts, vals);
	*m = (twHandle)h;
	return r;
}
twResult twcModuleUnload(twHandle ctx, twHandle m) { SETCTX(ctx); return p_cuModuleUnload((H)m); }
twResult twcModuleGetFunction(twHandle ctx, twHandle* f, twHandle m, const char* name) {
	SETCTX(ctx);
	H h = NULL;
	twResult r = p_cuModuleGetFunction(&h, (H)m, name);
	*f = (twHandle)h;
	return r;
}
twResult twcModuleGetGlobal(twHandle ctx, twDevPtr* p, size_t* n, twHandle m, const char* name) { SETCTX(ctx); return p_cuModuleGetGlobal(p, n, (H)m, name); }
twResult twcFuncSetAttribute(twHandle ctx, twHandle f, int attr, int v) { SETCTX(ctx); return p_cuFuncSetAttribute((H)f, attr, v); }
twResult twcFuncGetAttribute(twHandle ctx, int* v, int attr, twHandle f) { SETCTX(ctx); return p_cuFuncGetAttribute(v, attr, (H)f); }

#define TWC_ARGS_STACK_BYTES 4096
#define TWC_ARGS_STACK_COUNT 64
#define TWC_ERROR_OUT_OF_MEMORY 2

twResult twcLaunchKernel(twHandle ctx, twHandle f,
		unsigned gx, unsigned gy, unsigned gz,
		unsigned bx, unsigned by, unsigned bz,
		unsigned shmem, twHandle s,
		const void* blob, size_t blobLen, const uint32_t* offs, int nargs) {
	SETCTX(ctx);
	unsigned long long stackBuf[TWC_ARGS_STACK_BYTES / 8];
	void* stackParams[TWC_ARGS_STACK_COUNT];
	char* buf = (char*)stackBuf;
	void** params = stackParams;
	if (blobLen > sizeof stackBuf) buf = (char*)malloc(blobLen);
	if (nargs > TWC_ARGS_STACK_COUNT) params = (void**)malloc(sizeof(void*) * (size_t)nargs);
	twResult r = TWC_ERROR_OUT_OF_MEMORY;
	if (buf != NULL && params != NULL) {
		if (blobLen > 0) memcpy(buf, blob, blobLen);
		for (int i = 0; i < nargs; i++) params[i] = buf + offs[i];
		r = p_cuLaunchKernel((H)f, gx, gy, gz, bx, by, bz, shmem, (H)s, nargs > 0 ? params : NULL, NULL);
	}
	if (buf != NULL && buf != (char*)stackBuf) free(buf);
	if (params != NULL && params != stackParams) free(params);
	return r;
}

twResult twcIpcGetMemHandle(twHandle ctx, void* out64, twDevPtr p) { SETCTX(ctx); return p_cuIpcGetMemHandle((twIpcHandle*)out64, p); }
twResult twcIpcOpenMemHandle(twHandle ctx, twDevPtr* p, const void* in64, unsigned flags) {
	SETCTX(ctx);
	twIpcHandle h;
	memcpy(&h, in64, sizeof h);
	return p_cuIpcOpenMemHandle(p, h, flags);
}
twResult twcIpcCloseMemHandle(twHandle ctx, twDevPtr p) { SETCTX(ctx); return p_cuIpcCloseMemHandle(p); }
twResult twcIpcGetEventHandle(twHandle ctx, void* out64, twHandle e) { SETCTX(ctx); return p_cuIpcGetEventHandle((twIpcHandle*)out64, (H)e); }
twResult twcIpcOpenEventHandle(twHandle ctx, twHandle* e, const void* in64) {
	SETCTX(ctx);
	twIpcHandle h;
	memcpy(&h, in64, sizeof h);
	H ev = NULL;
	twResult r = p_cuIpcOpenEventHandle(&ev, h);
	*e = (twHandle)ev;
	return r;
}

twResult twcStreamBeginCapture(twHandle ctx, twHandle s, int mode) { SETCTX(ctx); return p_cuStreamBeginCapture((H)s, mode); }
twResult twcStreamEndCapture(twHandle ctx, twHandle s, twHandle* g) {
	SETCTX(ctx);
	H h = NULL;
	twResult r = p_cuStreamEndCapture((H)s, &h);
	*g = (twHandle)h;
	return r;
}
twResult twcGraphInstantiate(twHandle ctx, twHandle* ge, twHandle g, unsigned long long flags) {
	SETCTX(ctx);
	H h = NULL;
	twResult r = p_cuGraphInstantiateWithFlags(&h, (H)g, flags);
	*ge = (twHandle)h;
	return r;
}
twResult twcGraphLaunch(twHandle ctx, twHandle ge, twHandle s) { SETCTX(ctx); return p_cuGraphLaunch((H)ge, (H)s); }
twResult twcGraphExecDestroy(twHandle ctx, twHandle ge) { SETCTX(ctx); return p_cuGraphExecDestroy((H)ge); }
twResult twcGraphDestroy(twHandle ctx, twHandle g) { SETCTX(ctx); return p_cuGraphDestroy((H)g); }

// Entry points resolved at their first use, for drivers that may lack
// them: TWC_NOT_RESOLVED when the driver has none.
typedef twResult (*pfnMemGetHandleForAddressRange)(void*, twDevPtr, size_t, int, unsigned long long);
static pfnMemGetHandleForAddressRange p_cuMemGetHandleForAddressRange;
static int triedMemGetHandle;

twResult twcMemGetHandleForAddressRange(twHandle ctx, int* fd, twDevPtr p, size_t n) {
	if (!triedMemGetHandle) {
		int status = 0;
		void* f = NULL;
		if (twcGPA == NULL || twcGPA("cuMemGetHandleForAddressRange", &f, twcABI, TWC_PROC_FLAGS, &status) != 0 || status != 0) f = NULL;
		p_cuMemGetHandleForAddressRange = (pfnMemGetHandleForAddressRange)f;
		triedMemGetHandle = 1;
	}
	if (p_cuMemGetHandleForAddressRange == NULL) return TWC_NOT_RESOLVED;
	SETCTX(ctx);
	// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1; the handle is an int fd.
	return p_cuMemGetHandleForAddressRange((void*)fd, p, n, 1, 0);
}
