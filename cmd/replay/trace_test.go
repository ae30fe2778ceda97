package main

import (
	"bytes"
	"errors"
	"flag"
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
	require.Contains(t, s, "schema:      1.0")

	out.Reset()
	require.NoError(t, runTrace([]string{"cat", events, "--rank", "1"}, &out, &errb))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	require.True(t, strings.HasPrefix(lines[0], "comm\tcall\trank"))
	require.Equal(t, "0xab\t0\t1\t0\t0\t0\trecvReduceSend\tLL\t0\t8\t100\t180\thw", lines[1])

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
