package model_test

import (
	"bytes"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// TestInPlaceBroadcastAndAllGather runs in-place Broadcast and AllGather
// Programs in the reference interpreter over one buffer per rank (the
// output, holding the input where NCCL's in-place call keeps it): every
// rank ends with the out-of-place result, the root of a Broadcast and
// every AllGather rank send without copying, and every connection carries
// the same bytes as out of place.
func TestInPlaceBroadcastAndAllGather(t *testing.T) {
	for _, c := range []conformance.Case{
		{Coll: model.CollBroadcast, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, NRanks: 4, NChannels: 2, Count: 100_003, Root: 2, Permute: true},
		{Coll: model.CollBroadcast, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeBF16, NRanks: 3, NChannels: 1, Count: 4099, Root: 0},
		{Coll: model.CollAllGather, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, NRanks: 4, NChannels: 2, Count: 70_001, Permute: true},
		{Coll: model.CollAllGather, Algo: model.AlgoRing, Proto: model.ProtoLL128, Dtype: model.DtypeFP16, NRanks: 2, NChannels: 3, Count: 5000},
	} {
		t.Run(c.String(), func(t *testing.T) {
			gen := func(inPlace bool) *model.Program {
				p, err := model.GenerateProgram(c.Plan(), c.Coll, c.Algo, c.Proto, c.Count, c.Dtype, c.Op, model.ProgOptions{Root: c.Root, InPlace: inPlace})
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			out, in := gen(false), gen(true)
			inputs := conformance.Inputs(c, in)
			want, _ := conformance.Expected(c, out)
			// One buffer per rank: the output, with the rank's input
			// where the in-place call has it.
			es := int64(c.Dtype.Size())
			bufs := make([][]byte, c.NRanks)
			for r := range bufs {
				bufs[r] = make([]byte, in.OutCount*es)
				at := int64(0)
				if c.Coll == model.CollAllGather {
					at = int64(r) * c.Count * es
				}
				copy(bufs[r][at:], inputs[r])
			}
			res, err := refexec.Run(in, inputs, refexec.Options{Outputs: bufs})
			if err != nil {
				t.Fatal(err)
			}
			for r := range want {
				if !bytes.Equal(res.Outputs[r], want[r]) {
					t.Errorf("rank %d: in-place output differs from the expected result", r)
				}
			}
			ref, err := refexec.Run(out, inputs, refexec.Options{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range ref.Conns {
				if a, b := res.Conns[i], ref.Conns[i]; a.Bytes != b.Bytes || a.WireBytes != b.WireBytes || a.Steps != b.Steps {
					t.Errorf("connection %d: in place %d bytes (%d wire, %d steps), out of place %d (%d, %d)", i, a.Bytes, a.WireBytes, a.Steps, b.Bytes, b.WireBytes, b.Steps)
				}
			}
			// The senders that copied out of place only send in place.
			copies := func(p *model.Program) (n int) {
				for _, l := range p.Lanes {
					for _, op := range l.Ops {
						if op.Kind == model.PrimCopySend {
							n++
						}
					}
				}
				return n
			}
			if copies(out) == 0 || copies(in) != 0 {
				t.Errorf("copySend calls: %d out of place, %d in place; want some, then none", copies(out), copies(in))
			}
		})
	}
}
