package sim

import (
	"math/rand"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestRunsAndSlices checks the engine's packed calls against the Program:
// runs of calls (compactOps) expand to the calls they hold, in any window,
// and an actor cuts each call into the slices model.Program.Slices gives.
func TestRunsAndSlices(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, p := range []*model.Program{
		{Proto: model.ProtoSimple, Dtype: model.DtypeFP32, StepBytes: 1 << 19, SlicesPerChunk: 2, StepsPerSlice: 2},
		{Proto: model.ProtoSimple, Dtype: model.DtypeBF16, StepBytes: 1 << 17, SlicesPerChunk: 4, StepsPerSlice: 2},
		{Proto: model.ProtoSimple, Dtype: model.DtypeFP64, StepBytes: 64, SlicesPerChunk: 1, StepsPerSlice: 8},
		{Proto: model.ProtoLL, Dtype: model.DtypeFP32, StepBytes: 1 << 15},
		{Proto: model.ProtoLL128, Dtype: model.DtypeFP16, StepBytes: 1 << 18},
	} {
		per := uint32(p.OpSteps())
		// Calls numbered as the generators do, with runs of equal calls,
		// and some that break the numbering.
		var ops []model.ProgOp
		kinds := []model.PrimKind{model.PrimSend, model.PrimRecvReduceSend, model.PrimRecvCopySend, model.PrimRecv, model.PrimCopy}
		k, n := kinds[0], int32(1000)
		rs, ss := 0-3*per, uint32(7) // the receive steps wrap around
		for i := 0; i < 3000; i++ {
			if rng.Intn(8) == 0 {
				k = kinds[rng.Intn(len(kinds))]
			}
			if rng.Intn(6) == 0 {
				n = int32(rng.Intn(1 << 20))
				if rng.Intn(4) == 0 {
					n = int32(rng.Intn(40)) - 3
				}
			}
			if rng.Intn(50) == 0 {
				rs += uint32(rng.Intn(3))
			}
			ops = append(ops, model.ProgOp{Kind: k, N: n, RecvStep: rs, SendStep: ss, Flags: uint8(rng.Intn(2))})
			if k.Receives() {
				rs += per
			}
			if k.Sends() {
				ss += per
			}
		}
		for _, window := range []int{0, 1, 7, 512} {
			var got []model.ProgOp
			for at := 0; at < len(ops); {
				runs, k := compactOps(ops[at:], per, nil, window)
				if k == 0 || window > 0 && len(runs) > window {
					t.Fatalf("window %d: %d runs hold %d calls", window, len(runs), k)
				}
				for _, r := range runs {
					x := &runner{p: p, per: per, proto: p.Proto, spc: 1, sps: 1}
					if p.Proto == model.ProtoSimple {
						x.spc, x.sps = int64(p.SlicesPerChunk), int64(p.StepsPerSlice)
						x.stepElems = int64(p.StepBytes / p.Dtype.Size())
					}
					x.pc = &ProtoCalib{}
					x.cold = []actorCold{{ops: []cop{r}, nOps: int(r.reps), winEnd: int(r.reps), frac: 1}}
					x.c = &Calib{}
					a := &actor{}
					if !x.loadRun(0, a) {
						t.Fatal("no run")
					}
					for i := 0; i < int(r.reps); i++ {
						op := model.ProgOp{Kind: a.kind, Flags: r.flags, N: r.n, RecvStep: a.opR, SendStep: a.opS}
						got = append(got, op)
						want := p.Slices(op, nil)
						if int64(len(want)) != x.spc {
							t.Fatalf("%d slices, want %d", x.spc, len(want))
						}
						for s, w := range want {
							a.sl = uint16(s)
							st := uint32(s) * uint32(x.sps)
							if a.elems() != w.Elems || a.opR+st != w.RecvStep || a.opS+st != w.SendStep || x.sps != int64(w.Steps) {
								t.Fatalf("call %+v slice %d: %d elems, steps %d/%d (%d), want %+v", op, s, a.elems(), a.opR+st, a.opS+st, x.sps, w)
							}
						}
						if a.recvs {
							a.opR += per
						}
						if a.sends {
							a.opS += per
						}
					}
				}
				at += k
			}
			if len(got) != len(ops) {
				t.Fatalf("window %d: %d calls, want %d", window, len(got), len(ops))
			}
			for i := range ops {
				w := ops[i]
				w.InOff, w.OutOff = 0, 0
				if got[i] != w {
					t.Fatalf("window %d call %d: %+v, want %+v", window, i, got[i], w)
				}
			}
		}
	}
}
