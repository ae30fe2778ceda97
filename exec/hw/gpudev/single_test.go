package gpudev

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// singleJob starts a one-rank job on the first GPU (skipping without one).
func singleJob(t *testing.T) *LocalJob {
	t.Helper()
	ctxs := gpus(t)
	j, err := NewLocalJob(1, ctxs[:1], 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	})
	return j
}

// TestSingleRank runs one-rank calls of every collective, SendRecv and
// AlltoAll (every datatype and reduction, several sizes) as copy launches:
// out of place, in place, captured in a CUDA graph, and against the
// interpreter kernel (TWINCCL_LOCAL_COPY=0); it logs the time per call.
func TestSingleRank(t *testing.T) {
	j := singleJob(t)
	d := j.Devices[0]
	cases := oneRankCases()
	for _, coll := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast,
		model.CollReduce, model.CollAlltoAll} {
		cases = append(cases, conformance.Case{Coll: coll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
			Op: model.RedAvg, NRanks: 1, NChannels: 8, Count: 2<<20 + 3})
	}
	// 128 MiB, out of place only (the host's reference takes seconds).
	big := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedAvg, NRanks: 1, NChannels: 8, Count: 32 << 20}
	t.Run("OutOfPlace", func(t *testing.T) {
		for _, c := range append(cases, big) {
			p, err := c.Program()
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if err := isCopy(d, p); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			if err := conformance.CheckProgram(localExec{j}, c, p); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("InPlace", func(t *testing.T) {
		for _, c := range cases {
			if err := singleInPlace(d, c); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("Graph", func(t *testing.T) {
		for _, coll := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollAlltoAll} {
			c := conformance.Case{Coll: coll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeInt32, Op: model.RedSum,
				NRanks: 1, NChannels: 2, Count: 100_003}
			if err := singleGraph(d, c); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		}
	})
	t.Run("Kernel", func(t *testing.T) {
		t.Setenv("TWINCCL_LOCAL_COPY", "0")
		for _, c := range []conformance.Case{
			{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedAvg, NRanks: 1, NChannels: 2, Count: 4099},
		} {
			p, err := c.Program()
			if err != nil {
				t.Fatal(err)
			}
			l, err := d.Prepare(p, false)
			if err != nil {
				t.Fatal(err)
			}
			if l.Copy() {
				t.Errorf("%s: a copy launch with TWINCCL_LOCAL_COPY=0", c)
			}
			l.Release()
			if err := conformance.CheckProgram(localExec{j}, c, p); err != nil {
				t.Error(err)
			}
		}
	})
	t.Run("Time", func(t *testing.T) {
		for _, bytes := range []int64{8, 1 << 20, 128 << 20} {
			us, err := singleTime(d, bytes)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("AllReduce of %d bytes on one rank: %.2f us per call (%.0f GB/s)", bytes, us, float64(bytes)/us/1e3)
		}
	})
}

type localExec struct{ j *LocalJob }

func (e localExec) Name() string { return "gpudev" }
func (e localExec) Execute(p *model.Program, in [][]byte) ([][]byte, error) {
	return e.j.Execute(p, in)
}

// isCopy checks that d prepares p as a copy launch.
func isCopy(d *Device, p *model.Program) error {
	l, err := d.Prepare(p, false)
	if err != nil {
		return err
	}
	defer l.Release()
	if !l.Copy() {
		return fmt.Errorf("not a copy launch")
	}
	return nil
}

// singleInPlace runs c with one buffer for input and output, as NCCL's
// in-place call (the input at the rank's offset of the output: 0 on one
// rank), and checks the result.
func singleInPlace(d *Device, c conformance.Case) error {
	p, err := c.Program()
	if err != nil {
		return err
	}
	ctx := d.Context()
	in := conformance.Inputs(c, p)[0]
	want, _ := conformance.Expected(c, p)
	nb := uint64(max(len(in), len(want[0]), 16))
	buf, err := ctx.MemAlloc(nb)
	if err != nil {
		return err
	}
	defer ctx.MemFree(buf)
	if len(in) > 0 {
		if err := ctx.MemcpyHtoD(buf, in); err != nil {
			return err
		}
	}
	l, err := d.Prepare(p, false)
	if err != nil {
		return err
	}
	defer l.Release()
	if err := l.Run(buf, buf); err != nil {
		return fmt.Errorf("%s in place: %w", c, err)
	}
	got := make([]byte, len(want[0]))
	if len(got) > 0 {
		if err := ctx.MemcpyDtoH(got, buf); err != nil {
			return err
		}
	}
	if !bytes.Equal(got, want[0]) {
		return fmt.Errorf("%s in place: wrong output", c)
	}
	return nil
}

// singleGraph captures three calls of c in a CUDA graph and replays it
// with new inputs.
func singleGraph(d *Device, c conformance.Case) error {
	p, err := c.Program()
	if err != nil {
		return err
	}
	ctx := d.Context()
	nb := uint64(p.InCount * 4)
	in, err := ctx.MemAlloc(nb)
	if err != nil {
		return err
	}
	defer ctx.MemFree(in)
	out, err := ctx.MemAlloc(nb)
	if err != nil {
		return err
	}
	defer ctx.MemFree(out)
	l, err := d.Prepare(p, false)
	if err != nil {
		return err
	}
	defer l.Release()
	if !l.Copy() {
		return fmt.Errorf("not a copy launch")
	}
	s := d.Stream()
	unlock, err := ctx.LockThread() // a capture begins and ends on one OS thread
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.BeginCapture(cuda.CaptureModeThreadLocal); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := l.Enqueue(s, in, out); err != nil {
			if g, err := s.EndCapture(); err == nil {
				g.Destroy()
			}
			return err
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Destroy()
	x, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer x.Destroy()
	host := make([]int32, p.InCount)
	got := make([]int32, p.OutCount)
	for rep := 0; rep < 4; rep++ {
		for i := range host {
			host[i] = int32(i*7 + rep)
		}
		if err := ctx.MemcpyHtoD(in, cuda.AsBytes(host)); err != nil {
			return err
		}
		// On the graph's stream: the device's stream does not wait for
		// the legacy stream a plain cuMemsetD8 runs on, so that memset
		// could land after the replayed copy.
		if err := ctx.MemsetD8Async(out, 0xa5, nb, s); err != nil {
			return err
		}
		if err := x.Launch(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := ctx.MemcpyDtoH(cuda.AsBytes(got), out); err != nil {
			return err
		}
		for i := range got {
			if got[i] != host[i] {
				return fmt.Errorf("replay %d: element %d = %d, want %d", rep, i, got[i], host[i])
			}
		}
	}
	return nil
}

// singleTime times 100 eager calls of a one-rank fp32 AllReduce of size
// bytes with events on the stream (after 10 untimed) and returns the
// microseconds per call.
func singleTime(d *Device, size int64) (float64, error) {
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum,
		NRanks: 1, NChannels: 8, Count: size / 4}
	p, err := c.Program()
	if err != nil {
		return 0, err
	}
	ctx := d.Context()
	buf, err := ctx.MemAlloc(uint64(2 * size))
	if err != nil {
		return 0, err
	}
	defer ctx.MemFree(buf)
	l, err := d.Prepare(p, false)
	if err != nil {
		return 0, err
	}
	defer l.Release()
	s := d.Stream()
	var ev [2]*cuda.Event
	for i := range ev {
		if ev[i], err = ctx.NewEvent(cuda.EventDefault); err != nil {
			return 0, err
		}
		defer ev[i].Destroy()
	}
	const iters = 100
	for i := 0; i < iters+10; i++ {
		if i == 10 {
			if err := ev[0].Record(s); err != nil {
				return 0, err
			}
		}
		if err := l.Enqueue(s, buf, buf.Add(uint64(size))); err != nil {
			return 0, err
		}
	}
	if err := ev[1].Record(s); err != nil {
		return 0, err
	}
	if err := ev[1].Synchronize(); err != nil {
		return 0, err
	}
	dt, err := cuda.ElapsedTime(ev[0], ev[1])
	if err != nil {
		return 0, err
	}
	return float64(dt.Nanoseconds()) / 1e3 / iters, nil
}
