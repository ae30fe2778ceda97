// A minimal binding of the CUDA driver API, loaded at run time with dlopen.
// No CUDA header is included: the few types used are declared here. Handles
// (contexts, streams, events, modules, functions, graphs) travel as
// uintptr_t so that Go never holds them as pointers. Every call that works
// within a context takes that context first and makes it current on the
// calling OS thread before the call.

#ifndef TWCUDA_H
#define TWCUDA_H

#include <stddef.h>
#include <stdint.h>

typedef int twResult;
typedef unsigned long long twDevPtr;
typedef uintptr_t twHandle;

// twcOpen loads libPath and resolves every entry point through
// cuGetProcAddress_v2 at the ABI version abi. It returns 0 on success,
// 1 when dlopen fails, 2 when cuGetProcAddress_v2 is missing and 3 when an
// entry point cannot be resolved; err then holds the dlerror text or the
// entry point's name.
int twcOpen(const char* libPath, int abi, char* err, int errlen);

twResult twcInit(void);
const char* twcErrorName(twResult r);
const char* twcErrorString(twResult r);
twResult twcDriverGetVersion(int* v);

twResult twcDeviceGetCount(int* n);
twResult twcDeviceGet(int* dev, int ordinal);
twResult twcDeviceGetName(char* buf, int len, int dev);
twResult twcDeviceGetPCIBusId(char* buf, int len, int dev);
twResult twcDeviceGetAttribute(int* v, int attr, int dev);
twResult twcDeviceTotalMem(size_t* bytes, int dev);
twResult twcDeviceCanAccessPeer(int* can, int dev, int peer);

twResult twcPrimaryCtxRetain(twHandle* ctx, int dev);
twResult twcPrimaryCtxRelease(int dev);
twResult twcCtxSetCurrent(twHandle ctx);
twResult twcCtxSynchronize(twHandle ctx);
twResult twcCtxEnablePeerAccess(twHandle ctx, twHandle peer);

twResult twcMemGetInfo(twHandle ctx, size_t* freeBytes, size_t* totalBytes);
twResult twcMemAlloc(twHandle ctx, twDevPtr* p, size_t n);
twResult twcMemFree(twHandle ctx, twDevPtr p);
twResult twcMemHostAlloc(twHandle ctx, void** p, size_t n, unsigned flags);
twResult twcMemHostGetDevicePointer(twHandle ctx, twDevPtr* d, void* p);
twResult twcMemFreeHost(twHandle ctx, void* p);
twResult twcMemHostRegister(twHandle ctx, void* p, size_t n, unsigned flags);
twResult twcMemHostUnregister(twHandle ctx, void* p);
twResult twcMemcpyHtoD(twHandle ctx, twDevPtr dst, const void* src, size_t n);
twResult twcMemcpyDtoH(twHandle ctx, void* dst, twDevPtr src, size_t n);
twResult twcMemcpyDtoD(twHandle ctx, twDevPtr dst, twDevPtr src, size_t n);
twResult twcMemcpyHtoDAsync(twHandle ctx, twDevPtr dst, const void* src, size_t n, twHandle s);
twResult twcMemcpyDtoHAsync(twHandle ctx, void* dst, twDevPtr src, size_t n, twHandle s);
twResult twcMemcpyDtoDAsync(twHandle ctx, twDevPtr dst, twDevPtr src, size_t n, twHandle s);
twResult twcMemsetD8(twHandle ctx, twDevPtr d, unsigned char v, size_t n);
twResult twcMemsetD8Async(twHandle ctx, twDevPtr d, unsigned char v, size_t n, twHandle s);
twResult twcMemsetD32(twHandle ctx, twDevPtr d, unsigned v, size_t n);
twResult twcMemsetD32Async(twHandle ctx, twDevPtr d, unsigned v, size_t n, twHandle s);

twResult twcStreamCreate(twHandle ctx, twHandle* s, unsigned flags);
twResult twcStreamDestroy(twHandle ctx, twHandle s);
twResult twcStreamSynchronize(twHandle ctx, twHandle s);
twResult twcStreamQuery(twHandle ctx, twHandle s);
twResult twcStreamWaitEvent(twHandle ctx, twHandle s, twHandle e);

twResult twcEventCreate(twHandle ctx, twHandle* e, unsigned flags);
twResult twcEventDestroy(twHandle ctx, twHandle e);
twResult twcEventRecord(twHandle ctx, twHandle e, twHandle s);
twResult twcEventSynchronize(twHandle ctx, twHandle e);
twResult twcEventQuery(twHandle ctx, twHandle e);
twResult twcEventElapsedTime(twHandle ctx, float* ms, twHandle start, twHandle end);

// twcModuleLoadData loads a cubin, fatbin or NUL-terminated PTX image; JIT
// errors are written to errlog (NUL-terminated, at most errlen bytes).
twResult twcModuleLoadData(twHandle ctx, twHandle* m, const void* image, char* errlog, size_t errlen);
twResult twcModuleUnload(twHandle ctx, twHandle m);
twResult twcModuleGetFunction(twHandle ctx, twHandle* f, twHandle m, const char* name);
twResult twcModuleGetGlobal(twHandle ctx, twDevPtr* p, size_t* n, twHandle m, const char* name);
twResult twcFuncSetAttribute(twHandle ctx, twHandle f, int attr, int v);
twResult twcFuncGetAttribute(twHandle ctx, int* v, int attr, twHandle f);

// twcLaunchKernel copies the packed argument bytes (blob, blobLen bytes)
// into C memory, points kernelParams[i] at blob+offs[i] and launches.
twResult twcLaunchKernel(twHandle ctx, twHandle f,
	unsigned gx, unsigned gy, unsigned gz,
	unsigned bx, unsigned by, unsigned bz,
	unsigned shmem, twHandle s,
	const void* blob, size_t blobLen, const uint32_t* offs, int nargs);

twResult twcIpcGetMemHandle(twHandle ctx, void* out64, twDevPtr p);
twResult twcIpcOpenMemHandle(twHandle ctx, twDevPtr* p, const void* in64, unsigned flags);
twResult twcIpcCloseMemHandle(twHandle ctx, twDevPtr p);
twResult twcIpcGetEventHandle(twHandle ctx, void* out64, twHandle e);
twResult twcIpcOpenEventHandle(twHandle ctx, twHandle* e, const void* in64);

twResult twcStreamBeginCapture(twHandle ctx, twHandle s, int mode);
twResult twcStreamEndCapture(twHandle ctx, twHandle s, twHandle* g);
twResult twcGraphInstantiate(twHandle ctx, twHandle* ge, twHandle g, unsigned long long flags);
twResult twcGraphLaunch(twHandle ctx, twHandle ge, twHandle s);
twResult twcGraphExecDestroy(twHandle ctx, twHandle ge);
twResult twcGraphDestroy(twHandle ctx, twHandle g);

// NVRTC, loaded separately (twnvrtc.c). Return values are nvrtcResult.
// twnOpen returns 0 on success, 1 when dlopen fails and 2 when a required
// entry point is missing; err holds the reason.
int twnOpen(const char* libPath, char* err, int errlen);
int twnVersion(int* major, int* minor);
const char* twnErrorString(int r);
int twnHasCUBIN(void);
int twnCreateProgram(uintptr_t* prog, const char* src, const char* name);
// twnCompileProgram takes the options as nopts NUL-terminated strings
// packed one after the other in opts.
int twnCompileProgram(uintptr_t prog, const char* opts, int nopts);
int twnGetProgramLogSize(uintptr_t prog, size_t* n);
int twnGetProgramLog(uintptr_t prog, char* buf);
int twnGetCUBINSize(uintptr_t prog, size_t* n);
int twnGetCUBIN(uintptr_t prog, char* buf);
int twnGetPTXSize(uintptr_t prog, size_t* n);
int twnGetPTX(uintptr_t prog, char* buf);
int twnDestroyProgram(uintptr_t prog);

// TWC_NOT_RESOLVED is what a lazily resolved entry point answers when
// the driver does not have it (no CUresult is negative).
#define TWC_NOT_RESOLVED (-2)

// twcMemGetHandleForAddressRange exports [p, p+n) as a dma-buf file
// descriptor (cuMemGetHandleForAddressRange, CUDA 11.7 and later).
twResult twcMemGetHandleForAddressRange(twHandle ctx, int* fd, twDevPtr p, size_t n);

#endif
