// The error paths of every function of twinccl's libnccl, without a GPU
// (run by exec/hw/ncclapi/libnccl's TestCAPI, which builds the library and
// this program): NULL pointers, bad datatypes and operations, invalid
// communicators, every error string, the version, ids, groups, and
// ncclInvalidUsage with a last-error string for what is not implemented.
//
// Usage: api_test [--gpu]   (--gpu: CUDA works here; the calls that need
// a device are then expected to succeed)
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl.h"

static int failures = 0;

static int checks = 0;

// expect checks that call (its text) returned want and, when needle is
// not NULL, that the last error mentions needle.
static void expect(int line, const char* call, ncclResult_t got, ncclResult_t want, const char* needle) {
  checks++;
  if (got != want) {
    fprintf(stderr, "api_test.c:%d: %s returned %d, want %d (last error: %s)\n", line, call, (int)got, (int)want, ncclGetLastError(NULL));
    failures++;
  } else if (needle != NULL && strstr(ncclGetLastError(NULL), needle) == NULL) {
    fprintf(stderr, "api_test.c:%d: %s: last error \"%s\" lacks \"%s\"\n", line, call, ncclGetLastError(NULL), needle);
    failures++;
  }
}

#define EXPECT(call, want, needle) expect(__LINE__, #call, (call), (want), (needle))

#define TRUE(cond)                                                            \
  do {                                                                        \
    checks++;                                                                 \
    if (!(cond)) {                                                            \
      fprintf(stderr, "%s:%d: %s is false\n", __FILE__, __LINE__, #cond);     \
      failures++;                                                             \
    }                                                                         \
  } while (0)

int main(int argc, char** argv) {
  int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
  ncclResult_t noDevice = gpu ? ncclSuccess : ncclUnhandledCudaError;

  // Version: NCCL_VERSION_CODE of the API implemented.
  int version = 0;
  EXPECT(ncclGetVersion(NULL), ncclInvalidArgument, "version is NULL");
  EXPECT(ncclGetVersion(&version), ncclSuccess, NULL);
  TRUE(version == NCCL_VERSION_CODE);
  TRUE(version == 22809);
  TRUE(NCCL_VERSION(2, 28, 9) == 22809);
  EXPECT(pncclGetVersion(&version), ncclSuccess, NULL);

  // Error strings: one per code, distinct, NCCL's texts.
  for (int r = 0; r < ncclNumResults; r++) {
    const char* s = ncclGetErrorString((ncclResult_t)r);
    TRUE(s != NULL && s[0] != '\0');
    for (int q = 0; q < r; q++) TRUE(strcmp(s, ncclGetErrorString((ncclResult_t)q)) != 0);
  }
  TRUE(strcmp(ncclGetErrorString(ncclSuccess), "no error") == 0);
  TRUE(strstr(ncclGetErrorString(ncclInvalidUsage), "invalid usage") != NULL);
  TRUE(strstr(ncclGetErrorString(ncclRemoteError), "remote process exited") != NULL);
  TRUE(strcmp(ncclGetErrorString((ncclResult_t)ncclNumResults), "unknown result code") == 0);
  TRUE(strcmp(ncclGetErrorString((ncclResult_t)-1), "unknown result code") == 0);

  // Unique ids work without a GPU and differ.
  ncclUniqueId id, id2, zero;
  memset(&zero, 0, sizeof zero);
  TRUE(sizeof(ncclUniqueId) == 128);
  EXPECT(ncclGetUniqueId(NULL), ncclInvalidArgument, "uniqueId is NULL");
  EXPECT(ncclGetUniqueId(&id), ncclSuccess, NULL);
  EXPECT(ncclGetUniqueId(&id2), ncclSuccess, NULL);
  TRUE(memcmp(&id, &id2, sizeof id) != 0);
  TRUE(memcmp(&id, &zero, sizeof id) != 0);

  // Communicator creation.
  ncclComm_t comm = NULL;
  EXPECT(ncclCommInitRank(NULL, 1, id, 0), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclCommInitRank(&comm, 1, zero, 0), ncclInvalidArgument, "ncclGetUniqueId");
  TRUE(comm == NULL);
  EXPECT(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument, "nranks 0");
  EXPECT(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument, "rank 2 out of range");
  EXPECT(ncclCommInitRank(&comm, 2, id, -1), ncclInvalidArgument, "rank -1 out of range");
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  TRUE(config.magic == NCCL_API_MAGIC && config.size == sizeof(ncclConfig_t) && config.version == NCCL_VERSION_CODE);
  ncclConfig_t bad = config;
  bad.magic = 0;
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument, "NCCL_CONFIG_INITIALIZER");
  EXPECT(ncclCommInitAll(NULL, 1, NULL), ncclInvalidArgument, "comm is NULL");
  ncclComm_t comms[2] = {NULL, NULL};
  EXPECT(ncclCommInitAll(comms, 0, NULL), ncclInvalidArgument, "ndev");
  int dup[2] = {0, 0};
  EXPECT(ncclCommInitAll(comms, 2, dup), ncclInvalidUsage, "twice");

  // A one-rank communicator: made on a GPU, refused with a CUDA error
  // without one.
  EXPECT(ncclCommInitRankConfig(&comm, 1, id, 0, &config), noDevice, gpu ? NULL : "ncclCommInitRankConfig");
  if (gpu) {
    int n = -1, r = -1, d = -1;
    ncclResult_t async = ncclInternalError;
    EXPECT(ncclCommCount(comm, &n), ncclSuccess, NULL);
    EXPECT(ncclCommUserRank(comm, &r), ncclSuccess, NULL);
    EXPECT(ncclCommCuDevice(comm, &d), ncclSuccess, NULL);
    EXPECT(ncclCommGetAsyncError(comm, &async), ncclSuccess, NULL);
    TRUE(n == 1 && r == 0 && d >= 0 && async == ncclSuccess);
    EXPECT(ncclCommCount(comm, NULL), ncclInvalidArgument, "NULL");
    EXPECT(ncclAllReduce(NULL, NULL, 4, ncclFloat, ncclSum, comm, NULL), ncclInvalidArgument, "sendbuff is NULL");
    EXPECT(ncclBroadcast(NULL, NULL, 4, ncclFloat, 1, comm, NULL), ncclInvalidArgument, "root 1 out of range");
    EXPECT(ncclSend(NULL, 4, ncclFloat, 1, comm, NULL), ncclInvalidArgument, "peer 1 out of range");
    EXPECT(ncclSend((void*)64, 4, ncclFloat, 0, comm, NULL), ncclInvalidUsage, "to self");
    EXPECT(ncclGather((void*)64, NULL, 1, ncclFloat, 0, comm, NULL), ncclInvalidArgument, "root's recvbuff is NULL");
    EXPECT(ncclScatter(NULL, (void*)64, 1, ncclFloat, 1, comm, NULL), ncclInvalidArgument, "ncclScatter: Scatter root 1 out of range");
    EXPECT(ncclCommFinalize(comm), ncclSuccess, NULL);
    // The caller had no current CUDA context, and still has none: the
    // library gives back the context it found (Finalize synchronised the
    // communicator's).
    void* cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int (*getCurrent)(void**) = cuda == NULL ? NULL : (int (*)(void**))dlsym(cuda, "cuCtxGetCurrent");
    void* current = (void*)1;
    TRUE(getCurrent != NULL && getCurrent(&current) == 0 && current == NULL);
    EXPECT(ncclCommDestroy(comm), ncclSuccess, NULL);
    EXPECT(ncclCommDestroy(comm), ncclInvalidArgument, "not a live communicator");
  } else {
    TRUE(comm == NULL);
    TRUE(strlen(ncclGetLastError(NULL)) > strlen("ncclCommInitRankConfig: "));
  }
  EXPECT(ncclCommInitAll(comms, 1, NULL), noDevice, gpu ? NULL : "ncclCommInitAll");
  if (gpu) EXPECT(ncclCommDestroy(comms[0]), ncclSuccess, NULL);

  // Invalid communicators, everywhere one is taken.
  ncclComm_t bogus = (ncclComm_t)&version;
  int out = 0;
  ncclResult_t async;
  EXPECT(ncclCommCount(NULL, &out), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclCommCuDevice(NULL, &out), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclCommUserRank(bogus, &out), ncclInvalidArgument, "not a live communicator");
  EXPECT(ncclCommGetAsyncError(bogus, &async), ncclInvalidArgument, "not a live communicator");
  EXPECT(ncclCommFinalize(NULL), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclCommDestroy(NULL), ncclSuccess, NULL);
  EXPECT(ncclCommAbort(NULL), ncclSuccess, NULL);
  EXPECT(ncclCommDestroy(bogus), ncclInvalidArgument, "ncclCommDestroy: comm is not a live");
  EXPECT(ncclCommAbort(bogus), ncclInvalidArgument, "ncclCommAbort");
  ncclComm_t child = NULL;
  EXPECT(ncclCommSplit(NULL, 0, 0, &child, NULL), ncclInvalidArgument, "ncclCommSplit: comm is NULL");
  EXPECT(ncclCommSplit(bogus, 0, 0, &child, NULL), ncclInvalidArgument, "not a live");

  // Collectives: datatype and operation first, then the communicator.
  float buf[4];
  EXPECT(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument, "ncclAllReduce: comm is NULL");
  EXPECT(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, bogus, NULL), ncclInvalidArgument, "not a live");
  EXPECT(ncclAllReduce(buf, buf, 4, (ncclDataType_t)ncclNumTypes, ncclSum, NULL, NULL), ncclInvalidArgument, "invalid datatype 12");
  EXPECT(ncclAllReduce(buf, buf, 4, (ncclDataType_t)-1, ncclSum, NULL, NULL), ncclInvalidArgument, "invalid datatype -1");
  EXPECT(ncclAllReduce(buf, buf, 4, ncclFloat, ncclNumOps, NULL, NULL), ncclInvalidArgument, "invalid reduction operation 5");
  EXPECT(ncclReduce(buf, buf, 4, ncclFloat, (ncclRedOp_t)-3, 0, NULL, NULL), ncclInvalidArgument, "ncclReduce: invalid reduction operation -3");
  EXPECT(ncclReduceScatter(buf, buf, 1, ncclFloat8e4m3, ncclMax, NULL, NULL), ncclInvalidUsage, "fp8");
  EXPECT(ncclAllGather(buf, buf, 1, ncclFloat8e5m2, NULL, NULL), ncclInvalidArgument, "ncclAllGather: comm is NULL");
  EXPECT(ncclAllGather(buf, buf, 1, ncclBfloat16, bogus, NULL), ncclInvalidArgument, "not a live");
  EXPECT(ncclBroadcast(buf, buf, 1, ncclInt8, 0, NULL, NULL), ncclInvalidArgument, "ncclBroadcast: comm is NULL");
  EXPECT(ncclBcast(buf, 1, (ncclDataType_t)99, 0, NULL, NULL), ncclInvalidArgument, "invalid datatype 99");
  EXPECT(ncclAlltoAll(buf, buf, 1, ncclInt32, NULL, NULL), ncclInvalidArgument, "ncclAlltoAll: comm is NULL");
  EXPECT(ncclSend(buf, 1, ncclUint64, 0, NULL, NULL), ncclInvalidArgument, "ncclSend: comm is NULL");
  EXPECT(ncclRecv(buf, 1, (ncclDataType_t)12, 0, bogus, NULL), ncclInvalidArgument, "ncclRecv: invalid datatype");
  EXPECT(pncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclGather(buf, buf, 1, ncclFloat, 0, bogus, NULL), ncclInvalidArgument, "ncclGather: comm is not a live");
  EXPECT(ncclScatter(buf, buf, 1, (ncclDataType_t)ncclNumTypes, 0, NULL, NULL), ncclInvalidArgument, "ncclScatter: invalid datatype");

  // Groups.
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "without a matching ncclGroupStart");
  EXPECT(ncclGroupStart(), ncclSuccess, NULL);
  EXPECT(ncclGroupStart(), ncclSuccess, NULL);
  EXPECT(ncclAllReduce(buf, buf, 4, ncclFloat, ncclSum, NULL, NULL), ncclInvalidArgument, "comm is NULL");
  EXPECT(ncclGroupEnd(), ncclSuccess, NULL);
  EXPECT(ncclGroupEnd(), ncclSuccess, NULL);
  EXPECT(ncclGroupEnd(), ncclInvalidUsage, "ncclGroupEnd");

  // Memory.
  void* p = NULL;
  EXPECT(ncclMemAlloc(NULL, 64), ncclInvalidArgument, "ptr is NULL");
  EXPECT(ncclMemAlloc(&p, 0), ncclInvalidArgument, "size 0");
  EXPECT(ncclMemAlloc(&p, 4096), noDevice, NULL);
  if (gpu) {
    TRUE(p != NULL);
    EXPECT(ncclMemFree(p), ncclSuccess, NULL);
  }
  EXPECT(ncclMemFree(NULL), ncclSuccess, NULL);
  EXPECT(ncclMemFree(buf), ncclInvalidArgument, "not returned by ncclMemAlloc");

  // Everything else in nccl.h: ncclInvalidUsage, naming the function.
  ncclRedOp_t op;
  void* handle = NULL;
  ncclWindow_t win = NULL;
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT(ncclCommInitRankScalable(&comm, 1, 0, 1, &id, NULL), ncclInvalidUsage, "ncclCommInitRankScalable: not implemented");
  EXPECT(ncclCommShrink(bogus, NULL, 0, &child, NULL, NCCL_SHRINK_DEFAULT), ncclInvalidUsage, "ncclCommShrink: not implemented");
  EXPECT(ncclCommRegister(bogus, buf, sizeof buf, &handle), ncclInvalidUsage, "ncclCommRegister: not implemented");
  EXPECT(ncclCommDeregister(bogus, handle), ncclInvalidUsage, "ncclCommDeregister: not implemented");
  EXPECT(ncclCommWindowRegister(bogus, buf, sizeof buf, &win, NCCL_WIN_DEFAULT), ncclInvalidUsage, "ncclCommWindowRegister: not implemented");
  EXPECT(ncclCommWindowDeregister(bogus, win), ncclInvalidUsage, "ncclCommWindowDeregister: not implemented");
  EXPECT(ncclRedOpCreatePreMulSum(&op, buf, ncclFloat, ncclScalarHostImmediate, bogus), ncclInvalidUsage, "ncclRedOpCreatePreMulSum: not implemented");
  EXPECT(ncclRedOpDestroy(ncclNumOps, bogus), ncclInvalidUsage, "ncclRedOpDestroy: not implemented");
  EXPECT(ncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd: not implemented");
  EXPECT(pncclGroupSimulateEnd(&sim), ncclInvalidUsage, "ncclGroupSimulateEnd");

  // The Go runtime inside the library (docs/guide/library.md): it handles
  // the synchronous signals and SIGURG (goroutine preemption) and leaves
  // the application's signals alone.
  int goSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGURG};
  int appSignals[] = {SIGINT, SIGTERM, SIGPROF, SIGCHLD, SIGUSR1, SIGALRM};
  for (size_t i = 0; i < sizeof goSignals / sizeof goSignals[0]; i++) {
    struct sigaction sa;
    TRUE(sigaction(goSignals[i], NULL, &sa) == 0 && sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN);
  }
  for (size_t i = 0; i < sizeof appSignals / sizeof appSignals[0]; i++) {
    struct sigaction sa;
    TRUE(sigaction(appSignals[i], NULL, &sa) == 0 && sa.sa_handler == SIG_DFL);
  }

  printf("%d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
