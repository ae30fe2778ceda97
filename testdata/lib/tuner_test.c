// Loads a tuner plugin as NCCL 2.28 does (dlopen, dlsym of
// ncclTunerPlugin_v5, init, getCollInfo on a cost table, finalize) and
// prints its answer for every tuned collective at every power-of-two size
// from 8 B to 4 GiB, one line each:
//   COLL BYTES ALGO PROTO NCHANNELS     (ALGO -1: no advice)
// with every pair allowed, then again with Ring disallowed (cost -1, as
// NCCL marks pairs it ignores) under the tag "noring". Run by
// exec/hw/tuner/plugin's TestPluginAnswers.
// Usage: tuner_test PLUGIN.so NRANKS NNODES
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*initV5)(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes, void* log, void* nvl, void* constants);
typedef int (*getCollInfoFn)(void* ctx, int collType, size_t nBytes, int numPipeOps, float** table, int numAlgo, int numProto, int regBuff, int* nChannels);
typedef int (*finalizeFn)(void* ctx);
typedef struct {
  const char* name;
  initV5 init;
  getCollInfoFn getCollInfo;
  finalizeFn finalize;
} tunerV5;
typedef struct {
  const char* name;
  int (*init)(size_t nRanks, size_t nNodes, void* log, void** ctx);
  getCollInfoFn getCollInfo;
  finalizeFn destroy;
} tunerV4;

enum { NALGO = 7, NPROTO = 3 };

static void ask(const tunerV5* t, void* ctx, const char* tag, int noRing) {
  for (int coll = 0; coll < 5; coll++) {
    for (int k = 3; k <= 32; k++) {
      float table[NALGO][NPROTO];
      for (int a = 0; a < NALGO; a++)
        for (int p = 0; p < NPROTO; p++) table[a][p] = (noRing && a == 1) ? -1.0f : 1000.0f;
      int nch = -1;
      size_t bytes = (size_t)1 << k;
      if (t->getCollInfo(ctx, coll, bytes, 1, (float**)table, NALGO, NPROTO, 0, &nch) != 0) {
        fprintf(stderr, "getCollInfo(%d, %zu) failed\n", coll, bytes);
        exit(1);
      }
      int algo = -1, proto = -1, zeros = 0;
      for (int a = 0; a < NALGO; a++)
        for (int p = 0; p < NPROTO; p++)
          if (table[a][p] == 0.0f) { algo = a; proto = p; zeros++; }
      if (zeros > 1) {
        fprintf(stderr, "getCollInfo(%d, %zu) zeroed %d pairs\n", coll, bytes, zeros);
        exit(1);
      }
      printf("%s %d %zu %d %d %d\n", tag, coll, bytes, algo, proto, nch);
    }
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: tuner_test PLUGIN.so NRANKS NNODES\n");
    return 2;
  }
  void* h = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  const tunerV5* t = (const tunerV5*)dlsym(h, "ncclTunerPlugin_v5");
  const tunerV4* t4 = (const tunerV4*)dlsym(h, "ncclTunerPlugin_v4");
  if (t == NULL || t4 == NULL) {
    fprintf(stderr, "plugin lacks ncclTunerPlugin_v5 or _v4\n");
    return 1;
  }
  size_t nRanks = (size_t)atoi(argv[2]), nNodes = (size_t)atoi(argv[3]);
  void* ctx = NULL;
  if (t->init(&ctx, 42, nRanks, nNodes, NULL, NULL, NULL) != 0) {
    fprintf(stderr, "init failed\n");
    return 1;
  }
  printf("name %s\n", t->name);
  ask(t, ctx, "all", 0);
  ask(t, ctx, "noring", 1);
  if (t->finalize(ctx) != 0) return 1;
  void* ctx4 = NULL;
  if (t4->init(nRanks, nNodes, NULL, &ctx4) != 0 || t4->destroy(ctx4) != 0) {
    fprintf(stderr, "v4 init/destroy failed\n");
    return 1;
  }
  // A communicator shape the topology cannot hold: init fails, NCCL goes on without the plugin.
  void* bad = NULL;
  if (t->init(&bad, 43, nRanks * 1000 + 1, 1, NULL, NULL, NULL) == 0) {
    fprintf(stderr, "init of an impossible shape succeeded\n");
    return 1;
  }
  return 0;
}
