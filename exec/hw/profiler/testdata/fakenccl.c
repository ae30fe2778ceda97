// fakenccl stands in for NCCL in the profiler plugin's test: it loads the
// plugin as NCCL 2.28 does (dlopen, then dlsym of ncclProfiler_v5, _v4, ...
// newest first, or the one version --api names), initialises two
// communicators and drives the events NCCL would send for a few
// collectives and point-to-point calls, one thread per communicator. It
// prints what it passed (CALL lines, NCCL's names and the names the trace
// must hold), the plugin's log (LOG lines) and the init results, for the
// Go test to check the trace against.
//
// usage: fakenccl PLUGIN.so RANK [--api vN] [--remove-dir] [--no-finalize] [--bench N]
//
// --bench N issues N AllReduce calls on the first communicator, as NCCL
// 2.28 reports each (API event, task, two kernel channels), and prints the
// plugin's time per call: "BENCH ns/call".

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "abi.h"

#define GPU_OFFSET 1700000000000000000ULL  // fabricated %globaltimer: host clock + this

static int api;  // ABI version loaded
static void* table;
static int mask[2];
static void* ctxs[2];
static int rank_;
static pthread_mutex_t outMu = PTHREAD_MUTEX_INITIALIZER;

static int64_t nowNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static void spin(int64_t ns) {
  int64_t end = nowNs() + ns;
  while (nowNs() < end) {
  }
}

static void logger(int level, unsigned long flags, const char* file, int line, const char* fmt, ...) {
  (void)flags; (void)file; (void)line;
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&outMu);
  printf("LOG %d %s\n", level, buf);
  pthread_mutex_unlock(&outMu);
}

// One call of the scenario: NCCL's names and what the trace must say.
typedef struct {
  const char *func, *dtype, *algo, *proto;  // as NCCL passes them
  const char *wantOp, *wantDtype, *wantAlgo, *wantProto;
  int fnum, dnum, anum, pnum;  // version 1's enum numbers
  size_t count;
  int root;  // root, or peer for Send/Recv
  int nch;
  uint64_t stream;
} call_t;

static const call_t callsA[] = {
  {"AllReduce", "ncclFloat32", "RING", "SIMPLE", "AllReduce", "float32", "Ring", "Simple", 4, 7, 1, 2, 1024, 0, 2, 0x1111},
  {"AllGather", "ncclBfloat16", "RING", "LL", "AllGather", "bfloat16", "Ring", "LL", 2, 9, 1, 0, 256, 0, 1, 0x1111},
  {"Broadcast", "ncclInt8", "RING", "LL128", "Broadcast", "int8", "Ring", "LL128", 0, 0, 1, 1, 4096, 1, 4, 0x1111},
  {"Send", "ncclFloat32", NULL, NULL, "Send", "float32", "", "", 6, 7, 0, 0, 100, -1, 1, 0x3333},
  {"Recv", "ncclFloat32", NULL, NULL, "Recv", "float32", "", "", 7, 7, 0, 0, 100, -1, 1, 0x3333},
  {"ReduceScatter", "ncclFloat16", "PAT", "SIMPLE", "ReduceScatter", "float16", "PAT", "Simple", 3, 6, 6, 2, 64, 0, 1, 0x1111},
  {"Send", "ncclFloat32", NULL, NULL, "Send", "float32", "", "", 6, 7, 0, 0, 200, -1, 1, 0x3333},
};
static const call_t callsB[] = {
  {"AllReduce", "ncclFloat64", "RING", "LL", "AllReduce", "float64", "Ring", "LL", 4, 8, 1, 0, 8, 0, 1, 0x2222},
  {"Reduce", "ncclInt32", "TREE", "LL", "Reduce", "int32", "Tree", "LL", 1, 2, 0, 0, 16, 0, 1, 0x2222},
  {"AllReduce", "ncclUint64", "NVLS_TREE", "SIMPLE", "AllReduce", "uint64", "NVLSTree", "Simple", 4, 5, 5, 2, 32, 0, 3, 0x2222},
};
#define NA (int)(sizeof callsA / sizeof callsA[0])
#define NB (int)(sizeof callsB / sizeof callsB[0])

typedef struct {
  int c;  // communicator index
  uint64_t hash;
  int nranks, rank;
  const call_t* calls;
  int n;
  int64_t t0[8], t1[8], gdur[8];
  int root[8];
  int kept[8];
} comm_t;

static twp_result start(void* ctx, void** h, void* descr) {
  switch (api) {
    case 5: return ((twp_profiler_v5*)table)->startEvent(ctx, h, descr);
    case 4: return ((twp_profiler_v4*)table)->startEvent(ctx, h, descr);
    case 3: return ((twp_profiler_v3*)table)->startEvent(ctx, h, descr);
    case 2: return ((twp_profiler_v2*)table)->startEvent(ctx, h, descr);
    default: return ((twp_profiler_v1*)table)->startEvent(ctx, h, descr);
  }
}
static void stop(void* h) {
  if (h) ((twp_profiler_v5*)table)->stopEvent(h);  // the same slot in every version
}
static void record(void* h, int state, uint64_t value) {
  if (!h) return;
  if (api >= 4) {
    twp_state_args_v5 a;
    memset(&a, 0, sizeof a);
    if (state == twpStateKernelChStop) a.kernelCh.pTimer = value; else a.proxyStep.transSize = value;
    ((twp_profiler_v5*)table)->recordEventState(h, state, &a);
  } else {
    twp_state_args_v1 a;
    memset(&a, 0, sizeof a);
    a.proxyOp.transSize = value;
    ((twp_profiler_v1*)table)->recordEventState(h, state, &a);
  }
}

// startCall starts the call's task event (Coll or P2p) in the version's
// descriptor; parent is the API event (version 5).
// byteTask reports whether NCCL's task counts the call in bytes of
// ncclInt8 (AllGather, Broadcast), as its collTaskAppend does.
static int byteTask(const call_t* k) { return strcmp(k->func, "AllGather") == 0 || strcmp(k->func, "Broadcast") == 0; }
static size_t dtypeSize(const char* d) {
  if (strstr(d, "64")) return 8;
  if (strstr(d, "32")) return 4;
  if (strstr(d, "16")) return 2;
  return 1;
}

static void* startCall(comm_t* cm, const call_t* k0, int peer, void* parent) {
  void* h = NULL;
  int p2p = k0->algo == NULL;
  call_t task = *k0;
  const call_t* k = &task;
  if (byteTask(k0)) {
    task.count = k0->count * dtypeSize(k0->dtype);
    task.dtype = "ncclInt8";
    task.dnum = 0;
  }
  if (api == 5) {
    twp_descr_v5 d;
    memset(&d, 0, sizeof d);
    d.type = p2p ? twpP2p : twpColl;
    d.parentObj = parent;
    d.rank = cm->rank;
    if (p2p) {
      d.p2p.func = k->func; d.p2p.datatype = k->dtype; d.p2p.count = k->count; d.p2p.peer = peer; d.p2p.nChannels = k->nch;
    } else {
      d.coll.func = k->func; d.coll.datatype = k->dtype; d.coll.count = k->count; d.coll.root = k->root;
      d.coll.nChannels = k->nch; d.coll.algo = k->algo; d.coll.proto = k->proto; d.coll.seqNumber = 7;
    }
    start(ctxs[cm->c], &h, &d);
  } else if (api == 4) {
    twp_descr_v4 d;
    memset(&d, 0, sizeof d);
    d.type = p2p ? twpP2p : twpColl;
    d.rank = cm->rank;
    if (p2p) {
      d.p2p.func = k->func; d.p2p.datatype = k->dtype; d.p2p.count = k->count; d.p2p.peer = peer; d.p2p.nChannels = k->nch;
    } else {
      d.coll.func = k->func; d.coll.datatype = k->dtype; d.coll.count = k->count; d.coll.root = k->root;
      d.coll.nChannels = k->nch; d.coll.algo = k->algo; d.coll.proto = k->proto;
    }
    start(ctxs[cm->c], &h, &d);
  } else {  // version 1: numbers, the communicator in the event
    twp_descr_v1 d;
    memset(&d, 0, sizeof d);
    d.type = p2p ? twpP2p : twpColl;
    d.rank = cm->rank;
    if (p2p) {
      d.p2p.commHash = cm->hash; d.p2p.func = k->fnum; d.p2p.datatype = k->dnum; d.p2p.count = k->count; d.p2p.peer = peer;
    } else {
      d.coll.commHash = cm->hash; d.coll.func = k->fnum; d.coll.datatype = k->dnum; d.coll.count = k->count;
      d.coll.root = k->root; d.coll.nMaxChannels = k->nch; d.coll.algo = k->anum; d.coll.proto = k->pnum;
    }
    start(ctxs[cm->c], &h, &d);
  }
  return h;
}

// anyDescr holds a descriptor of any version; header fills the part before
// the union (whose layout differs: v5's type is 64 bits) and returns the
// union, which starts at the same offset in every version.
typedef union {
  twp_descr_v5 v5;
  twp_descr_v4 v4;
  twp_descr_v1 v1;
} anyDescr;

static void* header(anyDescr* d, int type, void* parent, int rank) {
  memset(d, 0, sizeof *d);
  if (api == 5) { d->v5.type = type; d->v5.parentObj = parent; d->v5.rank = rank; return &d->v5.proxyOp; }
  if (api == 4) { d->v4.type = type; d->v4.parentObj = parent; d->v4.rank = rank; return &d->v4.proxyOp; }
  d->v1.type = type; d->v1.parentObj = parent; d->v1.rank = rank; return &d->v1.proxyOp;
}

// proxyOp drives one proxy operation of two steps, as NCCL's proxy thread
// does, when the plugin asked for proxy events. A second operation claims
// another process's pid with a bogus parent: the plugin must not follow it.
static void proxyOp(comm_t* cm, void* task, int peer, int isSend) {
  if (!(mask[cm->c] & twpProxyOp)) return;
  anyDescr d;
  struct twp_proxy_op* op = header(&d, twpProxyOp, task, cm->rank);
  op->pid = getpid(); op->channelId = 0; op->peer = peer; op->nSteps = 2; op->chunkSize = 4096; op->isSend = isSend;
  void* oh = NULL;
  start(ctxs[cm->c], &oh, &d);
  for (int s = 0; s < 2; s++) {
    anyDescr sd;
    int* step = header(&sd, twpProxyStep, oh, cm->rank);
    *step = s;
    void* sh = NULL;
    start(ctxs[cm->c], &sh, &sd);
    spin(1000);
    if (isSend) {
      record(sh, twpStateProxyStepSendGPUWait, 0);
      spin(1000);
      record(sh, twpStateProxyStepSendWait, 2048);
    } else {
      record(sh, twpStateProxyStepRecvWait, 0);
      spin(1000);
      record(sh, twpStateProxyStepRecvFlushWait, 2048);
      record(sh, twpStateProxyStepRecvGPUWait, 2048);
    }
    spin(1000);
    stop(sh);
  }
  stop(oh);
  // Another process's operation: its parent is not a handle of ours.
  op = header(&d, twpProxyOp, (void*)(uintptr_t)0x2, cm->rank);
  op->pid = getpid() + 1; op->peer = peer; op->isSend = isSend;
  void* foreign = NULL;
  start(ctxs[cm->c], &foreign, &d);
  stop(foreign);
}

static void* run(void* arg) {
  comm_t* cm = arg;
  for (int i = 0; i < cm->n; i++) {
    const call_t* k = &cm->calls[i];
    int p2p = k->algo == NULL;
    int peer = p2p ? cm->nranks - 1 - cm->rank : k->root;
    cm->root[i] = p2p ? peer : k->root;
    cm->t0[i] = nowNs();
    void* apiH = NULL;
    if (api == 5) {
      // The group API event the plugin does not keep: no handle.
      twp_descr_v5 g;
      memset(&g, 0, sizeof g);
      g.type = twpGroupApi;
      void* gh = (void*)1;
      start(ctxs[cm->c], &gh, &g);
      if (gh != NULL) { fprintf(stderr, "group API event got a handle\n"); exit(3); }
      twp_descr_v5 d;
      memset(&d, 0, sizeof d);
      d.type = p2p ? twpP2pApi : twpCollApi;
      if (p2p) { d.p2pApi.func = k->func; d.p2pApi.count = k->count; d.p2pApi.datatype = k->dtype; d.p2pApi.stream = (void*)(uintptr_t)k->stream; }
      else { d.collApi.func = k->func; d.collApi.count = k->count; d.collApi.datatype = k->dtype; d.collApi.root = k->root; d.collApi.stream = (void*)(uintptr_t)k->stream; }
      start(ctxs[cm->c], &apiH, &d);
      stop(apiH);
    }
    spin(2000);
    void* task = startCall(cm, k, peer, apiH);
    cm->kept[i] = task != NULL;  // NULL once the plugin's event cap is reached
    stop(task);  // NCCL stops the task event once the kernel is launched
    int64_t gmin = 0, gmax = 0;
    if (api >= 4 && (mask[cm->c] & twpKernelCh)) {
      for (int c = 0; c < k->nch; c++) {
        twp_descr_v5 d;  // the kernel channel part of v4 and v5 has one layout after the header
        twp_descr_v4 d4;
        memset(&d, 0, sizeof d);
        memset(&d4, 0, sizeof d4);
        uint64_t gs = (uint64_t)nowNs() + GPU_OFFSET - 300;  // the GPU started a little before the proxy saw it
        void* kh = NULL;
        if (api == 5) {
          d.type = twpKernelCh; d.parentObj = task; d.kernelCh.channelId = c; d.kernelCh.pTimer = gs;
          start(ctxs[cm->c], &kh, &d);
        } else {
          d4.type = twpKernelCh; d4.parentObj = task; d4.kernelCh.channelId = c; d4.kernelCh.pTimer = gs;
          start(ctxs[cm->c], &kh, &d4);
        }
        spin(3000 + 1000 * c);
        uint64_t ge = (uint64_t)nowNs() + GPU_OFFSET - 200;
        record(kh, twpStateKernelChStop, ge);
        stop(kh);
        if (gmin == 0 || (int64_t)gs < gmin) gmin = gs;
        if ((int64_t)ge > gmax) gmax = ge;
      }
    }
    proxyOp(cm, task, peer, p2p ? strcmp(k->func, "Send") == 0 : 1);
    cm->gdur[i] = gmax - gmin;
    cm->t1[i] = nowNs();
  }
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 3) { fprintf(stderr, "usage: fakenccl PLUGIN.so RANK [--api vN] [--remove-dir] [--no-finalize]\n"); return 2; }
  rank_ = atoi(argv[2]);
  int want = 0, removeDir = 0, finalize = 1, bench = 0;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "--api") == 0 && i + 1 < argc) want = atoi(argv[++i] + 1);
    else if (strcmp(argv[i], "--remove-dir") == 0) removeDir = 1;
    else if (strcmp(argv[i], "--no-finalize") == 0) finalize = 0;
    else if (strcmp(argv[i], "--bench") == 0 && i + 1 < argc) bench = atoi(argv[++i]);
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
  for (int v = 5; v >= 1; v--) {  // newest first, as NCCL 2.28 looks
    if (want && v != want) continue;
    char name[32];
    snprintf(name, sizeof name, "ncclProfiler_v%d", v);
    if ((table = dlsym(lib, name)) != NULL) { api = v; break; }
  }
  if (!table) { fprintf(stderr, "no ncclProfiler_vN symbol\n"); return 2; }
  printf("API v%d %s\n", api, *(const char**)table);

  comm_t comms[2] = {
    {0, 0xa0000000a1ULL, 2, rank_, callsA, NA, {0}, {0}, {0}, {0}, {0}},
    {1, 0xb0000000b0ULL + (uint64_t)rank_, 1, 0, callsB, NB, {0}, {0}, {0}, {0}, {0}},
  };
  for (int c = 0; c < 2; c++) {
    int rc;
    const char* names[2] = {"world", "solo"};
    if (api == 5) rc = ((twp_profiler_v5*)table)->init(&ctxs[c], comms[c].hash, &mask[c], names[c], 1, comms[c].nranks, comms[c].rank, logger);
    else if (api == 4) rc = ((twp_profiler_v4*)table)->init(&ctxs[c], &mask[c], names[c], comms[c].hash, 1, comms[c].nranks, comms[c].rank, logger);
    else rc = ((twp_profiler_v1*)table)->init(&ctxs[c], &mask[c]);
    printf("INIT %d rc=%d mask=%d ctx=%d\n", c, rc, mask[c], ctxs[c] != NULL);
  }
  if (ctxs[0] == NULL || ctxs[1] == NULL) return 0;  // NCCL goes on without a profiler
  if (bench > 0) {
    if (api != 5) { fprintf(stderr, "--bench needs the v5 table\n"); return 2; }
    twp_profiler_v5* p = table;
    int64_t t0 = nowNs();
    for (int i = 0; i < bench; i++) {
      twp_descr_v5 d;
      void *a = NULL, *h = NULL;
      memset(&d, 0, sizeof d);
      d.type = twpCollApi; d.collApi.func = "AllReduce"; d.collApi.count = 1024; d.collApi.datatype = "ncclFloat32";
      p->startEvent(ctxs[0], &a, &d);
      p->stopEvent(a);
      memset(&d, 0, sizeof d);
      d.type = twpColl; d.parentObj = a; d.coll.func = "AllReduce"; d.coll.count = 1024; d.coll.datatype = "ncclFloat32";
      d.coll.algo = "RING"; d.coll.proto = "LL"; d.coll.nChannels = 2;
      p->startEvent(ctxs[0], &h, &d);
      p->stopEvent(h);
      for (int c = 0; c < 2; c++) {
        void* k = NULL;
        memset(&d, 0, sizeof d);
        d.type = twpKernelCh; d.parentObj = h; d.kernelCh.channelId = c; d.kernelCh.pTimer = GPU_OFFSET + (uint64_t)i * 1000;
        p->startEvent(ctxs[0], &k, &d);
        twp_state_args_v5 st = {.kernelCh = {GPU_OFFSET + (uint64_t)i * 1000 + 500}};
        p->recordEventState(k, twpStateKernelChStop, &st);
        p->stopEvent(k);
      }
    }
    int64_t t1 = nowNs();
    printf("BENCH %.1f\n", (double)(t1 - t0) / bench);
  }

  pthread_t th[2];
  for (int c = 0; c < 2 && bench == 0; c++) pthread_create(&th[c], NULL, run, &comms[c]);
  for (int c = 0; c < 2 && bench == 0; c++) pthread_join(th[c], NULL);

  for (int c = 0; c < 2 && bench == 0; c++) {
    comm_t* cm = &comms[c];
    for (int i = 0; i < cm->n; i++) {
      const call_t* k = &cm->calls[i];
      // Version 5 gives the application's count and datatype (the API
      // event's); older ones only the task's.
      int bytes = api < 5 && byteTask(k);
      printf("CALL %d %d %#llx %d %d %s %zu %s %d %s %s %d %#llx %lld %lld %lld\n", c, cm->kept[i], (unsigned long long)cm->hash, cm->rank,
             api >= 4 ? cm->nranks : 0, k->wantOp, bytes ? k->count * dtypeSize(k->dtype) : k->count, bytes ? "int8" : k->wantDtype, cm->root[i], k->wantAlgo[0] ? k->wantAlgo : "-",
             k->wantProto[0] ? k->wantProto : "-", (k->algo == NULL && api < 4) ? 0 : k->nch,
             (unsigned long long)(api == 5 ? k->stream : 0), (long long)cm->t0[i], (long long)cm->t1[i], (long long)cm->gdur[i]);
    }
  }
  if (removeDir) {
    const char* dir = getenv("TWINCCL_PROFILER_DIR");
    if (dir && rmdir(dir) != 0) { perror("rmdir"); return 2; }
  }
  if (finalize) {
    for (int c = 0; c < 2; c++) {
      int rc = ((twp_profiler_v5*)table)->finalize(ctxs[c]);
      printf("FINALIZE %d rc=%d\n", c, rc);
    }
  }
  return 0;
}
