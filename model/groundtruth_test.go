package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
)

// sharedDir locates the shared reference data; tests skip when it is absent.
func sharedDir(t testing.TB) string { return groundtruth.Dir(t) }

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

func groundTruthCases(t testing.TB) []groundtruth.Case { return groundtruth.Cases(t) }

func loadCase(t testing.TB, c groundtruth.Case) *Cluster {
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
	return strings.Join(groundtruth.Section(t, path, "(a) system, node 0"), "\n") + "\n"
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
