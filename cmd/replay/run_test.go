package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

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
