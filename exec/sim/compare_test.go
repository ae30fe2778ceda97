package sim

import (
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// compareRows is a table of every collective of the embedded machine at
// sizes from one slice to many channels (the measured times only set the
// errors).
func compareRows() []Measurement {
	var ms []Measurement
	line := 1
	for _, c := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter,
		model.CollBroadcast, model.CollReduce, model.CollAlltoAll} {
		for b := int64(8); b <= 64<<20; b *= 16 {
			ms = append(ms, Measurement{Coll: c, Bytes: b, MeanUs: 10 + float64(b)/1e5, Line: line})
			line++
		}
	}
	return ms
}

// TestCompareWorkers checks that Compare gives the same rows, in the same
// order, on one worker and on several (each on a Machine of its own), and
// that a bad row fails the whole table with its line.
func TestCompareWorkers(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	ms := compareRows()
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	one, err := s.Compare(ms)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GOMAXPROCS(4)
	many, err := s.Compare(ms)
	if err != nil {
		t.Fatal(err)
	}
	if len(one) != len(ms) || len(many) != len(ms) {
		t.Fatalf("rows: %d on one worker, %d on four, want %d", len(one), len(many), len(ms))
	}
	for i := range ms {
		a, b := one[i], many[i]
		if a.Line != ms[i].Line || b.Line != ms[i].Line {
			t.Fatalf("row %d: lines %d and %d, want %d", i, a.Line, b.Line, ms[i].Line)
		}
		if a.SimUs != b.SimUs || a.Algo != b.Algo || a.Proto != b.Proto || a.NChannels != b.NChannels {
			t.Errorf("%s %d B: one worker %s/%s/%d %.4f us, four workers %s/%s/%d %.4f us",
				ms[i].Coll, ms[i].Bytes, a.Algo, a.Proto, a.NChannels, a.SimUs, b.Algo, b.Proto, b.NChannels, b.SimUs)
		}
	}
	// The small rows run single-slice calls, the large ones every channel:
	// a table that collapsed to one behaviour would not test much.
	if one[0].SimUs >= one[len(compareRows())/6-1].SimUs {
		t.Errorf("AllReduce 8 B (%.2f us) is not faster than 64 MiB (%.2f us)", one[0].SimUs, one[len(compareRows())/6-1].SimUs)
	}

	// Two bad rows: the error is the first one's in the table, although
	// the workers start with the larger row.
	bad := append([]Measurement(nil), ms...)
	bad[3] = Measurement{Coll: model.CollAllGather, Bytes: 6, MeanUs: 1, Line: 99}          // 1.5 floats per rank
	bad[9] = Measurement{Coll: model.CollAllGather, Bytes: 1<<20 + 4, MeanUs: 1, Line: 100} // odd floats
	for i := 0; i < 5; i++ {
		if _, err := s.Compare(bad); err == nil || !strings.Contains(err.Error(), "line 99") {
			t.Fatalf("rows of 6 and 1 MiB + 4 bytes of AllGather: got %v, want an error naming line 99", err)
		}
	}
}

// TestHarnessInPlace checks that rows timed by PyTorch run its broadcast
// in place (the root sends without copying to its output) and rows of
// nccl-tests out of place, and that the root's copy costs time (at 1 MiB,
// where the root's thread blocks set the pace; from 2 MiB on NVLink bounds
// both).
func TestHarnessInPlace(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	m := []Measurement{{Coll: model.CollBroadcast, Bytes: 1 << 20, MeanUs: 20, Line: 1}}
	run := func(inPlace bool) float64 {
		cr, err := s.RunTimed(Call{Coll: model.CollBroadcast, Count: 1 << 18, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, InPlace: inPlace}, false)
		if err != nil {
			t.Fatal(err)
		}
		return cr.TimeUs
	}
	in, out := run(true), run(false)
	if in >= out {
		t.Fatalf("1 MiB Broadcast: %.3f us in place, %.3f us out of place: the root's copy should cost", in, out)
	}
	for _, h := range []string{HarnessNCCLTests, HarnessPyTorch} {
		s.Harness = h
		rows, err := s.Compare(m)
		if err != nil {
			t.Fatal(err)
		}
		want := out
		if h == HarnessPyTorch {
			want = in
		}
		if got := rows[0].SimUs - s.Machine.calib.HarnessUs[h]; math.Abs(got-want) > 1e-9 {
			t.Errorf("harness %q: Broadcast row %.3f us, want %.3f (in place %.3f, out of place %.3f)", h, got, want, in, out)
		}
	}
}

// TestDisturbedReps: a row timed by the median of its repetitions is
// disturbed when that median is more than DisturbedRatio above the best,
// with an even count's median the mean of the middle two; none is not.
func TestDisturbedReps(t *testing.T) {
	for _, c := range []struct {
		reps []float64
		want bool
	}{
		{nil, false},
		{[]float64{10, 11, 12, 10, 11}, false},
		{[]float64{10, 14, 15, 16, 13}, true},      // median 14
		{[]float64{10, 12.5, 12.5, 13, 12}, false}, // median 12.5: 1.25x exactly
		{[]float64{16, 10, 14, 12}, true},          // median 13
		{[]float64{16, 10, 10, 12}, false},         // median 11
	} {
		if got := DisturbedReps(c.reps); got != c.want {
			t.Errorf("%v: disturbed %v, want %v", c.reps, got, c.want)
		}
	}
}
