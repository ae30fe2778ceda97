package sim

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestHostMemFor: host memory's bandwidth under its cache is the cache's
// while the footprint fits, the harmonic blend of the two beyond, tends
// to host memory's own as the footprint grows, and is host memory's when
// the calibration has no cache.
func TestHostMemFor(t *testing.T) {
	c := &Calib{HostMemGBps: 150, HostCacheMiB: 16, HostCacheGBps: 600}
	const mib = 1 << 20
	for _, tc := range []struct {
		footprint float64
		want      float64
	}{
		{0, 150}, // no staged connection: nothing to cache
		{1 * mib, 600},
		{16 * mib, 600},
		{32 * mib, 1 / (0.5/600 + 0.5/150)},
		{64 * mib, 1 / (0.25/600 + 0.75/150)},
	} {
		if got := c.hostMemFor(tc.footprint); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("footprint %.0f MiB: %.3f GB/s, want %.3f", tc.footprint/mib, got, tc.want)
		}
	}
	if got := c.hostMemFor(1 << 50); got < 150 || got > 150.01 {
		t.Errorf("a footprint far beyond the cache: %.3f GB/s, want host memory's 150", got)
	}
	off := &Calib{HostMemGBps: 150}
	if got := off.hostMemFor(1 * mib); got != 150 {
		t.Errorf("no cache: %.3f GB/s, want 150", got)
	}
	noRate := &Calib{HostMemGBps: 150, HostCacheMiB: 16}
	if got := noRate.hostMemFor(1 * mib); got != 150 {
		t.Errorf("a cache without a rate of its own: %.3f GB/s, want host memory's 150", got)
	}
}

// TestHostCacheFootprint: a call's host memory runs at the rate its SHM
// buffers' footprint gives. On four H100 with P2P disabled, a Ring
// AllGather on four channels has 16 SHM connections, each a ring of
// NCCL_STEPS slots of NCCL's default 4 MiB buffer: a 192 KiB call fills a
// sliver of each slot (at most 2 MiB in all: the cache's rate), a 96 MiB
// one every slot (16 x 4 MiB = 64 MiB), in the step-accurate and in the
// fast engine alike.
func TestHostCacheFootprint(t *testing.T) {
	file := filepath.Join(repoRoot(), "testdata", "hw", "h100x4", "shm", "topo.xml")
	res := loadSearchEnv(t, file, 1, shmEnv)
	c := quietCalib(t)
	c.HostMemGBps, c.HostCacheMiB, c.HostCacheGBps = 150, 16, 600
	const buffer = 4 << 20 // NCCL_BUFFSIZE's default: 8 slots of 512 KiB
	for _, tc := range []struct {
		bytes int64
		want  float64
	}{
		{192 << 10, 600},
		{96 << 20, c.hostMemFor(16 * buffer)},
	} {
		for _, mode := range []Mode{ModeAccurate, ModeFast} {
			s := newSim(t, res, c)
			s.Mode = mode
			r, err := s.Run(Call{Coll: model.CollAllGather, Count: tc.bytes / 4 / 4, Dtype: model.DtypeFP32,
				Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 4})
			if err != nil {
				t.Fatal(err)
			}
			if r.NChannels != 4 {
				t.Fatalf("%d B: %d channels, want 4", tc.bytes, r.NChannels)
			}
			var mem []LinkStats
			for _, l := range r.Links {
				if l.Type == "MEM" {
					mem = append(mem, l)
				}
			}
			if len(mem) != 1 {
				t.Fatalf("%d B (%v): %d host memories, want 1", tc.bytes, mode, len(mem))
			}
			if got := mem[0].CapGBps; math.Abs(got-tc.want) > 1e-6*tc.want {
				t.Errorf("%d B (%v): host memory at %.3f GB/s, want %.3f", tc.bytes, mode, got, tc.want)
			}
		}
	}
}

// TestHostReduceCost: simple.host_reduce_cost slows a reduction whose
// source is in host memory and nothing else. Over SHM a two-GPU Ring
// AllReduce of 64 MiB (receive-reduce steps from host memory) gets slower
// and its AllGather does not move; over P2P neither moves.
func TestHostReduceCost(t *testing.T) {
	rec := Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple}
	for _, tc := range []struct {
		env    map[string]string
		coll   model.Collective
		slower bool
	}{
		{shmEnv, model.CollAllReduce, true},
		{shmEnv, model.CollAllGather, false},
		{nil, model.CollAllReduce, false},
	} {
		d := delta(t, tc.env, tc.coll, 64<<20, rec, func(c *Calib) { c.Simple.HostReduceCost = 5 })
		if tc.slower && d < 100 || !tc.slower && d != 0 {
			t.Errorf("%v 64 MiB (settings %v): %+.2f us with host_reduce_cost 5, want slower: %v", tc.coll, tc.env, d, tc.slower)
		}
	}
}
