package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
)

const calibrateHelp = `Usage: replay calibrate --table TIMINGS.tsv [--topo FILE.xml] [--nodes N]
                        [--start CALIB.json] [--out CALIB.json] [--max-evals N] [--name NAME]

Fits the simulator's calibration constants to measured timings. TIMINGS.tsv is a
table like shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv: '#' comments, then
"coll bytes mean_us [best_us ...]" per line (nccl-tests sizes; float32, sum). Every
row is simulated with the tuner's choice on the topology the measurements come from
(--topo, default the embedded %s).

Only the constants the table can identify move: the launch cost, the per-call and
per-slice overheads, the copy throughput and the reduction cost of the protocols the
tuner picks for the rows, and the efficiency and latency of the link types their
routes cross. The fit is a deterministic Nelder–Mead search in log space minimising
the mean squared log error plus the worst one, restarted from its best
point. It prints every row with its error, the median and maximum absolute error,
and writes the calibration (with the fit's report) to --out (- for stdout).

Flags:
`

func runCalibrate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("calibrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	table := fs.String("table", "", "measured timings `TIMINGS.tsv` (required)")
	topo := fs.String("topo", "", "topology XML `FILE` the timings were measured on (default: the embedded one)")
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for")
	start := fs.String("start", "", "calibration to start from (default: embedded)")
	out := fs.String("out", "", "write the fitted calibration to `FILE.json` (- for stdout)")
	maxEvals := fs.Int("max-evals", 3000, "bound on simulated sweeps of the whole table")
	restarts := fs.Int("restarts", 3, "Nelder–Mead restarts")
	name := fs.String("name", "", "name recorded in the calibration (default: the start's)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, calibrateHelp, twinccl.DefaultTopology)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: unexpected arguments: %s", errUsage, strings.Join(pos, " "))
	}
	if *table == "" {
		return fmt.Errorf("%w: --table is required", errUsage)
	}
	if *maxEvals < 10 || *restarts < 1 {
		return fmt.Errorf("%w: --max-evals must be at least 10 and --restarts at least 1", errUsage)
	}
	ms, err := sim.ReadMeasurementsFile(*table)
	if err != nil {
		return err
	}
	var tpos []string
	if *topo != "" {
		tpos = []string{*topo}
	}
	res, err := searchTopology(tpos, *nodes)
	if err != nil {
		return err
	}
	c, _, err := loadCalib(*start, res.Cluster)
	if err != nil {
		return err
	}
	fr, err := sim.Fit(res, c, ms, sim.FitOptions{MaxEvals: *maxEvals, Restarts: *restarts,
		Progress: func(r, evals int, med, mx float64) {
			fmt.Fprintf(stderr, "calibrate: restart %d, %d evaluations: median |err| %.2f%%, max %.2f%%\n", r+1, evals, 100*med, 100*mx)
		}})
	if err != nil {
		return err
	}
	fc := fr.Calib
	if *name != "" {
		fc.Name = *name
	}
	fc.Source = fmt.Sprintf("replay calibrate --table %s on %s (%d rows)", filepath.Base(*table), res.Cluster.File, len(ms))
	fc.Fit = &sim.FitReport{Table: filepath.Base(*table), Rows: len(fr.Rows), MedianErr: fr.Median, MaxErr: fr.Max, Evals: fr.Evals}
	printComparison(stdout, fr.Rows)
	fmt.Fprintf(stdout, "# fitted: %s\n", strings.Join(fr.Params, ", "))
	fmt.Fprintf(stdout, "# median |err| %.2f%%, max |err| %.2f%% over %d rows (%d evaluations)\n", 100*fr.Median, 100*fr.Max, len(fr.Rows), fr.Evals)
	if *out == "" {
		return nil
	}
	return writeOutput(*out, stdout, fc.WriteJSON)
}

// printComparison prints simulated rows next to their measurements.
func printComparison(w io.Writer, rows []sim.Comparison) {
	fmt.Fprintf(w, "# %-14s %12s %-6s %-6s %4s %12s %12s %8s\n", "coll", "size(B)", "algo", "proto", "nch", "meas(us)", "sim(us)", "err")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-14s %12d %-6s %-6s %4d %12.2f %12.2f %+7.2f%%\n", r.Coll, r.Bytes, r.Algo, r.Proto, r.NChannels, r.MeanUs, r.SimUs, 100*r.Err)
	}
}
