package search

import (
	"bufio"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// tunePlanFromDoc builds the tuner's input from a ground-truth case: node
// 0's aligned graphs, the channel counts NCCL logged, the largest tree
// pattern over nodes and the compute capabilities of the GPUs.
func tunePlanFromDoc(t *testing.T, c gtCase) *model.Plan {
	t.Helper()
	p := &model.Plan{
		NRanks: c.Doc.NRanks, NNodes: c.Doc.NNodes, MNNVL: c.Doc.MNNVL,
		Graphs:       c.nodeGraphs(t, 0, true),
		NChannels:    c.Doc.Channels.NChannels,
		CollChannels: c.Doc.Channels.CollChannels, NVLSChannels: c.Doc.Channels.NVLSChannels,
		P2PChannels: c.Doc.Channels.P2PnChannels, P2PChannelsPerPeer: c.Doc.Channels.P2PnChannelsPerPeer,
	}
	for n := range c.Doc.Nodes {
		g := c.nodeGraphs(t, n, true)[model.GraphTree]
		p.MaxTreePattern = max(p.MaxTreePattern, g.Pattern)
		for _, gpu := range c.Doc.Nodes[n].System.GPUs {
			if p.MinCompCap == 0 || gpu.SM < p.MinCompCap {
				p.MinCompCap = gpu.SM
			}
			p.MaxCompCap = max(p.MaxCompCap, gpu.SM)
		}
	}
	return p
}

// tuneThresholdLine returns the "threadThresholds ..." line of a case's log.
func tuneThresholdLine(t *testing.T, c gtCase) string {
	t.Helper()
	f, err := os.Open(c.Text)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "NCCL INFO threadThresholds "); ok {
			return strings.TrimSpace(rest)
		}
	}
	require.NoError(t, sc.Err())
	t.Fatalf("%s: no threadThresholds line", c.Text)
	return ""
}

// TestTuneGroundTruth checks the whole table of every case against NCCL:
// latencies and bandwidths bit for bit, thread counts and thresholds.
func TestTuneGroundTruth(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			tu, err := Tune(tunePlanFromDoc(t, c), c.Cluster, DefaultTuneOptions())
			require.NoError(t, err)
			got := tu.Doc()
			want := c.Doc.Tuning
			require.Len(t, got.Table, len(want.Table))
			for i, w := range want.Table {
				g := got.Table[i]
				require.Equal(t, [3]string{w.Coll, w.Algo, w.Proto}, [3]string{g.Coll, g.Algo, g.Proto}, "entry %d", i)
				require.Equal(t, math.Float32bits(float32(w.Latency)), math.Float32bits(float32(g.Latency)),
					"%s %s %s latency: want %.9g got %.9g", w.Coll, w.Algo, w.Proto, w.Latency, g.Latency)
				require.Equal(t, math.Float32bits(float32(w.Bandwidth)), math.Float32bits(float32(g.Bandwidth)),
					"%s %s %s bandwidth: want %.9g got %.9g", w.Coll, w.Algo, w.Proto, w.Bandwidth, g.Bandwidth)
			}
			require.Equal(t, want.MaxThreads, got.MaxThreads)
			require.Equal(t, tuneThresholdLine(t, c), tu.ThreadThresholdsString())
		})
	}
}

// tuneCase returns the ground-truth case called name.
func tuneCase(t *testing.T, name string) gtCase {
	t.Helper()
	for _, c := range loadGroundTruth(t) {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no ground-truth case %s", name)
	return gtCase{}
}

// tuneCaseWith tunes a ground-truth case with options.
func tuneCaseWith(t *testing.T, name string, o TuneOptions) *Tuning {
	t.Helper()
	c := tuneCase(t, name)
	tu, err := Tune(tunePlanFromDoc(t, c), c.Cluster, o)
	require.NoError(t, err)
	return tu
}

// tuneFormulaTime is the cost formula written out: lat + bytes/(1000*bw),
// in float like NCCL.
func tuneFormulaTime(lat, bw float32, nBytes int64) float32 {
	return lat + float32(nBytes)/(1000*bw)
}

// TestTuneHandValues spot-checks table entries against the formulas of
// NCCL's model worked out by hand (H200 pair: Hopper, one node, ring 12
// channels × 30 GB/s NVLink, tree 12 × 60).
func TestTuneHandValues(t *testing.T) {
	tu := tuneCaseWith(t, "h200x2-nvswitch", DefaultTuneOptions())
	ar, ag := model.CollAllReduce, model.CollAllGather
	// Ring LL AllReduce: base 6.6 + nsteps 2 × NVLink 0.6; bw min(141 (Hopper
	// LL cap), 12*30/2) × nRanks/nsteps (2/2).
	require.Equal(t, float32(6.6)+2*float32(0.6), tu.Latency[ar][model.AlgoRing][model.ProtoLL])
	require.Equal(t, float32(141), tu.Bandwidth[ar][model.AlgoRing][model.ProtoLL])
	// AllGather: nsteps 1, ratio 2/1.
	require.Equal(t, float32(282), tu.Bandwidth[ag][model.AlgoRing][model.ProtoLL])
	// Ring LL128: min(360*0.92, 12*36.7).
	require.Equal(t, float32(360*0.92), tu.Bandwidth[ar][model.AlgoRing][model.ProtoLL128])
	// Tree Simple AllReduce: min(720*0.92, 12*38.7) × 0.5; latency 8.4 +
	// 2*(1*4.0).
	require.Equal(t, float32(12*38.7*0.5), tu.Bandwidth[ar][model.AlgoTree][model.ProtoSimple])
	require.Equal(t, float32(8.4)+2*float32(4), tu.Latency[ar][model.AlgoTree][model.ProtoSimple])
	// CollNet Direct stays disabled (bandwidth 0) but its latency is still
	// computed: 2*(min(1,ppn-1)*0 + (ppn-1)*0.4) + 0 for LL.
	require.Equal(t, float32(0.8), tu.Latency[ag][model.AlgoCollNetDirect][model.ProtoLL])
	require.Zero(t, tu.Bandwidth[ag][model.AlgoCollNetDirect][model.ProtoSimple])
	// NVLS Tree is off on one node; NVLS has no graph.
	require.False(t, tu.AlgoEnabled[ar][model.AlgoNVLSTree])
	require.Zero(t, tu.Latency[ar][model.AlgoNVLS][model.ProtoSimple])
	require.Equal(t, "8/8/64 | 16/8/64 | 512 | 512", tu.ThreadThresholdsString())
	require.Equal(t, 24, tu.NChannels)
}

// TestChooseSmallAndLarge checks the minimum-time pair and the channel and
// thread reduction on the H200 pair.
func TestChooseSmallAndLarge(t *testing.T) {
	tu := tuneCaseWith(t, "h200x2-nvswitch", DefaultTuneOptions())
	ar := model.CollAllReduce

	// 8 bytes: Ring/LL (latency 7.8) beats Tree/LL (8.0). Channels shrink
	// while 8 < nc*512*16 down to 1; threads halve 512→256→128→64 and are
	// raised to 3 warps.
	ch, err := tu.Choose(ar, 2, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoRing, ch.Algo)
	require.Equal(t, model.ProtoLL, ch.Proto)
	require.Equal(t, 1, ch.NChannels)
	require.Equal(t, 96, ch.NThreads)
	require.Equal(t, int64(8), ch.NBytes)
	require.Equal(t, tuneFormulaTime(float32(6.6)+2*float32(0.6), 141, 8), ch.TimeUs)
	// Tree LL below 64 bytes gets no correction factor.
	require.Equal(t, tuneFormulaTime(tu.Latency[ar][model.AlgoTree][model.ProtoLL], tu.Bandwidth[ar][model.AlgoTree][model.ProtoLL], 8),
		ch.Costs[model.AlgoTree][model.ProtoLL])
	// Disabled pairs cost -1.
	require.Equal(t, CostIgnore, ch.Costs[model.AlgoCollNetDirect][model.ProtoSimple])
	require.Equal(t, CostIgnore, ch.Costs[model.AlgoNVLS][model.ProtoSimple])

	// 256 MiB: Ring/Simple (360 GB/s) beats Ring/LL128 (331.2) and
	// Tree/Simple (232.2 × 0.9 correction at log2(2^28/64) = 22). All 24
	// channels and 512 threads stay; Simple Ring adds a sync warp.
	n := int64(1 << 28)
	ch, err = tu.Choose(ar, n/4, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoRing, ch.Algo)
	require.Equal(t, model.ProtoSimple, ch.Proto)
	require.Equal(t, 24, ch.NChannels)
	require.Equal(t, 512+32, ch.NThreads)
	require.Equal(t, tuneFormulaTime(float32(8.4)+2*float32(3.4), 360, n), ch.TimeUs)
	treeBw := float32(12*38.7*0.5) * float32(0.9)
	require.Equal(t, tuneFormulaTime(float32(8.4)+2*float32(4), treeBw, n), ch.Costs[model.AlgoTree][model.ProtoSimple])

	// AllGather counts nRanks × count bytes.
	ch, err = tu.Choose(model.CollAllGather, 1000, 2)
	require.NoError(t, err)
	require.Equal(t, int64(4000), ch.NBytes)

	// Tree always runs 640 threads: force Tree.
	o := DefaultTuneOptions()
	o.Algo = "allreduce:tree"
	tree := tuneCaseWith(t, "h200x2-nvswitch", o)
	ch, err = tree.Choose(ar, 1024, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoTree, ch.Algo)
	require.Equal(t, 640, ch.NThreads)
	// 4096 B < nc*512*8 (Tree LL) until nc = 1.
	require.Equal(t, model.ProtoLL, ch.Proto)
	require.Equal(t, 1, ch.NChannels)
}

// TestThreadsOnChannels checks Threads, the block size of a call on a
// given channel count (what the simulator gives a Program whose channels
// were forced), against NCCL's rules worked by hand on the H200 pair:
// Ring LL's threshold is 8 bytes per thread times 2 ranks, Simple's 64;
// threads halve while nBytes < nc*nt*threshold and nt is a multiple of
// 128, then Ring Simple adds its sync warp and nothing goes below 3 warps.
func TestThreadsOnChannels(t *testing.T) {
	tu := tuneCaseWith(t, "h200x2-nvswitch", DefaultTuneOptions())
	ring := model.AlgoRing
	for _, tc := range []struct {
		p      model.Protocol
		nBytes int64
		nc     int
		want   int
	}{
		{model.ProtoLL, 384, 1, 96},      // 512→256→128→64 (384 < 64*16 but 64 is no multiple of 128), raised to 3 warps
		{model.ProtoLL, 2048, 1, 128},    // 2048 < 256*16, not < 128*16
		{model.ProtoLL, 3072, 1, 128},    // 3 KiB: 128 threads, three lines each
		{model.ProtoLL, 24576, 3, 512},   // 24576 = 3*512*16: no halving
		{model.ProtoLL, 24576, 4, 256},   // on 4 channels it halves once
		{model.ProtoSimple, 3072, 1, 96}, // 512→64, +32
		{model.ProtoSimple, 24576, 1, 288},
		{model.ProtoSimple, 32768, 1, 544},
	} {
		require.Equal(t, tc.want, tu.Threads(ring, tc.p, tc.nBytes, tc.nc), "%v %d B on %d channels", tc.p, tc.nBytes, tc.nc)
	}
	// Choose sizes threads on the channels it kept: the same count.
	ch, err := tu.Choose(model.CollBroadcast, 3072/4, 4)
	require.NoError(t, err)
	require.Equal(t, tu.Threads(ch.Algo, ch.Proto, ch.NBytes, ch.NChannels), ch.NThreads)
}

// tuneHandTuning is a hand-made table with no usable pair, for tie and
// channel tests.
func tuneHandTuning(nRanks, nNodes, nChannels int) *Tuning {
	t := &Tuning{NRanks: nRanks, NNodes: nNodes, NChannels: nChannels, MinCompCap: 90, CPUArch: model.CPUArchX86,
		LocalRanks: nRanks / nNodes, MaxLocalRanks: nRanks / nNodes}
	t.MaxThreads = [nAlgo][nProto]int{{512, 640, 512}, {512, 640, 512}, {0, 0, 640}, {0, 0, 640}, {0, 0, 640}, {0, 0, 640}, {0, 0, 0}}
	for a := range t.ThreadThresholds {
		t.ThreadThresholds[a] = [nProto]int64{8, 8, 64}
	}
	t.ThreadThresholds[model.AlgoRing][model.ProtoLL] *= int64(nRanks)
	t.ThreadThresholds[model.AlgoCollNetDirect][model.ProtoSimple] = 512
	t.ThreadThresholds[model.AlgoCollNetChain][model.ProtoSimple] = 512
	return t
}

// TestChooseTieBreak checks NCCL's scan order: algorithms outer, protocols
// inner, strict "<".
func TestChooseTieBreak(t *testing.T) {
	tu := tuneHandTuning(16, 2, 8)
	tu.CollNet = true
	bc, ar := model.CollBroadcast, model.CollAllReduce
	for _, p := range []model.Protocol{model.ProtoLL, model.ProtoSimple} {
		tu.Latency[bc][model.AlgoRing][p], tu.Bandwidth[bc][model.AlgoRing][p] = 5, 10
	}
	ch, err := tu.Choose(bc, 1000, 1)
	require.NoError(t, err)
	require.Equal(t, model.ProtoLL, ch.Proto, "equal times: lower protocol wins")

	// Ring/Simple ties CollNetDirect/LL: the lower algorithm wins even
	// with the higher protocol.
	tu.Latency[ar][model.AlgoRing][model.ProtoSimple], tu.Bandwidth[ar][model.AlgoRing][model.ProtoSimple] = 5, 10
	tu.Latency[ar][model.AlgoCollNetDirect][model.ProtoLL], tu.Bandwidth[ar][model.AlgoCollNetDirect][model.ProtoLL] = 5, 10
	ch, err = tu.Choose(ar, 10, 1) // 10 B: below the 64 B/channel plateau threshold
	require.NoError(t, err)
	require.Equal(t, model.AlgoRing, ch.Algo)
	require.Equal(t, model.ProtoSimple, ch.Proto)
	require.Equal(t, ch.Costs[model.AlgoRing][model.ProtoSimple], ch.Costs[model.AlgoCollNetDirect][model.ProtoLL])

	// Ring/Simple AllReduce across nodes: latency ×1.4 (sm90) once
	// nBytes/(nChannels*nRanks) >= 64.
	n := int64(8 * 16 * 64)
	ch, err = tu.Choose(ar, n, 1)
	require.NoError(t, err)
	require.Equal(t, tuneFormulaTime(float32(5*1.4), 10, n), ch.Costs[model.AlgoRing][model.ProtoSimple])
	require.Equal(t, model.AlgoCollNetDirect, ch.Algo, "the plateau makes Ring/Simple dearer")
	ch, err = tu.Choose(ar, n-1, 1)
	require.NoError(t, err)
	require.Equal(t, tuneFormulaTime(5, 10, n-1), ch.Costs[model.AlgoRing][model.ProtoSimple])

	// fp8 beyond 8 ranks: Ring costs ×1024.
	ch, err = tu.ChooseCall(Call{Coll: ar, Count: 10, TypeSize: 1, FP8: true})
	require.NoError(t, err)
	require.Equal(t, model.AlgoCollNetDirect, ch.Algo)
	require.Equal(t, tuneFormulaTime(5, 10, 10)*1024, ch.Costs[model.AlgoRing][model.ProtoSimple])

	// Aggregated operations: Ring pays its latency per operation, others
	// per batch of 8.
	ch, err = tu.ChooseCall(Call{Coll: ar, Count: 10, TypeSize: 1, NumPipeOps: 9})
	require.NoError(t, err)
	require.Equal(t, 9*float32(5)+float32(10)/(1000*10), ch.Costs[model.AlgoRing][model.ProtoSimple])
	require.Equal(t, 2*float32(5)+float32(10)/(1000*10), ch.Costs[model.AlgoCollNetDirect][model.ProtoLL])
}

// TestChooseChannelTuning works NCCL's channel loops by hand.
func TestChooseChannelTuning(t *testing.T) {
	ar := model.CollAllReduce
	// CollNet Direct, 32 channels, 640 threads, 1 head, threshold 512, 1 MiB:
	// channels drop while 1 MiB < nc*640*th; th halves at nc = 24 (→256)
	// and at nc = 12 (→128), where 11*640*128 = 901120 < 1 MiB stops it.
	tu := tuneHandTuning(16, 2, 32)
	tu.CollNet, tu.CollNetHeads = true, 1
	tu.Latency[ar][model.AlgoCollNetDirect][model.ProtoSimple], tu.Bandwidth[ar][model.AlgoCollNetDirect][model.ProtoSimple] = 1, 100
	ch, err := tu.Choose(ar, 1<<18, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoCollNetDirect, ch.Algo)
	require.Equal(t, 11, ch.NChannels)
	require.Equal(t, 640, ch.NThreads)

	// More than 8 local ranks: CollNet Direct is skipped.
	tu.MaxLocalRanks = 9
	_, err = tu.Choose(ar, 1<<18, 4)
	require.Error(t, err)

	// NVLS: nvlsChannels on one node, min(nvls, nChannels) across nodes.
	nv := tuneHandTuning(8, 1, 24)
	nv.NVLS, nv.NVLSChannels = true, 32
	nv.Latency[ar][model.AlgoNVLS][model.ProtoSimple], nv.Bandwidth[ar][model.AlgoNVLS][model.ProtoSimple] = 1, 100
	ch, err = nv.Choose(ar, 1, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoNVLS, ch.Algo)
	require.Equal(t, 32, ch.NChannels)
	require.Equal(t, 640, ch.NThreads)
	nv2 := tuneHandTuning(16, 2, 24)
	nv2.NVLS, nv2.NVLSChannels, nv2.CollNet = true, 32, true
	nv2.Latency[ar][model.AlgoNVLS][model.ProtoSimple], nv2.Bandwidth[ar][model.AlgoNVLS][model.ProtoSimple] = 1, 100
	ch, err = nv2.Choose(ar, 1, 4)
	require.NoError(t, err)
	require.Equal(t, 24, ch.NChannels)
	nv2.CollNet = false // multi-node NVLS needs CollNet
	_, err = nv2.Choose(ar, 1, 4)
	require.Error(t, err)

	// Ring/LL128 at 1 MiB on 16 channels: 1 MiB < nc*640*8 never holds
	// (16*640*8 = 81920), so everything stays.
	r := tuneHandTuning(8, 1, 16)
	r.Latency[ar][model.AlgoRing][model.ProtoLL128], r.Bandwidth[ar][model.AlgoRing][model.ProtoLL128] = 1, 100
	ch, err = r.Choose(ar, 1<<18, 4)
	require.NoError(t, err)
	require.Equal(t, [2]int{16, 640}, [2]int{ch.NChannels, ch.NThreads})
	// 40000 B: channels drop to 7 (7*640*8 = 35840 <= 40000); threads stay
	// (640 % 128 == 0 but 40000 >= 35840).
	ch, err = r.Choose(ar, 10000, 4)
	require.NoError(t, err)
	require.Equal(t, [2]int{7, 640}, [2]int{ch.NChannels, ch.NThreads})
	// 1000 B: one channel, then 640 halves to 320 (640 % 128 == 0); 320 %
	// 128 != 0 stops there although 1000 < 320*8.
	ch, err = r.Choose(ar, 250, 4)
	require.NoError(t, err)
	require.Equal(t, [2]int{1, 320}, [2]int{ch.NChannels, ch.NThreads})
}

// TestChooseOneRank: a single rank always runs Ring/Simple at cost 0.
func TestChooseOneRank(t *testing.T) {
	c := tuneCase(t, "h200x2-nvswitch")
	p := tunePlanFromDoc(t, c)
	p.NRanks = 1
	tu, err := Tune(p, c.Cluster, DefaultTuneOptions())
	require.NoError(t, err)
	require.Equal(t, [nColl][nAlgo][nProto]float32{}, tu.Bandwidth)
	require.Equal(t, [nAlgo][nProto]int64{}, tu.ThreadThresholds, "NCCL returns before setting thresholds")
	for _, coll := range []model.Collective{model.CollAllReduce, model.CollBroadcast, model.CollAllGather} {
		ch, err := tu.Choose(coll, 1<<20, 4)
		require.NoError(t, err)
		require.Equal(t, model.AlgoRing, ch.Algo)
		require.Equal(t, model.ProtoSimple, ch.Proto)
		require.Zero(t, ch.TimeUs)
		require.Equal(t, 24, ch.NChannels)
		require.Equal(t, 512+32, ch.NThreads)
	}
}

// TestChooseEnvRestrictions checks that NCCL_ALGO and NCCL_PROTO limit the
// choice, per function where a prefix says so.
func TestChooseEnvRestrictions(t *testing.T) {
	o := DefaultTuneOptions()
	o.Proto = "^LL,LL128"
	tu := tuneCaseWith(t, "h200x2-nvswitch", o)
	ch, err := tu.Choose(model.CollAllReduce, 2, 4)
	require.NoError(t, err)
	require.Equal(t, model.ProtoSimple, ch.Proto)
	require.Equal(t, model.AlgoRing, ch.Algo)
	require.Equal(t, CostIgnore, ch.Costs[model.AlgoRing][model.ProtoLL])

	// Only Tree for every function: Broadcast has no Tree model, so nothing
	// is left and the error names the variable.
	o = DefaultTuneOptions()
	o.Algo = "Tree"
	tu = tuneCaseWith(t, "h200x2-nvswitch", o)
	_, err = tu.Choose(model.CollBroadcast, 100, 4)
	require.ErrorContains(t, err, "NCCL_ALGO")
	ch, err = tu.Choose(model.CollAllReduce, 1<<20, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoTree, ch.Algo)

	// Per-function lists: Ring everywhere, but AllReduce anything but Ring.
	o.Algo = "ring;allreduce:^RING"
	tu = tuneCaseWith(t, "h200x2-nvswitch", o)
	require.True(t, tu.AlgoEnabled[model.CollBroadcast][model.AlgoRing])
	require.False(t, tu.AlgoEnabled[model.CollBroadcast][model.AlgoTree])
	require.False(t, tu.AlgoEnabled[model.CollAllReduce][model.AlgoRing])
	require.True(t, tu.AlgoEnabled[model.CollAllReduce][model.AlgoTree])

	// LL128 auto rule: PCIe (typeIntra SYS) turns it off; naming it in
	// NCCL_PROTO forces it on.
	def := tuneCaseWith(t, "pcie-rtx3090x8-2socket-1ib", DefaultTuneOptions())
	require.Zero(t, def.Bandwidth[model.CollAllReduce][model.AlgoRing][model.ProtoLL128])
	o = DefaultTuneOptions()
	o.Proto = "LL128,Simple"
	forced := tuneCaseWith(t, "pcie-rtx3090x8-2socket-1ib", o)
	require.NotZero(t, forced.Bandwidth[model.CollAllReduce][model.AlgoRing][model.ProtoLL128])
	require.Zero(t, forced.Bandwidth[model.CollAllReduce][model.AlgoRing][model.ProtoLL])
	// A list for AllReduce only leaves the others on auto.
	o.Proto = "allreduce:ll128"
	part := tuneCaseWith(t, "pcie-rtx3090x8-2socket-1ib", o)
	require.NotZero(t, part.Bandwidth[model.CollAllReduce][model.AlgoRing][model.ProtoLL128])
	require.Zero(t, part.Bandwidth[model.CollAllGather][model.AlgoRing][model.ProtoLL128])
	require.NotZero(t, part.Bandwidth[model.CollAllGather][model.AlgoRing][model.ProtoLL])
}

// TestTunePAT: with one GPU per node PAT models AllGather/ReduceScatter.
func TestTunePAT(t *testing.T) {
	c := tuneCase(t, "h200x2-nvswitch")
	p := tunePlanFromDoc(t, c)
	p.NNodes = 2 // pretend: two nodes of one GPU each
	tu, err := Tune(p, c.Cluster, DefaultTuneOptions())
	require.NoError(t, err)
	ag := model.CollAllGather
	// latency 8 + log2(2)*(14/3.5) + 2*2.8 (ppn 1 uses the Tree NET latency);
	// bandwidth 12 channels × 60 (tree graph, ≤ 2 nodes: bwIntra) × 0.75.
	require.Equal(t, float32(8+1*(14/3.5)+2*2.8), tu.Latency[ag][model.AlgoPAT][model.ProtoSimple])
	require.Equal(t, float32(12*60*0.75), tu.Bandwidth[ag][model.AlgoPAT][model.ProtoSimple])
	require.Zero(t, tu.Bandwidth[ag][model.AlgoPAT][model.ProtoLL])
	require.Zero(t, tu.Bandwidth[model.CollAllReduce][model.AlgoPAT][model.ProtoSimple])
	// PAT ReduceScatter is skipped for scaled reductions.
	ch, err := tu.ChooseCall(Call{Coll: model.CollReduceScatter, Count: 1 << 20, TypeSize: 4, ScaledReduce: true})
	require.NoError(t, err)
	require.Equal(t, CostIgnore, ch.Costs[model.AlgoPAT][model.ProtoSimple])
	ch, err = tu.ChooseCall(Call{Coll: model.CollReduceScatter, Count: 1 << 20, TypeSize: 4})
	require.NoError(t, err)
	require.Positive(t, ch.Costs[model.AlgoPAT][model.ProtoSimple])
	// NCCL_PAT_ENABLE=0 turns it off.
	o := DefaultTuneOptions()
	o.PATEnable = 0
	off, err := Tune(p, c.Cluster, o)
	require.NoError(t, err)
	require.Zero(t, off.Latency[ag][model.AlgoPAT][model.ProtoSimple])
}

// TestTuneEnvErrors checks malformed settings and NCCL's corrections.
func TestTuneEnvErrors(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	for _, tc := range []struct{ kv []string }{
		{[]string{"NCCL_PROTO", "foo"}},
		{[]string{"NCCL_PROTO", "LL, Simple"}},
		{[]string{"NCCL_ALGO", "ring;tree"}},
		{[]string{"NCCL_ALGO", "scatter:ring"}},
		{[]string{"NCCL_ALGO", "collnet"}},
		{[]string{"NCCL_THREAD_THRESHOLDS", "1 2 3"}},
		{[]string{"NCCL_THREAD_THRESHOLDS", "1 2 3 4 5 x"}},
		{[]string{"NCCL_NTHREADS", "many"}},
		{[]string{"NCCL_NET_OVERHEAD", "1.5"}},
	} {
		_, err := TuneOptionsFromEnv(env(tc.kv...))
		require.ErrorContains(t, err, tc.kv[0], "%v", tc.kv)
	}
	_, err := TuneOptionsFromEnv(env("NCCL_PROTO", "foo"))
	require.ErrorContains(t, err, "LL, LL128, Simple")
	_, err = TuneOptionsFromEnv(env("NCCL_ALGO", "ring,pat2"))
	require.ErrorContains(t, err, "Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT")

	// Accepted forms.
	o, err := TuneOptionsFromEnv(env("NCCL_ALGO", "^nvls,nvlstree;AllReduce:tree,ring", "NCCL_PROTO", "simple;allgather:^ll",
		"NCCL_THREAD_THRESHOLDS", "1 2 3 -1 -1 6", "NCCL_NET_OVERHEAD", "3000", "NCCL_PAT_ENABLE", "0", "NCCL_LL128_C2C", "0"))
	require.NoError(t, err)
	require.Equal(t, [6]int64{1, 2, 3, -1, -1, 6}, o.ThreadThresholds)
	require.Equal(t, int64(3000), o.NetOverheadNs)
	require.Equal(t, 0, o.PATEnable)
	require.False(t, o.LL128C2C)
	// ";simple": the first entry starts after a delimiter, so NCCL demands
	// a prefix.
	_, err = TuneOptionsFromEnv(env("NCCL_PROTO", ";simple"))
	require.ErrorContains(t, err, "NCCL_PROTO")

	tu := tuneCaseWith(t, "h200x2-nvswitch", func() TuneOptions {
		o := DefaultTuneOptions()
		o.ThreadThresholds = [6]int64{1, 2, 3, -1, -1, 6}
		return o
	}())
	require.Equal(t, "1/2/3 | 16/8/6 | 512 | 512", tu.ThreadThresholdsString())

	// NCCL_NTHREADS=33 is not a multiple of 32: NCCL uses the maximum (512)
	// and says so; too small and too large values are clamped.
	for _, tc := range []struct {
		nt, ll128    int
		wantLL, want int
		wantLL128    int
	}{
		{33, 0, 512, 512, 640},
		{32, 0, 64, 64, 640},
		{1024, 0, 512, 512, 640},
		{128, 96, 128, 128, 160},
		{0, 700, 512, 512, 640},
	} {
		o, err := TuneOptionsFromEnv(env("NCCL_NTHREADS", strconv.Itoa(tc.nt), "NCCL_LL128_NTHREADS", strconv.Itoa(tc.ll128)))
		require.NoError(t, err)
		tu := tuneCaseWith(t, "h200x2-nvswitch", o)
		require.Equal(t, tc.wantLL, tu.MaxThreads[model.AlgoRing][model.ProtoLL], "%+v", tc)
		require.Equal(t, tc.want, tu.MaxThreads[model.AlgoTree][model.ProtoSimple], "%+v", tc)
		require.Equal(t, tc.wantLL128, tu.MaxThreads[model.AlgoRing][model.ProtoLL128], "%+v", tc)
		require.Equal(t, 640, tu.MaxThreads[model.AlgoNVLS][model.ProtoSimple])
		if tc.nt == 33 {
			require.NotEmpty(t, tu.Warnings)
			require.Contains(t, tu.Warnings[0], "NCCL_NTHREADS")
		}
	}

	// Tune rejects bad lists set directly in the options too.
	o = DefaultTuneOptions()
	o.Proto = "foo"
	c := tuneCase(t, "h200x2-nvswitch")
	_, err = Tune(tunePlanFromDoc(t, c), c.Cluster, o)
	require.ErrorContains(t, err, "NCCL_PROTO")
}

// TestTuneNetOverhead: NCCL_NET_OVERHEAD replaces the CPU's ring overhead
// on multi-node rings (AMD: 2 µs, ×3 for Simple).
func TestTuneNetOverhead(t *testing.T) {
	name := "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.nodes2"
	def := tuneCaseWith(t, name, DefaultTuneOptions())
	ar := model.CollAllReduce
	// 16 ranks, 2 nodes: 30 steps, 2 of them inter-node (2.7 µs LL).
	require.Equal(t, float32(6.6)+float32(28*float32(2))+float32(2*float32(2.7)), def.Latency[ar][model.AlgoRing][model.ProtoLL])
	o := DefaultTuneOptions()
	o.NetOverheadNs = 5000
	tu := tuneCaseWith(t, name, o)
	require.Equal(t, float32(6.6)+float32(28*float32(5))+float32(2*float32(2.7)), tu.Latency[ar][model.AlgoRing][model.ProtoLL])
	require.Equal(t, float32(8.4)+float32(28*float32(15))+float32(2*float32(14)), tu.Latency[ar][model.AlgoRing][model.ProtoSimple])
}
