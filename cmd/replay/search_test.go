package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/search"
)

// TestSearchCommandMatchesNCCL runs `replay search` on a two-node ground
// truth case and checks its graph search lines, its NCCL_GRAPH_DUMP_FILE
// output and its JSON document against NCCL's.
func TestSearchCommandMatchesNCCL(t *testing.T) {
	var c groundtruth.Case
	for _, gc := range groundtruth.Cases(t) {
		if gc.Name == "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.nodes2" {
			c = gc
		}
	}
	require.NotEmpty(t, c.Name, "ground-truth case missing")
	dir := t.TempDir()
	jsonPath, graphPath := filepath.Join(dir, "doc.json"), filepath.Join(dir, "graphs.xml")
	out, stderr, code := runReplay(t, "search", c.Input, "--nodes", "2", "--json", jsonPath, "--graph-out", graphPath)
	require.Equal(t, 0, code, stderr)

	txt, err := os.ReadFile(c.Text)
	require.NoError(t, err)
	for _, line := range strings.Split(string(txt), "\n") {
		if strings.Contains(line, "NCCL INFO Pattern") || strings.Contains(line, "NCCL INFO Channel ") ||
			strings.Contains(line, "NCCL INFO Trees") || strings.HasPrefix(line, "channel ") || strings.HasPrefix(line, "tune ") {
			require.Contains(t, out, line+"\n")
		}
	}

	wantGraphs, err := os.ReadFile(c.Graph)
	require.NoError(t, err)
	gotGraphs, err := os.ReadFile(graphPath)
	require.NoError(t, err)
	require.Equal(t, string(wantGraphs), string(gotGraphs))

	var want, got search.Document
	data, err := os.ReadFile(c.JSON)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &want))
	data, err = os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &got))
	require.Equal(t, want.Channels, got.Channels)
	require.Equal(t, want.Tuning, got.Tuning)
	for i := range want.Nodes {
		require.Equal(t, want.Nodes[i].Graphs, got.Nodes[i].Graphs)
	}
}

func TestSearchJSONToStdout(t *testing.T) {
	out, stderr, code := runReplay(t, "search", "--json", "-")
	require.Equal(t, 0, code, stderr)
	var doc search.Document
	require.NoError(t, json.Unmarshal([]byte(out), &doc), "stdout must hold only the JSON document")
	require.Equal(t, 2, doc.NRanks)
	require.Equal(t, 24, doc.Channels.NChannels)
}

func TestTuneCommand(t *testing.T) {
	out, stderr, code := runReplay(t, "tune", "--op", "allreduce", "--bytes", "64M")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "AllReduce of 67108864 bytes (NCCL count 16777216 of float32)")
	require.Contains(t, out, "choice: Ring/Simple, 24 channel(s)")
	require.Contains(t, out, "predicted time: ")

	out, stderr, code = runReplay(t, "tune", "--op", "allreduce", "--bytes", "8")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "choice: Ring/LL, 1 channel(s)")

	out, stderr, code = runReplay(t, "tune", "--op=reducescatter", "--bytes=1K", "--dtype", "bfloat16")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "ReduceScatter of 1024 bytes (NCCL count 256 of bfloat16)")
}

func TestSearchAndTuneErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"tune", "--bytes", "1M"}, 2, "--op and --bytes are required"},
		{[]string{"tune", "--op", "alltoall", "--bytes", "1M"}, 2, `--op "alltoall"`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "12Q"}, 2, `"12Q" is not a size`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "6", "--dtype", "float32"}, 2, "not a whole number of 4-byte elements"},
		{[]string{"tune", "--op", "allgather", "--bytes", "3", "--dtype", "int8"}, 2, "do not split evenly over 2 ranks"},
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M", "--dtype", "float128"}, 2, "--dtype"},
		{[]string{"search", "--nodes", "0"}, 2, "--nodes 0"},
		{[]string{"search", "a.xml", "b.xml"}, 2, "at most one topology file"},
		{[]string{"search", "/nonexistent/topo.xml"}, 1, "/nonexistent/topo.xml"},
	} {
		_, stderr, code := runReplay(t, tc.args...)
		require.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.msg, "%v", tc.args)
	}
}

func TestSearchBadEnvironment(t *testing.T) {
	t.Setenv("NCCL_CROSS_NIC", "7")
	t.Setenv("NCCL_PROTO", "LL129")
	_, stderr, code := runReplay(t, "search")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "NCCL_CROSS_NIC")
	require.Contains(t, stderr, "NCCL_PROTO")
}
