package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// jobTrace writes a call trace of one AllReduce per communicator, every
// one enqueued at time 0 on a stream of its own: comms[i] lists the job
// ranks of communicator i by rank in it.
func jobTrace(t *testing.T, path string, count int64, comms ...[]int) {
	t.Helper()
	var list []traces.CommInfo
	var rows []traces.CallRow
	for i, members := range comms {
		c := traces.CommInfo{ID: 0xc0 + uint64(i)}
		for r, g := range members {
			rows = append(rows, traces.CallRow{Job: "test", Comm: c.ID, Call: 0, Rank: int32(r), NRanks: int32(len(members)),
				Op: "AllReduce", Count: count, Datatype: "float32", RedOp: "sum", Root: -1, Stream: uint64(100 + i),
				StartNs: -1, EndNs: -1, Source: traces.SourceHW})
			c.Ranks = append(c.Ranks, int32(g))
		}
		list = append(list, c)
	}
	meta, err := traces.EncodeComms(list)
	require.NoError(t, err)
	w, err := traces.CreateCallFile(path, traces.WriterOptions{Metadata: map[string]string{traces.MetaComms: meta}})
	require.NoError(t, err)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
}

// commSpans replays a trace and returns each communicator's predicted span
// (ns) from the predicted call trace, checking its rows keep their
// communicator and ranks.
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
		require.Equal(t, r.NRanks, p.NRanks)
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
	require.ErrorContains(t, err, "ranks 0 and 1 are both global rank 3")
	far := filepath.Join(dir, "far.parquet")
	jobTrace(t, far, 1024, []int{0, 12})
	err = runReplayRun([]string{far, "--topo", pcie, "--out", filepath.Join(dir, "y")}, &so, &se)
	require.ErrorContains(t, err, "rank 1 is job rank 12 but the topology has 8 rank(s)")
}

// TestReplayRunRecordedGrid replays the recorded TP=2 x DP=2 job of the
// host device (testdata/jobs) on two hosts of two RTX 4090 with its
// streams back to back: every call of the four communicators is
// predicted, on its communicator's ranks and job ranks, and none runs
// faster than alone on its communicator (sharing only slows calls down).
func TestReplayRunRecordedGrid(t *testing.T) {
	trace := filepath.Join("..", "..", "testdata", "jobs", "host-tp2-dp2.parquet")
	topo := filepath.Join("..", "..", "..", "shared", "topologies", "pcie-rtx4090x2-cx4-2x100g.xml")
	out := filepath.Join(t.TempDir(), "pred")
	var so, se bytes.Buffer
	require.NoError(t, runReplayRun([]string{trace, "--topo", topo, "--nodes", "2", "--host-gaps=false", "--out", out}, &so, &se), se.String())
	require.Contains(t, so.String(), "16 call(s) of 4 communicator(s) in one engine")
	rec := readCallRows(t, trace)
	pred := readCallRows(t, out+".calls.parquet")
	require.Len(t, pred, len(rec))

	// Each call alone on its communicator.
	info, err := traces.OpenCallFile(trace)
	require.NoError(t, err)
	comms, err := traces.DecodeComms(info.Info().Metadata[traces.MetaComms])
	info.Close()
	require.NoError(t, err)
	require.Len(t, comms, 4)
	members := map[uint64][]int{}
	for _, c := range comms {
		for _, g := range c.Ranks {
			members[c.ID] = append(members[c.ID], int(g))
		}
	}
	alone := map[[2]uint64]float64{} // comm, count -> ns
	for _, p := range pred {
		k := [2]uint64{p.Comm, uint64(p.Count)}
		if _, ok := alone[k]; ok {
			continue
		}
		res, err := searchTopologyRanks([]string{topo}, 2, members[p.Comm], nil)
		require.NoError(t, err)
		s, _, _, _, err := newSimulator(res, "", sim.ModeAccurate, false, &se)
		require.NoError(t, err)
		cr, err := s.Run(sim.Call{Coll: model.CollAllReduce, Count: p.Count, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: -1, Proto: -1})
		require.NoError(t, err)
		alone[k] = cr.KernelUs * 1e3
	}
	took := map[[2]uint64]int64{} // comm, call -> the call's time on its slowest rank
	for _, p := range pred {
		require.Contains(t, members, p.Comm)
		k := [2]uint64{p.Comm, uint64(p.Call)}
		took[k] = max(took[k], p.EndNs-p.StartNs)
	}
	for _, p := range pred {
		assert.GreaterOrEqual(t, float64(took[[2]uint64{p.Comm, uint64(p.Call)}]), alone[[2]uint64{p.Comm, uint64(p.Count)}]-2,
			"communicator %#x call %d (count %d)", p.Comm, p.Call, p.Count)
	}
	// The streams overlapped: some rank ran calls of two communicators at once.
	overlap := false
	for _, a := range pred {
		for _, b := range pred {
			same := members[a.Comm][a.Rank] == members[b.Comm][b.Rank]
			overlap = overlap || a.Comm != b.Comm && same && a.StartNs < b.EndNs && b.StartNs < a.EndNs
		}
	}
	require.True(t, overlap, "no two communicators' calls overlapped")

	// Deterministic: the same replay again writes the same bytes.
	again := filepath.Join(t.TempDir(), "pred")
	require.NoError(t, runReplayRun([]string{trace, "--topo", topo, "--nodes", "2", "--host-gaps=false", "--out", again}, &so, &se), se.String())
	for _, suffix := range []string{".calls.parquet", ".events.parquet"} {
		a, err := os.ReadFile(out + suffix)
		require.NoError(t, err)
		b, err := os.ReadFile(again + suffix)
		require.NoError(t, err)
		require.True(t, bytes.Equal(a, b), suffix)
	}
}

// TestReplayRunLoneCallsAsInJob: calls of two communicators over the same
// two ranks, one stream, never overlap; each runs by itself (as "replay
// sim" would) and ends exactly where the shared engine ends it.
func TestReplayRunLoneCallsAsInJob(t *testing.T) {
	dir := t.TempDir()
	trace := filepath.Join(dir, "serial.parquet")
	var rows []traces.CallRow
	comms := []traces.CommInfo{{ID: 0xa, Ranks: []int32{0, 8}}, {ID: 0xb, Ranks: []int32{8, 0}}}
	for i := range 6 {
		c := comms[i%2]
		for r := range c.Ranks {
			rows = append(rows, traces.CallRow{Job: "t", Comm: c.ID, Call: int64(i / 2), Rank: int32(r), NRanks: 2, Op: "AllReduce",
				Count: int64(1<<10) << (2 * i), Datatype: "float32", RedOp: "sum", Root: -1, EnqueueNs: int64(i) * 1000, StartNs: -1, EndNs: -1,
				Source: traces.SourceHW})
		}
	}
	meta, err := traces.EncodeComms(comms)
	require.NoError(t, err)
	w, err := traces.CreateCallFile(trace, traces.WriterOptions{Metadata: map[string]string{traces.MetaComms: meta}})
	require.NoError(t, err)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
	topo := filepath.Join("..", "..", "..", "shared", "topologies", "pcie-rtx3090x8-2socket-1ib.xml")
	run := func(lone bool, out string) []traces.CallRow {
		replayLone = lone
		defer func() { replayLone = true }()
		var so, se bytes.Buffer
		require.NoError(t, runReplayRun([]string{trace, "--topo", topo, "--nodes", "2", "--mode", "accurate", "--out", out}, &so, &se), se.String())
		return readCallRows(t, out+".calls.parquet")
	}
	alone, job := run(true, filepath.Join(dir, "alone")), run(false, filepath.Join(dir, "job"))
	require.Len(t, alone, len(rows))
	require.Equal(t, len(job), len(alone))
	byKey := map[[3]int64]traces.CallRow{}
	for _, r := range job {
		byKey[[3]int64{int64(r.Comm), r.Call, int64(r.Rank)}] = r
	}
	for _, a := range alone {
		j := byKey[[3]int64{int64(a.Comm), a.Call, int64(a.Rank)}]
		require.InDelta(t, j.StartNs, a.StartNs, 1, "communicator %#x call %d rank %d", a.Comm, a.Call, a.Rank)
		require.InDelta(t, j.EndNs, a.EndNs, 1, "communicator %#x call %d rank %d", a.Comm, a.Call, a.Rank)
		require.Equal(t, j.Algorithm, a.Algorithm)
		require.Equal(t, j.Protocol, a.Protocol)
		require.Equal(t, j.Channels, a.Channels)
	}
}
