package search

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"

	"github.com/twinccl/twinccl/model"
)

// txtSection returns the lines of one section of a ground-truth log.
func txtSection(t testing.TB, file, title string) []string {
	return groundtruth.Section(t, file, title)
}

// TestGraphLogMatchesNCCL prints NCCL's own graphs of node 0 and compares
// with the "graph search" lines NCCL logged.
func TestGraphLogMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			gs := c.nodeGraphs(t, 0, false)
			sys := c.Cluster.Nodes[0].System
			var b bytes.Buffer
			for _, id := range model.GraphOrder {
				if gs[id].NChannels() > 0 {
					require.NoError(t, WriteGraphLog(&b, sys, gs[id], LogPrefix(0)))
				}
			}
			want := txtSection(t, c.Text, "graph search")
			require.Equal(t, strings.Join(want, "\n")+"\n", b.String())
		})
	}
}

// TestGraphsXMLMatchesNCCL writes NCCL's own graphs of node 0 in
// NCCL_GRAPH_DUMP_FILE form and compares with NCCL's dump byte for byte.
func TestGraphsXMLMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			want, err := os.ReadFile(c.Graph)
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, WriteGraphsXML(&b, c.Cluster.Nodes[0].System, c.nodeGraphs(t, 0, false)))
			require.Equal(t, string(want), b.String())
		})
	}
}

func TestGraphsXMLRefusesUnnamedTypes(t *testing.T) {
	sys := &model.System{}
	var gs [model.NumGraphs]*model.Graph
	for id := range gs {
		gs[id] = model.EmptyGraph(model.GraphID(id))
	}
	gs[model.GraphRing].TypeIntra = model.PathC2C
	err := WriteGraphsXML(&bytes.Buffer{}, sys, gs)
	require.ErrorContains(t, err, "C2C")
}

func TestCFormats(t *testing.T) {
	for _, tc := range []struct {
		f    float32
		want string
	}{{0, "0"}, {30, "30"}, {0.24, "0.24"}, {3.4, "3.4"}, {1.2, "1.2"}, {370.8, "370.8"}, {1234567, "1.23457e+06"}, {0.0001, "0.0001"}, {0.00001, "1e-05"}} {
		require.Equal(t, tc.want, cFloatG(tc.f), "%v", tc.f)
	}
	require.Equal(t, "0", cHexLong(0))
	require.Equal(t, "0x1", cHexLong(1))
	require.Equal(t, "0x100000000000003", cHexLong(1<<56+3))
}

// planFromDoc builds the Plan NCCL decided from a ground-truth document, to
// test the printers independently of the wiring code.
func planFromDoc(t testing.TB, c gtCase) *model.Plan {
	t.Helper()
	ch := c.Doc.Channels
	p := &model.Plan{
		NRanks: c.Doc.NRanks, NNodes: c.Doc.NNodes, MNNVL: c.Doc.MNNVL,
		NChannels: ch.NChannels, CollChannels: ch.CollChannels, NVLSChannels: ch.NVLSChannels,
		P2PChannels: ch.P2PnChannels, P2PChannelsPerPeer: ch.P2PnChannelsPerPeer, Rings: ch.Rings,
	}
	for n := range c.Doc.Nodes {
		p.NodeGraphs = append(p.NodeGraphs, c.nodeGraphs(t, n, false))
	}
	p.Graphs = c.nodeGraphs(t, 0, true)
	p.TreeChannels = min(p.Graphs[model.GraphRing].NChannels(), p.Graphs[model.GraphTree].NChannels())
	for _, rd := range ch.Ranks {
		rc := model.RankChannels{Rank: rd.Rank, Node: rd.Node, LocalRank: rd.LocalRank}
		for _, r := range rd.Ring {
			rc.Ring = append(rc.Ring, model.RingLinks{Prev: r.Prev, Next: r.Next})
		}
		for _, tr := range rd.Tree {
			tl := model.TreeLinks{Up: tr.Up}
			require.Len(t, tr.Down, model.TreeArity)
			copy(tl.Down[:], tr.Down)
			rc.Tree = append(rc.Tree, tl)
		}
		p.Ranks = append(p.Ranks, rc)
	}
	return p
}

// TestRankLayoutMatchesNCCL prints the channel layout of every rank NCCL
// logged and compares line by line (NCCL's comm pointer masked).
func TestRankLayoutMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			p := planFromDoc(t, c)
			want := map[int][]string{}
			for _, line := range txtSection(t, c.Text, "(c) channels: communicator layout") {
				var rank int
				_, err := fmt.Sscanf(line, "[%d]", &rank)
				require.NoError(t, err, line)
				if i := strings.Index(line, "comm 0x"); i >= 0 {
					line = line[:i] + line[strings.Index(line, " rank ")+1:]
				}
				want[rank] = append(want[rank], line)
			}
			require.NotEmpty(t, want)
			for rank, lines := range want {
				var b bytes.Buffer
				require.NoError(t, WriteRankLayout(&b, p, rank))
				require.Equal(t, strings.Join(lines, "\n")+"\n", b.String(), "rank %d", rank)
			}
		})
	}
}

// TestChannelSummaryMatchesNCCL compares the per-channel ring/tree summary.
func TestChannelSummaryMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, WriteChannelSummary(&b, planFromDoc(t, c)))
			want := txtSection(t, c.Text, "(c) channels: ring order")
			require.Equal(t, strings.Join(want, "\n")+"\n", b.String())
		})
	}
}

// TestTuningTableMatchesNCCL builds the tuning model from NCCL's own plan
// and compares the printed table with NCCL's, byte for byte.
func TestTuningTableMatchesNCCL(t *testing.T) {
	for _, c := range loadGroundTruth(t) {
		t.Run(c.Name, func(t *testing.T) {
			p := planFromDoc(t, c)
			p.MinCompCap, p.MaxCompCap = 0, 0
			tu, err := Tune(p, c.Cluster, DefaultTuneOptions())
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, WriteTuningTable(&b, tu, p, LogPrefix(0)))
			want := txtSection(t, c.Text, "(d) tuning")
			require.Equal(t, strings.Join(want, "\n")+"\n", b.String())
		})
	}
}
