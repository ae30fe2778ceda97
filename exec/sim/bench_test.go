package sim

import (
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
