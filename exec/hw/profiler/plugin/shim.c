// The exported ncclProfiler_v5 ... ncclProfiler_v1 tables NCCL looks up
// with dlsym, newest first. Each version's functions convert NCCL's
// descriptor into the one twp_event form and call the Go recorder; events
// the recorder does not keep (groups, group API, kernel launches, proxy
// control, network plugin events) are answered here without entering Go.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"
#include "_cgo_export.h"

static twp_logger ncclLogger;   // NCCL's logger (versions 4 and 5), set atomically
static pid_t initPid;           // the process that initialised the plugin
static int ncclDebugSet;        // NCCL_DEBUG was set at the first init
static pthread_once_t setupOnce = PTHREAD_ONCE_INIT;

static inline int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static inline void* toPtr(uint64_t h) { return (void*)(uintptr_t)h; }
static inline uint64_t toU64(void* p) { return (uint64_t)(uintptr_t)p; }

// twpLogMsg reports through NCCL's logger; a warning also goes to stderr
// when NCCL_DEBUG is not set (NCCL then prints no warning at all).
void twpLogMsg(int level, char* msg) {
  twp_logger log = __atomic_load_n(&ncclLogger, __ATOMIC_ACQUIRE);
  if (log) log(level, twpLogSubsysInit, __FILE__, __LINE__, "%s", msg);
  if (level == twpLogWarn && (log == NULL || !ncclDebugSet)) fprintf(stderr, "%s\n", msg);
}

// pinSelf keeps the library mapped for the life of the process: NCCL
// dlcloses its profiler when the last communicator is finalized, and a Go
// runtime cannot be unloaded (its threads would run unmapped code).
static void pinSelf(void) {
  Dl_info info;
  if (dladdr((void*)pinSelf, &info) && info.dli_fname != NULL) dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

// atExit writes what communicators never finalized recorded; a forked
// child (whose Go runtime has no threads) never enters Go.
static void atExit(void) {
  if (getpid() == initPid) twpGoAtExit();
}

// setup runs once, at the first init (NCCL may initialise communicators
// from several threads at once). The environment is read here only:
// getenv races with an application's setenv.
static void setup(void) {
  initPid = getpid();
  ncclDebugSet = getenv("NCCL_DEBUG") != NULL;
  pinSelf();
  atexit(atExit);
}

static twp_result initCommon(int version, void** context, int* mask, uint64_t comm, const char* name,
                             int nNodes, int nranks, int rank, twp_logger logfn) {
  if (logfn) __atomic_store_n(&ncclLogger, logfn, __ATOMIC_RELEASE);
  pthread_once(&setupOnce, setup);
  uint64_t ctx = 0;
  int m = 0;
  int rc = twpGoInit(version, comm, (char*)(name ? name : ""), nNodes, nranks, rank, &ctx, &m);
  *context = toPtr(ctx);
  *mask = m;
  return rc;
}

// Handle flags (package profiler's KernelFlag and NoStopFlag): stops the
// recorder has no use for are answered here.
#define TWP_KERNEL_FLAG (1ULL << 62)
#define TWP_NOSTOP_FLAG (1ULL << 61)

static twp_result stopEvent(void* h) {
  if (h && !(toU64(h) & TWP_NOSTOP_FLAG)) twpGoStop(toU64(h), nowNs());
  return twpSuccess;
}

// Versions 4 and 5 end a kernel channel with its GPU time (recordEventState)
// before they stop it: the stop itself tells the recorder nothing.
static twp_result stopEvent45(void* h) {
  if (h && !(toU64(h) & (TWP_NOSTOP_FLAG | TWP_KERNEL_FLAG))) twpGoStop(toU64(h), nowNs());
  return twpSuccess;
}

static twp_result finalize(void* ctx) {
  if (ctx == NULL) return twpSuccess;
  return twpGoFinalize(toU64(ctx));
}

static twp_result startGo(void* ctx, void** h, twp_event* ev) {
  *h = ctx ? toPtr(twpGoStart(toU64(ctx), ev)) : NULL;
  return twpSuccess;
}

static void proxyOp(twp_event* ev, const struct twp_proxy_op* op) {
  ev->foreign = op->pid != initPid;
  ev->channel = op->channelId;
  ev->peer = op->peer;
  ev->nSteps = op->nSteps;
  ev->chunkSize = op->chunkSize;
  ev->isSend = op->isSend;
}

// ---- version 5 ----
static twp_result init5(void** ctx, uint64_t commId, int* mask, const char* name, int nNodes, int nranks, int rank, twp_logger logfn) {
  return initCommon(5, ctx, mask, commId, name, nNodes, nranks, rank, logfn);
}

static twp_result start5(void* ctx, void** h, twp_descr_v5* d) {
  twp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.hostNs = nowNs();
  ev.type = (uint32_t)d->type;
  ev.rank = d->rank;
  ev.parent = toU64(d->parentObj);
  switch (d->type) {
    case twpCollApi:
      ev.func = d->collApi.func; ev.count = d->collApi.count; ev.datatype = d->collApi.datatype;
      ev.root = d->collApi.root; ev.stream = toU64(d->collApi.stream);
      break;
    case twpP2pApi:
      ev.func = d->p2pApi.func; ev.count = d->p2pApi.count; ev.datatype = d->p2pApi.datatype;
      ev.stream = toU64(d->p2pApi.stream);
      break;
    case twpColl:
      ev.seqNumber = d->coll.seqNumber; ev.func = d->coll.func; ev.count = d->coll.count; ev.root = d->coll.root;
      ev.datatype = d->coll.datatype; ev.nChannels = d->coll.nChannels; ev.algo = d->coll.algo; ev.proto = d->coll.proto;
      break;
    case twpP2p:
      ev.func = d->p2p.func; ev.datatype = d->p2p.datatype; ev.count = d->p2p.count; ev.peer = d->p2p.peer;
      ev.nChannels = d->p2p.nChannels;
      break;
    case twpProxyOp: proxyOp(&ev, &d->proxyOp); break;
    case twpProxyStep: ev.step = d->proxyStep.step; break;
    case twpKernelCh: ev.channel = d->kernelCh.channelId; ev.pTimer = d->kernelCh.pTimer; break;
    default: *h = NULL; return twpSuccess;
  }
  return startGo(ctx, h, &ev);
}

static twp_result record5(void* h, int state, twp_state_args_v5* a) {
  if (h == NULL) return twpSuccess;
  uint64_t trans = 0, timer = 0;
  switch (state) {
    case twpStateKernelChStop: if (a) timer = a->kernelCh.pTimer; break;
    case twpStateProxyStepSendGPUWait: case twpStateProxyStepSendPeerWait: case twpStateProxyStepSendWait:
    case twpStateProxyStepRecvWait: case twpStateProxyStepRecvFlushWait: case twpStateProxyStepRecvGPUWait:
      if (a) trans = a->proxyStep.transSize;
      break;
    default: return twpSuccess;
  }
  twpGoRecord(toU64(h), state, trans, timer, nowNs());
  return twpSuccess;
}

twp_profiler_v5 ncclProfiler_v5 = {"twinccl", init5, start5, stopEvent45, record5, finalize};

// ---- version 4 ----
static twp_result init4(void** ctx, int* mask, const char* name, uint64_t commHash, int nNodes, int nranks, int rank, twp_logger logfn) {
  return initCommon(4, ctx, mask, commHash, name, nNodes, nranks, rank, logfn);
}

static twp_result start4(void* ctx, void** h, twp_descr_v4* d) {
  twp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.hostNs = nowNs();
  ev.type = d->type;
  ev.rank = d->rank;
  ev.parent = toU64(d->parentObj);
  switch (d->type) {
    case twpColl:
      ev.seqNumber = d->coll.seqNumber; ev.func = d->coll.func; ev.count = d->coll.count; ev.root = d->coll.root;
      ev.datatype = d->coll.datatype; ev.nChannels = d->coll.nChannels; ev.algo = d->coll.algo; ev.proto = d->coll.proto;
      break;
    case twpP2p:
      ev.func = d->p2p.func; ev.datatype = d->p2p.datatype; ev.count = d->p2p.count; ev.peer = d->p2p.peer;
      ev.nChannels = d->p2p.nChannels;
      break;
    case twpProxyOp: proxyOp(&ev, &d->proxyOp); break;
    case twpProxyStep: ev.step = d->proxyStep.step; break;
    case twpKernelCh: ev.channel = d->kernelCh.channelId; ev.pTimer = d->kernelCh.pTimer; break;
    default: *h = NULL; return twpSuccess;
  }
  return startGo(ctx, h, &ev);
}

twp_profiler_v4 ncclProfiler_v4 = {"twinccl", init4, start4, stopEvent45, record5, finalize};

// ---- versions 1 to 3: the communicator and rank come with each call ----
static twp_result initOld(void** ctx, int* mask, int version) {
  return initCommon(version, ctx, mask, 0, "", 0, 0, -1, NULL);
}
static twp_result init3(void** ctx, int* mask) { return initOld(ctx, mask, 3); }
static twp_result init2(void** ctx, int* mask) { return initOld(ctx, mask, 2); }
static twp_result init1(void** ctx, int* mask) { return initOld(ctx, mask, 1); }

static twp_result recordOld(void* h, int state, twp_state_args_v1* a) {
  if (h == NULL) return twpSuccess;
  switch (state) {
    case twpStateProxyStepSendGPUWait: case twpStateProxyStepSendWait: case twpStateProxyStepRecvWait:
    case twpStateProxyStepRecvFlushWait: case twpStateProxyStepRecvGPUWait:
      twpGoRecord(toU64(h), state, a ? a->proxyOp.transSize : 0, 0, nowNs());
  }
  return twpSuccess;
}

#define TWP_START_OLD(V, KERNEL)                                                              \
  static twp_result start##V(void* ctx, void** h, twp_descr_v##V* d) {                        \
    twp_event ev;                                                                             \
    memset(&ev, 0, sizeof ev);                                                                \
    ev.hostNs = nowNs();                                                                      \
    ev.type = d->type;                                                                        \
    ev.rank = d->rank;                                                                        \
    ev.parent = toU64(d->parentObj);                                                          \
    switch (d->type) {                                                                        \
      case twpColl:                                                                           \
        ev.commHash = d->coll.commHash; ev.seqNumber = d->coll.seqNumber; ev.func = d->coll.func; \
        ev.count = d->coll.count; ev.root = d->coll.root; ev.datatype = d->coll.datatype;     \
        ev.nChannels = d->coll.nMaxChannels; ev.algo = d->coll.algo; ev.proto = d->coll.proto; \
        break;                                                                                \
      case twpP2p:                                                                            \
        ev.commHash = d->p2p.commHash; ev.func = d->p2p.func; ev.datatype = d->p2p.datatype;  \
        ev.count = d->p2p.count; ev.peer = d->p2p.peer;                                       \
        break;                                                                                \
      case twpProxyOp: proxyOp(&ev, &d->proxyOp); break;                                      \
      case twpProxyStep: ev.step = d->proxyStep.step; break;                                  \
      KERNEL                                                                                  \
      default: *h = NULL; return twpSuccess;                                                  \
    }                                                                                         \
    return startGo(ctx, h, &ev);                                                              \
  }
TWP_START_OLD(3, case twpKernelCh: ev.channel = d->kernelCh.channelId; break;)
TWP_START_OLD(2, )

twp_profiler_v3 ncclProfiler_v3 = {"twinccl", init3, start3, stopEvent, recordOld, finalize};
twp_profiler_v2 ncclProfiler_v2 = {"twinccl", init2, start2, stopEvent, recordOld, finalize};

// Version 1 numbers its names with NCCL's enums (ncclFunc_t, ncclDataType_t,
// NCCL_ALGO_*, NCCL_PROTO_*, ncclRedOp_t).
static const char* const funcNames[] = {"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce", "SendRecv", "Send", "Recv"};
static const char* const dtypeNames[] = {"ncclInt8", "ncclUint8", "ncclInt32", "ncclUint32", "ncclInt64", "ncclUint64",
                                         "ncclFloat16", "ncclFloat32", "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
static const char* const algoNames[] = {"TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"};
static const char* const protoNames[] = {"LL", "LL128", "SIMPLE"};
static const char* const redopNames[] = {"sum", "prod", "max", "min", "avg"};
#define TWP_NAME(table, i) ((size_t)(i) < sizeof(table) / sizeof(table[0]) ? table[i] : "Unknown")

static twp_result start1(void* ctx, void** h, twp_descr_v1* d) {
  twp_event ev;
  memset(&ev, 0, sizeof ev);
  ev.hostNs = nowNs();
  ev.type = d->type;
  ev.rank = d->rank;
  ev.parent = toU64(d->parentObj);
  switch (d->type) {
    case twpColl:
      ev.commHash = d->coll.commHash; ev.seqNumber = d->coll.seqNumber; ev.func = TWP_NAME(funcNames, d->coll.func);
      ev.count = d->coll.count; ev.root = d->coll.root; ev.datatype = TWP_NAME(dtypeNames, d->coll.datatype);
      ev.redop = d->coll.op < 5 ? redopNames[d->coll.op] : "";
      ev.nChannels = d->coll.nMaxChannels; ev.algo = TWP_NAME(algoNames, d->coll.algo); ev.proto = TWP_NAME(protoNames, d->coll.proto);
      break;
    case twpP2p:
      ev.commHash = d->p2p.commHash; ev.func = TWP_NAME(funcNames, d->p2p.func);
      ev.datatype = TWP_NAME(dtypeNames, d->p2p.datatype); ev.count = d->p2p.count; ev.peer = d->p2p.peer;
      break;
    case twpProxyOp: proxyOp(&ev, &d->proxyOp); break;
    case twpProxyStep: ev.step = d->proxyStep.step; break;
    default: *h = NULL; return twpSuccess;
  }
  return startGo(ctx, h, &ev);
}

twp_profiler_v1 ncclProfiler_v1 = {"twinccl", init1, start1, stopEvent, recordOld, finalize};
