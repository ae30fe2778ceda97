package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

var importFixtures = filepath.Join("..", "..", "traces", "testdata", "import")

// TestTraceImportReplays imports a Chakra trace (ASTRA-sim's 4-NPU
// AllReduce) and an NCCL log (4 ranks on 2 hosts) and replays each on
// two nodes of a 2-GPU host as recorded, and on 128 of them mapped onto
// 256 ranks by --ranks: every imported call is simulated on every rank,
// and the same AllReduce over 128 nodes' network takes longer than over 2.
func TestTraceImportReplays(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join("..", "..", "..", "shared", "topologies", "nvlink-bridge-rtxa6000x2-10gbe.xml")
	chakra, err := filepath.Glob(filepath.Join(importFixtures, "chakra-allreduce-4npus", "*.et"))
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		args   []string
		calls  int
		perCal string
	}{
		{"chakra", append([]string{"--format", "chakra"}, chakra...), 1, "AllReduce"},
		{"nccl-log", []string{"--format", "nccl-log", filepath.Join(importFixtures, "nccl-log-world-4ranks.log")}, 5, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kernels := map[int]float64{}
			for _, nodes := range []int{2, 128} {
				out := filepath.Join(dir, tc.name+"-"+strconv.Itoa(nodes)+".parquet")
				args := append([]string{"import", "-o", out, "--ranks", strconv.Itoa(2 * nodes)}, tc.args...)
				var so, se bytes.Buffer
				require.NoError(t, runTrace(args, &so, &se), se.String())
				require.Contains(t, so.String(), "wrote "+out)
				so.Reset()
				pred := filepath.Join(dir, tc.name+"-"+strconv.Itoa(nodes)+".sim")
				require.NoError(t, runReplayRun([]string{out, "--topo", topo, "--nodes", strconv.Itoa(nodes), "--out", pred}, &so, &se), se.String())
				kernels[nodes] = summaryUs(t, so.String(), "predicted kernels")
				rows := readCallRows(t, pred+".calls.parquet")
				require.Len(t, rows, tc.calls*2*nodes)
				for _, r := range rows {
					require.Equal(t, traces.SourceSim, r.Source)
					require.EqualValues(t, 2*nodes, r.NRanks)
					if tc.perCal != "" {
						require.Equal(t, tc.perCal, r.Op)
					}
				}
			}
			require.Greater(t, kernels[128], kernels[2], "the same calls over 128 nodes' network")
		})
	}
}

// TestTraceImportErrors: usage errors, bad records naming their file, and
// nothing written when the import fails.
func TestTraceImportErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.log")
	require.NoError(t, os.WriteFile(bad, []byte("h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff\n"), 0o644))
	out := filepath.Join(dir, "out.parquet")
	chakra, _ := filepath.Glob(filepath.Join(importFixtures, "chakra-allreduce-4npus", "*.et"))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"import", "-o", out, bad}, "needs --format"},
		{[]string{"import", "--format", "csv", "-o", out, bad}, `--format "csv"`},
		{[]string{"import", "--format", "nccl-log", bad}, "-o OUT.parquet"},
		{[]string{"import", "--format", "nccl-log", "-o", out, bad}, bad + ":1: unreadable call line"},
		{[]string{"import", "--format", "nccl-log", "--dtype", "fp32", "-o", out, bad}, "apply to --format chakra"},
		{append([]string{"import", "--format", "chakra", "-o", out, "--ranks", "6"}, chakra...), "--ranks: cannot map a job of 4 ranks onto 6"},
		{[]string{"import", "--format", "kineto", "-o", out, bad}, bad + ": not a Kineto JSON trace"},
	} {
		var so, se bytes.Buffer
		err := runTrace(tc.args, &so, &se)
		require.ErrorContains(t, err, tc.want, "%v", tc.args)
		_, statErr := os.Stat(out)
		require.True(t, os.IsNotExist(statErr), "nothing written after %v", tc.args)
	}
}
