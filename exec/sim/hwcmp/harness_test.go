package hwcmp

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/twinccl/twinccl/exec/sim"
)

// TestRunGPUHarness recomputes the embedded calibration's cost of the run
// gpu harness (harness_us.run-gpu, measured, not fitted): the median,
// over the calls of 8 B to 8 KiB, of NCCL's column of our 2x H200
// recordings minus the same calls of the baseline table, timed by
// another harness with another build of NCCL on the same machine. It
// also checks that only NCCL's column of a recording pays it.
func TestRunGPUHarness(t *testing.T) {
	base := filepath.Join(hwDir(), "..", "..", "..", "..", "shared", "baselines", "h200x2-nvswitch", "nccl-2.28.9-p2p.tsv")
	if _, err := os.Stat(base); err != nil {
		t.Skipf("baseline table not available: %v", err)
	}
	ms, err := sim.ReadMeasurementsFile(base)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		coll  string
		bytes int64
	}
	baseUs := map[key]float64{}
	for _, m := range ms {
		baseUs[key{m.Coll.String(), m.Bytes}] = m.MeanUs
	}
	var diffs []float64
	for _, name := range []string{"p2p-allreduce", "p2p-allgather", "p2p-reducescatter", "p2p-broadcast"} {
		in, err := Open(filepath.Join(h200FirstDir(), name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range in.Calls {
			if b, ok := baseUs[key{c.Coll.String(), c.Bytes}]; ok && c.Bytes <= 8192 && c.NCCLUs > 0 {
				diffs = append(diffs, c.NCCLUs-b)
			}
		}
		for _, col := range []string{ColNCCL, ColOurs} {
			tb, err := Table(in, col, nil)
			if err != nil {
				t.Fatal(err)
			}
			want := sim.HarnessNCCLTests
			if col == ColNCCL {
				want = sim.HarnessRunGPU
			}
			if tb.Harness != want {
				t.Errorf("%s column %s: harness %q, want %q", name, col, tb.Harness, want)
			}
		}
	}
	if len(diffs) != 24 {
		t.Fatalf("%d calls of 8 B to 8 KiB in both, want 24", len(diffs))
	}
	sort.Float64s(diffs)
	median := (diffs[11] + diffs[12]) / 2
	c, err := sim.DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HarnessUs[sim.HarnessRunGPU]; got < median-0.01 || got > median+0.01 {
		t.Errorf("harness_us.run-gpu is %.3f us, the recordings give %.3f us", got, median)
	}
}
