package hwcmp

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/internal/tracetest"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// hwDir holds the recordings of our CUDA executor and NCCL on 2x H200
// (testdata/hw/h200x2/README.md).
func hwDir() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..", "..", "testdata", "hw", "h200x2")
}

// h200FirstDir holds the first recordings on the H200 pair (2026-11-22,
// an older executor, without nccl_env), which the embedded calibration
// and calib/h200-twinccl.json's first fit were checked against.
func h200FirstDir() string { return filepath.Join(hwDir(), "2026-11-22") }

// settingsOf are the NCCL_* settings a recording of h200FirstDir was made
// under (its README.md).
func settingsOf(name string) map[string]string {
	env := map[string]string{"NCCL_NVLS_ENABLE": "0"}
	if strings.HasPrefix(name, "shm-") {
		env["NCCL_P2P_DISABLE"] = "1"
	}
	return env
}

// newComparer builds a Comparer on the embedded H200 topology.
func newComparer(t testing.TB, env map[string]string) *Comparer {
	t.Helper()
	data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		t.Fatal(err)
	}
	file := "embedded:" + twinccl.DefaultTopology
	root, _, err := model.ParseTopologyXML(bytes.NewReader(data), file)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := NewComparer(root, file, env, c, "embedded:"+sim.DefaultCalibName)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// compareAllReduce compares the first recordings' P2P AllReduce (ext
// ".parquet": the call trace, ".json": run gpu's sweep).
func compareAllReduce(t *testing.T, ext string) (*Comparer, *Report) {
	t.Helper()
	in, err := Open(filepath.Join(h200FirstDir(), "p2p-allreduce"+ext))
	if err != nil {
		t.Fatal(err)
	}
	cp := newComparer(t, settingsOf("p2p-allreduce"))
	rep, err := cp.Compare(in)
	if err != nil {
		t.Fatal(err)
	}
	return cp, rep
}

// TestTraceAndEvents compares a call trace and its event trace: every
// call and every channel of the rank that started last is matched.
func TestTraceAndEvents(t *testing.T) {
	base := filepath.Join(h200FirstDir(), "p2p-allreduce")
	cp, rep := compareAllReduce(t, ".parquet")
	if in := rep.Input; in.Kind != KindTrace || len(in.Calls) != 13 || in.NRanks != 2 {
		t.Fatalf("kind %s, %d calls, %d ranks", in.Kind, len(in.Calls), in.NRanks)
	}
	for _, r := range rep.Rows {
		if !(r.SimUs > 0) || !(r.HwUs > 0) || r.SimProto != r.Proto.String() || r.SimChannels != r.NChannels {
			t.Errorf("%s: hw %v sim %v, %s/%d recorded %s/%d", r.label(), r.HwUs, r.SimUs, r.SimProto, r.SimChannels, r.Proto, r.NChannels)
		}
	}
	sr, err := cp.CompareEvents(rep, base+".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	if len(sr.Mismatched) > 0 {
		t.Errorf("step counts differ: %s", strings.Join(sr.Mismatched, "; "))
	}
	if sr.Matched == 0 || len(sr.ByPrim) == 0 {
		t.Fatalf("no matched steps")
	}
	for _, s := range sr.ByPrim {
		t.Logf("%-20s %-6s steps %4d hw %8.3f us sim %8.3f us late %+8.3f us", s.Primitive, s.Protocol, s.Steps, s.HwStepUs, s.SimStepUs, s.LateUs)
	}
	checkLateness(t, sr, false)
}

// checkLateness: every channel's lateness is taken apart into terms that
// add up to it, split into wait and work where split says the trace has
// data stamps, and names a cause.
func checkLateness(t *testing.T, sr *StepReport, split bool) {
	t.Helper()
	for _, s := range sr.ByChannel {
		l := s.Why
		if l == nil {
			t.Errorf("call %d channel %d: no lateness", s.Call, s.Channel)
			continue
		}
		if sum := l.LaunchUs + l.StepsUs + l.BetweenUs; math.Abs(sum-s.EndLateUs) > 1e-6 {
			t.Errorf("call %d channel %d: launch %+.3f + steps %+.3f + between %+.3f = %+.3f, last step %+.3f us late",
				s.Call, s.Channel, l.LaunchUs, l.StepsUs, l.BetweenUs, sum, s.EndLateUs)
		}
		if (l.WaitUs != nil) != split || (l.WorkUs != nil) != split {
			t.Errorf("call %d channel %d: wait %v work %v, want them split: %v", s.Call, s.Channel, l.WaitUs, l.WorkUs, split)
		} else if split && math.Abs(*l.WaitUs+*l.WorkUs-l.StepsUs) > 1e-6 {
			t.Errorf("call %d channel %d: wait %+.3f + work %+.3f != steps %+.3f", s.Call, s.Channel, *l.WaitUs, *l.WorkUs, l.StepsUs)
		}
		if l.Cause == "" {
			t.Errorf("call %d channel %d: no cause", s.Call, s.Channel)
		}
	}
}

// TestLatenessCause: the cause named is the term that moves the last
// step the way it is off, whichever that is.
func TestLatenessCause(t *testing.T) {
	// Two steps of the hardware, 0-10 and 12-20 us (data at 4 and 15).
	hw := func() []stepTimes {
		return []stepTimes{{start: 0, data: 4e3, end: 10e3, hasData: true}, {start: 12e3, data: 15e3, end: 20e3, hasData: true}}
	}
	shift := func(s []stepTimes, from int, what string, ns float64) []stepTimes {
		for i := from; i < len(s); i++ {
			switch {
			case what == "start" || i > from:
				s[i].start += ns
				s[i].data += ns
				s[i].end += ns
			case what == "data":
				s[i].data += ns
				s[i].end += ns
			case what == "end":
				s[i].end += ns
			}
		}
		return s
	}
	for _, tc := range []struct {
		name string
		sim  []stepTimes
		want string
		late float64
	}{
		{"identical", hw(), CauseOnTime, 0},
		{"set-up", shift(hw(), 0, "start", 2e3), CauseLaunch, 2},
		{"early set-up", shift(hw(), 0, "start", -1e3), CauseLaunch, -1},
		{"a longer wait", shift(hw(), 1, "data", 3e3), CauseLink, 3},
		{"a shorter copy", shift(hw(), 0, "end", -2e3), CauseProtocol, -2},
		{"a gap", shift(hw(), 1, "start", 1.5e3), CauseBetween, 1.5},
		// A late set-up that a shorter wait more than makes up for.
		{"mixed", shift(shift(hw(), 0, "start", 1e3), 0, "data", -3e3), CauseLink, -2},
		{"within the tolerance", shift(hw(), 0, "start", 0.05e3), CauseOnTime, 0.05},
	} {
		l := lateness(hw(), tc.sim)
		total := l.LaunchUs + l.StepsUs + l.BetweenUs
		if l.Cause != tc.want || math.Abs(total-tc.late) > 1e-9 {
			t.Errorf("%s: cause %q, %+.3f us late; want %q, %+.3f", tc.name, l.Cause, total, tc.want, tc.late)
		}
	}
	// Without data stamps the steps stay whole.
	h := hw()
	for i := range h {
		h[i].hasData = false
	}
	if l := lateness(h, shift(hw(), 1, "data", 3e3)); l.Cause != CauseSteps || l.WaitUs != nil || math.Abs(l.StepsUs-3) > 1e-9 {
		t.Errorf("no data stamps: cause %q, wait %v, steps %+.3f; want steps, none, +3", l.Cause, l.WaitUs, l.StepsUs)
	}
	if lateness(nil, hw()) != nil {
		t.Errorf("no steps: a lateness")
	}
}

// TestEventWaits: an event trace with data stamps (schema 1.1's data_ns)
// gives each primitive's median wait on the hardware side; one without
// (schema 1.0) gives none; the simulated side always has one, within its
// steps; a stamp outside its step is refused, naming it.
func TestEventWaits(t *testing.T) {
	base := filepath.Join(h200FirstDir(), "p2p-allreduce")
	cp, rep := compareAllReduce(t, ".parquet")
	r, err := traces.OpenEventFile(base + ".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	var rows []traces.EventRow
	if err := r.Scan(traces.Filter{}, func(b []traces.EventRow) error { rows = append(rows, b...); return nil }); err != nil {
		t.Fatal(err)
	}
	r.Close()
	write := func(name string, edit func(i int, e *traces.EventRow)) string {
		t.Helper()
		path := filepath.Join(t.TempDir(), name)
		w, err := traces.CreateEventFile(path, traces.WriterOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			e := rows[i]
			edit(i, &e)
			if err := w.Append(e); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	quarter := func(_ int, e *traces.EventRow) { e.DataNs = e.StartNs + (e.EndNs-e.StartNs)/4 }
	sr, err := cp.CompareEvents(rep, write("waits.events.parquet", quarter))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sr.ByPrim {
		if s.HwWaitUs == nil || math.Abs(*s.HwWaitUs-s.HwStepUs/4) > 0.002 {
			t.Errorf("%s %s: hw wait %v, want a quarter of the %.3f us step", s.Primitive, s.Protocol, s.HwWaitUs, s.HwStepUs)
		}
		if s.SimWaitUs == nil || *s.SimWaitUs < 0 || *s.SimWaitUs > s.SimStepUs {
			t.Errorf("%s %s: sim wait %v outside its %.3f us step", s.Primitive, s.Protocol, s.SimWaitUs, s.SimStepUs)
		}
	}
	checkLateness(t, sr, true)
	old, err := cp.CompareEvents(rep, base+".events.parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range old.ByPrim {
		if s.HwWaitUs != nil {
			t.Errorf("%s %s: hw wait %v from a trace without data stamps", s.Primitive, s.Protocol, *s.HwWaitUs)
		}
	}
	late := write("late.events.parquet", func(i int, e *traces.EventRow) {
		quarter(i, e)
		if i == len(rows)/2 {
			e.DataNs = e.EndNs + 1
		}
	})
	if _, err := cp.CompareEvents(rep, late); err == nil || !strings.Contains(err.Error(), "data_ns") || !strings.Contains(err.Error(), "late.events.parquet") {
		t.Errorf("a data stamp after its step's end: %v", err)
	}
}

// TestBadInputs: garbage, truncated and inconsistent files give errors
// that name the file, never a panic.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	real, err := os.ReadFile(filepath.Join(h200FirstDir(), "p2p-allreduce.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty.json":       nil,
		"garbage.bin":      []byte("\x00\x01garbage\xff"),
		"notjson.json":     []byte("{\"nranks\": 2, \"rows\": [1, 2"),
		"norows.json":      []byte(`{"nranks": 2, "rows": []}`),
		"zeroranks.json":   []byte(`{"nranks": 0, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"badop.json":       []byte(`{"nranks": 2, "rows": [{"op":"Frobnicate","bytes":8,"count":2,"time_us":1}]}`),
		"badtime.json":     []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":-1}]}`),
		"notime.json":      []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2}]}`),
		"badsize.json":     []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":9,"count":2,"time_us":1}]}`),
		"badproto.json":    []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1,"proto":"warp"}]}`),
		"badch.json":       []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1,"nchannels":100000}]}`),
		"badenv.json":      []byte(`{"nranks": 2, "nccl_env": {"LD_PRELOAD": "x"}, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"hugecount.json":   []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","count":9223372036854775807,"time_us":1}]}`),
		"badkernel.json":   []byte(`{"nranks": 2, "kernel": {"source_sha256": "\u001b[2Jxyz"}, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"badopt.json":      []byte(`{"nranks": 2, "kernel": {"source_sha256": "ab12", "options": ["-DX=1 rm"]}, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"badrevision.json": []byte(`{"nranks": 2, "twinccl_revision": "abc\u001b[2J", "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"badprobe.json":    []byte(`{"nranks": 2, "net_probe": [{"latency_us": -4}], "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`),
		"badrowprobe.json": []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1, "net_probe": {"latency_us": 0}}]}`),
		"badreps.json":     []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1,"reps_us":[1,-1,1]}]}`),
		"badncclreps.json": []byte(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1,"nccl_time_us":1,"nccl_reps_us":[0]}]}`),
		"par1.parquet":     []byte("PAR1 not really"),
		"trunc.parquet":    real[:len(real)/2],
		"tail.parquet":     append([]byte("PAR1"), real[len(real)/2:]...),
	}
	for name, data := range cases {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(p)
		if err == nil {
			t.Errorf("%s: no error", name)
			continue
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("%s: error does not name the file: %v", name, err)
		}
	}
	// The kernel a recording names is kept.
	p0 := filepath.Join(dir, "kernel.json")
	if err := os.WriteFile(p0, []byte(`{"nranks": 2, "kernel": {"source_sha256": "0123456789abcdef", "options": ["-DTW_LL_CREDIT_LEADER=1"]}, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if in, err := Open(p0); err != nil || in.Kernel != "interp.cu 0123456789abcdef -DTW_LL_CREDIT_LEADER=1" {
		t.Errorf("kernel of %s: %v, %v", p0, in, err)
	}
	// A calibration fitted on another kernel's recording says so; one
	// fitted on this kernel's, or naming none, does not.
	for _, tc := range []struct {
		fitted, want string
	}{
		{"interp.cu ffff", "our executor's rows were recorded with kernel interp.cu 0123456789abcdef -DTW_LL_CREDIT_LEADER=1; "},
		{"interp.cu 0123456789abcdef -DTW_LL_CREDIT_LEADER=1", ""},
		{"", ""},
	} {
		c, err := sim.LoadCalib(calibFile("h200-twinccl.json"))
		if err != nil {
			t.Fatal(err)
		}
		c.Fit = &sim.FitReport{Tables: []sim.TableFit{{Table: "x.json:ours", Fitted: true, Kernel: tc.fitted}, {Table: "y.json:ours", Kernel: "interp.cu 0123456789abcdef -DTW_LL_CREDIT_LEADER=1"}}}
		cp := &Comparer{CalibName: "c.json", calib: c}
		in, err := Open(p0)
		if err != nil {
			t.Fatal(err)
		}
		if got := cp.kernelNote(in); !strings.HasPrefix(got, tc.want) || (tc.want == "") != (got == "") {
			t.Errorf("fitted on %q: note %q, want %q...", tc.fitted, got, tc.want)
		}
	}
	// A JSON of 3 ranks against the 2-rank topology.
	p := filepath.Join(dir, "ranks.json")
	if err := os.WriteFile(p, []byte(`{"nranks": 3, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newComparer(t, nil).Compare(in); err == nil || !strings.Contains(err.Error(), "rank") {
		t.Errorf("3 ranks on 2: %v", err)
	}
	// Events need a call trace.
	cp, rep := compareAllReduce(t, ".json")
	if _, err := cp.CompareEvents(rep, filepath.Join(h200FirstDir(), "p2p-allreduce.events.parquet")); err == nil {
		t.Errorf("events of a JSON input: no error")
	}
}

// TestSVG checks the plot: well-formed, with its axes' units and legend.
func TestSVG(t *testing.T) {
	in, err := Open(filepath.Join(h200FirstDir(), "shm-allreduce.json"))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := newComparer(t, settingsOf("shm-allreduce")).Compare(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, rep, "AllReduce <SHM> & co"); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<svg", "</svg>", "GB/s", "message size (bytes", "hardware (ours)", "NCCL", "simulation", "128 B", "32 MiB", "&lt;SHM&gt; &amp; co"} {
		if !strings.Contains(s, want) {
			t.Errorf("svg lacks %q", want)
		}
	}
	if strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
		t.Errorf("svg has NaN or Inf coordinates")
	}
}

// TestEmptyRowsLeftOut: a row that moves no element (8 bytes of AllGather
// over 4 ranks of float32, as run gpu prints it) is counted and skipped,
// the others are read.
func TestEmptyRowsLeftOut(t *testing.T) {
	in, err := ReadJSON(strings.NewReader(`{"nranks": 4, "rows": [
		{"op":"AllGather","bytes":8,"count":0,"time_us":0.1},
		{"op":"AllGather","bytes":128,"count":8,"time_us":9}]}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if in.Empty != 1 || len(in.Calls) != 1 || in.Calls[0].Count != 8 {
		t.Fatalf("empty %d, calls %+v", in.Empty, in.Calls)
	}
}

// TestEmptyCallsLeftOut: a traced call that moves no element (run gpu's
// 8 B AllGather over four ranks) is counted and skipped like an empty JSON
// row, the others are read, and ranks that disagree on such a call are
// an error naming it.
func TestEmptyCallsLeftOut(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, counts ...[2]int64) string {
		t.Helper()
		var rows []traces.CallRow
		for call, cs := range counts {
			for r := int32(0); r < 2; r++ {
				rows = append(rows, traces.CallRow{Job: "t", Comm: 1, Call: int64(call), Rank: r, NRanks: 2, Op: "AllGather", Algorithm: "Ring",
					Protocol: "LL", Channels: 1, Count: cs[r], Datatype: "float32", RedOp: "sum", Root: -1,
					StartNs: 1000 + int64(call)*100000, EndNs: 21000 + int64(call)*100000, Source: traces.SourceHW})
			}
		}
		return tracetest.WriteCalls(t, filepath.Join(dir, name), nil, rows...)
	}
	in, err := ReadTrace(write("ok.parquet", [2]int64{0, 0}, [2]int64{8, 8}))
	if err != nil {
		t.Fatal(err)
	}
	if in.Empty != 1 || len(in.Calls) != 1 || in.Calls[0].Count != 8 {
		t.Fatalf("empty %d, calls %+v", in.Empty, in.Calls)
	}
	bad := write("bad.parquet", [2]int64{0, 2})
	if _, err := ReadTrace(bad); err == nil || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "disagree") {
		t.Errorf("ranks disagreeing on an empty call: %v, want an error naming %s", err, bad)
	}
}

// TestNetProbeRead: the loopback probes of a recording, its header's and
// its rows', give its host's latency and throughput both ways (their
// means; the throughput's over the probes that measured it), which the
// socket constants scale by (sim.Calib.ForHost); a file without probes
// has none, and a probe no host can give is refused with its place named.
func TestNetProbeRead(t *testing.T) {
	for _, tc := range []struct {
		probes, rowProbe string
		want             sim.HostProbe
	}{
		{``, ``, sim.HostProbe{}},
		{`"net_probe": [{"latency_us": 4.0, "both_ways_GBps": 3}, {"latency_us": 5.0}],`, ``, sim.HostProbe{LatencyUs: 4.5, BothWaysGBps: 3}},
		{`"net_probe": [{"latency_us": 4.0}, {"latency_us": 5.0}],`, `, "net_probe": {"latency_us": 6.0}`, sim.HostProbe{LatencyUs: 5}},
		{`"net_probe": [{"latency_us": 4.0, "both_ways_GBps": 2}],`, `, "net_probe": {"latency_us": 6.0, "both_ways_GBps": 3}`, sim.HostProbe{LatencyUs: 5, BothWaysGBps: 2.5}},
		{``, `, "net_probe": {"latency_us": 6.0}`, sim.HostProbe{LatencyUs: 6}},
	} {
		in, err := ReadJSON(strings.NewReader(`{"nranks": 2, `+tc.probes+` "rows": [
			{"op":"AllReduce","bytes":8,"count":2,"time_us":9`+tc.rowProbe+`}]}`), "x.json")
		if err != nil {
			t.Fatal(err)
		}
		if in.Host != tc.want {
			t.Errorf("probes %q %q: host %+v, want %+v", tc.probes, tc.rowProbe, in.Host, tc.want)
		}
	}
	for _, bad := range []struct{ probes, rowProbe, where string }{
		{`"net_probe": [{"latency_us": 0}],`, ``, "net_probe 0"},
		{``, `, "net_probe": {"latency_us": 5, "both_ways_GBps": -1}`, "row 0: net_probe"},
	} {
		_, err := ReadJSON(strings.NewReader(`{"nranks": 2, `+bad.probes+` "rows": [
			{"op":"AllReduce","bytes":8,"count":2,"time_us":9`+bad.rowProbe+`}]}`), "x.json")
		if err == nil || !strings.Contains(err.Error(), "x.json: "+bad.where) {
			t.Errorf("probes %q %q: %v, want an error naming x.json: %s", bad.probes, bad.rowProbe, err, bad.where)
		}
	}
}

// TestRepetitionMedians: a row that records its repetitions is timed by
// their median (one disturbed repetition does not move it; an even count
// takes the middle two's mean), NCCL's as ours; a row without them by its
// mean; too many repetitions are refused with the row named.
func TestRepetitionMedians(t *testing.T) {
	in, err := ReadJSON(strings.NewReader(`{"nranks": 2, "rows": [
		{"op":"AllReduce","bytes":8,"count":2,"time_us":28,"reps_us":[10,11,90,10.5,8],"nccl_time_us":12,"nccl_reps_us":[13,11,12,14]},
		{"op":"AllReduce","bytes":16,"count":4,"time_us":28,"nccl_time_us":12}]}`), "x.json")
	if err != nil {
		t.Fatal(err)
	}
	if !in.Medians {
		t.Errorf("Medians not set")
	}
	for i, want := range [][2]float64{{10.5, 12.5}, {28, 12}} {
		if c := in.Calls[i]; c.HwUs != want[0] || c.NCCLUs != want[1] {
			t.Errorf("row %d: ours %g, NCCL %g; want %g, %g", i, c.HwUs, c.NCCLUs, want[0], want[1])
		}
	}
	rep := (&Report{Input: in}).Timing()
	if !strings.Contains(rep, "median") {
		t.Errorf("timing %q does not say median", rep)
	}
	many := strings.Repeat("1,", maxReps) + "1"
	_, err = ReadJSON(strings.NewReader(`{"nranks": 2, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1,"reps_us":[`+many+`]}]}`), "x.json")
	if err == nil || !strings.Contains(err.Error(), "row 0: reps_us") {
		t.Errorf("%d repetitions: %v, want an error naming row 0's reps_us", maxReps+1, err)
	}
}

// h100Dir holds the recordings on the two H100 of nvidia-h100-x2
// (testdata/hw/h100x2/README.md).
func h100Dir() string { return filepath.Join(hwDir(), "..", "h100x2") }

// machineComparer compares one recording of the machine whose files are
// in dir: on NCCL's dump of the machine (dir/topo.xml) under the settings
// NCCL's run recorded, or, for the split-host runs (one rank per "host"
// over sockets), on two hosts of one GPU each (dir/topo-1gpu.xml); with
// the embedded calibration (calib "") or the calibration file calib.
func machineComparer(t testing.TB, dir, name string, in *Input, calib string) *Comparer {
	t.Helper()
	topo, nodes := filepath.Join(dir, "topo.xml"), 1
	if strings.HasPrefix(path.Base(name), "net-") {
		topo, nodes = filepath.Join(dir, "topo-1gpu.xml"), 2
	}
	if len(in.NCCLEnv) == 0 {
		t.Fatalf("%s: no nccl_env: the recording does not say what NCCL ran under", name)
	}
	root, _, err := model.ReadTopologyFile(topo)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sim.DefaultCalib(90)
	cname := "embedded:" + sim.DefaultCalibName
	if calib != "" {
		c, err = sim.LoadCalib(calib)
		cname = calib
	}
	if err != nil {
		t.Fatal(err)
	}
	cp, err := NewComparerNodes(root, topo, nodes, in.NCCLEnv, c, cname)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cp
}

// openMachineFile opens the recording name of the machine whose files
// are in dir and its comparer under the embedded calibration
// (machineComparer).
func openMachineFile(t *testing.T, dir, name string) (*Input, *Comparer) {
	t.Helper()
	in, err := Open(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return in, machineComparer(t, dir, name, in, "")
}

// TestCompareScalesToHost: Compare simulates a probed recording with the
// socket costs scaled to its host (sim.Calib.ForHost), so that no caller
// has to: a recording probed at the calibration's reference host is
// predicted as an unprobed one, a slower host (latency, and throughput
// where the calibration has a reference one) slower, and the comparer
// itself stays unscaled for the next input.
func TestCompareScalesToHost(t *testing.T) {
	in, cp := openMachineFile(t, hwDir(), "rerun5/heldout/net-broadcast-ll.json")
	ns := cp.calib.NetSocket
	if ns.HostLatencyUs <= 0 || ns.HostExp == 0 {
		t.Fatalf("the embedded calibration has no reference host (host_latency_us %g, host_exp %g)", ns.HostLatencyUs, ns.HostExp)
	}
	first := func(h sim.HostProbe) float64 {
		t.Helper()
		probed := *in
		probed.Host = h
		rep, err := cp.Compare(&probed)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Rows[0].SimNCCLUs
	}
	unprobed := first(sim.HostProbe{})
	ref := sim.HostProbe{LatencyUs: ns.HostLatencyUs, BothWaysGBps: ns.HostGBps}
	if at := first(ref); at != unprobed {
		t.Errorf("probed at the reference host %+v: %.3f us, unprobed %.3f us", ref, at, unprobed)
	}
	if slow := first(sim.HostProbe{LatencyUs: 2 * ns.HostLatencyUs, BothWaysGBps: ns.HostGBps}); !(slow > unprobed) {
		t.Errorf("a host twice as slow to answer: %.3f us, not slower than %.3f us", slow, unprobed)
	}
	if ns.HostGBps > 0 {
		if slow := first(sim.HostProbe{LatencyUs: ns.HostLatencyUs, BothWaysGBps: ns.HostGBps / 2}); !(slow > unprobed) {
			t.Errorf("a host with half the throughput: %.3f us, not slower than %.3f us", slow, unprobed)
		}
	}
	if again := first(sim.HostProbe{}); again != unprobed {
		t.Errorf("after a probed input, an unprobed one: %.3f us, before %.3f us", again, unprobed)
	}
}

// TestCompareEager: a recording of eager loops (run gpu -G 0, cuda_graph
// false) is compared with the simulated eager loop, whose calls the host
// issues one every host_call_us, and says so: P2P calls that a CUDA
// graph runs faster than that are predicted at the host's pace, the same
// rows timed as graph loops are not.
func TestCompareEager(t *testing.T) {
	diag, err := Open(filepath.Join(h100Dir(), "rerun2/diag/net-broadcast-ll-G0.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !diag.Eager {
		t.Fatalf("%s: cuda_graph false not read as eager", diag.Path)
	}
	graphIn, cp := openMachineFile(t, hwDir(), "proto/p2p-broadcast-ll.json")
	if graphIn.Eager {
		t.Fatalf("%s: a CUDA-graph recording read as eager", graphIn.Path)
	}
	graph, err := cp.Compare(graphIn)
	if err != nil {
		t.Fatal(err)
	}
	eagerIn := *graphIn
	eagerIn.Eager = true
	eager, err := cp.Compare(&eagerIn)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(eager.Timing(), "eager") || strings.Contains(graph.Timing(), "eager") {
		t.Errorf("timing lines: eager %q, graph %q", eager.Timing(), graph.Timing())
	}
	floor, faster := cp.calib.HostCallUs, 0
	for i, r := range eager.Rows {
		g := graph.Rows[i]
		if r.SimNCCLUs < floor-0.01 || r.SimNCCLUs < g.SimNCCLUs-0.01 {
			t.Errorf("%s: eager loop %.2f us a call, graph loop %.2f, the host issues one every %g us", r.label(), r.SimNCCLUs, g.SimNCCLUs, floor)
		}
		if g.SimNCCLUs < floor {
			faster++
		}
	}
	if faster == 0 {
		t.Errorf("%s: no call runs faster than the host issues them in a graph: the test shows nothing", graphIn.Path)
	}
	if cp.Sim.Eager {
		t.Errorf("comparing an eager recording left the comparer eager")
	}
}

// TestWithOursCalib: a comparer with a calibration for our executor's
// column simulates that column exactly as a comparer of that calibration
// alone and NCCL's column exactly as one of NCCL's alone, probed host
// scaling included; the report names both calibrations.
func TestWithOursCalib(t *testing.T) {
	for _, name := range []string{"rerun5/net-allgather.json", "rerun5/heldout/net-broadcast-ll.json"} {
		in, nccl := openMachineFile(t, h100Dir(), name)
		oursCalib, err := sim.LoadCalib(calibFile("h100-twinccl.json"))
		if err != nil {
			t.Fatal(err)
		}
		both, err := nccl.WithOursCalib(oursCalib, "h100-twinccl.json")
		if err != nil {
			t.Fatal(err)
		}
		ours := machineComparer(t, h100Dir(), name, in, calibFile("h100-twinccl.json"))
		var reps [3]*Report
		for i, cp := range []*Comparer{both, nccl, ours} {
			if reps[i], err = cp.Compare(in); err != nil {
				t.Fatal(err)
			}
		}
		differ := false
		for i, r := range reps[0].Rows {
			if r.SimUs != reps[2].Rows[i].SimUs || r.SimNCCLUs != reps[1].Rows[i].SimNCCLUs {
				t.Errorf("%s row %d: ours %.3f us, NCCL's %.3f; alone: ours %.3f, NCCL's %.3f", name, i, r.SimUs, r.SimNCCLUs, reps[2].Rows[i].SimUs, reps[1].Rows[i].SimNCCLUs)
			}
			differ = differ || reps[1].Rows[i].SimUs != reps[2].Rows[i].SimUs
		}
		if !differ {
			t.Errorf("%s: the two calibrations simulate our column alike: the test shows nothing", name)
		}
		if c := reps[0].Calib; !strings.Contains(c, "h100-twinccl.json") || !strings.Contains(c, nccl.CalibName) {
			t.Errorf("%s: report calibration %q, want both named", name, c)
		}
	}
}

// TestTraceSettings: a call trace is simulated under the NCCL settings of
// its metadata (traces.MetaNCCLEnv, which run gpu writes); one without
// them takes those of the --json file of the same run beside it, and
// says so; bad metadata is an error naming the file.
func TestTraceSettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, meta map[string]string) string {
		t.Helper()
		return tracetest.WriteCalls(t, filepath.Join(dir, name), meta, tracetest.EveryRank(2, traces.CallRow{Job: "t", Comm: 1, Call: 0,
			Op: "AllReduce", Algorithm: "Ring", Protocol: "LL", Channels: 1, Count: 2, Datatype: "float32", RedOp: "sum", Root: -1,
			StartNs: 1000, EndNs: 21000, Source: traces.SourceHW})...)
	}
	in, err := ReadTrace(write("meta.parquet", map[string]string{traces.MetaNCCLEnv: `{"NCCL_NET":"Socket","NCCL_SOCKET_IFNAME":"lo"}`}))
	if err != nil {
		t.Fatal(err)
	}
	if in.NCCLEnv["NCCL_NET"] != "Socket" || in.NCCLEnv["NCCL_SOCKET_IFNAME"] != "lo" || in.EnvFrom != "" {
		t.Errorf("metadata: env %v from %q", in.NCCLEnv, in.EnvFrom)
	}
	old := write("old.parquet", nil)
	if in, err = ReadTrace(old); err != nil || in.NCCLEnv != nil {
		t.Errorf("no metadata, no JSON: env %v, %v", in.NCCLEnv, err)
	}
	side := filepath.Join(dir, "old.json")
	if err := os.WriteFile(side, []byte(`{"nranks": 2, "nccl_env": {"NCCL_P2P_DISABLE": "1"}, "rows": [{"op":"AllReduce","bytes":8,"count":2,"time_us":1}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if in, err = ReadTrace(old); err != nil || in.NCCLEnv["NCCL_P2P_DISABLE"] != "1" || in.EnvFrom != side {
		t.Errorf("beside its JSON: env %v from %q, %v", in.NCCLEnv, in.EnvFrom, err)
	}
	if d := (&Report{Input: in}).Describe(); !strings.Contains(d, side) {
		t.Errorf("header %q does not name %s", d, side)
	}
	bad := write("bad.parquet", map[string]string{traces.MetaNCCLEnv: `{"LD_PRELOAD":"x"}`})
	if _, err := ReadTrace(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad metadata: %v, want an error naming %s", err, bad)
	}
}

// TestCompareMarksDisturbed: a row whose median repetition is more than
// sim.DisturbedRatio above its best, in either column, is marked with a
// note, and the "steady" statistics leave exactly those rows out. The
// reference is computed here from the recording's own repetitions
// (rerun29/net-broadcast.json: NCCL's LL rows were disturbed, most of its
// Simple ones and our executor's were not).
func TestCompareMarksDisturbed(t *testing.T) {
	const name = "rerun29/net-broadcast.json"
	data, err := os.ReadFile(filepath.Join(h100Dir(), name))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Rows []struct {
			Bytes    int64     `json:"bytes"`
			Reps     []float64 `json:"reps_us"`
			NCCLReps []float64 `json:"nccl_reps_us"`
		} `json:"rows"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	mid := func(v []float64) float64 {
		s := append([]float64(nil), v...)
		sort.Float64s(s)
		if len(s)%2 == 0 {
			return (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
		return s[len(s)/2]
	}
	disturbed := func(reps []float64) bool { return mid(reps) > 1.25*slices.Min(reps) }
	in, cp := openMachineFile(t, h100Dir(), name)
	ours, err := sim.LoadCalib(calibFile("h100-twinccl.json"))
	if err != nil {
		t.Fatal(err)
	}
	if cp, err = cp.WithOursCalib(ours, "h100-twinccl.json"); err != nil {
		t.Fatal(err)
	}
	rep, err := cp.Compare(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != len(raw.Rows) {
		t.Fatalf("%d rows compared, the file has %d", len(rep.Rows), len(raw.Rows))
	}
	// steady[col][proto] are the |err| of the rows that should count.
	steady := map[string]map[string][]float64{ColOurs: {}, ColNCCL: {}}
	marked := 0
	for i, r := range rep.Rows {
		for _, col := range []string{ColOurs, ColNCCL} {
			reps, e, proto := raw.Rows[i].Reps, r.Err, r.SimProto
			if col == ColNCCL {
				reps, e, proto = raw.Rows[i].NCCLReps, r.NCCLErr, r.ncclProto()
			}
			want := disturbed(reps)
			note := strings.Contains(strings.Join(r.Notes, "; "), col+" disturbed")
			if r.Disturbed(col) != want || note != want {
				t.Errorf("%s %d B, %s: Disturbed %v, note %v; its repetitions say %v", r.Coll, r.Bytes, col, r.Disturbed(col), note, want)
			}
			if want {
				marked++
				continue
			}
			steady[col][proto] = append(steady[col][proto], math.Abs(e))
			steady[col]["all"] = append(steady[col]["all"], math.Abs(e))
		}
	}
	if marked == 0 || marked == 2*len(rep.Rows) {
		t.Fatalf("%d of %d row columns disturbed: the file no longer tests both kinds", marked, 2*len(rep.Rows))
	}
	// The plot draws each disturbed row's measured busbw and its error
	// unfilled (one call per size here), and says so in its legend.
	var b bytes.Buffer
	if err := WriteSVG(&b, rep, name); err != nil {
		t.Fatal(err)
	}
	hollow := 0
	for _, col := range []string{`fill="white" stroke="#1f77b4"`, `fill="white" stroke="#ff7f0e"`} {
		hollow += strings.Count(b.String(), col)
	}
	if hollow != 2*marked || !strings.Contains(b.String(), "disturbed row: median repetition over 1.25x the best") {
		t.Errorf("svg: %d hollow markers, want %d (two per disturbed row and column), and a legend line", hollow, 2*marked)
	}
	got := map[string]Stat{}
	for _, st := range rep.Stats {
		got[st.Column+"/"+st.Proto+"/"+st.Bucket] = st
	}
	for col, byProto := range steady {
		for proto, errs := range byProto {
			all, ok := got[col+"/"+proto+"/"+BucketAll]
			if !ok {
				t.Errorf("%s %s: no %q statistic", col, proto, BucketAll)
				continue
			}
			st, ok := got[col+"/"+proto+"/"+BucketSteady]
			if len(errs) == all.N {
				if ok {
					t.Errorf("%s %s: a %q statistic where no row was disturbed", col, proto, BucketSteady)
				}
				continue
			}
			if !ok {
				t.Errorf("%s %s: no %q statistic, %d of %d rows undisturbed", col, proto, BucketSteady, len(errs), all.N)
				continue
			}
			if st.N != len(errs) || math.Abs(st.MedianAbs-mid(errs)) > 1e-12 || math.Abs(st.MaxAbs-slices.Max(errs)) > 1e-12 {
				t.Errorf("%s %s steady: n %d median %.4f max %.4f, want %d, %.4f, %.4f", col, proto, st.N, st.MedianAbs, st.MaxAbs, len(errs), mid(errs), slices.Max(errs))
			}
		}
	}
}
