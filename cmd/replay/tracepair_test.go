package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

// envTestReplay makes the test binary act as replay (a process the test
// can kill).
const envTestReplay = "TWINCCL_TEST_REPLAY"

func init() {
	if os.Getenv(envTestReplay) != "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// A pair aborted halfway leaves the previous pair and nothing else; a
// committed pair replaces both.
func TestTracePairBothOrNeither(t *testing.T) {
	dir := t.TempDir()
	calls, events := filepath.Join(dir, "p.calls.parquet"), filepath.Join(dir, "p.events.parquet")
	write := func(n int, commit bool) {
		p, err := createTracePair(calls, events, traces.WriterOptions{})
		require.NoError(t, err)
		for i := 0; i < n; i++ {
			require.NoError(t, p.Calls.Append(traces.CallRow{Call: int64(i), NRanks: 1, Op: "AllReduce", Source: traces.SourceSim}))
			require.NoError(t, p.Events.Append(traces.EventRow{Call: int64(i), Primitive: "send", Source: traces.SourceSim}))
		}
		if commit {
			require.NoError(t, p.commit())
		}
		p.abort()
	}
	write(3, true)
	write(5, false)
	assert.Len(t, readCallRows(t, calls), 3, "an aborted pair replaced the calls")
	ev, err := traces.OpenEventFile(events)
	require.NoError(t, err, "an aborted pair broke the events file")
	ev.Close()
	write(4, true)
	assert.Len(t, readCallRows(t, calls), 4)
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 2, "temporary files left")
}

// Attack 10 (issue 51): replay sim --trace killed in the middle. Before,
// it left an empty calls file and an events file without a footer, the
// previous ones already gone; now the previous pair stays readable.
func TestAttackKilledSimKeepsPreviousTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	dir := t.TempDir()
	prefix := filepath.Join(dir, "t")
	var so, se bytes.Buffer
	require.NoError(t, runSim([]string{"--op", "allreduce", "--minbytes", "1K", "--maxbytes", "4K", "--trace", prefix}, &so, &se))
	before := readCallRows(t, prefix+".calls.parquet")
	self, err := os.Executable()
	require.NoError(t, err)
	// 64 hosts: seconds of simulation, so the kill finds it writing.
	c := exec.Command(self, "sim", "--op", "allreduce", "--nodes", "64", "--mode", "accurate", "--minbytes", "8", "--maxbytes", "4G", "--trace", prefix)
	c.Env = append(os.Environ(), envTestReplay+"=1")
	require.NoError(t, c.Start())
	exited := make(chan error, 1)
	go func() { exited <- c.Wait() }()
	// Kill it once it is writing.
	require.Eventually(t, func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, ".t.*.tmp*"))
		return len(m) == 2
	}, 10*time.Second, 5*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-exited:
		t.Fatalf("the run ended before it was killed (%v): make it longer", err)
	default:
	}
	require.NoError(t, c.Process.Kill())
	<-exited
	assert.Equal(t, before, readCallRows(t, prefix+".calls.parquet"), "the previous call trace changed")
	ev, err := traces.OpenEventFile(prefix + ".events.parquet")
	require.NoError(t, err, "the previous event trace is broken")
	ev.Close()
}
