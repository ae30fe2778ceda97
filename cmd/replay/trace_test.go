package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twinccl/twinccl/traces"
)

func writeTestTraces(t *testing.T) (callsPath, eventsPath string) {
	dir := t.TempDir()
	callsPath, eventsPath = filepath.Join(dir, "calls.parquet"), filepath.Join(dir, "events.parquet")
	cw, err := traces.CreateCallFile(callsPath, traces.WriterOptions{RowGroupRows: 2})
	require.NoError(t, err)
	ew, err := traces.CreateEventFile(eventsPath, traces.WriterOptions{RowGroupRows: 4})
	require.NoError(t, err)
	for r := int32(0); r < 2; r++ {
		require.NoError(t, cw.Append(traces.CallRow{Comm: 0xab, Call: 0, Rank: r, NRanks: 2, Op: "AllReduce", Algorithm: "Ring",
			Protocol: "LL", Channels: 1, Count: 2, Datatype: "float32", RedOp: "sum", Root: -1, StartNs: 100, EndNs: 900, Source: "hw", Host: "vm"}))
		for step := int64(0); step < 3; step++ {
			require.NoError(t, ew.Append(traces.EventRow{Comm: 0xab, Call: 0, Rank: r, Channel: 0, SendPeer: 1 - r, RecvPeer: 1 - r,
				Primitive: "recvReduceSend", Protocol: "LL", Step: step, Bytes: 8, StartNs: 100 + step*100, EndNs: 180 + step*100, Source: "hw"}))
		}
	}
	require.NoError(t, cw.Close())
	require.NoError(t, ew.Close())
	return callsPath, eventsPath
}

func TestTraceCommands(t *testing.T) {
	calls, events := writeTestTraces(t)
	var out, errb bytes.Buffer
	require.NoError(t, runTrace([]string{"info", calls, events}, &out, &errb))
	s := out.String()
	require.Contains(t, s, "kind:        call trace")
	require.Contains(t, s, "kind:        event trace")
	require.Contains(t, s, "rows:        6 in 2 row group(s)")
	require.Contains(t, s, "schema:      "+traces.CurrentVersion.String())

	out.Reset()
	require.NoError(t, runTrace([]string{"cat", events, "--rank", "1"}, &out, &errb))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	require.True(t, strings.HasPrefix(lines[0], "comm\tcall\trank"))
	require.Equal(t, "0xab\t0\t1\t0\t0\t0\trecvReduceSend\tLL\t0\t8\t100\t180\thw\t0", lines[1])

	out.Reset()
	require.NoError(t, runTrace([]string{"cat", "--limit", "1", "--call", "0xab:0", calls}, &out, &errb))
	require.Len(t, strings.Split(strings.TrimSpace(out.String()), "\n"), 2)

	out.Reset()
	require.NoError(t, runTrace([]string{"export", calls, events, "--format", "summary"}, &out, &errb))
	require.Contains(t, out.String(), "AllReduce")
	require.Contains(t, out.String(), "recvReduceSend")

	chrome := filepath.Join(t.TempDir(), "t.json")
	require.NoError(t, runTrace([]string{"export", events, calls, "-o", chrome}, &out, &errb))
	data, err := os.ReadFile(chrome)
	require.NoError(t, err)
	require.Contains(t, string(data), `"ph":"s"`)

	out.Reset()
	require.NoError(t, runTrace([]string{"export", events, "--format", "pprof"}, &out, &errb))
	require.True(t, bytes.HasPrefix(out.Bytes(), []byte{0x1f, 0x8b}), "gzipped profile")

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"frob"}, "unknown trace subcommand"},
		{[]string{"info"}, "needs at least one FILE"},
		{[]string{"cat", calls, events}, "exactly one FILE"},
		{[]string{"cat", calls, "--call", "zz"}, "want COMM:CALL"},
		{[]string{"export", calls, "--format", "svg"}, "want chrome, pprof or summary"},
		{[]string{"export", calls, "--format", "pprof"}, "needs an event trace"},
		{[]string{"export", calls, calls}, "two call traces"},
	} {
		err := runTrace(c.args, &out, &errb)
		require.ErrorIs(t, err, errUsage, "%v", c.args)
		require.ErrorContains(t, err, c.want)
	}
	require.True(t, errors.Is(runTrace([]string{"info", "-h"}, &out, &errb), flag.ErrHelp))

	bad := filepath.Join(t.TempDir(), "bad.parquet")
	require.NoError(t, os.WriteFile(bad, []byte("PAR1 not really"), 0o644))
	err = runTrace([]string{"info", bad}, &out, &errb)
	require.ErrorContains(t, err, bad)
	require.NotErrorIs(t, err, errUsage)
}

// TestTraceMerge joins the two ranks' trace parts of a split-host run:
// every call and event row of both parts ends in the merged files, which
// replay compare then takes; bad invocations are usage errors naming the
// problem, and a failed merge leaves no output.
func TestTraceMerge(t *testing.T) {
	src := filepath.Join("..", "..", "testdata", "hw", "h200x2")
	dir := t.TempDir()
	// Two parts: rank 0's and rank 1's rows of a recorded trace.
	parts := make([]string, 2)
	for r := range parts {
		parts[r] = filepath.Join(dir, fmt.Sprintf("p.rank%d.parquet", r))
		filter := traces.Filter{}.Rank(int32(r))
		split(t, filepath.Join(src, "p2p-allreduce.parquet"), parts[r], filter, false)
		split(t, filepath.Join(src, "p2p-allreduce.events.parquet"), strings.TrimSuffix(parts[r], ".parquet")+".events.parquet", filter, true)
	}
	out := filepath.Join(dir, "merged.parquet")
	var so, se bytes.Buffer
	if err := runTrace(append([]string{"merge", "-o", out}, parts...), &so, &se); err != nil {
		t.Fatalf("%v\n%s", err, se.String())
	}
	for _, pair := range [][2]string{
		{filepath.Join(src, "p2p-allreduce.parquet"), out},
		{filepath.Join(src, "p2p-allreduce.events.parquet"), strings.TrimSuffix(out, ".parquet") + ".events.parquet"},
	} {
		if a, b := rowCount(t, pair[0]), rowCount(t, pair[1]); a != b || a == 0 {
			t.Errorf("%s has %d rows, merged %s %d", pair[0], a, pair[1], b)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"merge", parts[0]}, "-o OUT.parquet"},
		{[]string{"merge", "-o", filepath.Join(dir, "x.events.parquet"), parts[0]}, "-o OUT.parquet"},
		{[]string{"merge", "-o", filepath.Join(dir, "x.parquet")}, "call traces to merge"},
		{[]string{"merge", "-o", filepath.Join(dir, "x.parquet"), strings.TrimSuffix(parts[0], ".parquet") + ".events.parquet"}, "not a call trace"},
		{[]string{"merge", "-o", parts[0], parts[0], parts[1]}, "both a part and the output"},
	} {
		err := runTrace(tc.args, &so, &se)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a usage error with %q", tc.args, err, tc.want)
		}
	}
	// A part without its event trace while the other has one: refused,
	// nothing written.
	os.Remove(strings.TrimSuffix(parts[1], ".parquet") + ".events.parquet")
	lone := filepath.Join(dir, "lone.parquet")
	if err := runTrace(append([]string{"merge", "-o", lone}, parts...), &so, &se); err == nil || !strings.Contains(err.Error(), "1 of 2 parts") {
		t.Errorf("one part without events: %v", err)
	}
	if _, err := os.Stat(lone); err == nil {
		t.Errorf("%s written by a refused merge", lone)
	}
}

// split writes the rows of the trace at src that filter selects to dst.
func split(t *testing.T, src, dst string, filter traces.Filter, events bool) {
	t.Helper()
	f, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if events {
		rd, err := traces.OpenEventFile(src)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		w, err := traces.NewEventWriter(f, traces.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := rd.Scan(filter, func(rows []traces.EventRow) error { return w.Append(rows...) }); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return
	}
	rd, err := traces.OpenCallFile(src)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	w, err := traces.NewCallWriter(f, traces.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rd.Scan(filter, func(rows []traces.CallRow) error { return w.Append(rows...) }); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// rowCount is the number of rows of a trace file.
func rowCount(t *testing.T, path string) int64 {
	t.Helper()
	kind, err := traces.ReadKind(path)
	if err != nil {
		t.Fatal(err)
	}
	if kind == traces.KindCall {
		rd, err := traces.OpenCallFile(path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		return rd.Info().Rows
	}
	rd, err := traces.OpenEventFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	return rd.Info().Rows
}
