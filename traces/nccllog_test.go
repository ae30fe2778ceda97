package traces

import (
	"encoding/json"
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// gtDoc is the part of a ground-truth JSON document the importer is checked against.
type gtDoc struct {
	NRanks   int `json:"nRanks"`
	Channels struct {
		NChannels int     `json:"nChannels"`
		Rings     [][]int `json:"rings"`
		Ranks     []struct {
			Rank      int `json:"rank"`
			Node      int `json:"node"`
			LocalRank int `json:"localRank"`
			Ring      []struct{ Prev, Next int }
			Tree      []struct {
				Up   int   `json:"up"`
				Down []int `json:"down"`
			}
		} `json:"ranks"`
	} `json:"channels"`
	Tuning struct {
		Table []struct {
			Coll, Algo, Proto  string
			Latency, Bandwidth float64
		} `json:"table"`
		MaxThreads []struct {
			Algo              string
			LL, LL128, Simple int
		} `json:"maxThreads"`
	} `json:"tuning"`
}

func readGT(t *testing.T, path string) gtDoc {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var d gtDoc
	require.NoError(t, json.Unmarshal(data, &d))
	return d
}

// checkTuning compares the log's table (printed with one decimal) with a
// full-precision one.
func checkTuning(t *testing.T, l *NCCLLog, d gtDoc) {
	t.Helper()
	require.Len(t, l.Tuning, len(d.Tuning.Table))
	for _, e := range d.Tuning.Table {
		c, err := model.ParseCollective(e.Coll)
		require.NoError(t, err)
		a, err := model.ParseAlgorithm(e.Algo)
		require.NoError(t, err)
		p, err := model.ParseProtocol(e.Proto)
		require.NoError(t, err)
		got, ok := l.TuningOf(c, a, p)
		require.True(t, ok, "%s/%s/%s missing", c, a, p)
		require.InDelta(t, e.Latency, got.Latency, 0.05+1e-4, "%s/%s/%s latency", c, a, p)
		require.InDelta(t, e.Bandwidth, got.Bandwidth, 0.05+1e-4, "%s/%s/%s bandwidth", c, a, p)
	}
	threads := map[[2]int]int{}
	for _, m := range l.MaxThreads {
		threads[[2]int{int(m.Algo), int(m.Proto)}] = m.Threads
	}
	for _, m := range d.Tuning.MaxThreads {
		a, err := model.ParseAlgorithm(m.Algo)
		require.NoError(t, err)
		require.Equal(t, m.LL, threads[[2]int{int(a), int(model.ProtoLL)}], "%s LL threads", a)
		require.Equal(t, m.LL128, threads[[2]int{int(a), int(model.ProtoLL128)}], "%s LL128 threads", a)
		require.Equal(t, m.Simple, threads[[2]int{int(a), int(model.ProtoSimple)}], "%s Simple threads", a)
	}
}

// TestNCCLLogGroundTruth parses NCCL 2.28.9's own log of every ground-truth
// case and checks rings, trees, node layout and tuning against its JSON.
func TestNCCLLogGroundTruth(t *testing.T) {
	for _, c := range groundtruth.Cases(t) {
		t.Run(c.Name, func(t *testing.T) {
			l, err := ReadNCCLLogFile(c.Text)
			require.NoError(t, err)
			require.Empty(t, l.Warnings)
			d := readGT(t, c.JSON)
			require.Equal(t, d.NRanks, l.NRanks)
			require.Equal(t, d.Channels.NChannels, l.NChannels)
			require.Equal(t, d.Channels.Rings, l.Rings)
			rcs := l.RankChannels()
			for _, rd := range d.Channels.Ranks {
				rc := rcs[rd.Rank]
				require.Equal(t, rd.Node, rc.Node, "rank %d node", rd.Rank)
				require.Equal(t, rd.LocalRank, rc.LocalRank, "rank %d localRank", rd.Rank)
				if l.Ring[rd.Rank] == nil && rd.Rank > 0 {
					continue // multi-node cases log the lines of rank 0 only
				}
				for ch := range rd.Ring {
					require.Equal(t, model.RingLinks{Prev: rd.Ring[ch].Prev, Next: rd.Ring[ch].Next}, rc.Ring[ch], "rank %d channel %d ring", rd.Rank, ch)
					want := model.TreeLinks{Up: rd.Tree[ch].Up, Down: [3]int{-1, -1, -1}}
					copy(want.Down[:], rd.Tree[ch].Down)
					require.Equal(t, want, rc.Tree[ch], "rank %d channel %d tree", rd.Rank, ch)
				}
			}
			checkTuning(t, l, d)
		})
	}
}

// graphsXML is NCCL's NCCL_GRAPH_DUMP_FILE format.
type graphsXML struct {
	Graphs []struct {
		ID        int `xml:"id,attr"`
		Pattern   int `xml:"pattern,attr"`
		NChannels int `xml:"nchannels,attr"`
		Channels  []struct {
			Items []struct {
				XMLName xml.Name
				Dev     string `xml:"dev,attr"`
			} `xml:",any"`
		} `xml:"channel"`
	} `xml:"graph"`
}

// graphGPUs returns, per channel of graph id, the GPU devs in order.
func graphGPUs(t *testing.T, path string, id int) [][]int {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var g graphsXML
	require.NoError(t, xml.Unmarshal(data, &g))
	for _, gr := range g.Graphs {
		if gr.ID != id {
			continue
		}
		var out [][]int
		for _, ch := range gr.Channels {
			var devs []int
			for _, it := range ch.Items {
				if it.XMLName.Local == "gpu" {
					v, err := strconv.ParseInt(it.Dev, 0, 32)
					require.NoError(t, err)
					devs = append(devs, int(v))
				}
			}
			out = append(out, devs)
		}
		require.Len(t, out, gr.NChannels)
		return out
	}
	t.Fatalf("%s: no graph %d", path, id)
	return nil
}

// rotate returns ring rotated to start at rank 0.
func rotate(ring []int) []int {
	for i, r := range ring {
		if r == 0 {
			return append(append([]int{}, ring[i:]...), ring[:i]...)
		}
	}
	return ring
}

// checkAgainstGraph checks rings and the intra-node tree chains of a log
// against NCCL's graph dump: channel c uses graph channel c mod nChannels;
// ranks are node-major, rank = node*perNode + index of the GPU dev; each
// node's ranks form the graph's chain.
func checkAgainstGraph(t *testing.T, l *NCCLLog, graph string, perNode int) {
	t.Helper()
	rings := graphGPUs(t, graph, 0)
	trees := graphGPUs(t, graph, 1)
	nNodes := l.NRanks / perNode
	require.Positive(t, l.NChannels)
	for c := 0; c < l.NChannels; c++ {
		g := rings[c%len(rings)]
		var want []int
		for n := range nNodes {
			for _, dev := range g {
				want = append(want, n*perNode+dev)
			}
		}
		require.Equal(t, rotate(want), l.Rings[c], "channel %d ring", c)
		chain := trees[c%len(trees)]
		for n := range nNodes {
			for i := 1; i < len(chain); i++ {
				parent, child := n*perNode+chain[i-1], n*perNode+chain[i]
				if l.Tree[child] == nil {
					continue // rank not in this log
				}
				require.Equal(t, parent, l.Tree[child][c].Up, "channel %d: rank %d's parent", c, child)
				if l.Tree[parent] != nil {
					require.Contains(t, l.Tree[parent][c].Down[:], child, "channel %d: rank %d's children", c, parent)
				}
			}
		}
	}
	// Every logged link is symmetric.
	for r := range l.Tree {
		for c := 0; c < l.NChannels && l.Tree[r] != nil; c++ {
			if up := l.Tree[r][c].Up; up >= 0 && l.Tree[up] != nil {
				require.Contains(t, l.Tree[up][c].Down[:], r, "channel %d: %d's parent %d", c, r, up)
			}
			if next := l.Ring[r][c].Next; l.Ring[next] != nil {
				require.Equal(t, r, l.Ring[next][c].Prev, "channel %d ring %d->%d", c, r, next)
			}
		}
	}
}

// TestNCCLLogH200 parses the log of our GPU machine (testdata/nccl) and
// checks it against the graph NCCL dumped in the same run.
func TestNCCLLogH200(t *testing.T) {
	dir := filepath.Join("..", "testdata", "nccl", "h200x2-nvswitch")
	l, err := ReadNCCLLogFile(filepath.Join(dir, "nccl-2.28.9-debug.log"))
	require.NoError(t, err)
	require.Empty(t, l.Warnings)
	require.Equal(t, "2.28.9", l.Version)
	require.Equal(t, "2.28.9+cuda13.0", l.VersionFull)
	require.Equal(t, 2, l.NRanks)
	require.Equal(t, 1, l.NNodes)
	require.Equal(t, 24, l.NChannels)
	require.Equal(t, []LogRank{
		{Rank: 0, Host: "vm", PID: 656, CudaDev: 0, BusID: "60", LocalRank: 0},
		{Rank: 1, Host: "vm", PID: 657, CudaDev: 1, BusID: "70", LocalRank: 1},
	}, l.Ranks)
	checkAgainstGraph(t, l, filepath.Join(dir, "graph.xml"), 2)
	// The graph search lines match the dump too.
	require.Len(t, l.Graphs, 2)
	require.Equal(t, LogGraph{Pattern: 4, NChannels: 12, BWIntra: 30, BWInter: 30, TypeIntra: "NVL", TypeInter: "PIX", SameChannels: 1,
		Channels: repeat([]string{"GPU/0-60", "GPU/0-70"}, 12)}, l.Graphs[0])
	require.Equal(t, append(repeat([]string{"GPU/0-60", "GPU/0-70"}, 6), repeat([]string{"GPU/0-70", "GPU/0-60"}, 6)...), l.Graphs[1].Channels)
	// Per-call choices.
	want := map[string]string{
		"AllReduce/8":         "Ring/LL 0..0",
		"AllReduce/131072":    "Ring/LL 0..15",
		"AllReduce/8388608":   "Ring/Simple 0..23",
		"AllGather/32768":     "Ring/LL 0..7",
		"ReduceScatter/64":    "Ring/LL 0..0",
		"AllReduce/536870912": "Ring/Simple 0..23",
		"AllGather/134217728": "Ring/Simple 0..23",
		"ReduceScatter/256":   "Ring/LL 0..0",
		"AllGather/2097152":   "Ring/Simple 0..23",
		"AllReduce/33554432":  "Ring/Simple 0..23",
		"ReduceScatter/4":     "Ring/LL 0..0",
		"AllGather/131072":    "Ring/LL 0..21",
		"AllReduce/4":         "Ring/LL 0..0",
		"AllReduce/2097152":   "Ring/Simple 0..23",
		"AllGather/8192":      "Ring/LL 0..1",
		"AllReduce/524288":    "Ring/LL 0..23",
		"AllGather/536870912": "Ring/Simple 0..23",
		"AllReduce/134217728": "Ring/Simple 0..23",
		"AllGather/524288":    "Ring/LL 0..23",
		"AllReduce/32768":     "Ring/LL 0..3",
		"AllGather/8388608":   "Ring/Simple 0..23",
		"AllGather/33554432":  "Ring/Simple 0..23",
		"ReduceScatter/16":    "Ring/LL 0..0",
		"AllGather/8":         "Ring/LL 0..0",
		"AllReduce/8192":      "Ring/LL 0..0",
	}
	got := map[string]string{}
	for _, ch := range l.Choices {
		k := ch.Coll.String() + "/" + strconv.FormatInt(ch.Bytes, 10)
		v := ch.Algo.String() + "/" + ch.Proto.String() + " " + strconv.Itoa(ch.ChannelLo) + ".." + strconv.Itoa(ch.ChannelHi)
		require.NotContains(t, got, k, "one choice per size")
		got[k] = v
		require.Positive(t, ch.Calls)
	}
	for k, v := range want {
		require.Equal(t, v, got[k], k)
	}
	// The tuning table NCCL printed on the machine is the one 2.28.9 computes
	// for the recorded topology (shared ground truth).
	gt := filepath.Join(groundtruth.Dir(t), "groundtruth", "nccl-2.28.9", "h200x2-nvswitch.json")
	checkTuning(t, l, readGT(t, gt))
}

func repeat(s []string, n int) [][]string {
	out := make([][]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

// TestNCCLLogPublic parses real 16-rank logs of NCCL 2.18.1 (two hosts,
// ranks interleaved, host:pid:tid prefixes whose [N] is the CUDA device, not
// the rank) and checks them against the graph dump beside them.
func TestNCCLLogPublic(t *testing.T) {
	dir := filepath.Join(groundtruth.Dir(t), "groundtruth", "public", "panlichen-rtx3090x8-2nodes-nccl2.18.1")
	l, err := ReadNCCLLogFile(filepath.Join(dir, "log.log"))
	require.NoError(t, err)
	require.Equal(t, "2.18.1", l.Version)
	require.Equal(t, 16, l.NRanks)
	require.Equal(t, 2, l.NNodes)
	require.Equal(t, 2, l.NChannels)
	require.Empty(t, l.Warnings)
	checkAgainstGraph(t, l, filepath.Join(dir, "graph.xml"), 8)
	// The cross-node trees SOURCES.md quotes.
	require.Equal(t, model.TreeLinks{Up: 0, Down: [3]int{9, -1, -1}}, l.Tree[8][0])
	require.Equal(t, model.TreeLinks{Up: -1, Down: [3]int{9, 0, -1}}, l.Tree[8][1])
	require.Equal(t, model.TreeLinks{Up: -1, Down: [3]int{1, 8, -1}}, l.Tree[0][0])
	rcs := l.RankChannels()
	for r, rc := range rcs {
		require.Equal(t, r/8, rc.Node, "rank %d", r)
		require.Equal(t, r%8, rc.LocalRank, "rank %d", r)
		require.Equal(t, r%8, l.Ranks[r].CudaDev, "rank %d", r)
	}
	require.Equal(t, "oneflow-27", l.Ranks[0].Host)
	require.Equal(t, "oneflow-25", l.Ranks[8].Host)

	// One host's log: only its ranks, the rest unknown.
	l27, err := ReadNCCLLogFile(filepath.Join(dir, "log27.log"))
	require.NoError(t, err)
	require.Equal(t, 16, l27.NRanks)
	for r := 0; r < 8; r++ {
		require.Equal(t, l.Ring[r], l27.Ring[r], "rank %d", r)
		require.Equal(t, l.Tree[r], l27.Tree[r], "rank %d", r)
	}
	for r := 8; r < 16; r++ {
		require.Nil(t, l27.Ring[r])
		require.Equal(t, Unknown, l27.RankChannels()[r].Ring[0].Next)
	}
	require.Nil(t, l27.Rings[0], "partial ring not rebuilt")
}

func TestNCCLLogHostile(t *testing.T) {
	cases := []struct {
		name, log string
		warn      string
	}{
		{"rank out of range", "[0] NCCL INFO Ring 00 : 0 -> 70000 -> 1\n", "unreadable ring line"},
		{"channel out of range", "[0] NCCL INFO Ring 999 : 1 -> 0 -> 1\n", "channel 999 out of range"},
		{"conflict", "[0] NCCL INFO Ring 00 : 1 -> 0 -> 1\n[0] NCCL INFO Ring 00 : 2 -> 0 -> 1\n", "differs from the earlier"},
		{"bad tree", "[0] NCCL INFO Trees [0] 1/2/3/4->0->-1\n", "unreadable trees entry"},
		{"long line", "[0] NCCL INFO Channel 00/01 : " + strings.Repeat("1 ", MaxLogLineBytes) + "\n[0] NCCL INFO Ring 00 : 0 -> 0 -> 0\n", "line longer than"},
		{"bad call", "[0] NCCL INFO AllReduce: 8 Bytes -> Algo WARP proto LL\n", "unknown algorithm"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			boundedAlloc(t, 64<<20, func() {
				l, err := ParseNCCLLog(strings.NewReader(c.log), "hostile.log")
				require.NoError(t, err)
				require.NotEmpty(t, l.Warnings)
				require.Contains(t, strings.Join(l.Warnings, "\n"), c.warn)
				require.Contains(t, l.Warnings[0], "hostile.log:")
			})
		})
	}
	// A log naming the highest rank on the highest channel stays small.
	boundedAlloc(t, 32<<20, func() {
		l, err := ParseNCCLLog(strings.NewReader("[0] NCCL INFO Ring 127 : 0 -> 65535 -> 1\n"), "x")
		require.NoError(t, err)
		require.Equal(t, MaxLogRanks, l.NRanks)
		require.Len(t, l.Ring[65535], 128)
	})
	_, err := ParseNCCLLog(strings.NewReader("hello\nworld\n"), "empty.log")
	require.ErrorContains(t, err, "empty.log: no NCCL log lines found")
}

func FuzzParseNCCLLog(f *testing.F) {
	f.Add("vm:656:656 [0] NCCL INFO NCCL version 2.28.9+cuda13.0\nvm:656:656 [0] NCCL INFO Channel 00/24 : 0 1\nvm:657:657 [1] NCCL INFO Ring 00 : 0 -> 1 -> 0\n")
	f.Add("[1] NCCL INFO Trees [0] -1/-1/-1->1->0 [1] 0/-1/-1->1->-1\n[0] NCCL INFO Tree 0 : -1 -> 0 -> 1/-1/-1\n")
	f.Add("[0] NCCL INFO   Algorithm   |   Tree   |   Ring  |\n[0] NCCL INFO   Protocol    |  LL |  LL128 | Simple |  LL |  LL128 | Simple |\n[0] NCCL INFO  Max NThreads | 512 | 640 | 512 | 512 | 640 | 512 |\n[0] NCCL INFO     AllReduce |  8.0/ 61.1 | 16.5/ 180.6 | 16.4/ 232.2 | 7.8/ 141.0 | 17.8/ 331.2 | 15.2/ 360.0 |\n")
	f.Add("vm:656:656 [0] NCCL INFO AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n[0] NCCL INFO AllGather: 64 Bytes -> Algo 1 proto 0 time 12.5\n")
	f.Add("h:1:2 [3] NCCL INFO comm 0x1 rank 3 nRanks 4 nNodes 2 localRanks 2 localRank 1 MNNVL 0\nh:1:2 [3] NCCL INFO Pattern 4, crossNic 0, nChannels 1, bw 4.000000/4.000000, type SYS/SYS, sameChannels 1\nh:1:2 [3] NCCL INFO  0 : NET/0 GPU/0 NET/0\n")
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseNCCLLog(strings.NewReader(s), "fuzz.log")
		if err != nil {
			return
		}
		if l.NRanks > MaxLogRanks || l.NChannels > MaxLogChannels {
			t.Fatalf("limits exceeded: %d ranks, %d channels", l.NRanks, l.NChannels)
		}
		if l.NRanks > 0 && (len(l.Ring) != l.NRanks || len(l.Tree) != l.NRanks) {
			t.Fatalf("per-rank tables of %d/%d rows for %d ranks", len(l.Ring), len(l.Tree), l.NRanks)
		}
		for _, row := range l.Ring {
			if row != nil && len(row) != l.NChannels {
				t.Fatalf("ring row of %d channels, want %d", len(row), l.NChannels)
			}
		}
		for _, e := range l.Tuning {
			if math.IsNaN(e.Latency) && e.Latency == e.Latency {
				t.Fatal("unreachable")
			}
		}
		if l.NRanks <= 1024 {
			_ = l.RankChannels()
		}
	})
}
