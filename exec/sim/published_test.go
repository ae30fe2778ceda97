package sim

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// publishedBounds are the tolerances on published nccl-tests results of
// 8-GPU machines (testdata/published, never fitted), predicted with the
// embedded calibration on a public topology dump of the same kind of
// machine from ../shared/topologies. Only the bandwidth-bound sizes are
// held to them (minbytes): the tables were timed with eager launches,
// several of one process driving all 8 GPUs, whose 35-45 us floor per
// call the simulator (which predicts graph-timed loops) does not model.
// The SendRecv rows of 32-256 MiB (4-16 channels) are 66-82% slow: NCCL
// moves about 20 GB/s per p2p channel there, the simulator 11; only the
// 32-channel sizes are bounded. Values at the time of writing: median /
// max |error| in the comments.
var publishedBounds = []struct {
	spec, topo  string
	median, max float64
}{
	{"h100x8-together-allreduce.tsv,minbytes=128M", h100Topo, 0.07, 0.09},     // 4.9, 6.3
	{"h100x8-together-allgather.tsv,minbytes=128M", h100Topo, 0.05, 0.09},     // 2.9, 6.6
	{"h100x8-together-reducescatter.tsv,minbytes=128M", h100Topo, 0.06, 0.11}, // 4.0, 8.3
	{"h100x8-xxrjun-allgather.tsv,minbytes=128M", h100Topo, 0.06, 0.10},       // 3.9, 7.2
	{"h100x8-xxrjun-reducescatter.tsv,minbytes=128M", h100Topo, 0.06, 0.12},   // 4.0, 9.0
	{"h100x8-xxrjun-alltoall.tsv,minbytes=128M", h100Topo, 0.05, 0.06},        // 3.2, 3.8
	{"h100x8-xxrjun-sendrecv.tsv,minbytes=512M", h100Topo, 0.07, 0.08},        // 4.6, 5.0
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
		root, _, err := model.ReadTopologyFile(topo)
		if err != nil {
			t.Fatal(err)
		}
		res, err := SearchTable(root, topo, 1, tb)
		if err != nil {
			t.Fatal(err)
		}
		ft := NewFitTable(tb, res)
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		med, mx := ErrorStats(rows)
		t.Logf("%s: median %.2f%% max %.2f%% over %d rows (bounds %.0f%%/%.0f%%)", tb.Name, 100*med, 100*mx, len(rows), 100*b.median, 100*b.max)
		var off strings.Builder
		for _, r := range rows {
			if math.Abs(r.Err) > b.max {
				fmt.Fprintf(&off, "\n  %-14s %12d %-5s %-6s %2d  meas %9.2f  sim %9.2f  err %+6.1f%%",
					r.Coll, r.Bytes, r.Algo, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
			}
		}
		if med > b.median || off.Len() > 0 {
			t.Errorf("%s (published, never fitted): median %.2f%% (bound %.0f%%), rows beyond %.0f%%:%s",
				tb.Name, 100*med, 100*b.median, 100*b.max, off.String())
		}
	}
}
