// twinccl device interpreter: one launch runs one rank's lanes of a
// model.Program, one thread block per lane, with NCCL's three protocols
// over connection buffers in GPU memory (own or a peer's, mapped through
// CUDA IPC or peer access).
//
// Compiled at run time by NVRTC (exec/hw/gpudev), once per datatype and
// reduction: TW_DTYPE and TW_OP are model.Dtype and model.RedOp numbers.
// No CUDA headers are included, so the source compiles with NVRTC alone.
//
// Semantics are model/refexec's, step for step:
//   - a primitive call is cut into slices (Program.Slices);
//   - a slice waits for its receive steps (Simple: the sender's tail
//     counter; LL/LL128: the flag of every line) and for send credits (the
//     receiver's head counter plus NCCL_STEPS credits);
//   - sources are the received slices in lane order, then the own input
//     (or the own output for a send from output), folded left with the
//     reduction; the post op (avg) divides the result by the rank count;
//   - the result goes to the own output and to every send peer's slot:
//     Simple raw bytes, LL lines {d0, flag, d1, flag} with flag = step+1 (32
//     bits), LL128 lines of 15 data words and a 64-bit flag step+1;
//   - receivers release slots by advancing the sender's head, Simple
//     senders publish by advancing the receiver's tail;
//   - a send end with a connFifo (the net transport: its ring, counters
//     and fifo are host memory that the rank's proxy moves over the
//     network) also writes the fifo entry of every step (bytes, wire
//     bytes, step, steps, protocol) and then publishes the step with its
//     tail, LL included, as NCCL's kernels do when a proxy is in the path.
// Slot i of a ring starts i protocol steps (NCCL's conn->stepSize,
// model.ProtoStepBytes) into it, whatever the Program's step size, so that
// the proxy finds a step where the kernel put it.
// Every connection end keeps its step base in device memory, so graph
// replays of the same launch keep counting; at the end of a launch the
// base moves to the next multiple of NCCL_STEPS past the steps the Program
// used, and the skipped steps are posted (tail) and released (head).

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;

#ifndef TW_DTYPE
#define TW_DTYPE 7
#endif
#ifndef TW_OP
#define TW_OP 0
#endif

#define TW_SLOTS 8
#define TW_MAXPEERS 8
#ifndef TW_NTHREADS
#define TW_NTHREADS 512
#endif
// TW_LL_HOST_READBACK 1: a lane whose last op only sends into host
// memory reads back its last lines at the end of a launch (see the slice
// loop); 0 for an A/B.
#ifndef TW_LL_HOST_READBACK
#define TW_LL_HOST_READBACK 1
#endif
// LL lines a thread starts together when it receives from host memory
// (llLines).
#ifndef TW_LL_HOST_LINES
#define TW_LL_HOST_LINES 4
#endif
// TW_LL_EARLY_OWN 1: llLines loads a line's own data beside its first
// poll on host-memory receives too (U > 1), as before 2026-11-26 (fourth
// session); for an A/B.
#ifndef TW_LL_EARLY_OWN
#define TW_LL_EARLY_OWN 0
#endif
// TW_LL_CREDIT_LEADER 1 (the default since 2026-11-26, fifth session): an
// LL or LL128 lane that sends into host memory has thread 0 alone read its
// send credits, past the caches (waitCredits); 0: every thread reads them
// with acquire loads, which saw the head late at each turn of the slot ring
// (15-30 us). 1 made SHM LL AllGather, ReduceScatter and AllReduce of 12 MiB
// 15-29% faster on the H100 pair (docs/perf.md) and passes the SHM and NET
// conformance suites; 0 is kept for an A/B.
#ifndef TW_LL_CREDIT_LEADER
#define TW_LL_CREDIT_LEADER 1
#endif
// Simple packs a thread keeps in flight. 4, not 8: the one interpreter
// kernel's register budget is shared by every protocol's path, and 8 cost
// LL and LL128 10-40% (AllReduce LL128 8 MiB 118 -> 73 us, Simple 128 MiB
// 526 -> 513 us on the H200 pair, 2026-11-26); 2 is faster still for LL
// but 10% slower for Simple from 128 MiB.
#ifndef TW_UNROLL
#define TW_UNROLL 4
#endif
// LL128 lines a thread keeps in flight (ll128Lines). On the H100 pair
// (AllGather LL128 of 96 MiB, one interpreter per protocol) 1 took 490
// us, 2 425 and 4 447 (4 spills registers); 1 was the kernel before
// 2026-11-27, kept for an A/B.
#ifndef TW_LL128_LINES
#define TW_LL128_LINES 2
#endif
#define TW_OPBATCH 32
// Slot strides of the three protocols: buffSize/NCCL_STEPS of the 512 KiB
// LL, 4800 KiB LL128 and 4 MiB Simple buffers (exec/hw/transport.SlotStride).
#ifndef TW_SLOT_LL
#define TW_SLOT_LL 65536
#endif
#ifndef TW_SLOT_LL128
#define TW_SLOT_LL128 614400
#endif
#ifndef TW_SLOT_SIMPLE
#define TW_SLOT_SIMPLE 524288
#endif

enum { PROTO_LL = 0, PROTO_LL128 = 1, PROTO_SIMPLE = 2 };
enum {
  K_NOP, K_SEND, K_RECV, K_RECV_REDUCE_SEND, K_RECV_REDUCE_COPY, K_RECV_REDUCE_COPY_SEND,
  K_RECV_COPY_SEND, K_COPY_SEND, K_COPY
};
enum { F_POSTOP = 1, F_DIRECT = 2, F_FROM_OUTPUT = 4 };
// TwLane.flags: LANE_HOST_RECV, some receive connection's buffer is in
// host memory (SHM, or NET staged through host memory);
// LANE_HOST_SEND, some send connection's buffer is.
enum { LANE_HOST_RECV = 1, LANE_HOST_SEND = 2 };
// Reductions (model.RedOp); macros, since #if compares them with TW_OP.
#define RED_SUM 0
#define RED_PROD 1
#define RED_MAX 2
#define RED_MIN 3
#define RED_AVG 4

// Status codes written to the status word (code << 24 | lane).
enum { ST_TIMEOUT = 1, ST_ABORT = 2, ST_PROTO = 3 };

// One connFifo entry (exec/hw/transport.FifoEntry in a net connection's
// memory, 32 bytes).
struct TwFifo {
  i64 size;  // data bytes
  i64 wire;  // bytes on the wire (LL lines)
  i64 step;  // absolute step
  u32 steps; // steps the slice spans
  u32 proto;
};

// One end of a connection, persistent across launches.
struct TwConn {
  // Slot rings: LL, LL128 and Simple in the receiver's memory (written
  // by the sender), then a Simple ring in the sender's memory (read by the
  // receiver: P2P read mode).
  char* buf[4];
  volatile u64* tail; // Simple steps posted (the receiver's memory)
  volatile u64* head; // steps released (the sender's memory)
  u64 step;           // base step of the next launch
  TwFifo* fifo;       // net send end: the proxy's connFifo; else null
};

// One primitive call, as in the binary Program encoding (32 bytes).
struct alignas(16) TwOp {
  u8 kind, flags;
  u16 reserved;
  int n;
  u32 recvStep, sendStep;
  i64 inOff, outOff;
};

struct TwLane {
  int nRecv, nSend;
  int flags; // LANE_*
  int pad;
  TwConn* recv[TW_MAXPEERS];
  TwConn* send[TW_MAXPEERS];
  u64 recvUsed[TW_MAXPEERS]; // steps the Program uses on each connection
  u64 sendUsed[TW_MAXPEERS];
  const TwOp* ops;
  i64 nOps;
  u64* trace; // 4 u64 per slice when tracing, else null
};

struct TwProg {
  int proto, stepBytes, credits, slicesPerChunk, stepsPerSlice, nRanks, nLanes;
  int simpleRead; // Simple goes through the sender's ring (buf[3])
  TwLane lanes[1];
};

// ---- element type and reduction ------------------------------------------

#if TW_DTYPE == 0
typedef signed char T;
#elif TW_DTYPE == 1
typedef unsigned char T;
#elif TW_DTYPE == 2
typedef int T;
#elif TW_DTYPE == 3
typedef unsigned int T;
#elif TW_DTYPE == 4
typedef long long T;
#elif TW_DTYPE == 5
typedef unsigned long long T;
#elif TW_DTYPE == 6 || TW_DTYPE == 9
typedef unsigned short T; // fp16 / bf16 bits, computed in float32
#elif TW_DTYPE == 7
typedef float T;
#elif TW_DTYPE == 8
typedef double T;
#endif

__device__ __forceinline__ float halfToFloat(u16 h) {
#if TW_DTYPE == 9
  return __uint_as_float(((u32)h) << 16);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
#endif
}

__device__ __forceinline__ u16 floatToHalf(float f) {
  u16 h;
#if TW_DTYPE == 9
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
#else
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
#endif
  return h;
}

// redF32 mirrors refexec's float32 min/max (the first operand wins ties
// and NaN second operands).
__device__ __forceinline__ float redF(float a, float b) {
#if TW_OP == RED_PROD
  return __fmul_rn(a, b);
#elif TW_OP == RED_MAX
  return (a > b || b != b) ? a : b;
#elif TW_OP == RED_MIN
  return (a < b || b != b) ? a : b;
#else
  return __fadd_rn(a, b);
#endif
}

// redD mirrors Go's math.Max / math.Min for float64.
__device__ __forceinline__ double redD(double a, double b) {
#if TW_OP == RED_PROD
  return __dmul_rn(a, b);
#elif TW_OP == RED_MAX || TW_OP == RED_MIN
  const double inf = __longlong_as_double(0x7ff0000000000000LL);
#if TW_OP == RED_MAX
  if (a == inf || b == inf) return inf;
#else
  if (a == -inf || b == -inf) return -inf;
#endif
  if (a != a || b != b) return __longlong_as_double(0x7ff8000000000001LL);
  if (a == 0 && b == 0) {
    bool na = __double_as_longlong(a) < 0;
#if TW_OP == RED_MAX
    return na ? b : a;
#else
    return na ? a : b;
#endif
  }
#if TW_OP == RED_MAX
  return a > b ? a : b;
#else
  return a < b ? a : b;
#endif
#else
  return __dadd_rn(a, b);
#endif
}

template <typename I>
__device__ __forceinline__ I redI(I a, I b) {
#if TW_OP == RED_PROD
  return (I)((u64)a * (u64)b); // wraps, as Go's integer arithmetic does
#elif TW_OP == RED_MAX
  return a > b ? a : b;
#elif TW_OP == RED_MIN
  return a < b ? a : b;
#else
  return (I)((u64)a + (u64)b);
#endif
}

__device__ __forceinline__ T red(T a, T b) {
#if TW_DTYPE == 6 || TW_DTYPE == 9
  return floatToHalf(redF(halfToFloat(a), halfToFloat(b)));
#elif TW_DTYPE == 7
  return redF(a, b);
#elif TW_DTYPE == 8
  return redD(a, b);
#else
  return redI<T>(a, b);
#endif
}

__device__ __forceinline__ T post(T a, int n) {
#if TW_OP == RED_AVG
#if TW_DTYPE == 6 || TW_DTYPE == 9
  return floatToHalf(__fdiv_rn(halfToFloat(a), (float)n));
#elif TW_DTYPE == 7
  return __fdiv_rn(a, (float)n);
#elif TW_DTYPE == 8
  return __ddiv_rn(a, (double)n);
#else
  return (T)(a / (T)n);
#endif
#else
  return a;
#endif
}

// Packs: E elements of T in W bytes, reduced element by element.
template <int W>
struct Pack;
template <>
struct Pack<16> {
  uint4 v;
};
template <>
struct Pack<8> {
  u64 v;
};

template <int W>
__device__ __forceinline__ void redPack(Pack<W>& a, const Pack<W>& b) {
  T* x = (T*)&a;
  const T* y = (const T*)&b;
#pragma unroll
  for (int i = 0; i < W / (int)sizeof(T); i++) x[i] = red(x[i], y[i]);
}

template <int W>
__device__ __forceinline__ void postPack(Pack<W>& a, int n) {
#if TW_OP == RED_AVG
  T* x = (T*)&a;
#pragma unroll
  for (int i = 0; i < W / (int)sizeof(T); i++) x[i] = post(x[i], n);
#endif
}

// ---- memory access helpers ------------------------------------------------

__device__ __forceinline__ u64 ldAcquire(volatile u64* p) {
  u64 v;
  asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void stRelaxed(volatile u64* p, u64 v) {
  asm volatile("st.relaxed.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void fenceAcqRelSys() { asm volatile("fence.acq_rel.sys;" ::: "memory"); }

__device__ __forceinline__ u64 globalTimer() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ uint4 ldVolatile16(const char* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

__device__ __forceinline__ void stVolatile16(char* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z),
               "r"(v.w)
               : "memory");
}

__device__ __forceinline__ void ldVolatile2x64(const char* p, u64& a, u64& b) {
  asm volatile("ld.volatile.global.v2.u64 {%0,%1}, [%2];" : "=l"(a), "=l"(b) : "l"(p) : "memory");
}

__device__ __forceinline__ void stVolatile2x64(char* p, u64 a, u64 b) {
  asm volatile("st.volatile.global.v2.u64 [%0], {%1,%2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}

// load8 reads up to 8 bytes (rem of them, rem > 0) as a little-endian word.
__device__ __forceinline__ u64 load8(const char* p, i64 rem) {
  if (rem >= 8 && (((u64)p) & 7) == 0) return *(const u64*)p;
  u64 v = 0;
  int k = rem < 8 ? (int)rem : 8;
  for (int i = 0; i < k; i++) v |= (u64)(u8)p[i] << (8 * i);
  return v;
}

__device__ __forceinline__ void store8(char* p, u64 v, i64 rem) {
  if (rem >= 8 && (((u64)p) & 7) == 0) {
    *(u64*)p = v;
    return;
  }
  int k = rem < 8 ? (int)rem : 8;
  for (int i = 0; i < k; i++) p[i] = (char)(v >> (8 * i));
}

// ---- block state ----------------------------------------------------------

struct Shared {
  TwOp ops[TW_OPBATCH]; // the next calls of the lane, loaded together
  u64 head[TW_MAXPEERS]; // last head seen of every send peer
  const char* src[TW_MAXPEERS + 1];
  char* dst[TW_MAXPEERS + 1];
  u64 recvBase[TW_MAXPEERS];
  u64 sendBase[TW_MAXPEERS];
  // The lane's connection pointers, read once per launch so that no step
  // chases TwLane -> TwConn -> ring through global memory: the ring of
  // this launch's protocol and the counters of every receive and send peer.
  char* recvRing[TW_MAXPEERS];
  char* sendRing[TW_MAXPEERS];
  volatile u64* recvTail[TW_MAXPEERS]; // written by the sender
  volatile u64* recvHead[TW_MAXPEERS]; // this rank releases slots here
  volatile u64* sendTail[TW_MAXPEERS]; // this rank publishes Simple steps here
  volatile u64* sendHead[TW_MAXPEERS]; // written by the receiver
  TwFifo* sendFifo[TW_MAXPEERS];       // net send ends' connFifo, else null
  int nsrc, ndst;
  int abort;
};

struct Ctx {
  const TwProg* prog;
  const TwLane* lane;
  Shared* sh;
  int tid, laneIdx;
  volatile u32* abortFlag;
  u32* status;
  u64 deadline; // globaltimer ns; 0: none
  u64 timeoutNs;
  u64* trace;     // the lane's slice stamps, or null
  int nRecv, nSend;
  u64 credits;
  bool netSend; // some send end has a connFifo (a proxy reads it)
};

__device__ __noinline__ void fail(Ctx& c, u32 code) {
  atomicCAS(c.status, 0u, (code << 24) | (u32)c.laneIdx);
  c.sh->abort = 1;
}

// spinCheck is called inside wait loops: every 1024 rounds it reads the
// host's abort flag and the clock. It returns true when the block must stop.
__device__ __forceinline__ bool spinCheck(Ctx& c, u32& spins) {
  if ((++spins & 1023) != 0) return false;
  if (*(volatile int*)&c.sh->abort) return true;
  if (c.abortFlag != nullptr && *c.abortFlag != 0) {
    fail(c, ST_ABORT);
    return true;
  }
  u64 now = globalTimer();
  if (c.deadline == 0) {
    c.deadline = now + c.timeoutNs;
  } else if (c.timeoutNs != 0 && now > c.deadline) {
    fail(c, ST_TIMEOUT);
    return true;
  }
  return false;
}

#if TW_LL_CREDIT_LEADER
// ldMmio loads from host memory past every cache: a head counter that the
// peer GPU or the proxy writes there.
__device__ __forceinline__ u64 ldMmio(volatile u64* p) {
  u64 v;
  asm volatile("ld.mmio.relaxed.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// waitCreditsLeader is waitCredits where the head is in host memory (a
// lane that sends into host memory: SHM, NET): thread 0 alone reads it,
// past the caches, and the others watch shared memory. Read by every
// thread with acquire loads, a head the peer had moved 100 us earlier
// still read old for 15-30 us, once per turn of the slot ring; uncached
// reads by every thread made calls 10x slower.
__device__ __forceinline__ bool waitCreditsLeader(Ctx& c, u64 ss) {
  for (int i = 0; i < c.nSend; i++) {
    const u64 want = c.sh->sendBase[i] + ss + 1;
    volatile u64* cached = &c.sh->head[i];
    u64 h = *cached;
    u32 spins = 0;
    c.deadline = 0;
    while (h + c.credits < want) {
      if (c.tid == 0) {
        h = ldMmio(c.sh->sendHead[i]);
        *cached = h;
      } else {
        h = *cached;
      }
      if (spinCheck(c, spins)) return false;
    }
  }
  return true;
}
#endif

// waitCredits: LL and LL128 threads check send credits each for itself
// (no barrier): the last head seen is kept in shared memory, a lower bound
// of the real one, and the head is read only when that bound is short.
// Returns false on abort.
__device__ __forceinline__ bool waitCredits(Ctx& c, u64 ss) {
#if TW_LL_CREDIT_LEADER
  if (c.lane->flags & LANE_HOST_SEND) return waitCreditsLeader(c, ss);
#endif
  for (int i = 0; i < c.nSend; i++) {
    const u64 want = c.sh->sendBase[i] + ss + 1;
    u64 h = c.sh->head[i];
    if (h + c.credits >= want) continue;
    u32 spins = 0;
    c.deadline = 0;
    while (h + c.credits < want) {
      h = ldAcquire(c.sh->sendHead[i]);
      if (spinCheck(c, spins)) return false;
    }
    c.sh->head[i] = h;
  }
  return true;
}

// waitPeers: threads 0..nRecv-1 wait for receive data (Simple tails),
// threads 32..32+nSend-1 for send credits. Returns false on abort.
__device__ bool waitPeers(Ctx& c, bool recv, bool send, u64 rs, u64 ss, int steps, bool waitTail) {
  int tid = c.tid;
  c.deadline = 0;
  if (recv && waitTail && tid < c.nRecv) {
    u64 want = c.sh->recvBase[tid] + rs + steps;
    u32 spins = 0;
    while (ldAcquire(c.sh->recvTail[tid]) < want) {
      if (spinCheck(c, spins)) break;
    }
  }
  if (send && tid >= 32 && tid < 32 + c.nSend) {
    int i = tid - 32;
    u64 want = c.sh->sendBase[i] + ss + steps;
    u32 spins = 0;
    u64 h = c.sh->head[i];
    while (h + c.credits < want) {
      h = ldAcquire(c.sh->sendHead[i]);
      if (spinCheck(c, spins)) break;
    }
    c.sh->head[i] = h;
  }
  __syncthreads();
  return !*(volatile int*)&c.sh->abort;
}

// postFifo writes the connFifo entries of a send step for the net
// proxies (by the publishing thread, before the fence that precedes the
// tails).
__device__ __forceinline__ void postFifo(Ctx& c, u64 ss, int steps, i64 nb, i64 wire, int proto) {
  for (int i = 0; i < c.nSend; i++) {
    TwFifo* f = c.sh->sendFifo[i];
    if (f == nullptr) continue;
    const u64 step = c.sh->sendBase[i] + ss;
    TwFifo* e = f + step % TW_SLOTS;
    e->size = nb;
    e->wire = wire;
    e->step = (i64)step;
    e->steps = (u32)steps;
    e->proto = (u32)proto;
  }
}

// postPeers: after the block's data is written, release receive slots
// and publish Simple send steps. Simple data went to the peers' slots with
// plain stores, so one system-scope fence orders them before the tails
// (as in NCCL, an empty slice stored nothing and needs no fence, unless
// fifo entries for a proxy were written: the fence orders them too);
// releasing a slot only needs the block's reads done (the barrier).
__device__ void postPeers(Ctx& c, bool recv, bool send, u64 rs, u64 ss, int steps, bool stored, i64 nb) {
  __syncthreads();
  if (c.tid == 0) {
    if (send) {
      if (c.netSend) postFifo(c, ss, steps, nb, nb, PROTO_SIMPLE);
      if (stored || c.netSend) fenceAcqRelSys();
      for (int i = 0; i < c.nSend; i++) stRelaxed(c.sh->sendTail[i], c.sh->sendBase[i] + ss + steps);
    }
    if (recv)
      for (int i = 0; i < c.nRecv; i++) stRelaxed(c.sh->recvHead[i], c.sh->recvBase[i] + rs + steps);
  }
}

// ---- Simple ---------------------------------------------------------------

template <int W>
__device__ __forceinline__ Pack<W> ldPack(const char* p) {
  Pack<W> v;
  if (W == 16)
    *(uint4*)&v = *(const uint4*)p;
  else
    *(u64*)&v = *(const u64*)p;
  return v;
}

template <int W>
__device__ __forceinline__ void stPack(char* p, const Pack<W>& v) {
  if (W == 16)
    *(uint4*)p = *(const uint4*)&v;
  else
    *(u64*)p = *(const u64*)&v;
}

// copyReduce runs dst[k][i] = post(src[0][i] op src[1][i] op ...) over nb
// bytes, W-byte packs from pack index lo on, TW_UNROLL packs in flight.
template <int W>
__device__ void copyReducePacks(Ctx& c, i64 npacks, bool postOp) {
  Shared* sh = c.sh;
  const int nsrc = sh->nsrc, ndst = sh->ndst;
  const int nt = blockDim.x;
  for (i64 i = c.tid; i < npacks; i += (i64)nt * TW_UNROLL) {
    Pack<W> acc[TW_UNROLL];
#pragma unroll
    for (int u = 0; u < TW_UNROLL; u++) {
      i64 k = i + (i64)u * nt;
      if (k < npacks) acc[u] = ldPack<W>(sh->src[0] + k * W);
    }
    for (int s = 1; s < nsrc; s++) {
      Pack<W> v[TW_UNROLL];
#pragma unroll
      for (int u = 0; u < TW_UNROLL; u++) {
        i64 k = i + (i64)u * nt;
        if (k < npacks) v[u] = ldPack<W>(sh->src[s] + k * W);
      }
#pragma unroll
      for (int u = 0; u < TW_UNROLL; u++) redPack<W>(acc[u], v[u]);
    }
    if (postOp) {
#pragma unroll
      for (int u = 0; u < TW_UNROLL; u++) postPack<W>(acc[u], c.prog->nRanks);
    }
    for (int d = 0; d < ndst; d++) {
#pragma unroll
      for (int u = 0; u < TW_UNROLL; u++) {
        i64 k = i + (i64)u * nt;
        if (k < npacks) stPack<W>(sh->dst[d] + k * W, acc[u]);
      }
    }
  }
}

// copyReduceElems is the element-by-element path for unaligned buffers
// and the bytes after the last whole pack.
__device__ void copyReduceElems(Ctx& c, i64 from, i64 nb, bool postOp) {
  Shared* sh = c.sh;
  const int nsrc = sh->nsrc, ndst = sh->ndst;
  for (i64 off = from + (i64)c.tid * sizeof(T); off + (i64)sizeof(T) <= nb; off += (i64)blockDim.x * sizeof(T)) {
    T acc = *(const T*)(sh->src[0] + off);
    for (int s = 1; s < nsrc; s++) acc = red(acc, *(const T*)(sh->src[s] + off));
    if (postOp) acc = post(acc, c.prog->nRanks);
    for (int d = 0; d < ndst; d++) *(T*)(sh->dst[d] + off) = acc;
  }
}

__device__ void copyReduce(Ctx& c, i64 nb, bool postOp) {
  Shared* sh = c.sh;
  u64 align = 0;
  for (int s = 0; s < sh->nsrc; s++) align |= (u64)sh->src[s];
  for (int d = 0; d < sh->ndst; d++) align |= (u64)sh->dst[d];
  i64 done = 0;
  if ((align & 15) == 0) {
    i64 np = nb / 16;
    copyReducePacks<16>(c, np, postOp);
    done = np * 16;
  } else if ((align & 7) == 0 && sizeof(T) <= 8) {
    i64 np = nb / 8;
    copyReducePacks<8>(c, np, postOp);
    done = np * 8;
  }
  copyReduceElems(c, done, nb, postOp);
}

// ---- LL -------------------------------------------------------------------

__device__ __forceinline__ u64 redWord(u64 a, u64 b) {
  Pack<8> x, y;
  x.v = a;
  y.v = b;
  redPack<8>(x, y);
  return x.v;
}

__device__ __forceinline__ u64 postWord(u64 a, int n) {
  Pack<8> x;
  x.v = a;
  postPack<8>(x, n);
  return x.v;
}

// traceSlice stamps a finished slice: call and slice number, start, data
// start (after the waits) and end, in %globaltimer nanoseconds.
__device__ __forceinline__ void traceSlice(Ctx& c, i64 sliceNo, i64 oi, int s, u64 t0, u64 t1) {
  if (c.trace == nullptr || c.tid != 0) return;
  u64* tr = c.trace + sliceNo * 4;
  tr[0] = ((u64)oi << 8) | (u64)s;
  tr[1] = t0;
  tr[2] = t1;
  tr[3] = globalTimer();
}

// ---- the interpreter --------------------------------------------------------

// LLSlice is what llLines needs of one LL slice.
struct LLSlice {
  const char* src; // own data (input or output), when local
  char* dstOut;    // output, when writesOut
  i64 nb;          // data bytes
  u64 rs, ss;      // receive and send steps of the slice
  i64 slotBytes;
  bool recv, send, local, writesOut, postOp;
};

// llLines moves one LL slice: every thread takes the lines tid,
// tid + blockDim.x, ..., U at a time. The first polls of a group of U
// lines (each line's first load from the first receive peer) are issued
// together, so that a thread waits one load latency per group rather than
// one per line; each line is then finished in order, polling again only
// where its flags were not there yet. U > 1 pays where the receive buffer
// is in host memory (SHM, NET staged through host memory: a read over
// PCIe takes about a microsecond and the reads are what limits the
// slice); over P2P the receiver mostly waits for the sender, and early
// polls only cost (U = 1 there). With U = 1 the own data is loaded beside
// the poll; with U > 1 only once the line has arrived: U words of own
// data held across the polls slowed the float interpreter (which spills;
// the int32 build, which spills as much, was not slowed) and every receive
// that reduces from host memory (Reduce's root, ReduceScatter, AllReduce)
// took up to twice as long as one that copies (Reduce LL over SHM, 12 MiB,
// on the H200 pair: 1392 us, 975 loading late; Broadcast 748;
// TW_LL_EARLY_OWN for the A/B).
template <int U>
__device__ __forceinline__ void llLines(Ctx& c, const LLSlice& a) {
  Shared& sh = *c.sh;
  const TwProg* prog = c.prog;
  const i64 lines = (a.nb + 7) / 8;
  const i64 stride = (i64)blockDim.x;
  for (i64 ln0 = c.tid; ln0 < lines; ln0 += stride * U) {
    u64 mine[U];
    uint4 first[U];
#pragma unroll
    for (int u = 0; u < U; u++) {
      const i64 ln = ln0 + u * stride;
      mine[u] = 0;
      first[u] = make_uint4(0, 0, 0, 0);
      if (ln < lines) {
        if ((U == 1 || TW_LL_EARLY_OWN) && a.local) mine[u] = load8(a.src + ln * 8, a.nb - ln * 8);
        if (a.recv) first[u] = ldVolatile16(sh.recvRing[0] + ((sh.recvBase[0] + a.rs) % TW_SLOTS) * a.slotBytes + ln * 16);
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const i64 ln = ln0 + u * stride;
      if (ln >= lines) break;
      const i64 rem = a.nb - ln * 8;
      u64 v = 0;
      bool have = false;
      if (a.recv) {
        for (int i = 0; i < c.nRecv; i++) {
          const u32 flag = (u32)(sh.recvBase[i] + a.rs + 1);
          const char* p = sh.recvRing[i] + ((sh.recvBase[i] + a.rs) % TW_SLOTS) * a.slotBytes + ln * 16;
          uint4 w = i == 0 ? first[u] : ldVolatile16(p);
          u32 spins = 0;
          c.deadline = 0;
          while (w.y != flag || w.w != flag) {
            if (spinCheck(c, spins)) break;
            w = ldVolatile16(p);
          }
          u64 d = (u64)w.x | ((u64)w.z << 32);
          v = have ? redWord(v, d) : d;
          have = true;
        }
      }
      if (U > 1 && !TW_LL_EARLY_OWN && a.local) mine[u] = load8(a.src + ln * 8, a.nb - ln * 8);
      if (a.local) v = have ? redWord(v, mine[u]) : mine[u];
      if (a.postOp) v = postWord(v, prog->nRanks);
      if (a.writesOut) store8(a.dstOut + ln * 8, v, rem);
      if (a.send) {
        for (int i = 0; i < c.nSend; i++) {
          const u32 flag = (u32)(sh.sendBase[i] + a.ss + 1);
          char* p = sh.sendRing[i] + ((sh.sendBase[i] + a.ss) % TW_SLOTS) * a.slotBytes + ln * 16;
          stVolatile16(p, make_uint4((u32)v, flag, (u32)(v >> 32), flag));
        }
      }
    }
  }
}

// ll128Lines moves one LL128 slice. A line is 128 bytes, 15 data words
// and a flag word, carried by 8 threads of a warp with 16 bytes each (the
// eighth thread's second word is the flag); a warp covers 4 lines per
// group and takes U groups at a time (lines 4U*warp + 4u + tid%32/8, then
// every 4U*nwarps further). The U groups' own-data loads and first polls
// are all issued before any is waited for, so that a thread has U lines
// in flight rather than one: NCCL's LL128 keeps 8 words (4 lines' worth)
// per thread in flight. A warp polls until every line of its U groups
// carries the step's flag, reloading all of them meanwhile.
template <int U>
__device__ __forceinline__ void ll128Lines(Ctx& c, const LLSlice& a) {
  Shared& sh = *c.sh;
  const TwProg* prog = c.prog;
  const i64 lines = (a.nb + 119) / 120;
  const int warp = c.tid / 32, lane = c.tid % 32, g = lane / 8, t = lane % 8;
  const int nwarps = blockDim.x / 32;
  const bool flagThread = t == 7;
  const int flagLane = (lane & ~7) + 7;
  for (i64 lb = (i64)warp * 4 * U; lb < lines; lb += (i64)nwarps * 4 * U) {
    u64 v0[U], v1[U], m0[U], m1[U];
    i64 r0[U];
    bool act[U];
    // The own data first, so that its latency hides behind the polling.
#pragma unroll
    for (int u = 0; u < U; u++) {
      const i64 ln = lb + 4 * u + g;
      act[u] = ln < lines;
      r0[u] = a.nb - (ln * 120 + 16 * t);
      m0[u] = m1[u] = v0[u] = v1[u] = 0;
      if (a.local && act[u]) {
        const char* p = a.src + ln * 120 + 16 * t;
        if (r0[u] > 0) m0[u] = load8(p, r0[u]);
        if (!flagThread && r0[u] > 8) m1[u] = load8(p + 8, r0[u] - 8);
      }
    }
    bool have = false;
    if (a.recv) {
      for (int i = 0; i < c.nRecv; i++) {
        const u64 flag = sh.recvBase[i] + a.rs + 1;
        const char* ring = sh.recvRing[i] + ((sh.recvBase[i] + a.rs) % TW_SLOTS) * a.slotBytes + 16 * t;
        u64 x0[U], x1[U];
        u32 spins = 0;
        c.deadline = 0;
        for (;;) {
#pragma unroll
          for (int u = 0; u < U; u++) {
            x0[u] = x1[u] = 0;
            if (act[u]) ldVolatile2x64(ring + (lb + 4 * u + g) * 128, x0[u], x1[u]);
          }
          bool ok = true;
#pragma unroll
          for (int u = 0; u < U; u++) {
            const u64 f = __shfl_sync(0xffffffffu, x1[u], flagLane);
            ok = ok && (!act[u] || f == flag);
          }
          if (__all_sync(0xffffffffu, ok)) break;
          bool stop = spinCheck(c, spins);
          if (__any_sync(0xffffffffu, stop)) break;
        }
#pragma unroll
        for (int u = 0; u < U; u++) {
          v0[u] = have ? redWord(v0[u], x0[u]) : x0[u];
          if (!flagThread) v1[u] = have ? redWord(v1[u], x1[u]) : x1[u];
        }
        have = true;
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      if (!act[u]) continue;
      const i64 ln = lb + 4 * u + g;
      if (a.local) {
        if (r0[u] > 0) v0[u] = have ? redWord(v0[u], m0[u]) : m0[u];
        if (!flagThread && r0[u] > 8) v1[u] = have ? redWord(v1[u], m1[u]) : m1[u];
      }
      if (a.postOp) {
        v0[u] = postWord(v0[u], prog->nRanks);
        v1[u] = postWord(v1[u], prog->nRanks);
      }
      if (r0[u] <= 0) v0[u] = 0;
      if (r0[u] <= 8 && !flagThread) v1[u] = 0;
      if (a.writesOut) {
        char* p = a.dstOut + ln * 120 + 16 * t;
        if (r0[u] > 0) store8(p, v0[u], r0[u]);
        if (!flagThread && r0[u] > 8) store8(p + 8, v1[u], r0[u] - 8);
      }
      if (a.send) {
        for (int i = 0; i < c.nSend; i++) {
          const u64 flag = sh.sendBase[i] + a.ss + 1;
          char* p = sh.sendRing[i] + ((sh.sendBase[i] + a.ss) % TW_SLOTS) * a.slotBytes + ln * 128 + 16 * t;
          stVolatile2x64(p, v0[u], flagThread ? flag : v1[u]);
        }
      }
    }
  }
}

extern "C" __global__ void __launch_bounds__(TW_NTHREADS, 1)
    twcInterp(const TwProg* prog, const char* in, char* out, volatile u32* abortFlag, u32* status, u64 timeoutNs) {
  __shared__ Shared sh;
  Ctx c;
  c.prog = prog;
  c.laneIdx = blockIdx.x;
  c.lane = &prog->lanes[blockIdx.x];
  c.sh = &sh;
  c.tid = threadIdx.x;
  c.abortFlag = abortFlag;
  c.status = status;
  c.deadline = 0;
  c.timeoutNs = timeoutNs;
  const TwLane* l = c.lane;
  const int es = (int)sizeof(T);
#ifdef TW_PROTO
  // Built for one protocol (exec/hw/gpudev compiles one interpreter per
  // protocol): the other protocols' paths are compiled out, and the
  // registers (128 a thread at 512 threads) go to this one's.
  const int proto = TW_PROTO;
  if (prog->proto != TW_PROTO) {
    if (c.tid == 0) atomicCAS(status, 0u, ((u32)ST_PROTO << 24) | (u32)c.laneIdx);
    return;
  }
#else
  const int proto = prog->proto;
#endif
  const i64 stepBytes = prog->stepBytes;
  const i64 slotBytes = proto == PROTO_LL ? TW_SLOT_LL : proto == PROTO_LL128 ? TW_SLOT_LL128 : TW_SLOT_SIMPLE;
  const int ring = proto == PROTO_SIMPLE ? (prog->simpleRead ? 3 : PROTO_SIMPLE) : proto;
  c.trace = l->trace;
  c.nRecv = l->nRecv;
  c.nSend = l->nSend;
  c.credits = (u64)prog->credits;

  // Every connection's step counter persists from call to call; it is
  // rounded up to a Simple chunk (one step on LL and LL128), as NCCL's
  // primitives round theirs when an operation starts (model.Program.
  // StepRound): slices never wrap the slot ring, and the next call starts
  // on the next free slot, so a sender runs up to its credits ahead into
  // it. The skipped steps carry no data: the receiver returns their
  // credits and the sender posts them (a net proxy passes over them).
  u64 round = proto == PROTO_SIMPLE ? (u64)prog->slicesPerChunk * (u64)prog->stepsPerSlice : 1;
  if (round < 1 || TW_SLOTS % round != 0) round = TW_SLOTS;
  if (c.tid == 0) sh.abort = 0;
  if (c.tid < c.nRecv) {
    TwConn* cn = l->recv[c.tid];
    const u64 b = (cn->step + round - 1) / round * round;
    if (b != cn->step) stRelaxed(cn->head, b);
    sh.recvBase[c.tid] = b;
    sh.recvRing[c.tid] = cn->buf[ring];
    sh.recvTail[c.tid] = cn->tail;
    sh.recvHead[c.tid] = cn->head;
  }
  if (c.tid >= 32 && c.tid < 32 + c.nSend) {
    TwConn* cn = l->send[c.tid - 32];
    const u64 b = (cn->step + round - 1) / round * round;
    if (b != cn->step) stRelaxed(cn->tail, b);
    sh.sendBase[c.tid - 32] = b;
    sh.sendRing[c.tid - 32] = cn->buf[ring];
    sh.sendTail[c.tid - 32] = cn->tail;
    sh.sendHead[c.tid - 32] = cn->head;
    sh.sendFifo[c.tid - 32] = cn->fifo;
    sh.head[c.tid - 32] = ldAcquire(cn->head);
  }
  // The first batch of calls loads alongside the connection state.
  if (c.tid >= 64 - TW_OPBATCH && c.tid < 64 && c.tid - (64 - TW_OPBATCH) < l->nOps) {
    const int k = c.tid - (64 - TW_OPBATCH);
    const uint4* src = (const uint4*)&l->ops[k];
    uint4* dst = (uint4*)&sh.ops[k];
    dst[0] = src[0];
    dst[1] = src[1];
  }
  __syncthreads();
  c.netSend = false;
  for (int i = 0; i < c.nSend; i++) c.netSend = c.netSend || sh.sendFifo[i] != nullptr;

  i64 sliceNo = 0;
  for (i64 oi = 0; oi < l->nOps; oi++) {
    if (oi > 0 && oi % TW_OPBATCH == 0) {
      // Load the next calls together rather than one dependent load each.
      __syncthreads();
      i64 k = oi + c.tid;
      if (c.tid < TW_OPBATCH && k < l->nOps) {
        const uint4* src = (const uint4*)&l->ops[k];
        uint4* dst = (uint4*)&sh.ops[c.tid];
        dst[0] = src[0];
        dst[1] = src[1];
      }
      __syncthreads();
    }
    const TwOp op = sh.ops[oi % TW_OPBATCH];
    const int k = op.kind;
    if (k == K_NOP) continue;
    const bool recv = k == K_RECV || k == K_RECV_REDUCE_SEND || k == K_RECV_REDUCE_COPY ||
                      k == K_RECV_REDUCE_COPY_SEND || k == K_RECV_COPY_SEND;
    const bool send = k == K_SEND || k == K_RECV_REDUCE_SEND || k == K_RECV_REDUCE_COPY_SEND ||
                      k == K_RECV_COPY_SEND || k == K_COPY_SEND;
    const bool reduceIn = k == K_RECV_REDUCE_SEND || k == K_RECV_REDUCE_COPY || k == K_RECV_REDUCE_COPY_SEND;
    const bool readsIn = !recv && (k == K_SEND || k == K_COPY_SEND || k == K_COPY);
    const bool fromOut = k == K_SEND && (op.flags & F_FROM_OUTPUT);
    const bool writesOut = k == K_RECV || k == K_RECV_REDUCE_COPY || k == K_RECV_REDUCE_COPY_SEND ||
                           k == K_RECV_COPY_SEND || k == K_COPY_SEND || k == K_COPY;
    const bool postOp = (op.flags & F_POSTOP) != 0;
    const i64 n = op.n > 0 ? op.n : 0;

    // Slices as Program.Slices cuts them.
    int nslices = 1, steps = 1;
    i64 sliceElems = n;
    if (proto == PROTO_SIMPLE) {
      nslices = prog->slicesPerChunk;
      steps = prog->stepsPerSlice;
      i64 spc = nslices;
      i64 stepElems = stepBytes / es;
      i64 a = (n + 16 * spc - 1) / (16 * spc) * 16;
      i64 b = stepElems * steps / 32;
      sliceElems = a > b ? a : b;
    }
    i64 off = 0;
    for (int s = 0; s < nslices; s++) {
      i64 e = sliceElems < n - off ? sliceElems : n - off;
      if (e < 0) e = 0;
      const u64 rs = (u64)op.recvStep + (u64)s * steps;
      const u64 ss = (u64)op.sendStep + (u64)s * steps;
      const i64 nb = e * es;
      const i64 inOff = nb ? (op.inOff + off) * es : 0;
      const i64 outOff = nb ? (op.outOff + off) * es : 0;
      u64 t0 = 0;
      if (c.trace && c.tid == 0) t0 = globalTimer();

      if (proto == PROTO_SIMPLE) {
        // Thread 0 sets the slice's pointers before it waits; the barrier
        // in waitPeers publishes them (every thread finished the previous
        // slice's copy at postPeers' barrier).
        if (c.tid == 0) {
          int ns = 0, nd = 0;
          if (recv)
            for (int i = 0; i < c.nRecv; i++)
              sh.src[ns++] = sh.recvRing[i] + ((sh.recvBase[i] + rs) % TW_SLOTS) * slotBytes;
          if (reduceIn || readsIn) sh.src[ns++] = in + inOff;
          if (fromOut) sh.src[ns++] = out + outOff;
          if (writesOut) sh.dst[nd++] = out + outOff;
          if (send)
            for (int i = 0; i < c.nSend; i++)
              sh.dst[nd++] = sh.sendRing[i] + ((sh.sendBase[i] + ss) % TW_SLOTS) * slotBytes;
          sh.nsrc = ns;
          sh.ndst = nd;
        }
        if (!waitPeers(c, recv, send, rs, ss, steps, true)) return;
        u64 t1 = 0;
        if (c.trace && c.tid == 0) t1 = globalTimer();
        const bool stored = nb > 0 && sh.ndst > 0 && sh.nsrc > 0;
        if (stored) copyReduce(c, nb, postOp);
        postPeers(c, recv, send, rs, ss, steps, stored, nb);
        traceSlice(c, sliceNo, oi, s, t0, t1);
        sliceNo++;
        off += e;
        continue;
      }

      // LL and LL128: wait for send credits, then every thread polls its lines.
      if (send && !waitCredits(c, ss)) return;
      u64 t1 = 0;
      if (c.trace && c.tid == 0) t1 = globalTimer();
      const char* src = fromOut ? out + outOff : in + inOff;
      const bool local = reduceIn || readsIn || fromOut;
      char* dstOut = out + outOff;
      const bool haveData = nb > 0;
      if (proto == PROTO_LL && haveData) {
        LLSlice ls{src, dstOut, nb, rs, ss, slotBytes, recv, send, local, writesOut, postOp};
        // Only slices that give every thread TW_LL_HOST_LINES lines: on
        // smaller ones the receiver is still waiting for the data, and the
        // early polls only add a round trip (2 us on a 24 KiB AllGather).
        if ((c.lane->flags & LANE_HOST_RECV) && (nb + 7) / 8 >= (i64)TW_LL_HOST_LINES * blockDim.x)
          llLines<TW_LL_HOST_LINES>(c, ls);
        else
          llLines<1>(c, ls);
      } else if (proto == PROTO_LL128 && haveData) {
        ll128Lines<TW_LL128_LINES>(c, LLSlice{src, dstOut, nb, rs, ss, slotBytes, recv, send, local, writesOut, postOp});
      }
#if TW_LL_HOST_READBACK
      // A lane whose last op only sends into host memory has no later
      // load from host memory to push its stores out, and the GPU holds
      // the last of them back: the receiver saw the last lines of a launch about 10 us
      // late (Broadcast and Reduce LL over SHM of 3-32 KiB took 13-23 us,
      // NCCL 9-10). At the last slice of the launch every thread reads back
      // its last line of it, which pushes them out: a read does not pass
      // the writes before it on their way to host memory.
      if (proto == PROTO_LL && haveData && send && !recv && (l->flags & LANE_HOST_SEND) && oi == l->nOps - 1 &&
          s == nslices - 1) {
        const i64 lines = (nb + 7) / 8;
        if (c.tid < lines) {
          const i64 ln = c.tid + (lines - 1 - c.tid) / blockDim.x * blockDim.x;
          (void)ldVolatile16(sh.sendRing[0] + ((sh.sendBase[0] + ss) % TW_SLOTS) * slotBytes + ln * 16);
        }
      }
#endif
      // Once every thread is done with its lines, release the slots (a
      // send-only call has nothing to release and needs no barrier, unless
      // a proxy reads its sends: then the fifo entries, a system fence and
      // the tails publish the step, as for Simple).
      const bool netPost = send && c.netSend;
      if (recv || netPost) {
        __syncthreads();
        if (*(volatile int*)&sh.abort) return;
        if (c.tid == 0) {
          if (netPost) {
            const i64 wire = proto == PROTO_LL ? (nb + 7) / 8 * 16 : (nb + 119) / 120 * 128;
            postFifo(c, ss, 1, nb, wire, proto);
            fenceAcqRelSys();
            for (int i = 0; i < c.nSend; i++)
              if (sh.sendFifo[i] != nullptr) stRelaxed(sh.sendTail[i], sh.sendBase[i] + ss + 1);
          }
          if (recv)
            for (int i = 0; i < c.nRecv; i++) stRelaxed(sh.recvHead[i], sh.recvBase[i] + rs + 1);
        }
      } else if (*(volatile int*)&sh.abort) {
        return;
      }
      traceSlice(c, sliceNo, oi, s, t0, t1);
      sliceNo++;
      off += e;
    }
  }

  // Move every connection end past the steps this call used (the next
  // call rounds it up again) and post them all: the last ones may carry no
  // data (every real step was already published), so plain stores after
  // the barrier do.
  __syncthreads();
  if (c.tid == 0) {
    for (int i = 0; i < l->nRecv; i++) {
      TwConn* cn = l->recv[i];
      u64 nb = sh.recvBase[i] + l->recvUsed[i];
      stRelaxed(cn->head, nb);
      cn->step = nb;
    }
    for (int i = 0; i < l->nSend; i++) {
      TwConn* cn = l->send[i];
      u64 nb = sh.sendBase[i] + l->sendUsed[i];
      stRelaxed(cn->tail, nb);
      cn->step = nb;
    }
  }
}
