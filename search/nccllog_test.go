package search

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// ncclLogLine is one line of an NCCL_DEBUG=INFO log: the host:pid:tid
// prefix, then the device's "[d] NCCL INFO " and the message.
var ncclLogLine = regexp.MustCompile(`^\S+ (\[\d+\] NCCL INFO .*)$`)

// readNCCLLog reads an NCCL_DEBUG=INFO log into its INFO lines as our
// printers write them: without the host:pid:tid prefix, and without the
// "comm 0x..." handle of the communicator line, which means nothing here.
func readNCCLLog(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	comm := regexp.MustCompile(`comm 0x[0-9a-f]+ `)
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m := ncclLogLine.FindStringSubmatch(sc.Text()); m != nil {
			out = append(out, comm.ReplaceAllString(m[1], ""))
		}
	}
	require.NoError(t, sc.Err())
	return out
}

// TestH100MatchesNCCLLogs runs the search and the tuner on the topology
// that NCCL (2.28.3, the device's library) dumped on the H100 machines and
// compares with what NCCL decided there: on four H100 under NVSwitch with
// P2P on and with NCCL_P2P_DISABLE=1 (SHM through the CPU,
// testdata/hw/h100x4/nccl-log), and on the H100 pair the same two ways
// and split into two "hosts" of one GPU over loopback sockets
// (testdata/hw/h100x2/nccl-log, net/: run gpu's split-host runs): its
// NCCL_GRAPH_DUMP_FILE byte for byte,
// rank 0's tuning table and channel counts line for line, and every line
// of rank 0's channel layout (rings, trees).
func TestH100MatchesNCCLLogs(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		nodes     int
		env       map[string]string
	}{
		{"four/p2p", "h100x4/nccl-log/p2p", 1, map[string]string{"NCCL_NVLS_ENABLE": "0"}},
		{"four/shm", "h100x4/nccl-log/shm", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}},
		{"pair/p2p", "h100x2/nccl-log/p2p", 1, map[string]string{"NCCL_NVLS_ENABLE": "0"}},
		{"pair/shm", "h100x2/nccl-log/shm", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}},
		{"pair/sockets", "h100x2/nccl-log/net", 2, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("..", "testdata", "hw", filepath.FromSlash(tc.dir))
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			params, err := model.ParamsFromEnv(lookup)
			require.NoError(t, err)
			opts, err := OptionsFromEnv(lookup)
			require.NoError(t, err)
			topo := filepath.Join(dir, "topo.xml")
			root, _, err := model.ReadTopologyFile(topo)
			require.NoError(t, err)
			cl, err := model.LoadCluster(root, topo, model.LoadOptions{Nodes: tc.nodes, Params: params})
			require.NoError(t, err)
			res, err := Run(cl, opts)
			require.NoError(t, err)

			want, err := os.ReadFile(filepath.Join(dir, "graph.xml"))
			require.NoError(t, err)
			var b bytes.Buffer
			require.NoError(t, WriteGraphsXML(&b, cl.Nodes[0].System, res.NodeGraphs[0]))
			require.Equal(t, string(want), b.String(), "graphs")

			log := readNCCLLog(t, filepath.Join(dir, "nccl-rank0.log"))
			b.Reset()
			require.NoError(t, WriteTuningTable(&b, res.Tuning, res.Plan, LogPrefix(0)))
			var table []string
			for _, l := range strings.Split(b.String(), "\n") {
				table = append(table, l)
				if strings.Contains(l, " coll channels, ") {
					break
				}
			}
			require.Greater(t, len(table), 20, "tuning table")
			start := -1
			for i, l := range log {
				if l == table[0] {
					start = i
					break
				}
			}
			require.GreaterOrEqual(t, start, 0, "NCCL's log has no tuning table")
			require.Less(t, start+len(table), len(log)+1, "NCCL's log ends inside its tuning table")
			require.Equal(t, table, log[start:start+len(table)], "tuning table")

			b.Reset()
			require.NoError(t, WriteRankLayout(&b, res.Plan, 0))
			inLog := map[string]bool{}
			for _, l := range log {
				inLog[l] = true
			}
			layout := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			for _, l := range layout {
				require.True(t, inLog[l], "layout line %q not in NCCL's log", l)
			}
			require.Greater(t, len(layout), 4, "layout")
		})
	}
}
