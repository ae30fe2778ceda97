// twinccl's declarations of NCCL's profiler plugin ABI (versions 1 to 5, as
// NCCL 2.23 to 2.28 define them), written from the layouts NCCL's headers
// give on x86-64 and aarch64 Linux (LP64). No NCCL header is included; the
// static assertions at the end pin every field we read or write to the
// offset NCCL's own declarations put it at, so that a mistake here fails
// the build instead of reading the wrong bytes inside NCCL's process.

#ifndef TWINCCL_PROFILER_ABI_H
#define TWINCCL_PROFILER_ABI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// ncclResult_t values the plugin returns.
typedef int twp_result;
enum { twpSuccess = 0, twpSystemError = 2, twpInternalError = 3, twpInvalidUsage = 5 };

// NCCL's logger: level (1 version, 2 warn, 3 info, 5 trace), subsystem
// flags, source file and line, printf format.
typedef void (*twp_logger)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);
enum { twpLogWarn = 2, twpLogInfo = 3 };
enum { twpLogSubsysInit = 1, twpLogSubsysColl = 2 };

// Event type bits (the activation mask uses the same bits).
enum {
  twpGroup = 1 << 0,
  twpColl = 1 << 1,
  twpP2p = 1 << 2,
  twpProxyOp = 1 << 3,
  twpProxyStep = 1 << 4,
  twpProxyCtrl = 1 << 5,
  twpKernelCh = 1 << 6,
  twpNetPlugin = 1 << 7,
  twpGroupApi = 1 << 8,
  twpCollApi = 1 << 9,
  twpP2pApi = 1 << 10,
  twpKernelLaunch = 1 << 11,
};

// Event states recordEventState reports that the plugin uses.
enum {
  twpStateProxyStepSendGPUWait = 8,
  twpStateProxyStepSendWait = 9,
  twpStateProxyStepRecvWait = 10,
  twpStateProxyStepRecvFlushWait = 11,
  twpStateProxyStepRecvGPUWait = 12,
  twpStateProxyStepSendPeerWait = 20,
  twpStateKernelChStop = 22,
};

// The proxy operation part, the same in every version.
struct twp_proxy_op {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
};

// ---- version 5 (NCCL 2.28) ----
typedef struct {
  uint64_t type;
  void* parentObj;
  int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; } collApi;
    struct { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; } p2pApi;
    struct { void* stream; } kernelLaunch;
    struct {
      uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff; size_t count; int root;
      const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto; void* parentGroup;
    } coll;
    struct { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; void* parentGroup; } p2p;
    struct twp_proxy_op proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
} twp_descr_v5;

typedef union {
  struct { size_t transSize; } proxyStep;
  struct { int appendedProxyOps; } proxyCtrl;
  struct { void* data; } netPlugin;
  struct { uint64_t pTimer; } kernelCh;
} twp_state_args_v5;

typedef struct {
  const char* name;
  twp_result (*init)(void** context, uint64_t commId, int* eActivationMask, const char* commName, int nNodes, int nranks, int rank, twp_logger logfn);
  twp_result (*startEvent)(void* context, void** eHandle, twp_descr_v5* eDescr);
  twp_result (*stopEvent)(void* eHandle);
  twp_result (*recordEventState)(void* eHandle, int eState, twp_state_args_v5* eStateArgs);
  twp_result (*finalize)(void* context);
} twp_profiler_v5;

// ---- version 4 (NCCL 2.27) ----
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff; size_t count; int root;
      const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto;
    } coll;
    struct { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; } p2p;
    struct twp_proxy_op proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; uint64_t pTimer; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
} twp_descr_v4;

typedef twp_state_args_v5 twp_state_args_v4; // same union in v4 and v5

typedef struct {
  const char* name;
  twp_result (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes, int nranks, int rank, twp_logger logfn);
  twp_result (*startEvent)(void* context, void** eHandle, twp_descr_v4* eDescr);
  twp_result (*stopEvent)(void* eHandle);
  twp_result (*recordEventState)(void* eHandle, int eState, twp_state_args_v4* eStateArgs);
  twp_result (*finalize)(void* context);
} twp_profiler_v4;

// ---- version 3 (NCCL 2.26): the communicator travels in each event ----
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name; uint64_t commHash; uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff;
      size_t count; int root; const char* datatype; uint8_t nMaxChannels; uint8_t nWarps; const char* algo; const char* proto;
    } coll;
    struct { const char* name; uint64_t commHash; const char* func; void* buff; const char* datatype; size_t count; int peer; } p2p;
    struct twp_proxy_op proxyOp;
    struct { int step; } proxyStep;
    struct { uint8_t channelId; } kernelCh;
    struct { int64_t id; void* data; } netPlugin;
  };
} twp_descr_v3;

// ---- version 2 (NCCL 2.24, 2.25) ----
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name; uint64_t commHash; uint64_t seqNumber; const char* func; const void* sendBuff; void* recvBuff;
      size_t count; int root; const char* datatype; size_t trafficBytes; uint8_t nMaxChannels; uint8_t nWarps;
      const char* algo; const char* proto;
    } coll;
    struct { const char* name; uint64_t commHash; const char* func; void* buff; const char* datatype; size_t count; int peer; } p2p;
    struct twp_proxy_op proxyOp;
    struct { int step; } proxyStep;
  };
} twp_descr_v2;

// ---- version 1 (NCCL 2.23): names travel as NCCL's enum numbers ----
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name; uint64_t commHash; uint64_t seqNumber; uint8_t func; const void* sendBuff; void* recvBuff;
      size_t count; int root; uint8_t datatype; uint32_t op; size_t trafficBytes; uint8_t nMaxChannels; uint8_t nWarps;
      uint8_t algo; uint8_t proto; int isCollnet; int isNvls;
    } coll;
    struct { const char* name; uint64_t commHash; uint8_t func; void* buff; uint8_t datatype; size_t count; int peer; } p2p;
    struct twp_proxy_op proxyOp;
    struct { int step; } proxyStep;
  };
} twp_descr_v1;

// Versions 1 to 3 share their state arguments and their table.
typedef union {
  struct { size_t transSize; int steps; } proxyOp;
  struct { int appendedProxyOps; } proxyCtrl;
} twp_state_args_v1;

#define TWP_OLD_PROFILER(V)                                                         \
  typedef struct {                                                                  \
    const char* name;                                                               \
    twp_result (*init)(void** context, int* eActivationMask);                       \
    twp_result (*startEvent)(void* context, void** eHandle, twp_descr_v##V* eDescr); \
    twp_result (*stopEvent)(void* eHandle);                                         \
    twp_result (*recordEventState)(void* eHandle, int eState, twp_state_args_v1* eStateArgs); \
    twp_result (*finalize)(void* context);                                          \
  } twp_profiler_v##V;
TWP_OLD_PROFILER(3)
TWP_OLD_PROFILER(2)
TWP_OLD_PROFILER(1)

// ---- layout checks: offsets and sizes as NCCL's headers give them ----
#define TWP_AT(T, f, off) _Static_assert(offsetof(T, f) == (off), #T "." #f " is not at " #off)
#define TWP_SIZE(T, n) _Static_assert(sizeof(T) == (n), "sizeof " #T " is not " #n)

TWP_AT(twp_descr_v5, parentObj, 8); TWP_AT(twp_descr_v5, rank, 16);
TWP_AT(twp_descr_v5, collApi.func, 24); TWP_AT(twp_descr_v5, collApi.count, 32); TWP_AT(twp_descr_v5, collApi.datatype, 40);
TWP_AT(twp_descr_v5, collApi.root, 48); TWP_AT(twp_descr_v5, collApi.stream, 56); TWP_AT(twp_descr_v5, collApi.graphCaptured, 64);
TWP_AT(twp_descr_v5, p2pApi.stream, 48); TWP_AT(twp_descr_v5, p2pApi.graphCaptured, 56);
TWP_AT(twp_descr_v5, coll.seqNumber, 24); TWP_AT(twp_descr_v5, coll.func, 32); TWP_AT(twp_descr_v5, coll.count, 56);
TWP_AT(twp_descr_v5, coll.root, 64); TWP_AT(twp_descr_v5, coll.datatype, 72); TWP_AT(twp_descr_v5, coll.nChannels, 80);
TWP_AT(twp_descr_v5, coll.nWarps, 81); TWP_AT(twp_descr_v5, coll.algo, 88); TWP_AT(twp_descr_v5, coll.proto, 96);
TWP_AT(twp_descr_v5, coll.parentGroup, 104);
TWP_AT(twp_descr_v5, p2p.func, 24); TWP_AT(twp_descr_v5, p2p.datatype, 40); TWP_AT(twp_descr_v5, p2p.count, 48);
TWP_AT(twp_descr_v5, p2p.peer, 56); TWP_AT(twp_descr_v5, p2p.nChannels, 60); TWP_AT(twp_descr_v5, p2p.parentGroup, 64);
TWP_AT(twp_descr_v5, proxyOp.pid, 24); TWP_AT(twp_descr_v5, proxyOp.channelId, 28); TWP_AT(twp_descr_v5, proxyOp.peer, 32);
TWP_AT(twp_descr_v5, proxyOp.nSteps, 36); TWP_AT(twp_descr_v5, proxyOp.chunkSize, 40); TWP_AT(twp_descr_v5, proxyOp.isSend, 44);
TWP_AT(twp_descr_v5, proxyStep.step, 24); TWP_AT(twp_descr_v5, kernelCh.channelId, 24); TWP_AT(twp_descr_v5, kernelCh.pTimer, 32);
TWP_SIZE(twp_descr_v5, 112); TWP_SIZE(twp_state_args_v5, 8);
TWP_AT(twp_profiler_v5, init, 8); TWP_AT(twp_profiler_v5, finalize, 40); TWP_SIZE(twp_profiler_v5, 48);

TWP_AT(twp_descr_v4, parentObj, 8); TWP_AT(twp_descr_v4, rank, 16);
TWP_AT(twp_descr_v4, coll.seqNumber, 24); TWP_AT(twp_descr_v4, coll.func, 32); TWP_AT(twp_descr_v4, coll.count, 56);
TWP_AT(twp_descr_v4, coll.root, 64); TWP_AT(twp_descr_v4, coll.datatype, 72); TWP_AT(twp_descr_v4, coll.nChannels, 80);
TWP_AT(twp_descr_v4, coll.algo, 88); TWP_AT(twp_descr_v4, coll.proto, 96);
TWP_AT(twp_descr_v4, p2p.datatype, 40); TWP_AT(twp_descr_v4, p2p.count, 48); TWP_AT(twp_descr_v4, p2p.peer, 56);
TWP_AT(twp_descr_v4, p2p.nChannels, 60); TWP_AT(twp_descr_v4, proxyOp.isSend, 44); TWP_AT(twp_descr_v4, kernelCh.pTimer, 32);
TWP_SIZE(twp_descr_v4, 104);

TWP_AT(twp_descr_v3, coll.commHash, 32); TWP_AT(twp_descr_v3, coll.seqNumber, 40); TWP_AT(twp_descr_v3, coll.func, 48);
TWP_AT(twp_descr_v3, coll.count, 72); TWP_AT(twp_descr_v3, coll.root, 80); TWP_AT(twp_descr_v3, coll.datatype, 88);
TWP_AT(twp_descr_v3, coll.nMaxChannels, 96); TWP_AT(twp_descr_v3, coll.algo, 104); TWP_AT(twp_descr_v3, coll.proto, 112);
TWP_AT(twp_descr_v3, p2p.commHash, 32); TWP_AT(twp_descr_v3, p2p.func, 40); TWP_AT(twp_descr_v3, p2p.datatype, 56);
TWP_AT(twp_descr_v3, p2p.count, 64); TWP_AT(twp_descr_v3, p2p.peer, 72); TWP_AT(twp_descr_v3, kernelCh.channelId, 24);
TWP_SIZE(twp_descr_v3, 120);

TWP_AT(twp_descr_v2, coll.commHash, 32); TWP_AT(twp_descr_v2, coll.func, 48); TWP_AT(twp_descr_v2, coll.count, 72);
TWP_AT(twp_descr_v2, coll.root, 80); TWP_AT(twp_descr_v2, coll.datatype, 88); TWP_AT(twp_descr_v2, coll.nMaxChannels, 104);
TWP_AT(twp_descr_v2, coll.algo, 112); TWP_AT(twp_descr_v2, coll.proto, 120); TWP_AT(twp_descr_v2, p2p.peer, 72);
TWP_SIZE(twp_descr_v2, 128);

TWP_AT(twp_descr_v1, coll.commHash, 32); TWP_AT(twp_descr_v1, coll.func, 48); TWP_AT(twp_descr_v1, coll.count, 72);
TWP_AT(twp_descr_v1, coll.root, 80); TWP_AT(twp_descr_v1, coll.datatype, 84); TWP_AT(twp_descr_v1, coll.op, 88);
TWP_AT(twp_descr_v1, coll.nMaxChannels, 104); TWP_AT(twp_descr_v1, coll.algo, 106); TWP_AT(twp_descr_v1, coll.proto, 107);
TWP_AT(twp_descr_v1, p2p.func, 40); TWP_AT(twp_descr_v1, p2p.datatype, 56); TWP_AT(twp_descr_v1, p2p.count, 64);
TWP_AT(twp_descr_v1, p2p.peer, 72); TWP_SIZE(twp_descr_v1, 120);
TWP_SIZE(twp_state_args_v1, 16);

#endif
