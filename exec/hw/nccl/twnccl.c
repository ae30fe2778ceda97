//go:build cgo

// libnccl trampolines. See twnccl.h.

#include "twnccl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void* C_;                              // ncclComm_t
typedef void* S_;                              // cudaStream_t
typedef struct { char internal[128]; } Id_;    // ncclUniqueId
#define DP(x) ((const void*)(uintptr_t)(x))    // device address as a pointer

static int (*p_ncclGetVersion)(int*);
static const char* (*p_ncclGetErrorString)(int);
static const char* (*p_ncclGetLastError)(C_);  // optional (2.13)
static int (*p_ncclGetUniqueId)(Id_*);
static int (*p_ncclCommInitRank)(C_*, int, Id_, int);
static int (*p_ncclCommFinalize)(C_);          // optional (2.14)
static int (*p_ncclCommDestroy)(C_);
static int (*p_ncclCommAbort)(C_);
static int (*p_ncclCommGetAsyncError)(C_, int*);
static int (*p_ncclCommCount)(C_, int*);
static int (*p_ncclCommCuDevice)(C_, int*);
static int (*p_ncclCommUserRank)(C_, int*);
static int (*p_ncclAllReduce)(const void*, void*, size_t, int, int, C_, S_);
static int (*p_ncclAllGather)(const void*, void*, size_t, int, C_, S_);
static int (*p_ncclReduceScatter)(const void*, void*, size_t, int, int, C_, S_);
static int (*p_ncclBroadcast)(const void*, void*, size_t, int, int, C_, S_);
static int (*p_ncclReduce)(const void*, void*, size_t, int, int, int, C_, S_);
static int (*p_ncclSend)(const void*, size_t, int, int, C_, S_);
static int (*p_ncclRecv)(void*, size_t, int, int, C_, S_);
static int (*p_ncclGroupStart)(void);
static int (*p_ncclGroupEnd)(void);

// ncclInvalidUsage: what a call to a missing optional entry point returns.
#define TWNCL_INVALID_USAGE 5

int twnclOpen(const char* path, char* err, int errlen) {
	void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char* e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return 1;
	}
#define REQ(name) \
	*(void**)(&p_##name) = dlsym(lib, #name); \
	if (p_##name == NULL) { snprintf(err, errlen, "%s: missing %s", path, #name); dlclose(lib); return 2; }
	REQ(ncclGetVersion)
	REQ(ncclGetErrorString)
	REQ(ncclGetUniqueId)
	REQ(ncclCommInitRank)
	REQ(ncclCommDestroy)
	REQ(ncclCommAbort)
	REQ(ncclCommGetAsyncError)
	REQ(ncclCommCount)
	REQ(ncclCommCuDevice)
	REQ(ncclCommUserRank)
	REQ(ncclAllReduce)
	REQ(ncclAllGather)
	REQ(ncclReduceScatter)
	REQ(ncclBroadcast)
	REQ(ncclReduce)
	REQ(ncclSend)
	REQ(ncclRecv)
	REQ(ncclGroupStart)
	REQ(ncclGroupEnd)
#undef REQ
	*(void**)(&p_ncclGetLastError) = dlsym(lib, "ncclGetLastError");
	*(void**)(&p_ncclCommFinalize) = dlsym(lib, "ncclCommFinalize");
	return 0;
}

int twnclHas(const char* name) {
	if (strcmp(name, "ncclGetLastError") == 0) return p_ncclGetLastError != NULL;
	if (strcmp(name, "ncclCommFinalize") == 0) return p_ncclCommFinalize != NULL;
	return 0;
}

int twnclGetVersion(int* v) { return p_ncclGetVersion(v); }
const char* twnclGetErrorString(int r) { return p_ncclGetErrorString(r); }
const char* twnclGetLastError(uintptr_t comm) { return p_ncclGetLastError ? p_ncclGetLastError((C_)comm) : NULL; }
int twnclGetUniqueId(void* out128) { return p_ncclGetUniqueId((Id_*)out128); }
int twnclCommInitRank(uintptr_t* comm, int nranks, const void* id128, int rank) {
	Id_ id;
	memcpy(&id, id128, sizeof id);
	C_ c = NULL;
	int r = p_ncclCommInitRank(&c, nranks, id, rank);
	*comm = (uintptr_t)c;
	return r;
}
int twnclCommFinalize(uintptr_t comm) { return p_ncclCommFinalize ? p_ncclCommFinalize((C_)comm) : TWNCL_INVALID_USAGE; }
int twnclCommDestroy(uintptr_t comm) { return p_ncclCommDestroy((C_)comm); }
int twnclCommAbort(uintptr_t comm) { return p_ncclCommAbort((C_)comm); }
int twnclCommGetAsyncError(uintptr_t comm, int* e) { return p_ncclCommGetAsyncError((C_)comm, e); }
int twnclCommCount(uintptr_t comm, int* n) { return p_ncclCommCount((C_)comm, n); }
int twnclCommCuDevice(uintptr_t comm, int* d) { return p_ncclCommCuDevice((C_)comm, d); }
int twnclCommUserRank(uintptr_t comm, int* r) { return p_ncclCommUserRank((C_)comm, r); }

int twnclAllReduce(unsigned long long send, unsigned long long recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream) {
	return p_ncclAllReduce(DP(send), (void*)DP(recv), count, dt, op, (C_)comm, (S_)stream);
}
int twnclAllGather(unsigned long long send, unsigned long long recv, size_t sendcount, int dt, uintptr_t comm, uintptr_t stream) {
	return p_ncclAllGather(DP(send), (void*)DP(recv), sendcount, dt, (C_)comm, (S_)stream);
}
int twnclReduceScatter(unsigned long long send, unsigned long long recv, size_t recvcount, int dt, int op, uintptr_t comm, uintptr_t stream) {
	return p_ncclReduceScatter(DP(send), (void*)DP(recv), recvcount, dt, op, (C_)comm, (S_)stream);
}
int twnclBroadcast(unsigned long long send, unsigned long long recv, size_t count, int dt, int root, uintptr_t comm, uintptr_t stream) {
	return p_ncclBroadcast(DP(send), (void*)DP(recv), count, dt, root, (C_)comm, (S_)stream);
}
int twnclReduce(unsigned long long send, unsigned long long recv, size_t count, int dt, int op, int root, uintptr_t comm, uintptr_t stream) {
	return p_ncclReduce(DP(send), (void*)DP(recv), count, dt, op, root, (C_)comm, (S_)stream);
}
int twnclSend(unsigned long long buf, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
	return p_ncclSend(DP(buf), count, dt, peer, (C_)comm, (S_)stream);
}
int twnclRecv(unsigned long long buf, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream) {
	return p_ncclRecv((void*)DP(buf), count, dt, peer, (C_)comm, (S_)stream);
}
int twnclGroupStart(void) { return p_ncclGroupStart(); }
int twnclGroupEnd(void) { return p_ncclGroupEnd(); }
