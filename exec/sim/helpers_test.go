package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// repoRoot is the module root (two levels above this package).
func repoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

// baselineTSV is the measured table the default calibration is fitted to.
func baselineTSV() string {
	return filepath.Join(repoRoot(), "..", "shared", "baselines", "h200x2-nvswitch", "nccl-2.28.9-p2p.tsv")
}

// baselineTable reads the table of baselineTSV, skipping the test when
// the shared data is not beside the checkout.
func baselineTable(t testing.TB) *Table {
	t.Helper()
	path := baselineTSV()
	if _, err := os.Stat(path); err != nil {
		t.Skipf("baseline table not available: %v", err)
	}
	tb, err := ReadTableFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// loadSearch loads an embedded or on-disk topology and runs the search.
func loadSearch(t testing.TB, file string, nodes int) *search.Result {
	t.Helper()
	return loadSearchEnv(t, file, nodes, nil)
}

// loadSearchEnv is loadSearch under the NCCL_* settings env (the path
// decisions of model.ParamsFromEnv: NCCL_P2P_DISABLE=1 puts two GPUs of a
// host on SHM).
func loadSearchEnv(t testing.TB, file string, nodes int, env map[string]string) *search.Result {
	t.Helper()
	params, err := model.ParamsFromEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	var root *model.Element
	if file == "" {
		data, rerr := twinccl.RecordedTopology(twinccl.DefaultTopology)
		if rerr != nil {
			t.Fatal(rerr)
		}
		file = "embedded:" + twinccl.DefaultTopology
		root, _, err = model.ParseTopologyXML(bytes.NewReader(data), file)
	} else {
		root, _, err = model.ReadTopologyFile(file)
	}
	if err != nil {
		t.Fatal(err)
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	if err != nil {
		t.Fatal(err)
	}
	res, err := search.Run(cl, search.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func newSim(t testing.TB, res *search.Result, c *Calib) *Simulator {
	t.Helper()
	if c == nil {
		var err error
		c, err = DefaultCalib(90)
		if err != nil {
			t.Fatal(err)
		}
	}
	s, err := NewSimulator(res, c)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fitsParam reports whether a fit of tables from calibration c frees the
// constant named name (the constants a fit moves depend on what its
// tables exercise: usage).
func fitsParam(t testing.TB, c *Calib, name string, tables ...FitTable) bool {
	t.Helper()
	u, err := usage(tables, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fitParams(u) {
		if p.Name == name {
			return true
		}
	}
	return false
}
