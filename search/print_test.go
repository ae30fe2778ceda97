package search

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// txtSection returns the lines of one "======== title ..." section of a
// ground-truth log, without the header and trailing blank lines.
func txtSection(t testing.TB, file, title string) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "======== ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "======== "+title)
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	require.NotEmpty(t, out, "%s: no section %q", file, title)
	return out
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
