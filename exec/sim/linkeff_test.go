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
