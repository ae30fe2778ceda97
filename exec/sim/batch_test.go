package sim

import (
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestBatchedSharing checks that recomputing the sharing once per time
// (fabric.batch) gives the run that recomputing it at every flow start and
// end gives: the same times, connection traffic and link bytes, peaks
// within the links' capacity, and no more events (a rate that changes
// twice at one time leaves a stale completion event the batch avoids).
func TestBatchedSharing(t *testing.T) {
	type run struct {
		name  string
		sim   *Simulator
		call  Call
		loops int
	}
	pair := newSim(t, loadSearch(t, "", 1), nil)
	two := newSim(t, loadSearch(t, h100XML(t), 2), nil)
	var runs []run
	for _, proto := range []model.Protocol{model.ProtoSimple, model.ProtoLL, model.ProtoLL128} {
		runs = append(runs,
			run{"2x8 H100 AllReduce " + proto.String(), two, Call{Coll: model.CollAllReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: proto}, 0},
			run{"2x8 H100 AllGather " + proto.String(), two, Call{Coll: model.CollAllGather, Count: 1 << 18, Dtype: model.DtypeBF16, Algo: model.AlgoRing, Proto: proto}, 2})
	}
	runs = append(runs,
		run{"2x8 H100 AllReduce tree", two, Call{Coll: model.CollAllReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple}, 0},
		run{"H200 pair AllReduce", pair, Call{Coll: model.CollAllReduce, Count: 1 << 26, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}, 2},
		run{"H200 pair AlltoAll", pair, Call{Coll: model.CollAlltoAll, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}, 2})
	for _, r := range runs {
		r.sim.Loop = r.loops
		r.sim.Machine.unbatched = true
		want, err := r.sim.RunTimed(r.call, false)
		r.sim.Machine.unbatched = false
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		got, err := r.sim.RunTimed(r.call, false)
		if err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		if got.TimeUs != want.TimeUs || got.KernelUs != want.KernelUs || got.Slices != want.Slices {
			t.Errorf("%s: batched %.6f us (%d slices), unbatched %.6f us (%d slices)", r.name, got.TimeUs, got.Slices, want.TimeUs, want.Slices)
		}
		for i := range want.RankKernelUs {
			if got.RankKernelUs[i] != want.RankKernelUs[i] {
				t.Errorf("%s: rank %d ends at %.6f us batched, %.6f us unbatched", r.name, i, got.RankKernelUs[i], want.RankKernelUs[i])
			}
		}
		if len(got.Conns) != len(want.Conns) {
			t.Fatalf("%s: %d connections batched, %d unbatched", r.name, len(got.Conns), len(want.Conns))
		}
		for i := range want.Conns {
			if got.Conns[i] != want.Conns[i] {
				t.Errorf("%s: connection %d: batched %+v, unbatched %+v", r.name, i, got.Conns[i], want.Conns[i])
			}
		}
		if len(got.Links) != len(want.Links) {
			t.Fatalf("%s: %d links batched, %d unbatched", r.name, len(got.Links), len(want.Links))
		}
		for i, l := range want.Links {
			g := got.Links[i]
			if g.Name != l.Name || g.Bytes != l.Bytes {
				t.Errorf("%s: link %s carried %.0f bytes batched, %s %.0f unbatched", r.name, g.Name, g.Bytes, l.Name, l.Bytes)
			}
			if g.PeakGBps > g.CapGBps*(1+1e-9) {
				t.Errorf("%s: link %s peaks at %.3f GB/s over its %.3f", r.name, g.Name, g.PeakGBps, g.CapGBps)
			}
		}
		if got.Events > want.Events {
			t.Errorf("%s: %d events batched, %d unbatched", r.name, got.Events, want.Events)
		}
		t.Logf("%-28s %10.3f us  events %7d -> %7d  recomputations %6d -> %6d", r.name, got.TimeUs, want.Events, got.Events, want.Reshares, got.Reshares)
	}
}
