package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// sharedDir locates the shared reference data (../shared beside the
// checkout, or $TWINCCL_SHARED). Tests that need it skip when it is absent.
func sharedDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TWINCCL_SHARED"); d != "" {
		return d
	}
	d, err := filepath.Abs(filepath.Join("..", "..", "shared"))
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(d, "groundtruth")); err != nil {
		t.Skipf("shared reference data not found at %s (set TWINCCL_SHARED): %v", d, err)
	}
	return d
}

// groundTruthCase is one document of shared/groundtruth/nccl-2.28.9.
type groundTruthCase struct {
	Name   string
	JSON   string // path of the .json
	Text   string // path of the .txt
	Input  string // resolved topology XML
	NNodes int
}

type groundTruthDoc struct {
	Input  string `json:"input"`
	NRanks int    `json:"nRanks"`
	NNodes int    `json:"nNodes"`
	Nodes  []struct {
		Node   int       `json:"node"`
		Ranks  []int     `json:"ranks"`
		System SystemDoc `json:"system"`
	} `json:"nodes"`
}

func groundTruthCases(t testing.TB) []groundTruthCase {
	shared := sharedDir(t)
	files, err := filepath.Glob(filepath.Join(shared, "groundtruth", "nccl-2.28.9", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []groundTruthCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var doc groundTruthDoc
		require.NoError(t, json.Unmarshal(data, &doc), f)
		in := doc.Input
		switch {
		case strings.HasPrefix(in, "groundtruth/h200x2-nvswitch/"):
			in = filepath.Join(shared, "baselines", "h200x2-nvswitch", filepath.Base(in))
		case strings.HasPrefix(in, "shared/"):
			in = filepath.Join(shared, strings.TrimPrefix(in, "shared/"))
		default:
			t.Fatalf("%s: unknown input %q", f, in)
		}
		base := strings.TrimSuffix(f, ".json")
		out = append(out, groundTruthCase{Name: filepath.Base(base), JSON: f, Text: base + ".txt", Input: in, NNodes: doc.NNodes})
	}
	return out
}

func loadCase(t testing.TB, c groundTruthCase) *Cluster {
	root, _, err := ReadTopologyFile(c.Input)
	require.NoError(t, err)
	cl, err := LoadCluster(root, c.Input, LoadOptions{Nodes: c.NNodes, Params: DefaultParams()})
	require.NoError(t, err)
	return cl
}

// TestGroundTruthSystems checks every GPU/NET attribute and every path
// (type, bandwidth, hop count) against what NCCL 2.28.9 computed.
func TestGroundTruthSystems(t *testing.T) {
	for _, c := range groundTruthCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			data, err := os.ReadFile(c.JSON)
			require.NoError(t, err)
			var want groundTruthDoc
			require.NoError(t, json.Unmarshal(data, &want))
			cl := loadCase(t, c)
			got := cl.Doc()
			require.Equal(t, want.NRanks, got.NRanks, "nRanks")
			require.Equal(t, want.NNodes, got.NNodes, "nNodes")
			for i, wn := range want.Nodes {
				gn := got.Nodes[i]
				require.Equal(t, wn.Ranks, gn.Ranks, "node %d ranks", i)
				ws, gs := wn.System, gn.System
				require.Equal(t, ws.MaxBW, gs.MaxBW, "node %d maxBw", i)
				require.Equal(t, ws.TotalBW, gs.TotalBW, "node %d totalBw", i)
				require.Equal(t, ws.Inter, gs.Inter, "node %d inter", i)
				require.Equal(t, ws.SystemID, gs.SystemID, "node %d systemId", i)
				require.Equal(t, ws.GPUs, gs.GPUs, "node %d gpus", i)
				require.Equal(t, ws.NETs, gs.NETs, "node %d nets", i)
				require.ElementsMatch(t, ws.Paths.Keys, gs.Paths.Keys, "node %d path sources", i)
				var diffs []string
				for _, k := range gs.Paths.Keys {
					wp, gp := ws.Paths.Paths[k], gs.Paths.Paths[k]
					if len(wp) != len(gp) {
						diffs = append(diffs, fmt.Sprintf("%s: %d paths, NCCL has %d", k, len(gp), len(wp)))
						continue
					}
					for j := range wp {
						if wp[j] != gp[j] {
							diffs = append(diffs, fmt.Sprintf("%s -> %s: got %d/%v/%s, NCCL %d/%v/%s", k, gp[j].To,
								gp[j].Count, gp[j].BW, gp[j].Type, wp[j].Count, wp[j].BW, wp[j].Type))
						}
					}
				}
				require.Empty(t, diffs, "node %d paths differ from NCCL", i)
			}
		})
	}
}

// ncclSystemSection extracts section (a) of a ground-truth .txt: the lines
// of ncclTopoPrint for node 0.
func ncclSystemSection(t testing.TB, path string) string {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "======== ") {
			if in {
				break
			}
			in = strings.Contains(line, "(a) system, node 0")
			continue
		}
		if in && line != "" {
			out = append(out, line)
		}
	}
	require.NotEmpty(t, out, "no system section in %s", path)
	return strings.Join(out, "\n") + "\n"
}

// TestGroundTruthPrint checks that PrintSystem reproduces NCCL's topology
// log byte for byte.
func TestGroundTruthPrint(t *testing.T) {
	for _, c := range groundTruthCases(t) {
		t.Run(c.Name, func(t *testing.T) {
			cl := loadCase(t, c)
			var b bytes.Buffer
			require.NoError(t, PrintSystem(&b, cl.Nodes[0].System, NCCLLogPrefix))
			require.Equal(t, ncclSystemSection(t, c.Text), b.String())
		})
	}
}
