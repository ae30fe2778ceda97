package hwcmp

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
)

// xvalParams are the constants the first calibration of our executor
// fitted (on h200FirstDir's tuner's choices): the per-call and per-step costs,
// copy throughput, Simple's remote fence and the remote load cost of
// P2P read mode of our kernel's protocols. The hardware constants (launch,
// links, load/store and reduction costs, kernel start) stay NCCL's.
const xvalParams = `^((ll|simple)\.(op_overhead_us|slice_overhead_us|copy_GBps|remote_fence_us|remote_load_cost))$`

// calibFile is the path of calibration file name in exec/sim/calib.
func calibFile(name string) string {
	return filepath.Join(hwDir(), "..", "..", "..", "exec", "sim", "calib", name)
}

// twincclCalib is the calibration file of our executor on the H200 pair
// (testdata/hw/fit-ours.sh on testdata/hw/h200x2/proto, and SHM's
// host-memory constants on rerun5/) of the kernel that carried every
// protocol in one interpreter, which every H200 recording was made with:
// calib/h200-twinccl.json until 2026-11-27, kept as
// testdata/hw/h200-twinccl-combined.json.
func twincclCalib() string { return filepath.Join(hwDir(), "..", "h200-twinccl-combined.json") }

// noLeaderCalib is h200-twinccl.json as it was before the kernel's LL
// senders into host memory had one thread poll their credits
// (TW_LL_CREDIT_LEADER=1) and before the SHM model's read leg and empty
// slices: the calibration of rerun4/'s recordings.
func noLeaderCalib() string { return filepath.Join(hwDir(), "..", "h200-twinccl-no-leader.json") }

// noGatherH200Calib is h200-twinccl.json before its socket constants
// were refitted for the plugin that gathers header and payload into one
// system call: the calibration of every earlier socket recording.
func noGatherH200Calib() string { return filepath.Join(hwDir(), "..", "h200-twinccl-no-gather.json") }

// gatherH200Calib is h200-twinccl.json of the plugin that gathers header
// and payload into one system call, before its proxy stopped allocating
// per message and napping through wake-ups: the calibration of rerun6/'s
// socket recordings.
func gatherH200Calib() string { return filepath.Join(hwDir(), "..", "h200-twinccl-gather.json") }

// earlyOwnCalib is h200-twinccl.json as it was before the kernel's
// host-memory receives loaded a line's own data only once the line
// arrived (fit-ours.sh stages 1-7, shm_latency_us aside): the calibration
// of the kernel that every recording but h200x2/rerun4 and rerun5 was
// made with. Its P2P constants are the embedded file's.
func earlyOwnCalib() string { return filepath.Join(hwDir(), "..", "h200-twinccl-early-own.json") }

// oursTable reads a P2P recording as a table of our executor's times.
func oursTable(t testing.TB, name string) sim.FitTable {
	t.Helper()
	in, err := Open(filepath.Join(h200FirstDir(), name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	tb, err := Table(in, ColOurs, settingsOf(name))
	if err != nil {
		t.Fatal(err)
	}
	return embeddedFitTable(t, tb)
}

// embeddedFitTable searches the embedded H200 topology under the table's
// settings and makes the table ready to simulate.
func embeddedFitTable(t testing.TB, tb *sim.Table) sim.FitTable {
	t.Helper()
	data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		t.Fatal(err)
	}
	file := "embedded:" + twinccl.DefaultTopology
	root, _, err := model.ParseTopologyXML(strings.NewReader(string(data)), file)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.SearchTable(root, file, 1, tb)
	if err != nil {
		t.Fatal(err)
	}
	return sim.NewFitTable(tb, res)
}

// xvalBound is a tolerance on the held-out rows of one recording and
// protocol: median and maximum absolute relative error.
type xvalBound struct {
	file, proto string
	median, max float64
}

// xvalCase is one direction of the cross-validation: fit on some
// recordings, predict the others within bounds.
type xvalCase struct {
	fit, heldOut []string
	bounds       []xvalBound
}

// xvalCases are both directions over the four P2P recordings of our
// executor (graph-timed means, 13 sizes 8 B - 128 MiB each). The bounds
// are the measured held-out errors (in the comments: median, max, as of
// the nineteenth session: the LL link efficiency of the embedded
// calibration, the start, and the search's projection onto the constants'
// bounds moved the first direction's fit, and Broadcast Simple's 2 MiB
// row went from 11.8% to 17.2%) plus about 3 points; they are NOT issue
// 10's 5%/15% target everywhere: see docs/perf.md. Fitting on AllReduce and AllGather cannot identify
// Broadcast's P2P read mode (no recording of theirs uses it: the remote
// load cost stays at its default, and the split between Simple's fence and
// its per-slice overhead is not identified by write-mode rows alone).
// Since rows are simulated as the graph loops that timed them, Broadcast
// is predicted within 3% median that way round; the other way, AllGather
// Simple (three rows from 32 MiB) was 18% off, and is 5.6% from the
// fifteenth session's start.
var xvalCases = []xvalCase{
	{
		fit:     []string{"p2p-allreduce", "p2p-allgather"},
		heldOut: []string{"p2p-reducescatter", "p2p-broadcast"},
		bounds: []xvalBound{
			{"p2p-reducescatter", "LL", 0.09, 0.19},     // 6.4, 14.5
			{"p2p-reducescatter", "Simple", 0.15, 0.18}, // 10.7, 13.1
			{"p2p-broadcast", "LL", 0.13, 0.25},         // 10.2, 21.6
			{"p2p-broadcast", "Simple", 0.08, 0.20},     // 2.9, 17.2
		},
	},
	{
		fit:     []string{"p2p-reducescatter", "p2p-broadcast"},
		heldOut: []string{"p2p-allreduce", "p2p-allgather"},
		bounds: []xvalBound{
			{"p2p-allreduce", "LL", 0.10, 0.24},     // 6.4, 20.2
			{"p2p-allreduce", "Simple", 0.10, 0.16}, // 4.2, 9.6
			{"p2p-allgather", "LL", 0.09, 0.18},     // 6.1, 14.3
			{"p2p-allgather", "Simple", 0.21, 0.32}, // 5.6, 12.7
		},
	},
}

// xvalStart is the calibration a fit of our executor starts from: the
// embedded (NCCL) one, with Broadcast and Reduce in P2P read mode as our
// executor runs them (gpudev.SimpleRead).
func xvalStart(t testing.TB) *sim.Calib {
	c, err := sim.DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	c = c.Clone()
	c.Version = sim.CalibVersion
	c.P2PRead = []string{"Broadcast", "Reduce"}
	return c
}

// checkHeldOut predicts the held-out recordings with c and checks the
// bounds, failing with a table of the offending rows.
func checkHeldOut(t *testing.T, label string, c *sim.Calib, heldOut []string, bounds []xvalBound) {
	t.Helper()
	for _, name := range heldOut {
		ft := oursTable(t, name)
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		byProto := map[string][]sim.Comparison{}
		for _, r := range rows {
			byProto[r.Proto.String()] = append(byProto[r.Proto.String()], r)
		}
		protos := make([]string, 0, len(byProto))
		for p := range byProto {
			protos = append(protos, p)
		}
		sort.Strings(protos)
		for _, p := range protos {
			med, mx := sim.ErrorStats(byProto[p])
			var b *xvalBound
			for i := range bounds {
				if bounds[i].file == name && bounds[i].proto == p {
					b = &bounds[i]
				}
			}
			if b == nil {
				t.Errorf("%s: %s %s has no bound", label, name, p)
				continue
			}
			t.Logf("%s: held out %-18s %-6s n=%2d median %5.1f%% (bound %2.0f%%) max %5.1f%% (bound %2.0f%%)",
				label, name, p, len(byProto[p]), 100*med, 100*b.median, 100*mx, 100*b.max)
			var off strings.Builder
			for _, r := range byProto[p] {
				if math.Abs(r.Err) > b.max {
					fmt.Fprintf(&off, "\n  %-14s %11d %-6s %2d  hw %9.2f us  sim %9.2f us  err %+6.1f%%", r.Coll, r.Bytes, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
				}
			}
			if med > b.median || off.Len() > 0 {
				t.Errorf("%s: held out %s %s: median %.1f%% (bound %.0f%%), rows beyond %.0f%%:%s", label, name, p, 100*med, 100*b.median, 100*b.max, off.String())
			}
		}
	}
}

// TestCrossValidationOurs fits our executor's recordings in both
// directions (AllReduce + AllGather -> ReduceScatter + Broadcast and the
// other way round) and bounds the errors of the held-out recordings per
// protocol.
func TestCrossValidationOurs(t *testing.T) {
	if testing.Short() {
		t.Skip("fits take a few seconds")
	}
	only := regexp.MustCompile(xvalParams).MatchString
	for _, xc := range xvalCases {
		label := "fit " + strings.Join(xc.fit, "+")
		var fts []sim.FitTable
		for _, n := range xc.fit {
			fts = append(fts, oursTable(t, n))
		}
		fr, err := sim.FitTables(fts, xvalStart(t), sim.FitOptions{Only: only})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: fitted %s: median %.1f%% max %.1f%% over %d rows", label, strings.Join(fr.Params, ","), 100*fr.Median, 100*fr.Max, len(fr.Rows))
		checkHeldOut(t, label, fr.Calib, xc.heldOut, xc.bounds)
	}
}

// TestTwincclCalib: calib/h200-twinccl.json, the calibration of our
// executor on the H200 pair, was fitted (its last stage, SHM Simple's
// host-memory constants on the first and the sixth start, is what its
// report keeps) on the forced-protocol recordings of proto/ and
// rerun5/proto/ and the tuner's choices from 16 MiB, and only predicted
// heldout/ and rerun5/heldout/: each table of the report has the rows of
// a file it names in one of those folders (the tuner's cut to its sizes),
// and not as many as any namesake on the other side.
// TestRegressionH200x2 bounds its errors on every recording.
func TestTwincclCalib(t *testing.T) {
	starts := []string{"", "rerun5"} // the folders of fit-ours.sh's last stage
	c, err := sim.LoadCalib(twincclCalib())
	if err != nil {
		t.Fatal(err)
	}
	if c.Fit == nil || len(c.Fit.Tables) == 0 {
		t.Fatal("no fit report")
	}
	// rows counts the rows of file in sub of every start, those of at
	// least minBytes and at most maxBytes; -1 where there is no such file.
	rows := func(sub, file string, minBytes, maxBytes int64) []int {
		var n []int
		for _, st := range starts {
			in, err := Open(filepath.Join(hwDir(), st, sub, file))
			if err != nil {
				n = append(n, -1)
				continue
			}
			tb, err := Table(in, ColOurs, nil)
			if err != nil {
				t.Fatal(err)
			}
			k := 0
			for _, r := range tb.Rows {
				if r.Bytes >= minBytes && r.Bytes <= maxBytes {
					k++
				}
			}
			n = append(n, k)
		}
		return n
	}
	fitted := 0
	for _, tf := range c.Fit.Tables {
		file, cut, _ := strings.Cut(strings.TrimSuffix(tf.Table, "]"), ":"+ColOurs)
		if cut != "" { // the tuner's choices, cut to sizes: [>=16M]
			lo, hi := int64(0), int64(math.MaxInt64)
			size, err := model.ParseSize(cut[3:])
			switch {
			case err != nil:
				t.Fatalf("%s: %v", tf.Table, err)
			case strings.HasPrefix(cut, "[>="):
				lo = size
			case strings.HasPrefix(cut, "[<="):
				hi = size
			default:
				t.Fatalf("%s: unknown cut %q", tf.Table, cut)
			}
			if n := rows("", file, lo, hi); !tf.Fitted || !slices.Contains(n, tf.Rows) {
				t.Errorf("%s (fitted %v): %d rows in the report, %v in the starts' tuner's choices", tf.Table, tf.Fitted, tf.Rows, n)
			}
			fitted++
			continue
		}
		dir, other := "heldout", "proto"
		if tf.Fitted {
			dir, other = other, dir
			fitted++
		}
		if n, m := rows(dir, file, 0, math.MaxInt64), rows(other, file, 0, math.MaxInt64); !slices.Contains(n, tf.Rows) || slices.Contains(m, tf.Rows) {
			t.Errorf("%s (fitted %v): %d rows in the report, %v in the starts' %s/, %v in their %s/", tf.Table, tf.Fitted, tf.Rows, n, dir, m, other)
		}
	}
	if fitted == 0 || fitted == len(c.Fit.Tables) {
		t.Errorf("%d of the report's %d tables fitted: want proto/'s fitted and heldout/'s predicted", fitted, len(c.Fit.Tables))
	}
	// The default calibration keeps its predictions: it has none of the
	// constants of our executor.
	d, err := sim.DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.P2PRead) > 0 || d.Simple.RemoteFenceUs != 0 || d.LL.RemoteFenceUs != 0 {
		t.Errorf("embedded calibration has executor constants: p2p_read %v, fences %v %v", d.P2PRead, d.LL.RemoteFenceUs, d.Simple.RemoteFenceUs)
	}
}
