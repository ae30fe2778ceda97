package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
)

// hwRecordings is testdata/hw/h200x2.
func hwRecordings() string { return filepath.Join("..", "..", "testdata", "hw", "h200x2") }

// TestCompareJSON compares a "run gpu --json" file: table, JSON and SVG.
func TestCompareJSON(t *testing.T) {
	dir := t.TempDir()
	jsonOut, svgOut := filepath.Join(dir, "c.json"), filepath.Join(dir, "c.svg")
	var so, se bytes.Buffer
	err := runCompare([]string{filepath.Join(hwRecordings(), "shm-allreduce.json"), "--env", "NCCL_P2P_DISABLE=1",
		"--env", "NCCL_NVLS_ENABLE=0", "--json", jsonOut, "--svg", svgOut}, &so, &se)
	if err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	out := so.String()
	for _, want := range []string{"NCCL_P2P_DISABLE=1", "hw_us", "nccl_us", "median", "AllReduce", "33554432", "wrote " + svgOut} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	doc := readCompareJSON(t, jsonOut)
	if doc.Kind != "json" || len(doc.Calls) != 12 || len(doc.Groups) != 12 || len(doc.Stats) == 0 {
		t.Fatalf("doc: kind %s, %d calls, %d groups, %d stats", doc.Kind, len(doc.Calls), len(doc.Groups), len(doc.Stats))
	}
	for _, c := range doc.Calls {
		if c.NCCLUs == nil || c.NCCLErr == nil || !(c.SimUs > 0) {
			t.Errorf("call %d: %+v", c.Index, c)
		}
	}
	svg, err := os.ReadFile(svgOut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(svg, []byte("<?xml")) || !bytes.Contains(svg, []byte("</svg>")) {
		t.Errorf("svg: %.80q", svg)
	}
}

// TestCompareTraceEvents compares a call trace and, with --events, its
// event trace.
func TestCompareTraceEvents(t *testing.T) {
	var so, se bytes.Buffer
	err := runCompare([]string{filepath.Join(hwRecordings(), "p2p-broadcast.parquet"), "--events", "--env", "NCCL_NVLS_ENABLE=0"}, &so, &se)
	if err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	out := so.String()
	for _, want := range []string{"traced run", "# steps:", "matched step", "late_us", "Simple", "LL", "between  why", "# why, over"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "step count differs") {
		t.Errorf("step counts differ:\n%s", out)
	}
}

// TestCompareErrors: usage mistakes and bad files give errors, not panics.
func TestCompareErrors(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "g.parquet")
	if err := os.WriteFile(garbage, []byte("PAR1\x00\x00garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args  []string
		usage bool
		want  string
	}{
		{nil, true, "wants an input"},
		{[]string{filepath.Join(dir, "nosuch-a.json"), filepath.Join(dir, "nosuch-b.json")}, false, "nosuch-a.json"},
		{[]string{hwRecordings(), "--svg", filepath.Join(dir, "x.svg")}, true, "several are pooled"},
		{[]string{hwRecordings(), filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--events"}, true, "several are pooled"},
		{[]string{dir}, false, "no JSON recordings"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.parquet"), filepath.Join(hwRecordings(), "p2p-broadcast.parquet")}, false, "p2p-broadcast.parquet"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), filepath.Join(dir, "nosuch-c.json")}, false, "nosuch-c.json"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--events"}, true, "call trace"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--env", "novalue"}, true, "KEY=VALUE"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--json", "-", "--svg", "-"}, true, "stdout"},
		{[]string{garbage}, false, "g.parquet"},
		{[]string{filepath.Join(dir, "missing.json")}, false, "missing.json"},
		{[]string{filepath.Join(hwRecordings(), "p2p-allreduce.events.parquet")}, false, "event"},
		{[]string{hwRecordings(), "--worst", "3"}, true, "--worst lists the cells of --starts"},
		{[]string{"--starts", hwRecordings()}, true, "at least two directories"},
		{[]string{"--starts", hwRecordings(), filepath.Join(hwRecordings(), "p2p-allreduce.json")}, true, "not a directory"},
		{[]string{"--starts", hwRecordings(), hwRecordings() + "/"}, true, "named twice"},
		{[]string{"--starts", hwRecordings(), dir, "--worst", "-1"}, true, "--worst -1"},
		{[]string{"--starts", hwRecordings(), dir, "--svg", "x.svg"}, true, "not --starts"},
		{[]string{hwRecordings(), "--match", "[x"}, true, "--match"},
		{[]string{hwRecordings(), "--match", "nosuch-*"}, false, "named like"},
	} {
		var so, se bytes.Buffer
		err := runCompare(tc.args, &so, &se)
		if err == nil {
			t.Errorf("%v: no error", tc.args)
			continue
		}
		if errors.Is(err, errUsage) != tc.usage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v (usage %v, want %q)", tc.args, err, errors.Is(err, errUsage), tc.want)
		}
	}
}

// TestCompareCalib: --calib takes the calibration of our executor (with
// P2P read mode and a remote fence) and the report names it.
func TestCompareCalib(t *testing.T) {
	calib := filepath.Join("..", "..", "exec", "sim", "calib", "h200-twinccl.json")
	var so, se bytes.Buffer
	err := runCompare([]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--env", "NCCL_NVLS_ENABLE=0", "--calib", calib}, &so, &se)
	if err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	if out := so.String(); !strings.Contains(out, "calibration "+calib) || !strings.Contains(out, "ours  all") {
		t.Errorf("output does not name the calibration or lacks statistics:\n%s", out)
	}

	// By default each column gets its own calibration; a bad --calib-ours
	// is an error naming the flag.
	so.Reset()
	if err := runCompare([]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--env", "NCCL_NVLS_ENABLE=0"}, &so, &se); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	if out := so.String(); !strings.Contains(out, "embedded:h200.json (NCCL's column), embedded:h200-twinccl.json (ours)") {
		t.Errorf("default calibrations not named:\n%s", out)
	}
	// Our column under the default is our calibration's alone, --loop
	// included (a Broadcast, whose chain overlaps across calls in a loop).
	oursLine := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := runCompare(append([]string{filepath.Join(hwRecordings(), "p2p-broadcast.json"), "--env", "NCCL_NVLS_ENABLE=0", "--loop", "0"}, args...), &out, &se); err != nil {
			t.Fatalf("%v\n%s", err, se.String())
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(l, "  ours  all     all") {
				return l
			}
		}
		t.Fatalf("no statistics of our column:\n%s", out.String())
		return ""
	}
	if a, b := oursLine(), oursLine("--calib", calib); a != b {
		t.Errorf("--loop 0: our column under the defaults\n%s\nunder %s alone\n%s", a, calib, b)
	}
	err = runCompare([]string{filepath.Join(hwRecordings(), "p2p-allreduce.json"), "--env", "NCCL_NVLS_ENABLE=0", "--calib-ours", "nosuch.json"}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "--calib-ours") {
		t.Errorf("--calib-ours nosuch.json: %v, want an error naming --calib-ours", err)
	}
}

// TestCompareRecordedSettings: a recording's nccl_env (NCCL forced to LL
// by run gpu --proto ll) makes NCCL's column simulate LL at 8 MiB, where
// the tuner alone picks Simple; a split-host run compares on two hosts of
// one GPU with --nodes 2 and its recorded socket settings.
func TestCompareRecordedSettings(t *testing.T) {
	h100 := filepath.Join("..", "..", "testdata", "hw", "h100x2")
	run := func(args ...string) compareJSON {
		t.Helper()
		return runCompareJSON(t, args...)
	}
	doc := run(filepath.Join(h100, "proto", "p2p-allreduce-ll.json"), "--topo", filepath.Join(h100, "topo.xml"))
	if !strings.Contains(doc.Settings, "NCCL_PROTO=LL") {
		t.Errorf("settings %q lack the recorded NCCL_PROTO=LL", doc.Settings)
	}
	last := doc.Calls[len(doc.Calls)-1]
	if last.Bytes != 8<<20 || last.TunerProto != "LL" {
		t.Errorf("last call: %d B, NCCL's column simulated with %q, want 8 MiB in LL", last.Bytes, last.TunerProto)
	}
	// The environment's settings count, but not NCCL_VERSION, which
	// NVIDIA's containers set to name the library.
	t.Setenv("NCCL_VERSION", "2.28.3-1")
	t.Setenv("NCCL_P2P_LEVEL", "NVL")
	doc = run(filepath.Join(h100, "proto", "p2p-allreduce-ll.json"), "--topo", filepath.Join(h100, "topo.xml"))
	if strings.Contains(doc.Settings, "NCCL_VERSION") || !strings.Contains(doc.Settings, "NCCL_P2P_LEVEL=NVL") {
		t.Errorf("settings %q: want the environment's NCCL_P2P_LEVEL and no NCCL_VERSION", doc.Settings)
	}
	// --env wins over the recording.
	doc = run(filepath.Join(h100, "proto", "p2p-allreduce-ll.json"), "--topo", filepath.Join(h100, "topo.xml"), "--env", "NCCL_PROTO=Simple")
	if last := doc.Calls[len(doc.Calls)-1]; last.TunerProto != "Simple" {
		t.Errorf("with --env NCCL_PROTO=Simple: NCCL's column in %q", last.TunerProto)
	}
	doc = run(filepath.Join(h100, "net-broadcast.json"), "--topo", filepath.Join(h100, "topo-1gpu.xml"), "--nodes", "2")
	if !strings.Contains(doc.Settings, "NCCL_NET=Socket") || len(doc.Calls) == 0 {
		t.Fatalf("split-host run: settings %q, %d calls", doc.Settings, len(doc.Calls))
	}
	var so, se bytes.Buffer
	err := runCompare([]string{filepath.Join(h100, "net-broadcast.json"), "--topo", filepath.Join(h100, "topo-1gpu.xml"), "--nodes", "-1"}, &so, &se)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--nodes") {
		t.Errorf("--nodes -1: %v", err)
	}
}

// TestCompareRecordedHosts: a split-host recording that names its hosts
// (run gpu's "hosts") compares without --topo and --nodes: as two nodes
// of the embedded two-GPU machine's first GPU, with the same predictions
// as on the machine's own one-GPU file with --nodes 2 and as on its
// two-GPU file cut to a host's share; a host count that does not divide
// the ranks is refused.
func TestCompareRecordedHosts(t *testing.T) {
	h100 := filepath.Join("..", "..", "testdata", "hw", "h100x2")
	data, err := os.ReadFile(filepath.Join(h100, "rerun22", "heldout", "net-allgather-ll.json"))
	if err != nil {
		t.Fatal(err)
	}
	write := func(hosts int) string {
		var doc map[string]any
		if err := json.Unmarshal(data, &doc); err != nil {
			t.Fatal(err)
		}
		doc["hosts"] = hosts
		out, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "net-allgather-ll.json")
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	named := write(2)
	ref := runCompareJSON(t, named, "--topo", filepath.Join(h100, "topo-1gpu.xml"), "--nodes", "2")
	for _, args := range [][]string{{named}, {named, "--topo", filepath.Join(h100, "topo.xml")}, {filepath.Join(h100, "rerun22", "heldout", "net-allgather-ll.json"), "--nodes", "2"}} {
		doc := runCompareJSON(t, args...)
		if !strings.Contains(doc.Topology, "as 2 hosts of 1 GPU") {
			t.Errorf("%v: topology %q, want two hosts of one GPU", args, doc.Topology)
		}
		if len(doc.Calls) != len(ref.Calls) || len(doc.Calls) == 0 {
			t.Fatalf("%v: %d calls, want %d", args, len(doc.Calls), len(ref.Calls))
		}
		for i, c := range doc.Calls {
			if c.SimUs != ref.Calls[i].SimUs || c.SimNCCLUs == nil || *c.SimNCCLUs != *ref.Calls[i].SimNCCLUs {
				t.Errorf("%v: %d B simulated in %v us (NCCL's %v), want %v (%v) as on the one-GPU file", args, c.Bytes, c.SimUs, c.SimNCCLUs, ref.Calls[i].SimUs, ref.Calls[i].SimNCCLUs)
			}
		}
	}
	var so, se bytes.Buffer
	if err := runCompare([]string{write(3)}, &so, &se); err == nil || !strings.Contains(err.Error(), "hosts 3") {
		t.Errorf("hosts 3 for 2 ranks: %v", err)
	}
	// A call trace takes the hosts of the --json file beside it.
	dir := filepath.Join(t.TempDir(), "trace")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	trace := filepath.Join(dir, "net-allgather-ll.parquet")
	copyFile(t, filepath.Join(h100, "rerun22", "net-allgather.parquet"), trace)
	copyFile(t, named, filepath.Join(dir, "net-allgather-ll.json"))
	if doc := runCompareJSON(t, trace); !strings.Contains(doc.Topology, "as 2 hosts of 1 GPU") || len(doc.Calls) == 0 {
		t.Errorf("trace beside a file of 2 hosts: topology %q, %d calls", doc.Topology, len(doc.Calls))
	}
}

// TestCompareSplitHostWarning: a split-host recording (a host id per rank
// in its nccl_env) compared without --nodes gets a warning that says how
// to compare it; with --nodes it does not.
func TestCompareSplitHostWarning(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "hw", "h200x2")
	file := filepath.Join(dir, "heldout", "net-allgather-simple.json")
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{[]string{file, "--topo", filepath.Join(dir, "topo.xml")}, true},
		{[]string{file, "--topo", filepath.Join(dir, "topo-1gpu.xml"), "--nodes", "2"}, false},
	} {
		var so, se bytes.Buffer
		if err := runCompare(tc.args, &so, &se); err != nil {
			t.Fatalf("%v: %v\n%s", tc.args, err, se.String())
		}
		if got := strings.Contains(se.String(), "--nodes 2"); got != tc.warn {
			t.Errorf("%v: warning %v, want %v; stderr:\n%s", tc.args, got, tc.warn, se.String())
		}
	}
}

// TestKernelRecorded: a recording that names its kernel (run gpu's
// "kernel") passes it to the calibration's report of the tables it
// fitted, and a comparison of a recording of another kernel under that
// calibration says so.
func TestKernelRecorded(t *testing.T) {
	dir := t.TempDir()
	src, err := os.ReadFile(filepath.Join(hwRecordings(), "rerun4", "heldout", "shm-reduce-ll.json"))
	if err != nil {
		t.Fatal(err)
	}
	withKernel := func(name, digest string) string {
		t.Helper()
		var doc map[string]any
		if err := json.Unmarshal(src, &doc); err != nil {
			t.Fatal(err)
		}
		doc["kernel"] = map[string]any{"source_sha256": digest, "options": []string{"-DTW_LL_CREDIT_LEADER=1"}}
		b, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := withKernel("a.json", "00aa"), withKernel("b.json", "00bb")
	topo := filepath.Join(hwRecordings(), "rerun4", "topo.xml")
	start := filepath.Join("..", "..", "exec", "sim", "calib", "h200-twinccl.json")
	out := filepath.Join(dir, "c.json")
	var so, se bytes.Buffer
	if err := runCalibrate([]string{"--evaluate", "--topo", topo, "--start", start, "--column", "ours", "--out", out, a}, &so, &se); err != nil {
		t.Fatalf("calibrate: %v\n%s", err, se.String())
	}
	c, err := sim.LoadCalib(out)
	if err != nil {
		t.Fatal(err)
	}
	if c.Fit == nil || len(c.Fit.Tables) != 1 || c.Fit.Tables[0].Kernel != "interp.cu 00aa -DTW_LL_CREDIT_LEADER=1" {
		t.Fatalf("fit report %+v: want a.json's kernel", c.Fit)
	}
	for _, tc := range []struct {
		file string
		note bool
	}{{a, false}, {b, true}} {
		so.Reset()
		if err := runCompare([]string{tc.file, "--topo", topo, "--calib", out}, &so, &se); err != nil {
			t.Fatalf("compare %s: %v", tc.file, err)
		}
		if got := strings.Contains(so.String(), "# note: our executor's rows were recorded with kernel"); got != tc.note {
			t.Errorf("%s: kernel note %v, want %v:\n%s", filepath.Base(tc.file), got, tc.note, so.String())
		}
	}
}

// TestOursCalibDefault: our executor's column gets the embedded
// calibration of our kernels that goes with an embedded NCCL one, unless
// --calib-ours names one or --calib is a file or one of ours.
func TestOursCalibDefault(t *testing.T) {
	for _, tc := range []struct{ flag, calib, want string }{
		{"", "embedded:h200.json", "embedded:h200-twinccl.json"},
		{"", "embedded:h100.json", "embedded:h100-twinccl.json"},
		{"", "embedded:h200-twinccl.json", ""},
		{"", "my.json", ""},
		{"", "embedded:nosuch.json", ""},
		{"mine.json", "embedded:h200.json", "mine.json"},
	} {
		if got := oursCalibPath(tc.flag, tc.calib); got != tc.want {
			t.Errorf("--calib-ours %q with --calib %q: %q, want %q", tc.flag, tc.calib, got, tc.want)
		}
	}
}

// TestCompareCalibByGPU: without --calib a recording is simulated with the
// embedded calibration measured on the GPUs it names (a trace: those of
// the --json file of the same run beside it), else the default; --calib
// wins.
func TestCompareCalibByGPU(t *testing.T) {
	hw := filepath.Join("..", "..", "testdata", "hw")
	h100 := filepath.Join(hw, "h100x2")
	calibOf := func(args ...string) string {
		t.Helper()
		return runCompareJSON(t, args...).Calib
	}
	topo := filepath.Join(h100, "topo.xml")
	// A trace alone names no GPUs; beside its --json file it takes theirs.
	dir := t.TempDir()
	trace := filepath.Join(dir, "p2p-allreduce.parquet")
	copyFile(t, filepath.Join(h100, "rerun16", "p2p-allreduce.parquet"), trace)
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		setup func()
	}{
		{"H100 json", []string{filepath.Join(h100, "proto", "p2p-allreduce-ll.json"), "--topo", topo}, "embedded:h100.json", nil},
		{"H200 json", []string{filepath.Join(hw, "h200x2", "proto", "p2p-allreduce-ll.json"), "--topo", filepath.Join(hw, "h200x2", "topo.xml")}, "embedded:h200.json", nil},
		{"--calib wins", []string{filepath.Join(h100, "proto", "p2p-allreduce-ll.json"), "--topo", topo, "--calib", "embedded:h200.json"}, "embedded:h200.json", nil},
		{"trace alone", []string{trace, "--topo", topo}, "embedded:" + sim.DefaultCalibName, nil},
		{"trace beside its json", []string{trace, "--topo", topo}, "embedded:h100.json", func() {
			copyFile(t, filepath.Join(h100, "rerun16", "p2p-allreduce.json"), filepath.Join(dir, "p2p-allreduce.json"))
		}},
	} {
		if tc.setup != nil {
			tc.setup()
		}
		if got := calibOf(tc.args...); !strings.HasPrefix(got, tc.want+" ") && got != tc.want {
			t.Errorf("%s: calibration %q, want %s", tc.name, got, tc.want)
		}
	}
}

// runCompareJSON runs replay compare with args and returns the document its
// --json wrote.
func runCompareJSON(t *testing.T, args ...string) compareJSON {
	t.Helper()
	out := filepath.Join(t.TempDir(), "c.json")
	var so, se bytes.Buffer
	if err := runCompare(append(args, "--json", out), &so, &se); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, se.String())
	}
	return readCompareJSON(t, out)
}

// readCompareJSON reads the --json document replay compare wrote to path.
func readCompareJSON(t *testing.T, path string) compareJSON {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return readCompareJSONBytes(t, data)
}

// readCompareJSONBytes decodes a --json document of one input.
func readCompareJSONBytes(t *testing.T, data []byte) compareJSON {
	t.Helper()
	var doc compareJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// copyFile copies the file at from to to.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestComparePooled compares the recordings of one start of the H100 pair
// (a directory: split-host sockets, and P2P and SHM at held-out sizes) on
// the machine's two-GPU topology and checks the pooled statistics against
// the per-file comparisons in the same document: per transport, column
// and protocol, the valid rows counted (not disturbed, not simulated
// otherwise than recorded, no wrong result) and their median and maximum
// |err|; no steady bucket, which would hold the same rows. Each file's
// errors are the same as its comparison alone.
func TestComparePooled(t *testing.T) {
	start := filepath.Join("..", "..", "testdata", "hw", "h100x2", "rerun30")
	topo := filepath.Join(start, "..", "topo.xml")
	var so, se bytes.Buffer
	if err := runCompare([]string{start, "--topo", topo, "--json", "-"}, &so, &se); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	var doc pooledJSON
	if err := json.Unmarshal(so.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Files) != 42 {
		t.Fatalf("%d files pooled, want rerun30/'s 42 JSON recordings", len(doc.Files))
	}
	type key struct{ col, transport, proto, bucket string }
	errs := map[key][]float64{}
	transports := map[string]bool{}
	left := 0
	for _, f := range doc.Files {
		transports[f.Transport] = true
		want := map[string]string{"net-": "NET/Socket", "p2p-": "P2P", "shm-": "SHM"}
		if w := want[filepath.Base(f.Input)[:4]]; f.Transport != w {
			t.Errorf("%s: transport %q, want %q", f.Input, f.Transport, w)
		}
		for _, c := range f.Calls {
			notes := strings.Join(c.Notes, "; ")
			add := func(col, proto string, e float64, invalid bool) {
				if invalid {
					left++
					return
				}
				for _, p := range []string{"all", proto} {
					errs[key{col, f.Transport, p, "all"}] = append(errs[key{col, f.Transport, p, "all"}], math.Abs(e))
				}
			}
			clamped := strings.Contains(notes, "the plan has")
			add("ours", c.Proto, c.Err, c.Wrong > 0 || clamped || strings.Contains(notes, "ours disturbed"))
			if c.NCCLErr != nil {
				proto := c.Proto
				if c.TunerProto != "" {
					proto = c.TunerProto
				}
				add("nccl", proto, *c.NCCLErr, c.NCCLWrong > 0 || clamped || strings.Contains(notes, "nccl disturbed"))
			}
		}
	}
	if len(transports) != 3 {
		t.Errorf("transports %v, want NET/Socket, P2P and SHM", transports)
	}
	if left == 0 || doc.LeftOut.Total != left || doc.LeftOut.Disturbed != left {
		t.Errorf("left out %+v; the files' notes give %d disturbed columns", doc.LeftOut, left)
	}
	checked := 0
	for _, s := range doc.Pooled {
		if s.Bucket == "steady" {
			t.Errorf("%+v: a steady bucket among valid rows only", s)
		}
		if s.Bucket != "all" {
			continue
		}
		e := errs[key{s.Versus, s.Transport, s.Proto, s.Bucket}]
		if len(e) == 0 {
			t.Errorf("%+v: no such rows in the files", s)
			continue
		}
		sort.Float64s(e)
		med := e[len(e)/2]
		if len(e)%2 == 0 {
			med = (e[len(e)/2-1] + e[len(e)/2]) / 2
		}
		if s.N != len(e) || math.Abs(s.MedianAbs-med) > 2e-6 || math.Abs(s.MaxAbs-e[len(e)-1]) > 2e-6 {
			t.Errorf("%s %s %s %s: n %d median %.6f max %.6f; the files give %d, %.6f, %.6f",
				s.Versus, s.Transport, s.Proto, s.Bucket, s.N, s.MedianAbs, s.MaxAbs, len(e), med, e[len(e)-1])
		}
		checked++
	}
	if checked < 20 {
		t.Errorf("%d pooled statistics checked, want every transport's columns and protocols", checked)
	}
	// One file alone gives the errors it has in the pool.
	one := doc.Files[0]
	so.Reset()
	if err := runCompare([]string{one.Input, "--topo", topo, "--json", "-"}, &so, &se); err != nil {
		t.Fatal(err)
	}
	alone := readCompareJSONBytes(t, so.Bytes())
	if len(alone.Calls) != len(one.Calls) {
		t.Fatalf("%s: %d calls alone, %d pooled", one.Input, len(alone.Calls), len(one.Calls))
	}
	for i := range alone.Calls {
		if alone.Calls[i].Err != one.Calls[i].Err {
			t.Errorf("%s call %d: err %v alone, %v pooled", one.Input, i, alone.Calls[i].Err, one.Calls[i].Err)
		}
	}
}

// TestCompareStarts: --starts pools each start on its own and sets the
// starts side by side: a cell per row that two starts or more measured
// steady, named by its recording below the start's directory, with the
// ratio of every start's own comparison; --match keeps the named
// recordings.
func TestCompareStarts(t *testing.T) {
	starts := []string{filepath.Join(hwRecordings(), "heldout"), filepath.Join(hwRecordings(), "rerun", "heldout")}
	topo := filepath.Join(hwRecordings(), "topo.xml")
	var so, se bytes.Buffer
	args := append([]string{"--starts", "--match", "p2p-*-ll.json", "--topo", topo, "--json", "-"}, starts...)
	if err := runCompare(args, &so, &se); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	var doc startsJSON
	if err := json.Unmarshal(so.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Starts) != 2 || len(doc.Floors) == 0 || len(doc.Cells) == 0 {
		t.Fatalf("%d starts, %d floors, %d cells: want two starts and their cells", len(doc.Starts), len(doc.Floors), len(doc.Cells))
	}
	for i, st := range doc.Starts {
		if st.Files != 5 {
			t.Errorf("start %d (%s): %d recordings, want the five ops' p2p-*-ll.json", i, st.Start, st.Files)
		}
	}
	// Every cell's ratios are those of each start's file compared alone.
	alone := map[string]compareJSON{}
	for _, c := range doc.Cells {
		if c.Transport != "P2P" || c.Proto != "LL" || !strings.HasSuffix(c.Recording, "-ll.json") || len(c.Ratios) != 2 {
			t.Fatalf("cell %+v: want P2P LL of a p2p-*-ll.json recording, two starts", c)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, r := range c.Ratios {
			if r == nil {
				t.Fatalf("cell %+v: start %d has no ratio though both measured every size", c, i)
			}
			path := filepath.Join(starts[i], c.Recording)
			rep, ok := alone[path]
			if !ok {
				so.Reset()
				if err := runCompare([]string{path, "--topo", topo, "--json", "-"}, &so, &se); err != nil {
					t.Fatal(err)
				}
				rep = readCompareJSONBytes(t, so.Bytes())
				alone[path] = rep
			}
			found := false
			for _, call := range rep.Calls {
				if call.Bytes != c.Bytes {
					continue
				}
				found = true
				want := 1 + call.Err
				if c.Versus == "nccl" {
					want = 1 + *call.NCCLErr
				}
				if math.Abs(*r-want) > 2e-6 {
					t.Errorf("%s %s %d B start %d: ratio %v, alone %v", c.Versus, c.Recording, c.Bytes, i, *r, want)
				}
			}
			if !found {
				t.Errorf("%s: no %d B row alone", path, c.Bytes)
			}
			lo, hi = min(lo, *r), max(hi, *r)
		}
		if math.Abs(c.Floor-(hi-lo)/(hi+lo)) > 2e-6 {
			t.Errorf("%s %s %d B: floor %v, ratios give %v", c.Versus, c.Recording, c.Bytes, c.Floor, (hi-lo)/(hi+lo))
		}
	}
	// Each start's hindsight holds the simulation's own errors on its
	// rows among the cells.
	if len(doc.Hindsight) != 2*len(doc.Floors) {
		t.Errorf("%d hindsight entries, want one per start and floor (%d)", len(doc.Hindsight), 2*len(doc.Floors))
	}
	for _, h := range doc.Hindsight {
		si := slices.Index(starts, h.Start)
		n, worst := 0, 0.0
		for _, c := range doc.Cells {
			if c.Versus == h.Versus && c.Proto == h.Proto && c.Transport == h.Transport && si >= 0 && c.Ratios[si] != nil {
				n++
				worst = max(worst, math.Abs(*c.Ratios[si]-1))
			}
		}
		if h.Rows != n || math.Abs(h.SimMaxAbs-worst) > 2e-6 || h.OthersMedianAbs > h.OthersMaxAbs {
			t.Errorf("hindsight %+v: the cells give %d rows, largest error %v", h, n, worst)
		}
	}
	// The text output names both starts and lists the widest cells.
	so.Reset()
	if err := runCompare(append([]string{"--starts", "--match", "p2p-*-ll.json", "--topo", topo, "--worst", "2"}, starts...), &so, &se); err != nil {
		t.Fatal(err)
	}
	out := so.String()
	for _, want := range []string{"2 starts", "start 1: " + starts[0], "start 2: " + starts[1], "floor median", "hindsight", "the 2 widest cells"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// Starts that share no recording have no cell, and say so.
	a, b := t.TempDir(), t.TempDir()
	for dir, rec := range map[string]string{a: "p2p-allreduce-ll.json", b: "p2p-allgather-ll.json"} {
		data, err := os.ReadFile(filepath.Join(starts[0], rec))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, rec), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	so.Reset()
	if err := runCompare([]string{"--starts", a, b, "--topo", topo}, &so, &se); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(so.String(), "no row was measured steady on two starts") || strings.Contains(so.String(), "hindsight") {
		t.Errorf("starts without a shared recording:\n%s", so.String())
	}
}

// h100Recording is a file of testdata/hw/h100x2.
func h100Recording(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "testdata", "hw", "h100x2"}, parts...)...)
}

// h100Topo is the H100 pair's two-GPU topology.
func h100Topo() string { return h100Recording("topo.xml") }

// runPooledJSON runs replay compare with args and --json -, and returns
// the pooled document and stderr.
func runPooledJSON(t *testing.T, args ...string) (pooledJSON, string) {
	t.Helper()
	var so, se bytes.Buffer
	require.NoError(t, runCompare(append(args, "--json", "-"), &so, &se), se.String())
	var doc pooledJSON
	require.NoError(t, json.Unmarshal(so.Bytes(), &doc), so.String())
	return doc, se.String()
}

// TestComparePooledSkips: a directory holding a good recording, a junk
// JSON file, a recording of another machine (four ranks on the pair's
// topology) and a split-host run that does not record its hosts (which
// would be simulated over P2P without --nodes) is compared: each bad file
// gets a one-line note naming it and why, the count comes at the end, and
// the results are those of the good file alone. A file named on the
// command line that cannot be opened is an error naming it; a directory
// of bad files only is an error naming them.
func TestComparePooledSkips(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "p2p-allreduce-ll.json")
	copyFile(t, h100Recording("rerun30", "heldout", "p2p-allreduce-ll.json"), good)
	junk := filepath.Join(dir, "junk.json")
	require.NoError(t, os.WriteFile(junk, []byte("this is no recording\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "other"), 0o755))
	fourRanks := filepath.Join(dir, "other", "h100x4-p2p-allgather-ll.json")
	copyFile(t, filepath.Join("..", "..", "testdata", "hw", "h100x4", "rerun2", "heldout", "p2p-allgather-ll.json"), fourRanks)
	split := filepath.Join(dir, "net-allgather.json")
	copyFile(t, h100Recording("rerun17", "net-allgather.json"), split)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte("not JSON: not walked\n"), 0o644))

	doc, stderr := runPooledJSON(t, dir, "--topo", h100Topo())
	require.Len(t, doc.Files, 1, stderr)
	assert.Equal(t, good, doc.Files[0].Input)
	lines := strings.Split(strings.TrimSuffix(stderr, "\n"), "\n")
	require.Len(t, lines, 4, stderr)
	for i, want := range []struct{ file, why string }{
		{junk, "not a \"run gpu --json\" file"},
		{split, "split-host run (NCCL_HOSTID=host0) that does not record its hosts"},
		{fourRanks, "4 rank(s), the topology"},
	} {
		assert.True(t, strings.HasPrefix(lines[i], "replay compare: skipped "+want.file+": "), "line %d: %q", i, lines[i])
		assert.Contains(t, lines[i], want.why)
	}
	assert.Equal(t, "replay compare: 3 files skipped", lines[3])
	require.Len(t, doc.Skipped, 3)
	assert.Equal(t, []string{junk, split, fourRanks}, []string{doc.Skipped[0].File, doc.Skipped[1].File, doc.Skipped[2].File})

	alone, aloneErr := runPooledJSON(t, good, h100Recording("rerun30", "heldout", "p2p-allreduce-ll.json"), "--topo", h100Topo())
	assert.Empty(t, aloneErr)
	require.Len(t, alone.Files, 2)
	half := alone.Pooled // the same rows twice: the same medians and maxima
	require.Len(t, doc.Pooled, len(half))
	for i := range half {
		assert.Equal(t, half[i].N, 2*doc.Pooled[i].N)
		assert.InDelta(t, half[i].MedianAbs, doc.Pooled[i].MedianAbs, 1e-9)
		assert.InDelta(t, half[i].MaxAbs, doc.Pooled[i].MaxAbs, 1e-9)
	}

	// The text output says in its header how many were skipped.
	var so, se bytes.Buffer
	require.NoError(t, runCompare([]string{dir, "--topo", h100Topo()}, &so, &se))
	assert.Contains(t, so.String(), "# replay compare: 1 recording under "+dir+string(filepath.Separator)+" (3 inputs skipped: see stderr)")

	// A file named that cannot be opened is an error naming it.
	missing := filepath.Join(dir, "missing.json")
	err := runCompare([]string{dir, missing, "--topo", h100Topo()}, &so, &se)
	require.Error(t, err)
	assert.Contains(t, err.Error(), missing)

	// Bad files only: an error naming each.
	require.NoError(t, os.Remove(good))
	so.Reset()
	se.Reset()
	err = runCompare([]string{dir, "--topo", h100Topo()}, &so, &se)
	require.Error(t, err)
	assert.False(t, errors.Is(err, errUsage))
	for _, f := range []string{junk, split, fourRanks} {
		assert.Contains(t, err.Error(), f)
	}
	assert.Contains(t, err.Error(), "no recording could be compared")
	assert.Empty(t, so.String())
	assert.Contains(t, se.String(), "replay compare: 3 files skipped")
}

// TestComparePooledSplitHosts: with --nodes 2 on one host's GPU (how the
// split-host runs that do not record their hosts are compared), the
// one-host recordings beside them are skipped rather than simulated
// over sockets.
func TestComparePooledSplitHosts(t *testing.T) {
	dir := t.TempDir()
	split := filepath.Join(dir, "net-allgather.json")
	copyFile(t, h100Recording("rerun17", "net-allgather.json"), split)
	oneHost := filepath.Join(dir, "p2p-allgather-ll.json")
	copyFile(t, h100Recording("rerun17", "heldout", "p2p-allgather-ll.json"), oneHost)
	doc, stderr := runPooledJSON(t, dir, "--topo", h100Recording("topo-1gpu.xml"), "--nodes", "2")
	require.Len(t, doc.Files, 1, stderr)
	assert.Equal(t, split, doc.Files[0].Input)
	assert.Equal(t, "NET/Socket", doc.Files[0].Transport)
	require.Len(t, doc.Skipped, 1)
	assert.Equal(t, oneHost, doc.Skipped[0].File)
	assert.Contains(t, doc.Skipped[0].Reason, "recorded on one host")
}

// TestComparePooledLeavesOutInvalid: the pool leaves out, per column, the
// rows whose result was wrong, which the simulation could not run as
// recorded (more channels than the plan has) and the disturbed ones; its
// statistics are those of the valid rows, recomputed here from the
// recordings themselves, and it counts what it left out.
func TestComparePooledLeavesOutInvalid(t *testing.T) {
	dir := t.TempDir()
	var doc map[string]any
	data, err := os.ReadFile(h100Recording("rerun30", "heldout", "p2p-allreduce-ll.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &doc))
	rows := doc["rows"].([]any)
	row := func(i int) map[string]any { return rows[i].(map[string]any) }
	row(0)["wrong"] = 3      // ours wrong
	row(1)["nccl_wrong"] = 2 // NCCL's wrong
	b := row(2)["best_us"].(float64)
	row(2)["reps_us"] = []float64{b, 2 * b, 2 * b, 2 * b, 2 * b} // ours disturbed: median twice the best
	row(3)["nchannels"] = 64                                     // more than the pair's plan, and NCCL's disturbed: counted as not as recorded
	row(3)["nccl_reps_us"], row(3)["nccl_best_us"] = []float64{1, 1, 1}, 0.5
	b = row(4)["best_us"].(float64)
	row(4)["wrong"] = 1 // wrong, and disturbed: counted as wrong
	row(4)["reps_us"] = []float64{b, 2 * b, 2 * b}
	data, err = json.Marshal(doc)
	require.NoError(t, err)
	edited := filepath.Join(dir, "edited.json")
	require.NoError(t, os.WriteFile(edited, data, 0o644))
	copyFile(t, h100Recording("rerun30", "heldout", "p2p-allgather-ll.json"), filepath.Join(dir, "p2p-allgather-ll.json"))

	// The valid columns, from the recordings: wrong elements, channels
	// past the plan (24 on the pair), median repetition over 1.25x best.
	type colKey struct {
		file string
		idx  int64
		col  string
	}
	invalid := map[colKey]string{}
	var want hwcmpLeftOut
	for _, f := range []string{edited, filepath.Join(dir, "p2p-allgather-ll.json")} {
		var rec struct {
			Rows []struct {
				NChannels int       `json:"nchannels"`
				Best      float64   `json:"best_us"`
				NCCLBest  float64   `json:"nccl_best_us"`
				Time      float64   `json:"time_us"`
				NCCLTime  float64   `json:"nccl_time_us"`
				Reps      []float64 `json:"reps_us"`
				NCCLReps  []float64 `json:"nccl_reps_us"`
				Wrong     int64     `json:"wrong"`
				NCCLWrong int64     `json:"nccl_wrong"`
			} `json:"rows"`
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &rec))
		for i, r := range rec.Rows {
			for _, c := range []struct {
				col      string
				wrong    int64
				us, best float64
				reps     []float64
				measured bool
			}{{"ours", r.Wrong, r.Time, r.Best, r.Reps, true}, {"nccl", r.NCCLWrong, r.NCCLTime, r.NCCLBest, r.NCCLReps, r.NCCLTime > 0}} {
				if !c.measured {
					continue
				}
				us := c.us
				if len(c.reps) > 0 {
					us = sim.Median(c.reps)
				}
				why := ""
				switch {
				case c.wrong > 0:
					why, want.Wrong = "wrong", want.Wrong+1
				case r.NChannels > 24:
					why, want.NotAsRecorded = "not as recorded", want.NotAsRecorded+1
				case c.best > 0 && us > 1.25*c.best:
					why, want.Disturbed = "disturbed", want.Disturbed+1
				}
				want.Columns++
				if why != "" {
					invalid[colKey{f, int64(i), c.col}] = why
				}
			}
		}
	}
	require.Equal(t, 3, want.Wrong)
	require.Equal(t, 2, want.NotAsRecorded)
	require.GreaterOrEqual(t, want.Disturbed, 1)

	out, stderr := runPooledJSON(t, dir, "--topo", h100Topo())
	require.Len(t, out.Files, 2, stderr)
	assert.Equal(t, hwcmp.ValidRule, out.Rule)
	assert.Equal(t, leftOutJSON{Columns: want.Columns, Total: want.Wrong + want.NotAsRecorded + want.Disturbed,
		Wrong: want.Wrong, NotAsRecorded: want.NotAsRecorded, Disturbed: want.Disturbed}, out.LeftOut)

	type key struct{ col, proto, bucket string }
	errs := map[key][]float64{}
	for _, f := range out.Files {
		require.Equal(t, "P2P", f.Transport)
		for _, c := range f.Calls {
			add := func(col, proto string, e float64) {
				if invalid[colKey{f.Input, c.Index, col}] != "" {
					return
				}
				size := "large"
				if c.Bytes < hwcmp.SmallBytes {
					size = "small"
				}
				for _, p := range []string{"all", proto} {
					for _, bk := range []string{"all", size} {
						errs[key{col, p, bk}] = append(errs[key{col, p, bk}], math.Abs(e))
					}
				}
			}
			add("ours", c.Proto, c.Err)
			if c.NCCLErr != nil {
				proto := c.Proto
				if c.TunerProto != "" {
					proto = c.TunerProto
				}
				add("nccl", proto, *c.NCCLErr)
			}
		}
	}
	require.NotEmpty(t, out.Pooled)
	seen := map[key]bool{}
	for _, s := range out.Pooled {
		k := key{s.Versus, s.Proto, s.Bucket}
		seen[k] = true
		e := errs[k]
		require.NotEmpty(t, e, "%+v: no valid rows", s)
		sort.Float64s(e)
		assert.Equal(t, len(e), s.N, "%+v", k)
		assert.InDelta(t, sim.Median(e), s.MedianAbs, 2e-6, "%+v", k)
		assert.InDelta(t, e[len(e)-1], s.MaxAbs, 2e-6, "%+v", k)
	}
	for k := range errs {
		if k.bucket == "all" {
			assert.True(t, seen[k], "no pooled statistic for %+v", k)
		}
	}

	// The text output states the rule and what it left out.
	var so, se bytes.Buffer
	require.NoError(t, runCompare([]string{dir, "--topo", h100Topo()}, &so, &se))
	assert.Contains(t, so.String(), "valid rows only: "+hwcmp.ValidRule)
	assert.Contains(t, so.String(), fmt.Sprintf("# left out: %d of %d rows' columns (3 with a wrong result, 2 not simulated as recorded, %d disturbed)",
		out.LeftOut.Total, want.Columns, want.Disturbed))
}

// hwcmpLeftOut counts the left-out columns as the test works them out.
type hwcmpLeftOut struct{ Columns, Wrong, NotAsRecorded, Disturbed int }

// TestCompareProgress: --progress reports the files compared on stderr,
// as "compare: file I/N NAME"; the output on stdout is the same as
// without it, and without it (stderr no terminal) nothing is reported.
func TestCompareProgress(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"p2p-allreduce-ll.json", "p2p-allgather-ll.json"} {
		copyFile(t, h100Recording("rerun30", "heldout", name), filepath.Join(dir, name))
	}
	var quietOut, quietErr, so, se bytes.Buffer
	require.NoError(t, runCompare([]string{dir, "--topo", h100Topo()}, &quietOut, &quietErr))
	assert.Empty(t, quietErr.String())
	require.NoError(t, runCompare([]string{dir, "--topo", h100Topo(), "--progress"}, &so, &se))
	assert.Equal(t, quietOut.String(), so.String())
	lines := strings.Split(strings.TrimSuffix(se.String(), "\n"), "\n")
	require.NotEmpty(t, lines)
	assert.Regexp(t, `^compare: file 1/2 p2p-allgather-ll\.json, \d+ s$`, lines[0])
	for _, l := range lines {
		assert.Regexp(t, `^compare: file [12]/2 p2p-all(gather|reduce)-ll\.json, \d+ s$`, l)
	}
	// --starts reports the start too.
	other := t.TempDir()
	copyFile(t, filepath.Join(dir, "p2p-allgather-ll.json"), filepath.Join(other, "p2p-allgather-ll.json"))
	se.Reset()
	so.Reset()
	require.NoError(t, runCompare([]string{"--starts", dir, other, "--topo", h100Topo(), "--progress"}, &so, &se))
	assert.Contains(t, se.String(), "compare: start 1/2, file 1/2 p2p-allgather-ll.json")
	assert.Contains(t, se.String(), "compare: start 2/2, file 1/1 p2p-allgather-ll.json")
	assert.NotContains(t, so.String(), "compare:")
}
