package sim

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// runLoop simulates c with Machine.LoopCalls set to loop.
func runLoop(t *testing.T, s *Simulator, c Call, loop int) CallResult {
	t.Helper()
	s.Loop = loop
	r, err := s.RunTimed(c, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.Machine.LoopCalls != 0 {
		t.Fatalf("RunTimed left Machine.LoopCalls at %d", s.Machine.LoopCalls)
	}
	return r
}

// TestLoopAnalyticChain: a one-channel Simple broadcast over the eight
// GPUs of an H100 host, one slice per call, no latency, with a launch λ
// and a lane start σ. Isolated, a call crosses the chain: the root's
// copySend, six recvCopySends and the last rank's recv one after the
// other, plus λ. In a loop each rank starts its next call as soon as its
// previous one ended, so a call costs the slowest stage plus λ + σ, however
// long the chain. A forwarding cost φ (ForwardUs) is paid by each middle
// rank's recvCopySend, which receives and sends to a peer GPU, and by
// no other step: n-2 times along the isolated chain, once in the middle
// stage of the loop. A relay delay ρ (RelayUs) holds no lane: each middle
// rank's step reaches the next rank ρ late, n-2 times along the isolated
// chain, and the loop, whose stages overlap across calls, hides it. A
// relay hold (RelayHoldUs) is paid where φ is: a chain's middle ranks
// relay.
func TestLoopAnalyticChain(t *testing.T) {
	res := loadSearch(t, h100XML(t), 1)
	const slice = 512 << 10
	const launch, start = 2.0, 1.0
	for _, tc := range []struct {
		name         string
		load, remote float64
		// data rates (GB/s) of the root, a middle rank and the last one
		root, mid, last float64
		forward         float64 // ForwardUs
		relay           float64 // RelayUs
		hold            float64 // RelayHoldUs
	}{
		// copySend and recvCopySend load once and store twice (one store
		// into the next GPU), recv loads once and stores once
		{"unit-costs", 1, 1, 10, 10, 15, 0, 0, 0},
		{"store-costs", 0.5, 2.5, 7.5, 7.5, 20, 0, 0, 0},
		// 52.4 us a stage: the middle ranks' 5 us make them the slowest
		{"forward", 1, 1, 10, 10, 15, 5, 0, 0},
		{"relay", 1, 1, 10, 10, 15, 0, 7, 0},
		// a relaying lane's hold is the forward's cost on a ring's lanes
		{"relay-hold", 1, 1, 10, 10, 15, 0, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := zeroCalib(30, 1)
			c.LaunchUs = launch
			c.Simple.StartUs = start
			c.Simple.LoadCost, c.Simple.RemoteStoreCost, c.Simple.ForwardUs = tc.load, tc.remote, tc.forward
			c.Simple.RelayUs, c.Simple.RelayHoldUs = tc.relay, tc.hold
			s := newSim(t, res, c)
			n := s.Machine.Cluster.NRanks
			call := Call{Coll: model.CollBroadcast, Count: slice / 4, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1}
			us := func(gbps float64) float64 { return slice / (gbps * 1e3) }
			single := runLoop(t, s, call, 0)
			wantSingle := launch + start + us(tc.root) + float64(n-2)*(us(tc.mid)+tc.forward+tc.relay+tc.hold) + us(tc.last)
			if math.Abs(single.TimeUs-wantSingle) > 1e-3*wantSingle {
				t.Errorf("isolated call: %.4f us, want %.4f", single.TimeUs, wantSingle)
			}
			for _, loop := range []int{1, 2, 5} {
				r := runLoop(t, s, call, loop)
				want := launch + start + max(us(tc.root), us(tc.mid)+tc.forward+tc.hold, us(tc.last))
				if math.Abs(r.TimeUs-want) > 1e-3*want {
					t.Errorf("loop of %d: %.4f us per call, want %.4f", loop, r.TimeUs, want)
				}
				if r.LoopCalls != loop {
					t.Errorf("loop of %d: result says %d calls", loop, r.LoopCalls)
				}
				if math.Abs(r.KernelUs-(r.TimeUs-launch)) > 1e-9 {
					t.Errorf("loop of %d: kernel %.4f us, time %.4f us", loop, r.KernelUs, r.TimeUs)
				}
			}
		})
	}
}

// TestLoopSymmetricCallsMatchIsolated: in a ring collective every rank is
// busy until the call's end, so a loop adds nothing to an isolated call:
// each call costs the launch plus the kernel. Its traffic per call is the
// isolated call's.
func TestLoopSymmetricCallsMatchIsolated(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	for _, c := range []Call{
		{Coll: model.CollAllReduce, Count: 1 << 10, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		{Coll: model.CollAllReduce, Count: 8 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		{Coll: model.CollAllGather, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: model.ProtoLL128},
		{Coll: model.CollReduceScatter, Count: 3 << 20, Dtype: model.DtypeBF16, Algo: -1, Proto: model.ProtoSimple},
	} {
		single := runLoop(t, s, c, 0)
		r := runLoop(t, s, c, 3)
		if math.Abs(r.TimeUs-single.TimeUs) > 1e-6*single.TimeUs {
			t.Errorf("%s count %d %s: loop %.6f us per call, isolated %.6f us", c.Coll, c.Count, single.Proto, r.TimeUs, single.TimeUs)
		}
		if !reflect.DeepEqual(r.Conns, single.Conns) {
			t.Errorf("%s count %d: per-call connection traffic differs from the isolated call's", c.Coll, c.Count)
		}
		for i, l := range r.Links {
			if i >= len(single.Links) || l.Name != single.Links[i].Name || math.Abs(l.Bytes-single.Links[i].Bytes) > 1e-6*l.Bytes {
				t.Errorf("%s count %d: link %s carries %.0f bytes per call in the loop", c.Coll, c.Count, l.Name, l.Bytes)
				break
			}
		}
	}
}

// TestLoopChainHidesLatency: on the H200 pair and on four H200, a Broadcast
// of a few MiB costs about one hop in a loop (as NCCL's tables show), while
// an isolated call pays the whole chain; the loop is never slower.
func TestLoopChainHidesLatency(t *testing.T) {
	for _, file := range []string{"", h200x4XML()} {
		s := newSim(t, loadSearch(t, file, 1), nil)
		for _, coll := range []model.Collective{model.CollBroadcast, model.CollReduce} {
			c := Call{Coll: coll, Count: 2 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: model.ProtoSimple}
			single := runLoop(t, s, c, 0)
			r := runLoop(t, s, c, DefaultLoopCalls)
			if r.TimeUs > single.TimeUs*(1+1e-9) {
				t.Errorf("%s %s: loop %.2f us per call, isolated %.2f us", file, coll, r.TimeUs, single.TimeUs)
			}
			if n := s.Machine.Cluster.NRanks; n == 4 && r.TimeUs > 0.6*single.TimeUs {
				t.Errorf("%s on 4 GPUs: loop %.2f us per call, isolated %.2f us: the chain's hops should overlap across calls", coll, r.TimeUs, single.TimeUs)
			}
		}
	}
}

// TestLoopStreamedAndFastAgree: the loop gives the same result whether the
// lanes are materialised, streamed through small windows, or run by the
// fast mode's aggregation.
func TestLoopStreamedAndFastAgree(t *testing.T) {
	s := newSim(t, loadSearch(t, h100XML(t), 2), nil)
	s.Machine.LoopCalls = 2
	defer func() { s.Machine.LoopCalls = 0 }()
	for _, c := range []Call{
		{Coll: model.CollAllReduce, Count: 6 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple},
		{Coll: model.CollBroadcast, Count: 3 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 3},
		{Coll: model.CollAllReduce, Count: 1 << 16, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoLL},
	} {
		g, _, err := s.Generator(c)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := s.Machine.Run(g.Program())
		if err != nil {
			t.Fatal(err)
		}
		s.Machine.streamRuns = 1
		streamed, err := s.Machine.RunGen(g, nil)
		s.Machine.streamRuns = 0
		if err != nil {
			t.Fatal(err)
		}
		if whole.TimeUs != streamed.TimeUs || !reflect.DeepEqual(whole.Conns, streamed.Conns) {
			t.Errorf("%s: materialised %.6f us, streamed %.6f us", c.Coll, whole.TimeUs, streamed.TimeUs)
		}
		s.Mode = ModeFast
		fast, err := s.Run(c)
		s.Mode = ModeAccurate
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(fast.TimeUs-whole.TimeUs) > 1e-9*whole.TimeUs {
			t.Errorf("%s: fast %.6f us (%s), accurate %.6f us", c.Coll, fast.TimeUs, fast.Fast, whole.TimeUs)
		}
	}
}

// TestLoopErrors: a loop longer than the bound, and a Program whose
// sender posts more steps per call than its receiver consumes, are refused.
func TestLoopErrors(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	c := Call{Coll: model.CollBroadcast, Count: 3 << 18, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1}
	s.Loop = maxLoopCalls + 1
	if _, err := s.RunTimed(c, false); err == nil || !strings.Contains(err.Error(), "over the limit") {
		t.Errorf("loop of %d calls: got %v", s.Loop, err)
	}
	p, _, err := s.Program(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Lanes {
		if l := &p.Lanes[i]; l.Rank == 1 && len(l.Ops) > 1 {
			l.Ops = l.Ops[:len(l.Ops)-1] // the receiver skips the last slice
		}
	}
	s.Machine.LoopCalls = 2
	defer func() { s.Machine.LoopCalls = 0 }()
	_, err = s.Machine.Run(p)
	// Program.Validate refuses it before the loop could: the connection's
	// two ends leave the call at different steps.
	if err == nil || !strings.Contains(err.Error(), "ends at step") || !strings.Contains(err.Error(), "0->1") {
		t.Errorf("mismatched steps: got %v", err)
	}
}

// h200x4XML is the four-H200 host recorded in testdata (run topo --dump,
// identical to NCCL's own dump).
func h200x4XML() string {
	return filepath.Join(repoRoot(), "testdata", "nccl-env", "h200x4", "topo-twinccl.xml")
}

// TestLoopEager: outside a CUDA graph the host issues one call every
// HostCallUs. A loop of calls the GPU runs in less than that takes the
// host's time per call; a loop of longer calls takes the graph-timed
// time; and with no host cost the eager loop is the graph-timed one.
func TestLoopEager(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	small := Call{Coll: model.CollAllReduce, Count: 2, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}
	large := Call{Coll: model.CollAllReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}
	graph := func(c Call) float64 { s.Eager = false; return runLoop(t, s, c, 4).TimeUs }
	eager := func(c Call, host float64) float64 {
		s.Machine.calib.HostCallUs = host
		s.Eager = true
		defer func() { s.Eager = false }()
		r := runLoop(t, s, c, 4)
		if s.Machine.EagerCalls {
			t.Fatal("RunTimed left Machine.EagerCalls set")
		}
		return r.TimeUs
	}
	gs, gl := graph(small), graph(large)
	if gs >= 10 || gl <= 20 {
		t.Fatalf("graph-timed AllReduce: %.2f us at 8 B, %.2f us at 16 MiB; the test wants < 10 and > 20", gs, gl)
	}
	for _, tc := range []struct {
		name string
		c    Call
		host float64
		want float64
	}{
		{"8 B, no host cost", small, 0, gs},
		{"8 B, host-bound", small, 10, 10},
		{"8 B, host cost below the GPU's", small, gs / 2, gs},
		{"16 MiB, GPU-bound", large, 10, gl},
	} {
		if got := eager(tc.c, tc.host); math.Abs(got-tc.want) > 1e-6*tc.want+1e-6 {
			t.Errorf("%s: %.4f us a call, want %.4f", tc.name, got, tc.want)
		}
	}
}
