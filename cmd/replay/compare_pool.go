package main

import (
	"cmp"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
)

// isDir reports whether path names a directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// poolInputs is the inputs of a pooled comparison: each file named, and
// every JSON file under each directory named whose name matches match
// ("": any; run gpu's sweeps; the call traces beside them repeat one
// call per size of the same runs), in name order.
func poolInputs(pos []string, match string) ([]string, error) {
	var out []string
	for _, p := range pos {
		if !isDir(p) {
			out = append(out, p)
			continue
		}
		var found []string
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.EqualFold(filepath.Ext(path), ".json") {
				return nil
			}
			if ok, _ := filepath.Match(match, d.Name()); ok || match == "" {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 && match != "" {
			return nil, fmt.Errorf("%s: no JSON recordings (run gpu --json files) named like %q under it", p, match)
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no JSON recordings (run gpu --json files) under it", p)
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

// compareAll compares every input (poolInputs) as the options say: run
// gpu's JSON files only.
func compareAll(pos []string, o *compareOpts, stderr io.Writer) ([]*hwcmp.Report, error) {
	paths, err := poolInputs(pos, o.match)
	if err != nil {
		return nil, err
	}
	var reps []*hwcmp.Report
	for _, p := range paths {
		in, err := hwcmp.Open(p)
		if err != nil {
			return nil, err
		}
		if in.Kind != hwcmp.KindJSON {
			return nil, fmt.Errorf("%w: %s is a call trace: pool run gpu --json files (a trace times one call per size of the run its JSON file times)", errUsage, p)
		}
		rep, _, err := o.compare(in, stderr)
		if err != nil {
			return nil, err
		}
		reps = append(reps, rep)
	}
	return reps, nil
}

// comparePooled compares every input (poolInputs) as the options say,
// prints a line per file and the statistics pooled per transport, column
// and protocol (hwcmp.Pool), and writes both with --json.
func comparePooled(pos []string, o *compareOpts, jsonOut string, stdout, stderr io.Writer) error {
	reps, err := compareAll(pos, o, stderr)
	if err != nil {
		return err
	}
	pooled := hwcmp.Pool(reps)
	if jsonOut != "-" {
		printPooled(stdout, reps, pooled)
	}
	if jsonOut == "" {
		return nil
	}
	doc := pooledJSON{}
	for _, rep := range reps {
		doc.Files = append(doc.Files, compareDoc(rep, nil))
	}
	doc.Pooled = poolStatsJSON(pooled)
	if err := writeJSON(jsonOut, stdout, doc); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// printPooled prints a line per report (its transport and each column's
// median and maximum error, every row and steady ones) and the pooled
// statistics.
func printPooled(w io.Writer, reps []*hwcmp.Report, pooled []hwcmp.PoolStat) {
	dir := commonDir(reps)
	name := func(path string) string { return strings.TrimPrefix(path, dir) }
	width := len("file")
	for _, rep := range reps {
		width = max(width, len(name(rep.Input.Path)))
	}
	fmt.Fprintf(w, "# replay compare: %d recordings", len(reps))
	if dir != "" {
		fmt.Fprintf(w, " under %s", dir)
	}
	fmt.Fprintf(w, "; calibration %s\n", reps[0].Calib)
	fmt.Fprintf(w, "# per file: |err| median/max over every row (steady: without the rows whose median repetition is over %gx the best)\n", sim.DisturbedRatio)
	fmt.Fprintf(w, "# %-*s %-10s %4s  %-28s %s\n", width, "file", "transport", "rows", "ours", "nccl")
	for _, rep := range reps {
		fmt.Fprintf(w, "  %-*s %-10s %4d  %-28s %s\n", width, name(rep.Input.Path), rep.Transport, len(rep.Rows),
			fileErrors(rep, hwcmp.ColOurs), fileErrors(rep, hwcmp.ColNCCL))
	}
	fmt.Fprintf(w, "#\n# pooled per transport, column and protocol (small: < %d KiB; steady: as above, where it differs)\n", hwcmp.SmallBytes>>10)
	fmt.Fprintf(w, "# %-5s %-10s %-7s %-6s %4s %5s %9s %9s %9s  %s\n", "vs", "transport", "proto", "bucket", "n", "files", "median", "max", "bias", "worst")
	for _, s := range pooled {
		fmt.Fprintf(w, "  %-5s %-10s %-7s %-6s %4d %5d %8.1f%% %8.1f%% %+8.1f%%  %s\n", s.Column, s.Transport, s.Proto, s.Bucket, s.N, s.Files,
			100*s.MedianAbs, 100*s.MaxAbs, 100*s.Bias, name(s.Worst))
	}
}

// commonDir is the directory prefix (ending in a separator) that every
// report's input path shares, "" when none.
func commonDir(reps []*hwcmp.Report) string {
	dir := filepath.Dir(reps[0].Input.Path) + string(filepath.Separator)
	for _, rep := range reps[1:] {
		for !strings.HasPrefix(rep.Input.Path, dir) {
			parent := filepath.Dir(strings.TrimSuffix(dir, string(filepath.Separator)))
			if parent == "." || parent == string(filepath.Separator) || parent+string(filepath.Separator) == dir {
				return ""
			}
			dir = parent + string(filepath.Separator)
		}
	}
	return dir
}

// fileErrors is a report's median/max error of column col over every
// row, and over its steady rows where some were disturbed ("-" without
// the column).
func fileErrors(rep *hwcmp.Report, col string) string {
	all, ok := rep.Stat(col, "all", hwcmp.BucketAll)
	if !ok {
		return "-"
	}
	s := medianMax(all.MedianAbs, all.MaxAbs)
	if st, ok := rep.Stat(col, "all", hwcmp.BucketSteady); ok {
		s += fmt.Sprintf(" (steady %.1f/%.1f)", 100*st.MedianAbs, 100*st.MaxAbs)
	}
	return s
}

// poolStatJSON is one pooled statistic of --json.
type poolStatJSON struct {
	Transport string `json:"transport"`
	Files     int    `json:"files"`
	compareStatJSON
}

// poolStatsJSON is pooled statistics as --json writes them.
func poolStatsJSON(pooled []hwcmp.PoolStat) []poolStatJSON {
	out := make([]poolStatJSON, 0, len(pooled))
	for _, s := range pooled {
		out = append(out, poolStatJSON{Transport: s.Transport, Files: s.Files, compareStatJSON: statJSON(s.Stat)})
	}
	return out
}

// pooledJSON is the --json document of several inputs.
type pooledJSON struct {
	Files  []compareJSON  `json:"files"`
	Pooled []poolStatJSON `json:"pooled"`
}

// compareStarts compares the recordings of every start (one directory
// each), prints each start's statistics pooled per transport, column
// and protocol and the hardware's start-to-start repeatability
// (hwcmp.Floors) with the worst widest cells, and writes all of it with
// --json.
func compareStarts(dirs []string, o *compareOpts, worst int, jsonOut string, stdout, stderr io.Writer) error {
	if len(dirs) < 2 {
		return fmt.Errorf("%w: --starts wants at least two directories, one per start", errUsage)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		if !isDir(d) {
			return fmt.Errorf("%w: --starts: %s is not a directory (one per start: the recordings of one session on the machine)", errUsage, d)
		}
		if seen[filepath.Clean(d)] {
			return fmt.Errorf("%w: --starts: %s named twice", errUsage, d)
		}
		seen[filepath.Clean(d)] = true
	}
	var starts []hwcmp.Start
	for _, d := range dirs {
		reps, err := compareAll([]string{d}, o, stderr)
		if err != nil {
			return err
		}
		starts = append(starts, hwcmp.Start{Name: filepath.Clean(d), Dir: d, Reports: reps})
	}
	rep := hwcmp.Floors(starts)
	pooled := make([][]hwcmp.PoolStat, len(starts))
	for i, st := range starts {
		pooled[i] = hwcmp.Pool(st.Reports)
	}
	if jsonOut != "-" {
		printStarts(stdout, starts, pooled, rep, worst)
	}
	if jsonOut == "" {
		return nil
	}
	doc := startsJSON{}
	for i, st := range starts {
		doc.Starts = append(doc.Starts, startJSON{Start: st.Name, Files: len(st.Reports), Pooled: poolStatsJSON(pooled[i])})
	}
	for _, h := range rep.Hindsight {
		doc.Hindsight = append(doc.Hindsight, hindsightJSON{Start: h.Start, Transport: h.Transport, Versus: h.Column, Proto: h.Proto,
			Rows: h.Rows, OthersMedianAbs: round6(h.OthersMedianAbs), OthersMaxAbs: round6(h.OthersMaxAbs),
			SimMedianAbs: round6(h.SimMedianAbs), SimMaxAbs: round6(h.SimMaxAbs)})
	}
	for _, f := range rep.Floors {
		doc.Floors = append(doc.Floors, floorJSON{Transport: f.Transport, Versus: f.Column, Proto: f.Proto, Cells: f.Cells,
			MedianFloor: round6(f.MedianFloor), MaxFloor: round6(f.MaxFloor), SimMaxAbs: round6(f.SimMaxAbs), Worst: f.Worst})
	}
	for _, c := range rep.Cells {
		cj := floorCellJSON{Transport: c.Transport, Versus: c.Column, Build: c.Build, Proto: c.Proto, Recording: c.Recording, Op: c.Op,
			Bytes: c.Bytes, Floor: round6(c.Floor), SimMaxAbs: round6(c.SimMaxAbs)}
		for _, r := range c.Ratios {
			cj.Ratios = append(cj.Ratios, optF(r, true))
		}
		doc.Cells = append(doc.Cells, cj)
	}
	if err := writeJSON(jsonOut, stdout, doc); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// printStarts prints each start's pooled steady statistics per
// transport, column and protocol (pooled, in the starts' order), the
// floors, each start against the others' median (hindsight), and the
// worst widest cells with their ratio per start.
func printStarts(w io.Writer, starts []hwcmp.Start, pooled [][]hwcmp.PoolStat, rep *hwcmp.Repeatability, worst int) {
	floors, cells := rep.Floors, rep.Cells
	fmt.Fprintf(w, "# replay compare --starts: %d starts; calibration %s\n", len(starts), starts[0].Reports[0].Calib)
	fmt.Fprintf(w, "# per start: |err| median/max over its steady rows (without those whose median repetition is over %gx the best), pooled\n", sim.DisturbedRatio)
	fmt.Fprintf(w, "# %-5s %-10s %-7s", "vs", "transport", "proto")
	for i := range starts {
		fmt.Fprintf(w, " %13s", fmt.Sprintf("start %d", i+1))
	}
	fmt.Fprintln(w)
	type group struct{ col, transport, proto string }
	var order []group
	byStart := map[group][]string{}
	for si := range starts {
		for _, s := range pooled[si] {
			if s.Proto == "all" || s.Bucket != hwcmp.BucketAll && s.Bucket != hwcmp.BucketSteady {
				continue
			}
			g := group{s.Column, s.Transport, s.Proto}
			v, ok := byStart[g]
			if !ok {
				order = append(order, g)
				v = make([]string, len(starts))
				for i := range v {
					v[i] = "-"
				}
			}
			// a steady bucket follows its protocol's "all" where it differs
			v[si] = medianMax(s.MedianAbs, s.MaxAbs)
			byStart[g] = v
		}
	}
	slices.SortStableFunc(order, func(a, b group) int {
		return cmp.Or(strings.Compare(a.col, b.col), strings.Compare(a.transport, b.transport), strings.Compare(a.proto, b.proto))
	})
	for _, g := range order {
		fmt.Fprintf(w, "  %-5s %-10s %-7s", g.col, g.transport, g.proto)
		for _, v := range byStart[g] {
			fmt.Fprintf(w, " %13s", v)
		}
		fmt.Fprintln(w)
	}
	for i, st := range starts {
		fmt.Fprintf(w, "#   start %d: %s (%d recordings)\n", i+1, st.Name, len(st.Reports))
	}
	if len(cells) == 0 {
		fmt.Fprintf(w, "#\n# no row was measured steady on two starts: a cell pairs the same recording (its path below each start's directory)\n")
		fmt.Fprintf(w, "# by the same build; name directories that hold the same recordings\n")
		return
	}
	fmt.Fprintf(w, "#\n# the hardware's repeatability: a cell is a row measured steady on two starts or more (the same size of the same recording);\n")
	fmt.Fprintf(w, "# its floor is (max r - min r)/(max r + min r), r = simulated/measured per start: the least largest error over the starts\n")
	fmt.Fprintf(w, "# of any prediction that is this simulation's times one factor per row\n")
	fmt.Fprintf(w, "# %-5s %-10s %-7s %5s %12s %10s %10s  %s\n", "vs", "transport", "proto", "cells", "floor median", "floor max", "sim max", "widest cell")
	for _, f := range floors {
		fmt.Fprintf(w, "  %-5s %-10s %-7s %5d %11.1f%% %9.1f%% %9.1f%%  %s\n", f.Column, f.Transport, f.Proto, f.Cells,
			100*f.MedianFloor, 100*f.MaxFloor, 100*f.SimMaxAbs, f.Worst)
	}
	fmt.Fprintf(w, "#\n# hindsight: each start's rows predicted by the simulation times the factor that puts the other starts' median r on 1\n")
	fmt.Fprintf(w, "# (what a simulator tuned per row on the other starts could expect of this one), against the simulation itself\n")
	fmt.Fprintf(w, "# %-5s %-10s %-7s %-8s %4s  %-18s %s\n", "vs", "transport", "proto", "start", "rows", "others' median/max", "simulation median/max")
	var run []hwcmp.Hindsight
	flush := func() {
		if len(run) == 0 {
			return
		}
		var om, ox, sm, sx float64
		for _, h := range run {
			om, ox, sm, sx = om+h.OthersMedianAbs, ox+h.OthersMaxAbs, sm+h.SimMedianAbs, sx+h.SimMaxAbs
		}
		n := float64(len(run))
		h := run[0]
		fmt.Fprintf(w, "  %-5s %-10s %-7s %-8s %4s  %-18s %s\n", h.Column, h.Transport, h.Proto, "mean", "",
			medianMax(om/n, ox/n), medianMax(sm/n, sx/n))
		run = run[:0]
	}
	index := map[string]int{}
	for i, st := range starts {
		index[st.Name] = i + 1
	}
	for _, h := range rep.Hindsight {
		if len(run) > 0 && (run[0].Column != h.Column || run[0].Transport != h.Transport || run[0].Proto != h.Proto) {
			flush()
		}
		run = append(run, h)
		fmt.Fprintf(w, "  %-5s %-10s %-7s %-8s %4d  %-18s %s\n", h.Column, h.Transport, h.Proto, fmt.Sprintf("start %d", index[h.Start]), h.Rows,
			medianMax(h.OthersMedianAbs, h.OthersMaxAbs), medianMax(h.SimMedianAbs, h.SimMaxAbs))
	}
	flush()
	if worst == 0 {
		return
	}
	fmt.Fprintf(w, "#\n# the %d widest cells: floor, then simulated/measured per start (- where it was not measured steady)\n", min(worst, len(cells)))
	for _, c := range cells[:min(worst, len(cells))] {
		fmt.Fprintf(w, "  %5.1f%%  %-5s %-10s %-7s", 100*c.Floor, c.Column, c.Transport, c.Proto)
		for _, r := range c.Ratios {
			if math.IsNaN(r) {
				fmt.Fprintf(w, " %5s", "-")
			} else {
				fmt.Fprintf(w, " %5.2f", r)
			}
		}
		fmt.Fprintf(w, "  %s", c.Name())
		if c.Build != "" {
			fmt.Fprintf(w, " [%s]", c.Build)
		}
		fmt.Fprintln(w)
	}
}

// medianMax formats a median and a largest error (fractions) as
// "M/X%".
func medianMax(median, largest float64) string {
	return fmt.Sprintf("%.1f/%.1f%%", 100*median, 100*largest)
}

// startJSON is one start's pooled statistics in the --starts --json
// document.
type startJSON struct {
	Start  string         `json:"start"`
	Files  int            `json:"files"`
	Pooled []poolStatJSON `json:"pooled"`
}

// floorJSON is a summary of floors (hwcmp.Floor) in --json.
type floorJSON struct {
	Transport   string  `json:"transport"`
	Versus      string  `json:"vs"`
	Proto       string  `json:"proto"`
	Cells       int     `json:"cells"`
	MedianFloor float64 `json:"median_floor"`
	MaxFloor    float64 `json:"max_floor"`
	SimMaxAbs   float64 `json:"sim_max_abs_err"`
	Worst       string  `json:"widest"`
}

// floorCellJSON is a cell (hwcmp.FloorCell) in --json; ratios are per
// start, null where the start did not measure the row steady.
type floorCellJSON struct {
	Transport string     `json:"transport"`
	Versus    string     `json:"vs"`
	Build     string     `json:"build,omitempty"`
	Proto     string     `json:"proto"`
	Recording string     `json:"recording"`
	Op        string     `json:"op"`
	Bytes     int64      `json:"bytes"`
	Floor     float64    `json:"floor"`
	SimMaxAbs float64    `json:"sim_max_abs_err"`
	Ratios    []*float64 `json:"ratios"`
}

// hindsightJSON is a start against the other starts' median
// (hwcmp.Hindsight) in --json.
type hindsightJSON struct {
	Start           string  `json:"start"`
	Transport       string  `json:"transport"`
	Versus          string  `json:"vs"`
	Proto           string  `json:"proto"`
	Rows            int     `json:"rows"`
	OthersMedianAbs float64 `json:"others_median_abs_err"`
	OthersMaxAbs    float64 `json:"others_max_abs_err"`
	SimMedianAbs    float64 `json:"sim_median_abs_err"`
	SimMaxAbs       float64 `json:"sim_max_abs_err"`
}

// startsJSON is the --json document of --starts.
type startsJSON struct {
	Starts    []startJSON     `json:"starts"`
	Floors    []floorJSON     `json:"floors"`
	Hindsight []hindsightJSON `json:"hindsight"`
	Cells     []floorCellJSON `json:"cells"`
}
