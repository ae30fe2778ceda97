package sim

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twinccl/twinccl/model"
)

// TestScaleH100 measures the step-accurate engine on TWINCCL_SIM_TWINCCL_SIM_SCALE_NODES
// nodes of 8 H100 (1 GiB ring Simple AllReduce); skipped when unset.
func TestScaleH100(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TWINCCL_SIM_SCALE_NODES"))
	if n == 0 {
		t.Skip()
	}
	s := newSim(t, loadSearch(t, h100XML(t), n), nil)
	t0 := time.Now()
	p, cr, err := s.Program(Call{Coll: model.CollAllReduce, Count: 1 << 28, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple})
	if err != nil {
		t.Fatal(err)
	}
	tg := time.Since(t0)
	r, err := s.Machine.Run(p)
	if err != nil {
		t.Fatal(err)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	t.Logf("nodes %d ranks %d ch %d ops %d: gen %v run %v events %d (%.1f M/s) sim %.1f us, heap sys %d MB", n, p.NRanks, cr.NChannels, p.NumOps(), tg, time.Since(t0)-tg, r.Events, float64(r.Events)/(time.Since(t0)-tg).Seconds()/1e6, r.TimeUs, ms.Sys>>20)
}
