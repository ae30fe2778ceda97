package traces

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestWiden maps the split 4-rank NCCL log (a world communicator and two
// node pairs) onto 12 ranks: one world communicator over 12, six pairs,
// each call on every rank once, dependencies and peers inside their tile.
func TestWiden(t *testing.T) {
	job, err := ImportNCCLLog(readers(t, filepath.Join("testdata", "import", "nccl-log-split-4ranks.log")))
	require.NoError(t, err)
	wide, err := job.Widen(12)
	require.NoError(t, err)
	require.NoError(t, wide.Check())
	require.Equal(t, 12, wide.NRanks())
	require.Len(t, wide.Calls, 3*len(job.Calls))
	var pairs [][]int32
	for _, c := range wide.Comms {
		if len(c.Ranks) == 12 {
			require.Equal(t, uint64(0x9f2c6e1b5d7a3e41), c.ID, "the world communicator keeps its id")
			require.True(t, slices.IsSorted(c.Ranks))
			continue
		}
		pairs = append(pairs, c.Ranks)
	}
	require.ElementsMatch(t, [][]int32{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}}, pairs)
	for _, n := range []int{0, 3, 6, 1 << 20} {
		_, err := job.Widen(n)
		require.ErrorContains(t, err, "cannot map a job of 4 ranks")
	}
	// Chakra dependencies follow their tile's copy of the communicator.
	cj := &Job{Format: "chakra", Comms: []CommInfo{{ID: 1, Ranks: []int32{0, 1}}, {ID: 2, Ranks: []int32{0}}, {ID: 3, Ranks: []int32{1}}},
		Calls: []CallRow{
			{Comm: 2, Call: 0, Rank: 0, NRanks: 1, Op: "AllReduce"},
			{Comm: 1, Call: 0, Rank: 0, NRanks: 2, Op: "Send", Root: 1, Deps: FormatDeps([]Dep{{Comm: 2, Call: 0, GapNs: 5}})},
			{Comm: 1, Call: 0, Rank: 1, NRanks: 2, Op: "Recv", Root: 0},
			{Comm: 3, Call: 0, Rank: 0, NRanks: 1, Op: "AllReduce"},
		}}
	require.NoError(t, cj.Check())
	w, err := cj.Widen(4)
	require.NoError(t, err)
	require.NoError(t, w.Check())
	for _, c := range w.Calls {
		if c.Op == "Send" {
			require.Equal(t, c.Rank+1, c.Root, "the peer in the same tile")
		}
	}
}
