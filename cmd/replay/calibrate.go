package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
	"github.com/twinccl/twinccl/internal/manifest"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

const calibrateHelp = `Usage: replay calibrate [--table] TABLE [--table TABLE ...] [--heldout TABLE ...]
                        [--topo FILE.xml] [--nodes N] [--params REGEX]
                        [--start CALIB.json] [--set KEY=VALUE ...] [--out CALIB.json] [--max-evals N] [--name NAME]
                        [--column ours|nccl] [--env KEY=VALUE ...] [--loss squares|abs] [--evaluate] [--progress]
                        [--method coordinate|neldermead|cmaes|lbfgs|bfgs] [--restarts N] [--starts N]

Fits the simulator's calibration constants to measured timings. A TABLE is
FILE[,KEY=VALUE...]: a timing table like shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv
or testdata/nccl-timings/*.tsv ('#' comments, then "coll bytes mean_us [best_us ...]" per
line; nccl-tests sizes; float32, sum). A header comment "settings: K=V ..." gives the
NCCL_* environment the table was recorded under (NCCL_PROTO, NCCL_P2P_DISABLE,
NCCL_SHM_DISABLE, NCCL_SOCKET_IFNAME, ...), and a header naming PyTorch its timing
harness; KEY=VALUE pairs add or override settings (harness=nccl-tests|pytorch|run-gpu,
with @MACHINE for that harness on another machine than the calibration's: its cost per
call is then a constant of its own, harness_us.NAME@MACHINE, which the fit moves and
which is NAME's until set; timing=eager fits the fifth column, the eager loops' times,
simulated with the host issuing every call: host_call_us),
colls=all_reduce+broadcast keeps only those collectives' rows, minbytes=32M only the
sizes of 32 MiB or more (e.g. the bandwidth-bound rows of a table whose small sizes
were timed with another launch method) and maxbytes=1G those of 1 GiB or less, and
topo=FILE.xml gives the table a topology of its own (to fit measurements of several
machines at once). Every row is simulated with the search, tuner and transports its settings
give, on the topology the measurements come from (topo=, else --topo, default the
embedded %s).

A TABLE may also be a hardware recording (FILE.json written by "run gpu --json", or a
call trace FILE.parquet written by "run gpu --trace"; see "replay compare"): its rows
are fitted in the column --column names, or col=ours|nccl in the TABLE argument:
"ours" is our executor's time (time_us; a trace's kernel time of the rank that started
last, against the simulated kernel time) simulated at the algorithm, protocol and
channels the row was recorded with; "nccl" is NCCL's time (nccl_time_us) at the tuner's
choice, plus the calibration's harness_us.run-gpu (run gpu's loop on the device's
libnccl). A recording has no settings header: give the NCCL_* settings it was recorded
under with --env KEY=VALUE (applied to every recording) or KEY=VALUE in the argument,
e.g. testdata/hw/h200x2/p2p-allreduce.json,col=ours,NCCL_NVLS_ENABLE=0. AlltoAll and
SendRecv rows run on NCCL's p2p schedule; the AlltoAll of our GIN engine has only its
NCCL column here (testdata/hw/h200x2/gin/a2a.json,col=nccl).

Only the constants the fitted tables can identify move: the launch cost, the per-call
and per-slice overheads, the cost of each primitive kind's first call in a call and its
growth with NCCL's block size for the call (first_op_us, thread_op_us, rate_threads),
the copy throughput and the load, store and reduction costs of the protocols the tuner
picks (and the link efficiency of LL's and LL128's lines), the efficiency and latency
of the link types the routes cross, and, where the tables exercise them, the cost of
NCCL's direct primitives (simple.direct_us), the host memory costs (SHM, NET staged
through host memory: LL's rounds of loads, a receive right after a send into it, a
reduction of data loaded from it, host memory's cache of the buffers a call cycles
through), the SHM and network latencies (and how much later a Simple slice posted through
SHM host memory is seen, simple.host_post_us), the socket proxies' costs,
what a step that receives and sends on to a peer GPU adds (forward_us: rings of more
than two ranks, and a two-rank AllReduce's one such step; relay_us: how much later such
a step of a ring of three or more ranks is seen, a latency that holds no lane, and
relay_hold_us: what it holds its lane), the copy share of a p2p
channel's lanes (AlltoAll, SendRecv rows) and the harness's cost per call. --params restricts the fit to the constants whose names
match REGEX (fit in stages: P2P tables first, then SHM and NET ones with --start). The
fit is a deterministic search in log space run by gonum.org/v1/gonum/optimize (--method:
coordinate, the default, a coordinate search with half of --max-evals, then Nelder–Mead
with the rest; neldermead, Nelder–Mead alone; cmaes, CMA-ES with a fixed seed; lbfgs or
bfgs on a finite-difference gradient), its points kept within each constant's bounds (a
line protocol's link efficiency, for one, at most 1.25), minimising the mean over tables
of the mean squared log error, plus the worst row's, restarted --restarts times from its
best point with a smaller step (--max-evals counts every simulation of the tables once);
--loss abs minimises the mean over tables of the mean absolute log error instead, with
no worst-row term: for recordings whose rows move between starts of the machine far
more than the model errs (sockets over a host's loopback), which squares chase.

It prints every row with its error (a row whose mean is more than 25%% above its best
repetition is marked disturbed, with its error against the best), per-table median and
maximum absolute errors, then
the --heldout tables predicted with the fitted constants (cross-validation), and writes
the calibration (with the fit's report, held-out tables included) to --out (- for stdout).
It also prints the loss it reached (in the report: loss, loss_kind): the search stops at
a local minimum, so fits of the same tables from different --start files (e.g. one with
constants that pull against each other moved together) are compared by it, lowest first.
--starts N searches N further starting points besides --start's values, each with every
constant moved by a factor of 1.25 or 0.8 in a pattern of its own (the same on every run),
and keeps the lowest loss: N+1 times the evaluations.
--set KEY=VALUE changes a constant of the start before the fit (a new constant's starting
value, e.g. launch_channel_us=0.02, or a switch, net_socket.host_fixed_recv=true): KEY is its
JSON path in the calibration file, VALUE a JSON value; a key the format does not know or a
value out of its bounds is an error.
--evaluate fits nothing and prints every table's errors under the --start calibration,
and the loss over the --table tables (with --out, it writes the start calibration with
those errors in its report).

A fit takes minutes: on a terminal, or with --progress, it says on stderr what it
is doing ("calibrate: table 3/12 net-allgather.json:ours", then "calibrate:
evaluation 120, loss 0.034900, 35 s", and the errors after every restart), never
on stdout.

Flags:
`

// tableList collects repeated --table/--heldout flags.
type tableList []string

func (t *tableList) String() string     { return strings.Join(*t, " ") }
func (t *tableList) Set(v string) error { *t = append(*t, v); return nil }

func runCalibrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var tables, heldout tableList
	fs.Var(&tables, "table", "measured timings `FILE[,K=V...]` to fit (repeatable)")
	fs.Var(&heldout, "heldout", "measured timings `FILE[,K=V...]` to predict only (repeatable)")
	topo := fs.String("topo", "", "topology XML `FILE` the timings were measured on (default: the embedded one)")
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for")
	start := fs.String("start", "", "calibration to start from: "+calibFlagHelp)
	var sets tableList
	fs.Var(&sets, "set", "start the fit with constant `KEY=VALUE` (a JSON path and value, e.g. ll.copy_GBps=13.5 or launch_channel_us=0.02; repeatable)")
	out := fs.String("out", "", "write the fitted calibration to `FILE.json` (- for stdout)")
	maxEvals := fs.Int("max-evals", 3000, "bound on simulated sweeps of all the tables")
	restarts := fs.Int("restarts", 3, "runs of the --method per start, each from the best point yet")
	methodName := fs.String("method", sim.MethodCoordinate.String(), "optimiser: `coordinate` (coordinate search, then Nelder–Mead), neldermead, cmaes (CMA-ES), lbfgs or bfgs (finite-difference gradient)")
	starts := fs.Int("starts", 0, "further starting points `N`, each every constant moved by ×1.25 or ×0.8 in a pattern of its own, searched with --max-evals of its own; the lowest loss wins")
	params := fs.String("params", "", "fit only the constants whose names match `REGEX`")
	name := fs.String("name", "", "name recorded in the calibration (default: the start's)")
	evaluate := fs.Bool("evaluate", false, "fit nothing: predict every table with the --start calibration")
	column := fs.String("column", hwcmp.ColOurs, "column of hardware recordings to fit: ours (time_us) or nccl (nccl_time_us)")
	env := envFlags{}
	fs.Var(env, "env", "NCCL_* setting `KEY=VALUE` of the hardware recordings (repeatable)")
	loop := fs.Int("loop", sim.DefaultLoopCalls, "simulate each measured row as a loop of `N` timed calls back to back after an aligning one, as the harness ran it (0: one isolated call)")
	lossName := fs.String("loss", "squares", "what the fit minimises: `squares` (mean squared log error plus the worst row's) or abs (mean absolute log error)")
	p2pRead := fs.String("p2p-read", "", "collectives whose Simple P2P steps run in read mode (`C1,C2`: twinccl's executor runs Broadcast,Reduce so); recorded in the calibration")
	progress := fs.Bool("progress", false, "report the fit's progress on stderr even when it is not a terminal (a line a second at most)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, calibrateHelp, twinccl.DefaultTopology)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	tables = append(tables, pos...)
	if len(tables) == 0 {
		return fmt.Errorf("%w: give at least one table (--table FILE)", errUsage)
	}
	if !*evaluate {
		if err := manifest.CheckFitting(tables); err != nil {
			return err // testdata/manifest.tsv: eval files are never fitted
		}
	}
	if err := checkLoop(*loop); err != nil {
		return err
	}
	loss, err := sim.ParseFitLoss(*lossName)
	if err != nil {
		return fmt.Errorf("%w: --loss: %v", errUsage, err)
	}
	method, err := sim.ParseFitMethod(*methodName)
	if err != nil {
		return fmt.Errorf("%w: --method: %v", errUsage, err)
	}
	if *maxEvals < 10 || *restarts < 1 {
		return fmt.Errorf("%w: --max-evals must be at least 10 and --restarts at least 1", errUsage)
	}
	if *starts < 0 || *starts > maxStarts {
		return fmt.Errorf("%w: --starts must be from 0 to %d", errUsage, maxStarts)
	}
	var only func(string) bool
	if *params != "" {
		re, err := regexp.Compile(*params)
		if err != nil {
			return fmt.Errorf("%w: --params: %v", errUsage, err)
		}
		only = re.MatchString
	}
	var tpos []string
	if *topo != "" {
		tpos = []string{*topo}
	}
	prog := newProgressLine(stderr, *progress, "calibrate")
	defer prog.done()
	loaded, toLoad := 0, len(tables)+len(heldout)
	load := func(specs []string) ([]sim.FitTable, []*sim.Table, error) {
		var fts []sim.FitTable
		var tbs []*sim.Table
		for _, spec := range specs {
			loaded++
			prog.report("table %d/%d %s, %s", loaded, toLoad, strings.Split(spec, ",")[0], prog.elapsed())
			tb, err := parseCalibTable(spec, *column, env)
			if err != nil {
				return nil, nil, err
			}
			pos := tpos
			if tb.Topo != "" {
				pos = []string{tb.Topo}
			}
			res, err := searchTable(pos, *nodes, tb)
			if err != nil {
				return nil, nil, err
			}
			ft := sim.NewFitTable(tb, res)
			ft.Loop = *loop
			fts = append(fts, ft)
			tbs = append(tbs, tb)
		}
		return fts, tbs, nil
	}
	fit, fitTabs, err := load(tables)
	if err != nil {
		return err
	}
	held, heldTabs, err := load(heldout)
	if err != nil {
		return err
	}
	c, startName, err := loadCalib(*start, fit[0].Res.Cluster)
	if err != nil {
		return err
	}
	if len(sets) > 0 {
		if c, err = c.With(sets); err != nil {
			return fmt.Errorf("%w: --%v", errUsage, err)
		}
	}
	if *p2pRead != "" {
		c.P2PRead = nil
		for _, n := range strings.Split(*p2pRead, ",") {
			coll, err := model.ParseCollective(n)
			if err != nil {
				return fmt.Errorf("%w: --p2p-read: %v", errUsage, err)
			}
			c.P2PRead = append(c.P2PRead, coll.String())
		}
		if c.Version < sim.CalibVersion {
			c.Version = sim.CalibVersion
		}
	}
	if *evaluate {
		prog.report("simulating %d tables, %s", len(fit)+len(held), prog.elapsed())
		rows, tfs, err := sim.PredictTables(append(fit, held...), c)
		if err != nil {
			return err
		}
		prog.done()
		printComparison(stdout, rows)
		all := append(fitTabs, heldTabs...)
		rep := &sim.FitReport{}
		if c.Fit != nil {
			*rep = *c.Fit
		}
		rep.Tables = nil
		for i, tf := range tfs {
			tf = all[i].Describe(tf)
			tf.Fitted = i < len(fitTabs)
			rep.Tables = append(rep.Tables, tf)
			role := "fitted"
			if !tf.Fitted {
				role = "heldout"
			}
			fmt.Fprintf(stdout, "# %-48s %-7s %5d %8.2f%% %8.2f%%\n", tf.Table, role, tf.Rows, 100*tf.MedianErr, 100*tf.MaxErr)
		}
		if len(fit) > 0 {
			l, err := sim.TablesLoss(fit, c, loss)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "# loss (%s) over the fitted tables: %.6f\n", loss, l)
		}
		if *out == "" {
			return nil
		}
		// --out records the tables' errors (--table ones as the fitted
		// tables, --heldout ones as held out) in the start's report.
		c.Fit = rep
		return writeOutput(*out, stdout, c.WriteJSON)
	}
	opts := sim.FitOptions{MaxEvals: *maxEvals, Restarts: *restarts, Only: only, Loss: loss, Starts: *starts, Method: method}
	if prog != nil {
		// the restarts' errors are kept as lines of their own; the
		// evaluations are redrawn
		opts.Progress = func(r, evaluated int, med, mx float64) {
			fmt.Fprintf(prog, "calibrate: restart %d after %d evaluations: median |err| %.2f%%, max %.2f%%, %s\n", r+1, evaluated, 100*med, 100*mx, prog.elapsed())
		}
		opts.Step = func(n int, lowest float64) {
			prog.report("evaluation %d, loss %.6f, %s", n, lowest, prog.elapsed())
		}
	}
	fr, err := sim.FitTables(fit, c, opts)
	prog.done()
	if err != nil {
		return err
	}
	fc := fr.Calib
	if *name != "" {
		fc.Name = *name
	}
	var names []string
	for _, tb := range fitTabs {
		names = append(names, tb.Name)
	}
	rows := 0
	for _, ft := range fit {
		rows += len(ft.Rows)
	}
	fc.Source = fmt.Sprintf("replay calibrate %s on %s (%d rows) from %s", strings.Join(names, " "), fit[0].Res.Cluster.File, rows, startName)
	if len(c.P2PRead) > 0 {
		fc.Source += ", p2p_read " + strings.Join(c.P2PRead, ",")
	}
	if *params != "" {
		fc.Source += fmt.Sprintf(", --params '%s'", *params)
	}
	if len(heldTabs) > 0 {
		var hn []string
		for _, tb := range heldTabs {
			hn = append(hn, tb.Name)
		}
		fc.Source += ". Held out: " + strings.Join(hn, " ")
	}
	rep := &sim.FitReport{Table: strings.Join(names, ","), Rows: len(fr.Rows), MedianErr: fr.Median, MaxErr: fr.Max, Evals: fr.Evals,
		Loss: fr.Loss, LossKind: loss.String()}
	for i, tf := range fr.Tables {
		tf = fitTabs[i].Describe(tf)
		rep.Tables = append(rep.Tables, tf)
	}
	printComparison(stdout, fr.Rows)
	fmt.Fprintf(stdout, "# fitted: %s\n", strings.Join(fr.Params, ", "))
	fmt.Fprintf(stdout, "# median |err| %.2f%%, max |err| %.2f%% over %d rows (%d evaluations); loss (%s) %.6f\n",
		100*fr.Median, 100*fr.Max, len(fr.Rows), fr.Evals, loss, fr.Loss)
	if len(held) > 0 {
		hrows, htf, err := sim.PredictTables(held, fc)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "#\n# held-out tables (predicted, not fitted)\n")
		printComparison(stdout, hrows)
		for i, tf := range htf {
			tf = heldTabs[i].Describe(tf)
			rep.Tables = append(rep.Tables, tf)
		}
	}
	fmt.Fprintf(stdout, "#\n# %-34s %-7s %5s %9s %9s\n", "table", "role", "rows", "median", "max")
	for _, tf := range rep.Tables {
		role := "fitted"
		if !tf.Fitted {
			role = "heldout"
		}
		fmt.Fprintf(stdout, "# %-34s %-7s %5d %8.2f%% %8.2f%%\n", tf.Table, role, tf.Rows, 100*tf.MedianErr, 100*tf.MaxErr)
	}
	fc.Fit = rep
	if *out == "" {
		return nil
	}
	return writeOutput(*out, stdout, fc.WriteJSON)
}

// parseCalibTable reads a TABLE argument: a timing table
// (sim.ParseTableSpec), or a hardware recording (hwcmp.IsInput) fitted in
// column col (col= in the argument wins) under the settings env (the
// argument's KEY=VALUE words win).
func parseCalibTable(spec, col string, env map[string]string) (*sim.Table, error) {
	parts := strings.Split(spec, ",")
	if !hwcmp.IsInput(parts[0]) {
		return sim.ParseTableSpec(spec)
	}
	var rest []string
	for _, p := range parts[1:] {
		if v, ok := strings.CutPrefix(p, "col="); ok {
			col = v
			continue
		}
		rest = append(rest, p)
	}
	in, err := hwcmp.Open(parts[0])
	if err != nil {
		return nil, err
	}
	tb, err := hwcmp.Table(in, col, env)
	if err != nil {
		return nil, err
	}
	if err := tb.ApplySpec(rest); err != nil {
		return nil, fmt.Errorf("table %s: %w", parts[0], err)
	}
	return tb, nil
}

// searchTable runs the search on the topology (pos, nodes) under a
// table's settings.
func searchTable(pos []string, nodes int, tb *sim.Table) (*search.Result, error) {
	if nodes < 1 || nodes > model.MaxClusterNodes {
		return nil, fmt.Errorf("%w: --nodes %d: must be between 1 and %d", errUsage, nodes, model.MaxClusterNodes)
	}
	params, err := model.ParamsFromEnv(tb.Lookup)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", tb.Name, err)
	}
	opts, err := search.OptionsFromEnv(tb.Lookup)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", tb.Name, err)
	}
	cl, err := loadCluster(pos, nodes, params)
	if err != nil {
		return nil, err
	}
	res, err := search.Run(cl, opts)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", tb.Name, err)
	}
	return res, nil
}

// printComparison prints simulated rows next to their measurements.
func printComparison(w io.Writer, rows []sim.Comparison) {
	fmt.Fprintf(w, "# %-22s %-14s %12s %-6s %-6s %4s %12s %12s %8s\n", "table", "coll", "size(B)", "algo", "proto", "nch", "meas(us)", "sim(us)", "err")
	for _, r := range rows {
		note := ""
		if r.Noisy() {
			// The fit aims below such a mean (sim.NoisyRatio times the
			// best); the error column stays against the mean.
			note = fmt.Sprintf("  disturbed: mean %.0f%% above the best repetition, %.2f us (%+.2f%% against it)",
				100*(r.MeanUs/r.BestUs-1), r.BestUs, 100*(r.SimUs/r.BestUs-1))
		}
		fmt.Fprintf(w, "  %-22s %-14s %12d %-6s %-6s %4d %12.2f %12.2f %+7.2f%%%s\n", r.Table, r.Coll, r.Bytes, r.Algo, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err, note)
	}
}

// maxStarts bounds --starts: each start costs a whole search.
const maxStarts = 32
