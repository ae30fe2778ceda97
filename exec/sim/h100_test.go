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

// TestTunerMatchesLogsH100: on the H100 pair, under every table's
// settings (protocols, thread counts, channel counts, transports), the
// tuner picks the algorithm, protocol and channel count NCCL logged for
// every call.
func TestTunerMatchesLogsH100(t *testing.T) {
	for _, name := range tablesIn(t, h100TimingsDir()) {
		tb, res := loadH100Table(t, name)
		checkLoggedChoices(t, tb, res, filepath.Join(h100TimingsDir(), name+".log"))
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
