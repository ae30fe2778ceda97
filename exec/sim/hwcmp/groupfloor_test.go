package hwcmp

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// TestStartDir: a recording's start is its directory less a trailing
// proto/ or heldout/.
func TestStartDir(t *testing.T) {
	for in, want := range map[string]string{
		"testdata/hw/h100x2/rerun30/heldout/p2p-allreduce-ll.json":     "testdata/hw/h100x2/rerun30",
		"testdata/hw/h100x2/rerun30/proto/net-allgather-ll.json":       "testdata/hw/h100x2/rerun30",
		"testdata/hw/h100x2/rerun30/net-allgather.json":                "testdata/hw/h100x2/rerun30",
		"testdata/hw/h100x2/twice/first/heldout/net-allgather-ll.json": "testdata/hw/h100x2/twice/first",
		"testdata/hw/h100x2/heldout/p2p-allreduce-ll.json":             "testdata/hw/h100x2",
	} {
		assert.Equal(t, want, StartDir(in), in)
	}
}

// TestGroupFloors: the starts of a machine are its recordings'
// directories; a group's floor is the median and largest of its cells'
// (Floors); a machine of one start has none, and our column's cells
// count for the calibrations' builds only.
func TestGroupFloors(t *testing.T) {
	ar := model.CollAllReduce
	rep := func(dir, kernel string, rows ...Row) Recorded {
		return Recorded{Machine: "m", Path: dir + "/heldout/x.json", Report: floorReport(dir, "heldout/x.json", kernel, rows...)}
	}
	recs := []Recorded{
		rep("m/a", "k1", floorRow(ar, 1024, 10, 10, 20, 11), floorRow(ar, 2048, 10, 10, 10, 10)),
		rep("m/b", "k1", floorRow(ar, 1024, 12, 12, 25, 11.5), floorRow(ar, 2048, 10, 10, 12, 10)),
		rep("m/c", "k2", floorRow(ar, 1024, 8, 8, 16, 12)),
		// another machine, one start: no floors
		{Machine: "n", Path: "n/a/x.json", Report: floorReport("n/a", "x.json", "k1", floorRow(ar, 1024, 10, 10, 20, 11))},
	}
	floor := func(ratios ...float64) float64 {
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, r := range ratios {
			lo, hi = min(lo, r), max(hi, r)
		}
		return (hi - lo) / (hi + lo)
	}
	got := GroupFloors(recs, []string{"k1"})
	nccl := GroupKey{"m", ColNCCL, "P2P", "Simple", "AllReduce"}
	ours := GroupKey{"m", ColOurs, "P2P", "Simple", "AllReduce"}
	require.Len(t, got, 2, "%+v", got)
	f1, f2 := floor(11.0/20, 11.5/25, 12.0/16), floor(1, 10.0/12)
	assert.Equal(t, 2, got[nccl].Cells)
	assert.InDelta(t, max(f1, f2), got[nccl].Max, 1e-12)
	assert.InDelta(t, (f1+f2)/2, got[nccl].Median, 1e-12)
	// ours: 1024 B on starts a and b (c's build k2 is another cell, of a
	// build no calibration was fitted on); 2048 B's ratios are both 1.
	assert.Equal(t, 2, got[ours].Cells)
	assert.InDelta(t, floor(1.1, 11.5/12), got[ours].Max, 1e-12)
	assert.InDelta(t, floor(1.1, 11.5/12)/2, got[ours].Median, 1e-12)
	// With k2 a calibration's build too, its one-start cell still has no floor.
	assert.Equal(t, got, GroupFloors(recs, []string{"k1", "k2"}))
	assert.Empty(t, GroupFloors(recs, nil)[ours])
}
