package sim

import (
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// randomGinProgram is a random GIN schedule over n ranks: every rank has
// one to three lanes of puts (random peer, context, size, signal and
// counter actions) mixed with delays, counter waits on the lane's own
// puts and flushes; every lane ends by waiting for all the signals its
// rank will receive on the lane's own slot, then flushing every context.
// Waits only ever wait for puts issued before any wait, so the schedule
// cannot deadlock.
func randomGinProgram(rng *rand.Rand, n, contexts int) *GinProgram {
	const lanesMax = 3
	p := &GinProgram{NRanks: n, Contexts: contexts, Signals: lanesMax, Counters: lanesMax}
	sizes := []int64{0, 8, 4096, 65536, 1 << 20, 3 << 20}
	want := make([][lanesMax]uint64, n) // per rank and slot: the total the puts add
	type laneInfo struct{ rank, slot int }
	var infos []laneInfo
	for r := 0; r < n; r++ {
		nl := 1 + rng.IntN(lanesMax)
		for li := 0; li < nl; li++ {
			var ops []GinOp
			counted := uint64(0)
			for k := 2 + rng.IntN(10); k > 0; k-- {
				switch x := rng.IntN(10); {
				case x < 7:
					op := GinOp{Kind: GinPut, Peer: rng.IntN(n), Context: rng.IntN(contexts), Bytes: sizes[rng.IntN(len(sizes))],
						Signal: rng.IntN(lanesMax), Counter: li}
					if rng.IntN(3) > 0 {
						op.SignalAdd = uint64(1 + rng.IntN(3))
						want[op.Peer][op.Signal] += op.SignalAdd
					}
					if rng.IntN(2) == 0 {
						op.CounterInc = true
						counted++
					}
					ops = append(ops, op)
				case x < 8:
					ops = append(ops, GinOp{Kind: GinDelay, DelayUs: rng.Float64() * 5})
				case x < 9:
					ops = append(ops, GinOp{Kind: GinWaitCounter, Counter: li, Value: counted})
				default:
					ops = append(ops, GinOp{Kind: GinFlush, Context: rng.IntN(contexts)})
				}
			}
			p.Lanes = append(p.Lanes, GinLane{Rank: r, Ops: ops})
			infos = append(infos, laneInfo{r, li})
		}
	}
	for i, in := range infos {
		l := &p.Lanes[i]
		if in.slot < lanesMax {
			l.Ops = append(l.Ops, GinOp{Kind: GinWaitSignal, Signal: in.slot, Value: want[in.rank][in.slot]})
		}
		for c := 0; c < contexts; c++ {
			l.Ops = append(l.Ops, GinOp{Kind: GinFlush, Context: c})
		}
	}
	return p
}

// checkGinInvariants checks the device API's rules on a run's records.
func checkGinInvariants(t *testing.T, p *GinProgram, r *GinResult) {
	t.Helper()
	type key struct{ rank, ctx, peer int }
	byQP := map[key][]GinPutRecord{}
	sigAdd := make([][]uint64, p.NRanks)
	ctrAdd := make([][]uint64, p.NRanks)
	for i := range sigAdd {
		sigAdd[i] = make([]uint64, p.Signals)
		ctrAdd[i] = make([]uint64, p.Counters)
	}
	for _, pu := range r.Puts {
		if !(pu.Issued <= pu.Started && pu.Started <= pu.Left && pu.Left <= pu.Arrived && pu.Left <= pu.Completed) {
			t.Fatalf("put %+v: times out of order", pu)
		}
		if pu.Counter >= 0 {
			// the counter moves once the source was consumed
			if pu.Counted < pu.Completed || pu.Counted < pu.Left {
				t.Errorf("put %+v: counter before the source was consumed", pu)
			}
			ctrAdd[pu.Rank][pu.Counter]++
		} else if pu.Counted != -1 {
			t.Errorf("put %+v: counted without a counter", pu)
		}
		if pu.Signal >= 0 {
			if pu.Signaled < pu.Arrived {
				t.Errorf("put %+v: signal before its own payload arrived", pu)
			}
		} else if pu.Signaled != -1 {
			t.Errorf("put %+v: signaled without a signal", pu)
		}
		k := key{pu.Rank, pu.Context, pu.Peer}
		byQP[k] = append(byQP[k], pu)
	}
	// A signal moves only once every earlier put of its rank on the same
	// context to the same peer has arrived.
	for k, puts := range byQP {
		sort.Slice(puts, func(i, j int) bool { return puts[i].Seq < puts[j].Seq })
		latest := Time(-1)
		for _, pu := range puts {
			latest = max(latest, pu.Arrived)
			if pu.Signal >= 0 && pu.Signaled < latest {
				t.Errorf("%+v: signal of put seq %d at %d before an earlier put's payload arrived at %d", k, pu.Seq, pu.Signaled, latest)
			}
		}
	}
	// What a wait observed had arrived: every signal counted by a wait
	// that ended at T was applied, with its payload, by T.
	lanes := p.Lanes
	for _, op := range r.Ops {
		gop := lanes[op.Lane].Ops[op.Op]
		rank := lanes[op.Lane].Rank
		switch gop.Kind {
		case GinWaitSignal, GinBarrier:
			var seen uint64
			for _, pu := range r.Puts {
				if pu.Peer == rank && pu.Signal == gop.Signal && pu.Signaled >= 0 && pu.Signaled <= op.End {
					if pu.Arrived > op.End {
						t.Errorf("lane %d op %d (%s) ended at %d, counting a signal whose payload arrived at %d", op.Lane, op.Op, gop.Kind, op.End, pu.Arrived)
					}
					seen += pu.SignalAdd
				}
			}
			if seen < gop.Value {
				t.Errorf("lane %d op %d (%s) ended at %d with signal %d at %d of %d", op.Lane, op.Op, gop.Kind, op.End, gop.Signal, seen, gop.Value)
			}
		case GinFlush:
			for _, pu := range r.Puts {
				if pu.Rank == rank && pu.Context == gop.Context && pu.Issued < op.Start && pu.Completed > op.End {
					t.Errorf("flush of rank %d context %d ended at %d before put seq %d (issued %d) completed at %d",
						rank, gop.Context, op.End, pu.Seq, pu.Issued, pu.Completed)
				}
			}
		case GinWaitCounter:
			var seen uint64
			for _, pu := range r.Puts {
				if pu.Rank == rank && pu.Counter == gop.Counter && pu.Counted >= 0 && pu.Counted <= op.End {
					seen++
				}
			}
			if seen < gop.Value {
				t.Errorf("lane %d op %d: counter wait ended at %d with %d of %d", op.Lane, op.Op, op.End, seen, gop.Value)
			}
		}
	}
	for _, pu := range r.Puts {
		if pu.Signal >= 0 {
			sigAdd[pu.Peer][pu.Signal] += pu.SignalAdd
		}
	}
	for rk := range sigAdd {
		for s := range sigAdd[rk] {
			if r.Signals[rk][s] != sigAdd[rk][s] {
				t.Errorf("rank %d signal %d = %d, the puts add %d", rk, s, r.Signals[rk][s], sigAdd[rk][s])
			}
		}
		for c := range ctrAdd[rk] {
			if r.Counters[rk][c] != ctrAdd[rk][c] {
				t.Errorf("rank %d counter %d = %d, %d puts count on it", rk, c, r.Counters[rk][c], ctrAdd[rk][c])
			}
		}
	}
}

// TestGinOrderingRandom runs random GIN schedules over two hosts (puts to
// the other host through the NICs, within a host over P2P, and to self)
// and checks the device API's ordering rules on every put and wait.
func TestGinOrderingRandom(t *testing.T) {
	s := newSim(t, ibTopo(t), nil)
	overtaken := 0
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		p := randomGinProgram(rng, s.Machine.Cluster.NRanks, 1+rng.IntN(3))
		r, err := s.Machine.RunGin(p)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		checkGinInvariants(t, p, r)
		// Across contexts there is no order: a later put may land first.
		for _, a := range r.Puts {
			for _, b := range r.Puts {
				if a.Rank == b.Rank && a.Peer == b.Peer && a.Context != b.Context && a.Issued < b.Issued && b.Arrived < a.Arrived {
					overtaken++
				}
			}
		}
		if t.Failed() {
			t.Fatalf("seed %d failed", seed)
		}
		again, err := s.Machine.RunGin(p)
		if err != nil || again.KernelUs != r.KernelUs || again.Events != r.Events {
			t.Fatalf("seed %d: a second run differs (%v)", seed, err)
		}
	}
	if overtaken == 0 {
		t.Error("no put ever overtook an earlier one on another context: the schedules do not exercise the ordering rules")
	}
}

// TestGinSignalOrder: on one context, a small put's signal waits for a
// large earlier put to the same peer; on another context it does not.
func TestGinSignalOrder(t *testing.T) {
	s := newSim(t, ibTopo(t), nil)
	for _, peer := range []int{1, 2} { // P2P within the host, NIC to the other
		for _, ctx := range []int{0, 1} {
			p := &GinProgram{NRanks: 4, Contexts: 2, Signals: 1, Lanes: []GinLane{{Rank: 0, Ops: []GinOp{
				{Kind: GinPut, Peer: peer, Context: 0, Bytes: 64 << 20},
				{Kind: GinPut, Peer: peer, Context: ctx, Bytes: 8, Signal: 0, SignalAdd: 1},
				{Kind: GinFlush, Context: 0}, {Kind: GinFlush, Context: 1},
			}}, {Rank: peer, Ops: []GinOp{{Kind: GinWaitSignal, Signal: 0, Value: 1}}}}}
			r, err := s.Machine.RunGin(p)
			if err != nil {
				t.Fatal(err)
			}
			big, small := r.Puts[0], r.Puts[1]
			if big.Local != (peer == 1) {
				t.Errorf("peer %d: local %v", peer, big.Local)
			}
			if ctx == 0 && small.Signaled < big.Arrived {
				t.Errorf("peer %d, same context: signal at %d before the large payload arrived at %d", peer, small.Signaled, big.Arrived)
			}
			if ctx == 1 && small.Signaled >= big.Arrived {
				t.Errorf("peer %d, other context: signal at %d waited for the large payload (%d)", peer, small.Signaled, big.Arrived)
			}
			waitEnd := r.Ops[len(r.Ops)-1]
			for _, op := range r.Ops {
				if p.Lanes[op.Lane].Ops[op.Op].Kind == GinWaitSignal {
					waitEnd = op
				}
			}
			if waitEnd.End != small.Signaled {
				t.Errorf("peer %d ctx %d: wait ended at %d, the signal moved at %d", peer, ctx, waitEnd.End, small.Signaled)
			}
		}
	}
}

// TestGinBarrier: no rank leaves a barrier before every rank entered it.
func TestGinBarrier(t *testing.T) {
	s := newSim(t, ibTopo(t), nil)
	p := &GinProgram{NRanks: 4, Contexts: 1, Signals: 1}
	for r := 0; r < 4; r++ {
		p.Lanes = append(p.Lanes, GinLane{Rank: r, Ops: []GinOp{
			{Kind: GinDelay, DelayUs: float64(7 * r)},
			{Kind: GinBarrier, Signal: 0, Value: 3},
			{Kind: GinBarrier, Signal: 0, Value: 6},
		}})
	}
	r, err := s.Machine.RunGin(p)
	if err != nil {
		t.Fatal(err)
	}
	for round := 1; round <= 2; round++ {
		var lastIn, firstOut Time = 0, math.MaxInt64
		for _, op := range r.Ops {
			if op.Op == round {
				lastIn = max(lastIn, op.Start)
				firstOut = min(firstOut, op.End)
			}
		}
		if firstOut < lastIn {
			t.Errorf("barrier %d: a rank left at %d before the last entered at %d", round, firstOut, lastIn)
		}
	}
	if r.KernelUs < 21 {
		t.Errorf("kernel %.2f us: shorter than the last rank's 21 us delay", r.KernelUs)
	}
}

// TestGinConservation: every link carried exactly the bytes of the puts
// routed over it, and never above its capacity; puts between hosts cross
// the NICs, puts within a host do not.
func TestGinConservation(t *testing.T) {
	for _, tc := range []struct {
		name string
		ib   bool
	}{{"ib2x2", true}, {"h200x2", false}} {
		var s *Simulator
		if tc.ib {
			s = newSim(t, ibTopo(t), nil)
		} else {
			s = newSim(t, loadSearch(t, "", 1), nil)
		}
		n := s.Machine.Cluster.NRanks
		for _, c := range []int{1, 3} {
			p, err := GinAlltoAllProgram(n, c, 5<<20+3)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Machine.RunGin(p)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]float64{}
			for _, pu := range r.Puts {
				rt, err := s.Machine.ginRoute(pu.Rank, pu.Peer, pu.Context)
				if err != nil {
					t.Fatal(err)
				}
				net := false
				for _, id := range rt.res {
					want[s.Machine.res[id].name] += float64(pu.Bytes)
					net = net || s.Machine.resType[id] == model.LinkNET
				}
				sameHost := s.Machine.rankNode[pu.Rank] == s.Machine.rankNode[pu.Peer]
				if net == sameHost || pu.Local != sameHost {
					t.Errorf("%s: put %d->%d: crosses NET %v, local %v", tc.name, pu.Rank, pu.Peer, net, pu.Local)
				}
			}
			got := r.LinksByName()
			for name, w := range want {
				if g := got[name]; math.Abs(g-w) > 1e-6*w+1e-6 {
					t.Errorf("%s: link %s carried %.0f bytes, the puts imply %.0f", tc.name, name, g, w)
				}
			}
			for name, g := range got {
				if _, ok := want[name]; !ok && g != 0 {
					t.Errorf("%s: link %s carried %.0f bytes no put routes over it", tc.name, name, g)
				}
			}
			for _, l := range r.Links {
				if l.PeakGBps > l.CapGBps*(1+1e-9) {
					t.Errorf("%s: link %s peaked at %.3f GB/s above its %.3f", tc.name, l.Name, l.PeakGBps, l.CapGBps)
				}
			}
			for rk := 0; rk < n; rk++ {
				for b := 0; b < c; b++ {
					if r.Signals[rk][b] != uint64(n) || r.Signals[rk][c+b] != uint64(n-1) {
						t.Errorf("%s: rank %d block %d: data signal %d, barrier signal %d", tc.name, rk, b, r.Signals[rk][b], r.Signals[rk][c+b])
					}
				}
			}
		}
	}
}

// LinksByName sums the bytes of a GIN run's links per name.
func (r *GinResult) LinksByName() map[string]float64 {
	out := map[string]float64{}
	for _, l := range r.Links {
		out[l.Name] += l.Bytes
	}
	return out
}

// TestGinAlltoAllVsLinks compares the GIN all-to-all with the links'
// bound (computed from the topology) and with the simulator's p2p-schedule
// AlltoAll: neither may beat the links. On the default 2xH200 each rank
// sends half its buffer over its NVLink path; over the two ib hosts a
// host's NIC carries what its two GPUs send to the other host.
func TestGinAlltoAllVsLinks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ib    bool
		sizes []int64
	}{{"h200x2", false, []int64{1 << 20, 16 << 20, 256 << 20}}, {"ib2x2", true, []int64{1 << 20, 64 << 20}}} {
		var s *Simulator
		if tc.ib {
			s = newSim(t, ibTopo(t), nil)
		} else {
			s = newSim(t, loadSearch(t, "", 1), nil)
		}
		m := s.Machine
		n := m.Cluster.NRanks
		sys := m.Cluster.Nodes[0].System
		for _, size := range tc.sizes {
			slice := size / int64(n)
			var boundUs float64
			if !tc.ib {
				g0, g1 := sys.GPUByRank(0), sys.GPUByRank(1)
				bw := float64(g0.Path(g1).BW) * m.calib.Link(model.LinkNVL).Eff
				boundUs = float64(slice) / (bw * 1e3)
			} else {
				nets := sys.Nodes[model.NET]
				bw := float64(nets[0].NET.BW) * m.calib.Link(model.LinkNET).Eff
				boundUs = float64(4*slice) / (bw * 1e3) // two GPUs, two remote peers each
			}
			for _, c := range []int{1, 4, 16} {
				p, err := GinAlltoAllProgram(n, c, slice)
				if err != nil {
					t.Fatal(err)
				}
				r, err := m.RunGin(p)
				if err != nil {
					t.Fatal(err)
				}
				if r.KernelUs < boundUs {
					t.Errorf("%s %d B, %d contexts: GIN kernel %.2f us beats the links' %.2f us", tc.name, size, c, r.KernelUs, boundUs)
				}
				if c == 16 && r.KernelUs > 4*boundUs+50 {
					t.Errorf("%s %d B: GIN with 16 contexts takes %.2f us, far from the links' %.2f us", tc.name, size, r.KernelUs, boundUs)
				}
			}
			count, err := CountOf(model.CollAlltoAll, size, model.DtypeFP32, n)
			if err != nil {
				t.Fatal(err)
			}
			cr, err := s.Run(Call{Coll: model.CollAlltoAll, Count: count, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
			if err != nil {
				t.Fatal(err)
			}
			if cr.KernelUs < boundUs {
				t.Errorf("%s %d B: p2p AlltoAll kernel %.2f us beats the links' %.2f us", tc.name, size, cr.KernelUs, boundUs)
			}
		}
	}
}

// TestGinErrors: programs and topologies GIN cannot run are refused
// with a reason.
func TestGinErrors(t *testing.T) {
	s := newSim(t, ibTopo(t), nil)
	for _, tc := range []struct {
		p    *GinProgram
		want string
	}{
		{nil, "nil gin program"},
		{&GinProgram{NRanks: 3, Contexts: 1}, "3 ranks"},
		{&GinProgram{NRanks: 4, Contexts: 0}, "0 contexts"},
		{&GinProgram{NRanks: 4, Contexts: 1, Lanes: []GinLane{{Rank: 0, Ops: []GinOp{{Kind: GinPut, Peer: 9}}}}}, "peer 9"},
		{&GinProgram{NRanks: 4, Contexts: 1, Lanes: []GinLane{{Rank: 0, Ops: []GinOp{{Kind: GinPut, Peer: 1, Context: 1}}}}}, "context 1"},
		{&GinProgram{NRanks: 4, Contexts: 1, Lanes: []GinLane{{Rank: 0, Ops: []GinOp{{Kind: GinPut, Peer: 1, SignalAdd: 1, Signal: 2}}}}}, "signal 2"},
		{&GinProgram{NRanks: 4, Contexts: 1, Signals: 1, Lanes: []GinLane{{Rank: 2, Ops: []GinOp{{Kind: GinWaitSignal, Value: 1}}}}}, "deadlock"},
	} {
		_, err := s.Machine.RunGin(tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("want an error with %q, got %v", tc.want, err)
		}
	}
	// Two hosts with socket NICs only: no GIN between them.
	s2 := newSim(t, loadSearch(t, "", 2), nil)
	p, _ := GinAlltoAllProgram(4, 1, 1024)
	if _, err := s2.Machine.RunGin(p); err == nil || !strings.Contains(err.Error(), "socket") {
		t.Errorf("GIN over socket NICs: want an error naming the socket device, got %v", err)
	}
}
