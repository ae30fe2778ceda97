package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// TestHostLoadRoundTrip: host_load_us is paid once per slice by a lane
// that receives from host memory, and by no other. On two GPUs with P2P
// disabled (SHM through host memory) a one-slice LL Broadcast, whose one
// receiver loads one slice, takes one round trip longer; an AllReduce,
// whose ranks each receive twice in sequence (reduce-scatter, then
// all-gather), two; over P2P nothing changes.
func TestHostLoadRoundTrip(t *testing.T) {
	base, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	const rtt = 3.0 // us, far above the calibration's own
	simulate := func(env map[string]string, coll model.Collective, hostUs float64) float64 {
		t.Helper()
		cal := base.Clone()
		cal.LL.HostLoadUs = hostUs
		return simulate8B(t, env, coll, Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL}, cal)
	}
	for _, tc := range []struct {
		env   map[string]string
		coll  model.Collective
		trips float64
	}{
		{shmEnv, model.CollBroadcast, 1},
		{shmEnv, model.CollAllReduce, 2},
		{nil, model.CollBroadcast, 0},
		{nil, model.CollAllReduce, 0},
	} {
		without, with := simulate(tc.env, tc.coll, 0), simulate(tc.env, tc.coll, rtt)
		if d, want := with-without, tc.trips*rtt; math.Abs(d-want) > 0.05*rtt {
			t.Errorf("%v LL 8 B (settings %v): %.3f us without host_load_us, %.3f us with %.1f us: %+.3f us, want %+.1f (%g round trips)",
				tc.coll, tc.env, without, with, rtt, d, want, tc.trips)
		}
	}
}

// TestHostFence: host_fence_us is paid by a Simple slice with data that a
// lane stores into host memory, before it posts. On two GPUs with P2P
// disabled a ring AllGather of 8 B (each rank sends one slice, then
// receives its peer's) takes one fence longer and a ring AllReduce (two
// sends in sequence on each rank) two; LL, which posts no tail, and P2P
// connections do not pay it.
func TestHostFence(t *testing.T) {
	// Per-call costs that a rank pays while its peer fences would hide
	// part of the fence: none here.
	base := quietCalib(t)
	const fence = 3.0 // us, far above a PCIe round trip
	simulate := func(env map[string]string, coll model.Collective, proto model.Protocol, fenceUs float64) float64 {
		t.Helper()
		cal := base.Clone()
		cal.Proto(proto).HostFenceUs = fenceUs
		return simulate8B(t, env, coll, Recorded{Algo: model.AlgoRing, Proto: proto, NChannels: 1}, cal)
	}
	for _, tc := range []struct {
		env    map[string]string
		coll   model.Collective
		proto  model.Protocol
		fences float64
	}{
		{shmEnv, model.CollAllGather, model.ProtoSimple, 1},
		{shmEnv, model.CollAllReduce, model.ProtoSimple, 2},
		{shmEnv, model.CollAllGather, model.ProtoLL, 0},
		{nil, model.CollAllGather, model.ProtoSimple, 0},
	} {
		without, with := simulate(tc.env, tc.coll, tc.proto, 0), simulate(tc.env, tc.coll, tc.proto, fence)
		if d, want := with-without, tc.fences*fence; math.Abs(d-want) > 0.05*fence {
			t.Errorf("%v %v 8 B (settings %v): %.3f us without host_fence_us, %.3f us with %.1f us: %+.3f us, want %+.1f (%g fences)",
				tc.coll, tc.proto, tc.env, without, with, fence, d, want, tc.fences)
		}
	}
}

// TestHostRounds: an LL slice received from host memory pays
// host_round_us for every round of loads after its first, a round being
// one line (8 data bytes) per thread of the block: NCCL's thread count
// for the call (Program.Threads, which NCCL halves on small calls), or
// the calibration's fixed one with host_round_lines lines per thread
// where the slice has that many for every thread (twinccl's kernel). A
// one-channel LL Broadcast over SHM on two GPUs has one receiving slice:
// NCCL runs 384 B on 96 threads (48 lines, one round), 2 KiB and 3 KiB on
// 128 (two and three rounds); a 512-thread block loading 4 lines at once
// takes 12 KiB in three rounds (1536 lines: fewer than 4 per thread) and
// 16 KiB in one. Over P2P nothing changes.
func TestHostRounds(t *testing.T) {
	base, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	const round = 2.0 // us
	nccl := func(c *Calib) {}
	ours := func(c *Calib) { c.LL.Threads, c.LL.HostRoundLines = 512, 4 }
	for _, tc := range []struct {
		env    map[string]string
		bytes  int64
		setup  func(*Calib)
		rounds float64
	}{
		{shmEnv, 384, nccl, 1},
		{shmEnv, 2048, nccl, 2},
		{shmEnv, 3072, nccl, 3},
		{nil, 3072, nccl, 1},
		{shmEnv, 3072, ours, 1},
		{shmEnv, 12288, ours, 3},
		{shmEnv, 16384, ours, 1},
	} {
		setup := base.Clone()
		tc.setup(setup)
		simulate := func(roundUs float64) float64 {
			cal := setup.Clone()
			cal.LL.HostRoundUs = roundUs
			return simulateBytes(t, tc.env, model.CollBroadcast, tc.bytes, Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 1}, cal)
		}
		without, with := simulate(0), simulate(round)
		if d, want := with-without, (tc.rounds-1)*round; math.Abs(d-want) > 0.05*round {
			t.Errorf("Broadcast LL %d B (settings %v, threads %d): %.3f us without host_round_us, %.3f us with %.1f us: %+.3f us, want %+.1f (%g rounds)",
				tc.bytes, tc.env, setup.LL.Threads, without, with, round, d, want, tc.rounds)
		}
	}
}

// simulate8B simulates one call of coll on 8 bytes at the recorded
// decisions rec under the settings env and the calibration cal, on the
// H200 pair's topology (with the H100s' PCI ids), as calibrate does.
func simulate8B(t *testing.T, env map[string]string, coll model.Collective, rec Recorded, cal *Calib) float64 {
	t.Helper()
	return simulateBytes(t, env, coll, 8, rec, cal)
}

// shmEnv is the setting that takes two GPUs of one host off P2P onto SHM
// (read only: tests share it).
var shmEnv = map[string]string{"NCCL_P2P_DISABLE": "1"}

// simulateBytes is simulate8B on a call of the given size.
func simulateBytes(t *testing.T, env map[string]string, coll model.Collective, bytes int64, rec Recorded, cal *Calib) float64 {
	t.Helper()
	tb := &Table{Name: "t.tsv", Env: env, Harness: HarnessNCCLTests,
		Rows: []Measurement{{Coll: coll, Bytes: bytes, MeanUs: 1, Line: 1, Recorded: &rec}}}
	ft := NewFitTable(tb, searchOn(t, h100x2Topo(), 1, tb))
	rows, err := ft.Compare(cal)
	if err != nil {
		t.Fatal(err)
	}
	return rows[0].SimUs
}

// TestEmptySlice: empty_slice_us is paid by a Simple slice without data
// on a lane through SHM host memory, and by no other. A one-channel ring
// call of 4 KiB on two GPUs gives each primitive one slice with data and
// one without (Simple cuts a chunk into two slices of at least 32 KiB):
// an AllGather over SHM runs a send and a receive on each rank, two empty
// slices in sequence, an AllReduce a send, a receive-reduce-send and a
// receive, three; a Broadcast cuts its chunks into one slice, none. LL
// has no empty slices, P2P lanes do not pay it.
func TestEmptySlice(t *testing.T) {
	const empty = 3.0 // us
	searches := map[bool]*search.Result{false: loadSearch(t, "", 1), true: loadSearchEnv(t, "", 1, shmEnv)}
	for _, tc := range []struct {
		shm    bool
		coll   model.Collective
		proto  model.Protocol
		slices float64
	}{
		{true, model.CollAllGather, model.ProtoSimple, 2},
		{true, model.CollAllReduce, model.ProtoSimple, 3},
		{true, model.CollBroadcast, model.ProtoSimple, 0},
		{true, model.CollAllGather, model.ProtoLL, 0},
		{false, model.CollAllReduce, model.ProtoSimple, 0},
	} {
		kernel := func(emptyUs float64) float64 {
			c := quietCalib(t)
			c.Proto(tc.proto).EmptySliceUs = emptyUs
			// No latency on the way: a receive that follows the lane's
			// empty slice would otherwise have waited part of it for its
			// peer's post anyway.
			c.SHMLatencyUs, c.Proto(tc.proto).HostPostUs = 0, 0
			for k, l := range c.Links {
				l.LatencyUs = 0
				c.Links[k] = l
			}
			s := newSim(t, searches[tc.shm], c)
			p, _, err := s.Program(Call{Coll: tc.coll, Count: 1024, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: tc.proto, NChannels: 1})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Machine.Run(p)
			if err != nil {
				t.Fatal(err)
			}
			return r.KernelUs
		}
		if d, want := kernel(empty)-kernel(0), tc.slices*empty; math.Abs(d-want) > 0.05*empty {
			t.Errorf("%v %v 4 KiB (SHM %v): empty_slice_us %.1f us adds %+.3f us, want %+.1f (%g slices)",
				tc.coll, tc.proto, tc.shm, empty, d, want, tc.slices)
		}
	}
}

// TestSHMReadLeg: with shm_read_leg a SHM connection's bytes cross the
// same links as without it (conservation), but the receiver's loads cross
// its own way from host memory when it receives. Where PCIe is all that
// limits (every per-byte and per-slice cost taken away), a ring AllGather
// over SHM, whose ranks each store their chunk into host memory and then
// load the peer's, takes one chunk's time on the link without the leg
// (both ranks' stores cross both links at once, the loads are free) and
// two with it (the loads follow the stores).
func TestSHMReadLeg(t *testing.T) {
	res := loadSearchEnv(t, "", 1, shmEnv)
	base := quietCalib(t)
	for _, pc := range []*ProtoCalib{&base.LL, &base.LL128, &base.Simple} {
		pc.CopyGBps, pc.GPUCopyGBps = 1e5, 0
		pc.StartUs, pc.OpOverheadUs, pc.SliceOverheadUs, pc.HostLoadUs, pc.HostFenceUs, pc.HostRoundUs = 0, 0, 0, 0, 0, 0
	}
	base.HostMemGBps, base.SHMCopyGBps, base.SHMLatencyUs = 1e5, 1e5, 0
	kernel := map[bool]float64{}
	for _, leg := range []bool{false, true} {
		c := base.Clone()
		c.SHMReadLeg = leg
		s := newSim(t, res, c)
		for _, call := range []Call{
			{Coll: model.CollAllReduce, Count: 3<<20 + 17, Algo: model.AlgoRing, Proto: model.ProtoSimple},
			{Coll: model.CollAllReduce, Count: 100000, Algo: model.AlgoRing, Proto: model.ProtoLL},
			{Coll: model.CollBroadcast, Count: 5 << 20, Algo: model.AlgoRing, Proto: model.ProtoSimple},
		} {
			call.Dtype = model.DtypeFP32
			p, _, err := s.Program(call)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Machine.Run(p)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(fmt.Sprintf("leg=%v/%v/%v", leg, call.Coll, call.Proto), func(t *testing.T) { checkConservation(t, s, p, r) })
		}
		p, _, err := s.Program(Call{Coll: model.CollAllGather, Count: 8 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Machine.Run(p)
		if err != nil {
			t.Fatal(err)
		}
		kernel[leg] = r.KernelUs
	}
	if ratio := kernel[true] / kernel[false]; ratio < 1.8 || ratio > 2.1 {
		t.Errorf("link-bound SHM AllGather: %.1f us with the read leg, %.1f without: ratio %.2f, want about 2 (loads after stores)",
			kernel[true], kernel[false], ratio)
	}
}

// TestSimpleHostPasses: a Simple slice received from SHM host memory pays
// host_round_us for every pass of its worker warps' hunks after the first
// (4 KiB hunks, then 512 B ones, over the block's warps less one), as far
// as its copy does not cover it. A two-rank AllGather over SHM receives
// half its size on each rank; up to 7 KiB NCCL gives it 96 threads, two
// worker warps: 1 KiB received is two small hunks, one pass; 2 KiB four,
// two passes; 3.5 KiB seven, four passes; 4 KiB one big hunk, one pass.
// With the copy made fast, each further pass adds host_round_us to every
// call. An AllGather of 8 MiB (its copy far longer than its passes'
// reads) takes no longer.
func TestSimpleHostPasses(t *testing.T) {
	const round = 3.0
	ring := Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1}
	extra := func(bytes int64, fast bool) float64 {
		time := func(us float64) float64 {
			c := quietCalib(t)
			c.Simple.HostRoundUs = us
			if fast {
				c.Simple.CopyGBps, c.Simple.HostLoadCost, c.Simple.HostStoreCost = 1e4, 0.05, 0.05
			}
			return simulateBytes(t, shmEnv, model.CollAllGather, bytes, ring, c)
		}
		return time(round) - time(0)
	}
	for _, tc := range []struct {
		bytes  int64
		passes float64
	}{{2048, 1}, {4096, 2}, {7168, 4}, {8192, 1}} {
		if got, want := extra(tc.bytes, true), (tc.passes-1)*round; math.Abs(got-want) > 0.05*round {
			t.Errorf("AllGather %d B over SHM: host_round_us %.0f adds %.3f us, want %.1f (%g passes)", tc.bytes, round, got, want, tc.passes)
		}
	}
	if got := extra(8<<20, false); math.Abs(got) > 0.05*round {
		t.Errorf("AllGather 8 MiB over SHM: host_round_us %.0f adds %.3f us, want 0 (its copy covers the passes)", round, got)
	}
}
