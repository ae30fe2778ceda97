package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/traces"
)

func TestSimTableAndJSON(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "rows.json")
	var so, se bytes.Buffer
	err := runSim([]string{"--op", "allreduce,allgather", "--minbytes", "8", "--maxbytes", "64M", "--factor", "8", "--json", out}, &so, &se)
	if err != nil {
		t.Fatalf("runSim: %v\n%s", err, se.String())
	}
	text := so.String()
	for _, want := range []string{"# allreduce", "# allgather", "busbw(GB/s)", "Ring", "Simple", "LL "} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(data, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 16 {
		t.Fatalf("got %d rows, want 16 (8 sizes x 2 ops)", len(rows))
	}
	for _, k := range []string{"op", "bytes", "algo", "proto", "nchannels", "time_us", "algbw_GBps", "busbw_GBps"} {
		if _, ok := rows[0][k]; !ok {
			t.Errorf("JSON row lacks %q: %v", k, rows[0])
		}
	}
	// Deterministic: a second run writes the same bytes.
	out2 := filepath.Join(dir, "rows2.json")
	so.Reset()
	if err := runSim([]string{"--op", "allreduce,allgather", "--minbytes", "8", "--maxbytes", "64M", "--factor", "8", "--json", out2}, &so, &se); err != nil {
		t.Fatal(err)
	}
	data2, _ := os.ReadFile(out2)
	if !bytes.Equal(data, data2) {
		t.Error("two identical runs wrote different JSON")
	}
}

func TestSimForcedAndErrors(t *testing.T) {
	var so, se bytes.Buffer
	if err := runSim([]string{"--op", "allreduce", "--minbytes", "1M", "--maxbytes", "1M", "--algo", "tree", "--proto", "ll128", "--nchannels", "2"}, &so, &se); err != nil {
		t.Fatalf("forced tree/LL128: %v", err)
	}
	if !strings.Contains(so.String(), "Tree") || !strings.Contains(so.String(), "LL128") {
		t.Errorf("forced choice not in table:\n%s", so.String())
	}
	bad := [][]string{
		{"--op", "alltoall,bogus"},
		{"--op", "nonsense"},
		{"--minbytes", "10", "--maxbytes", "5"},
		{"--factor", "1"},
		{"--proto", "fast"},
		{"--dtype", "float7"},
		{"--root", "9"},
		{"--nchannels", "99", "--op", "allreduce", "--maxbytes", "8"},
		{"--calib", "/nonexistent/calib.json"},
		{"--topo", "/nonexistent/topo.xml"},
		{"--eager", "--loop", "0"},
	}
	for _, args := range bad {
		err := runSim(args, &so, &se)
		if err == nil {
			t.Errorf("runSim %v: no error", args)
			continue
		}
		if strings.TrimSpace(err.Error()) == "" {
			t.Errorf("runSim %v: empty error", args)
		}
	}
	if err := runSim([]string{"--op", "sendrecv,"}, &so, &se); err != nil {
		t.Errorf("sendrecv: %v", err)
	}
	if err := runSim([]string{"--op", "gather"}, &so, &se); !errors.Is(err, errUsage) {
		t.Errorf("unknown op: want a usage error, got %v", err)
	}

	// --eager: an 8 B AllReduce costs the host's issue time of the
	// embedded calibration, a 64 MiB one what the graph-timed loop costs.
	timeOf := func(args ...string) (small, large float64) {
		t.Helper()
		var out bytes.Buffer
		if err := runSim(append([]string{"--op", "allreduce", "--minbytes", "8", "--maxbytes", "64M", "--factor", "8388608", "--json", "-"}, args...), &out, &se); err != nil {
			t.Fatalf("sim %v: %v", args, err)
		}
		var rows []struct {
			Bytes  int64   `json:"bytes"`
			TimeUs float64 `json:"time_us"`
		}
		if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
			t.Fatalf("sim %v: %d rows, %v\n%s", args, len(rows), err, out.String())
		}
		return rows[0].TimeUs, rows[1].TimeUs
	}
	gs, gl := timeOf()
	es, el := timeOf("--eager")
	if es != 8.1 || gs >= es || el != gl {
		t.Errorf("AllReduce 8 B: %.2f us in a graph, %.2f us eager (want 8.1); 64 MiB: %.2f and %.2f us (want equal)", gs, es, gl, el)
	}
}

func TestCalibrateErrors(t *testing.T) {
	var so, se bytes.Buffer
	if err := runCalibrate(nil, &so, &se); !errors.Is(err, errUsage) {
		t.Errorf("no --table: want usage error, got %v", err)
	}
	if err := runCalibrate([]string{"--loss", "median", "t.tsv"}, &so, &se); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--loss") {
		t.Errorf("--loss median: want a usage error naming --loss, got %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.tsv")
	os.WriteFile(bad, []byte("# x\nall_reduce 8\n"), 0o644)
	err := runCalibrate([]string{"--table", bad}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "bad.tsv:2") {
		t.Errorf("bad table: want an error naming bad.tsv:2, got %v", err)
	}
}

func TestCalibrateSmall(t *testing.T) {
	dir := t.TempDir()
	tab := filepath.Join(dir, "t.tsv")
	os.WriteFile(tab, []byte("all_reduce 8 5.65\nall_reduce 33554432 136.04\nbroadcast 8388608 36.34\n"), 0o644)
	out := filepath.Join(dir, "c.json")
	var so, se bytes.Buffer
	if err := runCalibrate([]string{"--table", tab, "--out", out, "--max-evals", "60", "--restarts", "1"}, &so, &se); err != nil {
		t.Fatalf("calibrate: %v\n%s", err, se.String())
	}
	if !strings.Contains(so.String(), "median |err|") {
		t.Errorf("no summary:\n%s", so.String())
	}
	var so2 bytes.Buffer
	if err := runSim([]string{"--calib", out, "--op", "allreduce", "--maxbytes", "1K"}, &so2, &se); err != nil {
		t.Fatalf("sim with the fitted calibration: %v", err)
	}
	// The loss the fit reached is in its report, and --evaluate of the
	// fitted file on the same table reads it again; the start (the
	// embedded calibration) has no lower one: the search keeps its best.
	fitted, err := sim.LoadCalib(out)
	if err != nil {
		t.Fatal(err)
	}
	if fitted.Fit == nil || fitted.Fit.LossKind != "squares" || !(fitted.Fit.Loss > 0) {
		t.Fatalf("fit report %+v: want the squares loss it reached", fitted.Fit)
	}
	evalLoss := func(args ...string) float64 {
		t.Helper()
		var o bytes.Buffer
		if err := runCalibrate(append([]string{"--evaluate", "--table", tab}, args...), &o, &se); err != nil {
			t.Fatalf("calibrate --evaluate %v: %v", args, err)
		}
		var l float64
		for _, line := range strings.Split(o.String(), "\n") {
			if v, ok := strings.CutPrefix(line, "# loss (squares) over the fitted tables: "); ok {
				if l, err = strconv.ParseFloat(v, 64); err != nil {
					t.Fatal(err)
				}
				return l
			}
		}
		t.Fatalf("calibrate --evaluate %v printed no loss:\n%s", args, o.String())
		return 0
	}
	if got := evalLoss("--start", out); math.Abs(got-fitted.Fit.Loss) > 1e-6 {
		t.Errorf("--evaluate of the fitted calibration: loss %.6f, its report %.6f", got, fitted.Fit.Loss)
	}
	start := evalLoss()
	if start < fitted.Fit.Loss-1e-6 {
		t.Errorf("the start's loss %.6f is below the fit's %.6f", start, fitted.Fit.Loss)
	}
	// --set changes the start: the fitted file's constants set one by one
	// on the embedded start give the fitted file's loss, and a constant the
	// format does not know is a usage error naming it.
	var sets []string
	for k, v := range map[string]float64{"simple.copy_GBps": fitted.Simple.CopyGBps, "simple.op_overhead_us": fitted.Simple.OpOverheadUs,
		"simple.slice_overhead_us": fitted.Simple.SliceOverheadUs, "simple.start_us": fitted.Simple.StartUs, "launch_us": fitted.LaunchUs} {
		sets = append(sets, "--set", fmt.Sprintf("%s=%v", k, v))
	}
	if got := evalLoss(sets...); got == start {
		t.Errorf("--set %v: loss %.6f, the start's: the settings did nothing", sets, got)
	}
	if err := runCalibrate([]string{"--evaluate", "--table", tab, "--set", "simple.copy_gbps=3"}, &so, &se); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "copy_gbps") {
		t.Errorf("--set simple.copy_gbps=3: want a usage error naming it, got %v", err)
	}
	// Further starting points never end above the first alone, and give
	// the same calibration on every run.
	multi := func(name string) *sim.Calib {
		t.Helper()
		o := filepath.Join(dir, name)
		if err := runCalibrate([]string{"--table", tab, "--out", o, "--max-evals", "60", "--restarts", "1", "--starts", "2"}, &so, &se); err != nil {
			t.Fatalf("calibrate --starts 2: %v\n%s", err, se.String())
		}
		c, err := sim.LoadCalib(o)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	m1, m2 := multi("m1.json"), multi("m2.json")
	if m1.Fit.Loss > fitted.Fit.Loss+1e-12 {
		t.Errorf("--starts 2: loss %.6f, above the single start's %.6f", m1.Fit.Loss, fitted.Fit.Loss)
	}
	if m1.Fit.Loss != m2.Fit.Loss || !reflect.DeepEqual(m1.Simple, m2.Simple) || m1.Fit.Evals != m2.Fit.Evals {
		t.Errorf("--starts 2 twice: losses %.9f and %.9f, evaluations %d and %d: want the same fit", m1.Fit.Loss, m2.Fit.Loss, m1.Fit.Evals, m2.Fit.Evals)
	}
	if m1.Fit.Evals <= fitted.Fit.Evals {
		t.Errorf("--starts 2: %d evaluations, the single start %d: want the further searches counted", m1.Fit.Evals, fitted.Fit.Evals)
	}
	if err := runCalibrate([]string{"--table", tab, "--starts", "-1"}, &so, &se); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--starts") {
		t.Errorf("--starts -1: want a usage error naming --starts, got %v", err)
	}

	// A row whose mean is far above its best repetition is marked, the
	// others are not.
	os.WriteFile(tab, []byte("all_reduce 8 9.00 5.60\nall_reduce 33554432 136.04 135.90\n"), 0o644)
	var so3 bytes.Buffer
	if err := runCalibrate([]string{"--evaluate", tab}, &so3, &se); err != nil {
		t.Fatalf("calibrate --evaluate: %v", err)
	}
	var marked []string
	for _, line := range strings.Split(so3.String(), "\n") {
		if strings.Contains(line, "disturbed") {
			marked = append(marked, line)
		}
	}
	if len(marked) != 1 || !strings.Contains(marked[0], " 8 ") || !strings.Contains(marked[0], "61% above the best repetition, 5.60 us") {
		t.Errorf("disturbed rows marked: %q, want the 8 B row only (61%% above its best, 5.60 us)\n%s", marked, so3.String())
	}
}

// TestSimTraceOutputs: --trace, --timeline and --profile write readable
// parquet traces, a Chrome JSON timeline and a gzipped pprof profile.
func TestSimTraceOutputs(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "run")
	tl, pf := filepath.Join(dir, "t.json"), filepath.Join(dir, "p.pb.gz")
	var so, se bytes.Buffer
	if err := runSim([]string{"--op", "allreduce,alltoall", "--minbytes", "1M", "--maxbytes", "4M",
		"--trace", prefix + ".parquet", "--timeline", tl, "--profile", pf}, &so, &se); err != nil {
		t.Fatalf("sim: %v\n%s", err, se.String())
	}
	calls, err := traces.OpenCallFile(prefix + ".calls.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	events, err := traces.OpenEventFile(prefix + ".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	if n := calls.Info().Rows; n != 4*2 { // 2 sizes x 2 ops x 2 ranks
		t.Errorf("call trace has %d rows, want 8", n)
	}
	if events.Info().Rows == 0 {
		t.Error("empty event trace")
	}
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	data, err := os.ReadFile(tl)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &doc); err != nil || len(doc.TraceEvents) == 0 {
		t.Errorf("timeline is not a Chrome trace: %v (%d events)", err, len(doc.TraceEvents))
	}
	if b, err := os.ReadFile(pf); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile is not gzipped: %v", err)
	}
	if !strings.Contains(so.String(), "P2P") {
		t.Errorf("alltoall rows not marked P2P:\n%s", so.String())
	}
	err = runSim([]string{"--op", "allreduce", "--maxbytes", "8", "--trace", filepath.Join(dir, "missing", "x")}, &so, &se)
	if err == nil {
		t.Error("trace into a missing directory: no error")
	}
}

// TestSimFastMode: --fast folds a multi-host ring and predicts the same
// table as --mode accurate; a forced progress bar goes to stderr only.
func TestSimFastMode(t *testing.T) {
	dir := t.TempDir()
	var so, se bytes.Buffer
	args := []string{"--nodes", "4", "--op", "allreduce,reducescatter", "--algo", "ring", "--minbytes", "64K", "--maxbytes", "16M", "--factor", "16"}
	read := func(name string) []map[string]any {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(data, &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	if err := runSim(append(args, "--fast", "--json", filepath.Join(dir, "fast.json")), &so, &se); err != nil {
		t.Fatal(err)
	}
	if se.Len() != 0 {
		t.Errorf("stderr written without --progress: %q", se.String())
	}
	if err := runSim(append(args, "--mode", "accurate", "--json", filepath.Join(dir, "acc.json")), &so, &se); err != nil {
		t.Fatal(err)
	}
	fast, acc := read("fast.json"), read("acc.json")
	if len(fast) != len(acc) || len(fast) == 0 {
		t.Fatalf("%d fast rows, %d accurate", len(fast), len(acc))
	}
	for i := range fast {
		if fast[i]["folded"] != float64(4) || acc[i]["folded"] != nil {
			t.Errorf("row %d: folded %v (fast) %v (accurate)", i, fast[i]["folded"], acc[i]["folded"])
		}
		if f, a := fast[i]["time_us"].(float64), acc[i]["time_us"].(float64); f < a*0.98 || f > a*1.02 {
			t.Errorf("row %d: fast %.3f us, accurate %.3f us", i, f, a)
		}
	}
	for _, bad := range [][]string{{"--mode", "quick"}, {"--fast", "--mode", "accurate"}} {
		if err := runSim(append(args, bad...), &so, &se); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	se.Reset()
	if err := runSim([]string{"--op", "allreduce", "--minbytes", "1G", "--maxbytes", "1G", "--proto", "ll", "--progress"}, &so, &se); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(se.String(), "%") {
		t.Errorf("--progress drew nothing on stderr: %q", se.String())
	}
}

// TestCalibrateTableTopology: topo= in a table argument simulates that
// table on its own topology (here our 4-H200 dump), which must give the
// times "replay sim" gives there, not the default topology's; a missing
// file is an error naming it.
func TestCalibrateTableTopology(t *testing.T) {
	dir := t.TempDir()
	tab := filepath.Join(dir, "t.tsv")
	os.WriteFile(tab, []byte("# settings: NCCL_NVLS_ENABLE=0\nbroadcast 8388608 38.09\n"), 0o644)
	x4 := filepath.Join("..", "..", "testdata", "nccl-env", "h200x4", "topo-twinccl.xml")
	simUs := func(args []string) float64 {
		t.Helper()
		var so, se bytes.Buffer
		// Isolated calls (--loop 0): a Broadcast on four GPUs then pays
		// its chain's three hops, which tells the topologies apart.
		if err := runCalibrate(append([]string{"--evaluate", "--loop", "0"}, args...), &so, &se); err != nil {
			t.Fatalf("calibrate %v: %v\n%s", args, err, se.String())
		}
		for _, line := range strings.Split(so.String(), "\n") {
			f := strings.Fields(line)
			if len(f) >= 8 && f[1] == "Broadcast" && f[2] == "8388608" {
				v, err := strconv.ParseFloat(f[7], 64)
				if err != nil {
					t.Fatalf("row %q: %v", line, err)
				}
				return v
			}
		}
		t.Fatalf("no Broadcast row in:\n%s", so.String())
		return 0
	}
	onX4 := simUs([]string{tab + ",topo=" + x4})
	onDefault := simUs([]string{tab})
	var so, se bytes.Buffer
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	if err := runSim([]string{"--topo", x4, "--op", "broadcast", "--minbytes", "8M", "--maxbytes", "8M", "--loop", "0", "--json", "-"}, &so, &se); err != nil {
		t.Fatalf("sim: %v\n%s", err, se.String())
	}
	var rows []struct {
		TimeUs float64 `json:"time_us"`
	}
	if err := json.Unmarshal(so.Bytes(), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("sim --json: %v (%d rows)\n%s", err, len(rows), so.String())
	}
	if math.Abs(onX4-rows[0].TimeUs) > 0.01 {
		t.Errorf("topo=%s: calibrate simulated %.2f us, replay sim --topo %.2f us", x4, onX4, rows[0].TimeUs)
	}
	if math.Abs(onX4-onDefault) < 1 {
		t.Errorf("topo= made no difference: %.2f us on 4 GPUs, %.2f us on the default 2", onX4, onDefault)
	}
	missing := filepath.Join(dir, "nope.xml")
	err := runCalibrate([]string{"--evaluate", tab + ",topo=" + missing}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "nope.xml") {
		t.Errorf("missing topo=: want an error naming nope.xml, got %v", err)
	}
}

// TestCalibFlagHelpNamesEveryEmbedded: the --calib help lists every
// calibration built into the binary, so a new one cannot go unmentioned.
func TestCalibFlagHelpNamesEveryEmbedded(t *testing.T) {
	names := sim.EmbeddedCalibNames()
	if len(names) == 0 {
		t.Fatal("no embedded calibrations")
	}
	for _, n := range names {
		if !strings.Contains(calibFlagHelp, n) {
			t.Errorf("--calib help does not name the embedded %s: %q", n, calibFlagHelp)
		}
	}
}
