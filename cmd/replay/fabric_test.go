package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSimFabric: replay sim --fabric reads the file and the simulator
// routes through it: two DGX H100 under one leaf each, 4:1 towards the
// spine, slow an AlltoAll down against the flat network; replay run takes
// the flag too; a bad file is one error naming file and line.
func TestSimFabric(t *testing.T) {
	dir := t.TempDir()
	topo := filepath.Join("..", "..", "testdata", "xml", "dgx-h100-8x400g.xml")
	fab := filepath.Join(dir, "tor.yaml")
	require.NoError(t, os.WriteFile(fab, []byte("leaf: {kind: tor, hosts: 1, oversubscription: 4}\nspine: {}\nadaptive_routing: true\n"), 0o644))
	timeUs := func(extra ...string) float64 {
		t.Helper()
		out := filepath.Join(dir, "rows.json")
		args := append([]string{"--topo", topo, "--nodes", "2", "--op", "alltoall", "-b", "16M", "-e", "16M", "--loop", "0", "--json", out}, extra...)
		o, e, code := runReplay(t, append([]string{"sim"}, args...)...)
		require.Equal(t, 0, code, "%s%s", o, e)
		data, err := os.ReadFile(out)
		require.NoError(t, err)
		var rows []struct {
			TimeUs float64 `json:"time_us"`
		}
		require.NoError(t, json.Unmarshal(data, &rows))
		require.Len(t, rows, 1)
		return rows[0].TimeUs
	}
	flat, oversub := timeUs(), timeUs("--fabric", fab)
	require.Greater(t, oversub, 2*flat, "4:1 uplinks carry the AlltoAll's off-host half")

	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("leaf:\n  kind: tor\n  hosts: 1\n  uplink: 2\n"), 0o644))
	_, e, code := runReplay(t, "sim", "--topo", topo, "--nodes", "2", "--op", "alltoall", "-b", "1M", "-e", "1M", "--fabric", bad)
	require.NotEqual(t, 0, code)
	require.Contains(t, e, bad+`:4: unknown key "uplink" in leaf`)
	_, e, code = runReplay(t, "sim", "--topo", topo, "--nodes", "2", "--op", "alltoall", "-b", "1M", "-e", "1M", "--fabric", filepath.Join("..", "..", "testdata", "fabric", "rail-1024-dgx-h100.yaml"))
	require.NotEqual(t, 0, code)
	require.Contains(t, e, "written for 128 hosts, the cluster has 2")

	// replay run: the same AlltoAll recorded as a trace, replayed on the
	// flat network and behind the 4:1 leaves.
	_, e, code = runReplay(t, "sim", "--topo", topo, "--nodes", "2", "--op", "alltoall", "-b", "16M", "-e", "16M", "--loop", "0", "--trace", filepath.Join(dir, "a2a"))
	require.Equal(t, 0, code, e)
	kernels := func(extra ...string) float64 {
		t.Helper()
		o, e, code := runReplay(t, append([]string{"run", filepath.Join(dir, "a2a.calls.parquet"), "--topo", topo, "--nodes", "2", "--out", filepath.Join(dir, "pred")}, extra...)...)
		require.Equal(t, 0, code, e)
		return summaryUs(t, o, "predicted kernels")
	}
	flatRun, oversubRun := kernels(), kernels("--fabric", fab)
	require.Positive(t, flatRun)
	require.Greater(t, oversubRun, 2*flatRun)
	_, e, code = runReplay(t, "run", filepath.Join(dir, "a2a.calls.parquet"), "--topo", topo, "--nodes", "2", "--fabric", bad)
	require.NotEqual(t, 0, code)
	require.Contains(t, e, bad+":4:")
}
