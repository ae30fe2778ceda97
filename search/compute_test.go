package search

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// TestComputeGraphsMatchesNCCL compares every graph NCCL 2.28.9 searched on
// every node of every ground-truth case with ours.
func TestComputeGraphsMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			for n, node := range c.Cluster.Nodes {
				graphs, err := ComputeGraphs(node.System, groundTruthOptions().Search)
				require.NoError(t, err, "node %d", n)
				for _, want := range c.Doc.Nodes[n].Graphs {
					got, err := GraphDocOf(graphs[want.ID], node.System)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s node %d graph %d", c.Name, n, want.ID)
				}
			}
		})
	}
}

// topologyFiles lists the XML topologies the invariant tests and
// benchmarks run on.
func topologyFiles(t testing.TB) []string {
	t.Helper()
	shared := groundtruth.Dir(t)
	var files []string
	for _, dir := range []string{filepath.Join(shared, "topologies"), filepath.Join("..", "testdata", "xml")} {
		m, err := filepath.Glob(filepath.Join(dir, "*.xml"))
		require.NoError(t, err)
		files = append(files, m...)
	}
	require.NotEmpty(t, files)
	return files
}

// loadTopology builds a cluster from a file, or returns nil when the model
// rejects the file (e.g. an RCCL topology).
func loadTopology(t testing.TB, file string, nodes int) *model.Cluster {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		return nil
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: model.DefaultParams()})
	if err != nil {
		return nil
	}
	return cl
}

// searchBandwidths lists every link and NET bandwidth of a system.
func searchBandwidths(s *model.System) []float32 {
	b := snapshotBandwidths(s)
	return append(append([]float32(nil), b.links...), b.nets...)
}

// checkGraphInvariants checks one searched graph against its system.
func checkGraphInvariants(s *model.System, g *model.Graph) error {
	if g.NChannels() == 0 {
		return nil
	}
	if g.NChannels() > model.MaxChannels {
		return fmt.Errorf("%d channels", g.NChannels())
	}
	if g.BWIntra <= 0 && g.BWInter <= 0 {
		return fmt.Errorf("%d channels without bandwidth", g.NChannels())
	}
	gpus := s.Nodes[model.GPU]
	for c, ch := range g.Channels {
		if len(ch.Intra) != len(gpus) {
			return fmt.Errorf("channel %d visits %d GPUs of %d", c, len(ch.Intra), len(gpus))
		}
		if g.Pattern == model.PatternNVLS {
			continue
		}
		seen := map[int]bool{}
		for _, r := range ch.Intra {
			if s.GPUByRank(r) == nil || seen[r] {
				return fmt.Errorf("channel %d: rank %d unknown or repeated in %v", c, r, ch.Intra)
			}
			seen[r] = true
		}
		for _, id := range ch.Inter {
			if id != model.NoNet && s.NodeByID(model.NET, uint64(id)) == nil {
				return fmt.Errorf("channel %d: unknown NET %#x", c, id)
			}
		}
	}
	return nil
}

// TestComputeGraphsInvariants searches every topology, alone and as two
// nodes, and checks the graphs, determinism and that the system is left
// unchanged.
func TestComputeGraphsInvariants(t *testing.T) {
	opts := DefaultSearchOptions()
	withAll := opts
	withAll.NVLSEnable, withAll.CollNetEnable = true, true
	for _, file := range topologyFiles(t) {
		for _, nodes := range []int{1, 2} {
			cl := loadTopology(t, file, nodes)
			if cl == nil {
				t.Logf("%s with %d node(s): rejected by the model, skipped", filepath.Base(file), nodes)
				break
			}
			name := fmt.Sprintf("%s/nodes%d", filepath.Base(file), nodes)
			t.Run(name, func(t *testing.T) {
				for n, node := range cl.Nodes {
					s := node.System
					before := searchBandwidths(s)
					for _, o := range []SearchOptions{opts, withAll} {
						first, err := ComputeGraphs(s, o)
						if s.Inter && len(s.Nodes[model.NET]) == 0 {
							// NCCL cannot pick a NET either (ncclTopoGetLocalNet fails).
							require.Error(t, err, "node %d", n)
							require.Equal(t, before, searchBandwidths(s))
							continue
						}
						require.NoError(t, err, "node %d", n)
						require.Equal(t, before, searchBandwidths(s), "node %d: bandwidths changed", n)
						second, err := ComputeGraphs(s, o)
						require.NoError(t, err)
						require.Equal(t, first, second, "node %d: not deterministic", n)
						ring, tree := first[model.GraphRing], first[model.GraphTree]
						require.GreaterOrEqual(t, ring.NChannels(), 1)
						require.LessOrEqual(t, ring.NChannels(), model.MaxChannels/2)
						require.Equal(t, ring.NChannels() > 0, tree.NChannels() > 0)
						for id, g := range first {
							require.NoError(t, checkGraphInvariants(s, g), "node %d graph %d", n, id)
						}
					}
				}
			})
		}
	}
}

// TestComputeGraphRespectsChannelBounds runs single searches with tight
// channel bounds.
func TestComputeGraphRespectsChannelBounds(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		s := c.Cluster.Nodes[0].System
		g := &model.Graph{ID: model.GraphRing, Pattern: model.PatternRing, MinChannels: 1, MaxChannels: 2}
		require.NoError(t, ComputeGraph(s, g, DefaultSearchOptions()))
		require.GreaterOrEqual(t, g.NChannels(), 1, c.Name)
		require.LessOrEqual(t, g.NChannels(), 2, c.Name)
		require.NoError(t, checkGraphInvariants(s, g), c.Name)
	}
}

// TestSearchOptionsFromEnv checks defaults, parsing and errors.
func TestSearchOptionsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	o, err := SearchOptionsFromEnv(env())
	require.NoError(t, err)
	require.Equal(t, DefaultSearchOptions(), o)

	o, err = SearchOptionsFromEnv(env("NCCL_CROSS_NIC", "0", "NCCL_NVLS_ENABLE", "1", "NCCL_COLLNET_ENABLE", "1", "NCCL_MNNVL_SCATTER_NETS_ENABLE", "0"))
	require.NoError(t, err)
	require.Equal(t, SearchOptions{CrossNic: 0, NVLSEnable: true, NVLSForce: true, CollNetEnable: true}, o)
	o, err = SearchOptionsFromEnv(env("NCCL_NVLS_ENABLE", "0"))
	require.NoError(t, err)
	require.False(t, o.NVLSEnable)
	o, err = SearchOptionsFromEnv(env("NCCL_NVLS_ENABLE", "2"))
	require.NoError(t, err)
	require.Equal(t, DefaultSearchOptions(), o)

	for _, bad := range [][2]string{
		{"NCCL_CROSS_NIC", "7"}, {"NCCL_CROSS_NIC", "two"}, {"NCCL_CROSS_NIC", "-1"},
		{"NCCL_NVLS_ENABLE", "x"}, {"NCCL_COLLNET_ENABLE", "3"}, {"NCCL_MNNVL_SCATTER_NETS_ENABLE", "1.5"},
	} {
		_, err := SearchOptionsFromEnv(env(bad[0], bad[1]))
		require.Error(t, err, "%s=%s", bad[0], bad[1])
		require.True(t, strings.Contains(err.Error(), bad[0]), "error %q does not name %s", err, bad[0])
	}
}

// TestComputeGraphRejectsBadInput checks the argument errors.
func TestComputeGraphRejectsBadInput(t *testing.T) {
	c := loadGroundTruth(t)[0]
	s := c.Cluster.Nodes[0].System
	opts := DefaultSearchOptions()
	opts.CrossNic = 7
	_, err := ComputeGraphs(s, opts)
	require.Error(t, err)
	require.Error(t, ComputeGraph(nil, model.EmptyGraph(model.GraphRing), DefaultSearchOptions()))
	require.Error(t, ComputeGraph(s, nil, DefaultSearchOptions()))
	g := &model.Graph{ID: model.GraphRing, Pattern: model.PatternRing, MinChannels: 1, MaxChannels: 65}
	require.Error(t, ComputeGraph(s, g, DefaultSearchOptions()))
}

// BenchmarkComputeGraphs times the init-time searches of every node of
// every topology.
func BenchmarkComputeGraphs(b *testing.B) {
	files := topologyFiles(b)
	type bench struct {
		name  string
		nodes int
	}
	var cases []bench
	for _, f := range files {
		cases = append(cases, bench{f, 1})
	}
	cases = append(cases, bench{filepath.Join(groundtruth.Dir(b), "topologies", "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml"), 16})
	for _, bc := range cases {
		cl := loadTopology(b, bc.name, bc.nodes)
		if cl == nil {
			continue
		}
		name := filepath.Base(bc.name)
		if bc.nodes > 1 {
			name = fmt.Sprintf("%s/nodes%d", name, bc.nodes)
		}
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for _, node := range cl.Nodes {
					if _, err := ComputeGraphs(node.System, DefaultSearchOptions()); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// TestSearchReleasesReservations runs raw searches, without the snapshot
// that ComputeGraphs restores, and checks that every reservation was given
// back: links end within SUB_ROUND's rounding of where they started.
func TestSearchReleasesReservations(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		for n, node := range c.Cluster.Nodes {
			s := node.System
			snap := snapshotBandwidths(s)
			before := searchBandwidths(s)
			for _, p := range []model.Pattern{model.PatternRing, model.PatternBalancedTree, model.PatternTree, model.PatternSplitTree, model.PatternNVLS, model.PatternCollNetDirect} {
				g := &model.Graph{ID: model.GraphRing, Pattern: p, MinChannels: 1, MaxChannels: model.MaxChannels / 2,
					CollNet: p == model.PatternCollNetDirect}
				require.NoError(t, newChanSearch(s, DefaultSearchOptions()).compute(g))
				after := searchBandwidths(s)
				for i := range before {
					require.InDelta(t, before[i], after[i], 2e-3, "%s node %d pattern %s: bandwidth %d", c.Name, n, p, i)
				}
			}
			snap.restore(s)
			require.Equal(t, before, searchBandwidths(s))
		}
	}
}

// TestSubRound checks the float32 rounding of reservations against
// values C's roundf gives.
func TestSubRound(t *testing.T) {
	require.Equal(t, float32(340.8), subRound(370.8, 30))
	require.Equal(t, float32(370.8), subRound(340.8, -30))
	require.Equal(t, float32(0), subRound(24, 24))
	require.Equal(t, float32(0.002), subRound(0.0015, 0)) // halves go away from zero
	require.Equal(t, float32(-0.002), subRound(-0.0015, 0))
	require.Equal(t, float32(0.001), subRound(0.0014, 0))
	require.Equal(t, 3.0, roundHalfAway(2.5))
	require.Equal(t, -3.0, roundHalfAway(-2.5))
}

// TestDupChannels checks when channels are doubled and how bandwidth is
// split.
func TestDupChannels(t *testing.T) {
	g := newChanGraph(2)
	g.pattern, g.maxChannels, g.nChannels, g.bwIntra, g.bwInter = model.PatternRing, 32, 3, 40, 40
	copy(g.intra, []int{0, 1, 1, 0, 0, 1})
	dupChannels(g, 80, 2)
	require.Equal(t, 6, g.nChannels)
	require.Equal(t, float32(20), g.bwIntra)
	require.Equal(t, []int{0, 1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1}, g.intra[:12])

	g.nChannels, g.maxChannels, g.bwIntra, g.bwInter = 5, 8, 40, 40
	dupChannels(g, 90, 2) // sm90, below 50 GB/s with more than 4 channels: kept
	require.Equal(t, 5, g.nChannels)
	dupChannels(g, 80, 2) // capped by maxChannels, bandwidth split by ceil(8/5)
	require.Equal(t, 8, g.nChannels)
	require.Equal(t, float32(20), g.bwIntra)
}
