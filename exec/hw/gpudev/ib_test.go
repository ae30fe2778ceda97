package gpudev

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// requireGPU returns the GPUs' contexts; without one it skips on the typed
// cuda.ErrUnavailable (a machine without a GPU, a build without cgo) and
// fails on anything else, or on anything at all when TWINCCL_REQUIRE_GPU=1
// says there must be a GPU.
func requireGPU(t *testing.T) []*cuda.Context {
	t.Helper()
	ctxs, err := Contexts()
	if err == nil {
		return ctxs
	}
	if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" || !errors.Is(err, cuda.ErrUnavailable) {
		t.Fatalf("no GPU to run on (TWINCCL_REQUIRE_GPU=%q): %v", os.Getenv("TWINCCL_REQUIRE_GPU"), err)
	}
	t.Skipf("not supported here: %v", err)
	return nil
}

// ibExecutor runs conformance cases on LocalJobs whose every rank is a
// host of its own (every connection a net one) with the ib plugin over its
// own software verbs provider: GPU ranks over --net ib on one GPU.
type ibExecutor struct {
	ctxs  []*cuda.Context
	jobs  map[int]*LocalJob
	mu    sync.Mutex
	provs []*soft.Provider
}

func (e *ibExecutor) Name() string { return "gpudev-ib-soft" }

func (e *ibExecutor) plugin(int) (transport.Plugin, error) {
	pv, err := soft.New(soft.Options{})
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.provs = append(e.provs, pv)
	e.mu.Unlock()
	opt, err := ib.OptionsFromEnv(pv)
	if err != nil {
		return nil, err
	}
	return ib.New(opt), nil
}

func (e *ibExecutor) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	j := e.jobs[p.NRanks]
	if j == nil {
		var err error
		if j, err = NewLocalJobOptions(p.NRanks, e.ctxs, 10*time.Second, nil, LocalOptions{Net: e.plugin}); err != nil {
			return nil, err
		}
		e.jobs[p.NRanks] = j
	}
	out, err := j.Execute(p, inputs)
	if err != nil {
		j.Close()
		delete(e.jobs, p.NRanks)
	}
	return out, err
}

func (e *ibExecutor) close(t *testing.T) {
	for _, j := range e.jobs {
		require.NoError(t, j.Close())
	}
	for _, p := range e.provs {
		p.Close()
	}
}

// TestConformanceIB runs every collective, algorithm and protocol the net
// transport takes (LL and Simple; LL128 is refused over host staging, as
// over SHM) with GPU ranks of up to 4 over the ib plugin and the software
// verbs provider, every rank a host of its own: the slices go kernel ->
// host staging -> proxy -> ib plugin -> peer's staging -> kernel.
func TestConformanceIB(t *testing.T) {
	ctxs := requireGPU(t)
	allowP2P(t)
	t.Setenv("TWINCCL_HOSTID", "split:1")
	e := &ibExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	defer e.close(t)
	cases := netCases(4, 1)
	t.Logf("%d conformance cases over the ib plugin (soft provider) on %d GPU(s)", len(cases), len(ctxs))
	start := time.Now()
	conformance.Run(t, e, cases...)
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
	if j := e.jobs[2]; j != nil {
		require.Equal(t, LinkNet, j.Devices[0].Link(0, 1))
		require.Equal(t, "IB", j.Devices[0].net.Name(), "the proxy runs the ib plugin")
	}
}
