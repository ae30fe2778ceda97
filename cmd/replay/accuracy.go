package main

import (
	"cmp"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/internal/manifest"
	"github.com/twinccl/twinccl/model"
)

const accuracyHelp = `Usage: replay accuracy [--manifest FILE] [--out FILE.md] [--svg-dir DIR]

Writes the simulator's accuracy report (docs/accuracy.md, and its plots
docs/accuracy-*.svg) from the manifest of recordings (testdata/manifest.tsv):
the simulation of every eval recording that the manifest reports (its
"report" column: the topology and hosts it is simulated on), against NCCL's
column and against our executor's, with the median and largest |error| per
machine, transport, protocol and collective, and beside them the hardware's
own start-to-start repeatability (hwcmp.Floors) where a machine has several
starts; then NCCL's eval timing tables and the published tables, each
against its own measurements. Files whose role is fit are never reported.
The output is the same, byte for byte, on every run: it has no date but the
manifest's and no path but the repository's.

Flags:
`

// accuracySVGs are the recordings plotted (busbw against size, measured and
// simulated): eval recordings of the set, named for their plot.
var accuracySVGs = []struct{ path, name string }{
	{"testdata/hw/h100x2/rerun38/heldout/p2p-allreduce-ll128.json", "accuracy-h100x2-rerun38-p2p-allreduce-ll128.svg"},
	{"testdata/hw/h200x2/heldout/p2p-allgather-simple.json", "accuracy-h200x2-heldout-p2p-allgather-simple.svg"},
}

func runAccuracy(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("accuracy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	man := fs.String("manifest", "", "the manifest `FILE` (default: testdata/manifest.tsv of the repository the working directory is in)")
	out := fs.String("out", "", "write the report to `FILE.md` (- for stdout; default: docs/accuracy.md beside the manifest's testdata)")
	svgDir := fs.String("svg-dir", "", "write the plots into `DIR` (default: the report's directory; - for none)")
	fs.Usage = func() {
		fmt.Fprint(stderr, accuracyHelp)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return fmt.Errorf("%w: replay accuracy takes no arguments, got %q", errUsage, pos)
	}
	if *man == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root, err := manifest.FindRoot(wd)
		if err != nil {
			return fmt.Errorf("%w: %v (give --manifest)", errUsage, err)
		}
		*man = filepath.Join(root, filepath.FromSlash(manifest.Path))
	}
	m, err := manifest.Load(*man)
	if err != nil {
		return err
	}
	// The manifest's paths are relative to the repository: the directory
	// above its testdata/.
	root := filepath.Dir(filepath.Dir(*man))
	if *out == "" {
		*out = filepath.Join(root, "docs", "accuracy.md")
	}
	if *svgDir == "" && *out != "-" {
		*svgDir = filepath.Dir(*out)
	}
	rep, err := buildAccuracy(root, m)
	if err != nil {
		return err
	}
	var svgs []string
	if *svgDir != "-" && *svgDir != "" {
		for _, s := range rep.plots {
			if err := atomicfile.Write(filepath.Join(*svgDir, s.name), func(w io.Writer) error { return hwcmp.WriteSVG(w, s.rep, s.title) }); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			svgs = append(svgs, s.name)
		}
	}
	if err := writeOutput(*out, stdout, func(w io.Writer) error { return rep.write(w) }); err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(stdout, "replay accuracy: wrote %s (%d recordings, %d tables, %d published)", *out, len(rep.files), len(rep.tables), len(rep.published))
		if len(svgs) > 0 {
			fmt.Fprintf(stdout, " and %s", strings.Join(svgs, ", "))
		}
		fmt.Fprintln(stdout)
	}
	return nil
}

// accFile is one reported recording, compared.
type accFile struct {
	entry manifest.Entry
	rep   *hwcmp.Report
	// ncclCalib and oursCalib name the columns' calibrations.
	ncclCalib, oursCalib string
	// oursBuild says our executor's column was recorded by the build the
	// calibration of our column was fitted on (its kernel); otherwise the
	// column is left out.
	oursBuild bool
	// kernels are those the calibration of our column was fitted on.
	kernels []string
}

// accTable is one reported timing table (NCCL's column only).
type accTable struct {
	entry      manifest.Entry
	name       string
	calib      string
	rows, left int
	median     float64
	max        float64
	source     string
}

// accPlot is a plot to write.
type accPlot struct {
	name, title string
	rep         *hwcmp.Report
}

// accuracyReport is everything the report says.
type accuracyReport struct {
	m         *manifest.Manifest
	files     []*accFile
	tables    []accTable
	published []accTable
	plots     []accPlot
	// builds are the kernels our column's calibrations were fitted on.
	builds []string
	floors map[accKey]hwcmp.GroupFloor
}

// accKey is a cell of the detailed table.
type accKey = hwcmp.GroupKey

// buildAccuracy simulates every reported eval entry of m (paths relative
// to root).
func buildAccuracy(root string, m *manifest.Manifest) (*accuracyReport, error) {
	r := &accuracyReport{m: m}
	var hw, tabs, pubs []manifest.Entry
	for _, e := range m.Entries {
		if !e.Reported() {
			continue
		}
		switch {
		case strings.HasPrefix(e.Path, "testdata/published/"):
			pubs = append(pubs, e)
		case strings.HasSuffix(e.Path, ".json"):
			hw = append(hw, e)
		default:
			tabs = append(tabs, e)
		}
	}
	if err := compareEntries(root, hw, r); err != nil {
		return nil, err
	}
	for _, f := range r.files {
		for _, k := range f.kernels {
			if !slices.Contains(r.builds, k) {
				r.builds = append(r.builds, k)
			}
		}
	}
	slices.Sort(r.builds)
	for _, e := range tabs {
		t, err := compareTable(root, e)
		if err != nil {
			return nil, err
		}
		r.tables = append(r.tables, t)
	}
	for _, e := range pubs {
		t, err := compareTable(root, e)
		if err != nil {
			return nil, err
		}
		r.published = append(r.published, t)
	}
	r.floors = accuracyFloors(r.files, r.builds)
	for _, p := range accuracySVGs {
		i := slices.IndexFunc(r.files, func(f *accFile) bool { return f.entry.Path == p.path })
		if i < 0 {
			return nil, fmt.Errorf("plot %s: %s is not a reported eval recording of %s", p.name, p.path, m.File)
		}
		f := r.files[i]
		title := fmt.Sprintf("%s on %s: %s (%s, %s)", opsOf(f.rep), f.entry.Machine, strings.TrimPrefix(f.entry.Path, "testdata/hw/"), f.entry.Set, f.entry.Date)
		r.plots = append(r.plots, accPlot{name: p.name, title: title, rep: f.rep})
	}
	return r, nil
}

// firstError is the first non-nil error of errs.
func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// reportTopology reads the topology of a report option ("embedded": the
// default one) and names it as the report does.
func reportTopology(root, topo string) (*model.Element, string, error) {
	if topo == "" || topo == "embedded" {
		return readTopologyRoot("")
	}
	el, _, err := readTopologyRoot(filepath.Join(root, filepath.FromSlash(topo)))
	return el, topo, err
}

// accInput is a reported recording, opened, and how it is simulated.
type accInput struct {
	entry manifest.Entry
	in    *hwcmp.Input
	topo  string
	nodes int
	// settings are the NCCL_* settings it recorded (nothing of the
	// environment); calib names the embedded calibration of its GPUs.
	settings map[string]string
	calib    string
}

// key is what the inputs that share a comparer have in common: the
// topology, hosts, settings (less NCCL_TOPO_DUMP_FILE, where the run wrote
// its topology, which changes nothing simulated) and calibration.
func (a *accInput) key() string {
	var kv []string
	for k, v := range a.settings {
		if k != "NCCL_TOPO_DUMP_FILE" {
			kv = append(kv, k+"="+v)
		}
	}
	slices.Sort(kv)
	return fmt.Sprintf("%s|%d|%s|%s", a.topo, a.nodes, a.calib, strings.Join(kv, " "))
}

// openEntry opens a reported recording and reads its report options.
func openEntry(root string, e manifest.Entry) (*accInput, error) {
	in, err := hwcmp.Open(filepath.Join(root, filepath.FromSlash(e.Path)))
	if err != nil {
		return nil, err
	}
	in.Path = e.Path
	a := &accInput{entry: e, in: in, topo: e.ReportOption("topo"), settings: map[string]string{}}
	if a.nodes, err = reportNodes(e); err != nil {
		return nil, err
	}
	for k, v := range in.NCCLEnv {
		if k != "NCCL_VERSION" {
			a.settings[k] = v
		}
	}
	if a.calib = sim.CalibNameForGPUs(in.GPUs); a.calib == "" {
		a.calib = sim.DefaultCalibName
	}
	return a, nil
}

// compareEntries simulates the reported recordings hw into r.files (in
// hw's order): each recording as its report options say (topology,
// hosts), under the NCCL_* settings it recorded, with the embedded
// calibration measured on its GPUs (NCCL's column) and that of our
// kernels for them (ours), as replay compare does by default. The
// recordings that share a comparer (accInput.key) are compared one after
// the other with it; the groups run in parallel.
func compareEntries(root string, hw []manifest.Entry, r *accuracyReport) error {
	inputs := make([]*accInput, len(hw))
	errs := make([]error, len(hw))
	parallel(len(hw), func(i int) {
		if inputs[i], errs[i] = openEntry(root, hw[i]); errs[i] != nil {
			errs[i] = fmt.Errorf("%s (%s:%d): %w", hw[i].Path, manifest.Path, hw[i].Line, errs[i])
		}
	})
	if err := firstError(errs); err != nil {
		return err
	}
	groups := map[string][]int{}
	var keys []string
	for i, a := range inputs {
		k := a.key()
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	slices.Sort(keys)
	r.files = make([]*accFile, len(hw))
	var cc hwcmp.CalibCache
	parallel(len(keys), func(g int) {
		idx := groups[keys[g]]
		cp, f0, err := newAccComparer(root, inputs[idx[0]], &cc)
		for _, i := range idx {
			if err != nil {
				errs[i] = err
				continue
			}
			a := inputs[i]
			f := *f0
			f.entry = a.entry
			f.oursBuild = f0.oursCalib != "" && a.in.Kernel != "" && slices.Contains(f0.kernels, a.in.Kernel)
			if f.rep, errs[i] = cp.Compare(a.in); errs[i] == nil {
				r.files[i] = &f
			}
		}
		for _, i := range idx {
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s (%s:%d): %w", hw[i].Path, manifest.Path, hw[i].Line, errs[i])
			}
		}
	})
	return firstError(errs)
}

// newAccComparer builds the comparer of a's group, and the file record
// its members share (calibrations, our calibration's fitted kernels).
func newAccComparer(root string, a *accInput, cc *hwcmp.CalibCache) (*hwcmp.Comparer, *accFile, error) {
	el, topo, err := reportTopology(root, a.topo)
	if err != nil {
		return nil, nil, err
	}
	if a.nodes > 1 && a.in.NRanks%a.nodes == 0 {
		model.KeepRanks(el, a.in.NRanks/a.nodes)
	}
	c, err := cc.Get(a.calib)
	if err != nil {
		return nil, nil, err
	}
	cp, err := hwcmp.NewComparerNodes(el, topo, a.nodes, a.settings, c, sim.EmbeddedPrefix+a.calib)
	if err != nil {
		return nil, nil, err
	}
	if a.nodes > 1 {
		cp.Topology = fmt.Sprintf("%s as %d hosts of %d GPU(s)", cp.Topology, a.nodes, cp.Sim.Machine.Cluster.NRanks/a.nodes)
	}
	cp.Sim.Loop = sim.DefaultLoopCalls
	f := &accFile{ncclCalib: sim.EmbeddedPrefix + a.calib}
	if ours := hwcmp.OursCalibName(a.calib); ours != "" {
		oc, err := cc.Get(ours)
		if err != nil {
			return nil, nil, err
		}
		if cp, err = cp.WithOursCalib(oc, sim.EmbeddedPrefix+ours); err != nil {
			return nil, nil, err
		}
		f.oursCalib = sim.EmbeddedPrefix + ours
		f.kernels = hwcmp.FittedBuilds(oc)
	}
	return cp, f, nil
}

// parallel runs do(0..n-1) on GOMAXPROCS workers.
func parallel(n int, do func(i int)) {
	work := make(chan int)
	var wg sync.WaitGroup
	for range max(1, min(n, runtime.GOMAXPROCS(0))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				do(i)
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

// reportNodes is an entry's nodes= option: the hosts of one topology a
// table or recording ran on (1 without it).
func reportNodes(e manifest.Entry) (int, error) {
	v := e.ReportOption("nodes")
	if v == "" {
		return 1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > model.MaxClusterNodes {
		return 0, fmt.Errorf("report option nodes=%s: want a number of hosts from 1 to %d", v, model.MaxClusterNodes)
	}
	return n, nil
}

// compareTable simulates a timing table (NCCL's timings, or a published
// table) as its report options say: replay calibrate's table options, on
// topo= (embedded: the default topology), with calib= (default: the
// embedded h200.json, the default calibration of sm90).
func compareTable(root string, e manifest.Entry) (accTable, error) {
	fail := func(err error) (accTable, error) {
		return accTable{}, fmt.Errorf("%s (%s:%d): %w", e.Path, manifest.Path, e.Line, err)
	}
	spec := []string{filepath.Join(root, filepath.FromSlash(e.Path))}
	for _, kv := range e.ReportOptions() {
		if k, _, _ := strings.Cut(kv, "="); k != "topo" && k != "calib" && k != "nodes" {
			spec = append(spec, kv)
		}
	}
	tb, err := sim.ParseTableSpec(strings.Join(spec, ","))
	if err != nil {
		return fail(err)
	}
	el, topo, err := reportTopology(root, e.ReportOption("topo"))
	if err != nil {
		return fail(err)
	}
	nodes, err := reportNodes(e)
	if err != nil {
		return fail(err)
	}
	res, err := sim.SearchTable(el, topo, nodes, tb)
	if err != nil {
		return fail(err)
	}
	calib := e.ReportOption("calib")
	if calib == "" {
		calib = sim.DefaultCalibName
	}
	c, err := sim.LoadCalib(sim.EmbeddedPrefix + calib)
	if err != nil {
		return fail(err)
	}
	ft := sim.NewFitTable(tb, res)
	ft.Loop = sim.DefaultLoopCalls
	rows, err := ft.Compare(c)
	if err != nil {
		return fail(err)
	}
	t := accTable{entry: e, name: tb.Name, calib: calib}
	var abs []float64
	for _, r := range rows {
		if sim.Disturbed(r.MeanUs, r.BestUs) {
			t.left++
			continue
		}
		abs = append(abs, math.Abs(r.Err))
	}
	t.rows = len(abs)
	if len(abs) > 0 {
		t.median, t.max = sim.Median(abs), slices.Max(abs)
	}
	t.source = tableSource(filepath.Join(root, filepath.FromSlash(e.Path)))
	return t, nil
}

// tableSource is the "# source:" line of a published table's header.
func tableSource(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if s, ok := strings.CutPrefix(l, "# source:"); ok {
			return strings.TrimSpace(s)
		}
	}
	return ""
}

// rowCol is one column of a row: its error and protocol, and whether the
// report counts it.
func rowCol(f *accFile, r *hwcmp.Row, col string) (err float64, proto string, why string) {
	err, proto = r.Err, r.SimProto
	if col == hwcmp.ColNCCL {
		err, proto = r.NCCLErr, cmp.Or(r.TunerProto, r.SimProto)
	}
	switch {
	case math.IsNaN(err) || math.IsInf(err, 0):
		return err, proto, "absent"
	case col == hwcmp.ColOurs && !f.oursBuild:
		return err, proto, "build"
	}
	return err, proto, r.Invalid(col)
}

// accuracyFloors measures the hardware's start-to-start repeatability of
// each machine's reported recordings (hwcmp.GroupFloors): per machine,
// column, transport, protocol and collective, the median and largest
// floor of the rows measured steady on two starts or more. Our column's
// cells count only for the builds of its calibrations.
func accuracyFloors(files []*accFile, builds []string) map[accKey]hwcmp.GroupFloor {
	recs := make([]hwcmp.Recorded, len(files))
	for i, f := range files {
		recs[i] = hwcmp.Recorded{Machine: f.entry.Machine, Path: f.entry.Path, Report: f.rep}
	}
	return hwcmp.GroupFloors(recs, builds)
}

// accStat is the errors of some rows.
type accStat struct {
	files, rows int
	abs         []float64
}

func (s *accStat) add(e float64) { s.abs = append(s.abs, math.Abs(e)) }

// medianMax is "M / X" of the |errors| in percent, "-" without rows.
func (s *accStat) medianMax() string {
	if len(s.abs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f / %.1f", 100*sim.Median(s.abs), 100*slices.Max(s.abs))
}

// colName is how the report names a column.
func colName(col string) string {
	if col == hwcmp.ColNCCL {
		return "NCCL"
	}
	return "ours"
}

// write writes the report as Markdown.
func (r *accuracyReport) write(w io.Writer) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	detail := map[accKey]*accStat{}
	summary := map[[3]string]*accStat{}
	left := map[string]map[string]int{hwcmp.ColNCCL: {}, hwcmp.ColOurs: {}}
	fileIn := map[any]map[string]bool{}
	count := func(k any, s *accStat, path string) {
		if fileIn[k] == nil {
			fileIn[k] = map[string]bool{}
		}
		if !fileIn[k][path] {
			fileIn[k][path] = true
			s.files++
		}
	}
	var dates []string
	var worst []accRow
	oursFiles := 0
	for _, f := range r.files {
		dates = append(dates, f.entry.Date)
		if f.oursBuild {
			oursFiles++
		}
		for i := range f.rep.Rows {
			row := &f.rep.Rows[i]
			for _, col := range []string{hwcmp.ColNCCL, hwcmp.ColOurs} {
				e, proto, why := rowCol(f, row, col)
				if why == "absent" {
					continue
				}
				if why != "" {
					left[col][why]++
					continue
				}
				k := accKey{Machine: f.entry.Machine, Column: col, Transport: f.rep.Transport, Proto: proto, Op: row.Coll.String()}
				if detail[k] == nil {
					detail[k] = &accStat{}
				}
				detail[k].add(e)
				count(k, detail[k], f.entry.Path)
				worst = append(worst, accRow{f: f, row: row, col: col, proto: proto, err: e})
				sk := [3]string{f.entry.Machine, col, f.rep.Transport}
				if summary[sk] == nil {
					summary[sk] = &accStat{}
				}
				summary[sk].add(e)
				count(sk, summary[sk], f.entry.Path)
			}
		}
	}
	slices.Sort(dates)
	evalSets := r.m.Sets(manifest.Eval)

	p("# Simulator accuracy on held-out recordings\n\n")
	p("Generated by `replay accuracy` (`make accuracy`) from `%s`; do not edit: `TestAccuracyReportIsCurrent` fails when this file\n", manifest.Path)
	p("differs from what the command writes. Every figure is the simulator's |error| (|simulated − measured| / measured, in %%)\n")
	p("on files whose role in the manifest is `eval` (evaluation sets %s): nothing here was ever read as fitting data by a fit\n", quoteJoin(evalSets))
	p("script, a calibration stage, `docs/eval-tables.txt`'s `--table` lines or a test (the manifest's rule; `replay calibrate`\n")
	p("refuses eval files as fitting tables). %d recordings of `run gpu --json`, recorded %s to %s, %d timing tables and %d published\n",
		len(r.files), first(dates), last(dates), len(r.tables), len(r.published))
	p("tables; each recording as its manifest entry's `report` column says (topology, hosts).\n\n")

	p("## Summary\n\n")
	p("Median / max |error| in %% over the eval rows of `run gpu` recordings, per machine, column and transport (every protocol,\n")
	p("collective and size; rows left out as below).\n\n")
	p("%s\n", manifest.SummaryBegin)
	p("| machine | vs | transport | files | rows | median / max error (%%) |\n|---|---|---|---:|---:|---:|\n")
	var sks [][3]string
	for k := range summary {
		sks = append(sks, k)
	}
	slices.SortFunc(sks, func(a, c [3]string) int {
		return cmp.Or(strings.Compare(a[0], c[0]), strings.Compare(colName(a[1]), colName(c[1])), strings.Compare(a[2], c[2]))
	})
	for _, k := range sks {
		s := summary[k]
		p("| %s | %s | %s | %d | %d | %s |\n", k[0], colName(k[1]), k[2], s.files, len(s.abs), s.medianMax())
	}
	p("%s\n\n", manifest.SummaryEnd)

	p("## How the rows are simulated and counted\n\n")
	p("- **Columns.** `run gpu --baseline nccl` times our executor and NCCL on the same GPUs and buffers. NCCL's column (`NCCL`) is\n")
	p("  simulated at the tuner's choice under the NCCL_* settings the recording names (`nccl_env`), with the embedded calibration\n")
	p("  measured on the recording's GPUs (`h100.json`, `h200.json`), as `replay compare` does by default; our executor's (`ours`) at\n")
	p("  the recorded algorithm, protocol and channels with the calibration of our kernels for those GPUs (`h100-twinccl.json`,\n")
	p("  `h200-twinccl.json`). Our column counts only where the recording's kernel is the one those calibrations were fitted on\n")
	p("  (%s: %d of the %d recordings); earlier builds' rows are left out (\"other build\" below).\n", quoteJoin(r.builds), oursFiles, len(r.files))
	p("- **Rows left out** (the rule of `replay compare`'s pooled statistics and of `hwcmp.Floors`): %s.\n", hwcmp.ValidRule)
	p("- **Floors** (`replay compare --starts`, `hwcmp.Floors`): a machine's starts are the directories of its reported recordings\n")
	p("  (less a trailing `proto/` or `heldout/`). A cell is one row (the same size of the same recording path below its start)\n")
	p("  measured steady on two starts or more; its floor is (max − min) / (max + min) of simulated / measured over those starts: the\n")
	p("  least largest error any prediction that differs from this simulation by one factor per row can reach on every start.\n")
	p("  Floors are the hardware's repeatability, not the simulator's error: compare a floor with the largest error, which no\n")
	p("  model that follows the simulation up to one factor per row can bring below it on every start.\n")
	p("- **Transports:** P2P over NVLink, SHM through host memory (`NCCL_P2P_DISABLE=1`), NET/Socket between split hosts over\n")
	p("  loopback TCP. `run gpu`'s times are CUDA-graph-timed (medians of repetitions where recorded).\n\n")
	p("Rows' columns left out: NCCL %s; ours %s.\n\n", leftLine(left[hwcmp.ColNCCL]), leftLine(left[hwcmp.ColOurs]))

	var machines []string
	for k := range detail {
		if !slices.Contains(machines, k.Machine) {
			machines = append(machines, k.Machine)
		}
	}
	slices.Sort(machines)
	p("## Per machine, transport, protocol and collective\n\n")
	p("Median / max |error| in %%; floor: median / max of the cells' floors (cells), where the machine has several starts.\n")
	for _, mach := range machines {
		p("\n### %s\n\n", mach)
		p("| vs | transport | protocol | collective | files | rows | median / max (%%) | floor median / max (%%) |\n|---|---|---|---|---:|---:|---:|---:|\n")
		var ks []accKey
		for k := range detail {
			if k.Machine == mach {
				ks = append(ks, k)
			}
		}
		slices.SortFunc(ks, func(a, c accKey) int {
			return cmp.Or(strings.Compare(colName(a.Column), colName(c.Column)), strings.Compare(a.Transport, c.Transport),
				strings.Compare(a.Proto, c.Proto), strings.Compare(a.Op, c.Op))
		})
		for _, k := range ks {
			s := detail[k]
			fl := "-"
			if f, ok := r.floors[k]; ok {
				fl = fmt.Sprintf("%.1f / %.1f (%d)", 100*f.Median, 100*f.Max, f.Cells)
			}
			p("| %s | %s | %s | %s | %d | %d | %s | %s |\n", colName(k.Column), k.Transport, k.Proto, k.Op, s.files, len(s.abs), s.medianMax(), fl)
		}
	}

	p("\n## Largest errors\n\n")
	p("The %d eval rows with the largest |error| per column (signed: positive where the simulation is slower).\n\n", worstRows)
	slices.SortFunc(worst, func(a, c accRow) int {
		return cmp.Or(strings.Compare(colName(a.col), colName(c.col)), cmp.Compare(math.Abs(c.err), math.Abs(a.err)),
			strings.Compare(a.f.entry.Path, c.f.entry.Path), cmp.Compare(a.row.Index, c.row.Index))
	})
	p("| vs | error (%%) | machine | transport | protocol | collective | bytes | recording |\n|---|---:|---|---|---|---|---:|---|\n")
	for _, col := range []string{hwcmp.ColNCCL, hwcmp.ColOurs} {
		n := 0
		for _, w := range worst {
			if w.col != col || n == worstRows {
				continue
			}
			n++
			p("| %s | %+.1f | %s | %s | %s | %s | %d | `%s` |\n", colName(col), 100*w.err, w.f.entry.Machine, w.f.rep.Transport, w.proto,
				w.row.Coll, w.row.Bytes, w.f.entry.Path)
		}
	}

	p("\n## NCCL's timing tables\n\n")
	p("NCCL's own timing tables (`testdata/nccl-timings`: PyTorch's CUDA-graph loops, NCCL 2.28.9) whose role is eval, each\n")
	p("simulated as `replay calibrate --evaluate` does with its manifest entry's options (rows whose mean is over %gx their best\n", sim.DisturbedRatio)
	p("repetition left out), with the calibration they name: the H100 pair's tables with `h100.json`, the calibration its\n")
	p("recordings get above, as `testdata/accuracy/nccl-timings.txt` has them (`docs/eval-tables.txt` evaluates them with `h200.json`).\n\n")
	p("| table | machine | options | calibration | rows | left out | median / max (%%) |\n|---|---|---|---|---:|---:|---:|\n")
	for _, t := range r.tables {
		p("| `%s` | %s | `%s` | %s | %d | %d | %.1f / %.1f |\n", t.entry.Path, t.entry.Machine, t.entry.Report, t.calib, t.rows, t.left, 100*t.median, 100*t.max)
	}

	p("\n## Published tables\n\n")
	p("nccl-tests results other people published (`testdata/published`, README there), never fitted: eager launches, so only the\n")
	p("bandwidth-bound sizes are compared (the options' `minbytes`), on a public topology dump of the same kind of machine, with the\n")
	p("embedded `h200.json` (sm90; the A100 has no calibration of its own).\n\n")
	p("| table | NCCL | rows | median / max (%%) | options | source |\n|---|---|---:|---:|---|---|\n")
	for _, t := range r.published {
		p("| `%s` | %s | %d | %.1f / %.1f | `%s` | %s |\n", strings.TrimPrefix(t.entry.Path, "testdata/published/"), softwareField(t.entry.Software, "nccl"),
			t.rows, 100*t.median, 100*t.max, t.entry.Report, mdEscape(t.source))
	}

	notReported := map[string]int{}
	for _, e := range r.m.Entries {
		if e.Role == manifest.Eval && !e.Reported() {
			notReported[e.Note]++
		}
	}
	if len(notReported) > 0 {
		p("\n## Eval entries not reported\n\n")
		var notes []string
		for n := range notReported {
			notes = append(notes, n)
		}
		slices.Sort(notes)
		for _, n := range notes {
			p("- %d: %s\n", notReported[n], n)
		}
	}
	p("\n## Plots\n\n")
	for _, pl := range r.plots {
		p("- `%s`: ![%s](%s)\n", pl.rep.Input.Path, mdEscape(pl.title), pl.name)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// worstRows is how many of the largest errors per column the report lists.
const worstRows = 12

// accRow is a counted column of a row.
type accRow struct {
	f     *accFile
	row   *hwcmp.Row
	col   string
	proto string
	err   float64
}

// softwareField is the value of KEY=VALUE word key of a manifest entry's
// software ("-" when absent).
func softwareField(software, key string) string {
	for _, w := range strings.Fields(software) {
		if v, ok := strings.CutPrefix(w, key+"="); ok {
			return v
		}
	}
	return "-"
}

// leftLine says how many columns were left out, by why.
func leftLine(m map[string]int) string {
	names := map[string]string{"build": "other build", hwcmp.InvalidDisturbed: "disturbed", hwcmp.InvalidWrong: "wrong result",
		hwcmp.InvalidNotAsRecorded: "not simulated as recorded"}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if len(keys) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], cmp.Or(names[k], k)))
	}
	return strings.Join(parts, ", ")
}

// quoteJoin is the words in backquotes, joined by commas.
func quoteJoin(words []string) string {
	var q []string
	for _, w := range words {
		q = append(q, "`"+w+"`")
	}
	return strings.Join(q, ", ")
}

// mdEscape keeps text from breaking a Markdown table row.
func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func first(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[0]
}

func last(s []string) string {
	if len(s) == 0 {
		return "-"
	}
	return s[len(s)-1]
}
