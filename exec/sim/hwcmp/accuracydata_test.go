package hwcmp

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/internal/manifest"
	"github.com/twinccl/twinccl/model"
)

// This file measures what TestAccuracy checks: the simulator's errors on
// the manifest's recordings and tables, per group (accGroup), simulated
// as replay accuracy simulates its eval entries.

// accRepoRoot is the repository's root.
func accRepoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..", "..")
}

// accGroupKey is a group of the accuracy tables: a manifest role and a
// hwcmp group (machine, column, transport, protocol, collective).
type accGroupKey struct {
	Role manifest.Role
	GroupKey
}

func (k accGroupKey) compare(o accGroupKey) int {
	if c := strings.Compare(string(k.Role), string(o.Role)); c != 0 {
		return c
	}
	return k.GroupKey.Compare(o.GroupKey)
}

// accGroup is one group's rows, measured now or as a table records them.
type accGroup struct {
	Key         accGroupKey
	Files, Rows int
	// Median and Max are of the rows' |error|.
	Median, Max float64
	// HasFloor says the group has a repeatability floor (its machine
	// has two starts or more that measured its rows steady).
	HasFloor bool
	Floor    GroupFloor
}

// accDataSet is what one table file covers: its name (testdata/accuracy/
// NAME.txt) and the manifest entries it measures.
type accDataSet struct {
	Name    string
	Entries []manifest.Entry
}

// accDataSets sorts the manifest's entries into the tables' data sets:
// each machine's run gpu recordings (its name), NCCL's timing tables
// (nccl-timings: testdata/nccl-timings and the shared baseline) and the
// published tables (published).
func accDataSets(m *manifest.Manifest) []accDataSet {
	byName := map[string][]manifest.Entry{}
	var names []string
	for _, e := range m.Entries {
		name := e.Machine
		switch {
		case strings.HasPrefix(e.Path, "testdata/published/"):
			name = "published"
		case !strings.HasSuffix(e.Path, ".json"):
			name = "nccl-timings"
		}
		if byName[name] == nil {
			names = append(names, name)
		}
		byName[name] = append(byName[name], e)
	}
	slices.Sort(names)
	out := make([]accDataSet, len(names))
	for i, n := range names {
		out[i] = accDataSet{Name: n, Entries: byName[n]}
	}
	return out
}

// accMeasured is a data set measured: its groups (in order), and what was
// left out, by why.
type accMeasured struct {
	Groups []accGroup
	Left   map[string]int
}

// measureDataSet simulates every entry of ds below root.
func measureDataSet(root string, ds accDataSet) (*accMeasured, error) {
	var recs, tabs []manifest.Entry
	for _, e := range ds.Entries {
		if strings.HasSuffix(e.Path, ".json") {
			recs = append(recs, e)
		} else {
			tabs = append(tabs, e)
		}
	}
	acc := newAccAccumulator()
	// An eval table the report leaves out (its note says why: NVLS
	// tables until the simulator runs NVLS) is left out here too.
	kept := tabs[:0]
	for _, e := range tabs {
		if e.Role == manifest.Eval && !e.Reported() {
			acc.left["eval table not in the report"]++
			continue
		}
		kept = append(kept, e)
	}
	tabs = kept
	if err := measureRecordings(root, recs, acc); err != nil {
		return nil, err
	}
	if err := measureTables(root, tabs, acc); err != nil {
		return nil, err
	}
	return acc.result(), nil
}

// accAccumulator collects the |errors| of rows per group.
type accAccumulator struct {
	mu     sync.Mutex
	abs    map[accGroupKey][]float64
	files  map[accGroupKey]map[string]bool
	left   map[string]int
	floors map[GroupKey]GroupFloor
}

func newAccAccumulator() *accAccumulator {
	return &accAccumulator{abs: map[accGroupKey][]float64{}, files: map[accGroupKey]map[string]bool{}, left: map[string]int{}}
}

// add counts the error e of a row of file in group k.
func (a *accAccumulator) add(k accGroupKey, file string, e float64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.abs[k] = append(a.abs[k], math.Abs(e))
	if a.files[k] == nil {
		a.files[k] = map[string]bool{}
	}
	a.files[k][file] = true
}

// leave counts a recording or a row's column left out, by why.
func (a *accAccumulator) leave(why string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.left[why]++
}

// result is the groups in order, with their floors.
func (a *accAccumulator) result() *accMeasured {
	m := &accMeasured{Left: a.left}
	for k, v := range a.abs {
		g := accGroup{Key: k, Files: len(a.files[k]), Rows: len(v), Median: sim.Median(v), Max: slices.Max(v)}
		g.Floor, g.HasFloor = a.floors[k.GroupKey]
		m.Groups = append(m.Groups, g)
	}
	slices.SortFunc(m.Groups, func(x, y accGroup) int { return x.Key.compare(y.Key) })
	return m
}

// accRecording is a recording opened, and how it is simulated.
type accRecording struct {
	entry    manifest.Entry
	in       *Input
	topo     string // "embedded" or a path relative to the root
	nodes    int
	settings map[string]string
	calib    string
	rep      *Report
	oursOK   bool
}

// key is what the recordings that share a comparer have in common (as
// replay accuracy groups them).
func (r *accRecording) key() string {
	var kv []string
	for k, v := range r.settings {
		if k != "NCCL_TOPO_DUMP_FILE" {
			kv = append(kv, k+"="+v)
		}
	}
	slices.Sort(kv)
	return fmt.Sprintf("%s|%d|%s|%s", r.topo, r.nodes, r.calib, strings.Join(kv, " "))
}

// gin says whether our column ran GPU-initiated networking, which no
// Program describes: the recording's NCCL column is compared as a table.
func (r *accRecording) gin() bool {
	return slices.ContainsFunc(r.in.Calls, func(c Call) bool { return c.Engine != "" })
}

// openRecording opens a recording entry and decides how it is simulated:
// a reported eval entry as the manifest's report column says (replay
// accuracy's options), any other on the topology nearest to it
// (recordingTopology), under the NCCL_* settings it recorded, with the
// embedded calibration of its GPUs. A recording without NCCL's settings
// (nccl_env) is left out (nil, why), as the report leaves it out.
func openRecording(root string, e manifest.Entry) (*accRecording, string, error) {
	in, err := Open(filepath.Join(root, filepath.FromSlash(e.Path)))
	if err != nil {
		return nil, "", err
	}
	in.Path = e.Path
	if len(in.NCCLEnv) == 0 {
		return nil, "recordings without nccl_env (NCCL's settings not recorded)", nil
	}
	r := &accRecording{entry: e, in: in, nodes: 1, settings: map[string]string{}}
	for k, v := range in.NCCLEnv {
		if k != "NCCL_VERSION" {
			r.settings[k] = v
		}
	}
	if e.Reported() {
		r.topo = e.ReportOption("topo")
		if v := e.ReportOption("nodes"); v != "" {
			if r.nodes, err = strconv.Atoi(v); err != nil || r.nodes < 1 {
				return nil, "", fmt.Errorf("report option nodes=%s", v)
			}
		}
	} else if r.topo, r.nodes, err = recordingTopology(root, e.Path); err != nil {
		return nil, "", err
	}
	if r.calib = sim.CalibNameForGPUs(in.GPUs); r.calib == "" {
		r.calib = sim.DefaultCalibName
	}
	return r, "", nil
}

// recordingTopology is the topology a recording that the report does not
// simulate is simulated on: NCCL's dump nearest to it (topo.xml in its
// directory or the first above it, up to testdata/hw); for a split-host
// socket run (net-*.json, one rank per host) the one-GPU dump
// (topo-1gpu.xml) on as many hosts as ranks.
func recordingTopology(root, rec string) (string, int, error) {
	file, nodes := "topo.xml", 1
	if strings.HasPrefix(path.Base(rec), "net-") {
		file, nodes = "topo-1gpu.xml", 2
	}
	for d := path.Dir(rec); d != "testdata/hw" && d != "." && d != "/"; d = path.Dir(d) {
		if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(d), file)); err == nil {
			return d + "/" + file, nodes, nil
		}
	}
	return "", 0, fmt.Errorf("no %s in its directory or above it, up to testdata/hw", file)
}

// readAccTopology reads the topology topo ("embedded" or "": the default
// one; else relative to root) and names it.
func readAccTopology(root, topo string) (*model.Element, string, error) {
	if topo == "" || topo == "embedded" {
		name := "embedded:" + twinccl.DefaultTopology
		data, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
		if err != nil {
			return nil, "", err
		}
		el, _, err := model.ParseTopologyXML(bytes.NewReader(data), name)
		return el, name, err
	}
	el, _, err := model.ReadTopologyFile(filepath.Join(root, filepath.FromSlash(topo)))
	return el, topo, err
}

// newAccComparer is the comparer of recordings like r: NCCL's column with
// r's calibration, ours with the calibration of our kernels on those
// GPUs, each call simulated as the graph loop that timed it; and the
// builds our column counts.
func newAccComparer(root string, r *accRecording, cc *CalibCache) (*Comparer, []string, error) {
	el, topo, err := readAccTopology(root, r.topo)
	if err != nil {
		return nil, nil, err
	}
	if r.nodes > 1 && r.in.NRanks%r.nodes == 0 {
		model.KeepRanks(el, r.in.NRanks/r.nodes)
	}
	c, err := cc.Get(r.calib)
	if err != nil {
		return nil, nil, err
	}
	cp, err := NewComparerNodes(el, topo, r.nodes, r.settings, c, sim.EmbeddedPrefix+r.calib)
	if err != nil {
		return nil, nil, err
	}
	cp.Sim.Loop = sim.DefaultLoopCalls
	ours := OursCalibName(r.calib)
	if ours == "" {
		return cp, nil, nil
	}
	oc, err := cc.Get(ours)
	if err != nil {
		return nil, nil, err
	}
	if cp, err = cp.WithOursCalib(oc, sim.EmbeddedPrefix+ours); err != nil {
		return nil, nil, err
	}
	return cp, FittedBuilds(oc), nil
}

// accParallel runs do(0..n-1) on GOMAXPROCS workers.
func accParallel(n int, do func(i int)) {
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

// firstErr is the first non-nil error of errs.
func firstErr(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// measureRecordings compares the recordings entries into acc (rows kept
// by the report's rule: Row.Invalid, and our column only for the builds
// its calibration was fitted on) and sets acc's floors (GroupFloors over
// every recording compared).
func measureRecordings(root string, entries []manifest.Entry, acc *accAccumulator) error {
	recs := make([]*accRecording, len(entries))
	errs := make([]error, len(entries))
	accParallel(len(entries), func(i int) {
		var why string
		recs[i], why, errs[i] = openRecording(root, entries[i])
		if why != "" {
			acc.leave(why)
		}
	})
	wrap := func(i int) {
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%s (%s:%d): %w", entries[i].Path, manifest.Path, entries[i].Line, errs[i])
		}
	}
	for i := range errs {
		wrap(i)
	}
	if err := firstErr(errs); err != nil {
		return err
	}
	groups := map[string][]int{}
	var keys []string
	for i, r := range recs {
		if r == nil {
			continue
		}
		k := r.key()
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], i)
	}
	slices.Sort(keys)
	var cc CalibCache
	var buildsMu sync.Mutex
	var builds []string
	accParallel(len(keys), func(g int) {
		idx := groups[keys[g]]
		cp, kernels, err := newAccComparer(root, recs[idx[0]], &cc)
		buildsMu.Lock()
		for _, k := range kernels {
			if !slices.Contains(builds, k) {
				builds = append(builds, k)
			}
		}
		buildsMu.Unlock()
		for _, i := range idx {
			r := recs[i]
			switch {
			case err != nil:
				errs[i] = err
			case r.gin():
				errs[i] = measureGIN(root, r, acc, &cc)
			default:
				r.oursOK = r.in.Kernel != "" && slices.Contains(kernels, r.in.Kernel)
				if r.rep, errs[i] = cp.Compare(r.in); errs[i] == nil {
					addReport(r, acc)
				}
			}
			wrap(i)
		}
	})
	if err := firstErr(errs); err != nil {
		return err
	}
	var compared []Recorded
	for _, r := range recs {
		if r != nil && r.rep != nil {
			compared = append(compared, Recorded{Machine: r.entry.Machine, Path: r.entry.Path, Report: r.rep})
		}
	}
	slices.Sort(builds)
	acc.floors = GroupFloors(compared, builds)
	return nil
}

// addReport counts the rows of a compared recording.
func addReport(r *accRecording, acc *accAccumulator) {
	for i := range r.rep.Rows {
		row := &r.rep.Rows[i]
		for _, col := range []string{ColNCCL, ColOurs} {
			e, proto := row.colErr(col)
			switch {
			case math.IsNaN(e) || math.IsInf(e, 0):
				continue
			case col == ColOurs && !r.oursOK:
				acc.leave("ours: other build")
				continue
			case row.Invalid(col) != "":
				acc.leave(colLabel(col) + ": " + row.Invalid(col))
				continue
			}
			k := accGroupKey{r.entry.Role, GroupKey{r.entry.Machine, col, r.rep.Transport, proto, row.Coll.String()}}
			acc.add(k, r.entry.Path, e)
		}
	}
}

// colLabel is how the tables name a column.
func colLabel(col string) string {
	if col == ColNCCL {
		return "NCCL"
	}
	return "ours"
}

// measureGIN compares NCCL's column of a recording whose own column ran
// GPU-initiated networking, as a timing table (Table) on the recording's
// topology and settings.
func measureGIN(root string, r *accRecording, acc *accAccumulator, cc *CalibCache) error {
	tb, err := Table(r.in, ColNCCL, nil)
	if err != nil {
		return err
	}
	el, topo, err := readAccTopology(root, r.topo)
	if err != nil {
		return err
	}
	c, err := cc.Get(r.calib)
	if err != nil {
		return err
	}
	return addTable(el, topo, r.nodes, tb, c, r.entry, acc)
}

// accTableOptions are how a timing table that the report does not
// simulate (a fit table) is simulated, by machine: replay accuracy's
// options of the machine's eval tables.
var accTableOptions = map[string]string{
	"h200x2": "topo=embedded",
	"h100x2": "topo=testdata/hw/h100x2/topo.xml,harness=pytorch@h100,calib=h100.json",
}

// measureTables simulates the timing tables entries into acc, each as the
// report's options say (a fit table: accTableOptions), NCCL's column
// only; rows whose mean is more than sim.DisturbedRatio above their best
// repetition are left out.
func measureTables(root string, entries []manifest.Entry, acc *accAccumulator) error {
	errs := make([]error, len(entries))
	var cc CalibCache
	accParallel(len(entries), func(i int) {
		errs[i] = measureTable(root, entries[i], acc, &cc)
		if errs[i] != nil {
			errs[i] = fmt.Errorf("%s (%s:%d): %w", entries[i].Path, manifest.Path, entries[i].Line, errs[i])
		}
	})
	return firstErr(errs)
}

func measureTable(root string, e manifest.Entry, acc *accAccumulator, cc *CalibCache) error {
	opts := e.ReportOptions()
	if !e.Reported() {
		o, ok := accTableOptions[e.Machine]
		if !ok {
			return fmt.Errorf("machine %s: no table options (accTableOptions)", e.Machine)
		}
		opts = strings.Split(o, ",")
	}
	spec := []string{filepath.Join(root, filepath.FromSlash(e.Path))}
	topo, calib, nodes := "", sim.DefaultCalibName, 1
	for _, kv := range opts {
		switch k, v, _ := strings.Cut(kv, "="); k {
		case "topo":
			topo = v
		case "calib":
			calib = v
		case "nodes":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("report option nodes=%s", v)
			}
			nodes = n
		default:
			spec = append(spec, kv)
		}
	}
	tb, err := sim.ParseTableSpec(strings.Join(spec, ","))
	if err != nil {
		return err
	}
	el, name, err := readAccTopology(root, topo)
	if err != nil {
		return err
	}
	c, err := cc.Get(calib)
	if err != nil {
		return err
	}
	return addTable(el, name, nodes, tb, c, e, acc)
}

// addTable simulates table tb on the topology el (named name) of nodes
// hosts with calibration c, and counts its rows as NCCL's column of entry e.
func addTable(el *model.Element, name string, nodes int, tb *sim.Table, c *sim.Calib, e manifest.Entry, acc *accAccumulator) error {
	res, err := sim.SearchTable(el, name, nodes, tb)
	if err != nil {
		return err
	}
	s, err := sim.NewSimulator(res, c)
	if err != nil {
		return err
	}
	// the transport between rank 0 and the next rank, or the first rank
	// of the next host (as Comparer.transport names it)
	cl, peer := s.Machine.Cluster, 1
	if len(cl.Nodes) > 1 {
		peer = cl.NRanks / len(cl.Nodes)
	}
	transport, err := s.Machine.TransportName(0, peer)
	if err != nil {
		return err
	}
	ft := sim.NewFitTable(tb, res)
	ft.Loop = sim.DefaultLoopCalls
	rows, err := ft.Compare(c)
	if err != nil {
		return err
	}
	for _, r := range rows {
		if r.Noisy() {
			acc.leave("NCCL: " + InvalidDisturbed)
			continue
		}
		acc.add(accGroupKey{e.Role, GroupKey{e.Machine, ColNCCL, transport, r.Proto.String(), r.Coll.String()}}, e.Path, r.Err)
	}
	return nil
}
