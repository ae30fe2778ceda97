// The one event form the version shims (shim.c) hand to Go: every ABI
// version's descriptor is converted to it, NCCL's names as NCCL's strings.

#ifndef TWINCCL_PROFILER_EVENT_H
#define TWINCCL_PROFILER_EVENT_H

#include <stdint.h>

typedef struct {
  int64_t hostNs;       // CLOCK_MONOTONIC when NCCL called the plugin
  uint64_t parent;      // the plugin's handle of the parent event, 0 if none
  uint64_t commHash;    // versions 1-3: the communicator named in the event
  uint64_t seqNumber;
  uint64_t count;
  uint64_t stream;
  uint64_t pTimer;      // GPU %globaltimer ns (kernel channel start)
  const char* func;     // "AllReduce", "Send", ...
  const char* datatype; // "ncclFloat32", ...
  const char* algo;     // "RING", ...
  const char* proto;    // "SIMPLE", ...
  const char* redop;    // "sum", ... (version 1 only)
  uint32_t type;        // event type bit
  int32_t rank;
  int32_t root;
  int32_t peer;
  int32_t nChannels;
  int32_t channel;
  int32_t isSend;
  int32_t nSteps;
  int32_t chunkSize;
  int32_t step;
  int32_t foreign;      // a proxy operation of another process: parent is not ours
} twp_event;

#endif
