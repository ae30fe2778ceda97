package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

// gridTrace writes a call trace of a TP x DP job on hosts of tp ranks:
// steps training steps, each one AllReduce of tpCount elements on every
// TP group (stream 1) and one of dpCount on every DP group (stream 2),
// issued together.
func gridTrace(b testing.TB, path string, tp, dp, steps int, tpCount, dpCount int64) {
	var rows []traces.CallRow
	var comms []traces.CommInfo
	add := func(comm uint64, members []int, stream uint64, step int, count int64) {
		if step == 0 {
			c := traces.CommInfo{ID: comm}
			for _, g := range members {
				c.Ranks = append(c.Ranks, int32(g))
			}
			comms = append(comms, c)
		}
		for r := range members {
			rows = append(rows, traces.CallRow{Job: "bench", Comm: comm, Call: int64(step), Rank: int32(r), NRanks: int32(len(members)),
				Op: "AllReduce", Count: count, Datatype: "float32", RedOp: "sum", Root: -1, Stream: stream,
				EnqueueNs: int64(step) * 1000, StartNs: -1, EndNs: -1, Source: traces.SourceHW})
		}
	}
	for s := 0; s < steps; s++ {
		for t := 0; t < dp; t++ {
			m := make([]int, tp)
			for i := range m {
				m[i] = t*tp + i
			}
			add(0x100+uint64(t), m, 1, s, tpCount)
		}
		for d := 0; d < tp; d++ {
			m := make([]int, dp)
			for i := range m {
				m[i] = i*tp + d
			}
			add(0x200+uint64(d), m, 2, s, dpCount)
		}
	}
	meta, err := traces.EncodeComms(comms)
	require.NoError(b, err)
	w, err := traces.CreateCallFile(path, traces.WriterOptions{Metadata: map[string]string{traces.MetaComms: meta}})
	require.NoError(b, err)
	require.NoError(b, w.Append(rows...))
	require.NoError(b, w.Close())
}

// BenchmarkReplayRunGrid replays a TP=8 x DP=2 job on two A100 NVSwitch
// hosts: 20 steps of one TP AllReduce (16 MiB) on each of the 2 TP groups
// and one DP AllReduce (64 MiB) on each of the 8 DP groups (200 calls of
// 10 communicators), every call step-accurate in one engine.
func BenchmarkReplayRunGrid(b *testing.B) {
	dir := b.TempDir()
	trace := filepath.Join(dir, "grid.parquet")
	gridTrace(b, trace, 8, 2, 20, 4<<20, 16<<20)
	topo := filepath.Join("..", "..", "..", "shared", "topologies", "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml")
	for i := 0; i < b.N; i++ {
		var so, se bytes.Buffer
		err := runReplayRun([]string{trace, "--topo", topo, "--nodes", "2", "--out", filepath.Join(dir, fmt.Sprint("p", i))}, &so, &se)
		require.NoError(b, err, se.String())
		if i == 0 {
			b.Log("\n" + so.String())
		}
	}
}
