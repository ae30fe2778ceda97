package gpudev

import (
	"bytes"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
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
	jobExecutor
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

func (e *ibExecutor) close(t *testing.T) {
	e.jobExecutor.close(t)
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
	e := &ibExecutor{jobExecutor: jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}, timeout: 10 * time.Second}}
	e.opts = LocalOptions{Net: e.plugin}
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

// TestGDRSoftGPU moves 1 MiB from one GPU buffer to another through the
// ib plugin's GPUDirect path over the software verbs provider (which
// reaches GPU memory through cuMemcpyDtoH/HtoD), two ranks on one GPU,
// flushes the receive, and checks the bytes on the GPU.
func TestGDRSoftGPU(t *testing.T) {
	ctxs := requireGPU(t)
	ctx := ctxs[0]
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), 2, 5*time.Second, nil)
	require.NoError(t, err)
	var comms [2]*bootstrap.Comm
	var plugs [2]*ib.Plugin
	var errs [2]error
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = bootstrap.Init(bootstrap.Config{Rank: r, NRanks: 2, ID: root.ID(), Host: "127.0.0.1", Timeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs[0], errs[1], root.Wait()))
	for r := range plugs {
		pv, err := soft.New(soft.Options{})
		require.NoError(t, err)
		plugs[r] = ib.New(ib.Options{Provider: pv})
		require.NoError(t, plugs[r].Init(comms[r]))
		t.Cleanup(func() { plugs[r].Close(); pv.Close(); comms[r].Close() })
	}
	require.True(t, plugs[1].GDRSupported())
	h, l, err := plugs[1].Listen(0)
	require.NoError(t, err)
	cn, err := plugs[0].StartConnect(1, h)
	require.NoError(t, err)
	var sc transport.SendComm
	var rc transport.RecvComm
	for deadline := time.Now().Add(5 * time.Second); sc == nil || rc == nil; time.Sleep(100 * time.Microsecond) {
		require.True(t, time.Now().Before(deadline), "connect timed out")
		if sc == nil {
			sc, err = cn.TryConnect()
			require.NoError(t, err)
		}
		if rc == nil {
			rc, err = l.TryAccept()
			require.NoError(t, err)
		}
	}
	defer sc.Close()
	defer rc.Close()

	const n = 1 << 20
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(i*31 + 7)
	}
	var ptrs [2]cuda.DevicePtr
	for i := range ptrs {
		ptrs[i], err = ctx.MemAlloc(n)
		require.NoError(t, err)
		defer ctx.MemFree(ptrs[i])
	}
	require.NoError(t, ctx.MemcpyHtoD(ptrs[0], want))
	require.NoError(t, ctx.MemsetD8(ptrs[1], 0, n))
	src, dst := NewGPUBuffer(ctx, ptrs[0], n), NewGPUBuffer(ctx, ptrs[1], n)
	hdr := make([]byte, transport.HeaderSize)
	sr, err := sc.(interface {
		IsendDevice([]byte, verbs.DeviceMemory, int, int) (transport.Request, error)
	}).IsendDevice(hdr, src, 0, n)
	require.NoError(t, err)
	dev := rc.(interface {
		IrecvDevice(verbs.DeviceMemory, int, int) (transport.Request, error)
		Iflush(verbs.DeviceMemory, int, int) (transport.Request, error)
	})
	hr, err := rc.IrecvHeader(make([]byte, transport.HeaderSize))
	require.NoError(t, err)
	dr, err := dev.IrecvDevice(dst, 0, n)
	require.NoError(t, err)
	waitAll := func(rs ...transport.Request) {
		for deadline := time.Now().Add(10 * time.Second); ; {
			done := true
			for _, r := range rs {
				ok, err := r.Test()
				require.NoError(t, err)
				done = done && ok
			}
			if done {
				return
			}
			require.True(t, time.Now().Before(deadline), "transfer timed out")
		}
	}
	waitAll(sr, hr, dr)
	fr, err := dev.Iflush(dst, 0, n)
	require.NoError(t, err)
	waitAll(fr)
	got := make([]byte, n)
	require.NoError(t, ctx.MemcpyDtoH(got, ptrs[1]))
	require.True(t, bytes.Equal(want, got), "GPU buffer received other bytes")
}
