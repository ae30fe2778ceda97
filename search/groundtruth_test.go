package search

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// gtCase is one ground-truth case, loaded: the cluster built from its input
// XML and NCCL's document.
type gtCase struct {
	groundtruth.Case
	Cluster *model.Cluster
	Doc     Document
}

// loadGroundTruth loads every case of shared/groundtruth/nccl-2.28.9.
func loadGroundTruth(t testing.TB) []gtCase {
	t.Helper()
	var out []gtCase
	for _, c := range groundtruth.Cases(t) {
		root, _, err := model.ReadTopologyFile(c.Input)
		require.NoError(t, err)
		cl, err := model.LoadCluster(root, c.Input, model.LoadOptions{Nodes: c.NNodes, Params: model.DefaultParams()})
		require.NoError(t, err, c.Name)
		data, err := os.ReadFile(c.JSON)
		require.NoError(t, err)
		gc := gtCase{Case: c, Cluster: cl}
		require.NoError(t, json.Unmarshal(data, &gc.Doc), c.JSON)
		require.Len(t, gc.Doc.Nodes, len(cl.Nodes), c.Name)
		out = append(out, gc)
	}
	return out
}

// nodeGraphs converts NCCL's per-node graphs (aligned or not) into
// model.Graphs indexed by GraphID.
func (c gtCase) nodeGraphs(t testing.TB, node int, aligned bool) [model.NumGraphs]*model.Graph {
	t.Helper()
	docs := c.Doc.Nodes[node].Graphs
	if aligned {
		docs = c.Doc.Nodes[node].AlignedGraphs
	}
	var out [model.NumGraphs]*model.Graph
	for _, d := range docs {
		g, err := GraphOfDoc(d, c.Cluster.Nodes[node].System)
		require.NoError(t, err, "%s node %d", c.Name, node)
		out[g.ID] = g
	}
	for id, g := range out {
		require.NotNil(t, g, "%s node %d: graph %d missing", c.Name, node, id)
	}
	return out
}

// TestGraphDocRoundTrip checks that every graph of the ground truth reads
// into a model.Graph and writes back to the same document.
func TestGraphDocRoundTrip(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		for n, nd := range c.Doc.Nodes {
			for _, aligned := range []bool{false, true} {
				gs := c.nodeGraphs(t, n, aligned)
				want := nd.Graphs
				if aligned {
					want = nd.AlignedGraphs
				}
				for _, w := range want {
					got, err := GraphDocOf(gs[w.ID], c.Cluster.Nodes[n].System)
					require.NoError(t, err)
					require.Equal(t, w, got, "%s node %d graph %d", c.Name, n, w.ID)
				}
			}
		}
	}
}
