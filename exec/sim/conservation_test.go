package sim

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/refexec"
)

// h100XML is the 8x H100 NVSwitch host with 16 NICs (shared topologies).
func h100XML(t testing.TB) string {
	p := filepath.Join(repoRoot(), "..", "shared", "topologies", "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml")
	if _, err := os.Stat(p); err != nil {
		t.Skipf("H100 topology not available: %v", err)
	}
	return p
}

// checkConservation verifies that every connection carried the wire bytes
// the reference interpreter counts for the same Program, that every link
// carried exactly the bytes of the connections routed over it, and that no
// link ever ran above its capacity.
func checkConservation(t *testing.T, s *Simulator, p *model.Program, r *Result) {
	t.Helper()
	inputs := make([][]byte, p.NRanks)
	for i := range inputs {
		inputs[i] = make([]byte, p.InCount*int64(p.Dtype.Size()))
	}
	ref, err := refexec.Run(p, inputs, refexec.Options{})
	if err != nil {
		t.Fatalf("refexec: %v", err)
	}
	want := map[string]float64{}
	for i, cs := range r.Conns {
		if cs.WireBytes != ref.Conns[i].WireBytes || cs.Bytes != ref.Conns[i].Bytes || uint64(cs.Slices) != uint64(ref.Conns[i].Slices) {
			t.Errorf("conn %d (%d->%d ch %d): sim bytes %d wire %d slices %d, refexec %d %d %d", i, cs.From, cs.To, cs.Channel,
				cs.Bytes, cs.WireBytes, cs.Slices, ref.Conns[i].Bytes, ref.Conns[i].WireBytes, ref.Conns[i].Slices)
		}
		rt, err := s.Machine.route(cs.From, cs.To, cs.Channel)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range slices.Concat(rt.res, rt.recvRes) {
			want[s.Machine.res[id].name] += float64(cs.WireBytes)
		}
	}
	got := r.LinkBytesByName()
	for name, w := range want {
		if g := got[name]; math.Abs(g-w) > 1e-6*w+1e-6 {
			t.Errorf("link %s carried %.0f bytes, connections imply %.0f", name, g, w)
		}
	}
	for name, g := range got {
		if _, ok := want[name]; !ok && g != 0 {
			t.Errorf("link %s carried %.0f bytes no connection routes over it", name, g)
		}
	}
	for _, l := range r.Links {
		if l.PeakGBps > l.CapGBps*(1+1e-9) {
			t.Errorf("link %s peaked at %.3f GB/s above its %.3f GB/s", l.Name, l.PeakGBps, l.CapGBps)
		}
	}
}

func TestConservationH200(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	cases := []struct {
		coll  model.Collective
		algo  model.Algorithm
		proto model.Protocol
		count int64
	}{
		{model.CollAllReduce, model.AlgoRing, model.ProtoSimple, 3<<20 + 17},
		{model.CollAllReduce, model.AlgoRing, model.ProtoLL, 100000},
		{model.CollAllReduce, model.AlgoRing, model.ProtoLL128, 1 << 20},
		{model.CollAllReduce, model.AlgoTree, model.ProtoSimple, 1 << 20},
		{model.CollAllGather, model.AlgoRing, model.ProtoSimple, 1 << 20},
		{model.CollReduceScatter, model.AlgoRing, model.ProtoLL128, 1 << 18},
		{model.CollBroadcast, model.AlgoRing, model.ProtoSimple, 5 << 20},
		{model.CollReduce, model.AlgoRing, model.ProtoLL, 1 << 16},
	}
	for _, c := range cases {
		name := c.coll.String() + "/" + c.algo.String() + "/" + c.proto.String()
		t.Run(name, func(t *testing.T) {
			p, _, err := s.Program(Call{Coll: c.coll, Count: c.count, Dtype: model.DtypeFP32, Algo: c.algo, Proto: c.proto})
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Machine.Run(p)
			if err != nil {
				t.Fatal(err)
			}
			checkConservation(t, s, p, r)
		})
	}
}

func TestConservationMultiNodeH100(t *testing.T) {
	s := newSim(t, loadSearch(t, h100XML(t), 2), nil)
	for _, proto := range []model.Protocol{model.ProtoSimple, model.ProtoLL} {
		p, _, err := s.Program(Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: proto})
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Machine.Run(p)
		if err != nil {
			t.Fatal(err)
		}
		checkConservation(t, s, p, r)
		net := 0
		for _, c := range r.Conns {
			if c.Transport == "NET" {
				net++
			}
		}
		if net == 0 {
			t.Errorf("%s: two nodes but no NET connection", proto)
		}
		if r.TimeUs <= 0 {
			t.Errorf("%s: time %v", proto, r.TimeUs)
		}
	}
}

// zeroCalib has no latency and no overheads: only bandwidths remain.
func zeroCalib(copyGBps, nvlEff float64) *Calib {
	c, _ := DefaultCalib(90)
	c.LaunchUs = 0
	for _, pc := range []*ProtoCalib{&c.LL, &c.LL128, &c.Simple} {
		pc.StartUs, pc.OpOverheadUs, pc.SliceOverheadUs, pc.ReduceCost, pc.LinkEff, pc.CopyGBps = 0, 0, 0, 0, 1, copyGBps
		pc.FirstOpUs, pc.ThreadOpUs, pc.DirectUs, pc.RateThreads, pc.P2PSliceOverheadUs = 0, 0, 0, 0, 0
		pc.LoadCost, pc.RemoteStoreCost, pc.ForwardUs, pc.RelayUs, pc.RelayHoldUs = 1, 1, 0, 0, 0
	}
	for k, l := range c.Links {
		l.LatencyUs = 0
		if k == "NVL" {
			l.Eff = nvlEff
		}
		c.Links[k] = l
	}
	return c
}

// TestAnalyticPipeline: with one channel there is no contention, and a
// two-rank Simple broadcast is a two-stage pipeline of k slices: the root's
// copySend (3 loads/stores per byte, or the link) then the peer's recv (2).
// Its time is a + (k-1)*max(a,b) + b. With a remote store cost of 2.5 and
// a load cost of 0.5, the root's copySend costs 0.5+1+2.5 = 4 units and
// the recv 1.5.
func TestAnalyticPipeline(t *testing.T) {
	res := loadSearch(t, "", 1)
	const slice = 512 << 10 // Simple broadcast: one 512 KiB step per call
	const k = 10
	for _, tc := range []struct {
		name           string
		copyGBps, eff  float64
		load, remote   float64
		rootGBps, rcvB float64 // data rates of the two stages
	}{
		{"copy-bound", 30, 1, 1, 1, 10, 15},
		{"link-bound", 3000, 1e-2, 1, 1, 3.708, 1500},
		{"store-costs", 30, 1, 0.5, 2.5, 7.5, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := zeroCalib(tc.copyGBps, tc.eff)
			c.Simple.LoadCost, c.Simple.RemoteStoreCost = tc.load, tc.remote
			s := newSim(t, res, c)
			r, err := s.Run(Call{Coll: model.CollBroadcast, Count: k * slice / 4, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1})
			if err != nil {
				t.Fatal(err)
			}
			if r.NChannels != 1 {
				t.Fatalf("ran on %d channels", r.NChannels)
			}
			a := slice / (tc.rootGBps * 1e3) // µs
			b := slice / (tc.rcvB * 1e3)
			want := a + (k-1)*max(a, b) + b
			if math.Abs(r.TimeUs-want) > 1e-3*want {
				t.Errorf("time %.4f us, analytic pipeline %.4f us", r.TimeUs, want)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	s := newSim(t, loadSearch(t, h100XML(t), 1), nil)
	var first CallResult
	for i := 0; i < 3; i++ {
		r, err := s.Run(Call{Coll: model.CollAllReduce, Count: 12345679, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = r
			continue
		}
		if !reflect.DeepEqual(first.Result, r.Result) {
			t.Fatalf("run %d differs from run 0: %.6f vs %.6f us", i, r.TimeUs, first.TimeUs)
		}
	}
}

func TestDeadlockIsReported(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	p, _, err := s.Program(Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1})
	if err != nil {
		t.Fatal(err)
	}
	// Both ranks send their first chunk last, after receiving: each waits
	// for the other's first step forever (the steps still add up, so
	// Program.Validate lets it through).
	for i := range p.Lanes {
		l := &p.Lanes[i]
		l.Ops = append(l.Ops[1:], l.Ops[0])
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("the reordered Program is refused before it runs: %v", err)
	}
	_, err = s.Machine.Run(p)
	if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("want a deadlock naming rank 1, got %v", err)
	}
}

func TestCalibFileErrors(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"version": 3}`, "version 3"},
		{`{"version": 1, "bogus": 1}`, "unknown field"},
		{`{"version": 1, "launch_us": -1}`, "launch_us"},
		{`not json`, "invalid character"},
	} {
		_, err := ParseCalib(strings.NewReader(tc.json), "x.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.json") {
			t.Errorf("%s: want error with %q, got %v", tc.json, tc.want, err)
		}
	}
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	d, err := ParseCalib(strings.NewReader(b.String()), "roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, d) {
		t.Error("calibration changed in a JSON round trip")
	}
}

// TestCalibWith: settings change exactly the constants they name, of any
// type and depth, leave the receiver alone, and a bad key, value or bound
// is an error naming the setting.
func TestCalibWith(t *testing.T) {
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	before := c.Clone()
	d, err := c.With([]string{"ll.copy_GBps=13.5", "ll.threads=256", "shm_read_leg=false", "links.NVL.eff=0.9", "net_socket.host_exp=2"})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c, before) {
		t.Error("With changed its receiver")
	}
	want := c.Clone()
	want.LL.CopyGBps, want.LL.Threads, want.SHMReadLeg, want.NetSocket.HostExp = 13.5, 256, false, 2
	l := want.Links["NVL"]
	l.Eff = 0.9
	want.Links["NVL"] = l
	if !reflect.DeepEqual(d, want) {
		t.Errorf("With: got LL %+v, want %+v", d.LL, want.LL)
	}
	if e, err := c.With(nil); err != nil || !reflect.DeepEqual(e, c) {
		t.Errorf("With(nil): %v, or the calibration changed", err)
	}
	for _, tc := range []struct{ set, want string }{
		{"ll.bogus=1", "unknown field"},
		{"ll.copy_GBps=-1", "ll.copy_GBps"},
		{"ll.threads=1.5", "threads"},
		{"ll.copy_GBps=fast", "not a JSON value"},
		{"launch_us.x=1", "not a group"},
		{"ll.copy_GBps", "KEY=VALUE"},
		{"ll.copy_gbps=3", "case-sensitive"},
	} {
		if _, err := c.With([]string{tc.set}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("With(%q): want an error with %q, got %v", tc.set, tc.want, err)
		}
	}
}

func TestBadPrograms(t *testing.T) {
	s := newSim(t, loadSearch(t, "", 1), nil)
	if _, err := s.Machine.Run(nil); err == nil {
		t.Error("nil program accepted")
	}
	p, _, err := s.Program(Call{Coll: model.CollAllReduce, Count: 1024, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
	if err != nil {
		t.Fatal(err)
	}
	p.NRanks = 3
	if _, err := s.Machine.Run(p); err == nil {
		t.Error("program with the wrong rank count accepted")
	}
	if _, err := s.Run(Call{Coll: model.CollSendRecv, Count: 4, Dtype: model.DtypeFP32, Algo: -1, Proto: model.ProtoLL128}); err == nil {
		t.Error("LL128 sendrecv accepted")
	}
	if _, err := s.Run(Call{Coll: model.CollAlltoAll, Count: 4, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: -1}); err == nil {
		t.Error("tree alltoall accepted")
	}
	if _, err := s.Run(Call{Coll: model.CollAllGather, Count: 4, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: -1}); err == nil {
		t.Error("tree allgather accepted")
	}
}

// TestP2PConservation: AlltoAll and SendRecv Programs (p2p schedule) carry
// the bytes the reference interpreter counts, over links within capacity.
func TestP2PConservation(t *testing.T) {
	for _, nodes := range []int{1, 2} {
		s := newSim(t, loadSearch(t, h100XML(t), nodes), nil)
		for _, c := range []Call{
			{Coll: model.CollAlltoAll, Count: 100000, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
			{Coll: model.CollAlltoAll, Count: 1000, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
			{Coll: model.CollSendRecv, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
			{Coll: model.CollSendRecv, Count: 5000, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		} {
			p, cr, err := s.Program(c)
			if err != nil {
				t.Fatal(err)
			}
			r, err := s.Machine.Run(p)
			if err != nil {
				t.Fatalf("%s count %d on %d node(s): %v", c.Coll, c.Count, nodes, err)
			}
			if r.TimeUs <= 0 || cr.NChannels == 0 {
				t.Errorf("%s: time %v on %d channels", c.Coll, r.TimeUs, cr.NChannels)
			}
			checkConservation(t, s, p, r)
		}
	}
}
