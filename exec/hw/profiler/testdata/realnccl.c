// realnccl runs a few collectives with the system's real NCCL on this
// host's GPUs, one process, one communicator rank per GPU
// (ncclCommInitAll), so that NCCL loads the profiler plugin named by
// NCCL_PROFILER_PLUGIN and the Go test can check the trace it writes.
// CUDA (the driver API, libcuda.so.1) and NCCL are loaded with dlopen: no
// header or library is needed to build it.
//
// usage: realnccl LIBNCCL... (the first that loads is used)
// prints: NOGPU reason | NONCCL reason, or NCCL <version>, NDEV <n>, one
// CALL line per call issued on every rank (op count datatype root), DONE.

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;
typedef void* CUstream;
typedef unsigned long long CUdeviceptr;
typedef void* ncclComm_t;
enum { ncclFloat32 = 7, ncclSum = 0, maxDev = 8 };

static CUresult (*cuInit)(unsigned);
static CUresult (*cuDeviceGetCount)(int*);
static CUresult (*cuDeviceGet)(CUdevice*, int);
static CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
static CUresult (*cuCtxSetCurrent)(CUcontext);
static CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
static CUresult (*cuMemFree)(CUdeviceptr);
static CUresult (*cuStreamCreate)(CUstream*, unsigned);
static CUresult (*cuStreamSynchronize)(CUstream);

static int (*ncclGetVersion)(int*);
static const char* (*ncclGetErrorString)(int);
static int (*ncclCommInitAll)(ncclComm_t*, int, const int*);
static int (*ncclCommDestroy)(ncclComm_t);
static int (*ncclGroupStart)(void);
static int (*ncclGroupEnd)(void);
static int (*ncclAllReduce)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
static int (*ncclAllGather)(const void*, void*, size_t, int, ncclComm_t, CUstream);
static int (*ncclBroadcast)(const void*, void*, size_t, int, int, ncclComm_t, CUstream);
static int (*ncclSend)(const void*, size_t, int, int, ncclComm_t, CUstream);
static int (*ncclRecv)(void*, size_t, int, int, ncclComm_t, CUstream);

#define SYM(lib, f) do { *(void**)&f = dlsym(lib, #f); if (!f) { printf("%s missing %s\n", tag, #f); return 1; } } while (0)
#define SYMV(lib, f, name) do { *(void**)&f = dlsym(lib, name); if (!f) { printf("%s missing %s\n", tag, name); return 1; } } while (0)
#define CU(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s: CUDA error %d\n", #x, r_); exit(1); } } while (0)
#define NC(x) do { int r_ = (x); if (r_) { fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r_)); exit(1); } } while (0)

static int n;
static CUcontext ctx[maxDev];
static CUstream stream[maxDev];
static CUdeviceptr sendb[maxDev], recvb[maxDev];
static ncclComm_t comm[maxDev];

static int loadCuda(void) {
  const char* tag = "NOGPU";
  void* cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!cu) { printf("NOGPU no CUDA driver: %s\n", dlerror()); return 1; }
  SYM(cu, cuInit); SYM(cu, cuDeviceGetCount); SYM(cu, cuDeviceGet); SYM(cu, cuDevicePrimaryCtxRetain);
  SYM(cu, cuCtxSetCurrent); SYMV(cu, cuMemAlloc, "cuMemAlloc_v2"); SYMV(cu, cuMemFree, "cuMemFree_v2");
  SYM(cu, cuStreamCreate); SYM(cu, cuStreamSynchronize);
  if (cuInit(0) != 0) { printf("NOGPU cuInit failed\n"); return 1; }
  if (cuDeviceGetCount(&n) != 0 || n < 1) { printf("NOGPU no CUDA device\n"); return 1; }
  return 0;
}

static int loadNccl(int argc, char** argv) {
  const char* tag = "NONCCL";
  void* lib = NULL;
  for (int i = 1; i < argc && !lib; i++) lib = dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL);
  if (!lib) { printf("NONCCL no libnccl among the %d candidate(s)\n", argc - 1); return 1; }
  SYM(lib, ncclGetVersion); SYM(lib, ncclGetErrorString); SYM(lib, ncclCommInitAll); SYM(lib, ncclCommDestroy);
  SYM(lib, ncclGroupStart); SYM(lib, ncclGroupEnd); SYM(lib, ncclAllReduce); SYM(lib, ncclAllGather);
  SYM(lib, ncclBroadcast); SYM(lib, ncclSend); SYM(lib, ncclRecv);
  return 0;
}

// allReduce and the others issue one call on every rank, in one NCCL group.
static void allReduce(size_t count) {
  NC(ncclGroupStart());
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    NC(ncclAllReduce((void*)sendb[d], (void*)recvb[d], count, ncclFloat32, ncclSum, comm[d], stream[d]));
  }
  NC(ncclGroupEnd());
  printf("CALL AllReduce %zu float32 -1\n", count);
}

static void allGather(size_t count) {
  NC(ncclGroupStart());
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    NC(ncclAllGather((void*)sendb[d], (void*)recvb[d], count, ncclFloat32, comm[d], stream[d]));
  }
  NC(ncclGroupEnd());
  printf("CALL AllGather %zu float32 -1\n", count);
}

static void broadcast(size_t count, int root) {
  NC(ncclGroupStart());
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    NC(ncclBroadcast((void*)sendb[d], (void*)recvb[d], count, ncclFloat32, root, comm[d], stream[d]));
  }
  NC(ncclGroupEnd());
  printf("CALL Broadcast %zu float32 %d\n", count, root);
}

// ring: every rank sends to the next and receives from the previous.
static void ring(size_t count) {
  NC(ncclGroupStart());
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    NC(ncclSend((void*)sendb[d], count, ncclFloat32, (d + 1) % n, comm[d], stream[d]));
    NC(ncclRecv((void*)recvb[d], count, ncclFloat32, (d + n - 1) % n, comm[d], stream[d]));
  }
  NC(ncclGroupEnd());
  printf("CALL SendRecvRing %zu float32 -1\n", count);
}

int main(int argc, char** argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (loadCuda() || loadNccl(argc, argv)) return 0;
  int v = 0;
  NC(ncclGetVersion(&v));
  printf("NCCL %d\n", v);
  if (n > maxDev) n = maxDev;
  const size_t maxCount = 1 << 22;  // floats: 16 MiB per buffer, enough for the AllGather of every size
  int devs[maxDev];
  for (int d = 0; d < n; d++) {
    CUdevice dev;
    devs[d] = d;
    CU(cuDeviceGet(&dev, d));
    CU(cuDevicePrimaryCtxRetain(&ctx[d], dev));
    CU(cuCtxSetCurrent(ctx[d]));
    CU(cuStreamCreate(&stream[d], 1));
    CU(cuMemAlloc(&sendb[d], maxCount * 4));
    CU(cuMemAlloc(&recvb[d], maxCount * 4 * maxDev));
  }
  printf("NDEV %d\n", n);
  NC(ncclCommInitAll(comm, n, devs));
  for (size_t count = 1024; count <= maxCount; count *= 64) {
    allReduce(count);
    allGather(count);
    broadcast(count, n - 1);
    if (n > 1) ring(count);
  }
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    CU(cuStreamSynchronize(stream[d]));
  }
  for (int d = 0; d < n; d++) NC(ncclCommDestroy(comm[d]));
  for (int d = 0; d < n; d++) {
    CU(cuCtxSetCurrent(ctx[d]));
    cuMemFree(sendb[d]);
    cuMemFree(recvb[d]);
  }
  printf("DONE\n");
  return 0;
}
