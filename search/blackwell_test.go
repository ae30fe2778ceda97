package search

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// Blackwell (sm100) rules of NCCL 2.28.9's search, channel setup and tuning
// model. There is no NCCL ground truth for these machines in ../shared, so
// every expected value is worked out by hand from NCCL's source, cited at
// each test, never taken from this package's output.

// runBlackwell runs the whole init pipeline with NVLS enabled (NCCL's
// default on NVSwitch systems) on a topology of ../shared/topologies
// (shared) or testdata/xml.
func runBlackwell(t *testing.T, file string, shared bool, nodes int, edit func(*Options)) *Result {
	t.Helper()
	path := filepath.Join("..", "testdata", "xml", file)
	if shared {
		path = filepath.Join(groundtruth.Dir(t), "topologies", file)
	}
	root, _, err := model.ReadTopologyFile(path)
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, path, model.LoadOptions{Nodes: nodes, Params: model.DefaultParams()})
	require.NoError(t, err)
	o := DefaultOptions()
	o.Search.NVLSEnable = true
	if edit != nil {
		edit(&o)
	}
	res, err := Run(cl, o)
	require.NoError(t, err)
	return res
}

// TestBlackwellRingSearch: src/graph/search.cc, ncclTopoCompute, uses
// sm100SpeedArrayIntra {90, 80, 70, ...} when ccMin >= 100. On an NVSwitch
// node every GPU has 18*40.1 = 721.8 GB/s to the switch and a ring channel
// takes its speed once out of and once into every GPU, so at the first
// speed, 90, floor(721.8/90) = 8 channels fit (8*90 = 720 < totalBw 721.8,
// so the search goes on, but no other speed gives more than 720).
// ncclTopoDupChannels then doubles a ring of bwIntra >= 25 unless ccMin >
// 80, bwIntra < 50 and more than 4 channels: 16 channels of 90/2 = 45. The same holds on a GB200 tray
// (4 GPUs, same NVLink 5 bandwidth) and on Hopper would start at 60.
func TestBlackwellRingSearch(t *testing.T) {
	for _, tc := range []struct {
		file   string
		shared bool
	}{{"b200x8-nvswitch-vm-8x400g.xml", true}, {"gb200-nvl72-tray-4gpu-4x400g.xml", false}} {
		g := runBlackwell(t, tc.file, tc.shared, 1, nil).NodeGraphs[0][model.GraphRing]
		require.Equal(t, 16, g.NChannels(), tc.file)
		require.Equal(t, float32(45), g.BWIntra, tc.file)
		require.Equal(t, model.PathNVL, g.TypeIntra, tc.file)
	}
}

// TestBlackwellNVLSChannels: src/transport/nvls.cc, ncclNvlsInit: sm100
// uses NVLS_NCHANNELS_SM100_NVL = 24 channels when the communicator is one
// NVLink domain (one host, or an MNNVL clique holding every rank) and
// NVLS_NCHANNELS_SM100 = 32 when it spans several; sm90 uses 16.
func TestBlackwellNVLSChannels(t *testing.T) {
	require.Equal(t, 24, runBlackwell(t, "b200x8-nvswitch-vm-8x400g.xml", true, 1, nil).Plan.NVLSChannels)
	require.Equal(t, 32, runBlackwell(t, "dgx-b200-8x400g.xml", false, 2, nil).Plan.NVLSChannels)
	// Two GB300 trays fused into one MNNVL clique of all 8 ranks: one domain.
	gb300 := runBlackwell(t, "oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml", true, 1, nil)
	require.True(t, gb300.Plan.MNNVL)
	require.Equal(t, 24, gb300.Plan.NVLSChannels)
	require.Equal(t, 16, runBlackwell(t, "dgx-h100-8x400g.xml", false, 2, nil).Plan.NVLSChannels)
}

// TestBlackwellTuningSingleNode: src/graph/tuning.cc, ncclTopoTuneModel,
// Blackwell row (compCapIndex 3, index2 0 for one node) on the B200 VM's
// ring (16 x 45, NVL) and balanced tree (16 x 40, NVL) graphs, 8 ranks:
//
//	Ring AllReduce, nsteps 14, ratio 8/14, busBw 16*45 = 720:
//	  LL:     min(llMaxBws[3][0] = 2*141, 720*.5) = 282          -> 161.14
//	          lat 6.6 + 14*0.6 = 15.0
//	  LL128:  min(720*.92 = 662.4, 16*perChMaxRingLL128 2*36.7)  -> 378.51
//	          lat 14.0 + 14*1.9 = 40.6
//	  Simple: 720                                                 -> 411.43
//	          lat 8.4 + 14*3.4 = 56.0
//	Tree AllReduce, busBw 16*40 = 640, min(640*.92, 16*70) = 588.8, ratio .5:
//	  LL:     min(588.8/3.8, 282) = 154.95                        -> 77.47
//	  LL128:  min(588.8*7/9, 16*55.6)                             -> 228.98
//	  Simple:                                                     -> 294.4
//	  lat base + 2*(7*intraLat): 6.8+8.4 = 15.2, 14+17.5 = 31.5, 8.4+56 = 64.4
//
// NVLS (src/graph/search.cc, ncclTopoSearchTryNvls): one channel per GPU
// as head (min = max = 8 channels on one node); each channel takes bwIntra
// on every GPU's NVSwitch link each way, twice on its head's, so a link
// carries 9*bwIntra: 90 does not fit 721.8, 80 does. Pass 2 then raises
// bwInter alone while it is below twice bwIntra: 90. The tuner's NVLS
// AllReduce: min(80*.74*7/8*2 = 103.6, 90) * 8 channels * 8/14 = 411.43,
// latency intraLat (NVLINK, NVLS, Simple) = 25.
//
// The two GB300 trays fused into one MNNVL clique (sm103) are one NCCL
// node of 8 ranks with the same NVLink 5 bandwidth: the same graphs and
// the same Blackwell row, so the same values.
func TestBlackwellTuningSingleNode(t *testing.T) {
	for _, file := range []string{"b200x8-nvswitch-vm-8x400g.xml", "oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml"} {
		res := runBlackwell(t, file, true, 1, nil)
		require.Equal(t, 1, res.Plan.NNodes, file)
		tu := res.Tuning
		ar := model.CollAllReduce
		ring, tree, nvls := res.Plan.Graphs[model.GraphRing], res.Plan.Graphs[model.GraphTree], res.Plan.Graphs[model.GraphNVLS]
		require.Equal(t, [3]int{16, 16, 8}, [3]int{ring.NChannels(), tree.NChannels(), nvls.NChannels()}, file)
		require.Equal(t, [4]float32{45, 40, 80, 90}, [4]float32{ring.BWIntra, tree.BWIntra, nvls.BWIntra, nvls.BWInter}, file)
		want := []struct {
			a       model.Algorithm
			p       model.Protocol
			lat, bw float64
		}{
			{model.AlgoRing, model.ProtoLL, 15.0, 282 * 8.0 / 14},
			{model.AlgoRing, model.ProtoLL128, 40.6, 662.4 * 8.0 / 14},
			{model.AlgoRing, model.ProtoSimple, 56.0, 720 * 8.0 / 14},
			{model.AlgoTree, model.ProtoLL, 15.2, 588.8 / 3.8 * .5},
			{model.AlgoTree, model.ProtoLL128, 31.5, 588.8 * 7 / 9 * .5},
			{model.AlgoTree, model.ProtoSimple, 64.4, 588.8 * .5},
			{model.AlgoNVLS, model.ProtoSimple, 25, 90 * 8 * 8.0 / 14},
		}
		for _, w := range want {
			require.InEpsilon(t, w.lat, tu.Latency[ar][w.a][w.p], 1e-5, "%s %v/%v latency", file, w.a, w.p)
			require.InEpsilon(t, w.bw, tu.Bandwidth[ar][w.a][w.p], 1e-5, "%s %v/%v bandwidth", file, w.a, w.p)
		}
	}
}

// TestBlackwellTuningCaps: the Blackwell caps of src/graph/tuning.cc's
// ncclTunerConstantsDefaults in 2.28.9 that only bind with fast NICs, on a
// DGX B200 (ring 8 x 48, NVL/PXN; NVLS graph 8 x 48/48):
//
//	2 nodes, Ring LL128 AllReduce: min(8*48*.92 = 353.28,
//	  8*perChMaxRingLL128Bws[3][1] = 8*34.6 = 276.8) * 16/30 = 147.63
//	  (2.29's 40 would give 170.67).
//	4 nodes, NVLS Tree AllReduce: min(intra 48*.74*7/8*2 = 62.16, inter 48,
//	  perChMaxNVLSTreeBws[3][2] = 43.8) * 8 * 32/62 = 180.85;
//	  latency intraLat 25 + 2*log2(4)*20.9 = 108.6.
//	2 nodes, NVLS Tree: inter 48*2, cap 96, so intra 62.16 binds:
//	  62.16 * 8 * 16/30 = 265.22; latency 25 + 2*1*20.9 = 66.8.
//
// NCCL 2.28.9's ncclTopoGetAlgoTime corrects only Tree's bandwidth by
// message size, not NVLS Tree's.
func TestBlackwellTuningCaps(t *testing.T) {
	ar := model.CollAllReduce
	two := runBlackwell(t, "dgx-b200-8x400g.xml", false, 2, nil)
	ring := two.Plan.Graphs[model.GraphRing]
	require.Equal(t, [3]float32{8, 48, 48}, [3]float32{float32(ring.NChannels()), ring.BWIntra, ring.BWInter})
	require.Equal(t, model.PathPXN, ring.TypeInter)
	require.InEpsilon(t, 8*34.6*16.0/30, two.Tuning.Bandwidth[ar][model.AlgoRing][model.ProtoLL128], 1e-5)
	require.InEpsilon(t, 62.16*8*16.0/30, two.Tuning.Bandwidth[ar][model.AlgoNVLSTree][model.ProtoSimple], 1e-5)
	require.InEpsilon(t, 66.8, two.Tuning.Latency[ar][model.AlgoNVLSTree][model.ProtoSimple], 1e-5)

	four := runBlackwell(t, "dgx-b200-8x400g.xml", false, 4, nil)
	nvls := four.Plan.Graphs[model.GraphNVLS]
	require.Equal(t, [3]float32{8, 48, 48}, [3]float32{float32(nvls.NChannels()), nvls.BWIntra, nvls.BWInter})
	tu := four.Tuning
	require.InEpsilon(t, 43.8*8*32.0/62, tu.Bandwidth[ar][model.AlgoNVLSTree][model.ProtoSimple], 1e-5)
	require.InEpsilon(t, 108.6, tu.Latency[ar][model.AlgoNVLSTree][model.ProtoSimple], 1e-5)
	bw, lat := tu.Bandwidth[ar][model.AlgoNVLSTree][model.ProtoSimple], tu.Latency[ar][model.AlgoNVLSTree][model.ProtoSimple]
	for _, n := range []int64{64 << 10, 4 << 20, 256 << 20} {
		require.InEpsilon(t, float64(lat)+float64(n)/(1000*float64(bw)), tu.AlgoTime(ar, model.AlgoNVLSTree, model.ProtoSimple, n, 1), 1e-5, "%d bytes", n)
	}
}

// TestBlackwellLL128OverC2C: src/graph/tuning.cc, ncclTopoTuneModel, LL128
// default: with NCCL_LL128_C2C=1 and ccMin >= 90 LL128 is enabled up to
// typeInter PXN, which covers P2C; with NCCL_LL128_C2C=0 only up to PXB.
// GB200 trays on the network search their rings through the Grace NICs
// (typeInter P2C), so Ring LL128 is on by default and off without
// LL128_C2C. Ring: one channel per NIC at the first inter speed the
// NIC paths allow (PCIe Gen5 x16: 48), 4 channels, doubled by
// ncclTopoDupChannels (4 channels is not more than 4): 8 x 24 at 2 nodes;
// bw 8*24*.92 = 176.64 (below the 8*34.6 cap) * 8/14.
func TestBlackwellLL128OverC2C(t *testing.T) {
	ar := model.CollAllReduce
	res := runBlackwell(t, "gb200-nvl72-tray-4gpu-4x400g.xml", false, 2, nil)
	ring := res.Plan.Graphs[model.GraphRing]
	require.Equal(t, model.PathP2C, ring.TypeInter)
	require.Equal(t, [2]float32{8, 24}, [2]float32{float32(ring.NChannels()), ring.BWIntra})
	require.InEpsilon(t, 176.64*8/14, res.Tuning.Bandwidth[ar][model.AlgoRing][model.ProtoLL128], 1e-5)
	off := runBlackwell(t, "gb200-nvl72-tray-4gpu-4x400g.xml", false, 2, func(o *Options) { o.Tune.LL128C2C = false })
	require.Zero(t, off.Tuning.Bandwidth[ar][model.AlgoRing][model.ProtoLL128])
	require.NotZero(t, off.Tuning.Bandwidth[ar][model.AlgoRing][model.ProtoSimple])
}

// TestBlackwellNVL72Rack: the 18 compute trays of a GB200 NVL72 rack as
// one MNNVL clique (NCCL_MNNVL_ENABLE=1, --nodes 18): 72 ranks, one NCCL
// node, 24 NVLS channels (one NVLink domain, nvls.cc). The NVLS graph takes
// its most heads, min(NCCL_MAX_NVLS_ARITY 32, 72) = 32, every GPU link
// carrying bwIntra per channel and twice for its head: 33*bwIntra <=
// 721.8 gives 20 (24*33 = 792 does not fit); pass 2 raises bwInter while
// below 2*bwIntra: 24, 30, 40. NVLS AllReduce: min(20*.74*31/32*2 =
// 28.675, 40) * 32 * 72/142 = 465.26 GB/s. The ring is the 8-GPU node's:
// floor(721.8/90) = 8 channels at 90, duplicated to 16 x 45.
func TestBlackwellNVL72Rack(t *testing.T) {
	path := filepath.Join("..", "testdata", "xml", "gb200-nvl72-tray-4gpu-4x400g.xml")
	root, _, err := model.ReadTopologyFile(path)
	require.NoError(t, err)
	p := model.DefaultParams()
	p.MNNVLEnable = 1
	cl, err := model.LoadCluster(root, path, model.LoadOptions{Nodes: 18, Params: p})
	require.NoError(t, err)
	o := DefaultOptions()
	o.Search.NVLSEnable = true
	res, err := Run(cl, o)
	require.NoError(t, err)
	require.Equal(t, [3]int{72, 1, 24}, [3]int{res.Plan.NRanks, res.Plan.NNodes, res.Plan.NVLSChannels})
	require.True(t, res.Plan.MNNVL)
	nvls, ring := res.Plan.Graphs[model.GraphNVLS], res.Plan.Graphs[model.GraphRing]
	require.Equal(t, [3]float32{32, 20, 40}, [3]float32{float32(nvls.NChannels()), nvls.BWIntra, nvls.BWInter})
	require.Equal(t, [2]float32{16, 45}, [2]float32{float32(ring.NChannels()), ring.BWIntra})
	require.InEpsilon(t, 20*.74*31/32*2*32*72.0/142, res.Tuning.Bandwidth[model.CollAllReduce][model.AlgoNVLS][model.ProtoSimple], 1e-5)
}

// TestMNNVLCopiesShortcutEqualsFullSearch: for --nodes copies joined into
// MNNVL cliques, taking node 0's graphs (renumbered for later cliques)
// gives what searching every node's own fused system gives.
func TestMNNVLCopiesShortcutEqualsFullSearch(t *testing.T) {
	path := filepath.Join("..", "testdata", "xml", "gb200-nvl72-tray-4gpu-4x400g.xml")
	root, _, err := model.ReadTopologyFile(path)
	require.NoError(t, err)
	p := model.DefaultParams()
	p.MNNVLEnable, p.MNNVLHosts = 1, 2
	cl, err := model.LoadCluster(root, path, model.LoadOptions{Nodes: 4, Params: p})
	require.NoError(t, err)
	require.Equal(t, 2, cl.CliqueHosts)
	o := DefaultOptions()
	o.Search.NVLSEnable = true
	res, err := Run(cl, o)
	require.NoError(t, err)
	require.Equal(t, [2]int{16, 2}, [2]int{res.Plan.NRanks, res.Plan.NNodes}, "two cliques of two trays")
	// Node 1 shares node 0's clique, node 2 starts the other one.
	for _, i := range []int{1, 2} {
		n := cl.Nodes[i]
		full, err := ComputeGraphs(n.System, o.Search)
		require.NoError(t, err)
		for id := range full {
			a, err := GraphDocOf(full[id], n.System)
			require.NoError(t, err)
			b, err := GraphDocOf(res.NodeGraphs[i][id], n.System)
			require.NoError(t, err)
			require.Equal(t, a, b, "node %d graph %d", i, id)
		}
	}
}

// TestBlackwellTwoNVL72Racks: two GB200 NVL72 racks (--nodes 36,
// NCCL_MNNVL_ENABLE=1, TWINCCL_MNNVL_HOSTS=18): two NCCL nodes of 72 ranks
// joined by 72 ConnectX-7 each, 32 NVLS channels (several domains).
// Ring: each channel takes its speed on every GPU's NVSwitch link each
// way and a NIC per host at most 48 (PCIe): floor(721.8/48) = 15 x 48 =
// 720 is beaten by 16 x 45.1 = 721.6 (42: 17 x 42 = 714), not doubled
// (ccMin > 80, bwIntra < 50, more than 4 channels). NVLS: one channel per
// NIC up to NCCL_MAX_NVLS_ARITY 32, its head the NIC's local GPU; 33 *
// bwIntra per NVSwitch link as in one rack gives 20 (22*33 = 726 does not
// fit), then bwInter rises to 40.
func TestBlackwellTwoNVL72Racks(t *testing.T) {
	path := filepath.Join("..", "testdata", "xml", "gb200-nvl72-tray-4gpu-4x400g.xml")
	root, _, err := model.ReadTopologyFile(path)
	require.NoError(t, err)
	p := model.DefaultParams()
	p.MNNVLEnable, p.MNNVLHosts = 1, 18
	cl, err := model.LoadCluster(root, path, model.LoadOptions{Nodes: 36, Params: p})
	require.NoError(t, err)
	o := DefaultOptions()
	o.Search.NVLSEnable = true
	res, err := Run(cl, o)
	require.NoError(t, err)
	require.Equal(t, [3]int{144, 2, 32}, [3]int{res.Plan.NRanks, res.Plan.NNodes, res.Plan.NVLSChannels})
	ring, nvls := res.Plan.Graphs[model.GraphRing], res.Plan.Graphs[model.GraphNVLS]
	require.Equal(t, [3]float32{16, 45.1, 45.1}, [3]float32{float32(ring.NChannels()), ring.BWIntra, ring.BWInter})
	require.Equal(t, model.PathP2C, ring.TypeInter)
	require.Equal(t, [3]float32{32, 20, 40}, [3]float32{float32(nvls.NChannels()), nvls.BWIntra, nvls.BWInter})
}
