package search

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// subsetDoc searches a communicator of a job (nil ranks: the whole job)
// on a topology, from the root element (possibly edited by the caller).
func subsetDoc(t *testing.T, file string, root *model.Element, nodes int, ranks []int) (*Result, Document) {
	t.Helper()
	if root == nil {
		var err error
		root, _, err = model.ReadTopologyFile(file)
		require.NoError(t, err)
	}
	c, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: model.DefaultParams(), Ranks: ranks})
	require.NoError(t, err)
	res, err := Run(c, groundTruthOptions()) // compared with NCCL runs made with NVLS off
	require.NoError(t, err)
	doc, err := res.Document()
	require.NoError(t, err)
	return res, doc
}

func seq(from, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = from + i
	}
	return out
}

// requireSameDecisions compares what NCCL decides for two communicators:
// every node's graphs before and after alignment, the channels and the
// tuning.
func requireSameDecisions(t *testing.T, want, got Document, what string) {
	t.Helper()
	require.Equal(t, want.NRanks, got.NRanks, what)
	require.Equal(t, want.NNodes, got.NNodes, what)
	require.Len(t, got.Nodes, len(want.Nodes), what)
	for i := range want.Nodes {
		require.Equal(t, want.Nodes[i].Ranks, got.Nodes[i].Ranks, "%s: node %d ranks", what, i)
		require.Equal(t, want.Nodes[i].Graphs, got.Nodes[i].Graphs, "%s: node %d graphs", what, i)
		require.Equal(t, want.Nodes[i].AlignedGraphs, got.Nodes[i].AlignedGraphs, "%s: node %d aligned graphs", what, i)
	}
	require.Equal(t, want.Channels, got.Channels, "%s: channels", what)
	require.Equal(t, want.Tuning, got.Tuning, "%s: tuning", what)
}

// TestSubsetOfOneNodeEqualsThatNode: a tensor-parallel group of a whole
// host of a multi-host job sees no network, so NCCL decides exactly what
// it decides for a single-host job on that machine.
func TestSubsetOfOneNodeEqualsThatNode(t *testing.T) {
	for _, name := range []string{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", "dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml", "pcie-rtx3090x8-2socket-1ib.xml"} {
		file := filepath.Join("..", "..", "shared", "topologies", name)
		_, single := subsetDoc(t, file, nil, 1, nil)
		_, tp := subsetDoc(t, file, nil, 4, seq(16, 8)) // host 2 of 4
		requireSameDecisions(t, single, tp, name)
		assert.Equal(t, single.Nodes[0].System, tp.Nodes[0].System, "%s: the system host 2's ranks see", name)
	}
}

// TestOneGPUPerNodeEqualsSmallerTopology: one GPU of every 8-GPU host is a
// job of single-GPU hosts: the same decisions as the file cut down to that
// GPU (KeepRanks, as "run gpu" does for a split-host run).
func TestOneGPUPerNodeEqualsSmallerTopology(t *testing.T) {
	for _, name := range []string{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"} {
		file := filepath.Join("..", "..", "shared", "topologies", name)
		root, _, err := model.ReadTopologyFile(file)
		require.NoError(t, err)
		model.KeepRanks(root, 1)
		_, small := subsetDoc(t, file, root, 4, nil)
		res, sub := subsetDoc(t, file, nil, 4, []int{0, 8, 16, 24})
		requireSameDecisions(t, small, sub, name)
		assert.True(t, res.Cluster.Replicated)
		assert.Equal(t, 4, res.Plan.NNodes)
	}
}

// TestSubsetMatchesNCCLGroundTruth: a communicator of two hosts out of a
// larger replicated job is NCCL's recorded two-host job, and one of one host
// its recorded single-host job.
func TestSubsetMatchesNCCLGroundTruth(t *testing.T) {
	cases := map[string]groundtruth.Case{}
	for _, c := range groundtruth.Cases(t) {
		cases[c.Name] = c
	}
	for _, name := range []string{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g", "pcie-rtx3090x8-2socket-1ib"} {
		for _, tc := range []struct {
			gt    string
			ranks []int
		}{
			{gt: name + ".nodes2", ranks: seq(8, 16)}, // hosts 1 and 2 of 4
			{gt: name, ranks: seq(24, 8)},             // host 3 of 4
		} {
			c, ok := cases[tc.gt]
			require.True(t, ok, "ground truth %s", tc.gt)
			data, err := os.ReadFile(c.JSON)
			require.NoError(t, err)
			var want Document
			require.NoError(t, json.Unmarshal(data, &want), c.JSON)
			res, got := subsetDoc(t, c.Input, nil, 4, tc.ranks)
			requireSameDecisions(t, want, got, tc.gt)
			// The whole document, re-read, equals NCCL's (systems included;
			// path sources are an object: key order carries no meaning).
			data, err = json.Marshal(got)
			require.NoError(t, err)
			var back Document
			require.NoError(t, json.Unmarshal(data, &back))
			back.Input, want.Input = "", ""
			for i := range want.Nodes {
				slices.Sort(want.Nodes[i].System.Paths.Keys)
				slices.Sort(back.Nodes[i].System.Paths.Keys)
			}
			require.Equal(t, want, back, tc.gt)
			require.Equal(t, c.NNodes, len(res.Cluster.Nodes))
		}
	}
}

// TestTrimmedGPUsNeverInChannels: on a subset of a host's GPUs, every ring
// visits exactly the communicator's ranks and every tree and connection
// joins communicator ranks only, on the members' GPUs.
func TestTrimmedGPUsNeverInChannels(t *testing.T) {
	file := filepath.Join("..", "..", "shared", "topologies", "dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml")
	for _, ranks := range [][]int{{0, 3, 5}, {7, 2}, {1, 4, 9, 12}, {6, 14, 15}} {
		res, doc := subsetDoc(t, file, nil, 2, ranks)
		n := len(ranks)
		require.Equal(t, n, doc.NRanks, "%v", ranks)
		p := res.Plan
		require.Len(t, p.Ranks, n)
		for _, node := range res.Cluster.Nodes {
			for _, g := range node.System.Nodes[model.GPU] {
				if model.SystemIDOf(g.ID) == node.System.SystemID {
					require.Contains(t, node.Ranks, g.GPU.Rank, "%v: a GPU of no member is in node %d's system", ranks, node.Index)
				}
			}
		}
		for _, rc := range p.Ranks {
			for c := range rc.Ring {
				ring, tree := rc.Ring[c], rc.Tree[c]
				for _, peer := range append([]int{ring.Prev, ring.Next, tree.Up}, tree.Down[:]...) {
					require.Less(t, peer, n, "%v: rank %d channel %d names rank %d", ranks, rc.Rank, c, peer)
				}
			}
		}
		// Nodes and local ranks: the cluster's hosts with members, in order.
		require.Equal(t, len(res.Cluster.Nodes), p.NNodes, "%v", ranks)
		for ni, node := range res.Cluster.Nodes {
			for li, r := range node.Ranks {
				require.Equal(t, ni, p.Ranks[r].Node, "%v: rank %d's node", ranks, r)
				require.Equal(t, li, p.Ranks[r].LocalRank, "%v: rank %d's local rank", ranks, r)
			}
		}
		for c, order := range p.Rings {
			require.ElementsMatch(t, seq(0, n), order, "%v: channel %d ring", ranks, c)
			for i, r := range order {
				require.Equal(t, order[(i+1)%n], p.Ranks[r].Ring[c].Next, "%v: channel %d ring next of %d", ranks, c, r)
			}
		}
	}
}

// TestSubsetMultiHostFileEqualsReplicated: a file that describes two
// hosts (two host_hash values) gives every communicator the decisions of
// the same communicator of the single-host file replicated on two hosts.
func TestSubsetMultiHostFileEqualsReplicated(t *testing.T) {
	file := filepath.Join("..", "..", "shared", "topologies", "pcie-rtx4090x2-cx4-2x100g.xml")
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	s := string(data)
	body := s[strings.Index(s, "  <cpu"):strings.LastIndex(s, "</system>")]
	h0 := strings.ReplaceAll(body, "<cpu ", `<cpu host_hash="0xaaa" `)
	h1 := strings.ReplaceAll(body, "<cpu ", `<cpu host_hash="0xbbb" `)
	h1 = strings.NewReplacer(`rank="0"`, `rank="2"`, `rank="1"`, `rank="3"`).Replace(h1)
	two := filepath.Join(t.TempDir(), "two-hosts.xml")
	require.NoError(t, os.WriteFile(two, []byte("<system version=\"1\">\n"+h0+h1+"</system>\n"), 0o644))
	for _, ranks := range [][]int{nil, {0, 2}, {1, 3}, {2, 3}, {0, 3, 1}} {
		_, want := subsetDoc(t, file, nil, 2, ranks)
		_, got := subsetDoc(t, two, nil, 1, ranks)
		requireSameDecisions(t, want, got, fmt.Sprint(ranks))
	}
}
