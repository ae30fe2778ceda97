package search

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// publicGraph is one graph of an NCCL_GRAPH_DUMP_FILE written by an older
// NCCL: its pattern, speeds, types and GPU order per channel (NVML indices;
// older versions write them in decimal without the system id).
type publicGraph struct {
	pattern, nChannels int
	speedIntra         float64
	typeIntra          string
	orders             [][]int
}

func readPublicGraphs(t *testing.T, file string) map[int]publicGraph {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	root, _, err := model.ParseXML(f, file, model.GraphGrammar)
	require.NoError(t, err)
	num := func(e *model.Element, k string) float64 {
		v, ok := e.Get(k)
		require.True(t, ok, "%s: <%s> lacks %s", file, e.Name, k)
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			i, err2 := strconv.ParseInt(v, 0, 64)
			require.NoError(t, err2, "%s: %s=%q", file, k, v)
			n = float64(i)
		}
		return n
	}
	out := map[int]publicGraph{}
	for _, g := range root.ChildrenNamed("graph") {
		pg := publicGraph{pattern: int(num(g, "pattern")), nChannels: int(num(g, "nchannels")), speedIntra: num(g, "speedintra")}
		pg.typeIntra, _ = g.Get("typeintra")
		for _, ch := range g.ChildrenNamed("channel") {
			var order []int
			for _, gpu := range ch.ChildrenNamed("gpu") {
				order = append(order, int(num(gpu, "dev")))
			}
			pg.orders = append(pg.orders, order)
		}
		out[int(num(g, "id"))] = pg
	}
	return out
}

// ourOrders returns a graph's channels as NVML device indices.
func ourOrders(s *model.System, g *model.Graph) [][]int {
	var out [][]int
	for _, ch := range g.Channels {
		var order []int
		for _, r := range ch.Intra {
			order = append(order, s.GPUByRank(r).GPU.Dev)
		}
		out = append(out, order)
	}
	return out
}

// TestPublicDumpsOfOlderNCCL compares with graphs that older NCCL versions
// dumped on the same machines (shared/groundtruth/public). What differs is
// explained, not tuned away:
//
//   - RTX 3090 x8, 2 nodes, NCCL 2.18.1: NVML reported no PCIe P2P between
//     these GeForce cards, so NCCL routed GPU-GPU traffic through the CPU; the
//     XML does not record that. With P2P off (NCCL_P2P_DISABLE=1) our 2.28.9
//     search gives exactly NCCL 2.18.1's ring and tree: one channel NET/0,
//     GPUs 0..7, NET/0 at 4 GB/s, SYS/SYS (with P2P on, 2.28.9 finds 7 GB/s).
//   - DGX-1 V100, NCCL 2.12.7: the same six rings in the same order; 2.12
//     rated a Volta NVLink at 21 GB/s (2.28.9: 20), so its per-channel
//     speed is 22 where ours is 20.
func TestPublicDumpsOfOlderNCCL(t *testing.T) {
	pub := filepath.Join(groundtruth.Dir(t), "groundtruth", "public")

	t.Run("rtx3090-2nodes-nccl2.18.1", func(t *testing.T) {
		dir := filepath.Join(pub, "panlichen-rtx3090x8-2nodes-nccl2.18.1")
		want := readPublicGraphs(t, filepath.Join(dir, "graph.xml"))
		params, err := model.ParamsFromEnv(func(k string) (string, bool) { return "1", k == "NCCL_P2P_DISABLE" })
		require.NoError(t, err)
		root, _, err := model.ReadTopologyFile(filepath.Join(dir, "topo.xml"))
		require.NoError(t, err)
		cl, err := model.LoadCluster(root, "topo.xml", model.LoadOptions{Nodes: 2, Params: params})
		require.NoError(t, err)
		sys := cl.Nodes[0].System
		gs, err := ComputeGraphs(sys, DefaultSearchOptions())
		require.NoError(t, err)
		for _, id := range []model.GraphID{model.GraphRing, model.GraphTree} {
			w, g := want[int(id)], gs[id]
			require.Equal(t, w.pattern, int(g.Pattern), "graph %d", id)
			require.Equal(t, w.nChannels, g.NChannels(), "graph %d", id)
			require.Equal(t, w.speedIntra, float64(g.BWIntra), "graph %d", id)
			require.Equal(t, w.typeIntra, g.TypeIntra.String(), "graph %d", id)
			require.Equal(t, w.orders, ourOrders(sys, g), "graph %d", id)
		}
	})

	t.Run("dgx1-v100-nccl2.12.7", func(t *testing.T) {
		dir := filepath.Join(pub, "dgx1-v100x8-blinkplus-nccl2.12.7")
		want := readPublicGraphs(t, filepath.Join(dir, "graph.xml"))
		root, _, err := model.ReadTopologyFile(filepath.Join(dir, "topology.xml"))
		require.NoError(t, err)
		cl, err := model.LoadCluster(root, "topology.xml", model.LoadOptions{Params: model.DefaultParams()})
		require.NoError(t, err)
		sys := cl.Nodes[0].System
		gs, err := ComputeGraphs(sys, DefaultSearchOptions())
		require.NoError(t, err)
		ring := gs[model.GraphRing]
		require.Equal(t, want[0].orders, ourOrders(sys, ring))
		require.Equal(t, "NVL", ring.TypeIntra.String())
		require.Equal(t, float64(22), want[0].speedIntra)
		require.Equal(t, float32(20), ring.BWIntra, "2.28.9 rates a Volta NVLink at 20 GB/s")
	})
}
