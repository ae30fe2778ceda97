package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
	"github.com/twinccl/twinccl/model"
)

const compareHelp = `Usage: replay compare HW.parquet|HW.json [--topo FILE.xml] [--nodes N] [--env KEY=VALUE]...
                      [--calib FILE.json] [--calib-ours FILE.json] [--json OUT] [--svg OUT.svg]
                      [--title T] [--events] [--progress]
       replay compare HW.json|DIR... [--match GLOB] [--topo FILE.xml] [flags as above but --svg, --title, --events]
       replay compare --starts DIR DIR... [--match GLOB] [--worst N] [--topo FILE.xml] [flags as above but --svg, --title, --events]

Compares hardware measurements with the simulator. HW is either a hardware call
trace ("run gpu --trace", one row per call and rank) or the --json file of
"run gpu" (rows with time_us, and nccl_time_us with --baseline nccl). The JSON
rows are CUDA-graph-timed means over many calls: the better timing source (a
file of "run gpu -G 0", cuda_graph false, holds eager loops' means instead,
and is compared with the simulated eager loop, the host issuing a call every
host_call_us of the calibration). A row that records its repetitions
(reps_us, nccl_reps_us: run gpu since 2026-11-26) is timed by their median,
which one repetition the host disturbed does not move. A
call trace holds one traced run per call; its kernel times (the rank that
started last, since the GPUs' clocks are not aligned and the other ranks wait
for it) are compared with the simulated kernel time.

Every call is simulated on the topology (default: the embedded %s) with the
algorithm, protocol and channels it was recorded with. NCCL's column is
compared with the simulation at the tuner's choice (NCCL's rules), which is
what NCCL ran; both are the same call unless our executor chose otherwise.
The search and the simulation follow the NCCL_* settings that a JSON file
says NCCL ran under (nccl_env: run gpu records them, with the NCCL_PROTO,
NCCL_ALGO and channel counts its --proto, --algo and --channels forced; a
call trace carries them in its metadata, and one written before it did
takes those of the --json file of the same run beside it, X.json), then
those of the environment, then --env KEY=VALUE (which wins; repeat it): give
the settings an older recording was made under, e.g. --env NCCL_P2P_DISABLE=1
for a run over SHM. A run over several hosts (or TWINCCL_HOSTID=split:K on
one) is simulated as N nodes of one host's topology: N is --nodes, else
the hosts its JSON file records (run gpu writes "hosts" for such a run; a
call trace takes those of the --json file beside it), and of a topology
FILE with more GPUs than a host's share of the ranks only the GPUs ranked
below that share are kept (the first GPU of the embedded two-GPU machine
for a split-host run of two ranks). Where a
JSON file carries loopback probes of its host (net_probe: run gpu records
them before and after a split-host sweep and before each of its sizes), the
calibration's socket costs are scaled to that host, by the probes' mean
latency and mean throughput both ways against the calibration's reference
host (net_socket.host_latency_us, host_GBps and host_exp).

The two columns are simulated with the constants fitted to each: NCCL's with
--calib (default: the embedded NCCL calibration measured on the GPUs the
recording names, h100.json for H100 and h200.json for H200, else h200.json;
run gpu names them in its --json file, and a call trace takes those of the
--json file of the same run beside it), our executor's with --calib-ours
(default: the embedded calibration of our kernels that goes with --calib's,
h200-twinccl.json for h200.json and h100-twinccl.json for h100.json;
--calib's own constants when --calib is a file or one of ours). Give
--calib-ours the same value as --calib to simulate both with one.

It prints a table per call, per (op, size, protocol) where calls repeat, and
the median and maximum absolute error and the median signed error (bias:
positive when the simulator is slower) per protocol and size bucket (small:
below 1 MiB). A row whose median repetition is more than 1.25 times its best
is marked disturbed (the host slowed most of its repetitions, and its error
says more about the host than about the simulator), and the "steady" bucket
gives the errors without such rows, as the regression tests count them.
--json writes all of it (- for stdout), --svg a plot of busbw
against size (log-log; hardware, NCCL, simulation) with the error per size
underneath. With --events, the event trace beside a call trace
(HW.events.parquet) is compared step by step: per channel and per primitive
and protocol, how long steps take on either side, how long they wait for
their data and send credits (the hardware's where its trace has data stamps,
data_ns: schema 1.1) and how early (negative) or late the simulator ends them,
measured from the kernel's start on the rank that started last. Each
channel's lateness is taken apart, and the part that moves its last step
most names why it is off: launch (the kernel's set-up before the first
step), link (the steps' waits for data and send credits: the link and the
peer), protocol (the steps' own work once their data came: copies, flags,
fences) or between (the gaps between steps: the cost of a primitive call);
steps where the trace has no data stamps to tell waits from work.

Given several inputs, or a directory (every run gpu JSON file under it, e.g.
the recordings of one start of a machine: testdata/hw/h100x2/rerun30), it
compares each as above and prints one line per file, then pools the rows of
every file per transport (how the ranks reach each other in the simulation:
P2P, SHM, NET/Socket or NET/IB), column and protocol: the median and maximum
absolute error per transport and protocol, over the valid rows only (in
every bucket; the per-file lines give every row and the steady ones). The
rule, which the output's header states with how many it left out and why:
%s.
Give the machine's topology with both its GPUs: a split-host file keeps a
host's share of it. A file that cannot be compared is skipped with a note on
stderr naming it and why, and the others are compared ("N files skipped" at
the end): one that is no run gpu --json file (a call trace, another JSON
file), whose ranks the topology does not have, whose calls the simulator
cannot run, or whose hosts do not match the simulation's: without --nodes, a
split-host run that does not record its hosts (NCCL_HOSTID in its nccl_env:
it would run over P2P on one host); with --nodes N > 1, a run of one host
(no "hosts", NCCL_HOSTID or net_probe: it would run over the network), and a
recording of other than N hosts. It fails only when no file could be
compared, or when a file named on the command line cannot be opened.
--match GLOB keeps, of the files found under a directory, those whose name
matches (e.g. 'net-*': a start's split-host sweeps, which recordings older
than the "hosts" field need compared with --topo of one host's GPU and
--nodes 2). --json then writes each file's comparison, the files skipped,
and the pooled statistics.

With --starts every input is a directory holding one start of a machine
(the recordings of one session on it, e.g. testdata/hw/h200x2/rerun7 and
rerun8): each start's rows are pooled on their own, as above, and the
starts are then set side by side to say how repeatable the hardware was
and so how close any simulator can come to it. A cell is one row measured
steady on at least two starts (the same size of the same recording, its
path below the start's directory, per column); its floor is (max - min) /
(max + min) of the simulated over the measured time on those starts: the
least largest error, over the starts, of any prediction that differs from
this simulation's by one factor for the row (taking the ratio rather than
the measured time keeps what the simulation already explains of a start,
such as the socket costs' scaling by its host probes). Where a cell's
floor exceeds a tolerance, no such prediction meets the tolerance on
every start. Cells keep builds apart: NCCL's version, our kernel's digest
and the twinccl commit run gpu was built from (twinccl_revision), so that
a change of ours between starts does not pass for the hardware's. It
prints per transport, column and protocol the cells' median and largest
floor next to the simulation's own largest error on the same rows; then,
per start, "hindsight": its rows predicted by the simulation times the
factor that puts the median of the other starts' ratios on 1 (what a
simulator tuned per row on the other starts could expect of this start),
its median and largest error next to the simulation's own; then the
--worst N widest cells (default 10) with their ratio per start. --json
writes every start's pooled statistics, the summaries, the hindsight and
every cell.

On a terminal, or with --progress, it says on stderr which file it compares
("compare: file 7/17 heldout/net-allgather-ll.json, 12 s").

Flags:
`

// envFlags collects --env KEY=VALUE settings.
type envFlags map[string]string

func (e envFlags) String() string { return "" }

func (e envFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || strings.ContainsAny(k, " \t") {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	if !sim.KnownEnv(k) {
		// A misspelt setting would be ignored and the result silently wrong.
		return fmt.Errorf("%s: not a setting the simulation reads; known: %s", k, strings.Join(sim.KnownEnvNames(), ", "))
	}
	e[k] = v
	return nil
}

func runCompare(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("compare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o compareOpts
	fs.StringVar(&o.topo, "topo", "", "topology XML `FILE` (default: the embedded one)")
	fs.IntVar(&o.nodes, "nodes", 0, "the run spanned `N` hosts, each like the topology FILE (e.g. one GPU per host over sockets); default: the hosts the recording names, else 1")
	o.env = envFlags{}
	fs.Var(o.env, "env", "NCCL_* setting `KEY=VALUE` the run was recorded under (repeatable; wins over the environment)")
	fs.StringVar(&o.calib, "calib", "", calibFlagHelp+"; by default the one measured on the GPUs the recording names")
	fs.StringVar(&o.ours, "calib-ours", "", "calibration `FILE.json` (or embedded:NAME.json) of our executor's column (default: the embedded one of our kernels that goes with --calib's)")
	jsonOut := fs.String("json", "", "write the comparison as JSON to `OUT` (- for stdout)")
	svgOut := fs.String("svg", "", "write a busbw-vs-size plot to `OUT.svg`")
	title := fs.String("title", "", "title of the SVG plot (default: the op and the input's name)")
	fs.IntVar(&o.loop, "loop", sim.DefaultLoopCalls, "simulate graph-timed rows as loops of `N` calls back to back after an aligning one, as they were timed (0: isolated calls; traced calls are always isolated)")
	events := fs.Bool("events", false, "also compare the event trace beside a call trace (HW.events.parquet) step by step")
	fs.StringVar(&o.match, "match", "", "of the recordings found under a directory, compare those whose file name matches `GLOB` (e.g. 'net-*' for the split-host runs)")
	starts := fs.Bool("starts", false, "every input is a directory of one start's recordings: pool each, and measure the hardware's start-to-start repeatability (floors)")
	worst := fs.Int("worst", 10, "with --starts, list the `N` cells whose starts disagree most")
	progress := fs.Bool("progress", false, "report which file is compared on stderr even when it is not a terminal (a line a second at most)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, compareHelp, twinccl.DefaultTopology, wrapText(hwcmp.ValidRule, 78))
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("%w: replay compare wants an input (HW.parquet, HW.json, or several JSON files or directories)", errUsage)
	}
	if *svgOut == "-" && *jsonOut == "-" {
		return fmt.Errorf("%w: only one of --json and --svg may write to stdout", errUsage)
	}
	if o.nodes < 0 {
		return fmt.Errorf("%w: --nodes %d: want at least 1 (or 0, the default: the hosts the recording names)", errUsage, o.nodes)
	}
	if err := checkLoop(o.loop); err != nil {
		return err
	}
	worstSet := false
	fs.Visit(func(f *flag.Flag) { worstSet = worstSet || f.Name == "worst" })
	if worstSet && !*starts {
		return fmt.Errorf("%w: --worst lists the cells of --starts; give --starts DIR DIR...", errUsage)
	}
	if _, err := filepath.Match(o.match, ""); err != nil {
		return fmt.Errorf("%w: --match %q: %v", errUsage, o.match, err)
	}
	if *starts {
		if *svgOut != "" || *title != "" || *events {
			return fmt.Errorf("%w: --svg, --title and --events take one input, not --starts", errUsage)
		}
		if *worst < 0 {
			return fmt.Errorf("%w: --worst %d: want 0 or more cells", errUsage, *worst)
		}
		return compareStarts(pos, &o, *worst, *jsonOut, newProgressLine(stderr, *progress, "compare"), stdout, stderr)
	}
	if len(pos) > 1 || isDir(pos[0]) {
		if *svgOut != "" || *title != "" || *events {
			return fmt.Errorf("%w: --svg, --title and --events take one input; several are pooled", errUsage)
		}
		return comparePooled(pos, &o, *jsonOut, newProgressLine(stderr, *progress, "compare"), stdout, stderr)
	}
	prog := newProgressLine(stderr, *progress, "compare")
	defer prog.done()
	stderr = prog.writer(stderr)
	prog.report("file 1/1 %s", pos[0])
	in, err := hwcmp.Open(pos[0])
	if err != nil {
		return err
	}
	eventPath := ""
	if *events {
		if in.Kind != hwcmp.KindTrace {
			return fmt.Errorf("%w: --events needs a call trace input (HW.parquet with HW.events.parquet beside it), not a JSON file", errUsage)
		}
		eventPath = strings.TrimSuffix(pos[0], ".parquet") + ".events.parquet"
		if _, err := os.Stat(eventPath); err != nil {
			return fmt.Errorf("--events: %w", err)
		}
	}
	rep, cp, err := o.compare(in, stderr)
	if err != nil {
		return err
	}
	var steps *hwcmp.StepReport
	if eventPath != "" {
		if steps, err = cp.CompareEvents(rep, eventPath); err != nil {
			return err
		}
	}
	prog.done()
	quiet := *jsonOut == "-" || *svgOut == "-"
	if !quiet {
		printCompare(stdout, rep, steps)
	}
	if *jsonOut != "" {
		doc := compareDoc(rep, steps)
		err := writeJSON(*jsonOut, stdout, doc)
		if err != nil {
			return fmt.Errorf("--json: %w", err)
		}
	}
	if *svgOut != "" {
		t := *title
		if t == "" {
			t = fmt.Sprintf("%s on %d ranks: %s", opsOf(rep), in.NRanks, filepath.Base(in.Path))
		}
		if err := writeOutput(*svgOut, stdout, func(w io.Writer) error { return hwcmp.WriteSVG(w, rep, t) }); err != nil {
			return fmt.Errorf("--svg: %w", err)
		}
		if !quiet {
			fmt.Fprintf(stdout, "wrote %s\n", *svgOut)
		}
	}
	return nil
}

// wrapText breaks s into lines of at most width characters between
// words (a longer word keeps a line of its own).
func wrapText(s string, width int) string {
	var b strings.Builder
	n := 0
	for _, w := range strings.Fields(s) {
		switch {
		case n == 0:
		case n+1+len(w) > width:
			b.WriteByte('\n')
			n = 0
		default:
			b.WriteByte(' ')
			n++
		}
		b.WriteString(w)
		n += len(w)
	}
	return b.String()
}

// recordedSettings are the NCCL_* settings a recording is simulated
// under: those its run recorded, then this environment's, then flags'
// (--env). NCCL_VERSION is no setting: NVIDIA's containers name the
// installed library with it (run gpu leaves it out of nccl_env now;
// recordings made before carry it).
func recordedSettings(recorded map[string]string, flags envFlags) map[string]string {
	settings := map[string]string{}
	for k, v := range recorded {
		settings[k] = v
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "NCCL_") {
			settings[k] = v
		}
	}
	delete(settings, "NCCL_VERSION")
	for k, v := range flags {
		settings[k] = v
	}
	return settings
}

// compareOpts are the flags of replay compare that say how an input is
// simulated.
type compareOpts struct {
	topo, calib, ours string
	nodes, loop       int
	env               envFlags
	// match keeps, of the recordings found under a directory, those
	// whose file name matches it (filepath.Match); "": all.
	match string
}

// compare simulates input in as the options say (its hosts, settings,
// topology and calibrations) and compares it.
func (o *compareOpts) compare(in *hwcmp.Input, stderr io.Writer) (*hwcmp.Report, *hwcmp.Comparer, error) {
	nodes := o.nodes
	if nodes == 0 {
		nodes = max(in.Hosts, 1)
	}
	if h := in.NCCLEnv["NCCL_HOSTID"]; h != "" && nodes == 1 && in.Hosts == 0 && in.NRanks > 1 {
		// run gpu's split-host runs give every rank a host id of its own:
		// simulated on one host, they would talk over P2P, not sockets.
		fmt.Fprintf(stderr, "replay compare: warning: %s was recorded under NCCL_HOSTID=%s: if its %d ranks were on hosts of their own (run gpu's split-host runs), compare it on one host's topology with --nodes %d (e.g. --topo testdata/hw/h200x2/topo-1gpu.xml --nodes %d)\n",
			in.Path, h, in.NRanks, in.NRanks, in.NRanks)
	}
	settings := recordedSettings(in.NCCLEnv, o.env)
	root, file, err := readTopologyRoot(o.topo)
	if err != nil {
		return nil, nil, err
	}
	if nodes > 1 && in.NRanks%nodes == 0 {
		// one host's share of the GPUs of a file that describes more
		model.KeepRanks(root, in.NRanks/nodes)
	}
	calib, calibName, err := loadCompareCalib(o.calib, root, file, in.GPUs)
	if err != nil {
		return nil, nil, err
	}
	cp, err := hwcmp.NewComparerNodes(root, file, nodes, settings, calib, calibName)
	if err != nil {
		return nil, nil, err
	}
	if nodes > 1 {
		cp.Topology = fmt.Sprintf("%s as %d hosts of %d GPU(s)", cp.Topology, nodes, cp.Sim.Machine.Cluster.NRanks/nodes)
	}
	cp.Sim.Loop = o.loop // before WithOursCalib, whose simulator copies it
	if ours := oursCalibPath(o.ours, calibName); ours != "" && ours != calibName {
		c, err := sim.LoadCalib(ours)
		if err != nil {
			return nil, nil, fmt.Errorf("--calib-ours: %w", err)
		}
		if cp, err = cp.WithOursCalib(c, ours); err != nil {
			return nil, nil, err
		}
	}
	if len(in.Calls) == 0 {
		return nil, nil, fmt.Errorf("%s: every row is an empty call (count 0): nothing to compare", in.Path)
	}
	if in.Empty > 0 {
		fmt.Fprintf(stderr, "replay compare: %s: %d empty call(s) (count 0) left out\n", in.Path, in.Empty)
	}
	rep, err := cp.Compare(in)
	if err != nil {
		return nil, nil, err
	}
	return rep, cp, nil
}

// readTopologyRoot parses the topology file (the embedded default when
// path is empty) and returns it with its name.
func readTopologyRoot(path string) (*model.Element, string, error) {
	if path == "" {
		name := "embedded:" + twinccl.DefaultTopology
		data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
		if err != nil {
			return nil, "", err
		}
		root, warns, err := model.ParseTopologyXML(bytes.NewReader(data), name)
		logWarnings(warns)
		return root, name, err
	}
	root, warns, err := model.ReadTopologyFile(path)
	if err != nil {
		return nil, "", err
	}
	logWarnings(warns)
	return root, path, nil
}

// loadCompareCalib reads --calib, else the embedded calibration measured
// on the GPUs the recording names (gpus: sim.CalibNameForGPUs), else the
// embedded one for the topology's GPUs.
func loadCompareCalib(path string, root *model.Element, file string, gpus []string) (*sim.Calib, string, error) {
	if name := sim.CalibNameForGPUs(gpus); path == "" && name != "" {
		c, err := sim.LoadCalib(sim.EmbeddedPrefix + name)
		return c, sim.EmbeddedPrefix + name, err
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: 1, Params: model.DefaultParams()})
	if err != nil {
		return nil, "", err
	}
	return loadCalib(path, cl)
}

// oursCalibPath is the calibration of our executor's column: --calib-ours
// when given, else the embedded calibration of our kernels that goes with
// an embedded NCCL calibration (NAME.json: NAME-twinccl.json), else ""
// (the --calib constants serve both columns).
func oursCalibPath(flag, calibName string) string {
	if flag != "" {
		return flag
	}
	name, ok := strings.CutPrefix(calibName, sim.EmbeddedPrefix)
	if !ok || strings.Contains(name, "twinccl") {
		return ""
	}
	ours := strings.TrimSuffix(name, ".json") + "-twinccl.json"
	if !slices.Contains(sim.EmbeddedCalibNames(), ours) {
		return "" // no calibration of our kernels for that machine
	}
	return sim.EmbeddedPrefix + ours
}

// opsOf names the collectives of a report ("AllReduce", or a list).
func opsOf(rep *hwcmp.Report) string {
	var ops []string
	seen := map[string]bool{}
	for _, g := range rep.Groups {
		if !seen[g.Op] {
			seen[g.Op] = true
			ops = append(ops, g.Op)
		}
	}
	return strings.Join(ops, ", ")
}

// pct formats a relative error, "-" when absent.
func pct(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", 100*v)
}

// usOrDash formats a time, "-" when absent.
func usOrDash(v float64) string {
	if !(v > 0) {
		return "-"
	}
	return fmt.Sprintf("%.2f", v)
}

// waitOrDash prints a median wait, "-" where there is none.
func waitOrDash(us *float64) string {
	if us == nil {
		return "-"
	}
	return fmt.Sprintf("%.3f", *us)
}

// signedOrDash is a lateness in us with its sign, or "-" when absent.
func signedOrDash(us *float64) string {
	if us == nil {
		return "-"
	}
	return fmt.Sprintf("%+.3f", *us)
}

// printCompare prints the comparison tables.
func printCompare(w io.Writer, rep *hwcmp.Report, steps *hwcmp.StepReport) {
	fmt.Fprintf(w, "# replay compare: %s\n# timing: %s\n", rep.Describe(), rep.Timing())
	if k := rep.Input.Kernel; k != "" {
		fmt.Fprintf(w, "# recorded with kernel %s\n", k)
	}
	if rep.KernelNote != "" {
		fmt.Fprintf(w, "# note: %s\n", rep.KernelNote)
	}
	fmt.Fprintf(w, "# err = (sim - hw) / hw; NCCL's column against the simulation at the tuner's choice (sim_nccl)\n#\n")
	fmt.Fprintf(w, "# %-13s %11s %-6s %-6s %3s %10s %10s %8s | %-6s %3s %10s %10s %8s  %s\n",
		"op", "size(B)", "algo", "proto", "ch", "hw_us", "sim_us", "err", "tuner", "ch", "nccl_us", "sim_nccl", "err", "note")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "  %-13s %11d %-6s %-6s %3d %10.2f %10.2f %8s | %-6s %3d %10s %10s %8s  %s\n",
			r.Coll, r.Bytes, r.SimAlgo, r.SimProto, r.SimChannels, r.HwUs, r.SimUs, pct(r.Err),
			dashIfEmpty(r.TunerProto), r.TunerChannels, usOrDash(r.NCCLUs), usOrDash(r.SimNCCLUs), pct(r.NCCLErr), strings.Join(r.Notes, "; "))
	}
	repeated := false
	for _, g := range rep.Groups {
		if g.Calls > 1 {
			repeated = true
		}
	}
	if repeated {
		fmt.Fprintf(w, "#\n# per (op, size, protocol): means over the calls\n# %-13s %11s %-6s %5s %10s %10s %8s %10s %8s\n",
			"op", "size(B)", "proto", "calls", "hw_us", "sim_us", "err", "nccl_us", "err")
		for _, g := range rep.Groups {
			fmt.Fprintf(w, "  %-13s %11d %-6s %5d %10.2f %10.2f %8s %10s %8s\n", g.Op, g.Bytes, g.Proto, g.Calls,
				g.HwUs, g.SimUs, pct(g.Err), usOrDash(g.NCCLUs), pct(g.NCCLErr))
		}
	}
	fmt.Fprintf(w, "#\n# error of the simulation (|err| median and max, bias = median signed err; small: < %d KiB;\n# steady: every size less the rows whose median repetition is over %gx the best, where there are such)\n",
		hwcmp.SmallBytes>>10, sim.DisturbedRatio)
	fmt.Fprintf(w, "# %-5s %-7s %-6s %4s %9s %9s %9s  %s\n", "vs", "proto", "bucket", "n", "median", "max", "bias", "worst")
	for _, s := range rep.Stats {
		fmt.Fprintf(w, "  %-5s %-7s %-6s %4d %8.1f%% %8.1f%% %+8.1f%%  %s\n", s.Column, s.Proto, s.Bucket, s.N, 100*s.MedianAbs, 100*s.MaxAbs, 100*s.Bias, s.Worst)
	}
	if steps == nil {
		return
	}
	fmt.Fprintf(w, "#\n# steps: %s, %d matched step(s) on the rank that started last of each call\n", steps.Path, steps.Matched)
	fmt.Fprintf(w, "# late = sim end - hw end, from the kernel start (negative: the simulator is early)\n")
	fmt.Fprintf(w, "# wait = a step's wait for its data and send credits, from its start (hw: - where the trace has no data stamps)\n")
	fmt.Fprintf(w, "# %-20s %-6s %7s %12s %10s %10s %10s %10s %10s\n", "primitive", "proto", "steps", "bytes", "hw_step_us", "sim_step_us", "hw_wait_us", "sim_wait_us", "late_us")
	for _, s := range steps.ByPrim {
		fmt.Fprintf(w, "  %-20s %-6s %7d %12d %10.3f %10.3f %10s %10s %+10.3f\n", s.Primitive, s.Protocol, s.Steps, s.Bytes, s.HwStepUs, s.SimStepUs,
			waitOrDash(s.HwWaitUs), waitOrDash(s.SimWaitUs), s.LateUs)
	}
	fmt.Fprintf(w, "#\n# per call and channel: first step's start after the kernel start (set-up), median step, lateness;\n")
	fmt.Fprintf(w, "# late_end taken apart (sim - hw, summed over the channel's steps):\n")
	fmt.Fprintf(w, "#   launch  = the set-up before the first step\n")
	fmt.Fprintf(w, "#   wait    = the steps' waits for data and credits (the link, the peer)\n")
	fmt.Fprintf(w, "#   work    = the steps' own work once their data came (the protocol: copies, flags, fences)\n")
	fmt.Fprintf(w, "#   between = the gaps between steps (a primitive call's cost)\n")
	fmt.Fprintf(w, "#   (a trace without data stamps splits no step: wait then holds the whole steps, work is -)\n")
	fmt.Fprintf(w, "# why = the part that moves the last step most the way it is off: link (wait), protocol (work),\n")
	fmt.Fprintf(w, "# launch, between, steps (unsplit), or on time (within %g us)\n", hwcmp.OnTimeUs)
	fmt.Fprintf(w, "# %5s %4s %-6s %6s %12s %9s %9s %10s %10s %9s %9s %9s %9s %9s %9s  %s\n", "call", "ch", "proto", "steps", "bytes",
		"hw_first", "sim_first", "hw_step", "sim_step", "late_med", "late_end", "launch", "wait", "work", "between", "why")
	why := map[string]int{}
	for _, s := range steps.ByChannel {
		l := s.Why
		if l == nil {
			l = &hwcmp.Lateness{Cause: "-"}
		}
		wait, work := signedOrDash(l.WaitUs), signedOrDash(l.WorkUs)
		if l.WaitUs == nil {
			wait = fmt.Sprintf("%+.3f", l.StepsUs) // the steps as a whole
		}
		why[l.Cause]++
		fmt.Fprintf(w, "  %5d %4d %-6s %6d %12d %9.3f %9.3f %10.3f %10.3f %+9.3f %+9.3f %+9.3f %9s %9s %+9.3f  %s\n", s.Call, s.Channel, s.Protocol, s.Steps, s.Bytes,
			s.FirstStartHwUs, s.FirstStartSimUs, s.HwStepUs, s.SimStepUs, s.LateUs, s.EndLateUs, l.LaunchUs, wait, work, l.BetweenUs, l.Cause)
	}
	var causes []string
	for c := range why {
		causes = append(causes, c)
	}
	slices.SortFunc(causes, func(a, b string) int {
		if why[a] != why[b] {
			return why[b] - why[a]
		}
		return strings.Compare(a, b)
	})
	fmt.Fprintf(w, "# why, over %d channel(s):", len(steps.ByChannel))
	for _, c := range causes {
		fmt.Fprintf(w, " %s %d", c, why[c])
	}
	fmt.Fprintln(w)
	for _, m := range steps.Mismatched {
		fmt.Fprintf(w, "# step count differs: %s\n", m)
	}
}

// dashIfEmpty is s, or "-" when empty.
func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// compareCallJSON is one call of --json.
type compareCallJSON struct {
	Index         int64     `json:"index"`
	Comm          string    `json:"comm,omitempty"`
	Op            string    `json:"op"`
	Bytes         int64     `json:"bytes"`
	Count         int64     `json:"count"`
	Dtype         string    `json:"dtype"`
	Algo          string    `json:"algo"`
	Proto         string    `json:"proto"`
	NChannels     int       `json:"nchannels"`
	RecordedProto string    `json:"recorded_proto,omitempty"`
	RecordedCh    int       `json:"recorded_nchannels,omitempty"`
	TunerAlgo     string    `json:"tuner_algo,omitempty"`
	TunerProto    string    `json:"tuner_proto,omitempty"`
	TunerCh       int       `json:"tuner_nchannels,omitempty"`
	HwUs          float64   `json:"hw_us"`
	SimUs         float64   `json:"sim_us"`
	Err           float64   `json:"err"`
	NCCLUs        *float64  `json:"nccl_us,omitempty"`
	SimNCCLUs     *float64  `json:"sim_nccl_us,omitempty"`
	NCCLErr       *float64  `json:"nccl_err,omitempty"`
	Wrong         int64     `json:"wrong,omitempty"`
	NCCLWrong     int64     `json:"nccl_wrong,omitempty"`
	RankKernelUs  []float64 `json:"hw_rank_kernel_us,omitempty"`
	SimRankUs     []float64 `json:"sim_rank_kernel_us,omitempty"`
	Notes         []string  `json:"notes,omitempty"`
}

// compareGroupJSON is one (op, size, protocol) of --json.
type compareGroupJSON struct {
	Op        string   `json:"op"`
	Bytes     int64    `json:"bytes"`
	Proto     string   `json:"proto"`
	Calls     int      `json:"calls"`
	HwUs      float64  `json:"hw_us"`
	SimUs     float64  `json:"sim_us"`
	Err       float64  `json:"err"`
	BusBW     float64  `json:"busbw_GBps"`
	SimBusBW  float64  `json:"sim_busbw_GBps"`
	NCCLUs    *float64 `json:"nccl_us,omitempty"`
	SimNCCLUs *float64 `json:"sim_nccl_us,omitempty"`
	NCCLErr   *float64 `json:"nccl_err,omitempty"`
	NCCLBusBW *float64 `json:"nccl_busbw_GBps,omitempty"`
}

// compareStatJSON is one error statistic of --json.
type compareStatJSON struct {
	Versus    string  `json:"vs"`
	Proto     string  `json:"proto"`
	Bucket    string  `json:"bucket"`
	N         int     `json:"n"`
	MedianAbs float64 `json:"median_abs_err"`
	MaxAbs    float64 `json:"max_abs_err"`
	Bias      float64 `json:"bias"`
	Worst     string  `json:"worst"`
}

// compareJSON is the --json document.
type compareJSON struct {
	Input     string             `json:"input"`
	Kind      string             `json:"kind"`
	NRanks    int                `json:"nranks"`
	Topology  string             `json:"topology"`
	Settings  string             `json:"settings"`
	Calib     string             `json:"calibration"`
	Kernel    string             `json:"kernel,omitempty"`
	Note      string             `json:"kernel_note,omitempty"`
	Timing    string             `json:"timing"`
	Transport string             `json:"transport"`
	Calls     []compareCallJSON  `json:"calls"`
	Groups    []compareGroupJSON `json:"groups"`
	Stats     []compareStatJSON  `json:"stats"`
	Steps     *hwcmp.StepReport  `json:"steps,omitempty"`
}

// optF is a pointer to v rounded, nil when v is absent (NaN, zero).
func optF(v float64, present bool) *float64 {
	if !present || math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	r := round6(v)
	return &r
}

// round6 rounds to 6 significant decimals for stable JSON.
func round6(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*1e6) / 1e6
}

// compareDoc builds the --json document.
func compareDoc(rep *hwcmp.Report, steps *hwcmp.StepReport) compareJSON {
	d := compareJSON{Input: rep.Input.Path, Kind: rep.Input.Kind, NRanks: rep.Input.NRanks, Topology: rep.Topology,
		Settings: rep.Settings, Calib: rep.Calib, Kernel: rep.Input.Kernel, Note: rep.KernelNote, Timing: rep.Timing(), Transport: rep.Transport, Steps: steps}
	for _, r := range rep.Rows {
		c := compareCallJSON{Index: r.Index, Op: r.Coll.String(), Bytes: r.Bytes, Count: r.Count, Dtype: r.Dtype.String(),
			Algo: r.SimAlgo, Proto: r.SimProto, NChannels: r.SimChannels, TunerAlgo: r.TunerAlgo, TunerProto: r.TunerProto,
			TunerCh: r.TunerChannels, HwUs: round6(r.HwUs), SimUs: round6(r.SimUs), Err: round6(r.Err),
			NCCLUs: optF(r.NCCLUs, r.NCCLUs > 0), SimNCCLUs: optF(r.SimNCCLUs, r.NCCLUs > 0), NCCLErr: optF(r.NCCLErr, r.NCCLUs > 0),
			Wrong: r.Wrong, NCCLWrong: r.NCCLWrong, RankKernelUs: r.RankKernelUs, SimRankUs: r.SimRankKernelUs, Notes: r.Notes}
		if r.Comm != 0 {
			c.Comm = fmt.Sprintf("%#x", r.Comm)
		}
		if r.Proto >= 0 && r.Proto.String() != r.SimProto {
			c.RecordedProto = r.Proto.String()
		}
		if r.NChannels != r.SimChannels {
			c.RecordedCh = r.NChannels
		}
		for i := range c.SimRankUs {
			c.SimRankUs[i] = round6(c.SimRankUs[i])
		}
		d.Calls = append(d.Calls, c)
	}
	for _, g := range rep.Groups {
		has := g.NCCLUs > 0
		d.Groups = append(d.Groups, compareGroupJSON{Op: g.Op, Bytes: g.Bytes, Proto: g.Proto, Calls: g.Calls,
			HwUs: round6(g.HwUs), SimUs: round6(g.SimUs), Err: round6(g.Err), BusBW: round6(g.BusBW), SimBusBW: round6(g.SimBusBW),
			NCCLUs: optF(g.NCCLUs, has), SimNCCLUs: optF(g.SimNCCLUs, has), NCCLErr: optF(g.NCCLErr, has), NCCLBusBW: optF(g.NCCLBusBW, has)})
	}
	for _, s := range rep.Stats {
		d.Stats = append(d.Stats, statJSON(s))
	}
	return d
}

// statJSON is an error statistic as --json writes it.
func statJSON(s hwcmp.Stat) compareStatJSON {
	return compareStatJSON{Versus: s.Column, Proto: s.Proto, Bucket: s.Bucket, N: s.N,
		MedianAbs: round6(s.MedianAbs), MaxAbs: round6(s.MaxAbs), Bias: round6(s.Bias), Worst: s.Worst}
}
