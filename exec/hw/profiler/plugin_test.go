package profiler_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/profiler"
	"github.com/twinccl/twinccl/traces"
)

// The plugin and fakenccl (testdata/fakenccl.c, NCCL's side of the ABI)
// are built once per test binary.
var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// EnvTestBin names a directory holding the plugin, fakenccl and realnccl
// built beforehand (on a machine without Go or a C compiler, e.g. a GPU
// machine: the test binary from "go test -c" then uses them):
//
//	make plugins
//	cc -O2 -Iexec/hw/profiler/plugin -o bin/fakenccl exec/hw/profiler/testdata/fakenccl.c -ldl -lpthread
//	cc -O2 -o bin/realnccl exec/hw/profiler/testdata/realnccl.c -ldl
const envTestBin = "TWINCCL_PROFILER_TESTBIN"

// built returns the plugin and fakenccl, building them the first time;
// the test is skipped where there is no C compiler (the plugin is C ABI).
func built(t testing.TB) (plugin, driver string) {
	t.Helper()
	if dir := os.Getenv(envTestBin); dir != "" {
		return filepath.Join(dir, "libnccl-profiler-twinccl.so"), filepath.Join(dir, "fakenccl")
	}
	for _, tool := range []string{"go", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("not supported: no %s to build the plugin and its NCCL stand-in", tool)
		}
	}
	buildOnce.Do(func() {
		if buildDir, buildErr = os.MkdirTemp("", "twinccl-profiler-test"); buildErr != nil {
			return
		}
		so := filepath.Join(buildDir, "libnccl-profiler-twinccl.so")
		steps := [][]string{
			{"go", "build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-z,nodelete", "-o", so, "./plugin"},
			{"cc", "-O2", "-Wall", "-Werror", "-Iplugin", "-o", filepath.Join(buildDir, "fakenccl"), "testdata/fakenccl.c", "-ldl", "-lpthread"},
		}
		for _, s := range steps {
			cmd := exec.Command(s[0], s[1:]...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("%s: %v\n%s", strings.Join(s, " "), err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	return filepath.Join(buildDir, "libnccl-profiler-twinccl.so"), filepath.Join(buildDir, "fakenccl")
}

// wantCall is one CALL line of fakenccl: a call it made and what the
// trace must say about it.
type wantCall struct {
	comm           int
	kept           bool
	hash           uint64
	rank, nranks   int32
	op             string
	count          int64
	dtype          string
	root           int32
	algo, proto    string
	nch            int32
	stream         uint64
	t0, t1, gpuDur int64
}

type driverRun struct {
	api       string
	inits     []string
	calls     []wantCall
	logs      []string // "LEVEL message"
	finalizes []string
	stderr    string
}

// runDriver runs fakenccl as rank with env (added to a clean copy of ours
// without TWINCCL_PROFILER_* and NCCL_* variables).
func runDriver(t *testing.T, rank int, env []string, args ...string) driverRun {
	t.Helper()
	plugin, driver := built(t)
	cmd := exec.Command(driver, append([]string{plugin, strconv.Itoa(rank)}, args...)...)
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "TWINCCL_PROFILER_") || strings.HasPrefix(k, "NCCL_") || k == "RANK" ||
			k == "OMPI_COMM_WORLD_RANK" || k == "PMIX_RANK" || k == "SLURM_PROCID" || k == "SLURM_JOB_ID" {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "fakenccl: %s", stderr.String())
	var r driverRun
	r.stderr = stderr.String()
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		kind, rest, _ := strings.Cut(sc.Text(), " ")
		switch kind {
		case "API":
			r.api = rest
		case "INIT":
			r.inits = append(r.inits, rest)
		case "LOG":
			r.logs = append(r.logs, rest)
		case "FINALIZE":
			r.finalizes = append(r.finalizes, rest)
		case "CALL":
			r.calls = append(r.calls, parseCall(t, rest))
		}
	}
	return r
}

func parseCall(t *testing.T, s string) wantCall {
	f := strings.Fields(s)
	require.Len(t, f, 16, s)
	n := func(i int) int64 {
		v, err := strconv.ParseInt(f[i], 0, 64)
		require.NoError(t, err, s)
		return v
	}
	u := func(i int) uint64 {
		v, err := strconv.ParseUint(f[i], 0, 64)
		require.NoError(t, err, s)
		return v
	}
	dash := func(x string) string { return strings.TrimPrefix(x, "-") }
	return wantCall{comm: int(n(0)), kept: n(1) == 1, hash: u(2), rank: int32(n(3)), nranks: int32(n(4)), op: f[5], count: n(6),
		dtype: f[7], root: int32(n(8)), algo: dash(f[9]), proto: dash(f[10]), nch: int32(n(11)), stream: u(12),
		t0: n(13), t1: n(14), gpuDur: n(15)}
}

// expectedCalls gives each CALL line its call number: collectives count
// from 0 per communicator; sends and receives as profiler.P2PCall.
func expectedCalls(t *testing.T, calls []wantCall) map[wantCall]int64 {
	next := map[uint64]int64{}
	p2p := map[[3]int64]int64{}
	out := map[wantCall]int64{}
	for _, c := range calls {
		switch c.op {
		case "Send", "Recv":
			s, d := c.rank, c.root
			if c.op == "Recv" {
				s, d = c.root, c.rank
			}
			k := [3]int64{int64(c.hash), int64(s), int64(d)}
			call, err := profiler.P2PCall(s, d, p2p[k])
			require.NoError(t, err)
			p2p[k]++
			out[c] = call
		default:
			out[c] = next[c.hash]
			next[c.hash]++
		}
	}
	return out
}

func readCalls(t *testing.T, path string) ([]traces.CallRow, traces.FileInfo) {
	t.Helper()
	r, err := traces.OpenCallFile(path)
	require.NoError(t, err)
	defer r.Close()
	var rows []traces.CallRow
	require.NoError(t, r.Scan(traces.Filter{}, func(b []traces.CallRow) error { rows = append(rows, b...); return nil }))
	return rows, r.Info()
}

func readEvents(t *testing.T, path string) []traces.EventRow {
	t.Helper()
	r, err := traces.OpenEventFile(path)
	require.NoError(t, err)
	defer r.Close()
	var rows []traces.EventRow
	require.NoError(t, r.Scan(traces.Filter{}, func(b []traces.EventRow) error { rows = append(rows, b...); return nil }))
	return rows
}

// onlyFile returns the one call trace in dir.
func onlyFile(t *testing.T, dir, glob string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, glob))
	require.NoError(t, err)
	require.Len(t, m, 1, "files %s in %s", glob, dir)
	return m[0]
}

// checkCalls checks every field of the rows against fakenccl's calls.
// gpuTimes: the kernel channels carried GPU times (their duration is kept
// exactly); else times are the host's.
func checkCalls(t *testing.T, rows []traces.CallRow, calls []wantCall, gpuTimes bool, redop string) {
	t.Helper()
	host, err := os.Hostname()
	require.NoError(t, err)
	want := expectedCalls(t, calls)
	byKey := map[[3]int64]traces.CallRow{}
	for _, r := range rows {
		k := [3]int64{int64(r.Comm), int64(r.Rank), r.Call}
		_, dup := byKey[k]
		require.False(t, dup, "call %d of communicator %#x on rank %d twice", r.Call, r.Comm, r.Rank)
		byKey[k] = r
	}
	kept := 0
	for _, c := range calls {
		r, ok := byKey[[3]int64{int64(c.hash), int64(c.rank), want[c]}]
		if !c.kept {
			continue
		}
		kept++
		require.True(t, ok, "no row for %+v", c)
		where := fmt.Sprintf("%s on %#x rank %d", c.op, c.hash, c.rank)
		assert.Equal(t, c.nranks, r.NRanks, where)
		assert.Equal(t, c.op, r.Op, where)
		assert.Equal(t, c.count, r.Count, where)
		assert.Equal(t, c.dtype, r.Datatype, where)
		if c.op == "AllReduce" || c.op == "AllGather" || c.op == "ReduceScatter" {
			assert.Equal(t, int32(-1), r.Root, where)
		} else {
			assert.Equal(t, c.root, r.Root, where)
		}
		assert.Equal(t, c.algo, r.Algorithm, where)
		assert.Equal(t, c.proto, r.Protocol, where)
		assert.Equal(t, c.nch, r.Channels, where)
		assert.Equal(t, c.stream, r.Stream, where)
		if c.op == "AllReduce" || c.op == "Reduce" || c.op == "ReduceScatter" {
			assert.Equal(t, redop, r.RedOp, where)
		} else {
			assert.Empty(t, r.RedOp, where)
		}
		assert.Equal(t, traces.SourceHW, r.Source, where)
		assert.Equal(t, host, r.Host, where)
		assert.LessOrEqual(t, c.t0, r.EnqueueNs, where)
		assert.LessOrEqual(t, r.EnqueueNs, r.StartNs, where)
		assert.LessOrEqual(t, r.StartNs, r.EndNs, where)
		assert.LessOrEqual(t, r.EndNs, c.t1, where)
		if gpuTimes {
			assert.Equal(t, c.gpuDur, r.EndNs-r.StartNs, "%s: the kernel's GPU duration is kept", where)
		}
	}
	assert.Len(t, rows, kept)
}

func TestPluginRecordsTwoRanksOfTwoCommunicators(t *testing.T) {
	dir := t.TempDir()
	runs := make([]driverRun, 2)
	for rank := range runs {
		runs[rank] = runDriver(t, rank, []string{
			"TWINCCL_PROFILER_DIR=" + dir, "TWINCCL_PROFILER_PROXY=1", fmt.Sprintf("RANK=%d", rank),
			"NCCL_NVLS_ENABLE=0", "TWINCCL_PROFILER_JOB=job7"})
		r := runs[rank]
		require.Equal(t, "v5 twinccl", r.api)
		require.Len(t, r.inits, 2)
		for _, in := range r.inits {
			assert.Contains(t, in, "rc=0 mask=1630 ctx=1", "coll, p2p, proxy op and step, kernel channel, coll and p2p API")
		}
		assert.Equal(t, []string{"0 rc=0", "1 rc=0"}, r.finalizes)
		assert.Empty(t, r.stderr)

		path := onlyFile(t, dir, fmt.Sprintf("rank%05d-*[0-9].parquet", rank))
		rows, info := readCalls(t, path)
		checkCalls(t, rows, r.calls, true, "")
		for _, row := range rows {
			assert.Equal(t, "job7", row.Job)
		}
		md := info.Metadata
		assert.Equal(t, profiler.ClockNote, md[profiler.MetaClock])
		assert.Equal(t, strconv.Itoa(rank), md[profiler.MetaGlobalRank])
		assert.Equal(t, "v5", md[profiler.MetaAPI])
		assert.Equal(t, "0", md[profiler.MetaDropped])
		assert.Equal(t, "0", md[profiler.MetaIncomplete])
		assert.JSONEq(t, `{"NCCL_NVLS_ENABLE":"0"}`, md[traces.MetaNCCLEnv])
		var comms []profiler.CommMeta
		require.NoError(t, json.Unmarshal([]byte(md[profiler.MetaComms]), &comms))
		assert.Equal(t, []profiler.CommMeta{
			{Comm: "0xa0000000a1", Name: "world", Rank: int32(rank), NRanks: 2, NNodes: 1, GlobalRank: int32(rank), Finalized: true},
			{Comm: fmt.Sprintf("0xb0000000b%d", rank), Name: "solo", Rank: 0, NRanks: 1, NNodes: 1, GlobalRank: int32(rank), Finalized: true},
		}, comms)

		checkSteps(t, readEvents(t, strings.TrimSuffix(path, ".parquet")+".events.parquet"), rows)
	}

	// The two ranks' files merge into one trace of the job, where each
	// collective of the shared communicator has both ranks under one call
	// number and each send its receive.
	parts, err := filepath.Glob(filepath.Join(dir, "*[0-9].parquet"))
	require.NoError(t, err)
	require.Len(t, parts, 2)
	var merged bytes.Buffer
	require.NoError(t, traces.MergeCallFiles(&merged, parts))
	// The job's communicators, from the parts' metadata (the merged file
	// keeps the first part's only).
	var metas []map[string]string
	for _, p := range parts {
		_, info := readCalls(t, p)
		metas = append(metas, info.Metadata)
	}
	jobComms, err := profiler.JobComms(parts, metas)
	require.NoError(t, err)
	assert.Equal(t, []profiler.JobComm{
		{Comm: 0xa0000000a1, Name: "world", Ranks: []int32{0, 1}},
		{Comm: 0xb0000000b0, Name: "solo", Ranks: []int32{0}},
		{Comm: 0xb0000000b1, Name: "solo", Ranks: []int32{1}},
	}, jobComms)
	out := filepath.Join(t.TempDir(), "job.parquet")
	require.NoError(t, os.WriteFile(out, merged.Bytes(), 0o644))
	rows, _ := readCalls(t, out)
	assert.Len(t, rows, len(runs[0].calls)+len(runs[1].calls))
	byCall := map[int64][]traces.CallRow{}
	for _, r := range rows {
		if r.Comm == 0xa0000000a1 {
			byCall[r.Call] = append(byCall[r.Call], r)
		}
	}
	for call, rs := range byCall {
		if _, _, k, ok := profiler.SplitP2PCall(call); ok && k == 1 {
			require.Len(t, rs, 1, "the second send of each rank has no receive")
			continue
		}
		require.Len(t, rs, 2, "call %#x", call)
		if rs[0].Op == "Send" || rs[0].Op == "Recv" {
			assert.ElementsMatch(t, []string{"Send", "Recv"}, []string{rs[0].Op, rs[1].Op})
		} else {
			assert.Equal(t, rs[0].Op, rs[1].Op)
			assert.Equal(t, rs[0].Count, rs[1].Count)
		}
		assert.NotEqual(t, rs[0].Rank, rs[1].Rank)
	}
}

// checkSteps checks the proxy steps: two per proxy operation (one for
// each send or receive and for each AllReduce, Broadcast, ...), on the
// call they belong to, with their peer, bytes and times in order.
func checkSteps(t *testing.T, evs []traces.EventRow, calls []traces.CallRow) {
	t.Helper()
	require.Len(t, evs, 2*len(calls))
	byCall := map[[2]int64]traces.CallRow{}
	for _, c := range calls {
		byCall[[2]int64{int64(c.Comm), c.Call}] = c
	}
	steps := map[[2]int64][]int64{}
	for _, e := range evs {
		c, ok := byCall[[2]int64{int64(e.Comm), e.Call}]
		require.True(t, ok, "step of an unknown call %#x/%d", e.Comm, e.Call)
		assert.Equal(t, c.Rank, e.Rank)
		assert.Equal(t, c.Protocol, e.Protocol)
		assert.Equal(t, int64(2048), e.Bytes)
		assert.Equal(t, traces.SourceHW, e.Source)
		if c.Op == "Recv" {
			assert.Equal(t, "proxyRecv", e.Primitive)
			assert.Equal(t, c.Root, e.RecvPeer)
			assert.Equal(t, int32(-1), e.SendPeer)
		} else {
			assert.Equal(t, "proxySend", e.Primitive)
			assert.Equal(t, int32(-1), e.RecvPeer)
			if c.Op == "Send" {
				assert.Equal(t, c.Root, e.SendPeer)
			}
		}
		assert.Less(t, e.StartNs, e.DataNs)
		assert.Less(t, e.DataNs, e.EndNs)
		steps[[2]int64{int64(e.Comm), e.Call}] = append(steps[[2]int64{int64(e.Comm), e.Call}], e.Step)
	}
	for k, s := range steps {
		assert.ElementsMatch(t, []int64{0, 1}, s, "steps of %v", k)
	}
}

func TestPluginOlderABIVersions(t *testing.T) {
	for _, tc := range []struct {
		api      string
		gpuTimes bool
		redop    string // version 1 has the reduction (fakenccl's is 0, sum)
	}{{"v4", true, ""}, {"v1", false, "sum"}} {
		t.Run(tc.api, func(t *testing.T) {
			dir := t.TempDir()
			r := runDriver(t, 1, []string{"TWINCCL_PROFILER_DIR=" + dir, "SLURM_PROCID=1", "SLURM_JOB_ID=42"}, "--api", tc.api)
			require.Equal(t, tc.api+" twinccl", r.api)
			rows, info := readCalls(t, onlyFile(t, dir, "rank00001-*[0-9].parquet"))
			checkCalls(t, rows, r.calls, tc.gpuTimes, tc.redop)
			assert.Equal(t, tc.api, info.Metadata[profiler.MetaAPI])
			for _, row := range rows {
				assert.Equal(t, "42", row.Job)
			}
			events, err := filepath.Glob(filepath.Join(dir, "*.events.parquet"))
			require.NoError(t, err)
			assert.Empty(t, events, "no proxy steps unless asked")
		})
	}
}

func TestPluginWritesAtExitWithoutFinalize(t *testing.T) {
	dir := t.TempDir()
	r := runDriver(t, 0, []string{"TWINCCL_PROFILER_DIR=" + dir}, "--no-finalize")
	assert.Empty(t, r.finalizes)
	rows, info := readCalls(t, onlyFile(t, dir, "*[0-9].parquet"))
	checkCalls(t, rows, r.calls, true, "")
	assert.Contains(t, info.Metadata[profiler.MetaComms], `"finalized":false`)
	_, hasRank := info.Metadata[profiler.MetaGlobalRank]
	assert.False(t, hasRank, "no launcher variable, no global rank")
}

func TestPluginDisablesItselfOnABadDirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plain-file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"unset", nil, "TWINCCL_PROFILER_DIR is not set"},
		{"a file", []string{"TWINCCL_PROFILER_DIR=" + file}, fmt.Sprintf("TWINCCL_PROFILER_DIR=%q: not a directory", file)},
		{"bad proxy flag", []string{"TWINCCL_PROFILER_DIR=" + t.TempDir(), "TWINCCL_PROFILER_PROXY=maybe"}, `TWINCCL_PROFILER_PROXY="maybe": want 1 or 0`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runDriver(t, 0, tc.env)
			require.Equal(t, []string{"0 rc=5 mask=0 ctx=0", "1 rc=5 mask=0 ctx=0"}, r.inits, "init fails, NCCL goes on without the profiler")
			require.Len(t, r.logs, 2)
			assert.True(t, strings.HasPrefix(r.logs[0], "2 twinccl profiler: disabled: "+tc.want), "a warning the first time: %s", r.logs[0])
			assert.True(t, strings.HasPrefix(r.logs[1], "3 twinccl profiler: disabled: "+tc.want), r.logs[1])
			assert.Contains(t, r.stderr, tc.want, "NCCL_DEBUG is not set: the warning goes to stderr too")
		})
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "nothing written beside the file")
}

func TestPluginWriteFailureLeavesNoFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "made-by-the-plugin")
	r := runDriver(t, 0, []string{"TWINCCL_PROFILER_DIR=" + dir, "NCCL_DEBUG=WARN"}, "--remove-dir")
	assert.Equal(t, []string{"0 rc=2", "1 rc=2"}, r.finalizes)
	var warned int
	for _, l := range r.logs {
		if strings.HasPrefix(l, "2 ") {
			warned++
			assert.Contains(t, l, dir)
		}
	}
	assert.Equal(t, 3, warned, "each finalize reports its failure, and the retry at exit")
	assert.NotContains(t, r.stderr, dir, "NCCL_DEBUG is set: NCCL's logger alone reports")
	_, err := os.Stat(dir)
	assert.True(t, os.IsNotExist(err), "no directory, no file: %v", err)
}

func TestPluginEventCap(t *testing.T) {
	dir := t.TempDir()
	r := runDriver(t, 0, []string{"TWINCCL_PROFILER_DIR=" + dir, "TWINCCL_PROFILER_MAX_EVENTS=5", "NCCL_DEBUG=WARN"})
	var warnings []string
	for _, l := range r.logs {
		if strings.HasPrefix(l, "2 ") {
			warnings = append(warnings, l)
		}
	}
	require.Len(t, warnings, 1, "warned once")
	assert.Contains(t, warnings[0], "5 events kept, the cap (TWINCCL_PROFILER_MAX_EVENTS)")
	rows, info := readCalls(t, onlyFile(t, dir, "*[0-9].parquet"))
	checkCalls(t, rows, r.calls, true, "")
	// Each call is two events (its API call and its task): 10 calls, 5 kept.
	assert.Equal(t, "15", info.Metadata[profiler.MetaDropped])
	assert.LessOrEqual(t, len(rows), 2)
}

// BenchmarkPluginPerCall measures the plugin's cost per collective as NCCL
// 2.28 reports one (API event, task, two kernel channels: 8 calls into the
// library), through the built library from C, and the final write.
func BenchmarkPluginPerCall(b *testing.B) {
	plugin, driver := built(b)
	n := max(b.N, 1000)
	cmd := exec.Command(driver, plugin, "0", "--bench", strconv.Itoa(n))
	cmd.Env = append(os.Environ(), "TWINCCL_PROFILER_DIR="+b.TempDir())
	out, err := cmd.CombinedOutput()
	require.NoError(b, err, "%s", out)
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "BENCH "); ok {
			ns, err := strconv.ParseFloat(v, 64)
			require.NoError(b, err)
			b.ReportMetric(ns, "ns/call")
			return
		}
	}
	b.Fatalf("no BENCH line in %s", out)
}
