package gpudev

import (
	"fmt"
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// kernelKey names one compiled interpreter: a context and the Program's
// datatype and reduction.
type kernelKey struct {
	ctx uintptr
	dt  model.Dtype
	op  model.RedOp
}

var (
	kernelMu sync.Mutex
	kernelFn = map[kernelKey]*cuda.Function{}
)

// KernelOptions are the NVRTC options of the interpreter for dt and op,
// followed by any in TWINCCL_KERNEL_OPTIONS (space-separated; for tuning
// experiments, e.g. "-DTW_UNROLL=8").
func KernelOptions(dt model.Dtype, op model.RedOp) []string {
	opts := []string{fmt.Sprintf("-DTW_DTYPE=%d", int(dt)), fmt.Sprintf("-DTW_OP=%d", int(op)), "-std=c++17", "-default-device"}
	return append(opts, kernels.ExtraOptions()...)
}

// kernelFor returns the interpreter for dt and op on ctx, compiling it
// with NVRTC (through the on-disk cache) and loading it on first use.
func kernelFor(ctx *cuda.Context, dt model.Dtype, op model.RedOp) (*cuda.Function, error) {
	k := kernelKey{ctx.Handle(), dt, op}
	kernelMu.Lock()
	defer kernelMu.Unlock()
	if f, ok := kernelFn[k]; ok {
		return f, nil
	}
	arch, err := ctx.Device().Arch()
	if err != nil {
		return nil, err
	}
	img, err := cuda.Compile(kernels.Interp, "interp.cu", KernelOptions(dt, op), arch)
	if err != nil {
		return nil, fmt.Errorf("compile the %s/%s interpreter for sm_%d: %w", dt, op, arch, err)
	}
	mod, err := ctx.LoadModule(img.Data)
	if err != nil {
		return nil, fmt.Errorf("load the %s/%s interpreter: %w", dt, op, err)
	}
	f, err := mod.Function(kernels.InterpName)
	if err != nil {
		return nil, err
	}
	kernelFn[k] = f
	return f, nil
}

// Precompile compiles the interpreter for every datatype and reduction
// for arch side by side into the on-disk cache, so that later first uses
// only load it. It returns the first compilation error.
func Precompile(arch int) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for dt := model.Dtype(0); dt < model.NumDtypes; dt++ {
		for op := model.RedOp(0); op < model.NumRedOps; op++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := cuda.Compile(kernels.Interp, "interp.cu", KernelOptions(dt, op), arch); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("compile the %s/%s interpreter for sm_%d: %w", dt, op, arch, err)
					}
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	return first
}
