package sim

import (
	"path/filepath"
	"testing"
)

// publishedBounds are the tolerances on published nccl-tests results of
// 8-GPU machines (testdata/published, never fitted), predicted with the
// embedded calibration on a public topology dump of the same kind of
// machine from ../shared/topologies. Only the bandwidth-bound sizes are
// held to them (minbytes): the tables were timed with eager launches,
// several of one process driving all 8 GPUs, whose 35-45 us floor per
// call the simulator (which predicts graph-timed loops) does not model.
// SendRecv and AlltoAll depend on the p2p lane share: NCCL's half block
// for each direction, with Simple's per-block rates measured on one
// channel (before that, a share fitted to 0.86 made up for too low
// per-block rates; with the half share and those rates SendRecv on 4-16
// channels was 66-82% slow). AlltoAll over 7 peers is 5-11% fast. Their sizes
// stop at 1 GiB: with every NVLink saturated, each flow start and end
// reshares hundreds of flows, and the 2-16 GiB rows take minutes. Values
// at the time of writing: median / max |error| in the comments.
var publishedBounds = []struct {
	spec, topo  string
	median, max float64
}{
	{"h100x8-together-allreduce.tsv,minbytes=128M", h100Topo, 0.07, 0.09},          // 4.3, 5.9
	{"h100x8-together-allgather.tsv,minbytes=128M", h100Topo, 0.05, 0.09},          // 2.7, 6.4
	{"h100x8-together-reducescatter.tsv,minbytes=128M", h100Topo, 0.06, 0.11},      // 3.4, 7.8
	{"h100x8-xxrjun-allgather.tsv,minbytes=128M", h100Topo, 0.06, 0.10},            // 3.7, 7.1
	{"h100x8-xxrjun-reducescatter.tsv,minbytes=128M", h100Topo, 0.06, 0.12},        // 3.5, 8.5
	{"h100x8-xxrjun-alltoall.tsv,minbytes=128M,maxbytes=1G", h100Topo, 0.11, 0.13}, // 7.8, 10.9
	{"h100x8-xxrjun-sendrecv.tsv,minbytes=32M,maxbytes=1G", h100Topo, 0.08, 0.10},  // 4.6, 7.0
}

// h100Topo is the public 8x H100 SXM dump the H100 tables are compared on.
const h100Topo = "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"

// TestPublishedBandwidth predicts published results of 8x H100 machines
// and fails with a table of the rows beyond the bounds.
func TestPublishedBandwidth(t *testing.T) {
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range publishedBounds {
		tb, err := ParseTableSpec(filepath.Join(repoRoot(), "testdata", "published", b.spec))
		if err != nil {
			t.Fatal(err)
		}
		topo := filepath.Join(repoRoot(), "..", "shared", "topologies", b.topo)
		ft := NewFitTable(tb, searchOn(t, topo, 1, tb))
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		med, mx := ErrorStats(rows)
		t.Logf("%s: median %.2f%% max %.2f%% over %d rows (bounds %.0f%%/%.0f%%)", tb.Name, 100*med, 100*mx, len(rows), 100*b.median, 100*b.max)
		if off := offenders(rows, b.max); med > b.median || off != "" {
			t.Errorf("%s (published, never fitted): median %.2f%% (bound %.0f%%), rows beyond %.0f%%:%s",
				tb.Name, 100*med, 100*b.median, 100*b.max, off)
		}
	}
}
