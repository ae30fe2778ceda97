package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
	"github.com/twinccl/twinccl/traces/gpurecord"
)

// TestGatherRowRepetitions: two ranks bootstrapped over loopback gather
// their repetitions: a row's reps_us are each repetition's slowest rank,
// its time their mean and its best their minimum, its wrong elements the
// ranks' sum, on every rank alike.
func TestGatherRowRepetitions(t *testing.T) {
	const n = 2
	comms, err := bootstrap.StartLocal(n, bootstrap.Config{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	us := func(v ...float64) (r [gpuReps]time.Duration) {
		for i, x := range v {
			r[i] = time.Duration(x * 1e3)
		}
		return r
	}
	mine := []timing{
		{reps: us(10, 12, 10, 50, 10), wrong: 1},
		{reps: us(11, 11, 11, 11, 30), wrong: 2},
	}
	rows := make([]gpuRow, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r, comm := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer comm.Close()
			j := &gpuJob{o: gpuOpts{coll: model.CollAllReduce}, rank: r, n: n, comm: comm}
			rows[r], errs[r] = j.gatherRow(gpuRow{Row: gpurecord.Row{Bytes: 1 << 20}}, mine[r], timing{}, 1<<20)
		}()
	}
	wg.Wait()
	want := []float64{11, 12, 11, 50, 30}
	for r, row := range rows {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if len(row.RepsUs) != len(want) {
			t.Fatalf("rank %d: reps_us %v, want %v", r, row.RepsUs, want)
		}
		for i := range want {
			if row.RepsUs[i] != want[i] {
				t.Errorf("rank %d: reps_us %v, want %v", r, row.RepsUs, want)
				break
			}
		}
		if math.Abs(row.TimeUs-22.8) > 1e-9 || row.BestUs != 11 || row.Wrong != 3 {
			t.Errorf("rank %d: time %g, best %g, wrong %d; want 22.8, 11, 3", r, row.TimeUs, row.BestUs, row.Wrong)
		}
		if row.NCCLRepsUs != nil || row.NCCLTime != 0 {
			t.Errorf("rank %d: NCCL's %v, %g without an NCCL run", r, row.NCCLRepsUs, row.NCCLTime)
		}
	}
}

// TestTraceSinkWritesSettings: a rank's trace parts carry the run's NCCL
// settings (traces.MetaNCCLEnv), call and event file alike, so that
// "replay compare" simulates the trace under them.
func TestTraceSinkWritesSettings(t *testing.T) {
	dir := t.TempDir()
	s := &traceSink{job: "t", comm: 1, host: "h", env: map[string]string{"NCCL_NET": "Socket", "NCCL_SOCKET_IFNAME": "lo"}}
	s.calls = append(s.calls, traces.CallRow{Job: "t", Comm: 1, NRanks: 1, Op: "AllReduce", Algorithm: "Ring", Protocol: "LL",
		Channels: 1, Count: 2, Datatype: "float32", Root: -1, StartNs: 1, EndNs: 2, Source: traces.SourceHW})
	c, ev := tracePaths(filepath.Join(dir, "x.parquet"), -1)
	if err := s.write(c, ev); err != nil {
		t.Fatal(err)
	}
	cr, err := traces.OpenCallFile(c)
	if err != nil {
		t.Fatal(err)
	}
	defer cr.Close()
	er, err := traces.OpenEventFile(ev)
	if err != nil {
		t.Fatal(err)
	}
	defer er.Close()
	for _, md := range []map[string]string{cr.Info().Metadata, er.Info().Metadata} {
		var env map[string]string
		if err := json.Unmarshal([]byte(md[traces.MetaNCCLEnv]), &env); err != nil || env["NCCL_NET"] != "Socket" || env["NCCL_SOCKET_IFNAME"] != "lo" {
			t.Errorf("metadata %v: settings %v, %v", md, env, err)
		}
	}
}

// TestRowPasses: a row of several passes (--passes) holds every pass's
// repetitions in order, its time is their mean and its best their
// minimum, its wrong elements the passes' sum, its bandwidths and ratio
// follow the new times; and a pass the host held slow moves the
// repetitions' median, which replay compare takes, by nothing.
func TestRowPasses(t *testing.T) {
	const bus = 1.0 // AllReduce on two ranks: 2(n-1)/n
	row := gpuRow{Row: gpurecord.Row{Bytes: 1 << 20, RepsUs: []float64{10, 10, 10, 10, 10}, NCCLRepsUs: []float64{8, 8, 8, 8, 8}, Wrong: 1}}
	row.derive(bus, true)
	slow := gpuRow{Row: gpurecord.Row{Bytes: 1 << 20, RepsUs: []float64{25, 25, 25, 25, 25}, NCCLRepsUs: []float64{8, 8, 8, 8, 8}, Wrong: 2, NCCLWrong: 3}}
	again := gpuRow{Row: gpurecord.Row{Bytes: 1 << 20, RepsUs: []float64{9, 10, 11, 10, 10}, NCCLRepsUs: []float64{8, 9, 8, 8, 7}}}
	row.addPass(slow)
	row.addPass(again)
	row.derive(bus, true)
	if len(row.RepsUs) != 15 || row.RepsUs[5] != 25 || row.RepsUs[10] != 9 || len(row.NCCLRepsUs) != 15 {
		t.Fatalf("reps %v / %v: want the three passes in order", row.RepsUs, row.NCCLRepsUs)
	}
	if math.Abs(row.TimeUs-15) > 1e-9 || row.BestUs != 9 || row.NCCLBest != 7 {
		t.Errorf("time %g best %g NCCL best %g, want 15, 9 and 7", row.TimeUs, row.BestUs, row.NCCLBest)
	}
	if row.Wrong != 3 || row.NCCLWrong != 3 {
		t.Errorf("wrong %d / %d, want the passes' sums 3 / 3", row.Wrong, row.NCCLWrong)
	}
	if want := float64(1<<20) / 15 / 1e3; math.Abs(row.AlgBW-want) > 1e-9 || math.Abs(row.BusBW-want*bus) > 1e-9 {
		t.Errorf("algbw %g busbw %g, want %g", row.AlgBW, row.BusBW, want)
	}
	if want := row.NCCLTime / row.TimeUs; math.Abs(row.Ratio-want) > 1e-12 || math.Abs(row.NCCLTime-8) > 1e-9 {
		t.Errorf("ratio %g (NCCL %g us), want %g", row.Ratio, row.NCCLTime, want)
	}
	med := append([]float64(nil), row.RepsUs...)
	slices.Sort(med)
	if med[len(med)/2] != 10 {
		t.Errorf("median %g of %v, want 10: the slow pass moved it", med[len(med)/2], row.RepsUs)
	}
}

// TestSweepPasses: a sweep runs the passes --passes asks for, and by
// default (0) three where its ranks are on several hosts, one on one.
func TestSweepPasses(t *testing.T) {
	for _, c := range []struct{ passes, hosts, want int }{{0, 1, 1}, {0, 2, netPasses}, {0, 4, netPasses}, {1, 2, 1}, {5, 1, 5}, {2, 2, 2}} {
		if got := sweepPasses(c.passes, c.hosts); got != c.want {
			t.Errorf("--passes %d on %d host(s): %d passes, want %d", c.passes, c.hosts, got, c.want)
		}
	}
}

// TestSweepRetries: a sweep retries disturbed sizes as often as --retries
// says, and by default (-1) twice where its ranks are on several hosts,
// never on one.
func TestSweepRetries(t *testing.T) {
	for _, c := range []struct{ retries, hosts, want int }{{-1, 1, 0}, {-1, 2, netRetries}, {-1, 4, netRetries}, {0, 2, 0}, {3, 1, 3}, {1, 2, 1}} {
		if got := sweepRetries(c.retries, c.hosts); got != c.want {
			t.Errorf("--retries %d on %d host(s): %d retries, want %d", c.retries, c.hosts, got, c.want)
		}
	}
}

// TestDisturbedRows: the rows a retry times again are those whose median
// repetition is more than 1.25 times their best in either column (as
// replay compare marks them), and a retry's steady repetitions, added to
// the row, can bring its median back.
func TestDisturbedRows(t *testing.T) {
	steady := []float64{10, 10.5, 11, 10, 12}
	slow := []float64{10, 14, 15, 16, 13} // median 14: 1.4x the best
	rows := []gpuRow{
		{Row: gpurecord.Row{RepsUs: steady, NCCLRepsUs: steady}},
		{Row: gpurecord.Row{RepsUs: slow, NCCLRepsUs: steady}},
		{Row: gpurecord.Row{RepsUs: steady, NCCLRepsUs: slow}},
		{Row: gpurecord.Row{RepsUs: steady}},                                // no NCCL column
		{Row: gpurecord.Row{RepsUs: []float64{10, 12.4, 12.5, 12.6, 12.4}}}, // 1.25x exactly: not over
		{Row: gpurecord.Row{RepsUs: []float64{16, 10, 14, 12}}},             // even count: median 13
		{Row: gpurecord.Row{RepsUs: []float64{16, 10, 10, 12}}},             // even count: median 11
	}
	if got, want := disturbedRows(rows), []int{1, 2, 5}; !slices.Equal(got, want) {
		t.Errorf("disturbed rows %v, want %v", got, want)
	}
	rows[1].addPass(gpuRow{Row: gpurecord.Row{RepsUs: []float64{10, 10.2, 10.1, 10.4, 10.3}, NCCLRepsUs: steady}})
	if got := disturbedRows(rows[:2]); len(got) != 0 {
		t.Errorf("after a steady retry: disturbed rows %v, want none (repetitions %v)", got, rows[1].RepsUs)
	}
}
