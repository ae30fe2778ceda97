package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

// TestRanksWholeHostEqualsSingleHost: "search --ranks" over one whole host
// of a two-host job writes the document of the single-host job.
func TestRanksWholeHostEqualsSingleHost(t *testing.T) {
	file := filepath.Join("..", "..", "..", "shared", "topologies", "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml")
	want, stderr, code := runReplay(t, "search", file, "--json", "-")
	require.Equal(t, 0, code, stderr)
	got, stderr, code := runReplay(t, "search", file, "--nodes", "2", "--ranks", "8-15", "--json", "-")
	require.Equal(t, 0, code, stderr)
	require.JSONEq(t, want, got)

	out, stderr, code := runReplay(t, "topo", file, "--nodes", "2", "--ranks", "3,11")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, ": 2 rank(s) on 2 node(s)")
}

func TestRanksBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"search", "--ranks", "0,0"}, 2, `--ranks "0,0": rank 0 appears twice`},
		{[]string{"topo", "--ranks", "1-"}, 2, `--ranks "1-": "1-" is not an increasing range`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M", "--ranks", "0,2"}, 1, "communicator rank 1 is job rank 2, outside the job's ranks 0..1"},
		{[]string{"sim", "--ranks", "x"}, 2, `--ranks "x": "x" is not a rank`},
	} {
		_, stderr, code := runReplay(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

// TestRanksSimTraceReplays: "replay sim --ranks" records the job ranks of
// its communicator; "replay run" replays that trace on the whole job's
// topology as the communicator it came from, with the same kernel times.
func TestRanksSimTraceReplays(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join("..", "..", "..", "shared", "topologies", "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml")
	prefix := filepath.Join(dir, "tp")
	_, stderr, code := runReplay(t, "sim", "--topo", file, "--nodes", "2", "--ranks", "9,3", "--op", "allreduce", "-b", "1M", "-e", "4M", "-f", "4", "--trace", prefix)
	require.Equal(t, 0, code, stderr)
	r, err := traces.OpenCallFile(prefix + ".calls.parquet")
	require.NoError(t, err)
	require.Equal(t, `[{"comm":"0x0","ranks":[9,3]}]`, r.Info().Metadata[traces.MetaComms])
	r.Close()
	out, stderr, code := runReplay(t, "run", prefix+".calls.parquet", "--topo", file, "--nodes", "2", "--out", filepath.Join(dir, "pred"))
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "9,3")
	rec, pred := summaryUs(t, out, "recorded kernels"), summaryUs(t, out, "predicted kernels")
	require.InEpsilon(t, rec, pred, 1e-3, out)
}
