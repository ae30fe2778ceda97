package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

func init() {
	// A rank started by the grid launcher: the test binary acts as run.
	if os.Getenv(envUID) != "" && len(os.Args) > 1 && os.Args[1] == "grid" {
		markRankStarted()
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// TestGridTPxDP launches 4 ranks on two "hosts" (shm inside, sockets
// between), split TP=2 x DP=2, both communicators of every rank running at
// once, every output checked; the trace has every call of every rank on
// both communicators, with communicator ranks, streams and (in its
// metadata) job ranks that agree with the split.
func TestGridTPxDP(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Setenv("TWINCCL_HOSTID", "split:2")
	out := filepath.Join(t.TempDir(), "job.parquet")
	code, stdout, stderr := runArgs("grid", "-np", "4", "--grid", "tp=2,dp=2", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "--trace", out)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	rows := 0
	for _, l := range strings.Split(stdout, "\n") {
		if f := strings.Fields(l); len(f) == 6 && !strings.HasPrefix(l, "#") {
			rows++
			require.Equal(t, "0", f[5], "wrong elements: %s", l)
		}
	}
	require.Equal(t, 3, rows, stdout) // 1K, 8K, 64K
	calls := readTraceCalls(t, out)
	require.Len(t, calls, 3*2*4*2) // sizes x calls x ranks x communicators
	rd, err := traces.OpenCallFile(out)
	require.NoError(t, err)
	list, err := traces.DecodeComms(rd.Info().Metadata[traces.MetaComms])
	rd.Close()
	require.NoError(t, err)
	require.Len(t, list, 4)
	members := map[uint64][]int32{}
	for _, c := range list {
		members[c.ID] = c.Ranks
	}
	comms := map[uint64]uint64{} // stream of each communicator
	for _, r := range calls {
		require.Contains(t, members, r.Comm)
		g := members[r.Comm][r.Rank]
		require.Equal(t, int32(2), r.NRanks)
		switch r.Stream {
		case 1: // TP: consecutive job ranks
			require.Equal(t, g%2, r.Rank)
		case 2: // DP: ranks 0,2 and 1,3
			require.Equal(t, g/2, r.Rank)
		default:
			t.Fatalf("stream %d", r.Stream)
		}
		comms[r.Comm] = r.Stream
		require.Greater(t, r.EndNs, r.StartNs)
	}
	require.Len(t, comms, 4)
}

func readTraceCalls(t *testing.T, path string) []traces.CallRow {
	t.Helper()
	r, err := traces.OpenCallFile(path)
	require.NoError(t, err)
	defer r.Close()
	var rows []traces.CallRow
	require.NoError(t, r.Scan(traces.Filter{}, func(b []traces.CallRow) error { rows = append(rows, b...); return nil }))
	return rows
}

func TestGridUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"grid", "-np", "4"}, "--grid tp=TP,dp=DP is required"},
		{[]string{"grid", "-np", "4", "--grid", "tp=2"}, `--grid "tp=2": want both tp and dp`},
		{[]string{"grid", "-np", "3", "--grid", "tp=2,dp=2"}, "-np 3: --grid tp=2,dp=2 needs 4 ranks"},
		{[]string{"grid", "-np", "4", "--grid", "tp=2,pp=2"}, `unknown dimension "pp"`},
		{[]string{"grid", "-np", "4", "--grid", "tp=2,dp=2", "--op", "sendrecv"}, `--op "sendrecv"`},
		{[]string{"grid", "-np", "4", "--grid", "tp=2,dp=2", "--trace", "x.json"}, "ending in .parquet"},
	} {
		code, _, stderr := runArgs(tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}
