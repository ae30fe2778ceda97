package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// TestBenchLocal launches 4 or 8 ranks (this test binary re-executed, see
// init below) through shm and through split hosts (sockets), with data
// checking, for several collectives.
func TestBenchLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	cases := []struct {
		hostid string
		args   []string
	}{
		{"", []string{"-np", "4", "--op", "allreduce", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"}},
		{"split:1", []string{"-np", "4", "--op", "allgather", "--dtype", "fp16", "-b", "64", "-e", "256K", "-f", "64", "-n", "2", "-w", "1"}},
		{"split:2", []string{"-np", "4", "--op", "reducescatter", "--proto", "ll", "--redop", "prod", "-b", "64", "-e", "64K", "-f", "32", "-n", "2", "-w", "1"}},
		{"", []string{"-np", "8", "--op", "allreduce", "-b", "8", "-e", "4M", "-f", "64", "-n", "2", "-w", "1"}},
		{"split:4", []string{"-np", "8", "--op", "allgather", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"}},
		{"", []string{"-np", "4", "--op", "alltoall", "--dtype", "int8", "-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-w", "1"}},
	}
	for _, c := range cases {
		t.Run("np"+strings.Join(c.args[1:4], "")+c.hostid, func(t *testing.T) {
			t.Setenv("TWINCCL_HOSTID", c.hostid)
			var out, errb bytes.Buffer
			if rc := run(append([]string{"bench"}, c.args...), &out, &errb); rc != 0 {
				t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
			}
			lines := 0
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				if len(f) == benchCols && !strings.HasPrefix(l, "#") {
					lines++
					if f[8] != "0" || (f[12] != "0" && f[12] != "N/A") {
						t.Errorf("wrong elements: %s", l)
					}
				}
			}
			if lines == 0 {
				t.Fatalf("no table rows:\n%s\n%s", out.String(), errb.String())
			}
			t.Log("\n" + out.String())
		})
	}
	if m, _ := filepath.Glob("/dev/shm/" + transport.ShmPrefix + "*"); len(m) > 0 {
		t.Errorf("shm segments left: %v", m)
	}
}

// TestBenchNet runs `run -np 4 --net ib` and `--net socket` with two
// ranks per host (TWINCCL_HOSTID=split:2), data checked: the header names
// the plugin, and with --net ib on a machine without an RDMA device every
// rank says that the software verbs provider stands in.
func TestBenchNet(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	devs, derr := ib.RDMADevices(ib.HCAFromEnv())
	for _, c := range []struct {
		net, header string
		args        []string
	}{
		{"ib", "net IB/", []string{"--op", "allreduce", "-b", "8", "-e", "1M", "-f", "32"}},
		{"ib", "net IB/", []string{"--op", "allgather", "--proto", "ll128", "-b", "1K", "-e", "256K", "-f", "16"}},
		{"socket", "net Socket,", []string{"--op", "allreduce", "-b", "8", "-e", "1M", "-f", "32"}},
	} {
		t.Run(c.net+"-"+c.args[1], func(t *testing.T) {
			t.Setenv("TWINCCL_HOSTID", "split:2")
			args := append([]string{"-np", "4", "--net", c.net, "-n", "2", "-w", "1", "-c", "1"}, c.args...)
			var out, errb bytes.Buffer
			if rc := run(args, &out, &errb); rc != 0 {
				t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
			}
			rows := 0
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				if len(f) == benchCols && !strings.HasPrefix(l, "#") {
					rows++
					if f[8] != "0" || f[12] != "0" {
						t.Errorf("wrong elements: %s", l)
					}
				}
			}
			if rows == 0 || !strings.Contains(out.String(), c.header) {
				t.Fatalf("want rows and a header naming %q:\n%s\n%s", c.header, out.String(), errb.String())
			}
			if c.net == "ib" && (derr != nil || len(devs) == 0) {
				if n := strings.Count(errb.String(), "the software verbs provider stands in"); n != 4 || !strings.Contains(out.String(), "net IB/soft") {
					t.Errorf("%d ranks said the software provider stands in, want 4:\n%s\n%s", n, out.String(), errb.String())
				}
			}
			t.Log("\n" + out.String())
		})
	}
}

// TestBenchNetErrors: a bad --net or TWINCCL_IB_PROVIDER is a usage
// error; TWINCCL_IB_PROVIDER=rdma without an RDMA device fails before
// any rank starts, saying so.
func TestBenchNetErrors(t *testing.T) {
	code, _, errOut := runArgs("-np", "2", "--net", "rdma")
	if code != 2 || !strings.Contains(errOut, `--net "rdma": want socket or ib`) {
		t.Errorf("--net rdma: exit %d, stderr %q", code, errOut)
	}
	t.Setenv(ib.ProviderEnv, "hw")
	code, _, errOut = runArgs("-np", "2", "--net", "ib")
	if code != 2 || !strings.Contains(errOut, `TWINCCL_IB_PROVIDER="hw": want rdma, soft or auto`) {
		t.Errorf("TWINCCL_IB_PROVIDER=hw: exit %d, stderr %q", code, errOut)
	}
	t.Setenv(ib.ProviderEnv, "")
	t.Setenv("NCCL_IB_GID_INDEX", "three")
	code, _, errOut = runArgs("-np", "2", "--net", "ib")
	if code != 2 || !strings.Contains(errOut, `NCCL_IB_GID_INDEX="three"`) {
		t.Errorf("NCCL_IB_GID_INDEX=three: exit %d, stderr %q", code, errOut)
	}
	t.Setenv("NCCL_IB_GID_INDEX", "")
	if devs, err := ib.RDMADevices(ib.HCAFromEnv()); err == nil && len(devs) > 0 {
		t.Skipf("RDMA devices %v present", devs)
	}
	t.Setenv(ib.ProviderEnv, "rdma")
	code, out, errOut := runArgs("-np", "2", "--net", "ib", "-b", "8", "-e", "8")
	if code != 1 || out != "" || !strings.Contains(errOut, "--net ib with TWINCCL_IB_PROVIDER=rdma: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("TWINCCL_IB_PROVIDER=rdma without a device: exit %d, stdout %q, stderr %q; want one line saying there is no device", code, out, errOut)
	}
	t.Log(errOut)
}

// TestBenchBaseline runs `run bench --baseline` once, briefly: every
// bandwidth and both ratios are printed and positive.
func TestBenchBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"bench", "--baseline", "-n", "1", "-w", "1"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
	}
	ratios := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[len(f)-2] == "ratio" {
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || v <= 0 {
				t.Errorf("bad ratio: %s", l)
			}
			ratios++
		}
	}
	if ratios != 2 {
		t.Errorf("want 2 ratios:\n%s", out.String())
	}
	if m, _ := filepath.Glob("/dev/shm/" + transport.ShmPrefix + "*"); len(m) > 0 {
		t.Errorf("shm segments left: %v", m)
	}
	t.Log("\n" + out.String())
}

func init() {
	// A rank started by the bench launcher: the test binary acts as run.
	if os.Getenv(envUID) != "" && len(os.Args) > 1 && os.Args[1] == "bench" {
		markRankStarted()
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// envRankMark names a directory where every rank the launcher starts in a
// test leaves a file (markRankStarted): the bad-flag tests check that no
// rank started.
const envRankMark = "TWINCCL_TEST_RANK_MARK"

func markRankStarted() {
	if dir := os.Getenv(envRankMark); dir != "" {
		os.WriteFile(filepath.Join(dir, "rank"+os.Getenv(envRank)), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
}

// TestBenchBareFormTrace runs the bare form with --trace: the launcher
// merges the ranks' parts into OUT.parquet (one row per call per rank)
// and OUT.events.parquet (one row per slice), and leaves nothing else.
func TestBenchBareFormTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out.parquet")
	var stdout, stderr bytes.Buffer
	args := []string{"-np", "4", "--op", "allreduce", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-w", "1", "--trace", out}
	if rc := run(args, &stdout, &stderr); rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "from NCCL's tuner") {
		t.Errorf("header does not name the tuner:\n%s", stdout.String())
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 2 {
		t.Errorf("files left in %s: %v", dir, ents)
	}
	cr, err := traces.OpenCallFile(out)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	type callKey struct {
		rank int32
		call int64
	}
	calls := map[callKey]traces.CallRow{}
	if err := cr.Scan(traces.Filter{}, func(rows []traces.CallRow) error {
		for _, r := range rows {
			calls[callKey{r.Rank, r.Call}] = r
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	// 3 sizes x (1 warmup + 1 untimed + 2 timed + 1 checked) out-of-place
	// calls on each of 4 ranks (in-place calls are not traced).
	if len(calls) != 4*3*5 {
		t.Errorf("%d calls in the trace, want %d", len(calls), 4*3*5)
	}
	for k, r := range calls {
		if r.Op != "AllReduce" || r.NRanks != 4 || r.Algorithm == "" || r.Protocol == "" || r.Datatype != "float32" ||
			r.RedOp != "sum" || r.EndNs < r.StartNs || r.StartNs < r.EnqueueNs || r.Source != traces.SourceHW {
			t.Fatalf("call %+v: %+v", k, r)
		}
	}
	er, err := traces.OpenEventFile(strings.TrimSuffix(out, ".parquet") + ".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	events := 0
	if err := er.Scan(traces.Filter{}, func(rows []traces.EventRow) error {
		for _, r := range rows {
			events++
			c, ok := calls[callKey{r.Rank, r.Call}]
			if !ok || r.EndNs < r.StartNs || r.StartNs < c.StartNs || r.EndNs > c.EndNs || r.Primitive == "" || r.Protocol != c.Protocol {
				return fmt.Errorf("event %+v does not fit call %+v", r, c)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if events < len(calls) {
		t.Errorf("%d events for %d calls", events, len(calls))
	}
}

// TestBenchFailureWritesNoTrace: a run that fails (rank 1 fails at its
// second size, as TWINCCL_BENCH_TEST_FAIL says) exits 1 and leaves no
// trace file behind.
func TestBenchFailureWritesNoTrace(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	dir := t.TempDir()
	t.Setenv(envBenchFault, "1:8192")
	var stdout, stderr bytes.Buffer
	args := []string{"-np", "2", "--op", "allgather", "-b", "1K", "-e", "8K", "-f", "8", "-n", "1", "--trace", filepath.Join(dir, "t.parquet")}
	if rc := run(args, &stdout, &stderr); rc != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", rc, stdout.String(), stderr.String())
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed run left %v", ents)
	}
}

// TestBenchForcedProtocol: flags override the tuner.
func TestBenchForcedProtocol(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"bench", "-np", "3", "--op", "allreduce", "--algo", "tree", "--proto", "ll128", "-b", "4K", "-e", "4M", "-f", "1024", "-n", "1", "-w", "0", "--twinccl-columns"}
	if rc := run(args, &stdout, &stderr); rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, stdout.String(), stderr.String())
	}
	rows := 0
	for _, l := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(l)
		if len(f) == benchCols+3 && !strings.HasPrefix(l, "#") {
			rows++
			if f[13] != "Tree" || f[14] != "LL128" || f[8] != "0" || f[12] != "0" {
				t.Errorf("row %q: want Tree LL128 and no wrong element", l)
			}
		}
	}
	if rows != 2 || !strings.Contains(stdout.String(), "from the flags") {
		t.Errorf("want 2 rows from the flags:\n%s", stdout.String())
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-np", "2", "--bogus"}, {"-np", "2", "--op", "frob"}, {"-np", "2", "--dtype", "fp7"}, {"-np", "2", "--algo", "nvlsx"},
		{"-np", "2", "-b", "1M", "-e", "1K"}, {"-np", "2", "-f", "0"}, {"-np", "2", "-n", "0"}, {"bench", "extra"},
		{"-np", "2", "--trace", "x.parquet", "--baseline"},
	} {
		code, _, errOut := runArgs(args...)
		if code != 2 || errOut == "" {
			t.Errorf("run %v: exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
	code, out, _ := runArgs("bench", "-h")
	if code != 0 || !strings.Contains(out, "OUT.events.parquet") || !strings.Contains(out, "-trace") {
		t.Errorf("run bench -h: exit %d\n%s", code, out)
	}
}

func TestCPUTopologyTuning(t *testing.T) {
	if _, err := tunedPlan([]string{"a", "b", "a"}); err == nil {
		t.Error("hosts a, b, a: want an error (ranks of a host must be consecutive)")
	}
	for _, hosts := range [][]string{{"a", "a", "a", "a"}, {"a", "a", "b", "b"}, {"a", "b", "c", "d"}} {
		res, err := tunedPlan(hosts)
		if err != nil {
			t.Fatalf("%v: %v", hosts, err)
		}
		if res.Plan.NRanks != len(hosts) || res.Plan.NChannels < 1 {
			t.Fatalf("%v: plan of %d ranks, %d channels", hosts, res.Plan.NRanks, res.Plan.NChannels)
		}
		small, err := res.Tuning.Choose(model.CollAllReduce, 2, 4)
		if err != nil {
			t.Fatal(err)
		}
		large, err := res.Tuning.Choose(model.CollAllReduce, 16<<20, 4)
		if err != nil {
			t.Fatal(err)
		}
		// NCCL's tuner: a latency protocol for 8 bytes, Simple for 64 MiB.
		if small.Proto == model.ProtoSimple || large.Proto != model.ProtoSimple {
			t.Errorf("%v: 8 B %v/%v, 64 MiB %v/%v", hosts, small.Algo, small.Proto, large.Algo, large.Proto)
		}
	}
}
