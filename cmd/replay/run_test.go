package main

import (
	"bytes"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/internal/tracetest"
	"github.com/twinccl/twinccl/traces"
)

// readCallRows reads every row of a call trace.
func readCallRows(t *testing.T, path string) []traces.CallRow {
	t.Helper()
	r, err := traces.OpenCallFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rows []traces.CallRow
	if err := r.Scan(traces.Filter{}, func(b []traces.CallRow) error { rows = append(rows, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestReplayRunReproducesSim replays the call trace "replay sim" wrote
// (calls back to back on one stream) and expects the same per-call times,
// and an event trace with the slices of every call.
func TestReplayRunReproducesSim(t *testing.T) {
	dir := t.TempDir()
	var so, se bytes.Buffer
	if err := runSim([]string{"--op", "allreduce,allgather,broadcast", "--minbytes", "1K", "--maxbytes", "4M", "--factor", "64",
		"--trace", filepath.Join(dir, "rec")}, &so, &se); err != nil {
		t.Fatalf("sim: %v\n%s", err, se.String())
	}
	so.Reset()
	out := filepath.Join(dir, "pred")
	if err := runReplayRun([]string{filepath.Join(dir, "rec.calls.parquet"), "--out", out}, &so, &se); err != nil {
		t.Fatalf("run: %v\n%s", err, se.String())
	}
	if !strings.Contains(so.String(), "predicted makespan") {
		t.Errorf("summary lacks the makespan:\n%s", so.String())
	}
	// The simulator's own trace replayed: its kernels take what they took.
	recK, predK := summaryUs(t, so.String(), "recorded kernels"), summaryUs(t, so.String(), "predicted kernels")
	if recK <= 0 || math.Abs(recK-predK) > 1e-3*recK+0.02 {
		t.Errorf("recorded kernels %.2f us, predicted %.2f: want the same, positive\n%s", recK, predK, so.String())
	}
	if se.Len() != 0 {
		t.Errorf("stderr not empty (no progress bar off a terminal): %q", se.String())
	}
	rec := readCallRows(t, filepath.Join(dir, "rec.calls.parquet"))
	pred := readCallRows(t, out+".calls.parquet")
	if len(rec) != len(pred) || len(rec) == 0 {
		t.Fatalf("%d recorded rows, %d predicted", len(rec), len(pred))
	}
	type key struct {
		call int64
		rank int32
	}
	want := map[key]traces.CallRow{}
	for _, r := range rec {
		want[key{r.Call, r.Rank}] = r
	}
	for _, p := range pred {
		r, ok := want[key{p.Call, p.Rank}]
		if !ok {
			t.Fatalf("predicted call %d rank %d not in the trace", p.Call, p.Rank)
		}
		if p.Op != r.Op || p.Count != r.Count || p.Algorithm != r.Algorithm || p.Protocol != r.Protocol || p.Source != traces.SourceSim {
			t.Errorf("call %d rank %d: predicted %+v for recorded %+v", p.Call, p.Rank, p, r)
		}
		// Back to back on one stream: the replay ends each call where the
		// sweep did (within float rounding of the nanosecond clock).
		if d := p.EndNs - r.EndNs; d < -2 || d > 2 {
			t.Errorf("call %d rank %d: ends at %d ns, recorded %d ns", p.Call, p.Rank, p.EndNs, r.EndNs)
		}
	}
	ev, err := traces.OpenEventFile(out + ".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Close()
	calls := map[int64]bool{}
	if err := ev.Scan(traces.Filter{}, func(b []traces.EventRow) error {
		for _, e := range b {
			calls[e.Call] = true
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(calls)*2 != len(rec) {
		t.Errorf("event trace covers %d calls, want %d", len(calls), len(rec)/2)
	}
}

// TestReplayRunErrors: ranks the topology lacks, missing files, usage.
func TestReplayRunErrors(t *testing.T) {
	dir := t.TempDir()
	var so, se bytes.Buffer
	if err := runSim([]string{"--nodes", "2", "--op", "allreduce", "--minbytes", "1K", "--maxbytes", "1K", "--trace", filepath.Join(dir, "four")}, &so, &se); err != nil {
		t.Fatal(err)
	}
	err := runReplayRun([]string{filepath.Join(dir, "four.calls.parquet"), "--out", filepath.Join(dir, "x")}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "rank") || !strings.Contains(err.Error(), "--nodes") {
		t.Errorf("4-rank trace on a 2-rank topology: %v", err)
	}
	if err := runReplayRun([]string{filepath.Join(dir, "four.calls.parquet"), "--nodes", "2", "--out", filepath.Join(dir, "y")}, &so, &se); err != nil {
		t.Errorf("4-rank trace with --nodes 2: %v", err)
	}
	for _, args := range [][]string{{}, {filepath.Join(dir, "none.parquet")}, {"a", "b"}, {filepath.Join(dir, "four.calls.parquet"), "--mode", "bogus"}} {
		if err := runReplayRun(args, &so, &se); err == nil {
			t.Errorf("run %v: no error", args)
		}
	}
}

// summaryUs is the time on the line of replay run's summary that starts
// with label ("predicted kernels"), -1 when there is none.
func summaryUs(t *testing.T, out, label string) float64 {
	t.Helper()
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, label); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			v, err := strconv.ParseFloat(f[0], 64)
			if err != nil {
				t.Fatalf("%q: %v", l, err)
			}
			return v
		}
	}
	return -1
}

// TestReplayRunRecordedSettings: a trace is replayed under the NCCL
// settings it was recorded under (its metadata), which the summary names
// and the predicted trace carries; --env overrides them. A 64 MiB
// AllReduce on the two H200 recorded with NCCL_P2P_DISABLE=1 runs over
// SHM, far slower than over NVLink.
func TestReplayRunRecordedSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, meta map[string]string) string {
		t.Helper()
		return tracetest.WriteCalls(t, filepath.Join(dir, name), meta, tracetest.EveryRank(2, traces.CallRow{Job: "t", Comm: 1, Call: 0,
			Op: "AllReduce", Count: 16 << 20, Datatype: "float32", RedOp: "sum", Root: -1,
			StartNs: 1000, EndNs: 2_000_000, Source: traces.SourceHW})...)
	}
	run := func(trace string, args ...string) (string, float64) {
		t.Helper()
		var so, se bytes.Buffer
		out := strings.TrimSuffix(trace, ".parquet") + ".pred"
		if err := runReplayRun(append([]string{trace, "--out", out}, args...), &so, &se); err != nil {
			t.Fatalf("%s: %v\n%s", trace, err, se.String())
		}
		return so.String(), summaryUs(t, so.String(), "predicted kernels")
	}
	// NVLS off as recorded: with P2P disabled NCCL's tuner would move the
	// AllReduce to NVLS, which SHM does not slow down.
	shm := write("shm.parquet", map[string]string{traces.MetaNCCLEnv: `{"NCCL_NVLS_ENABLE":"0","NCCL_P2P_DISABLE":"1"}`})
	outSHM, usSHM := run(shm)
	r, err := traces.OpenCallFile(filepath.Join(dir, "shm.pred.calls.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if v := r.Info().Metadata[traces.MetaNCCLEnv]; !strings.Contains(v, `"NCCL_P2P_DISABLE":"1"`) {
		t.Errorf("predicted trace's settings %q, want the recorded ones", v)
	}
	r.Close()
	_, usNVL := run(write("nvl.parquet", nil))
	_, usBack := run(shm, "--env", "NCCL_P2P_DISABLE=0")
	if !strings.Contains(outSHM, "settings NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1") {
		t.Errorf("summary does not name the recorded setting:\n%s", outSHM)
	}
	if usNVL <= 0 || usSHM < 2*usNVL {
		t.Errorf("64 MiB AllReduce: %.1f us recorded with NCCL_P2P_DISABLE=1, %.1f without: want SHM far slower", usSHM, usNVL)
	}
	if usBack != usNVL {
		t.Errorf("--env NCCL_P2P_DISABLE=0 over the recorded setting: %.1f us, want NVLink's %.1f", usBack, usNVL)
	}
}

// TestReplayRunHostGaps: a rank's calls are issued as long after its first
// as the trace recorded (the host's time between them), unless
// --host-gaps=false runs them back to back. Two 1 KiB AllReduces enqueued
// 1 ms apart span over 1 ms replayed, and a few microseconds back to back.
func TestReplayRunHostGaps(t *testing.T) {
	var rows []traces.CallRow
	for call := int64(0); call < 2; call++ {
		for r := int32(0); r < 2; r++ {
			enq := 5_000_000_000 + call*1_000_000 + int64(r)*1000 // rank clocks apart; 1 ms between calls
			rows = append(rows, traces.CallRow{Job: "t", Comm: 1, Call: call, Rank: r, NRanks: 2, Op: "AllReduce",
				Count: 256, Datatype: "float32", RedOp: "sum", Root: -1, EnqueueNs: enq,
				StartNs: enq + 500, EndNs: enq + 20_500, Source: traces.SourceHW})
		}
	}
	p := tracetest.WriteCalls(t, filepath.Join(t.TempDir(), "gaps.parquet"), nil, rows...)
	makespan := func(args ...string) float64 {
		t.Helper()
		var so, se bytes.Buffer
		if err := runReplayRun(append([]string{p, "--out", strings.TrimSuffix(p, ".parquet")}, args...), &so, &se); err != nil {
			t.Fatalf("%v\n%s", err, se.String())
		}
		return summaryUs(t, so.String(), "predicted makespan")
	}
	if got := makespan(); got < 1000 || got > 1100 {
		t.Errorf("calls recorded 1 ms apart: predicted makespan %.2f us, want 1000-1100", got)
	}
	if got := makespan("--host-gaps=false"); got <= 0 || got > 100 {
		t.Errorf("back to back: predicted makespan %.2f us, want two short calls", got)
	}
}
