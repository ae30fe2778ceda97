package sim

import (
	"math"
	"regexp"
	"slices"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// linkBoundTable is a table of two-GPU P2P Broadcasts of 8-32 MiB forced
// onto protocol p, whose rows are what calibration truth simulates: with
// the blocks' copies fast (linkBound), its sends are bound by the NVLinks
// (a Broadcast's root only sends), so their time follows the protocol's
// link efficiency.
func linkBoundTable(t *testing.T, p model.Protocol, truth *Calib) FitTable {
	t.Helper()
	rec := Recorded{Algo: model.AlgoRing, Proto: p}
	tb := &Table{Name: "bcast-" + p.String() + ".tsv", Harness: HarnessNCCLTests}
	for i, b := range []int64{8 << 20, 16 << 20, 32 << 20} {
		tb.Rows = append(tb.Rows, Measurement{Coll: model.CollBroadcast, Bytes: b, MeanUs: 1, Line: i + 1, Recorded: &rec})
	}
	ft := NewFitTable(tb, searchOn(t, h100x2Topo(), 1, tb))
	rows, err := ft.Compare(truth)
	if err != nil {
		t.Fatal(err)
	}
	for i := range ft.Rows {
		ft.Rows[i].MeanUs = rows[i].SimUs
	}
	return ft
}

// linkBound is quietCalib with every protocol's block copying 100 times
// as fast: only the links bound a large call.
func linkBound(t *testing.T) *Calib {
	c := quietCalib(t).Clone()
	for _, pc := range []*ProtoCalib{&c.LL, &c.LL128, &c.Simple} {
		pc.CopyGBps *= 100
		pc.GPUCopyGBps = 0
	}
	return c
}

// TestFitProtoLinkEff: a line protocol's link efficiency (ll.link_eff,
// ll128.link_eff) is a fitted constant: from 1, the fit finds the value
// that made a link-bound table (1.05 as the H200 pair's LL, 1.15, whose
// first step of the search, x1.65, lands past the bound, and 0.8), and
// stops at MaxProtoLinkEff where the table asks for more; Simple has no
// such constant (links.*.eff is its).
func TestFitProtoLinkEff(t *testing.T) {
	for _, tc := range []struct {
		proto       model.Protocol
		truth, want float64
	}{
		{model.ProtoLL, 1.05, 1.05},
		{model.ProtoLL, 1.15, 1.15},
		{model.ProtoLL128, 0.8, 0.8},
		{model.ProtoLL, 1.6, MaxProtoLinkEff},
	} {
		name := map[model.Protocol]string{model.ProtoLL: "ll", model.ProtoLL128: "ll128"}[tc.proto]
		truth := linkBound(t)
		truth.Proto(tc.proto).LinkEff = tc.truth
		ft := linkBoundTable(t, tc.proto, truth)
		start := linkBound(t)
		start.Proto(tc.proto).LinkEff = 1
		only := regexp.MustCompile(`^` + name + `\.link_eff$`).MatchString
		fr, err := FitTables([]FitTable{ft}, start, FitOptions{Only: only, MaxEvals: 200})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(fr.Params, []string{name + ".link_eff"}) {
			t.Fatalf("%s: fitted %v, want %s.link_eff alone", name, fr.Params, name)
		}
		if got := fr.Calib.Proto(tc.proto).LinkEff; math.Abs(got-tc.want) > 0.01*tc.want {
			t.Errorf("%s table made with link_eff %.2f: fitted %.3f, want %.2f", name, tc.truth, got, tc.want)
		}
	}
	truth := linkBound(t)
	ft := linkBoundTable(t, model.ProtoSimple, truth)
	_, err := FitTables([]FitTable{ft}, truth, FitOptions{Only: regexp.MustCompile(`^simple\.link_eff$`).MatchString, MaxEvals: 20})
	if err == nil {
		t.Error("simple.link_eff was fitted: Simple's wire efficiency is the links' own")
	}
}

// TestHostLinkEff: a line protocol's link efficiency over P2P (link_eff)
// and through host memory (host_link_eff) are apart: host_link_eff moves
// a link-bound SHM Broadcast and not a P2P one; at 0 it reads as
// link_eff, so that link_eff then moves both (the calibrations written
// before it simulate as they did).
func TestHostLinkEff(t *testing.T) {
	ll := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 2}
	const bytes = 8 << 20
	base := linkBound(t)
	base.LL.LinkEff, base.LL.HostLinkEff = 1, 0
	// host memory's own costs off, so that the links bound SHM too
	base.LL.HostRoundUs, base.LL.HostLoadUs, base.LL.HostStartUs, base.LL.HostTurnUs = 0, 0, 0, 0
	base.HostMemGBps, base.HostCacheMiB = 1e4, 0
	run := func(env map[string]string, set func(*Calib)) float64 {
		c := base.Clone()
		set(c)
		return simulateBytes(t, env, model.CollBroadcast, bytes, ll, c)
	}
	none := func(*Calib) {}
	for _, tc := range []struct {
		name      string
		set       func(*Calib)
		p2p, shm  bool // whether each moves
		p2pFaster bool
		shmFaster bool
	}{
		{"host_link_eff 2", func(c *Calib) { c.LL.HostLinkEff = 2 }, false, true, false, true},
		{"link_eff 1.2, host_link_eff 0", func(c *Calib) { c.LL.LinkEff = 1.2 }, true, true, true, true},
		{"link_eff 1.2, host_link_eff 1", func(c *Calib) { c.LL.LinkEff, c.LL.HostLinkEff = 1.2, 1 }, true, false, true, false},
	} {
		for _, side := range []struct {
			env           map[string]string
			moves, faster bool
		}{{nil, tc.p2p, tc.p2pFaster}, {shmEnv, tc.shm, tc.shmFaster}} {
			before, after := run(side.env, none), run(side.env, tc.set)
			moved := math.Abs(after-before) > 1e-6*before
			if moved != side.moves || side.moves && (after < before) != side.faster {
				t.Errorf("%s, settings %v: Broadcast LL of 8 MiB %.3f -> %.3f us; want moved %v (faster %v)",
					tc.name, side.env, before, after, side.moves, side.faster)
			}
		}
	}
}

// TestRecvLoadCost: recv_load_cost prices a lane's loads from its own
// receive buffer in GPU memory, apart from loads of the input: it slows
// a copy-bound P2P AllGather, not one over SHM (whose receives load host
// memory, host_load_cost), and at 0 it reads as load_cost.
func TestRecvLoadCost(t *testing.T) {
	ll := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 1}
	const bytes = 1 << 20
	run := func(env map[string]string, recv float64) float64 {
		c := quietCalib(t)
		c.LL.RecvLoadCost = recv
		return simulateBytes(t, env, model.CollAllGather, bytes, ll, c)
	}
	load := quietCalib(t).LL.loadCost()
	if a, b := run(nil, 0), run(nil, load); a != b {
		t.Errorf("P2P AllGather LL of 1 MiB: %.3f us with recv_load_cost 0, %.3f with load_cost's %.3f; want the same", a, b, load)
	}
	if a, b := run(nil, load), run(nil, load+2); b-a < 1 {
		t.Errorf("P2P AllGather LL of 1 MiB: %.3f us with recv_load_cost %.3f, %.3f with 2 more; want it slower", a, load, b)
	}
	if a, b := run(shmEnv, load), run(shmEnv, load+2); a != b {
		t.Errorf("SHM AllGather LL of 1 MiB: %.3f us with recv_load_cost %.3f, %.3f with 2 more; want the same", a, load, b)
	}
}
