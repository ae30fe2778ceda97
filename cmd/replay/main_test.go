package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func runReplay(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// TestTopoDefaultMatchesNCCL runs `replay topo` on the embedded default
// topology and compares its system print with NCCL 2.28.9's own log of the
// same machine.
func TestTopoDefaultMatchesNCCL(t *testing.T) {
	out, stderr, code := runReplay(t, "topo")
	require.Equal(t, 0, code, stderr)
	gt := filepath.Join("..", "..", "..", "shared", "groundtruth", "nccl-2.28.9", "h200x2-nvswitch.txt")
	data, err := os.ReadFile(gt)
	if err != nil {
		t.Skipf("ground truth not available: %v", err)
	}
	var want []string
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "======== graph search") {
			break
		}
		if strings.HasPrefix(line, "[0] NCCL INFO ") {
			want = append(want, line)
		}
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "[0] NCCL INFO ") {
			got = append(got, line)
		}
	}
	require.Equal(t, want, got)
	require.Contains(t, out, "# embedded:h200x2-nvswitch.xml: 2 rank(s) on 1 node(s)")
}

func TestTopoJSONAndNodes(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "sys.json")
	out, stderr, code := runReplay(t, "topo", "--nodes", "2", "--json", jsonPath)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "# nodes 1..1: same system as node 0, node k holding ranks k*2..k*2+1")
	var doc struct {
		NRanks int `json:"nRanks"`
		NNodes int `json:"nNodes"`
		Nodes  []struct {
			Ranks  []int `json:"ranks"`
			System struct {
				Inter int                          `json:"inter"`
				Paths map[string][]json.RawMessage `json:"paths"`
			} `json:"system"`
		} `json:"nodes"`
	}
	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &doc))
	require.Equal(t, 4, doc.NRanks)
	require.Equal(t, 2, doc.NNodes)
	require.Equal(t, []int{2, 3}, doc.Nodes[1].Ranks)
	require.Equal(t, 1, doc.Nodes[1].System.Inter)
	require.Len(t, doc.Nodes[0].System.Paths, 3, "paths from 2 GPUs and 1 NET")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 1, "no temporary file left behind")
}

func TestTopoErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.xml")
	require.NoError(t, os.WriteFile(bad, []byte("<system version=\"1\">\n  <cpu numaid=\"0\"\n"), 0o644))
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"topo", bad}, 1, "bad.xml:2"},
		{[]string{"topo", filepath.Join(dir, "missing.xml")}, 1, "missing.xml: no such file"},
		{[]string{"topo", "--nodes", "0"}, 2, "--nodes 0"},
		{[]string{"topo", "a.xml", "b.xml"}, 2, "at most one topology file"},
		{[]string{"topo", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"topo", "--json", filepath.Join(dir, "nodir", "x.json")}, 1, "nodir"},
	}
	for _, c := range cases {
		_, stderr, code := runReplay(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		require.Contains(t, stderr, c.want, "%v", c.args)
	}
	t.Setenv("NCCL_P2P_LEVEL", "FAST")
	_, stderr, code := runReplay(t, "topo")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "NCCL_P2P_LEVEL")
}

func TestHelp(t *testing.T) {
	out, _, code := runReplay(t, "help")
	require.Equal(t, 0, code)
	require.Contains(t, out, "topo")
	// Help that was asked for goes to stdout, for every command and both
	// spellings, and exits 0; stderr stays empty.
	for _, c := range commands {
		for _, args := range [][]string{{c.name, "-h"}, {"help", c.name}, {c.name, "--help"}} {
			out, stderr, code := runReplay(t, args...)
			require.Equal(t, 0, code, "%v: %s", args, stderr)
			require.Empty(t, stderr, "%v", args)
			require.Contains(t, out, "Usage", "%v", args)
		}
	}
	out, _, code = runReplay(t, "topo", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "--nodes")
	require.Contains(t, out, "ncclTopoPrint")
	out, _, code = runReplay(t, "--version")
	require.Equal(t, 0, code)
	require.Contains(t, out, "replay (github.com/twinccl/twinccl)")
	_, stderr, code := runReplay(t)
	require.Equal(t, 2, code, "no command is a usage error")
	require.Contains(t, stderr, "Commands:")
}
