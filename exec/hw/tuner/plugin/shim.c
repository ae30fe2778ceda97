// The tuner plugin structs NCCL looks up with dlsym (NCCL's
// src/plugin/tuner.cc: the newest version it knows first), declared here
// after NCCL 2.28's tuner_v5.h and tuner_v4.h layouts, over the Go entry
// points of main.go.
#include <stddef.h>
#include <stdint.h>
#include "_cgo_export.h"

typedef int ncclResult_t;
typedef int ncclFunc_t;  // ncclFuncBroadcast ... ncclFuncAllReduce = 0 ... 4
typedef enum { NCCL_LOG_NONE = 0, NCCL_LOG_VERSION = 1, NCCL_LOG_WARN = 2, NCCL_LOG_INFO = 3, NCCL_LOG_ABORT = 4, NCCL_LOG_TRACE = 5 } ncclDebugLogLevel;
typedef void (*ncclDebugLogger_t)(ncclDebugLogLevel level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// v5 (NCCL 2.28): init takes the communicator id, the NVLink domains and
// the tuning constants, which this plugin leaves as they are.
typedef struct {
  int nNvlDomains;
  int minRanksPerNvlDomain;
  int maxRanksPerNvlDomain;
} twNvlDomainInfo_v5;

#define TW_ALGOS_V5 7
#define TW_PROTOS_V5 3
#define TW_LINKS_V5 3
#define TW_COMPCAPS_V5 4
#define TW_SCALES_V5 3
typedef struct {
  double baseLatencies[TW_ALGOS_V5][TW_PROTOS_V5];
  double hwLatencies[TW_LINKS_V5][TW_ALGOS_V5][TW_PROTOS_V5];
  double llMaxBws[TW_COMPCAPS_V5][TW_SCALES_V5];
  double perChMaxRingLL128Bws[TW_COMPCAPS_V5][TW_SCALES_V5];
  double perChMaxTreeLL128Bws[TW_COMPCAPS_V5][TW_SCALES_V5];
  double perChMaxTreeBws[TW_COMPCAPS_V5][TW_SCALES_V5];
  double perChMaxNVLSTreeBws[TW_COMPCAPS_V5][TW_SCALES_V5];
} twTunerConstants_v5;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction,
                       twNvlDomainInfo_v5* nvlDomainInfo, twTunerConstants_v5* constants);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*finalize)(void* ctx);
} twTuner_v5;

typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, ncclDebugLogger_t logFunction, void** ctx);
  ncclResult_t (*getCollInfo)(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* ctx);
} twTuner_v4;

static ncclResult_t initV5(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                           twNvlDomainInfo_v5* nvl, twTunerConstants_v5* constants) {
  (void)commId; (void)log; (void)nvl; (void)constants;
  uintptr_t id = 0;
  ncclResult_t r = twTunerInit(nRanks, nNodes, &id);
  if (ctx != NULL) *ctx = (void*)id;
  return r;
}

static ncclResult_t initV4(size_t nRanks, size_t nNodes, ncclDebugLogger_t log, void** ctx) {
  (void)log;
  uintptr_t id = 0;
  ncclResult_t r = twTunerInit(nRanks, nNodes, &id);
  if (ctx != NULL) *ctx = (void*)id;
  return r;
}

// NCCL passes its float table[numAlgo][numProto] as float**.
static ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps, float** collCostTable,
                                int numAlgo, int numProto, int regBuff, int* nChannels) {
  (void)numPipeOps; (void)regBuff;
  return twTunerGetCollInfo((uintptr_t)ctx, collType, nBytes, (float*)collCostTable, numAlgo, numProto, nChannels);
}

static ncclResult_t finalize(void* ctx) { return twTunerFinalize((uintptr_t)ctx); }

__attribute__((visibility("default"))) const twTuner_v5 ncclTunerPlugin_v5 = {"twinccl", initV5, getCollInfo, finalize};
__attribute__((visibility("default"))) const twTuner_v4 ncclTunerPlugin_v4 = {"twinccl", initV4, getCollInfo, finalize};
