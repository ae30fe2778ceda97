package sim

import (
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestGPUCopyShared: with a copy throughput that a GPU's blocks share
// (Simple gpu_copy_GBps), a call whose blocks are bound by their own rate
// slows down when it runs on many channels, stays as it was on one
// channel, and p2p Programs (AlltoAll) are left alone.
func TestGPUCopyShared(t *testing.T) {
	res := loadSearch(t, "", 1)
	base, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	run := func(gpu float64, c Call) float64 {
		cal := *base
		cal.Simple.GPUCopyGBps = gpu
		cal.Simple.P2PLaneShare = 0
		s := newSim(t, res, &cal)
		cr, err := s.RunTimed(c, false)
		if err != nil {
			t.Fatal(err)
		}
		return cr.TimeUs
	}
	simple := func(coll model.Collective, count int64, nch int) Call {
		return Call{Coll: coll, Count: count, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: nch}
	}
	// 24 channels of 64 KiB each: far from NVLink's bound, so the blocks
	// set the pace. A shared 200 GB/s leaves each block a third of its
	// own rate.
	many := simple(model.CollAllGather, 24*64<<10/4, 24)
	free, shared := run(0, many), run(200, many)
	if !(shared > free*1.3) {
		t.Errorf("AllGather on 24 channels: %.2f us without a shared limit, %.2f us with 200 GB/s shared: want it slower", free, shared)
	}
	// One channel: 200 GB/s is above one block's rate.
	one := simple(model.CollAllGather, 1<<20/4, 1)
	if a, b := run(0, one), run(200, one); a != b {
		t.Errorf("AllGather on one channel: %.3f us without, %.3f us with the shared limit: want equal", a, b)
	}
	a2a := Call{Coll: model.CollAlltoAll, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: model.ProtoSimple}
	if a, b := run(0, a2a), run(200, a2a); a != b {
		t.Errorf("AlltoAll: %.3f us without, %.3f us with the shared limit: p2p Programs should not take it", a, b)
	}
}

// TestGPUCopyIdentified: the fit frees Simple's gpu_copy_GBps only when
// the tables run the same call on two channel counts.
func TestGPUCopyIdentified(t *testing.T) {
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	has := func(names ...string) bool {
		var fts []FitTable
		for _, n := range names {
			tb, res := loadH100Table(t, n)
			fts = append(fts, NewFitTable(tb, res))
		}
		return fitsParam(t, c, "simple.gpu_copy_GBps", fts...)
	}
	if has("simple-nch-1") {
		t.Error("one channel count: simple.gpu_copy_GBps freed")
	}
	if !has("simple-nch-1", "simple-nch-4") {
		t.Error("one and four channels: simple.gpu_copy_GBps not freed")
	}
}
