package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/hw/nccl"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
	"github.com/twinccl/twinccl/traces"
	"github.com/twinccl/twinccl/traces/gpurecord"
)

func init() {
	// A rank started by the gpu launcher: the test binary acts as run.
	if os.Getenv(envUID) != "" && len(os.Args) > 1 && os.Args[1] == "gpu" {
		markRankStarted()
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

func TestGPUUsageErrors(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--op", "bogus"}, "unknown collective"},
		{[]string{"--op", "send"}, "a lone Send has no partner"},
		{[]string{"--op", "alltoall", "--proto", "ll"}, "GIN all-to-all kernel"},
		{[]string{"-f", "0"}, "the step factor must be at least 1"},
		{[]string{"-b", "1M", "-e", "1K"}, "larger than -e"},
		{[]string{"-b", "x"}, "bad size"},
		{[]string{"-G", "-1"}, "-G -1: graph launches must not be negative"},
		{[]string{"-c", "-1"}, "-c -1: check iterations must not be negative"},
		{[]string{"--baseline", "mpi"}, "only baseline is nccl"},
		{[]string{"--net", "verbs"}, `--net "verbs": want socket or ib`},
		{[]string{"--dtype", "fp128"}, "unknown datatype"},
		{[]string{"--redop", "xor"}, "unknown reduction"},
		{[]string{"--algo", "nvls2"}, "unknown algorithm"},
		{[]string{"--proto", "ll256"}, "unknown protocol"},
		{[]string{"--op", "allgather", "--algo", "tree", "--proto", "simple"}, "does not run with algorithm Tree"},
		{[]string{"-np", "-1"}, "-np -1: must not be negative"},
		{[]string{"--nosuchflag"}, "see run gpu -h"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--timeout", "-1s"}, "the timeout must not be negative"},
		{[]string{"--passes", "-1"}, "--passes must be from 1 to 100"},
		{[]string{"--passes", "101"}, "--passes must be from 1 to 100"},
		{[]string{"--retries", "-2"}, "--retries must be from 0 to 100"},
		{[]string{"--retries", "101"}, "--retries must be from 0 to 100"},
		{[]string{"-t", "0"}, "-t 0: threads must be at least 1"},
		{[]string{"-np", "4", "-g", "2"}, "-np 4 but -t 1 x -g 2 = 2 ranks"},
		{[]string{"--op", "broadcast", "-np", "2", "-r", "2"}, "-r 2 is not a rank of a job of 2"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			for _, v := range []string{envUID, envRank, envNRanks, "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "RANK"} {
				t.Setenv(v, "")
			}
			var out, errb bytes.Buffer
			rc := run(append([]string{"gpu"}, c.args...), &out, &errb)
			if rc != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", rc, out.String(), errb.String())
			}
			if !strings.Contains(errb.String(), c.want) {
				t.Errorf("stderr %q does not say %q", errb.String(), c.want)
			}
		})
	}
}

func TestGPUHelp(t *testing.T) {
	var out, errb bytes.Buffer
	if rc := run([]string{"gpu", "-h"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d: %s", rc, errb.String())
	}
	for _, want := range []string{"-np", "-G", "--baseline nccl", "-json", "CUDA graph", "busbw", "--passes N", "--cpuprofile PREFIX"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	if rc := run([]string{"help"}, &out, &errb); rc != 0 || !strings.Contains(out.String(), "gpu ") {
		t.Errorf("run help does not list gpu:\n%s", out.String())
	}
}

func TestGPUSizesAndIters(t *testing.T) {
	o := gpuOpts{minB: 8, maxB: 1 << 30, factor: 4, itersAuto: true}
	s := o.sizes()
	if len(s) != 14 || s[0] != 8 || s[13] != 512<<20 {
		t.Errorf("sizes 8..1G by 4: %v", s)
	}
	if o.itersFor(32<<20) != 50 || o.itersFor(64<<20) != 10 {
		t.Errorf("iters: %d at 32 MiB, %d at 64 MiB", o.itersFor(32<<20), o.itersFor(64<<20))
	}
	o = gpuOpts{minB: 0, maxB: 4, factor: 2, iters: 7}
	if s := o.sizes(); len(s) != 3 || s[0] != 0 || s[2] != 4 || o.itersFor(1<<30) != 7 {
		t.Errorf("sizes 0..4 by 2: %v, iters %d", s, o.itersFor(1<<30))
	}
}

func TestWriteGPUJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.json")
	kernel := kernels.Current()
	graph := true
	row := gpuRow{Row: gpurecord.Row{Op: "AllReduce", Bytes: 1024, Count: 256, Dtype: "fp32", RedOp: "sum", Algo: "Ring", Proto: "LL", NChannels: 2, TimeUs: 6.5, BusBW: 0.16, NCCLTime: 5.5, NCCLBusBW: 0.19,
		Checked: true}, inPlace: &gpuRow{Row: gpurecord.Row{Op: "AllReduce", Bytes: 1024, Count: 256, Dtype: "fp32", RedOp: "sum", Algo: "Ring", Proto: "LL", NChannels: 2, TimeUs: 6.1, Checked: true}}}
	rep := gpurecord.Report{NRanks: 2, Collective: "AllReduce", Graph: &graph, Repetitions: gpuReps, Topology: "live", Kernel: &kernel, Revision: "0123456789ab+modified", Hosts: 2,
		Rows: []gpurecord.Row{row.record()}}
	if err := writeGPUJSON(path, &rep); err != nil {
		t.Fatal(err)
	}
	// replay compare reads what run gpu writes: the hosts of a split-host
	// run among it.
	if in, err := hwcmp.Open(path); err != nil || in.Hosts != 2 || len(in.Calls) != 1 || in.Revision != rep.Revision {
		t.Errorf("hwcmp reads the file as %+v, %v; want 2 hosts, one call and revision %s", in, err, rep.Revision)
	}
	var got []map[string]any
	var doc struct {
		Kernel struct {
			Source string `json:"source_sha256"`
		} `json:"kernel"`
		Rows json.RawMessage `json:"rows"`
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc.Rows, &got); err != nil {
		t.Fatal(err)
	}
	if len(doc.Kernel.Source) != 16 || doc.Kernel.Source != kernels.SourceDigest() {
		t.Errorf("kernel %q, want this build's interp.cu digest %s", doc.Kernel.Source, kernels.SourceDigest())
	}
	for _, k := range []string{"op", "bytes", "algo", "proto", "nchannels", "time_us", "algbw_GBps", "busbw_GBps", "wrong", "nccl_time_us", "nccl_busbw_GBps", "root", "checked", "in_place"} {
		if _, ok := got[0][k]; !ok {
			t.Errorf("row lacks %q: %s", k, b)
		}
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := writeGPUJSON(filepath.Join(dir, "no", "such", "dir.json"), &rep); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}

// TestKeepRanks plans a job of one rank on the two-GPU embedded topology.
func TestKeepRanks(t *testing.T) {
	root := embeddedTopology(t)
	model.KeepRanks(root, 1)
	cl, err := model.LoadCluster(root, "embedded", model.LoadOptions{Params: model.DefaultParams()})
	if err != nil {
		t.Fatal(err)
	}
	if cl.NRanks != 1 {
		t.Errorf("%d ranks after keeping 1", cl.NRanks)
	}
}

// embeddedTopology is the topology embedded as the default (the H200
// pair), parsed.
func embeddedTopology(t *testing.T) *model.Element {
	t.Helper()
	data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		t.Fatal(err)
	}
	root, _, err := model.ParseTopologyXML(bytes.NewReader(data), "embedded:"+twinccl.DefaultTopology)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// requireGPUs skips the test without a CUDA device (fails under
// TWINCCL_REQUIRE_GPU=1).
func requireGPUs(t *testing.T) int {
	t.Helper()
	n, err := cudaDeviceCount()
	if err != nil {
		if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" {
			t.Fatalf("TWINCCL_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return n
}

// TestGPUNoDevice checks the error on a machine without a GPU.
func TestGPUNoDevice(t *testing.T) {
	if _, err := cudaDeviceCount(); err == nil {
		t.Skip("this machine has a GPU")
	}
	var out, errb bytes.Buffer
	rc := run([]string{"gpu", "-np", "2", "-b", "8", "-e", "8"}, &out, &errb)
	if rc != 1 || !strings.Contains(errb.String(), "no CUDA device") {
		t.Errorf("exit %d, stderr %q: want 1 and a message saying there is no CUDA device", rc, errb.String())
	}
}

// gpuTableRows returns the table rows (not comments) of run gpu's stdout.
func gpuTableRows(out string) [][]string {
	var rows [][]string
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 0 && !strings.HasPrefix(l, "#") {
			rows = append(rows, f)
		}
	}
	return rows
}

// TestGPUSweep runs two-rank sweeps of AllReduce and AllGather with data
// checking, and with --baseline nccl when libnccl loads; every row must
// have zero wrong elements and positive times.
func TestGPUSweep(t *testing.T) {
	requireGPUs(t)
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	_, nerr := nccl.Open()
	if nerr != nil {
		t.Logf("no NCCL baseline: %v", nerr)
	}
	for _, op := range []string{"allreduce", "allgather"} {
		for _, graph := range []string{"1", "0"} {
			t.Run(op+"/G"+graph, func(t *testing.T) {
				jsonOut := filepath.Join(t.TempDir(), "rows.json")
				args := []string{"gpu", "-np", "2", "--op", op, "-b", "8", "-e", "4M", "-f", "16", "-c", "1", "-n", "5", "-w", "2",
					"-G", graph, "--json", jsonOut}
				if nerr == nil {
					args = append(args, "--baseline", "nccl")
				}
				var out, errb bytes.Buffer
				start := time.Now()
				if rc := run(args, &out, &errb); rc != 0 {
					t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
				}
				t.Logf("%v\n%s", time.Since(start).Round(time.Millisecond), out.String())
				rows := gpuTableRows(out.String())
				if len(rows) != 5 {
					t.Fatalf("%d rows, want 5:\n%s", len(rows), out.String())
				}
				// nccl-tests' 13 columns; with the baseline, twinccl's
				// algo, proto, nch and NCCL's time, busbw and ratio for
				// each placement.
				wantCols := benchCols
				if nerr == nil {
					wantCols = benchCols + 3 + 6
				}
				for _, f := range rows {
					if len(f) != wantCols {
						t.Fatalf("row %q: %d columns, want %d", f, len(f), wantCols)
					}
					if f[8] != "0" || f[12] != "0" {
						t.Errorf("wrong elements: %q", f)
					}
					// Times of ours (both placements) and, with the
					// baseline, NCCL's.
					for _, i := range []int{5, 9, 16, 19} {
						if i >= len(f) {
							continue
						}
						if v, err := strconv.ParseFloat(f[i], 64); err != nil || v <= 0 {
							t.Errorf("row %q: column %d not a positive number", f, i)
						}
					}
				}
				b, err := os.ReadFile(jsonOut)
				if err != nil {
					t.Fatal(err)
				}
				var rep gpurecord.Report
				if err := json.Unmarshal(b, &rep); err != nil || len(rep.Rows) != 5 {
					t.Errorf("JSON: %v, %d rows", err, len(rep.Rows))
				}
				for _, r := range rep.Rows {
					if r.InPlace == nil || len(r.InPlace.RepsUs) != gpuReps || r.InPlace.Wrong != 0 {
						t.Errorf("JSON row of %d bytes: in place %+v, want its repetitions and no wrong element", r.Bytes, r.InPlace)
					}
				}
			})
		}
	}
}

// TestGPUTrace runs a two-rank sweep with --trace: one call row per rank
// and size, event rows whose bytes add up per call to what the Program
// sends, every stamp inside its call.
func TestGPUTrace(t *testing.T) {
	requireGPUs(t)
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	out := filepath.Join(t.TempDir(), "hw.parquet")
	var stdout, stderr bytes.Buffer
	if rc := run([]string{"gpu", "-np", "2", "--op", "allreduce", "-b", "1K", "-e", "16M", "-f", "64", "-n", "3", "-w", "1", "--trace", out}, &stdout, &stderr); rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, stdout.String(), stderr.String())
	}
	callPath, eventPath := tracePaths(out, -1)
	cr, err := traces.OpenCallFile(callPath)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	var calls []traces.CallRow
	if err := cr.Scan(traces.Filter{}, func(rows []traces.CallRow) error { calls = append(calls, rows...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 2*3 {
		t.Fatalf("%d call rows, want 6 (2 ranks x 3 sizes)", len(calls))
	}
	er, err := traces.OpenEventFile(eventPath)
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	type key struct {
		rank int32
		call int64
	}
	bytesOf := map[key]int64{}
	var events []traces.EventRow
	if err := er.Scan(traces.Filter{}, func(rows []traces.EventRow) error { events = append(events, rows...); return nil }); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		if ev.SendPeer >= 0 {
			bytesOf[key{ev.Rank, ev.Call}] += ev.Bytes
		}
	}
	for _, c := range calls {
		if c.StartNs <= 0 || c.EndNs < c.StartNs {
			t.Errorf("call %d rank %d: start %d end %d", c.Call, c.Rank, c.StartNs, c.EndNs)
		}
		// A two-rank ring AllReduce sends every element once in each phase.
		if want := c.Count * 4; bytesOf[key{c.Rank, c.Call}] != want {
			t.Errorf("call %d rank %d: %d bytes sent in its events, want %d", c.Call, c.Rank, bytesOf[key{c.Rank, c.Call}], want)
		}
	}
}

// TestGPULostRank makes rank 1 exit without goodbyes in the middle of the
// sweep (in our collective, and in NCCL's when libnccl loads): rank 0 must
// fail within its timeout naming rank 1, not hang.
func TestGPULostRank(t *testing.T) {
	requireGPUs(t)
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	phases := []string{"ours"}
	if _, err := nccl.Open(); err == nil {
		phases = append(phases, "nccl")
	}
	for _, phase := range phases {
		t.Run(phase, func(t *testing.T) {
			t.Setenv(envFault, "1:65536:"+phase)
			args := []string{"gpu", "-np", "2", "-b", "1K", "-e", "1M", "-f", "8", "-n", "5", "-w", "1", "-c", "1", "--timeout", "5s"}
			if phase == "nccl" {
				args = append(args, "--baseline", "nccl")
			}
			var out, errb bytes.Buffer
			start := time.Now()
			rc := run(args, &out, &errb)
			el := time.Since(start)
			t.Logf("exit %d after %v\n%s", rc, el.Round(time.Millisecond), errb.String())
			if rc == 0 {
				t.Fatal("the sweep succeeded with a rank gone")
			}
			if el > 60*time.Second {
				t.Errorf("took %v", el)
			}
			// The launcher's one line names rank 1, the rank that died.
			lines := strings.Split(strings.TrimSpace(errb.String()), "\n")
			if last := lines[len(lines)-1]; !strings.HasPrefix(last, "run gpu: rank 1 ") {
				t.Errorf("the last line %q does not name rank 1:\n%s", last, errb.String())
			}
		})
	}
}

// TestNCCLForcedEnv: --algo, --proto and --channels become the NCCL_*
// settings NCCL's baseline is created under, a contradicting setting in
// the environment is an error naming both, and an agreeing one is kept.
func TestNCCLForcedEnv(t *testing.T) {
	o := gpuOpts{algoSet: true, algoV: model.AlgoRing, protoSet: true, protoV: model.ProtoLL128, channels: 4}
	got := ncclForcedEnv(o)
	want := map[string]string{"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL128", "NCCL_MIN_NCHANNELS": "4", "NCCL_MAX_NCHANNELS": "4"}
	if len(got) != len(want) {
		t.Fatalf("forced %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s=%q, want %q", k, got[k], v)
		}
	}
	if env := ncclForcedEnv(gpuOpts{}); len(env) != 0 {
		t.Errorf("nothing forced: %v", env)
	}
	for _, k := range []string{"NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("NCCL_PROTO", "Simple")
	err := forceNCCLEnv(o)
	if err == nil || !strings.Contains(err.Error(), "NCCL_PROTO=Simple") || !strings.Contains(err.Error(), "NCCL_PROTO=LL128") {
		t.Errorf("contradicting NCCL_PROTO: %v", err)
	}
	t.Setenv("NCCL_PROTO", "LL128")
	if err := forceNCCLEnv(o); err != nil {
		t.Fatal(err)
	}
	env := ncclEnviron()
	for k, v := range want {
		if env[k] != v {
			t.Errorf("environment %s=%q after forcing, want %q", k, env[k], v)
		}
	}
}

// TestForcedProtoChannels: with --proto the tuner decides under
// NCCL_PROTO as NCCL's does, so a forced protocol gets its own channel
// count for the size: 192 KiB AllGather on the H200 pair is LL on 24
// channels left to the tuner, and Simple on fewer when Simple is forced
// (the count the simulator's tuner gives NCCL under NCCL_PROTO=Simple).
func TestForcedProtoChannels(t *testing.T) {
	for _, k := range []string{"NCCL_PROTO", "NCCL_ALGO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	t.Setenv("NCCL_NVLS_ENABLE", "0")
	root := embeddedTopology(t)
	params, err := model.ParamsFromEnv(nil)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := model.LoadCluster(root, "embedded:"+twinccl.DefaultTopology, model.LoadOptions{Params: params})
	if err != nil {
		t.Fatal(err)
	}
	choose := func(o gpuOpts) search.Choice {
		t.Helper()
		opts, err := searchOptions(o)
		if err != nil {
			t.Fatal(err)
		}
		res, err := search.Run(cl, opts)
		if err != nil {
			t.Fatal(err)
		}
		ch, err := res.Tuning.Choose(model.CollAllGather, 192<<10/4/2, 4) // per rank
		if err != nil {
			t.Fatal(err)
		}
		return ch
	}
	free := choose(gpuOpts{})
	simple := choose(gpuOpts{protoSet: true, protoV: model.ProtoSimple})
	if free.Proto != model.ProtoLL || simple.Proto != model.ProtoSimple {
		t.Fatalf("tuner's choice %v, forced %v: want LL, then Simple", free.Proto, simple.Proto)
	}
	if simple.NChannels >= free.NChannels {
		t.Errorf("forced Simple on %d channels, the tuner's LL on %d: want Simple's own (fewer) channels", simple.NChannels, free.NChannels)
	}
	t.Logf("192 KiB AllGather: tuner %v on %d channels, forced Simple on %d", free.Proto, free.NChannels, simple.NChannels)
}
