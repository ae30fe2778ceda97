package sim

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twinccl/twinccl/model"
)

// TestScaleH100 measures the simulator on TWINCCL_SIM_SCALE_NODES nodes of
// 8 H100 (1 GiB ring Simple AllReduce) in the mode TWINCCL_SIM_SCALE_MODE
// (accurate, fast or auto; default accurate); skipped when unset.
func TestScaleH100(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TWINCCL_SIM_SCALE_NODES"))
	if n == 0 {
		t.Skip("TWINCCL_SIM_SCALE_NODES not set")
	}
	mode := ModeAccurate
	if v := os.Getenv("TWINCCL_SIM_SCALE_MODE"); v != "" {
		var err error
		if mode, err = ParseMode(v); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	s := newSim(t, loadSearch(t, h100XML(t), n), nil)
	s.Mode = mode
	tSearch := time.Since(t0)
	t1 := time.Now()
	cr, err := s.Run(Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple})
	if err != nil {
		t.Fatal(err)
	}
	run := time.Since(t1)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("mode %s nodes %d ranks %d ch %d folded %d: search %v run %v events %d (%.1f M/s) slices %d reshares %d sim %.1f us, heap sys %d MB, total alloc %d MB",
		mode, n, n*8, cr.NChannels, cr.Folded, tSearch, run, cr.Events, float64(cr.Events)/run.Seconds()/1e6, cr.Slices, cr.Reshares, cr.TimeUs, ms.Sys>>20, ms.TotalAlloc>>20)
}

// TestScaleDepthH100 checks the depth extrapolation of NCCL's default
// 1 GiB AllReduce (Tree/Simple) against a step-accurate run on
// TWINCCL_SIM_DEPTH_NODES nodes of 8 H100 (one isolated call; about 40 s
// of CPU at 64 nodes, 130 s at 128, where the step-accurate run's max-min
// sharing spans the whole cluster); skipped when unset. The extrapolation
// must fall within its own error estimate of the step-accurate time.
func TestScaleDepthH100(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TWINCCL_SIM_DEPTH_NODES"))
	if n == 0 {
		t.Skip("TWINCCL_SIM_DEPTH_NODES not set")
	}
	s := newSim(t, loadSearch(t, h100XML(t), n), nil)
	s.Loop = 0
	c := Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}
	g, cr, err := s.Generator(c)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	x, errUs, why := s.extrapolateDepth(c, g, cr)
	if x == nil {
		t.Fatal(why)
	}
	tx := time.Since(t0)
	t1 := time.Now()
	a, err := s.RunTimed(c, false)
	if err != nil {
		t.Fatal(err)
	}
	ta := time.Since(t1)
	d := x.TimeUs - a.TimeUs
	t.Logf("%d x 8 H100 %s/%s 1 GiB: accurate %.3f us (%v, %d events), extrapolated %.3f us (%v, %d events), diff %+.3f us (%+.4f%%), estimate %.3f us [%s]",
		n, a.Algo, a.Proto, a.TimeUs, ta, a.Events, x.TimeUs, tx, x.Events, d, 100*d/a.TimeUs, errUs, x.Fast)
	if math.Abs(d) > errUs+1e-6 {
		t.Errorf("extrapolation outside its estimate")
	}
}
