package sim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// h100TimingsDir holds NCCL's timings on the H100 pair of nvidia-h100-x2
// (testdata/nccl-timings/README.md), a machine the embedded calibration
// was never fitted on, and h100x2Topo NCCL's dump of that machine.
func h100TimingsDir() string { return filepath.Join(timingsDir(), "h100x2") }

func h100x2Topo() string { return filepath.Join(repoRoot(), "testdata", "hw", "h100x2", "topo.xml") }

// h100Harness is the PyTorch harness on the H100 pair: its cost per call
// is the calibration's harness_us.pytorch@h100 (stage 3 of
// calib/h200.json's source).
const h100Harness = HarnessPyTorch + "@h100"

// searchOn reads the topology file and runs the search for tb on it,
// its single host taken as nodes hosts; it fails t on an error.
func searchOn(t testing.TB, file string, nodes int, tb *Table) *search.Result {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := SearchTable(root, file, nodes, tb)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// loadH100Table reads a table of h100TimingsDir and runs the search on the
// H100 topology under its settings.
func loadH100Table(t testing.TB, name string) (*Table, *search.Result) {
	t.Helper()
	tb, err := ParseTableSpec(filepath.Join(h100TimingsDir(), name+".tsv") + ",harness=" + h100Harness)
	if err != nil {
		t.Fatal(err)
	}
	return tb, searchOn(t, h100x2Topo(), 1, tb)
}

// h100Bounds are the tolerances on the H100 tables, predicted with the
// embedded calibration: median and maximum absolute error over the rows
// that are not disturbed, about 3 points above what is measured (in the
// comments: median, max, in %). The calibration was fitted on the H200
// pair, except for Simple's per-block constants (stage 2 of
// calib/h200.json's source), which come from the Simple rows from 512
// KiB of the one-, four- and twelve-channel tables here (one channel: up
// to 8 MiB, under three buffer sizes); every other row is held out. The
// H100 pair has the H200 pair's topology; what differs is the GPUs'
// memory and the host. PyTorch's harness costs 0.7 us less per call
// there (h100Harness, fitted on the P2P rows up to 512 B). With that
// cost the LL rows are within 3% (8-15% slow under the H200 pair's) and
// the Simple rows of 32-512 KiB up to 10-30% fast, which the larger cost
// had hidden (docs/perf.md). The SHM LL rows from 128 KiB were fitted
// (stage 4). Stages 8-10 (NCCL's per-call block size, its direct
// primitives, each primitive kind's first call; fitted on the H200 pair
// only) took P2P Simple from 7.3% to 3.2% median and SHM Simple from 5.8%
// to 3.9%, but the NCCL_NTHREADS=128 and 256 tables from 7.6% and 8.3% to
// 12.5% and 11.0%: a block of 160-288 threads moves large calls more
// slowly than rate_threads, fitted on calls of 2-96 KiB, says.
var h100Bounds = []struct {
	name        string
	median, max float64
}{
	{"p2p-simple", 0.07, 0.27},          // 3.22, 21.54
	{"p2p-ll", 0.06, 0.26},              // 2.87, 20.49
	{"p2p-ll128", 0.07, 0.33},           // 3.16, 27.29: ReduceScatter at 512 MiB, 1.09 ms where AllGather takes 1.10
	{"shm", 0.09, 0.31},                 // 5.73, 25.24
	{"shm-simple", 0.07, 0.31},          // 3.93, 25.95
	{"net-socket", 0.17, 0.49},          // 13.51, 43.13
	{"simple-nthreads-128", 0.16, 0.27}, // 12.46, 21.14
	{"simple-nthreads-256", 0.12, 0.25}, // 11.00, 19.87
	{"simple-nthreads-512", 0.08, 0.27}, // 4.90, 21.74
	{"simple-buffsize-1m", 0.08, 0.17},  // 5.57, 11.27
	{"simple-buffsize-16m", 0.08, 0.16}, // 4.43, 10.38
	// One channel, or a few: what one thread block moves, which the
	// tables of the tuner's channel counts, where the links bound the
	// large calls, do not show. Simple's per-block rates come from these
	// tables, and LL128's since stage 12 of h200.json (with the copy
	// throughput its blocks share: 21.8% and 10.4% median before); SHM
	// Simple's is still up to 2.8x too slow on one channel at 8 MiB
	// (docs/perf.md).
	{"simple-nch-1", 0.08, 0.21},  // 4.09, 15.17
	{"simple-nch-4", 0.09, 0.18},  // 5.23, 12.77
	{"simple-nch-12", 0.12, 0.24}, // 8.95, 18.24
	// Channel counts no fit used, recorded after the fit.
	{"simple-nch-2", 0.1, 0.25},               // 6.64, 19.63
	{"simple-nch-8", 0.12, 0.3},               // 8.66, 24.53
	{"simple-nch-16", 0.1, 0.22},              // 6.54, 16.35
	{"simple-nch-1-buffsize-1m", 0.12, 0.34},  // 8.25, 33.16
	{"simple-nch-1-buffsize-16m", 0.08, 0.28}, // 4.55, 22.69
	{"simple-nch-1-nthreads-128", 0.15, 0.56}, // 12.79, 50.68
	{"simple-nch-1-nthreads-256", 0.1, 0.34},  // 8.70, 28.75
	{"ll-nch-1", 0.12, 0.29},                  // 8.12, 23.35
	{"ll-nch-4", 0.14, 0.25},                  // 10.42, 19.98
	{"ll128-nch-1", 0.09, 0.20},               // 5.77, 14.52 (fitted since stage 12)
	{"ll128-nch-4", 0.07, 0.18},               // 3.96, 12.56 (fitted since stage 12)
	{"shm-simple-nch-1", 0.33, 1.83},          // 29.35, 177.91
	// LL through host memory, and each protocol over sockets (recorded in
	// the seventh session; the SHM LL rows from 128 KiB were fitted).
	{"shm-ll", 0.07, 0.17},            // 3.26, 11.58
	{"shm-ll-nch-1", 0.07, 0.24},      // 4.05, 18.37
	{"net-socket-ll", 0.25, 0.45},     // 21.06, 39.73
	{"net-socket-simple", 0.21, 0.36}, // 20.32, 35.10
}

// TestTunerMatchesLogsH100: on the H100 pair, under every table's
// settings (protocols, thread counts, channel counts, transports), the
// tuner picks the algorithm, protocol and channel count NCCL logged for
// every call.
func TestTunerMatchesLogsH100(t *testing.T) {
	for _, b := range h100Bounds {
		tb, res := loadH100Table(t, b.name)
		checkLoggedChoices(t, tb, res, filepath.Join(h100TimingsDir(), b.name+".log"))
	}
}

// TestUnmodelledRefused: a table recorded under another LL or LL128
// buffer size is refused by name, not simulated as if it had NCCL's
// default; NCCL_BUFFSIZE is simulated, and a bad one refused.
func TestUnmodelledRefused(t *testing.T) {
	root, _, err := model.ReadTopologyFile(h100x2Topo())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"NCCL_LL_BUFFSIZE=65536", "NCCL_LL128_BUFFSIZE=1048576", "NCCL_BUFFSIZE=1000", "NCCL_BUFFSIZE=lots"} {
		k, v, _ := strings.Cut(kv, "=")
		tb := &Table{Name: "t.tsv", Env: map[string]string{k: v}}
		_, err := SearchTable(root, h100x2Topo(), 1, tb)
		if err == nil || !strings.Contains(err.Error(), k+"=") || !strings.Contains(err.Error(), "t.tsv") {
			t.Errorf("%s: %v, want an error naming the table and %s", kv, err, k)
		}
	}
	tb := &Table{Name: "t.tsv", Env: map[string]string{"NCCL_BUFFSIZE": "1048576"}}
	if _, err := SearchTable(root, h100x2Topo(), 1, tb); err != nil {
		t.Errorf("NCCL_BUFFSIZE=1048576: %v", err)
	}
}

// TestAccuracyH100x2 predicts every H100 table and fails with a table of
// the rows beyond the bound.
func TestAccuracyH100x2(t *testing.T) {
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range h100Bounds {
		tb, res := loadH100Table(t, b.name)
		checkTableBound(t, c, tb, res, b.median, b.max)
	}
}
