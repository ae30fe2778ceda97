package gpudev

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// TestKernelOptions: every protocol gets an interpreter of its own
// (-DTW_PROTO), LL and LL128 compiled for NCCL's 640-thread block and
// Simple for 512, and TWINCCL_KERNEL_OPTIONS come last, so that an A/B can
// override the build's defines (-UTW_PROTO: the one kernel of every
// protocol).
func TestKernelOptions(t *testing.T) {
	t.Setenv(kernels.OptionsEnv, "-UTW_PROTO -DTW_LL128_LINES=1")
	seen := map[string]bool{}
	for p := model.Protocol(0); p < model.NumProtocols; p++ {
		opts := KernelOptions(model.DtypeFP32, model.RedSum, p)
		want := fmt.Sprintf("-DTW_PROTO=%d", int(p))
		i := slices.Index(opts, want)
		if i < 0 {
			t.Fatalf("%s: options %q lack %s", p, opts, want)
		}
		if j := slices.Index(opts, "-UTW_PROTO"); j < i || j != len(opts)-2 || opts[len(opts)-1] != "-DTW_LL128_LINES=1" {
			t.Errorf("%s: options %q: the environment's must come last", p, opts)
		}
		threads := kernels.LineThreads
		if p == model.ProtoSimple {
			threads = kernels.Threads
		}
		if !slices.Contains(opts, fmt.Sprintf("-DTW_NTHREADS=%d", threads)) {
			t.Errorf("%s: options %q: want blocks of up to %d threads", p, opts, threads)
		}
		key := fmt.Sprint(opts[:len(opts)-2])
		if seen[key] {
			t.Errorf("%s: options %q equal another protocol's", p, opts)
		}
		seen[key] = true
	}
}
