package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/profiler"
	"github.com/twinccl/twinccl/traces"
)

// writeProfiledPart writes one process's call trace as the profiler plugin
// does: its rows, and in the metadata only its own ranks of each
// communicator (profiler.MetaComms).
func writeProfiledPart(t *testing.T, path string, rows []traces.CallRow, comms []profiler.CommMeta) {
	t.Helper()
	meta := map[string]string{}
	if comms != nil {
		b, err := json.Marshal(comms)
		require.NoError(t, err)
		meta[profiler.MetaComms] = string(b)
	}
	w, err := traces.CreateCallFile(path, traces.WriterOptions{Metadata: meta})
	require.NoError(t, err)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
}

// TestTraceMergeProfiledComms: merging the profiler plugin's per-process
// traces writes the job's communicators (traces.MetaComms), which no part
// knows alone: a world communicator over global ranks 0..3 and two
// two-rank groups {0,2} and {1,3} whose ranks the processes hold.
func TestTraceMergeProfiledComms(t *testing.T) {
	dir := t.TempDir()
	const world, even, odd = 0xa1, 0xb2, 0xc3
	var parts []string
	for g := int32(0); g < 4; g++ {
		sub := uint64(even)
		if g%2 == 1 {
			sub = odd
		}
		comms := []profiler.CommMeta{
			{Comm: fmt.Sprintf("%#x", world), Rank: g, NRanks: 4, GlobalRank: g},
			{Comm: fmt.Sprintf("%#x", sub), Rank: g / 2, NRanks: 2, GlobalRank: g},
		}
		rows := []traces.CallRow{
			{Comm: world, Call: 0, Rank: g, NRanks: 4, Op: "AllReduce", Count: 1024, Datatype: "float32", RedOp: "sum", Root: -1},
			{Comm: sub, Call: 0, Rank: g / 2, NRanks: 2, Op: "AllGather", Count: 256, Datatype: "float32", Root: -1},
		}
		p := filepath.Join(dir, fmt.Sprintf("rank%d.parquet", g))
		writeProfiledPart(t, p, rows, comms)
		parts = append(parts, p)
	}
	out := filepath.Join(dir, "job.parquet")
	var so, se bytes.Buffer
	require.NoError(t, runTrace(append([]string{"merge", "-o", out}, parts...), &so, &se), se.String())
	r, err := traces.OpenCallFile(out)
	require.NoError(t, err)
	defer r.Close()
	got, err := traces.DecodeComms(r.Info().Metadata[traces.MetaComms])
	require.NoError(t, err)
	assert.Equal(t, []traces.CommInfo{
		{ID: world, Ranks: []int32{0, 1, 2, 3}},
		{ID: even, Ranks: []int32{0, 2}},
		{ID: odd, Ranks: []int32{1, 3}},
	}, got)

	// A job's parts are merged whole: a missing process, or parts of
	// which only some are the plugin's, is an error naming why.
	err = runTrace([]string{"merge", "-o", filepath.Join(dir, "x.parquet"), parts[0], parts[1], parts[2]}, &so, &se)
	assert.ErrorContains(t, err, "no part holds its rank")
	plain := filepath.Join(dir, "plain.parquet")
	writeProfiledPart(t, plain, []traces.CallRow{{Comm: 0xdd, Rank: 0, NRanks: 1, Op: "AllReduce", Count: 1, Datatype: "float32", Root: -1}}, nil)
	err = runTrace([]string{"merge", "-o", filepath.Join(dir, "y.parquet"), parts[0], plain}, &so, &se)
	assert.ErrorContains(t, err, "1 of 2 parts were written by the profiler plugin")
}
