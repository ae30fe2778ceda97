package search

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRunMatchesGroundTruth runs the whole pipeline (search, wiring,
// tuning) on every ground-truth topology and compares the complete JSON
// document with NCCL's.
func TestRunMatchesGroundTruth(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			res, err := Run(c.Cluster, groundTruthOptions())
			require.NoError(t, err)
			got, err := res.Document()
			require.NoError(t, err)
			want := c.Doc
			for i := range want.Nodes {
				require.Equal(t, want.Nodes[i].Graphs, got.Nodes[i].Graphs, "node %d graphs", i)
				require.Equal(t, want.Nodes[i].AlignedGraphs, got.Nodes[i].AlignedGraphs, "node %d aligned graphs", i)
			}
			require.Equal(t, want.Channels, got.Channels, "channels")
			require.Equal(t, want.Tuning, got.Tuning, "tuning")
			require.Equal(t, want.Assumptions, got.Assumptions)
			require.Equal(t, want.NRanks, got.NRanks)
			require.Equal(t, want.NNodes, got.NNodes)
			// The whole document, re-read, equals NCCL's (system included).
			data, err := json.Marshal(got)
			require.NoError(t, err)
			var back Document
			require.NoError(t, json.Unmarshal(data, &back))
			back.Input, want.Input = "", ""
			for i := range want.Nodes {
				// Path sources are an object: key order carries no meaning.
				slices.Sort(want.Nodes[i].System.Paths.Keys)
				slices.Sort(back.Nodes[i].System.Paths.Keys)
			}
			require.Equal(t, want, back)
		})
	}
}

// TestRunDeterministic checks that two runs give byte-identical logs and
// documents.
func TestRunDeterministic(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		var outs [2][]byte
		for i := range outs {
			res, err := Run(c.Cluster, groundTruthOptions())
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, res.WriteLog(&b, true))
			doc, err := res.Document()
			require.NoError(t, err)
			js, err := json.Marshal(doc)
			require.NoError(t, err)
			outs[i] = append(b.Bytes(), js...)
		}
		require.Equal(t, string(outs[0]), string(outs[1]), c.Name)
	}
}

// TestReplicatedShortcutEqualsFullSearch checks that taking node 0's graphs
// for identical nodes gives what searching each node gives.
func TestReplicatedShortcutEqualsFullSearch(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		if !c.Cluster.Replicated {
			continue
		}
		res, err := Run(c.Cluster, DefaultOptions())
		require.NoError(t, err)
		for i, n := range c.Cluster.Nodes {
			full, err := ComputeGraphs(n.System, DefaultSearchOptions())
			require.NoError(t, err)
			for id := range full {
				a, err := GraphDocOf(full[id], n.System)
				require.NoError(t, err)
				b, err := GraphDocOf(res.NodeGraphs[i][id], n.System)
				require.NoError(t, err)
				require.Equal(t, a, b, "%s node %d graph %d", c.Name, i, id)
			}
		}
	}
}
