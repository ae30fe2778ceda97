package sim

import (
	"runtime"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// benchRun simulates one Program b.N times and reports events and slices
// per second of the step-accurate engine (one core, no goroutines). Slices
// are the engine's unit of work; the events a slice takes change with the
// engine (fewer stale completions, for one), so compare versions by
// slices per second.
func benchRun(b *testing.B, s *Simulator, c Call) {
	p, _, err := s.Program(c)
	if err != nil {
		b.Fatal(err)
	}
	var events uint64
	var slices int64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.Machine.Run(p)
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
		slices += r.Slices
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/op")
	b.ReportMetric(float64(slices)/b.Elapsed().Seconds(), "slices/s")
}

// BenchmarkEngineH200AllReduce: 1 GiB ring AllReduce, Simple, 24 channels
// on the two H200.
func BenchmarkEngineH200AllReduce(b *testing.B) {
	s := newSim(b, loadSearch(b, "", 1), nil)
	benchRun(b, s, Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
}

// BenchmarkEngineH100x8AllReduce: 256 MiB ring AllReduce on 8 H100.
func BenchmarkEngineH100x8AllReduce(b *testing.B) {
	s := newSim(b, loadSearch(b, h100XML(b), 1), nil)
	benchRun(b, s, Call{Coll: model.CollAllReduce, Count: 1 << 26, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
}

// BenchmarkEngineH100x4NodesAllReduce: 64 MiB ring AllReduce on 4 nodes of
// 8 H100 (NET connections between nodes).
func BenchmarkEngineH100x4NodesAllReduce(b *testing.B) {
	s := newSim(b, loadSearch(b, h100XML(b), 4), nil)
	benchRun(b, s, Call{Coll: model.CollAllReduce, Count: 1 << 24, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple})
}

// benchScale simulates one call in the mode replay sim uses by default
// (ModeAuto, nccl-tests' timed loop) on nodes copies of the 8 x H100 host
// and reports, besides the time per call simulated, the engine's events
// per second (over all the runs the call took: probes, folded lanes) and
// the heap the process holds from the system at the end (runtime
// MemStats.Sys, an upper bound of the live peak).
func benchScale(b *testing.B, nodes int, c Call) {
	s := newSim(b, loadSearch(b, h100XML(b), nodes), nil)
	s.Mode = ModeAuto
	var events uint64
	var how string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := s.RunTimed(c, false)
		if err != nil {
			b.Fatal(err)
		}
		events += r.Events
		how = r.Fast
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "sys-MiB")
	b.Logf("%d x 8 H100 %s %d: %s", nodes, c.Coll, c.Count, how)
}

// BenchmarkScaleAllReduce128x8 is NCCL's default choice (Tree/Simple) for
// a 1 GiB AllReduce on 128 x 8 H100; target: under 10 s on 2 cores.
func BenchmarkScaleAllReduce128x8(b *testing.B) {
	benchScale(b, 128, Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
}

// BenchmarkScaleAllReduce1024x8 is the same on 1,024 x 8 H100; target:
// under 60 s.
func BenchmarkScaleAllReduce1024x8(b *testing.B) {
	benchScale(b, 1024, Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
}

// BenchmarkScaleAlltoAll1024 is an AlltoAll of 64 MiB per rank (64 KiB to
// every peer) on 1,024 GPUs (128 x 8 H100); target: under 60 s.
func BenchmarkScaleAlltoAll1024(b *testing.B) {
	benchScale(b, 128, Call{Coll: model.CollAlltoAll, Count: 64 << 20 / 4 / 1024, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
}
