package search

import (
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// connectGroundTruthGraphs returns NCCL's own per-node graphs of a case,
// before alignment.
func connectGroundTruthGraphs(t *testing.T, c gtCase) [][model.NumGraphs]*model.Graph {
	t.Helper()
	var out [][model.NumGraphs]*model.Graph
	for n := range c.Cluster.Nodes {
		out = append(out, c.nodeGraphs(t, n, false))
	}
	return out
}

// TestConnectGroundTruth wires every ground-truth case from NCCL's own
// per-node graphs and compares the aligned graphs of every node and the
// whole channel section with NCCL's.
func TestConnectGroundTruth(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			p, err := Connect(c.Cluster, connectGroundTruthGraphs(t, c), DefaultConnectOptions())
			require.NoError(t, err)
			require.Equal(t, c.Doc.NNodes, p.NNodes)
			require.Equal(t, c.Doc.NRanks, p.NRanks)
			require.Equal(t, c.Doc.MNNVL, p.MNNVL)
			for n, nd := range c.Doc.Nodes {
				sys := c.Cluster.Nodes[n].System
				for _, want := range nd.AlignedGraphs {
					got, err := GraphDocOf(p.NodeAlignedGraphs[n][want.ID], sys)
					require.NoError(t, err)
					require.Equal(t, want, got, "node %d aligned graph %d", n, want.ID)
					if n == 0 {
						got, err := GraphDocOf(p.Graphs[want.ID], sys)
						require.NoError(t, err)
						require.Equal(t, want, got, "plan graph %d", want.ID)
					}
				}
			}
			got := PlanChannelsDoc(p)
			want := c.Doc.Channels
			require.Equal(t, want.NChannels, got.NChannels, "nChannels")
			require.Equal(t, want.CollChannels, got.CollChannels, "collChannels")
			require.Equal(t, want.NVLSChannels, got.NVLSChannels, "nvlsChannels")
			require.Equal(t, want.P2PnChannels, got.P2PnChannels, "p2pnChannels")
			require.Equal(t, want.P2PnChannelsPerPeer, got.P2PnChannelsPerPeer, "p2pnChannelsPerPeer")
			require.Equal(t, want.Rings, got.Rings, "rings")
			require.Len(t, got.Ranks, len(want.Ranks))
			for r := range want.Ranks {
				require.Equal(t, want.Ranks[r], got.Ranks[r], "rank %d", r)
			}
			require.Equal(t, want, got)
		})
	}
}

// TestDtreeExamples checks the double binary tree against the examples
// worked out from NCCL's trees.cc.
func TestDtreeExamples(t *testing.T) {
	type links struct{ up, d0, d1 int }
	cases := []struct {
		n, r   int
		t0, t1 links
	}{
		{4, 0, links{-1, -1, 2}, links{1, -1, -1}},
		{4, 1, links{2, -1, -1}, links{3, 2, 0}},
		{4, 2, links{0, 1, 3}, links{1, -1, -1}},
		{4, 3, links{2, -1, -1}, links{-1, -1, 1}},
		{5, 0, links{-1, -1, 4}, links{1, 3, -1}},
		{5, 1, links{2, -1, -1}, links{-1, -1, 0}},
		{5, 2, links{4, 1, 3}, links{3, -1, -1}},
		{5, 3, links{2, -1, -1}, links{0, 2, 4}},
		{5, 4, links{0, 2, -1}, links{3, -1, -1}},
		{8, 0, links{-1, -1, 4}, links{1, -1, -1}},
		{8, 4, links{0, 2, 6}, links{5, -1, -1}},
		{8, 7, links{6, -1, -1}, links{-1, -1, 3}},
		{1, 0, links{-1, -1, -1}, links{-1, -1, -1}},
		{2, 0, links{-1, -1, 1}, links{1, -1, -1}},
		{2, 1, links{0, -1, -1}, links{-1, -1, 0}},
		// 14 ranks: NCCL's illustration (13 hangs from 12, 12 from 8).
		{14, 12, links{8, 10, 13}, links{11, -1, -1}},
		{14, 13, links{12, -1, -1}, links{-1, -1, 5}}, // n-1 is the second root
	}
	for _, tc := range cases {
		t0, t1 := dtree(tc.n, tc.r)
		require.Equal(t, tc.t0, links{t0.Up, t0.Down0, t0.Down1}, "n=%d r=%d tree 0", tc.n, tc.r)
		require.Equal(t, tc.t1, links{t1.Up, t1.Down0, t1.Down1}, "n=%d r=%d tree 1", tc.n, tc.r)
	}
	// The child type says on which side of the parent a node hangs.
	t0, t1 := dtree(2, 1)
	require.Equal(t, 1, t0.ChildType)
	require.Equal(t, 0, t1.ChildType)
	require.Equal(t, 0, log2Floor(1))
	require.Equal(t, 3, log2Floor(8))
	require.Equal(t, 3, log2Floor(15))
	require.Equal(t, 4, log2Floor(16))
}

// TestDtreeProperties checks both trees for every size up to 64: every
// parent lists the node as the child on the side the node's ChildType
// names, every child names its parent, there is one root, and all nodes
// hang from it without a cycle.
func TestDtreeProperties(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for tree := 0; tree < 2; tree++ {
			sides := make([]treeSide, n)
			for r := 0; r < n; r++ {
				t0, t1 := dtree(n, r)
				sides[r] = t0
				if tree == 1 {
					sides[r] = t1
				}
			}
			roots := 0
			for r, s := range sides {
				require.NotEqual(t, r, s.Up, "n=%d tree %d rank %d is its own parent", n, tree, r)
				if s.Up == -1 {
					roots++
					continue
				}
				require.True(t, s.Up >= 0 && s.Up < n)
				p := sides[s.Up]
				want := p.Down0
				if s.ChildType == 1 {
					want = p.Down1
				}
				require.Equal(t, r, want, "n=%d tree %d: rank %d (child type %d) not listed by parent %d (%+v)", n, tree, r, s.ChildType, s.Up, p)
				for _, d := range []int{s.Down0, s.Down1} {
					if d != -1 {
						require.Equal(t, r, sides[d].Up, "n=%d tree %d: child %d of %d", n, tree, d, r)
					}
				}
			}
			require.Equal(t, 1, roots, "n=%d tree %d", n, tree)
			for r := range sides {
				seen := map[int]bool{}
				for x := r; x != -1; x = sides[x].Up {
					require.False(t, seen[x], "n=%d tree %d: cycle through %d", n, tree, x)
					seen[x] = true
				}
			}
		}
	}
}

// connectTopology loads a shared topology file as a cluster of nodes
// copies (1 for files that describe several hosts).
func connectTopology(t *testing.T, file string, nodes int) (*model.Cluster, error) {
	t.Helper()
	root, _, err := model.ReadTopologyFile(filepath.Join(groundtruth.Dir(t), "topologies", file))
	if err != nil {
		return nil, err
	}
	return model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: model.DefaultParams()})
}

// synthSpec shapes the synthetic graphs of connectSynthGraphs.
type synthSpec struct {
	channels    int
	treePattern model.Pattern // 0: BALANCED_TREE (TREE with one GPU)
	crossNic    int
	bwIntra     float32
	nvls        int // NVLS channels
	collNet     int // CollNet chain channels
}

// connectSynthGraphs makes valid graphs for every node of c: channel k
// visits the system's GPUs in rank order rotated by k, reversed on odd
// channels, and enters and leaves through the first GPU's local NET.
func connectSynthGraphs(t *testing.T, c *model.Cluster, s synthSpec) [][model.NumGraphs]*model.Graph {
	t.Helper()
	var out [][model.NumGraphs]*model.Graph
	for _, node := range c.Nodes {
		sys := node.System
		var ranks []int
		for _, g := range sys.Nodes[model.GPU] {
			ranks = append(ranks, g.GPU.Rank)
		}
		sort.Ints(ranks)
		order := func(k int) []int {
			n := len(ranks)
			o := make([]int, n)
			for i := range o {
				o[i] = ranks[(i+k)%n]
			}
			if k%2 == 1 {
				for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
					o[i], o[j] = o[j], o[i]
				}
			}
			return o
		}
		mk := func(id model.GraphID, nch int, pattern model.Pattern) *model.Graph {
			g := model.EmptyGraph(id)
			if pattern != 0 {
				g.Pattern = pattern
			}
			g.BWIntra, g.BWInter, g.TypeIntra, g.TypeInter = s.bwIntra, s.bwIntra/2, model.PathNVL, model.PathPIX
			g.CrossNic = s.crossNic
			for k := 0; k < nch; k++ {
				ch := model.GraphChannel{Intra: order(k), Inter: [2]int64{model.NoNet, model.NoNet}}
				if sys.Inter {
					net, err := sys.LocalNet(sys.GPUByRank(ch.Intra[0]), k)
					if err == nil {
						ch.Inter = [2]int64{int64(net.ID), int64(net.ID)}
					}
				}
				g.Channels = append(g.Channels, ch)
			}
			return g
		}
		tp := s.treePattern
		if tp == 0 {
			tp = model.PatternBalancedTree
			if len(ranks) == 1 {
				tp = model.PatternTree
			}
		}
		var gs [model.NumGraphs]*model.Graph
		gs[model.GraphRing] = mk(model.GraphRing, s.channels, 0)
		gs[model.GraphTree] = mk(model.GraphTree, s.channels, tp)
		gs[model.GraphCollNetChain] = mk(model.GraphCollNetChain, s.collNet, 0)
		gs[model.GraphNVLS] = mk(model.GraphNVLS, s.nvls, 0)
		gs[model.GraphCollNetDirect] = mk(model.GraphCollNetDirect, 0, 0)
		out = append(out, gs)
	}
	return out
}

// connectCheckPlan checks the invariants of a wired plan: every ring is a
// Hamiltonian cycle over all ranks that starts at rank 0 and agrees with
// every rank's prev/next; every tree has one root, consistent up/down
// links and reaches every rank; channel counts are within NCCL's bounds.
func connectCheckPlan(t *testing.T, name string, p *model.Plan) {
	t.Helper()
	n := p.NRanks
	require.True(t, p.NChannels >= 1 && p.NChannels <= model.MaxChannels, "%s: nChannels %d", name, p.NChannels)
	require.Equal(t, p.NChannels, p.CollChannels, name)
	require.Len(t, p.Rings, p.NChannels, name)
	require.Len(t, p.Ranks, n, name)
	require.True(t, p.P2PChannels >= 1 && p.P2PChannels <= model.MaxChannels && isPow2Int(p.P2PChannels), "%s: p2pnChannels %d", name, p.P2PChannels)
	require.True(t, p.P2PChannelsPerPeer >= 1 && p.P2PChannelsPerPeer <= p.P2PChannels && isPow2Int(p.P2PChannelsPerPeer), "%s: per peer %d", name, p.P2PChannelsPerPeer)
	require.True(t, p.NNodes >= 1 && p.NNodes <= n, name)
	require.True(t, p.TreeChannels >= 1 && p.TreeChannels <= model.MaxChannels/2, name)
	total := 0
	for node, ranks := range p.NodeRanks {
		total += len(ranks)
		for lr, r := range ranks {
			require.Equal(t, node, p.Ranks[r].Node, name)
			require.Equal(t, lr, p.Ranks[r].LocalRank, name)
		}
	}
	require.Equal(t, n, total, name)
	for c := 0; c < p.NChannels; c++ {
		ring := p.Rings[c]
		require.Len(t, ring, n, "%s ring %d", name, c)
		require.Equal(t, 0, ring[0], "%s ring %d", name, c)
		seen := make([]bool, n)
		for i, r := range ring {
			require.False(t, seen[r], "%s ring %d visits %d twice", name, c, r)
			seen[r] = true
			rc := p.Ranks[r]
			require.Equal(t, ring[(i+1)%n], rc.Ring[c].Next, "%s ring %d rank %d next", name, c, r)
			require.Equal(t, ring[(i-1+n)%n], rc.Ring[c].Prev, "%s ring %d rank %d prev", name, c, r)
		}
		roots := 0
		root := -1
		for r, rc := range p.Ranks {
			tr := rc.Tree[c]
			if tr.Up == -1 {
				roots++
				root = r
			} else {
				require.NotEqual(t, r, tr.Up, "%s tree %d", name, c)
				require.Contains(t, p.Ranks[tr.Up].Tree[c].Down[:], r, "%s tree %d: rank %d's parent %d does not list it", name, c, r, tr.Up)
			}
			for _, d := range tr.Down {
				if d != -1 {
					require.Equal(t, r, p.Ranks[d].Tree[c].Up, "%s tree %d: child %d of %d", name, c, d, r)
				}
			}
		}
		require.Equal(t, 1, roots, "%s tree %d roots", name, c)
		visited := map[int]bool{}
		stack := []int{root}
		for len(stack) > 0 {
			r := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			require.False(t, visited[r], "%s tree %d: cycle through %d", name, c, r)
			visited[r] = true
			for _, d := range p.Ranks[r].Tree[c].Down {
				if d != -1 {
					stack = append(stack, d)
				}
			}
		}
		require.Len(t, visited, n, "%s tree %d reaches every rank", name, c)
	}
}

func isPow2Int(x int) bool { return x > 0 && x&(x-1) == 0 }

// TestConnectProperties wires every shared topology replicated on 1, 2,
// 3, 4 and 16 nodes with synthetic graphs of several shapes and checks the
// plan's invariants.
func TestConnectProperties(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(groundtruth.Dir(t), "topologies", "*.xml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	specs := []synthSpec{
		{channels: 1, bwIntra: 20},
		{channels: 2, bwIntra: 50, crossNic: 2},
		{channels: 3, bwIntra: 20, treePattern: model.PatternSplitTree},
		{channels: 4, bwIntra: 10, treePattern: model.PatternTree, crossNic: 2},
		{channels: 16, bwIntra: 40, nvls: 2, collNet: 16},
	}
	tested := 0
	for _, f := range files {
		file := filepath.Base(f)
		for _, nodes := range []int{1, 2, 3, 4, 16} {
			c, err := connectTopology(t, file, nodes)
			if err != nil {
				// RCCL-format files are not modelled; multi-host files
				// cannot be replicated.
				if strings.Contains(err.Error(), "RCCL") || strings.Contains(err.Error(), "hosts already") {
					continue
				}
				require.NoError(t, err)
			}
			for si, s := range specs {
				for _, opts := range []ConnectOptions{DefaultConnectOptions(), func() ConnectOptions {
					o := DefaultConnectOptions()
					o.CollNetEnable, o.MaxNChannels, o.MinNChannels = true, 5, 7
					return o
				}()} {
					name := fmt.Sprintf("%s nodes=%d spec=%d", file, nodes, si)
					p, err := Connect(c, connectSynthGraphs(t, c, s), opts)
					require.NoError(t, err, name)
					connectCheckPlan(t, name, p)
					if !c.MNNVL {
						require.Equal(t, len(c.Nodes), p.NNodes, name)
					}
					tested++
				}
			}
		}
	}
	require.Greater(t, tested, 100)
}

// connectSynth loads a shared topology on nodes nodes and wires synthetic
// graphs with opts.
func connectSynth(t *testing.T, file string, nodes int, s synthSpec, opts ConnectOptions) *model.Plan {
	t.Helper()
	c, err := connectTopology(t, file, nodes)
	require.NoError(t, err)
	p, err := Connect(c, connectSynthGraphs(t, c, s), opts)
	require.NoError(t, err)
	connectCheckPlan(t, file, p)
	return p
}

const (
	connH100 = "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"
	connB200 = "b200x8-nvswitch-vm-8x400g.xml"
	connA100 = "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml"
	connGB   = "oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml"
)

// TestConnectChannelDoubling covers the doublings after the tree
// duplication: sm90+ across nodes when the ring's intra bandwidth exceeds
// 45 GB/s, and the unpack network device.
func TestConnectChannelDoubling(t *testing.T) {
	def := DefaultConnectOptions()
	require.Equal(t, 8, connectSynth(t, connH100, 2, synthSpec{channels: 2, bwIntra: 50}, def).NChannels)
	require.Equal(t, 4, connectSynth(t, connH100, 2, synthSpec{channels: 2, bwIntra: 45}, def).NChannels)
	require.Equal(t, 4, connectSynth(t, connH100, 1, synthSpec{channels: 2, bwIntra: 50}, def).NChannels)
	require.Equal(t, 4, connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 50}, def).NChannels)
	// Already 16 channels: no more doubling.
	require.Equal(t, 16, connectSynth(t, connH100, 2, synthSpec{channels: 8, bwIntra: 50}, def).NChannels)
	p := connectSynth(t, connH100, 2, synthSpec{channels: 3, bwIntra: 50}, def)
	require.Equal(t, 12, p.NChannels)
	require.Equal(t, 3, p.TreeChannels)
	for c := 0; c < p.NChannels; c++ {
		require.Equal(t, p.Rings[c%6], p.Rings[c], "channel %d copies channel %d", c, c%6)
		for _, rc := range p.Ranks {
			require.Equal(t, rc.Tree[c%6], rc.Tree[c])
		}
	}

	unpack := DefaultConnectOptions()
	unpack.NetDeviceUnpack = true
	require.Equal(t, 8, connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 20}, unpack).NChannels)
	require.Equal(t, 4, connectSynth(t, connA100, 1, synthSpec{channels: 2, bwIntra: 20}, unpack).NChannels)
	// sm90 then unpack: 4 -> 8 -> 16.
	require.Equal(t, 16, connectSynth(t, connH100, 2, synthSpec{channels: 2, bwIntra: 50}, unpack).NChannels)
	unpack.UnpackDoubleNChannels = false
	require.Equal(t, 4, connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 20}, unpack).NChannels)
}

// TestConnectChannelLimits covers NCCL_MIN/MAX_NCHANNELS, their legacy
// names, the CTA bounds and the kernel argument limit.
func TestConnectChannelLimits(t *testing.T) {
	spec := synthSpec{channels: 2, bwIntra: 20}
	with := func(f func(o *ConnectOptions)) ConnectOptions {
		o := DefaultConnectOptions()
		f(&o)
		return o
	}
	base := connectSynth(t, connA100, 2, spec, DefaultConnectOptions())
	require.Equal(t, 4, base.NChannels)

	p := connectSynth(t, connA100, 2, spec, with(func(o *ConnectOptions) { o.MinNChannels = 10 }))
	require.Equal(t, 10, p.NChannels)
	for c := range p.Rings {
		require.Equal(t, base.Rings[c%4], p.Rings[c])
	}
	p = connectSynth(t, connA100, 2, spec, with(func(o *ConnectOptions) { o.MaxNChannels, o.MinNChannels = 3, 10 }))
	require.Equal(t, 10, p.NChannels)
	for c := range p.Rings {
		require.Equal(t, base.Rings[c%3], p.Rings[c], "channel %d", c)
	}
	for _, tc := range []struct {
		f    func(o *ConnectOptions)
		want int
	}{
		{func(o *ConnectOptions) { o.MaxNChannels = 3 }, 3},
		{func(o *ConnectOptions) { o.MaxNChannels = 0 }, 1},
		{func(o *ConnectOptions) { o.MaxNChannels = 1000 }, 4},
		{func(o *ConnectOptions) { o.MaxNRings = 2 }, 2},
		{func(o *ConnectOptions) { o.MaxNRings, o.MaxNChannels = 2, 6 }, 4},
		{func(o *ConnectOptions) { o.MinNRings = 6 }, 6},
		{func(o *ConnectOptions) { o.MinNRings, o.MinNChannels = 6, 0 }, 4},
		{func(o *ConnectOptions) { o.MinNChannels = 1000 }, 64},
		{func(o *ConnectOptions) { o.MinNChannels = -5 }, 4},
		{func(o *ConnectOptions) { o.MaxCTAs = 3 }, 3},
		{func(o *ConnectOptions) { o.MinCTAs = 7 }, 7},
		{func(o *ConnectOptions) { o.MinCTAs, o.MaxCTAs = 9, 5 }, 5},
		{func(o *ConnectOptions) { o.MinCTAs, o.MaxCTAs = 100, 100 }, 64},
		{func(o *ConnectOptions) { o.WorkArgsBytes = 32 + 16*3 }, 3},
		{func(o *ConnectOptions) { o.WorkArgsBytes = 16 }, 4}, // wraps around: no limit
	} {
		o := with(tc.f)
		p := connectSynth(t, connA100, 2, spec, o)
		require.Equal(t, tc.want, p.NChannels, "%+v", o)
		require.Equal(t, tc.want, p.CollChannels)
	}
	p = connectSynth(t, connA100, 2, spec, with(func(o *ConnectOptions) { o.WorkArgsBytes = 32 + 16*3 }))
	require.Equal(t, 2, p.P2PChannels) // pow2Up(3) = 4, capped at pow2Down(3) = 2
}

// TestConnectCrossNic checks that ranks whose ring search allowed channel
// pairs to cross NICs swap ring channels c and c^1 on odd nodes.
func TestConnectCrossNic(t *testing.T) {
	straight := connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 20}, DefaultConnectOptions())
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, straight.Rings[0])
	crossed := connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 20, crossNic: 2}, DefaultConnectOptions())
	// Node 1 runs its channel 1 order (8 15 14 ... 9) on channel 0.
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 15, 14, 13, 12, 11, 10, 9}, crossed.Rings[0])
	require.Equal(t, crossed.Rings[0], crossed.Rings[2])
	// Trees are not swapped.
	for r := range straight.Ranks {
		require.Equal(t, straight.Ranks[r].Tree, crossed.Ranks[r].Tree)
	}
	require.Equal(t, 2, crossed.Graphs[model.GraphRing].CrossNic)
	// An odd channel count disables the alternation.
	odd := connectSynth(t, connA100, 2, synthSpec{channels: 3, bwIntra: 20, crossNic: 2}, DefaultConnectOptions())
	require.Equal(t, 8, odd.Rings[0][8])
	require.Equal(t, 9, odd.Rings[0][9])
}

// TestConnectAlignment checks the alignment of graphs that differ between
// nodes: minimum channel count, bandwidths and sameChannels, maximum path
// types and crossNic, each node keeping its own channel lists.
func TestConnectAlignment(t *testing.T) {
	c, err := connectTopology(t, connA100, 3)
	require.NoError(t, err)
	gs := connectSynthGraphs(t, c, synthSpec{channels: 4, bwIntra: 20})
	g1 := connectSynthGraphs(t, c, synthSpec{channels: 3, bwIntra: 12, crossNic: 1})[1]
	g1[model.GraphRing].TypeIntra = model.PathSYS
	g1[model.GraphTree].Pattern = model.PatternSplitTree
	gs[1] = g1
	gs[0][model.GraphRing].SameChannels = 1
	gs[2][model.GraphTree].Channels = gs[2][model.GraphTree].Channels[:2] // node 2: tree has 2 channels
	p, err := Connect(c, gs, DefaultConnectOptions())
	require.NoError(t, err)
	connectCheckPlan(t, "aligned", p)
	require.Equal(t, 2, p.TreeChannels)
	require.Equal(t, 4, p.NChannels)
	require.Equal(t, model.PatternSplitTree, p.MaxTreePattern)
	for n := range c.Nodes {
		ring := p.NodeAlignedGraphs[n][model.GraphRing]
		require.Equal(t, 2, ring.NChannels())
		require.Equal(t, float32(12), ring.BWIntra)
		require.Equal(t, float32(6), ring.BWInter)
		require.Equal(t, model.PathSYS, ring.TypeIntra)
		require.Equal(t, 1, ring.CrossNic)
		require.Equal(t, 0, ring.SameChannels)
		require.Equal(t, gs[n][model.GraphRing].Channels[:2], ring.Channels)
		require.Equal(t, 2, p.NodeAlignedGraphs[n][model.GraphTree].NChannels())
		// Unaligned graphs are kept as searched.
		require.Equal(t, gs[n][model.GraphRing].NChannels(), p.NodeGraphs[n][model.GraphRing].NChannels())
	}
	require.Equal(t, p.NodeAlignedGraphs[0], p.Graphs)
	require.Equal(t, model.PatternSplitTree, p.NodeAlignedGraphs[1][model.GraphTree].Pattern)
	require.Equal(t, model.PatternBalancedTree, p.NodeAlignedGraphs[0][model.GraphTree].Pattern)
}

// TestConnectCollNetAndNVLS covers the CollNet channel growth, the CollNet
// node threshold and the NVLS channel count.
func TestConnectCollNetAndNVLS(t *testing.T) {
	on := DefaultConnectOptions()
	on.CollNetEnable = true
	spec := synthSpec{channels: 2, bwIntra: 20, collNet: 2}
	p := connectSynth(t, connA100, 2, spec, on)
	require.True(t, p.CollNetSupport)
	require.Equal(t, 6, p.NChannels)
	require.Equal(t, p.Rings[0], p.Rings[4])
	p = connectSynth(t, connA100, 1, spec, on) // below the node threshold
	require.False(t, p.CollNetSupport)
	require.Equal(t, 4, p.NChannels)
	on.CollNetNodeThreshold = 1
	require.Equal(t, 6, connectSynth(t, connA100, 1, spec, on).NChannels)
	require.False(t, connectSynth(t, connA100, 2, synthSpec{channels: 2, bwIntra: 20}, on).CollNetSupport) // no chain graph
	require.False(t, connectSynth(t, connA100, 2, spec, DefaultConnectOptions()).CollNetSupport)

	def := DefaultConnectOptions()
	nv := synthSpec{channels: 2, bwIntra: 20, nvls: 2}
	p = connectSynth(t, connH100, 1, nv, def)
	require.True(t, p.NVLSSupport)
	require.Equal(t, 16, p.NVLSChannels)
	require.Equal(t, 24, connectSynth(t, connB200, 1, nv, def).NVLSChannels)
	require.Equal(t, 32, connectSynth(t, connB200, 2, nv, def).NVLSChannels)
	require.Equal(t, 24, connectSynth(t, connGB, 1, nv, def).NVLSChannels) // one MNNVL domain
	o := DefaultConnectOptions()
	o.NVLSCTAs = 8
	require.Equal(t, 8, connectSynth(t, connH100, 1, nv, o).NVLSChannels)
	o = DefaultConnectOptions()
	o.MaxCTAs = 10
	require.Equal(t, 10, connectSynth(t, connH100, 1, nv, o).NVLSChannels)
	p = connectSynth(t, connH100, 1, synthSpec{channels: 2, bwIntra: 20}, def)
	require.False(t, p.NVLSSupport)
	require.Zero(t, p.NVLSChannels)
	// NVLS on one node only: the alignment drops it everywhere.
	c, err := connectTopology(t, connH100, 2)
	require.NoError(t, err)
	gs := connectSynthGraphs(t, c, nv)
	gs[1][model.GraphNVLS] = model.EmptyGraph(model.GraphNVLS)
	p, err = Connect(c, gs, def)
	require.NoError(t, err)
	require.Zero(t, p.NVLSChannels)
	require.Zero(t, p.NodeAlignedGraphs[0][model.GraphNVLS].NChannels())
}

// TestConnectP2P covers the p2p channel counts on NCCL's own graphs with
// non-default settings.
func TestConnectP2P(t *testing.T) {
	var c2 gtCase
	for _, c := range loadGroundTruth(t) {
		if c.Name == "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.nodes2" {
			c2 = c
		}
	}
	require.NotNil(t, c2.Cluster)
	run := func(f func(o *ConnectOptions)) *model.Plan {
		o := DefaultConnectOptions()
		f(&o)
		p, err := Connect(c2.Cluster, connectGroundTruthGraphs(t, c2), o)
		require.NoError(t, err)
		return p
	}
	p := run(func(o *ConnectOptions) {})
	require.Equal(t, [2]int{32, 2}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer})
	p = run(func(o *ConnectOptions) { o.NChannelsPerNetPeer = 4 })
	require.Equal(t, [2]int{32, 4}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer})
	p = run(func(o *ConnectOptions) { o.NChannelsPerNetPeer = 3 })
	require.Equal(t, [2]int{32, 4}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer}) // rounded up to a power of two
	p = run(func(o *ConnectOptions) { o.NChannelsPerNetPeer = 64 })
	require.Equal(t, [2]int{32, 32}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer}) // NVLink peers: 24 -> 32
	p = run(func(o *ConnectOptions) { o.MaxP2PNChannels = 8 })
	require.Equal(t, [2]int{8, 2}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer})
	// Net peers get 2 channels only while 2*nRanks <= 4*p2pnChannels
	// (before rounding): 32 > 24.
	p = run(func(o *ConnectOptions) { o.MaxP2PNChannels = 6 })
	require.Equal(t, [2]int{8, 1}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer})
	p = run(func(o *ConnectOptions) { o.MaxP2PNChannels = 3 })
	require.Equal(t, [2]int{4, 1}, [2]int{p.P2PChannels, p.P2PChannelsPerPeer})
	p = run(func(o *ConnectOptions) { o.MinP2PNChannels = 100 })
	require.Equal(t, 64, p.P2PChannels)

	require.Equal(t, 1, p2pPow2Up(0))
	require.Equal(t, 1, p2pPow2Up(1))
	require.Equal(t, 32, p2pPow2Up(24))
	require.Equal(t, 16, p2pPow2Down(24))
	require.Equal(t, 64, maxChannelsForArgsBytes(math.MaxInt64))
	require.Equal(t, 64, maxChannelsForArgsBytes(-1))
	require.Equal(t, 0, maxChannelsForArgsBytes(32))
	require.Equal(t, 10, maxChannelsForArgsBytes(32+16*10+15))

	// MNNVL: every peer is in the fused system, reached over NVLink.
	gb := connectSynth(t, connGB, 1, synthSpec{channels: 2, bwIntra: 40}, DefaultConnectOptions())
	require.Equal(t, 1, gb.NNodes)
	require.Equal(t, [][]int{{0, 1, 2, 3, 4, 5, 6, 7}}, gb.NodeRanks)
	require.True(t, gb.MNNVL)
	require.Equal(t, 4, gb.P2PChannels)
	require.Equal(t, 4, gb.P2PChannelsPerPeer)
}

// TestConnectBadInput checks that malformed graphs and clusters are
// errors, not panics.
func TestConnectBadInput(t *testing.T) {
	c, err := connectTopology(t, connA100, 2)
	require.NoError(t, err)
	good := func() [][model.NumGraphs]*model.Graph {
		return connectSynthGraphs(t, c, synthSpec{channels: 2, bwIntra: 20})
	}
	def := DefaultConnectOptions()
	expectErr := func(gs [][model.NumGraphs]*model.Graph, opts ConnectOptions, want string) {
		t.Helper()
		p, err := Connect(c, gs, opts)
		require.Error(t, err)
		require.Nil(t, p)
		require.Contains(t, err.Error(), want)
	}
	expectErr(good()[:1], def, "1 sets of node graphs for 2 nodes")
	expectErr(nil, def, "0 sets of node graphs")

	gs := good()
	gs[1][model.GraphRing].Channels[0].Intra[3] = 2
	expectErr(gs, def, "node 1: graph 0 channel 0 lists rank 2, which is not a GPU of the node's system")
	gs = good()
	gs[0][model.GraphTree].Channels[1].Intra[3] = gs[0][model.GraphTree].Channels[1].Intra[4]
	expectErr(gs, def, "lists rank")
	gs = good()
	gs[0][model.GraphRing].Channels[1].Intra = gs[0][model.GraphRing].Channels[1].Intra[:5]
	expectErr(gs, def, "lists 5 ranks; the node's system has 8 GPUs")
	gs = good()
	gs[0][model.GraphRing].Channels = nil
	expectErr(gs, def, "ring graph has 0 channels")
	gs = good()
	gs[0][model.GraphTree], gs[0][model.GraphRing] = gs[0][model.GraphRing], gs[0][model.GraphTree]
	expectErr(gs, def, "has id")
	gs = good()
	gs[1][model.GraphNVLS].Channels = []model.GraphChannel{{Intra: nil}}
	expectErr(gs, def, "graph 3 channel 0 lists 0 ranks")
	gs = good()
	for len(gs[0][model.GraphRing].Channels) <= 40 {
		gs[0][model.GraphRing].Channels = append(gs[0][model.GraphRing].Channels, gs[0][model.GraphRing].Channels[0])
		gs[0][model.GraphTree].Channels = append(gs[0][model.GraphTree].Channels, gs[0][model.GraphTree].Channels[0])
	}
	expectErr(gs, def, "NCCL searches at most 32")

	o := DefaultConnectOptions()
	o.MinCTAs = 0
	expectErr(good(), o, "min/max CTAs")
	o = DefaultConnectOptions()
	o.NChannelsPerNetPeer = -1
	expectErr(good(), o, "nChannelsPerNetPeer")

	_, err = Connect(nil, nil, def)
	require.ErrorContains(t, err, "no nodes")
	bad := *c
	bad.Nodes = []*model.ClusterNode{c.Nodes[0], c.Nodes[0]}
	gs = good()
	gs[1] = gs[0]
	_, err = Connect(&bad, gs, def)
	require.ErrorContains(t, err, "is on nodes 0 and 1")
	bad = *c
	bad.NRanks = 20
	_, err = Connect(&bad, good(), def)
	require.ErrorContains(t, err, "rank 16 is on no node")
	bad = *c
	bad.Nodes = []*model.ClusterNode{c.Nodes[0], {Index: 1, Ranks: c.Nodes[1].Ranks}}
	_, err = Connect(&bad, good(), def)
	require.ErrorContains(t, err, "node 1 has no system")

	// MNNVL: hosts that disagree on the order of channel 0 while starting
	// it at the same rank build a ring that revisits a rank.
	gb, err := connectTopology(t, connGB, 1)
	require.NoError(t, err)
	gs = connectSynthGraphs(t, gb, synthSpec{channels: 1, bwIntra: 20})
	for _, id := range []model.GraphID{model.GraphRing, model.GraphTree} {
		gs[1][id].Channels[0].Intra = []int{0, 1, 2, 4, 3, 5, 6, 7}
	}
	_, err = Connect(gb, gs, def)
	require.ErrorContains(t, err, "ring 0 visits rank 3 twice")
}

// TestConnectOptionsFromEnv checks the environment parsing, NCCL's
// treatment of out-of-range values and errors naming the variable.
func TestConnectOptionsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	o, err := ConnectOptionsFromEnv(env())
	require.NoError(t, err)
	require.Equal(t, DefaultConnectOptions(), o)

	_, err = ConnectOptionsFromEnv(env("NCCL_MAX_NCHANNELS", "abc"))
	require.ErrorContains(t, err, "NCCL_MAX_NCHANNELS")
	for _, name := range ConnectEnvNames {
		_, err = ConnectOptionsFromEnv(env(name, "12x"))
		require.ErrorContains(t, err, name)
	}
	_, err = ConnectOptionsFromEnv(env("NCCL_MIN_NCHANNELS", "99999999999"))
	require.ErrorContains(t, err, "NCCL_MIN_NCHANNELS")
	require.ErrorContains(t, err, "out of range")

	o, err = ConnectOptionsFromEnv(env(
		"NCCL_MIN_NCHANNELS", "8", "NCCL_MAX_NCHANNELS", "0x10", "NCCL_MIN_NRINGS", "3", "NCCL_MAX_NRINGS", "",
		"NCCL_WORK_ARGS_BYTES", "4096", "NCCL_NCHANNELS_PER_NET_PEER", "4", "NCCL_MIN_P2P_NCHANNELS", "2",
		"NCCL_MAX_P2P_NCHANNELS", "16", "NCCL_UNPACK_DOUBLE_NCHANNELS", "0", "NCCL_COLLNET_ENABLE", "1",
		"NCCL_COLLNET_NODE_THRESHOLD", "3", "NCCL_NVLS_NCHANNELS", "12"))
	require.NoError(t, err)
	require.Equal(t, 8, o.MinNChannels)
	require.Equal(t, 16, o.MaxNChannels)
	require.Equal(t, 3, o.MinNRings)
	require.Equal(t, ConnectUnset, o.MaxNRings)
	require.Equal(t, int64(4096), o.WorkArgsBytes)
	require.Equal(t, 4, o.NChannelsPerNetPeer)
	require.Equal(t, [2]int{2, 16}, [2]int{o.MinP2PNChannels, o.MaxP2PNChannels})
	require.False(t, o.UnpackDoubleNChannels)
	require.True(t, o.CollNetEnable)
	require.Equal(t, 3, o.CollNetNodeThreshold)
	require.Equal(t, 12, o.NVLSCTAs)
	require.Equal(t, 8, o.minNChannels())
	require.Equal(t, 16, o.maxNChannels())

	// Values NCCL ignores or caps.
	o, err = ConnectOptionsFromEnv(env("NCCL_MIN_CTAS", "0", "NCCL_MAX_CTAS", "-3", "NCCL_NCHANNELS_PER_NET_PEER", "-1",
		"NCCL_NVLS_NCHANNELS", "0", "NCCL_COLLNET_ENABLE", "2"))
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 64}, [2]int{o.MinCTAs, o.MaxCTAs})
	require.Zero(t, o.NChannelsPerNetPeer)
	require.Zero(t, o.NVLSCTAs)
	require.False(t, o.CollNetEnable)
	o, err = ConnectOptionsFromEnv(env("NCCL_MIN_CTAS", "100", "NCCL_MAX_CTAS", "80"))
	require.NoError(t, err)
	require.Equal(t, [2]int{64, 64}, [2]int{o.MinCTAs, o.MaxCTAs})
	o, err = ConnectOptionsFromEnv(env("NCCL_MIN_CTAS", "9", "NCCL_MAX_CTAS", "4"))
	require.NoError(t, err)
	require.Equal(t, [2]int{4, 4}, [2]int{o.MinCTAs, o.MaxCTAs})
	o, err = ConnectOptionsFromEnv(env("NCCL_MAX_NCHANNELS", "200", "NCCL_MIN_NCHANNELS", "-7"))
	require.NoError(t, err)
	require.Equal(t, 64, o.maxNChannels())
	require.Equal(t, 0, o.minNChannels())
	_, err = ConnectOptionsFromEnv(nil)
	require.NoError(t, err)
}
