// twinccl GIN device API over the proxy backend, and kernels built on it.
//
// GPU-initiated networking as NCCL 2.28 exposes it to kernels (put with a
// remote signal and a local counter, readSignal, waitSignal, flush, a
// barrier), executed by a host proxy (exec/hw/gin) instead of a NIC:
//   - a put reserves a slot of its context's descriptor queue (a ticket
//     from a counter in GPU memory), waits until the slot is free (the
//     proxy's consumed count, in host-mapped memory), writes the
//     descriptor into the slot (host-mapped memory) and publishes it by
//     writing the slot's sequence word last, after a system fence, so the
//     proxy never sees a half-written descriptor and the put's source
//     bytes are visible before it does;
//   - the proxy takes descriptors in ticket order, copies the payload into
//     the peer's window, and once the copy has completed adds to the
//     peer's signal and to the own counter, in ticket order: a signal
//     never moves before the payload of its put and of every earlier put
//     of the same context;
//   - signals and counters live in host memory mapped for the GPU, so the
//     proxies of other processes can update them; waits poll them.
// Windows are named by index; puts address bytes by offset inside them.
//
// Compiled by NVRTC without CUDA headers. The structs below mirror
// kernels.go's Gin* constants; exec/hw/gin writes them.

typedef unsigned int u32;
typedef unsigned long long u64;

#define GIN_MAXCTX 8

// Remote actions (GinDesc.sigOp) and local actions (GinDesc.ctrOp).
enum { GIN_SIG_NONE = 0, GIN_SIG_ADD = 1, GIN_SIG_SET = 2 };
enum { GIN_CTR_NONE = 0, GIN_CTR_INC = 1 };

// One put, as the proxy reads it (64 bytes).
struct GinDesc {
  u64 srcOff, dstOff, bytes;
  u32 srcWin, dstWin, peer, signal;
  u64 sigValue;
  u32 counter;
  u32 actions; // sigOp | ctrOp << 8
  u64 seq;     // ticket + 1, written last
};

// One context: a descriptor ring in host memory and its counters.
struct GinQueue {
  GinDesc* ring;             // host-mapped, slots entries
  volatile u64* consumed;    // host-mapped: tickets the proxy has taken
  volatile u64* done;        // host-mapped: tickets whose put completed
  u64* tickets;              // device memory: tickets handed out
  u64 slots;
};

// What a kernel gets: this rank's queues, signals and counters.
struct GinDevComm {
  int rank, nRanks, nCtx, pad;
  volatile u64* signals;  // host-mapped, this rank's signal table
  volatile u64* counters; // host-mapped, this rank's counter table
  u64* barrierEpoch;      // device memory: barriers this rank entered
  u32 barrierSignal, pad2;
  GinQueue q[GIN_MAXCTX];
};

__device__ __forceinline__ u64 ginLdAcquire(volatile u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void ginStRelease(volatile u64* p, u64 v) {
  asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ u64 ginTimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// ginTimedOut: a wait longer than timeoutNs (0: never) gives up.
__device__ __forceinline__ bool ginTimedOut(u64 start, u64 timeoutNs) {
  return timeoutNs != 0 && ginTimer() - start > timeoutNs;
}

// ginPut is called by one thread. It returns the put's ticket on its
// context, or ~0 when the queue stayed full past the timeout.
__device__ u64 ginPut(const GinDevComm* dc, int ctx, int peer, u32 dstWin, u64 dstOff, u32 srcWin, u64 srcOff,
                      u64 bytes, u32 sigOp, u32 signal, u64 sigValue, u32 ctrOp, u32 counter, u64 timeoutNs) {
  const GinQueue* q = &dc->q[ctx % dc->nCtx];
  const u64 t = atomicAdd(q->tickets, 1ull);
  const u64 start = ginTimer();
  while (t - *q->consumed >= q->slots) {
    if (ginTimedOut(start, timeoutNs)) return ~0ull;
  }
  volatile GinDesc* d = (volatile GinDesc*)&q->ring[t % q->slots];
  d->srcOff = srcOff;
  d->dstOff = dstOff;
  d->bytes = bytes;
  d->srcWin = srcWin;
  d->dstWin = dstWin;
  d->peer = (u32)peer;
  d->signal = signal;
  d->sigValue = sigValue;
  d->counter = counter;
  d->actions = sigOp | ctrOp << 8;
  // The source bytes and the fields above reach the host before the
  // sequence word that publishes them.
  ginStRelease(&d->seq, t + 1);
  return t;
}

__device__ __forceinline__ u64 ginReadSignal(const GinDevComm* dc, u32 signal) {
  return ginLdAcquire(&dc->signals[signal]);
}

// ginWaitSignal spins until the signal reaches at least expected; false
// on timeout.
__device__ bool ginWaitSignal(const GinDevComm* dc, u32 signal, u64 expected, u64 timeoutNs) {
  const u64 start = ginTimer();
  while (ginLdAcquire(&dc->signals[signal]) < expected) {
    if (ginTimedOut(start, timeoutNs)) return false;
  }
  return true;
}

__device__ __forceinline__ u64 ginReadCounter(const GinDevComm* dc, u32 counter) {
  return ginLdAcquire(&dc->counters[counter]);
}

// ginFlush waits until every put issued so far on context ctx has left
// its source buffer (the proxy completed it); false on timeout.
__device__ bool ginFlush(const GinDevComm* dc, int ctx, u64 timeoutNs) {
  const GinQueue* q = &dc->q[ctx % dc->nCtx];
  const u64 issued = atomicAdd(q->tickets, 0ull);
  const u64 start = ginTimer();
  while (ginLdAcquire(q->done) < issued) {
    if (ginTimedOut(start, timeoutNs)) return false;
  }
  return true;
}

// ginBarrier: every rank signals every other rank (an empty put with a
// signal add on the barrier signal) and waits for all of theirs. Called
// by one thread; false on timeout.
__device__ bool ginBarrier(const GinDevComm* dc, int ctx, u64 timeoutNs) {
  const u64 epoch = ++*dc->barrierEpoch;
  for (int i = 1; i < dc->nRanks; i++) {
    const int peer = (dc->rank + i) % dc->nRanks;
    if (ginPut(dc, ctx, peer, 0, 0, 0, 0, 0, GIN_SIG_ADD, dc->barrierSignal, 1, GIN_CTR_NONE, 0, timeoutNs) == ~0ull)
      return false;
  }
  return ginWaitSignal(dc, dc->barrierSignal, epoch * (u64)(dc->nRanks - 1), timeoutNs);
}

// ginFail records the first failure: code << 24 | where.
__device__ void ginFail(u32* status, u32 code, u32 where) { atomicCAS(status, 0u, (code << 24) | where); }

enum { GIN_ST_TIMEOUT_QUEUE = 1, GIN_ST_TIMEOUT_SIGNAL = 2, GIN_ST_TIMEOUT_FLUSH = 3, GIN_ST_TIMEOUT_BARRIER = 4 };

// ginAllToAll is NCCL's GIN all-to-all example over the proxy backend:
// read the signal, meet at a barrier, put this rank's slice for every
// peer (itself included) into the peer's receive window at offset
// rank*bytes, chunks puts per slice spread over the contexts, each with a
// signal add of 1, wait for nRanks*chunks adds, flush. One block; thread 0
// issues.
extern "C" __global__ void ginAllToAll(const GinDevComm* dc, u32 sendWin, u32 recvWin, u64 bytes, u32 chunks,
                                       u32 signal, u64 timeoutNs, u32* status) {
  if (threadIdx.x != 0) return;
  const u64 v = ginReadSignal(dc, signal);
  if (!ginBarrier(dc, 0, timeoutNs)) {
    ginFail(status, GIN_ST_TIMEOUT_BARRIER, 0);
    return;
  }
  const u64 chunk = chunks > 1 ? (bytes + chunks - 1) / chunks : bytes;
  for (int i = 0; i < dc->nRanks; i++) {
    const int peer = (dc->rank + i) % dc->nRanks;
    for (u32 c = 0; c < chunks; c++) {
      const u64 off = (u64)c * chunk;
      const u64 n = off >= bytes ? 0 : (bytes - off < chunk ? bytes - off : chunk);
      if (ginPut(dc, (int)(i * chunks + c), peer, recvWin, (u64)dc->rank * bytes + off, sendWin, (u64)peer * bytes + off,
                 n, GIN_SIG_ADD, signal, 1, GIN_CTR_NONE, 0, timeoutNs) == ~0ull) {
        ginFail(status, GIN_ST_TIMEOUT_QUEUE, (u32)peer);
        return;
      }
    }
  }
  if (!ginWaitSignal(dc, signal, v + (u64)dc->nRanks * chunks, timeoutNs)) {
    ginFail(status, GIN_ST_TIMEOUT_SIGNAL, signal);
    return;
  }
  for (int c = 0; c < dc->nCtx; c++) {
    if (!ginFlush(dc, c, timeoutNs)) {
      ginFail(status, GIN_ST_TIMEOUT_FLUSH, (u32)c);
      return;
    }
  }
}

// ginOrderProbe checks the ordering rules on the receiving side: rank 0
// puts rounds of `bytes` bytes, each filled by the kernel with the round
// number, into rank 1's window, each put with a signal add (signal 0) and
// a local counter increment (counter 0); rank 1 waits for each signal
// value k and then checks that every word of round k holds k (a signal
// seen before its payload leaves a stale word). Rank 0 then waits for its
// counter to reach rounds and flushes. bad[0] counts stale words on rank 1;
// bad[1] is set when rank 0's counter ran ahead of its completed puts.
// One block per rank.
extern "C" __global__ void ginOrderProbe(const GinDevComm* dc, u32 srcWin, char* src, u32 dstWin, const char* dst,
                                         u64 bytes, u32 rounds, u64 timeoutNs, u32* status, u32* bad) {
  const u32 words = (u32)(bytes / 4);
  if (dc->rank == 0) {
    for (u32 k = 1; k <= rounds; k++) {
      // Each round has its own region, so an earlier round's copy never
      // races with this round's fill.
      u32* w = (u32*)(src + (u64)(k - 1) * bytes);
      for (u32 i = threadIdx.x; i < words; i += blockDim.x) w[i] = k;
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence_system();
        if (ginPut(dc, 0, 1, dstWin, (u64)(k - 1) * bytes, srcWin, (u64)(k - 1) * bytes, bytes, GIN_SIG_ADD, 0, 1,
                   GIN_CTR_INC, 0, timeoutNs) == ~0ull)
          ginFail(status, GIN_ST_TIMEOUT_QUEUE, k);
      }
    }
    if (threadIdx.x == 0) {
      const u64 start = ginTimer();
      while (ginReadCounter(dc, 0) < rounds) {
        if (ginTimedOut(start, timeoutNs)) {
          ginFail(status, GIN_ST_TIMEOUT_SIGNAL, 0);
          return;
        }
      }
      // Every counted put has completed, so done covers them all.
      if (*dc->q[0].done < rounds) atomicOr(&bad[1], 1u);
      if (!ginFlush(dc, 0, timeoutNs)) ginFail(status, GIN_ST_TIMEOUT_FLUSH, 0);
    }
    return;
  }
  if (dc->rank != 1) return;
  __shared__ int ok;
  for (u32 k = 1; k <= rounds; k++) {
    if (threadIdx.x == 0) ok = ginWaitSignal(dc, 0, k, timeoutNs);
    __syncthreads();
    if (!ok) {
      if (threadIdx.x == 0) ginFail(status, GIN_ST_TIMEOUT_SIGNAL, k);
      return;
    }
    const volatile u32* w = (const volatile u32*)(dst + (u64)(k - 1) * bytes);
    u32 stale = 0;
    for (u32 i = threadIdx.x; i < words; i += blockDim.x) stale += w[i] != k;
    if (stale) atomicAdd(&bad[0], stale);
    __syncthreads();
  }
}
