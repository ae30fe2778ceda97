package refexec_test

import (
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// benchRun reports the interpreter's algorithm bandwidth: bytes of one
// rank's buffer per second (b.SetBytes), for an 8-rank collective.
func benchRun(b *testing.B, coll model.Collective, algo model.Algorithm, proto model.Protocol, count int64) {
	c := conformance.Case{Coll: coll, Algo: algo, Proto: proto, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 8, NChannels: 4, Count: count}
	p, err := c.Program()
	if err != nil {
		b.Fatal(err)
	}
	in := conformance.Inputs(c, p)
	b.SetBytes(count * 4)
	b.ResetTimer()
	for b.Loop() {
		if _, err := refexec.Run(p, in, refexec.Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRefexecAllReduceRingSimple8(b *testing.B) {
	benchRun(b, model.CollAllReduce, model.AlgoRing, model.ProtoSimple, 16<<20)
}
func BenchmarkRefexecAllReduceRingLL8(b *testing.B) {
	benchRun(b, model.CollAllReduce, model.AlgoRing, model.ProtoLL, 4<<20)
}
func BenchmarkRefexecAllReduceRingLL128_8(b *testing.B) {
	benchRun(b, model.CollAllReduce, model.AlgoRing, model.ProtoLL128, 16<<20)
}
func BenchmarkRefexecAllReduceTreeSimple8(b *testing.B) {
	benchRun(b, model.CollAllReduce, model.AlgoTree, model.ProtoSimple, 16<<20)
}
func BenchmarkRefexecAllGatherRingSimple8(b *testing.B) {
	benchRun(b, model.CollAllGather, model.AlgoRing, model.ProtoSimple, 2<<20)
}
