package gpudev

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// h200Search runs the search on the embedded H200 pair topology (the
// machine these benchmarks are meant for).
func h200Search(b testing.TB) *search.Result {
	data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		b.Fatal(err)
	}
	file := "embedded:" + twinccl.DefaultTopology
	root, _, err := model.ParseTopologyXML(bytes.NewReader(data), file)
	if err != nil {
		b.Fatal(err)
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: 1, Params: model.DefaultParams()})
	if err != nil {
		b.Fatal(err)
	}
	res, err := search.Run(cl, search.DefaultOptions())
	if err != nil {
		b.Fatal(err)
	}
	return res
}

// graphLoop is one rank's benchmark state: a CUDA graph of iters launches.
type graphLoop struct {
	d       *Device
	l       *Launch
	in, out cuda.DevicePtr
	exec    *cuda.GraphExec
	graph   *cuda.Graph
}

func newGraphLoop(d *Device, p *model.Program, iters int) (*graphLoop, error) {
	g := &graphLoop{d: d}
	var err error
	if g.l, err = d.Prepare(p, false); err != nil {
		return nil, err
	}
	es := uint64(p.Dtype.Size())
	if g.in, err = d.ctx.MemAlloc(max(uint64(p.InCount)*es, 16)); err != nil {
		return nil, err
	}
	if g.out, err = d.ctx.MemAlloc(max(uint64(p.OutCount)*es, 16)); err != nil {
		return nil, err
	}
	s := d.Stream()
	// A capture begins and ends on one OS thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := s.BeginCapture(cuda.CaptureModeThreadLocal); err != nil {
		return nil, err
	}
	for i := 0; i < iters; i++ {
		if err := g.l.Enqueue(s, g.in, g.out); err != nil {
			s.EndCapture()
			return nil, err
		}
	}
	if g.graph, err = s.EndCapture(); err != nil {
		return nil, err
	}
	if g.exec, err = g.graph.Instantiate(0); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *graphLoop) run() error {
	if err := g.exec.Launch(g.d.Stream()); err != nil {
		return err
	}
	if err := g.d.Stream().Synchronize(); err != nil {
		return err
	}
	return g.l.Check()
}

func (g *graphLoop) close() {
	if g.exec != nil {
		g.exec.Destroy()
	}
	if g.graph != nil {
		g.graph.Destroy()
	}
	g.d.ctx.MemFree(g.in)
	g.d.ctx.MemFree(g.out)
	g.l.Release()
}

// BenchmarkCollectives times AllReduce, AllGather, ReduceScatter and
// Broadcast on two GPUs (ranks in this process) with the tuner's choice
// for the embedded H200 topology, in CUDA-graph-captured loops as
// shared/baselines was recorded, and reports busbw (nccl-tests formula)
// and µs per call. Compare with shared/baselines/h200x2-nvswitch.
func BenchmarkCollectives(b *testing.B) {
	ctxs := gpus(b)
	if len(ctxs) < 2 {
		b.Skip("needs 2 GPUs")
	}
	res := h200Search(b)
	j, err := NewLocalJob(2, ctxs[:2], 30*time.Second, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	for _, coll := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast} {
		for _, size := range []int64{8, 2048, 131072, 1 << 20, 8 << 20, 32 << 20, 128 << 20, 512 << 20, 1 << 30} {
			b.Run(fmt.Sprintf("%s/%d", coll, size), func(b *testing.B) {
				benchOne(b, res, j, coll, size)
			})
		}
	}
}

func benchOne(b *testing.B, res *search.Result, j *LocalJob, coll model.Collective, size int64) {
	n := int64(len(j.Devices))
	count := size / 4
	if coll == model.CollAllGather || coll == model.CollReduceScatter {
		count /= n
	}
	ch, err := res.Tuning.Choose(coll, count, 4)
	if err != nil {
		b.Fatal(err)
	}
	p, err := model.GenerateProgram(res.Plan, coll, ch.Algo, ch.Proto, count, model.DtypeFP32, model.RedSum, model.ProgOptions{NChannels: ch.NChannels})
	if err != nil {
		b.Fatal(err)
	}
	iters := 50
	if size >= 64<<20 {
		iters = 10
	}
	loops := make([]*graphLoop, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	each := func(f func(r int) error) {
		for r := range loops {
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = f(r) }()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	each(func(r int) (err error) { loops[r], err = newGraphLoop(j.Devices[r], p, iters); return })
	defer func() {
		for _, g := range loops {
			if g != nil {
				g.close()
			}
		}
	}()
	each(func(r int) error { return loops[r].run() }) // warm-up
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		each(func(r int) error { return loops[r].run() })
	}
	el := time.Since(start)
	us := float64(el.Microseconds()) / float64(b.N*iters)
	factor := 1.0
	switch coll {
	case model.CollAllReduce:
		factor = 2 * float64(n-1) / float64(n)
	case model.CollAllGather, model.CollReduceScatter:
		factor = float64(n-1) / float64(n)
	}
	b.ReportMetric(us, "us/call")
	b.ReportMetric(float64(size)/us/1e3*factor, "busbw_GBps")
	b.Logf("%s %d B: %s/%s %d channels: %.2f us", coll, size, ch.Algo, ch.Proto, p.NChannels, us)
}
