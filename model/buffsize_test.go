package model_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// TestBuffSize: a Simple collective generated for another NCCL_BUFFSIZE
// has steps of buffsize/NCCL_STEPS, so its slices (and steps) scale
// inversely with the buffer, and it still computes the right result in
// the reference interpreter; LL is unaffected, and bad sizes and p2p
// Programs are refused.
func TestBuffSize(t *testing.T) {
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, NRanks: 2, NChannels: 1, Count: 8 << 20}
	steps := map[int]uint64{}
	for _, buf := range []int{1 << 20, 0, 16 << 20} {
		p, err := model.GenerateProgram(c.Plan(), c.Coll, c.Algo, c.Proto, c.Count, c.Dtype, c.Op, model.ProgOptions{BuffSize: buf})
		if err != nil {
			t.Fatal(err)
		}
		want := model.BuffSizeSimple / model.ProgSlots
		if buf != 0 {
			want = buf / model.ProgSlots
		}
		if p.StepBytes != want {
			t.Errorf("buffsize %d: step of %d bytes, want %d", buf, p.StepBytes, want)
		}
		inputs := conformance.Inputs(c, p)
		exp, _ := conformance.Expected(c, p)
		res, err := refexec.Run(p, inputs, refexec.Options{})
		if err != nil {
			t.Fatalf("buffsize %d: %v", buf, err)
		}
		for r := range exp {
			if !bytes.Equal(res.Outputs[r], exp[r]) {
				t.Errorf("buffsize %d: rank %d's output differs from the expected result", buf, r)
			}
		}
		for _, cs := range res.Conns {
			steps[buf] += cs.Steps
		}
	}
	// 32 MiB over one channel: 1 MiB slices by default, 256 KiB ones with
	// a 1 MiB buffer, 4 MiB ones with 16 MiB.
	if steps[1<<20] != 4*steps[0] || steps[0] != 4*steps[16<<20] {
		t.Errorf("steps with 1 MiB, 4 MiB and 16 MiB buffers: %d, %d, %d; want ratios of 4", steps[1<<20], steps[0], steps[16<<20])
	}
	ll, err := model.GenerateProgram(c.Plan(), c.Coll, c.Algo, model.ProtoLL, 1<<16, c.Dtype, c.Op, model.ProgOptions{BuffSize: 1 << 20})
	if err != nil || ll.StepBytes != model.ProtoStepBytes(model.ProtoLL) {
		t.Errorf("LL under NCCL_BUFFSIZE: %v, step %d", err, ll.StepBytes)
	}
	for _, bad := range []int{1000, 8 * 512, 1 << 31} {
		_, err := model.GenerateProgram(c.Plan(), c.Coll, c.Algo, c.Proto, c.Count, c.Dtype, c.Op, model.ProgOptions{BuffSize: bad})
		if err == nil || !strings.Contains(err.Error(), "NCCL_BUFFSIZE") {
			t.Errorf("buffsize %d: %v", bad, err)
		}
	}
	_, err = model.GenerateProgram(c.Plan(), model.CollAlltoAll, model.AlgoRing, model.ProtoSimple, 1<<16, c.Dtype, c.Op, model.ProgOptions{BuffSize: 1 << 20})
	if err == nil || !strings.Contains(err.Error(), "default buffer") {
		t.Errorf("AlltoAll under NCCL_BUFFSIZE: %v", err)
	}
}
