package main

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

// jobTrace writes a call trace of one AllReduce per communicator, every
// one enqueued at time 0 on a stream of its own: comms[i] lists the job
// ranks of communicator i by rank in it.
func jobTrace(t *testing.T, path string, count int64, comms ...[]int) {
	t.Helper()
	w, err := traces.CreateCallFile(path, traces.WriterOptions{})
	require.NoError(t, err)
	for i, members := range comms {
		for r, g := range members {
			row := traces.CallRow{Job: "test", Comm: 0xc0 + uint64(i), Call: 0, Rank: int32(r), NRanks: int32(len(members)),
				Op: "AllReduce", Count: count, Datatype: "float32", RedOp: "sum", Root: -1, Stream: uint64(100 + i),
				StartNs: -1, EndNs: -1, Source: traces.SourceHW}
			row.SetGlobalRank(int32(g))
			require.NoError(t, w.Append(row))
		}
	}
	require.NoError(t, w.Close())
}

// commSpans replays a trace and returns each communicator's predicted span
// (ns) from the predicted call trace, checking its rows keep their
// communicator, ranks and job ranks.
func commSpans(t *testing.T, trace, topo string, nodes string) map[uint64]int64 {
	t.Helper()
	out := trace + ".pred"
	var so, se bytes.Buffer
	require.NoError(t, runReplayRun([]string{trace, "--topo", topo, "--nodes", nodes, "--out", out}, &so, &se), se.String())
	require.Contains(t, so.String(), "communicator(s) in one engine")
	rec := map[[2]int32]traces.CallRow{}
	for _, r := range readCallRows(t, trace) {
		rec[[2]int32{int32(r.Comm), r.Rank}] = r
	}
	lo, hi := map[uint64]int64{}, map[uint64]int64{}
	pred := readCallRows(t, out+".calls.parquet")
	require.Len(t, pred, len(rec))
	for _, p := range pred {
		r, ok := rec[[2]int32{int32(p.Comm), p.Rank}]
		require.True(t, ok, "predicted row of communicator %#x rank %d not recorded", p.Comm, p.Rank)
		require.Equal(t, r.GlobalRank(), p.GlobalRank())
		require.Equal(t, traces.SourceSim, p.Source)
		if l, ok := lo[p.Comm]; !ok || p.StartNs < l {
			lo[p.Comm] = p.StartNs
		}
		hi[p.Comm] = max(hi[p.Comm], p.EndNs)
	}
	spans := map[uint64]int64{}
	for c := range lo {
		spans[c] = hi[c] - lo[c]
	}
	return spans
}

// TestReplayRunSharesLinksAcrossCommunicators: two communicators of one
// GPU per host (one IB NIC per host) issuing a 128 MiB AllReduce at the
// same time each take about twice as long as one alone; two on disjoint
// GPU pairs of an NVSwitch host take what one alone takes.
func TestReplayRunSharesLinksAcrossCommunicators(t *testing.T) {
	dir := t.TempDir()
	topos := filepath.Join("..", "..", "..", "shared", "topologies")
	pcie := filepath.Join(topos, "pcie-rtx3090x8-2socket-1ib.xml")
	jobTrace(t, filepath.Join(dir, "one.parquet"), 32<<20, []int{0, 8})
	jobTrace(t, filepath.Join(dir, "two.parquet"), 32<<20, []int{0, 8}, []int{1, 9})
	one := commSpans(t, filepath.Join(dir, "one.parquet"), pcie, "2")
	two := commSpans(t, filepath.Join(dir, "two.parquet"), pcie, "2")
	require.Len(t, two, 2)
	for c, span := range two {
		ratio := float64(span) / float64(one[0xc0])
		t.Logf("communicator %#x: %d ns together, %d ns alone: x%.3f", c, span, one[0xc0], ratio)
		assert.GreaterOrEqual(t, ratio, 1.8, "communicator %#x", c)
		assert.LessOrEqual(t, ratio, 2.0, "communicator %#x", c)
	}

	a100 := filepath.Join(topos, "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml")
	jobTrace(t, filepath.Join(dir, "nvs1.parquet"), 32<<20, []int{0, 1})
	jobTrace(t, filepath.Join(dir, "nvs2.parquet"), 32<<20, []int{0, 1}, []int{3, 2})
	alone := commSpans(t, filepath.Join(dir, "nvs1.parquet"), a100, "1")
	both := commSpans(t, filepath.Join(dir, "nvs2.parquet"), a100, "1")
	for c, span := range both {
		assert.InEpsilon(t, float64(alone[0xc0]), float64(span), 1e-3, "communicator %#x", c)
	}
}

func TestReplayRunCommunicatorErrors(t *testing.T) {
	dir := t.TempDir()
	pcie := filepath.Join("..", "..", "..", "shared", "topologies", "pcie-rtx3090x8-2socket-1ib.xml")
	bad := filepath.Join(dir, "dup.parquet")
	jobTrace(t, bad, 1024, []int{3, 3})
	var so, se bytes.Buffer
	err := runReplayRun([]string{bad, "--topo", pcie, "--out", filepath.Join(dir, "x")}, &so, &se)
	require.ErrorContains(t, err, "ranks 0 and 1 are both job rank 3")
	far := filepath.Join(dir, "far.parquet")
	jobTrace(t, far, 1024, []int{0, 12})
	err = runReplayRun([]string{far, "--topo", pcie, "--out", filepath.Join(dir, "y")}, &so, &se)
	require.ErrorContains(t, err, "rank 1 is job rank 12 but the topology has 8 rank(s)")
}
