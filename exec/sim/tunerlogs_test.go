package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// timingsDir holds the NCCL timings recorded under several transports and
// protocols on the H200 pair.
func timingsDir() string { return filepath.Join(repoRoot(), "testdata", "nccl-timings") }

// tablesIn are the names of the timing tables (NAME.tsv) in dir, each
// with NCCL's INFO log of its calls (NAME.log), sorted. TestAccuracy
// (exec/sim/hwcmp) holds the simulator's errors on them.
func tablesIn(t testing.TB, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.tsv"))
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".tsv"))
	}
	return names
}

// loadTable reads a table of timingsDir, "NAME[,KEY=VALUE...]" (see
// ParseTableSpec), and runs the search on the embedded H200 topology
// under its settings.
func loadTable(t testing.TB, spec string) (*Table, *search.Result) {
	t.Helper()
	name, words, _ := strings.Cut(spec, ",")
	path := filepath.Join(timingsDir(), name+".tsv")
	if words != "" {
		path += "," + words
	}
	tb, err := ParseTableSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		t.Fatal(err)
	}
	file := "embedded:" + twinccl.DefaultTopology
	root, _, err := model.ParseTopologyXML(bytes.NewReader(data), file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := SearchTable(root, file, 1, tb)
	if err != nil {
		t.Fatal(err)
	}
	return tb, res
}

// TestTunerMatchesLogs: under every table's settings, the tuner picks the
// algorithm, protocol and channel count NCCL logged for every call (PAT
// included, which the simulator then runs as a ring).
func TestTunerMatchesLogs(t *testing.T) {
	for _, name := range tablesIn(t, timingsDir()) {
		tb, res := loadTable(t, name)
		checkLoggedChoices(t, tb, res, filepath.Join(timingsDir(), name+".log"))
	}
}

// checkLoggedChoices checks that the tuner on res picks, for every call
// of NCCL's INFO log at path, the algorithm, protocol and channel count
// NCCL logged.
func checkLoggedChoices(t *testing.T, tb *Table, res *search.Result, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := ReadLoggedChoices(f, filepath.Base(path))
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(lc) == 0 {
		t.Fatalf("%s: no logged calls", path)
	}
	s := newSim(t, res, nil)
	bad := 0
	for _, c := range lc {
		// The channels that carry work: the tuner's count, cut as NCCL
		// cuts the call (model.SplitChannels).
		_, cr, err := s.Generator(Call{Coll: c.Coll, Count: c.Bytes / 4, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
		if err != nil {
			t.Fatal(err)
		}
		if cr.Algo != c.Algo || cr.Proto != c.Proto || cr.NChannels != c.NChannels {
			bad++
			t.Errorf("%s:%d %s %d B: NCCL %s/%s/%d, sim %s/%s/%d", filepath.Base(path), c.Line, c.Coll, c.Bytes,
				c.Algo, c.Proto, c.NChannels, cr.Algo, cr.Proto, cr.NChannels)
		}
	}
	t.Logf("%s (%s): %d logged calls, %d differ", tb.Name, strings.TrimSpace(tb.Settings()), len(lc), bad)
}

// machineLogs are NCCL's INFO logs (libnccl 2.28.3) of the H100 machines
// the hardware recordings come from, with the topology NCCL dumped there
// (testdata/hw/*/nccl-log; their READMEs say how they were taken): the
// log's per-call choices are what NCCL's tuner picked on that machine.
var machineLogs = []struct {
	name, dir, log string
	nodes          int
	env            map[string]string
}{
	{"h100x2 split-host sockets", "h100x2/nccl-log/net", "choices.log", 2,
		map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo"}},
	{"h100x2 split-host sockets, Simple forced", "h100x2/nccl-log/net", "choices-simple.log", 2,
		map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "NCCL_PROTO": "Simple"}},
	{"h100x2 split-host sockets, LL forced", "h100x2/nccl-log/net", "choices-ll.log", 2,
		map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_NET": "Socket", "NCCL_IB_DISABLE": "1", "NCCL_SOCKET_IFNAME": "lo", "NCCL_PROTO": "LL"}},
	{"h100x2 P2P", "h100x2/nccl-log/p2p", "choices.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0"}},
	{"h100x2 SHM", "h100x2/nccl-log/shm", "choices.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}},
	{"h100x4 P2P", "h100x4/nccl-log/p2p", "choices.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0"}},
	{"h100x4 SHM", "h100x4/nccl-log/shm", "choices.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_P2P_DISABLE": "1"}},
	{"h100x4 P2P, LL forced", "h100x4/nccl-log/p2p", "choices-ll.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_PROTO": "LL"}},
	{"h100x4 P2P, LL128 forced", "h100x4/nccl-log/p2p", "choices-ll128.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_PROTO": "LL128"}},
	{"h100x4 P2P, Simple forced", "h100x4/nccl-log/p2p", "choices-simple.log", 1, map[string]string{"NCCL_NVLS_ENABLE": "0", "NCCL_PROTO": "Simple"}},
}

// TestTunerMatchesMachineLogs: on each machine's own topology and settings,
// the tuner picks the algorithm, protocol and channel count NCCL logged for
// every call there.
func TestTunerMatchesMachineLogs(t *testing.T) {
	for _, m := range machineLogs {
		dir := filepath.Join(repoRoot(), "testdata", "hw", filepath.FromSlash(m.dir))
		topo := filepath.Join(dir, "topo.xml")
		tb := &Table{Name: m.name, Env: m.env}
		checkLoggedChoices(t, tb, searchOn(t, topo, m.nodes, tb), filepath.Join(dir, m.log))
	}
}
