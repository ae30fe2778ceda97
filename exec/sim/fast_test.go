package sim

import (
	"math"
	"reflect"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestFastAgreesWithAccurate runs the same calls step-accurate and folded
// (fast mode) on several multi-host topologies, collectives, protocols and
// sizes, and requires the predicted times to agree within 2%.
func TestFastAgreesWithAccurate(t *testing.T) {
	type tc struct {
		name  string
		file  string
		nodes int
	}
	topos := []tc{
		{"h200x2-4nodes", "", 4},
		{"h100x8-2nodes", h100XML(t), 2},
		{"h100x8-4nodes", h100XML(t), 4},
	}
	colls := []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter}
	protos := []model.Protocol{model.ProtoSimple, model.ProtoLL128, model.ProtoLL}
	sizes := []int64{64 << 10, 4 << 20, 64 << 20, 3<<20 + 4096} // the last does not split evenly into chunks
	worst := 0.0
	folded := 0
	for _, tp := range topos {
		res := loadSearch(t, tp.file, tp.nodes)
		acc := newSim(t, res, nil)
		fast := newSim(t, res, nil)
		fast.Mode = ModeFast
		n := res.Cluster.NRanks
		for _, coll := range colls {
			for _, proto := range protos {
				for _, bytes := range sizes {
					if proto == model.ProtoLL && bytes > 4<<20 {
						continue
					}
					count, err := CountOf(coll, bytes/int64(4*n)*int64(4*n), model.DtypeFP32, n)
					if err != nil {
						t.Fatal(err)
					}
					c := Call{Coll: coll, Count: count, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: proto}
					a, err := acc.Run(c)
					if err != nil {
						t.Fatal(err)
					}
					f, err := fast.Run(c)
					if err != nil {
						t.Fatal(err)
					}
					if f.Folded == 0 {
						t.Errorf("%s %s %s %d: not folded", tp.name, coll, proto, bytes)
						continue
					}
					folded++
					e := math.Abs(f.TimeUs-a.TimeUs) / a.TimeUs
					worst = max(worst, e)
					t.Logf("%-14s %-13s %-6s %9d  accurate %10.2f us  fast %10.2f us  err %.3f%%  events %d -> %d",
						tp.name, coll, proto, bytes, a.TimeUs, f.TimeUs, 100*e, a.Events, f.Events)
					if e > 0.02 {
						t.Errorf("%s %s %s %d: fast %.2f us vs accurate %.2f us (%.2f%%)", tp.name, coll, proto, bytes, f.TimeUs, a.TimeUs, 100*e)
					}
				}
			}
		}
	}
	t.Logf("%d folded calls, worst error %.3f%%", folded, 100*worst)
}

// TestStreamedEqualsMaterialised checks that streaming lanes (RunGen, with
// lanes longer than the window) gives exactly the result and the slices of
// running the materialised Program.
func TestStreamedEqualsMaterialised(t *testing.T) {
	cases := []struct {
		file  string
		nodes int
		c     Call
	}{
		{"", 1, Call{Coll: model.CollAllReduce, Count: 1 << 26, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoLL}},
		{"", 1, Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoLL128}},
		{h100XML(t), 2, Call{Coll: model.CollAllGather, Count: 1 << 20, Dtype: model.DtypeBF16, Algo: -1, Proto: -1}},
		{h100XML(t), 1, Call{Coll: model.CollBroadcast, Count: 3<<20 + 5, Dtype: model.DtypeFP32, Root: 3, Algo: -1, Proto: -1}},
	}
	long := false
	for i, tc := range cases {
		s := newSim(t, loadSearch(t, tc.file, tc.nodes), nil)
		g, _, err := s.Generator(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		p := g.Program()
		var ea []SliceEvent
		a, err := s.Machine.RunRecord(p, func(e *SliceEvent) { ea = append(ea, *e) })
		if err != nil {
			t.Fatal(err)
		}
		// The default window, and one of a few runs of calls that every
		// long lane moves many times.
		for _, w := range []int{0, 3} {
			s.Machine.streamRuns = w
			for _, l := range p.Lanes {
				runs, _ := compactOps(l.Ops, uint32(p.OpSteps()), nil, 0)
				long = long || len(runs) > s.Machine.streamWindow()
			}
			var eb []SliceEvent
			b, err := s.Machine.RunGen(g, func(e *SliceEvent) { eb = append(eb, *e) })
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("case %d window %d: streamed result differs: %.3f us vs %.3f us, %d vs %d events", i, w, b.TimeUs, a.TimeUs, b.Events, a.Events)
			}
			if !reflect.DeepEqual(ea, eb) {
				t.Errorf("case %d window %d: streamed slices differ (%d vs %d)", i, w, len(eb), len(ea))
			}
		}
		s.Machine.streamRuns = 0
	}
	if !long {
		t.Error("no case has a lane of more runs than the stream window")
	}
}
