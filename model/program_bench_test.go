package model_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// BenchmarkGenerateAllReduce1GiB1024x32 streams the Program of a 1 GiB fp32
// ring AllReduce (Simple) on 1,024 ranks x 32 channels: every lane of every
// rank and channel is generated, one (rank, channel) at a time into a
// reused buffer, spread over GOMAXPROCS goroutines. The materialised form
// would hold ~67 M ops (2 GiB at 32 bytes each); streaming keeps memory
// flat.
func BenchmarkGenerateAllReduce1GiB1024x32(b *testing.B) {
	const n, nch = 1024, 32
	plan := conformance.TestPlan(n, nch, true)
	count := int64(1<<30) / 4
	b.ReportAllocs()
	var ops int64
	for b.Loop() {
		g, err := model.NewProgGen(plan, model.CollAllReduce, model.AlgoRing, model.ProtoSimple, count, model.DtypeFP32, model.RedSum, model.ProgOptions{})
		if err != nil {
			b.Fatal(err)
		}
		chans := g.Channels()
		workers := runtime.GOMAXPROCS(0)
		counts := make([]int64, workers)
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				var buf []model.ProgOp
				for r := w; r < n; r += workers {
					for _, ch := range chans {
						for i := 0; i < g.NumLanes(r, ch); i++ {
							l := g.Lane(r, ch, i, buf)
							counts[w] += int64(len(l.Ops))
							buf = l.Ops
						}
					}
				}
			}(w)
		}
		wg.Wait()
		ops = 0
		for _, c := range counts {
			ops += c
		}
	}
	b.ReportMetric(float64(ops), "ops")
}

// BenchmarkMaterializeAllReduce materialises a whole Program (64 ranks x 8
// channels, 256 MiB fp32 ring AllReduce) and encodes it.
func BenchmarkMaterializeAllReduce(b *testing.B) {
	plan := conformance.TestPlan(64, 8, true)
	b.ReportAllocs()
	for b.Loop() {
		p, err := model.GenerateProgram(plan, model.CollAllReduce, model.AlgoRing, model.ProtoSimple, 64<<20, model.DtypeFP32, model.RedSum, model.ProgOptions{})
		if err != nil {
			b.Fatal(err)
		}
		enc, err := p.MarshalBinary()
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(p.NumOps()), "ops")
		b.ReportMetric(float64(len(enc)), "encoded-bytes")
	}
}
