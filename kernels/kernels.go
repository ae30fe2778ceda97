// Package kernels holds the CUDA sources of the device-side Program
// interpreter, embedded so that exec/hw can compile them with NVRTC for the
// GPU it finds at run time. The layouts below mirror interp.cu's structs;
// exec/hw/gpudev writes them, and its GPU tests (the conformance suite run
// through the kernel) fail on any mismatch.
package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"strings"

	"github.com/twinccl/twinccl/traces/gpurecord"
)

// Interp is interp.cu: the interpreter kernel twcInterp, compiled once per
// datatype, reduction and protocol (-DTW_DTYPE=model.Dtype,
// -DTW_OP=model.RedOp, -DTW_PROTO=model.Protocol; without TW_PROTO one
// build runs every protocol, as before 2026-11-27).
//
//go:embed interp.cu
var Interp string

// SourceDigest names this build's interp.cu: the first 16 hex digits of
// its SHA-256. Recordings carry it, so that one says which kernel made it.
func SourceDigest() string {
	sum := sha256.Sum256([]byte(Interp))
	return hex.EncodeToString(sum[:8])
}

// OptionsEnv is the environment variable whose space-separated words are
// added to the interpreter's compile options (TW_* switches for
// experiments, e.g. "-DTW_UNROLL=8").
const OptionsEnv = "TWINCCL_KERNEL_OPTIONS"

// ExtraOptions are the compile options OptionsEnv adds.
func ExtraOptions() []string { return strings.Fields(os.Getenv(OptionsEnv)) }

// Current is the build this process compiles, as run gpu --json records
// it: the digest of its interp.cu (SourceDigest), the largest LL and LL128
// block it launches and the options OptionsEnv added.
func Current() gpurecord.Kernel {
	return gpurecord.Kernel{Source: SourceDigest(), LineThreads: LineThreads, Options: ExtraOptions()}
}

// Kernel layout constants shared with interp.cu.
const (
	// InterpName is the kernel's (extern "C") name.
	InterpName = "twcInterp"
	// Threads is the block size of Simple launches and the TW_NTHREADS
	// the Simple interpreter is compiled with.
	Threads = 512
	// LineThreads is the largest block of LL and LL128 launches (sized to
	// the call: model.LineThreadsFor) and the TW_NTHREADS their
	// interpreters are compiled with: NCCL's LL128 block. 640 threads
	// moved LL128 calls of 12-96 MiB 9-16% and LL ones 5-7% faster than
	// 512 on two H100 (2026-11-27); 102 registers a thread leave LL128
	// unspilled, LL spills 52 bytes.
	LineThreads = 640
	// MaxPeers bounds a lane's receive and send peers (TW_MAXPEERS).
	MaxPeers = 8
	// ConnSize is sizeof(TwConn): buf[4] (LL, LL128, Simple written by
	// the sender, Simple read by the receiver), tail, head pointers, step,
	// and the connFifo pointer of a net send end (0 otherwise).
	ConnSize = 64
	// ConnRings is the number of slot rings of a connection (TwConn.buf).
	ConnRings = 4
	// ConnStepOffset is offsetof(TwConn, step).
	ConnStepOffset = 48
	// ConnFifoOffset is offsetof(TwConn, fifo): a net send end's connFifo
	// (exec/hw/transport's layout), which the kernel fills before it moves
	// the tail of every step, LL included, for the proxy.
	ConnFifoOffset = 56
	// SlotLL, SlotLL128 and SlotSimple are the kernel's slot strides
	// (TW_SLOT_*): model.ProtoStepBytes, whatever a Program's step size.
	SlotLL     = 65536
	SlotLL128  = 614400
	SlotSimple = 524288
	// LaneSize is sizeof(TwLane): nRecv, nSend, flags, padding, the
	// connections and steps used, ops, nOps and the trace pointer.
	LaneSize = 16 + 4*8*MaxPeers + 3*8
	// LaneHostRecv is the TwLane.flags bit of a lane that receives from
	// host memory (SHM, or NET staged through host memory): its LL slices
	// start TW_LL_HOST_LINES lines per thread at once (LANE_HOST_RECV).
	LaneHostRecv = 1
	// LaneHostSend is the TwLane.flags bit of a lane that sends into host
	// memory (LANE_HOST_SEND).
	LaneHostSend = 2
	// ProgHeaderSize is offsetof(TwProg, lanes).
	ProgHeaderSize = 32
	// OpSize is sizeof(TwOp), the binary Program encoding's op record.
	OpSize = 32
	// TraceWords is the number of u64 a traced slice writes: op<<8|slice,
	// start, data start (after the waits), end (%globaltimer, ns).
	TraceWords = 4
	// StatusTimeout, StatusAbort and StatusProto are the codes (status >>
	// 24) a launch leaves in its status word; the low 24 bits name the
	// lane. StatusProto: an interpreter built for one protocol (TW_PROTO)
	// was given a Program of another.
	StatusTimeout = 1
	StatusAbort   = 2
	StatusProto   = 3
)

// Gin is gin.cu: the GIN device API over the proxy backend (put with a
// remote signal and a local counter, readSignal, waitSignal, flush,
// barrier) and the kernels built on it (ginAllToAll, ginOrderProbe).
//
//go:embed gin.cu
var Gin string

// GIN layout constants shared with gin.cu.
const (
	// GinMaxContexts bounds the contexts of a GIN communicator (GIN_MAXCTX).
	GinMaxContexts = 8
	// GinDescSize is sizeof(GinDesc), one descriptor slot.
	GinDescSize = 64
	// GinDescSeqOffset is offsetof(GinDesc, seq), the word that publishes it.
	GinDescSeqOffset = 56
	// GinQueueSize is sizeof(GinQueue): ring, consumed, done, tickets, slots.
	GinQueueSize = 40
	// GinDevCommHeader is offsetof(GinDevComm, q).
	GinDevCommHeader = 48
	// GinDevCommSize is sizeof(GinDevComm).
	GinDevCommSize = GinDevCommHeader + GinMaxContexts*GinQueueSize
	// GinSigAdd and GinSigSet are remote actions; GinCtrInc the local one.
	GinSigAdd = 1
	GinSigSet = 2
	GinCtrInc = 1
	// GinAllToAllName and GinOrderProbeName are the kernels' names.
	GinAllToAllName   = "ginAllToAll"
	GinOrderProbeName = "ginOrderProbe"
)
