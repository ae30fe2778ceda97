package hwcmp

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
)

// TestNCCLAlltoAllH200x2 predicts NCCL's AlltoAll on the H200 pair (the
// NCCL column of gin/a2a.json, at the tuner's p2p choice) with the
// embedded calibration, which no AlltoAll row was fitted to (the p2p lane
// share is NCCL's half of a block since the per-block rates come from the
// one-channel tables): LL below 1 MiB is 4-20% fast and Simple at 2-8 MiB
// 28-32% slow (latency and per-slice costs of p2p that nothing else fits).
func TestNCCLAlltoAllH200x2(t *testing.T) {
	in, err := Open(filepath.Join(hwDir(), "gin", "a2a.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Calls) != 14 || in.Calls[13].Bytes != 512<<20 || in.Calls[13].Count != 64<<20 || in.Calls[13].Engine != "GIN" {
		t.Fatalf("%d calls, last %+v: want 14 AlltoAll calls up to 512 MiB (64 Mi elements per peer) of our GIN engine", len(in.Calls), in.Calls[len(in.Calls)-1])
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
	ft := embeddedFitTable(t, tb)
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
		t.Logf("%10d %-6s %2d  NCCL %9.2f us  sim %9.2f us  %+6.1f%%", r.Bytes, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
	}
	for _, b := range []struct {
		name        string
		rows        []sim.Comparison
		median, max float64
	}{
		// Held out: each direction of a p2p channel gets half its block
		// (Simple p2p_lane_share unset, NCCL's split of the warps).
		{">= 32 MiB", large, 0.07, 0.10}, // 4.4, 7.3
		{"all sizes", rows, 0.17, 0.36},  // 13.4, 32.0
	} {
		med, mx := sim.ErrorStats(b.rows)
		if len(b.rows) == 0 || med > b.median || mx > b.max {
			t.Errorf("NCCL AlltoAll, %s: median %.1f%% max %.1f%% over %d rows, bounds %.0f%%/%.0f%%",
				b.name, 100*med, 100*mx, len(b.rows), 100*b.median, 100*b.max)
		}
	}
}
