package refexec_test

import (
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// benchRun reports the interpreter's algorithm bandwidth: bytes of one
// rank's buffer per second (b.SetBytes, the MB/s column), for an 8-rank
// collective on 4 channels, with output buffers reused across runs
// (Options.Outputs). The "wire-GB/s" metric is the data all connections
// carried per second: the bytes the interpreter moved through slots.
//
// Before the typed kernels (encoding/binary per element, staging copies):
// AllReduce ring Simple 0.070 GB/s, LL 0.023, LL128 0.104, tree Simple
// 0.099, AllGather ring Simple 0.066 (2 cores, AMD EPYC).
func benchRun(b *testing.B, coll model.Collective, algo model.Algorithm, proto model.Protocol, count int64) {
	c := conformance.Case{Coll: coll, Algo: algo, Proto: proto, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 8, NChannels: 4, Count: count}
	p, err := c.Program()
	if err != nil {
		b.Fatal(err)
	}
	in := conformance.Inputs(c, p)
	res, err := refexec.Run(p, in, refexec.Options{})
	if err != nil {
		b.Fatal(err)
	}
	var wire int64
	for _, st := range res.Conns {
		wire += st.Bytes
	}
	opt := refexec.Options{Outputs: res.Outputs}
	b.SetBytes(count * 4)
	b.ResetTimer()
	for b.Loop() {
		if _, err := refexec.Run(p, in, opt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(wire)*float64(b.N)/b.Elapsed().Seconds()/1e9, "wire-GB/s")
}

func BenchmarkRefexecAlltoAllSimple8(b *testing.B) {
	benchRun(b, model.CollAlltoAll, model.AlgoRing, model.ProtoSimple, 2<<20)
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
