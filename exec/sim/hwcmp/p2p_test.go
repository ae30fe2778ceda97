package hwcmp

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
)

// TestNCCLAlltoAll predicts NCCL's AlltoAll (the NCCL column of
// gin/a2a.json, at the tuner's p2p choice) on the H200 pair and on the
// H100 pair with the embedded calibration, which no AlltoAll row was
// fitted to (the p2p lane share is NCCL's half of a block since the
// per-block rates come from the one-channel tables). On both, LL below 1
// MiB is 2-20% fast and Simple at 2-8 MiB 16-32% slow (latency and
// per-slice costs of p2p that nothing else fits). From 128 MiB the H100
// pair is 7% slower than the H200 pair (970.8 against 909.6 us at 512
// MiB): each rank's self-copy runs at the GPU's memory bandwidth (HBM3
// against HBM3e), which the simulator, calibrated on the H200 pair, does
// not know.
func TestNCCLAlltoAll(t *testing.T) {
	for _, m := range []struct {
		dir, topo  string
		large, all [2]float64 // median, max bounds
		measured   string
	}{
		{hwDir(), "", [2]float64{0.09, 0.12}, [2]float64{0.16, 0.22}, "5.8, 6.5; all: 12.5, 16.8"},
		{h100Dir(), filepath.Join(h100Dir(), "topo.xml"), [2]float64{0.15, 0.18}, [2]float64{0.17, 0.25}, "11.7, 12.5; all: 13.2, 19.1"},
	} {
		in, err := Open(filepath.Join(m.dir, "gin", "a2a.json"))
		if err != nil {
			t.Fatal(err)
		}
		if len(in.Calls) != 14 || in.Calls[13].Bytes != 512<<20 || in.Calls[13].Count != 64<<20 || in.Calls[13].Engine != "GIN" {
			t.Fatalf("%s: %d calls, last %+v: want 14 AlltoAll calls up to 512 MiB (64 Mi elements per peer) of our GIN engine", m.dir, len(in.Calls), in.Calls[len(in.Calls)-1])
		}
		// Our column ran on GPU-initiated networking, not a p2p Program.
		if _, err := Table(in, ColOurs, nil); err == nil || !strings.Contains(err.Error(), "replay gin") {
			t.Errorf("our GIN column: error %v, want one pointing at replay gin", err)
		}
		tb, err := Table(in, ColNCCL, map[string]string{"NCCL_NVLS_ENABLE": "0"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := sim.DefaultCalib(90)
		if err != nil {
			t.Fatal(err)
		}
		var ft sim.FitTable
		if m.topo == "" {
			ft = embeddedFitTable(t, tb)
		} else {
			ft = fitTableOn(t, tb, m.topo)
		}
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		var large []sim.Comparison
		for _, r := range rows {
			if r.Coll != model.CollAlltoAll {
				t.Fatalf("row %+v is not AlltoAll", r.Measurement)
			}
			if r.Bytes >= 32<<20 {
				large = append(large, r)
			}
			t.Logf("%s: %10d %-6s %2d  NCCL %9.2f us  sim %9.2f us  %+6.1f%%", filepath.Base(m.dir), r.Bytes, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
		}
		for _, b := range []struct {
			name  string
			rows  []sim.Comparison
			bound [2]float64
		}{{">= 32 MiB", large, m.large}, {"all sizes", rows, m.all}} {
			med, mx := sim.ErrorStats(b.rows)
			if len(b.rows) == 0 || med > b.bound[0] || mx > b.bound[1] {
				t.Errorf("%s: NCCL AlltoAll, %s: median %.1f%% max %.1f%% over %d rows, bounds %.0f%%/%.0f%% (measured %s)",
					filepath.Base(m.dir), b.name, 100*med, 100*mx, len(b.rows), 100*b.bound[0], 100*b.bound[1], m.measured)
			}
		}
	}
}

// fitTableOn searches the topology file under the table's settings and
// makes the table ready to simulate.
func fitTableOn(t testing.TB, tb *sim.Table, file string) sim.FitTable {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.SearchTable(root, file, 1, tb)
	if err != nil {
		t.Fatal(err)
	}
	return sim.NewFitTable(tb, res)
}
