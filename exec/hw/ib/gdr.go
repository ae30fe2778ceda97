package ib

import (
	"fmt"
	"os"

	"github.com/twinccl/twinccl/model"
)

// FlushMode is how NCCL makes a GPUDirect RDMA receive visible to the GPU
// before the kernel reads it (ncclTopoNeedFlush, nccl-facts §3.5).
type FlushMode int

// Flush modes.
const (
	// FlushNone: the GPU orders the NIC's PCIe writes before the
	// completion the proxy saw (sm 90 and later): no flush.
	FlushNone FlushMode = iota
	// FlushAlways: an RDMA read on the flush QP after every GDR receive
	// (sm below 90, NCCL_NET_FORCE_FLUSH, or a NIC asking for it).
	FlushAlways
	// FlushC2C: sm 90 and later, but the data comes through a PCIe switch
	// near the NIC while the GPU reaches its CPU (and so the flags) over
	// C2C: the write ordering does not cover it, so the receive flushes.
	FlushC2C
)

func (m FlushMode) String() string {
	switch m {
	case FlushNone:
		return "none"
	case FlushAlways:
		return "always"
	case FlushC2C:
		return "C2C"
	}
	return fmt.Sprintf("FlushMode(%d)", int(m))
}

// NeedFlush is NCCL's flush rule for a GPU of compute capability sm
// (major*10+minor) whose path to the NIC is of type gpuNet and to its
// local CPU of type gpuCPU; force is NCCL_NET_FORCE_FLUSH=1 or the NIC's
// forceFlush property.
func NeedFlush(sm int, gpuNet, gpuCPU model.PathType, force bool) FlushMode {
	switch {
	case force || sm < 90:
		return FlushAlways
	case gpuNet <= model.PathPXB && gpuCPU == model.PathC2C:
		return FlushC2C
	}
	return FlushNone
}

// NeedFlushFor is NeedFlush for a GPU and NIC of sys, with
// NCCL_NET_FORCE_FLUSH read from the environment (an error names it when
// it is not 0 or 1).
func NeedFlushFor(sys *model.System, gpu, nic *model.Node) (FlushMode, error) {
	force := false
	switch v := os.Getenv("NCCL_NET_FORCE_FLUSH"); v {
	case "", "0":
	case "1":
		force = true
	default:
		return FlushNone, fmt.Errorf("NCCL_NET_FORCE_FLUSH=%q: want 0 or 1", v)
	}
	if gpu == nil || gpu.Type != model.GPU || nic == nil {
		return FlushNone, fmt.Errorf("ib plugin: flush rule needs a GPU and a NIC")
	}
	cpu := model.PathSYS
	if c := sys.LocalCPU(gpu); c != nil {
		cpu = gpu.Path(c).Type
	}
	return NeedFlush(gpu.GPU.SM, gpu.Path(nic).Type, cpu, force), nil
}

// FlushesReceive says whether a receive flushes: the receiving end uses
// GPUDirect RDMA (model.Conn.RecvGDR), the protocol is Simple (LL and
// LL128 carry their own flags with the data), the flush rule asks for
// one, and NCCL_GDR_FLUSH_DISABLE does not forbid it.
func FlushesReceive(recvGDR bool, p model.Protocol, mode FlushMode, s Settings) bool {
	return recvGDR && p == model.ProtoSimple && mode != FlushNone && !s.GDRFlushDisable
}
