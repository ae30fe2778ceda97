package profiler

import (
	"strings"

	"github.com/twinccl/twinccl/model"
)

// Event type bits, as NCCL's profiler API numbers them (ncclProfile*);
// the activation mask uses the same bits.
const (
	TypeGroup        = 1 << 0
	TypeColl         = 1 << 1
	TypeP2p          = 1 << 2
	TypeProxyOp      = 1 << 3
	TypeProxyStep    = 1 << 4
	TypeProxyCtrl    = 1 << 5
	TypeKernelCh     = 1 << 6
	TypeNetPlugin    = 1 << 7
	TypeGroupApi     = 1 << 8
	TypeCollApi      = 1 << 9
	TypeP2pApi       = 1 << 10
	TypeKernelLaunch = 1 << 11
)

// Event states (ncclProfilerEventState_t) the recorder uses.
const (
	StateProxyStepSendGPUWait   = 8
	StateProxyStepSendWait      = 9
	StateProxyStepRecvWait      = 10
	StateProxyStepRecvFlushWait = 11
	StateProxyStepRecvGPUWait   = 12
	StateProxyStepSendPeerWait  = 20
	StateKernelChStop           = 22
)

// opName is the model's name of NCCL's function name ("AllReduce",
// "Send", ...); NCCL's own spelling where the model has no such collective
// (Gather, Scatter), so the row still says what ran.
func opName(func_ string) string {
	if c, err := model.ParseCollective(func_); err == nil {
		return c.String()
	}
	return func_
}

// algoName is the model's name of NCCL's algorithm name ("RING" ->
// "Ring", "NVLS_TREE" -> "NVLSTree"); "" for none or "Unknown".
func algoName(s string) string {
	if a, err := model.ParseAlgorithm(s); err == nil {
		return a.String()
	}
	return ""
}

// protoName is the model's name of NCCL's protocol name ("SIMPLE" ->
// "Simple"); "" for none or "Unknown".
func protoName(s string) string {
	if p, err := model.ParseProtocol(s); err == nil {
		return p.String()
	}
	return ""
}

// datatypeName is NCCL's datatype name without its prefix, lower case, as
// the call schema has it: "ncclFloat32" -> "float32", "ncclBfloat16" ->
// "bfloat16"; "" for none or "Unknown".
func datatypeName(s string) string {
	if s == "" || s == "Unknown" {
		return ""
	}
	return strings.ToLower(strings.TrimPrefix(s, "nccl"))
}

// rooted reports whether NCCL's function has a root (Broadcast, Reduce):
// the others get root -1 in the call trace.
func rooted(op string) bool { return op == "Broadcast" || op == "Reduce" }
