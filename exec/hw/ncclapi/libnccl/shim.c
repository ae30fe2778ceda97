// NCCL 2.28's C API (include/nccl.h) over the Go entry points of
// main.go: argument marshalling, the caller's current CUDA device, the
// pncclX aliases NCCL exports for profiling tools, and ncclInvalidUsage
// for the functions twinccl does not implement.
#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>
#include "nccl.h"
#include "_cgo_export.h"

#define PALIAS(name) __attribute__((alias(#name), visibility("default")))
#define API __attribute__((visibility("default")))

// Collective numbers of twColl: model.Collective's (NCCL's ncclFunc_t).
enum { kBroadcast = 0, kReduce = 1, kAllGather = 2, kReduceScatter = 3, kAllReduce = 4, kSend = 6, kRecv = 7, kAlltoAll = 8 };

// The driver entry points of the caller's context, resolved once through
// the libcuda the application loaded (NULL without one).
static int (*ctxGetDevice)(int*);
static int (*ctxGetCurrent)(void**);
static int (*ctxSetCurrent)(void*);

static void resolveDriver(void) {
  static int resolved;
  if (resolved) return;
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) h = dlopen("libcuda.so.1", RTLD_LAZY);
  if (h != NULL) {
    ctxGetDevice = (int (*)(int*))dlsym(h, "cuCtxGetDevice");
    ctxGetCurrent = (int (*)(void**))dlsym(h, "cuCtxGetCurrent");
    ctxSetCurrent = (int (*)(void*))dlsym(h, "cuCtxSetCurrent");
  }
  resolved = 1;
}

// The CUDA device current on the calling thread (NCCL uses cudaGetDevice):
// the device of the current context; device 0 when there is none.
static int currentDevice(void) {
  resolveDriver();
  int dev = 0;
  if (ctxGetDevice != NULL && ctxGetDevice(&dev) == 0) return dev;
  return 0;
}

// The library makes a communicator's context current on the calling thread
// for its driver calls; like NCCL, which restores the caller's device, every
// call that may touch CUDA gives the caller back the context it had.
static void* savedContext(void) {
  resolveDriver();
  void* ctx = NULL;
  if (ctxGetCurrent != NULL) ctxGetCurrent(&ctx);
  return ctx;
}

static ncclResult_t restoreContext(void* saved, ncclResult_t r) {
  void* now = NULL;
  if (ctxGetCurrent != NULL && ctxSetCurrent != NULL && ctxGetCurrent(&now) == 0 && now != saved) ctxSetCurrent(saved);
  return r;
}

#define KEEP_CONTEXT(call) \
  do {                                \
    void* saved_ = savedContext();    \
    ncclResult_t r_ = (call);         \
    return restoreContext(saved_, r_); \
  } while (0)

API ncclResult_t ncclGetVersion(int* version) { return (ncclResult_t)twGetVersion(version); }
ncclResult_t pncclGetVersion(int* version) PALIAS(ncclGetVersion);

API ncclResult_t ncclGetUniqueId(ncclUniqueId* id) { return (ncclResult_t)twGetUniqueId(id == NULL ? NULL : id->internal); }
ncclResult_t pncclGetUniqueId(ncclUniqueId* id) PALIAS(ncclGetUniqueId);

API const char* ncclGetErrorString(ncclResult_t r) { return twErrorString((int)r); }
const char* pncclGetErrorString(ncclResult_t r) PALIAS(ncclGetErrorString);

static char lastError[4096];
API const char* ncclGetLastError(ncclComm_t comm) {
  (void)comm;
  twLastError(lastError, (int)sizeof(lastError));
  return lastError;
}
const char* pncclGetLastError(ncclComm_t comm) PALIAS(ncclGetLastError);

API ncclResult_t ncclMemAlloc(void** ptr, size_t size) { KEEP_CONTEXT((ncclResult_t)twMemAlloc((uintptr_t*)ptr, size, currentDevice())); }
ncclResult_t pncclMemAlloc(void** ptr, size_t size) PALIAS(ncclMemAlloc);
API ncclResult_t ncclMemFree(void* ptr) { KEEP_CONTEXT((ncclResult_t)twMemFree((uintptr_t)ptr)); }
ncclResult_t pncclMemFree(void* ptr) PALIAS(ncclMemFree);

// A config is read only where it was made by NCCL_CONFIG_INITIALIZER.
static ncclResult_t badConfig(const char* fn) { return (ncclResult_t)twBadConfig((char*)fn); }

API ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) {
  if (config != NULL && (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)))
    return badConfig("ncclCommInitRankConfig");
  int blocking = (config == NULL || config->blocking != 0);
  KEEP_CONTEXT((ncclResult_t)twCommInitRank((char*)"ncclCommInitRankConfig", (uintptr_t*)comm, nranks, commId.internal, rank, currentDevice(), blocking));
}
ncclResult_t pncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config) PALIAS(ncclCommInitRankConfig);

API ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  KEEP_CONTEXT((ncclResult_t)twCommInitRank((char*)"ncclCommInitRank", (uintptr_t*)comm, nranks, commId.internal, rank, currentDevice(), 1));
}
ncclResult_t pncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) PALIAS(ncclCommInitRank);

API ncclResult_t ncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) {
  KEEP_CONTEXT((ncclResult_t)twCommInitAll((uintptr_t*)comm, ndev, (int*)devlist));
}
ncclResult_t pncclCommInitAll(ncclComm_t* comm, int ndev, const int* devlist) PALIAS(ncclCommInitAll);

API ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (config != NULL && (config->magic != NCCL_API_MAGIC || config->size < offsetof(ncclConfig_t, blocking) + sizeof(int)))
    return badConfig("ncclCommSplit");
  int blocking = (config == NULL || config->blocking != 0);
  KEEP_CONTEXT((ncclResult_t)twCommSplit((uintptr_t)comm, color, key, (uintptr_t*)newcomm, blocking));
}
ncclResult_t pncclCommSplit(ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config) PALIAS(ncclCommSplit);

API ncclResult_t ncclCommFinalize(ncclComm_t comm) { KEEP_CONTEXT((ncclResult_t)twCommFinalize((uintptr_t)comm)); }
ncclResult_t pncclCommFinalize(ncclComm_t comm) PALIAS(ncclCommFinalize);
API ncclResult_t ncclCommDestroy(ncclComm_t comm) { KEEP_CONTEXT((ncclResult_t)twCommDestroy((uintptr_t)comm, 0)); }
ncclResult_t pncclCommDestroy(ncclComm_t comm) PALIAS(ncclCommDestroy);
API ncclResult_t ncclCommAbort(ncclComm_t comm) { KEEP_CONTEXT((ncclResult_t)twCommDestroy((uintptr_t)comm, 1)); }
ncclResult_t pncclCommAbort(ncclComm_t comm) PALIAS(ncclCommAbort);

API ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) { return (ncclResult_t)twCommQuery(0, (uintptr_t)comm, count); }
ncclResult_t pncclCommCount(const ncclComm_t comm, int* count) PALIAS(ncclCommCount);
API ncclResult_t ncclCommCuDevice(const ncclComm_t comm, int* device) { return (ncclResult_t)twCommQuery(1, (uintptr_t)comm, device); }
ncclResult_t pncclCommCuDevice(const ncclComm_t comm, int* device) PALIAS(ncclCommCuDevice);
API ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) { return (ncclResult_t)twCommQuery(2, (uintptr_t)comm, rank); }
ncclResult_t pncclCommUserRank(const ncclComm_t comm, int* rank) PALIAS(ncclCommUserRank);
API ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) {
  return (ncclResult_t)twCommQuery(3, (uintptr_t)comm, (int*)asyncError);
}
ncclResult_t pncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* asyncError) PALIAS(ncclCommGetAsyncError);

#define COLL(kind, send, recv, count, dt, op, root) \
  KEEP_CONTEXT((ncclResult_t)twColl(kind, (uintptr_t)(send), (uintptr_t)(recv), count, (int)(dt), (int)(op), root, (uintptr_t)comm, (uintptr_t)stream))

API ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  COLL(kReduce, sendbuff, recvbuff, count, datatype, op, root);
}
ncclResult_t pncclReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclReduce);

API ncclResult_t ncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  COLL(kBroadcast, buff, buff, count, datatype, ncclSum, root);
}
ncclResult_t pncclBcast(void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclBcast);

API ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  COLL(kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root);
}
ncclResult_t pncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclBroadcast);

API ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  COLL(kAllReduce, sendbuff, recvbuff, count, datatype, op, 0);
}
ncclResult_t pncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclAllReduce);

API ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  COLL(kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0);
}
ncclResult_t pncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclReduceScatter);

API ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  COLL(kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0);
}
ncclResult_t pncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclAllGather);

API ncclResult_t ncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  COLL(kAlltoAll, sendbuff, recvbuff, count, datatype, ncclSum, 0);
}
ncclResult_t pncclAlltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclAlltoAll);

API ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  COLL(kSend, sendbuff, 0, count, datatype, ncclSum, peer);
}
ncclResult_t pncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclSend);

API ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) {
  COLL(kRecv, 0, recvbuff, count, datatype, ncclSum, peer);
}
ncclResult_t pncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclRecv);

API ncclResult_t ncclGroupStart(void) { return (ncclResult_t)twGroupStart(); }
ncclResult_t pncclGroupStart(void) PALIAS(ncclGroupStart);
API ncclResult_t ncclGroupEnd(void) { KEEP_CONTEXT((ncclResult_t)twGroupEnd()); }
ncclResult_t pncclGroupEnd(void) PALIAS(ncclGroupEnd);

// The rest of nccl.h: ncclInvalidUsage, ncclGetLastError naming the function.
#define UNIMPLEMENTED(name) return (ncclResult_t)twUnimplemented((char*)#name)

API ncclResult_t ncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config) {
  (void)newcomm; (void)nranks; (void)myrank; (void)nId; (void)commIds; (void)config;
  UNIMPLEMENTED(ncclCommInitRankScalable);
}
ncclResult_t pncclCommInitRankScalable(ncclComm_t* newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds, ncclConfig_t* config) PALIAS(ncclCommInitRankScalable);

API ncclResult_t ncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  (void)comm; (void)excludeRanksList; (void)excludeRanksCount; (void)newcomm; (void)config; (void)shrinkFlags;
  UNIMPLEMENTED(ncclCommShrink);
}
ncclResult_t pncclCommShrink(ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) PALIAS(ncclCommShrink);

API ncclResult_t ncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) {
  (void)comm; (void)buff; (void)size; (void)handle;
  UNIMPLEMENTED(ncclCommRegister);
}
ncclResult_t pncclCommRegister(const ncclComm_t comm, void* buff, size_t size, void** handle) PALIAS(ncclCommRegister);

API ncclResult_t ncclCommDeregister(const ncclComm_t comm, void* handle) {
  (void)comm; (void)handle;
  UNIMPLEMENTED(ncclCommDeregister);
}
ncclResult_t pncclCommDeregister(const ncclComm_t comm, void* handle) PALIAS(ncclCommDeregister);

API ncclResult_t ncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) {
  (void)comm; (void)buff; (void)size; (void)win; (void)winFlags;
  UNIMPLEMENTED(ncclCommWindowRegister);
}
ncclResult_t pncclCommWindowRegister(ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags) PALIAS(ncclCommWindowRegister);

API ncclResult_t ncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) {
  (void)comm; (void)win;
  UNIMPLEMENTED(ncclCommWindowDeregister);
}
ncclResult_t pncclCommWindowDeregister(ncclComm_t comm, ncclWindow_t win) PALIAS(ncclCommWindowDeregister);

API ncclResult_t ncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) {
  (void)op; (void)scalar; (void)datatype; (void)residence; (void)comm;
  UNIMPLEMENTED(ncclRedOpCreatePreMulSum);
}
ncclResult_t pncclRedOpCreatePreMulSum(ncclRedOp_t* op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence, ncclComm_t comm) PALIAS(ncclRedOpCreatePreMulSum);

API ncclResult_t ncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) {
  (void)op; (void)comm;
  UNIMPLEMENTED(ncclRedOpDestroy);
}
ncclResult_t pncclRedOpDestroy(ncclRedOp_t op, ncclComm_t comm) PALIAS(ncclRedOpDestroy);

API ncclResult_t ncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  KEEP_CONTEXT((ncclResult_t)twRooted(1, (uintptr_t)sendbuff, (uintptr_t)recvbuff, count, (int)datatype, root, (uintptr_t)comm, (uintptr_t)stream));
}
ncclResult_t pncclGather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclGather);

API ncclResult_t ncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) {
  KEEP_CONTEXT((ncclResult_t)twRooted(0, (uintptr_t)sendbuff, (uintptr_t)recvbuff, count, (int)datatype, root, (uintptr_t)comm, (uintptr_t)stream));
}
ncclResult_t pncclScatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream) PALIAS(ncclScatter);

API ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t* simInfo) {
  (void)simInfo;
  UNIMPLEMENTED(ncclGroupSimulateEnd);
}
ncclResult_t pncclGroupSimulateEnd(ncclSimInfo_t* simInfo) PALIAS(ncclGroupSimulateEnd);
