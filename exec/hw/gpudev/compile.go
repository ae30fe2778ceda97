package gpudev

import (
	"fmt"
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// kernelKey names one compiled interpreter: a context and the Program's
// datatype, reduction and protocol.
type kernelKey struct {
	ctx   uintptr
	dt    model.Dtype
	op    model.RedOp
	proto model.Protocol
}

var (
	kernelMu sync.Mutex
	kernelFn = map[kernelKey]*cuda.Function{}
)

// maxThreads is the block size the interpreter of proto is compiled for
// (TW_NTHREADS) and the largest one its launches use: kernels.LineThreads
// for LL and LL128, whose blocks are sized to the call, kernels.Threads
// for Simple.
func maxThreads(proto model.Protocol) int {
	if proto == model.ProtoSimple {
		return kernels.Threads
	}
	return kernels.LineThreads
}

// KernelOptions are the NVRTC options of the interpreter for dt, op and
// proto, followed by any in TWINCCL_KERNEL_OPTIONS (space-separated; for
// tuning experiments, e.g. "-DTW_UNROLL=8"). One interpreter per protocol
// (TW_PROTO) compiles the other protocols' paths out, so that the one
// left has the thread's registers to itself: the kernel that carried all
// three spilled 252 bytes a thread on sm_90 (2026-11-27). Each is compiled
// for blocks of up to maxThreads(proto).
func KernelOptions(dt model.Dtype, op model.RedOp, proto model.Protocol) []string {
	opts := []string{fmt.Sprintf("-DTW_DTYPE=%d", int(dt)), fmt.Sprintf("-DTW_OP=%d", int(op)), fmt.Sprintf("-DTW_PROTO=%d", int(proto)),
		fmt.Sprintf("-DTW_NTHREADS=%d", maxThreads(proto)), "-std=c++17", "-default-device"}
	return append(opts, kernels.ExtraOptions()...)
}

// compileInterp compiles the interpreter for dt, op and proto for arch
// with NVRTC, through the on-disk cache.
func compileInterp(dt model.Dtype, op model.RedOp, proto model.Protocol, arch int) (*cuda.Image, error) {
	img, err := cuda.Compile(kernels.Interp, "interp.cu", KernelOptions(dt, op, proto), arch)
	if err != nil {
		return nil, fmt.Errorf("compile the %s/%s/%s interpreter for sm_%d: %w", dt, op, proto, arch, err)
	}
	return img, nil
}

// kernelFor returns the interpreter for dt, op and proto on ctx,
// compiling it with NVRTC (through the on-disk cache) and loading it on
// first use.
func kernelFor(ctx *cuda.Context, dt model.Dtype, op model.RedOp, proto model.Protocol) (*cuda.Function, error) {
	k := kernelKey{ctx.Handle(), dt, op, proto}
	kernelMu.Lock()
	defer kernelMu.Unlock()
	if f, ok := kernelFn[k]; ok {
		return f, nil
	}
	arch, err := ctx.Device().Arch()
	if err != nil {
		return nil, err
	}
	img, err := compileInterp(dt, op, proto, arch)
	if err != nil {
		return nil, err
	}
	mod, err := ctx.LoadModule(img.Data)
	if err != nil {
		return nil, fmt.Errorf("load the %s/%s/%s interpreter: %w", dt, op, proto, err)
	}
	f, err := mod.Function(kernels.InterpName)
	if err != nil {
		return nil, err
	}
	kernelFn[k] = f
	return f, nil
}

// Precompile compiles the interpreter for every datatype, reduction and
// protocol for arch side by side into the on-disk cache, so that later
// first uses only load it. It returns the first compilation error.
func Precompile(arch int) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for dt := model.Dtype(0); dt < model.NumDtypes; dt++ {
		for op := model.RedOp(0); op < model.NumRedOps; op++ {
			for proto := model.Protocol(0); proto < model.NumProtocols; proto++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if _, err := compileInterp(dt, op, proto, arch); err != nil {
						mu.Lock()
						if first == nil {
							first = err
						}
						mu.Unlock()
					}
				}()
			}
		}
	}
	wg.Wait()
	return first
}
