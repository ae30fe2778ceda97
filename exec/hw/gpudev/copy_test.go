package gpudev

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// oneRankCases are one-rank calls of every collective the executor runs
// (each allowed algorithm and protocol), over every datatype and reduction
// and a few sizes, on one and several channels.
func oneRankCases() []conformance.Case {
	var out []conformance.Case
	k := 0
	combos := append(conformance.Combos(), conformance.P2PCombos()...)
	for _, cb := range combos {
		for _, count := range []int64{0, 1, 7, 1021, 65537} {
			for _, nch := range []int{1, 8} {
				c := conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
					Dtype: model.Dtype(k % model.NumDtypes), Op: model.RedOp(k / model.NumDtypes % model.NumRedOps),
					NRanks: 1, NChannels: nch, Count: count}
				if c.IsP2P() {
					c.Op = model.RedSum
					c.PerPeer = min(conformance.TestPlan(1, nch, false).P2PChannels, 1<<(k%4))
				}
				out = append(out, c)
				k++
			}
		}
		if model.Collective(cb[0]).IsP2P() {
			// Several parts on several channels, several chunks each.
			out = append(out, conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
				Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 1, NChannels: 8, Count: 300_001, PerPeer: 4})
		}
		for d := model.Dtype(0); d < model.NumDtypes; d++ {
			for op := model.RedOp(0); op < model.NumRedOps; op++ {
				if model.Collective(cb[0]).IsP2P() && op != model.RedSum {
					continue
				}
				out = append(out, conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
					Dtype: d, Op: op, NRanks: 1, NChannels: 2, Count: 997})
			}
		}
	}
	return out
}

// applyCopies runs segs on host buffers.
func applyCopies(segs []copySeg, in, out []byte) error {
	for _, s := range segs {
		if s.in < 0 || s.out < 0 || s.in+s.n > int64(len(in)) || s.out+s.n > int64(len(out)) {
			return fmt.Errorf("copy %+v outside buffers of %d and %d bytes", s, len(in), len(out))
		}
		copy(out[s.out:s.out+s.n], in[s.in:s.in+s.n])
	}
	return nil
}

// TestCopyPlanOneRank checks that every one-rank call is a copy launch of
// one device-to-device copy (none for an empty call), that the copy gives
// the collective's result, and that in place it has nothing to do.
func TestCopyPlanOneRank(t *testing.T) {
	for _, c := range oneRankCases() {
		p, err := c.Program()
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		segs, ok := copyPlan(p, 0)
		if !ok {
			t.Errorf("%s: not a copy", c)
			continue
		}
		es := int64(c.Dtype.Size())
		wantSegs := 1
		if p.InCount == 0 {
			wantSegs = 0
		}
		if len(segs) != wantSegs {
			t.Errorf("%s: %d copies %+v, want %d", c, len(segs), segs, wantSegs)
		}
		if wantSegs == 1 && (segs[0] != copySeg{0, 0, p.InCount * es} || p.OutCount != p.InCount) {
			t.Errorf("%s: copies %+v of %d/%d elements, want the whole buffer", c, segs, p.InCount, p.OutCount)
		}
		in := conformance.Inputs(c, p)
		out := bytes.Repeat([]byte{0xa5}, int(p.OutCount*es))
		if err := applyCopies(segs, in[0], out); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		want, _ := conformance.Expected(c, p)
		if !bytes.Equal(out, want[0]) {
			t.Errorf("%s: the copies do not give the expected output", c)
		}
		const buf = cuda.DevicePtr(1 << 40)
		for _, s := range segs {
			if dst, src := s.addrs(buf, buf); dst != src {
				t.Errorf("%s: in place, copy %+v moves %#x to %#x", c, s, src, dst)
			}
			if dst, src := s.addrs(buf, buf+1<<30); dst == src {
				t.Errorf("%s: out of place, copy %+v has nothing to do", c, s)
			}
		}
	}
}

// TestCopyPlanNotCopy checks that calls that talk to peers or change
// values keep the kernel, and that a rank of a larger job whose part is a
// send to itself gets a copy.
func TestCopyPlanNotCopy(t *testing.T) {
	for _, n := range []int{2, 3} {
		for _, cb := range append(conformance.Combos(), conformance.P2PCombos()...) {
			c := conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
				Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: n, NChannels: 2, Count: 1021}
			p, err := c.Program()
			if err != nil {
				t.Fatalf("%s: %v", c, err)
			}
			for r := 0; r < n; r++ {
				if segs, ok := copyPlan(p, r); ok && len(segs) > 0 {
					t.Errorf("%s rank %d: a copy launch %+v", c, r, segs)
				}
			}
		}
	}
	// A post op that divides: avg over two ranks.
	p := &model.Program{Coll: model.CollAllReduce, Dtype: model.DtypeFP32, Op: model.RedAvg, NRanks: 2, Count: 4, InCount: 4, OutCount: 4,
		Lanes: []model.ProgLane{{Rank: 0, Ops: []model.ProgOp{{Kind: model.PrimCopy, Flags: model.PrimPostOp, N: 4}}}}}
	if _, ok := copyPlan(p, 0); ok {
		t.Error("avg over 2 ranks: a copy launch")
	}
	p.NRanks = 1
	if segs, ok := copyPlan(p, 0); !ok || len(segs) != 1 || segs[0] != (copySeg{0, 0, 16}) {
		t.Errorf("avg over 1 rank: copies %+v, %v", segs, ok)
	}
	p.Lanes[0].Ops[0].Flags = model.PrimFromOutput
	if _, ok := copyPlan(p, 0); ok {
		t.Error("a copy from the output: a copy launch")
	}
	// Rank 0 of 3 sends to itself while 1 and 2 exchange.
	tasks := []model.P2PTask{
		{Rank: 0, Peer: 0, Send: true, Count: 100}, {Rank: 0, Peer: 0, Count: 100},
		{Rank: 1, Peer: 2, Send: true, Count: 100}, {Rank: 2, Peer: 1, Count: 100},
		{Rank: 2, Peer: 1, Send: true, Count: 100}, {Rank: 1, Peer: 2, Count: 100},
	}
	p, err := model.GenerateP2PProgram(conformance.TestPlan(3, 2, false), tasks, model.ProtoSimple, model.DtypeInt32, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	if segs, ok := copyPlan(p, 0); !ok || len(segs) != 1 || segs[0] != (copySeg{0, 0, 400}) {
		t.Errorf("send to self in a 3-rank group: copies %+v, %v", segs, ok)
	}
	for r := 1; r < 3; r++ {
		if _, ok := copyPlan(p, r); ok {
			t.Errorf("rank %d of the 3-rank group: a copy launch", r)
		}
	}
}

// TestMergeCopies checks the joining of contiguous copies.
func TestMergeCopies(t *testing.T) {
	for _, tc := range []struct{ in, want []copySeg }{
		{nil, nil},
		{[]copySeg{{0, 0, 8}}, []copySeg{{0, 0, 8}}},
		{[]copySeg{{8, 8, 8}, {0, 0, 8}, {16, 16, 4}}, []copySeg{{0, 0, 20}}},
		{[]copySeg{{0, 0, 8}, {16, 8, 8}}, []copySeg{{0, 0, 8}, {16, 8, 8}}},
		{[]copySeg{{0, 8, 8}, {8, 0, 8}}, []copySeg{{8, 0, 8}, {0, 8, 8}}},
	} {
		if got := mergeCopies(append([]copySeg(nil), tc.in...)); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("mergeCopies(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
