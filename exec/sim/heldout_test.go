package sim

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// timingsDir holds the NCCL timings recorded under several transports and
// protocols on the H200 pair.
func timingsDir() string { return filepath.Join(repoRoot(), "testdata", "nccl-timings") }

// heldOutTables are the tables of timingsDir, in a fixed order.
var heldOutTables = []string{"p2p-simple", "p2p-ll", "p2p-ll128", "shm", "shm-simple", "net-socket"}

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
	for _, name := range heldOutTables {
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

// heldOutBounds are the tolerances on the tables the embedded calibration
// was NOT fitted to (calib/h200.json's "source" says which were): median
// and maximum absolute error over the rows that are not disturbed
// (Measurement.Noisy: a mean more than 25% above the best repetition;
// they are listed, not bounded). Rows are simulated as the graph loops
// that timed them (Simulator.Loop). p2p-simple's small calls were 20-47%
// slow (13.3% / 47.2% median / max) while Simple slices without data paid
// the full per-slice cost; NCCL's Simple primitives skip the copy and the
// fence for them, and so does the simulator now (7.4% / 21.6%; 6.3% /
// 20.3% since Simple's per-block rates come from NCCL run on one and a
// few channels, with a copy throughput a GPU's blocks share). What is
// left: Broadcast and Reduce below 32 KiB are 16-20% slow (NCCL's
// one-slice calls take less than the per-call and per-slice costs that
// the larger calls need), and AllReduce, AllGather and ReduceScatter at
// 32-512 KiB 11-16% fast. shm-simple was 4.4% / 21.6% before SHM's stage
// was refitted with host_load_us and the H100 pair's SHM LL tables, which
// move the constants SHM Simple shares with LL (PCI latency and
// efficiency, host memory bandwidth): 7.0% / 21.3% now. The socket NET
// costs are fitted on the AllReduce and Broadcast rows; the AllGather,
// ReduceScatter and Reduce rows are held out.
var heldOutBounds = []struct {
	spec        string
	median, max float64
}{
	{"p2p-simple", 0.09, 0.25}, // 6.3, 20.3
	{"shm-simple", 0.10, 0.26}, // 7.0, 21.3
	// Recorded on an early start of the H200 pair whose sockets were
	// about 30% faster than those of the probed later starts the socket
	// constants now describe (testdata/hw/fit-sockets.sh), and not
	// probed, so not scaled: 12.9/27.2 under the constants before.
	{"net-socket,colls=all_gather+reduce_scatter+reduce", 0.25, 0.47}, // 21.7, 41.2
}

// TestAccuracyHeldOut predicts tables the calibration was not fitted to
// and fails with a table of the rows beyond the bound.
func TestAccuracyHeldOut(t *testing.T) {
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range heldOutBounds {
		tb, res := loadTable(t, b.spec)
		if strings.Contains(","+c.Fit.Table+",", ","+tb.Name+",") {
			t.Fatalf("%s is among the calibration's fitted tables (%s): it cannot test the fit", tb.Name, c.Fit.Table)
		}
		checkTableBound(t, c, tb, res, b.median, b.max)
	}
}

// checkTableBound predicts table tb (searched into res) with calibration c
// and fails, with a table of the offending rows, when the median or a row
// of those that are not disturbed (Measurement.Noisy: listed, not
// bounded) is beyond its bound.
func checkTableBound(t *testing.T, c *Calib, tb *Table, res *search.Result, median, max float64) {
	t.Helper()
	ft := NewFitTable(tb, res)
	rows, err := ft.Compare(c)
	if err != nil {
		t.Fatal(err)
	}
	var clean []Comparison
	var noisy []string
	for _, r := range rows {
		if r.Noisy() {
			noisy = append(noisy, fmt.Sprintf("%s %d (%+.1f%%)", r.Coll, r.Bytes, 100*r.Err))
			continue
		}
		clean = append(clean, r)
	}
	med, mx := ErrorStats(clean)
	t.Logf("%-20s median %5.2f%% max %6.2f%% over %2d rows (bounds %.0f%%/%.0f%%); disturbed rows not bounded: %s",
		tb.Name, 100*med, 100*mx, len(clean), 100*median, 100*max, strings.Join(noisy, ", "))
	if off := offenders(clean, max); med > median || off != "" {
		t.Errorf("%s (held out): median %.2f%% (bound %.0f%%), rows beyond %.0f%%:%s", tb.Name, 100*med, 100*median, 100*max, off)
	}
}

// offenders lists the rows whose absolute error is beyond max, one per
// line, for a failure message ("" when none is).
func offenders(rows []Comparison, max float64) string {
	var off strings.Builder
	for _, r := range rows {
		if math.Abs(r.Err) > max {
			fmt.Fprintf(&off, "\n  %-14s %12d %-5s %-6s %2d  meas %9.2f  sim %9.2f  err %+6.1f%%",
				r.Coll, r.Bytes, r.Algo, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
		}
	}
	return off.String()
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
