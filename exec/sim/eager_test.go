package sim

import (
	"sort"
	"testing"
)

// TestHostCallUs recomputes the embedded calibration's host_call_us
// (measured, not fitted) from the baseline table's eager column: the
// median eager time of the calls of 8 B to 8 KiB, which the GPU runs in
// less time (so that the host's issue rate is all their eager loop
// shows), each of which the simulator runs in less than that in a graph.
func TestHostCallUs(t *testing.T) {
	tb := baselineTable(t)
	var small []float64
	s := newSim(t, loadSearch(t, "", 1), nil)
	for _, m := range tb.Rows {
		if m.Bytes > 8192 {
			continue
		}
		small = append(small, m.EagerUs)
		rows, err := s.Compare([]Measurement{m})
		if err != nil {
			t.Fatal(err)
		}
		if gpu := rows[0].SimUs; gpu >= s.Machine.calib.HostCallUs {
			t.Errorf("%s %d B: %.2f us a call in a graph, not below host_call_us %.2f", m.Coll, m.Bytes, gpu, s.Machine.calib.HostCallUs)
		}
	}
	if len(small) != 24 {
		t.Fatalf("%d rows of 8 B to 8 KiB, want 24", len(small))
	}
	sort.Float64s(small)
	median := (small[11] + small[12]) / 2
	if h := s.Machine.calib.HostCallUs; h < median-0.01 || h > median+0.01 {
		t.Errorf("host_call_us is %.3f us, the eager column gives %.3f us", h, median)
	}
}
