package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// quietCalib is the embedded calibration without the costs a call pays
// once (launch aside), so that a test can add one of them and see it
// alone.
func quietCalib(t *testing.T) *Calib {
	t.Helper()
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	for _, pc := range []*ProtoCalib{&c.LL, &c.LL128, &c.Simple} {
		pc.FirstOpUs, pc.ThreadOpUs, pc.DirectUs, pc.HostTurnUs, pc.RateThreads, pc.HostStartUs = 0, 0, 0, 0, 0, 0
		pc.ThreadOpMaxThreads, pc.ThreadCallUs = 0, 0
		pc.CollUs = nil
	}
	return c
}

// delta is what setting one constant (by set) adds to the simulated time
// of a call of coll on bytes at rec under env.
func delta(t *testing.T, env map[string]string, coll model.Collective, bytes int64, rec Recorded, set func(*Calib)) float64 {
	t.Helper()
	base := quietCalib(t)
	with := base.Clone()
	set(with)
	return simulateBytes(t, env, coll, bytes, rec, with) - simulateBytes(t, env, coll, bytes, rec, base)
}

// ringSimple1 is a call forced to Ring/Simple on one channel.
var ringSimple1 = Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1}

// TestDirectUs: direct_us is paid once per call, at its start, by the
// lanes of collectives whose primitives are NCCL's direct* ones (Ring
// Broadcast, AllGather, AllReduce), over P2P and SHM alike, and not by
// Reduce and ReduceScatter; LL does not pay it.
func TestDirectUs(t *testing.T) {
	const d = 4.0
	set := func(c *Calib) { c.Simple.DirectUs = d }
	for _, tc := range []struct {
		env  map[string]string
		coll model.Collective
		rec  Recorded
		want float64
	}{
		{nil, model.CollBroadcast, ringSimple1, d},
		{nil, model.CollAllGather, ringSimple1, d},
		{nil, model.CollAllReduce, ringSimple1, d},
		{shmEnv, model.CollBroadcast, ringSimple1, d},
		{nil, model.CollReduce, ringSimple1, 0},
		{nil, model.CollReduceScatter, ringSimple1, 0},
		{nil, model.CollBroadcast, Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 1}, 0},
	} {
		if got := delta(t, tc.env, tc.coll, 8, tc.rec, set); math.Abs(got-tc.want) > 0.02*d {
			t.Errorf("%v %v 8 B (settings %v): direct_us %.1f adds %.3f us, want %.1f", tc.coll, tc.rec.Proto, tc.env, d, got, tc.want)
		}
	}
}

// TestFirstOpUs: first_op_us is paid by the first call of each primitive
// kind in a call, not by every chunk: a one-channel Broadcast of 4 MiB
// (eight chunks, eight copySends on the root and eight recvs on the
// other rank) pays it once on its path, as one of 8 B does; a Reduce's
// receiver pays its while it waits for the sender's data. thread_op_us
// adds to it per doubling of NCCL's threads beyond 96 (a 32 KiB Reduce
// runs on 544), up to thread_op_max_threads where that is set.
func TestFirstOpUs(t *testing.T) {
	const f, th = 5.0, 2.0
	first := func(c *Calib) { c.Simple.FirstOpUs = f }
	for _, tc := range []struct {
		coll  model.Collective
		bytes int64
	}{{model.CollBroadcast, 8}, {model.CollBroadcast, 4 << 20}, {model.CollReduce, 8}} {
		if got := delta(t, nil, tc.coll, tc.bytes, ringSimple1, first); math.Abs(got-f) > 0.02*f {
			t.Errorf("%v %d B: first_op_us %.1f adds %.3f us, want %.1f (once on the path)", tc.coll, tc.bytes, f, got, f)
		}
	}
	for _, tc := range []struct {
		bytes        int64
		cap, threads float64 // thread_op_max_threads; the threads it pays for
	}{{3072, 0, 96}, {32768, 0, 544}, {3072, 288, 96}, {24576, 288, 288}, {32768, 288, 288}, {32768, 1024, 544}} {
		threads := func(c *Calib) { c.Simple.ThreadOpUs, c.Simple.ThreadOpMaxThreads = th, tc.cap }
		want := th * math.Log2(tc.threads/96)
		if got := delta(t, nil, model.CollReduce, tc.bytes, ringSimple1, threads); math.Abs(got-want) > 0.02*th {
			t.Errorf("Reduce %d B (thread_op_max_threads %g): thread_op_us %.1f adds %.3f us, want %.3f (%g threads)", tc.bytes, tc.cap, th, got, want, tc.threads)
		}
	}
	// p2p Programs do not pay it.
	p2p := Recorded{Algo: -1, Proto: model.ProtoSimple}
	if got := delta(t, nil, model.CollSendRecv, 1<<20, p2p, first); got != 0 {
		t.Errorf("SendRecv 1 MiB: first_op_us adds %.3f us, want 0", got)
	}
}

// TestRateThreads: a block of fewer threads than rate_threads copies in
// proportion. A one-channel Reduce of 64 MiB on two GPUs whose time is
// the copies' (no per-call or per-slice costs, a slow block) takes twice
// as long when rate_threads is twice NCCL's 544 threads.
func TestRateThreads(t *testing.T) {
	c := zeroCalib(5, 1)
	c.Simple.P2PSliceOverheadUs = 0
	const bytes = 64 << 20
	full := simulateBytes(t, nil, model.CollReduce, bytes, ringSimple1, c)
	half := c.Clone()
	half.Simple.RateThreads = 2 * 544
	slow := simulateBytes(t, nil, model.CollReduce, bytes, ringSimple1, half)
	if r := slow / full; math.Abs(r-2) > 0.02 {
		t.Errorf("Reduce 64 MiB: %.1f us at the full rate, %.1f with rate_threads 1088: ratio %.3f, want 2", full, slow, r)
	}
}

// TestHostTurnUs: host_turn_us is paid by a receive from host memory
// that follows the lane's own send into it: an AllGather over SHM (each
// rank sends, then receives) pays it once on its path, a Broadcast (one
// rank sends, the other receives) not at all, nor does P2P.
func TestHostTurnUs(t *testing.T) {
	const turn = 4.0
	set := func(c *Calib) { c.Simple.HostTurnUs = turn }
	for _, tc := range []struct {
		env  map[string]string
		coll model.Collective
		want float64
	}{
		{shmEnv, model.CollAllGather, turn},
		{shmEnv, model.CollBroadcast, 0},
		{nil, model.CollAllGather, 0},
	} {
		if got := delta(t, tc.env, tc.coll, 8, ringSimple1, set); math.Abs(got-tc.want) > 0.02*turn {
			t.Errorf("%v Simple 8 B (settings %v): host_turn_us %.1f adds %.3f us, want %.1f", tc.coll, tc.env, turn, got, tc.want)
		}
	}
}

// TestP2PSliceOverheadUs: the slices of p2p Programs pay
// p2p_slice_overhead_us (set in the embedded calibration) instead of
// slice_overhead_us; collectives keep slice_overhead_us.
func TestP2PSliceOverheadUs(t *testing.T) {
	if quietCalib(t).Simple.P2PSliceOverheadUs == 0 {
		t.Fatal("the embedded calibration has no simple.p2p_slice_overhead_us")
	}
	p2p := Recorded{Algo: -1, Proto: model.ProtoSimple}
	if got := delta(t, nil, model.CollSendRecv, 1<<20, p2p, func(c *Calib) { c.Simple.P2PSliceOverheadUs += 3 }); got < 3 {
		t.Errorf("SendRecv 1 MiB: 3 us more per p2p slice adds %.3f us, want at least one slice's 3", got)
	}
	if got := delta(t, nil, model.CollSendRecv, 1<<20, p2p, func(c *Calib) { c.Simple.SliceOverheadUs += 3 }); got != 0 {
		t.Errorf("SendRecv 1 MiB: 3 us more of slice_overhead_us change it by %.3f us, want 0", got)
	}
	if got := delta(t, nil, model.CollReduce, 8, ringSimple1, func(c *Calib) { c.Simple.P2PSliceOverheadUs += 3 }); got != 0 {
		t.Errorf("Reduce 8 B: p2p_slice_overhead_us changes a collective by %.3f us", got)
	}
}

// TestHostStartUs: host_start_us is paid once per call by every lane with
// a connection through SHM host memory, however many slices or hops it
// has: a Broadcast over SHM on two GPUs (the root waits for it before it
// sends, the other rank while it waits for the data) takes it once longer,
// at 8 B as at 4 MiB; over P2P it is not paid.
func TestHostStartUs(t *testing.T) {
	const s = 4.0
	for _, tc := range []struct {
		env   map[string]string
		rec   Recorded
		bytes int64
		want  float64
	}{
		{shmEnv, ringSimple1, 8, s},
		{shmEnv, ringSimple1, 4 << 20, s},
		{shmEnv, Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 1}, 8, s},
		{nil, ringSimple1, 8, 0},
	} {
		set := func(c *Calib) { c.Proto(tc.rec.Proto).HostStartUs = s }
		if got := delta(t, tc.env, model.CollBroadcast, tc.bytes, tc.rec, set); math.Abs(got-tc.want) > 0.02*s {
			t.Errorf("Broadcast %v %d B (settings %v): host_start_us %.1f adds %.3f us, want %.1f", tc.rec.Proto, tc.bytes, tc.env, s, got, tc.want)
		}
	}
}

// TestCollUs: coll_us is paid once per call by the calls of the
// collective it names under its protocol: a one-channel LL128
// ReduceScatter of 4 MiB (many slices) pays it once, as one of 8 B does;
// AllGather, and ReduceScatter under another protocol, do not.
func TestCollUs(t *testing.T) {
	const d = 4.0
	set := func(c *Calib) { c.LL128.CollUs = map[string]float64{"ReduceScatter": d} }
	ll128 := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL128, NChannels: 1}
	for _, tc := range []struct {
		coll  model.Collective
		bytes int64
		rec   Recorded
		want  float64
	}{
		{model.CollReduceScatter, 8, ll128, d},
		{model.CollReduceScatter, 4 << 20, ll128, d},
		{model.CollAllGather, 8, ll128, 0},
		{model.CollReduceScatter, 8, ringSimple1, 0},
	} {
		if got := delta(t, nil, tc.coll, tc.bytes, tc.rec, set); math.Abs(got-tc.want) > 0.02*d {
			t.Errorf("%v %v %d B: ll128.coll_us.ReduceScatter %.1f adds %.3f us, want %.1f", tc.coll, tc.rec.Proto, tc.bytes, d, got, tc.want)
		}
	}
	// Clone copies the map: a fit moving a clone's cost leaves the original.
	c := quietCalib(t)
	set(c)
	c.Clone().LL128.CollUs["ReduceScatter"] = 1
	if got := c.LL128.CollUs["ReduceScatter"]; got != d {
		t.Errorf("after a clone's change the original's coll_us is %g, want %g", got, d)
	}
	// Names are NCCL's collectives, spelled as Collective.String does.
	for _, tc := range []struct {
		m    map[string]float64
		want string
	}{
		{map[string]float64{"allreduce": 1}, `ll128.coll_us: "allreduce"`},
		{map[string]float64{"SendRecv": 1}, `ll128.coll_us: "SendRecv"`},
		{map[string]float64{"AllReduce": -1}, "ll128.coll_us.AllReduce"},
	} {
		c.LL128.CollUs = tc.m
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("coll_us %v: got %v, want an error naming %s", tc.m, err, tc.want)
		}
	}
}

// TestLineThreads: with line_threads an LL128 block is sized to the call
// as twinccl's kernel sizes it, and thread_op_us follows: a one-channel
// 3 KiB Broadcast (26 lines, 224 threads) pays log2(224/96) of it, one of
// 64 KiB (capped at 512 threads) log2(512/96); on a fixed block of 512
// both pay the latter. A call small enough for 64 threads pays none.
func TestLineThreads(t *testing.T) {
	const th = 2.0
	rec := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL128, NChannels: 1}
	for _, tc := range []struct {
		bytes int64
		line  bool
		want  float64
	}{
		{3072, true, th * math.Log2(224.0/96)},
		{64 << 10, true, th * math.Log2(512.0/96)},
		{120, true, 0},
		{3072, false, th * math.Log2(512.0/96)},
	} {
		set := func(c *Calib) {
			c.LL128.Threads, c.LL128.ThreadOpUs, c.LL128.LineThreads = 512, th, tc.line
		}
		if got := delta(t, nil, model.CollBroadcast, tc.bytes, rec, set); math.Abs(got-tc.want) > 0.02*th {
			t.Errorf("Broadcast LL128 %d B, line_threads %v: thread_op_us %.1f adds %.3f us, want %.3f", tc.bytes, tc.line, th, got, tc.want)
		}
	}
}

// TestTreeGroupShare: a non-root rank of a tree runs its reduce-up and
// broadcast-down lanes on two groups of its block's threads. Where a
// block's copy rate follows its threads (rate_threads), each group copies
// at the rate of the threads NCCL gives it (384 and 256 of a tree's 640);
// without rate_threads the groups split the block's rate (reduce_frac).
// A two-GPU tree AllReduce of 256 KiB is one slice per hop, in turn: the
// leaf's send (S), the root's receive-reduce-copy-send (R, twice the
// loads and stores of S) and the leaf's receive (S again), each timed by
// its copies alone. Groups at half the block's rate take 2S + R + 2S =
// 3R; with rate_threads 128 both groups are saturated, S + R + S = 2R
// (2/3 of it); with rate_threads 512 the reduce group of 384 threads
// copies at 3/4 of the rate and the broadcast group of 256 at half of it,
// 4S/3 + R + 2S = 8R/3 (8/9).
func TestTreeGroupShare(t *testing.T) {
	tree := Recorded{Algo: model.AlgoTree, Proto: model.ProtoSimple, NChannels: 1}
	const bytes = 256 << 10
	time := func(rateThreads float64) float64 {
		c := zeroCalib(5, 1)
		c.Simple.ReduceFrac = 0.5
		c.Simple.RateThreads = rateThreads
		return simulateBytes(t, nil, model.CollAllReduce, bytes, tree, c)
	}
	split := time(0)
	for _, tc := range []struct {
		rateThreads, want float64
	}{{128, 2.0 / 3}, {512, 8.0 / 9}} {
		if r := time(tc.rateThreads) / split; math.Abs(r-tc.want) > 0.01 {
			t.Errorf("Tree AllReduce 256 KiB: rate_threads %v takes %.3f times as long as groups at half the block's rate, want %.3f", tc.rateThreads, r, tc.want)
		}
	}
}

// TestHostPostUs: host_post_us delays what a receiver sees of a slice
// posted through SHM host memory and holds no lane. A two-GPU tree
// AllReduce of 48 B over SHM waits for Simple's twice a call (the leaf's
// post to the root, the root's answer); a Broadcast of 64 MiB (128 slices
// of a pipeline) sees it once at most, not per slice; P2P slices do not
// see it, nor does LL (which has its own).
func TestHostPostUs(t *testing.T) {
	const post = 4.0
	tree := Recorded{Algo: model.AlgoTree, Proto: model.ProtoSimple, NChannels: 1}
	ll := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 1}
	for _, tc := range []struct {
		name   string
		env    map[string]string
		coll   model.Collective
		bytes  int64
		rec    Recorded
		lo, hi float64
	}{
		{"SHM tree AllReduce 48 B", shmEnv, model.CollAllReduce, 48, tree, 2 * post, 2 * post},
		{"SHM Broadcast 64 MiB", shmEnv, model.CollBroadcast, 64 << 20, ringSimple1, 0, post},
		{"P2P tree AllReduce 48 B", nil, model.CollAllReduce, 48, tree, 0, 0},
		{"SHM LL AllReduce 48 B", shmEnv, model.CollAllReduce, 48, ll, 0, 0},
	} {
		time := func(us float64) float64 {
			c := quietCalib(t)
			c.Simple.HostPostUs = us
			return simulateBytes(t, tc.env, tc.coll, tc.bytes, tc.rec, c)
		}
		if got := time(post) - time(0); got < tc.lo-0.02*post || got > tc.hi+0.02*post {
			t.Errorf("%s: host_post_us %.1f adds %.3f us, want %.1f to %.1f", tc.name, post, got, tc.lo, tc.hi)
		}
	}
}

// TestLaunchChannelUs: a call on n channels costs (n-1)·launch_channel_us
// more, isolated and in a timing loop, and one on one channel nothing; the
// rest of the call does not move.
func TestLaunchChannelUs(t *testing.T) {
	const k = 0.5
	res := loadSearch(t, "", 1)
	for _, tc := range []struct {
		bytes int64
		nch   int
	}{{1 << 10, 1}, {4 << 20, 4}, {4 << 20, 24}} {
		for _, loop := range []int{0, 2} {
			time := func(perChannel float64) CallResult {
				c, err := DefaultCalib(90)
				if err != nil {
					t.Fatal(err)
				}
				c.LaunchChannelUs = perChannel
				s := newSim(t, res, c)
				s.Loop = loop
				r, err := s.RunTimed(Call{Coll: model.CollAllGather, Count: tc.bytes / 4, Dtype: model.DtypeFP32, Algo: model.AlgoRing,
					Proto: model.ProtoLL, NChannels: tc.nch}, false)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			base, with := time(0), time(k)
			if with.NChannels != tc.nch {
				t.Fatalf("%d B: ran on %d channels, want %d", tc.bytes, with.NChannels, tc.nch)
			}
			if d, want := with.TimeUs-base.TimeUs, k*float64(tc.nch-1); math.Abs(d-want) > 1e-6 {
				t.Errorf("%d B on %d channels, loop %d: %.6f us more, want %.6f", tc.bytes, tc.nch, loop, d, want)
			}
			if math.Abs(with.KernelUs-base.KernelUs) > 1e-6 {
				t.Errorf("%d B on %d channels, loop %d: kernel %.6f us, without the cost %.6f: want the same", tc.bytes, tc.nch, loop, with.KernelUs, base.KernelUs)
			}
		}
	}
	// A fit frees the constant only where its start sets it, so that the
	// fits of the files without it search as they did.
	tb := &Table{Name: "t.tsv", Harness: HarnessNCCLTests, Rows: []Measurement{{Coll: model.CollAllGather, Bytes: 1 << 20, MeanUs: 10, Line: 1}}}
	ft := NewFitTable(tb, res)
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	c.LaunchChannelUs = 0
	with := c.Clone()
	with.LaunchChannelUs = k
	if fitsParam(t, c, "launch_channel_us", ft) || !fitsParam(t, with, "launch_channel_us", ft) {
		t.Error("launch_channel_us: want it fitted where the start sets it, and only there")
	}
}

// TestThreadCallUs: thread_call_us is paid once a call, per doubling of
// NCCL's block beyond 96 threads, whatever the primitive kinds of its
// lanes: a one-channel LL128 Broadcast (one kind a lane) and AllGather
// (two) pay the same, 320 threads at 2 KiB and 640 at 8 KiB, where
// thread_op_us makes the AllGather pay more. A fit frees it only where its
// start sets it.
func TestThreadCallUs(t *testing.T) {
	const th = 2.0
	ll128 := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL128, NChannels: 1}
	call := func(c *Calib) { c.LL128.ThreadCallUs = th }
	kind := func(c *Calib) { c.LL128.ThreadOpUs = th }
	for _, tc := range []struct {
		bytes   int64
		threads float64
	}{{2048, 320}, {8192, 640}} {
		want := th * math.Log2(tc.threads/96)
		for _, coll := range []model.Collective{model.CollBroadcast, model.CollAllGather} {
			if got := delta(t, nil, coll, tc.bytes, ll128, call); math.Abs(got-want) > 0.02*th {
				t.Errorf("LL128 %v %d B: thread_call_us %.1f adds %.3f us, want %.3f (%g threads, once)", coll, tc.bytes, th, got, want, tc.threads)
			}
		}
		if b, g := delta(t, nil, model.CollBroadcast, tc.bytes, ll128, kind), delta(t, nil, model.CollAllGather, tc.bytes, ll128, kind); g < b+0.5*want {
			t.Errorf("LL128 %d B: thread_op_us adds %.3f us to AllGather and %.3f to Broadcast: want more for AllGather's two kinds", tc.bytes, g, b)
		}
	}
	tb := &Table{Name: "t.tsv", Harness: HarnessNCCLTests,
		Rows: []Measurement{{Coll: model.CollAllGather, Bytes: 8192, MeanUs: 10, Line: 1, Recorded: &ll128}}}
	ft := NewFitTable(tb, searchOn(t, h100x2Topo(), 1, tb))
	c := quietCalib(t)
	c.LL128.ThreadCallUs = 0
	with := c.Clone()
	with.LL128.ThreadCallUs = th
	if fitsParam(t, c, "ll128.thread_call_us", ft) || !fitsParam(t, with, "ll128.thread_call_us", ft) {
		t.Error("ll128.thread_call_us: want it fitted where the start sets it, and only there")
	}
}
