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
	"github.com/twinccl/twinccl/internal/stats"
)

// isDir reports whether path names a directory.
func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// poolFile is one input of a pooled comparison.
type poolFile struct {
	// path is the file's path, name how progress names it (its path
	// below the directory it was found under).
	path, name string
}

// skipped is an input that a pooled comparison left out, and why.
type skipped struct {
	path, reason string
	// dir says path is a directory with no recording to compare.
	dir bool
}

// poolInputs is the inputs of a pooled comparison: each file named, and
// every JSON file under each directory named whose name matches match
// ("": any; run gpu's sweeps; the call traces beside them repeat one
// call per size of the same runs), in name order. A file named that
// cannot be opened, or a directory named that cannot be read, is an
// error; a directory without such files, or an entry under one that
// cannot be read, is skipped.
func poolInputs(pos []string, match string) ([]poolFile, []skipped, error) {
	var out []poolFile
	var skips []skipped
	for _, p := range pos {
		if !isDir(p) {
			f, err := os.Open(p)
			if err != nil {
				return nil, nil, err
			}
			f.Close()
			out = append(out, poolFile{path: p, name: p})
			continue
		}
		var found []string
		err := filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				if path == p {
					return err
				}
				skips = append(skips, skipped{path: path, reason: err.Error()})
				if d != nil && d.IsDir() {
					return fs.SkipDir
				}
				return nil
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
			return nil, nil, err
		}
		switch {
		case len(found) == 0 && match != "":
			skips = append(skips, skipped{p, fmt.Sprintf("no JSON recordings (run gpu --json files) named like %q under it", match), true})
		case len(found) == 0:
			skips = append(skips, skipped{p, "no JSON recordings (run gpu --json files) under it", true})
		}
		slices.Sort(found)
		for _, path := range found {
			name, err := filepath.Rel(p, path)
			if err != nil {
				name = path
			}
			out = append(out, poolFile{path: path, name: name})
		}
	}
	return out, skips, nil
}

// pooling is the state of a pooled comparison: the files it skipped,
// where it notes them, and its progress.
type pooling struct {
	skips []skipped
	notes io.Writer
	prog  *progressLine
}

// skip notes, on one line, that s.path is left out and why.
func (pl *pooling) skip(s skipped) {
	s.reason = strings.TrimPrefix(s.reason, s.path+": ")
	s.reason = strings.Join(strings.Fields(s.reason), " ")
	pl.skips = append(pl.skips, s)
	fmt.Fprintf(pl.notes, "replay compare: skipped %s: %s\n", s.path, s.reason)
}

// summary notes how many files (and directories without recordings)
// were skipped, if any.
func (pl *pooling) summary() {
	pl.prog.done()
	files, dirs := 0, 0
	for _, s := range pl.skips {
		if s.dir {
			dirs++
		} else {
			files++
		}
	}
	if files+dirs == 0 {
		return
	}
	fmt.Fprintf(pl.notes, "replay compare: %s skipped", plural(files, "file"))
	if dirs > 0 {
		fmt.Fprintf(pl.notes, " (and %s without recordings)", plural(dirs, "directory"))
	}
	fmt.Fprintln(pl.notes)
}

// plural is "1 file", "2 files" ("directory": "directories").
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if s, ok := strings.CutSuffix(what, "y"); ok {
		return fmt.Sprintf("%d %sies", n, s)
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// noneCompared is the error of a pooled comparison of what that
// compared no file: it names every file skipped (each noted with why),
// and says why of a directory without recordings.
func noneCompared(what string, skips []skipped) error {
	var names []string
	for _, s := range skips {
		if s.dir {
			names = append(names, s.path+" ("+s.reason+")")
		} else {
			names = append(names, s.path)
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("%s: no recording to compare", what)
	}
	return fmt.Errorf("%s: no recording could be compared; skipped: %s", what, strings.Join(names, ", "))
}

// compareAll compares every input (poolInputs) as the options say: run
// gpu's JSON files that suit the options (compareOpts.unsuitable). It
// skips, with a note, every input it cannot compare, and fails only when
// it compared none; label prefixes its progress reports (no % in it).
func (pl *pooling) compareAll(pos []string, o *compareOpts, label string) ([]*hwcmp.Report, error) {
	files, skips, err := poolInputs(pos, o.match)
	if err != nil {
		return nil, err
	}
	for _, s := range skips {
		pl.skip(s)
	}
	first := len(pl.skips)
	var reps []*hwcmp.Report
	for i, f := range files {
		// each start's reports are a stage of their own: its first is shown
		pl.prog.report(label+"file %d/%d %s, %s", i+1, len(files), f.name, pl.prog.elapsed())
		in, err := hwcmp.Open(f.path)
		if err != nil {
			pl.skip(skipped{path: f.path, reason: err.Error()})
			continue
		}
		if why := o.unsuitable(in); why != "" {
			pl.skip(skipped{path: f.path, reason: why})
			continue
		}
		rep, _, err := o.compare(in, pl.notes)
		if err != nil {
			pl.skip(skipped{path: f.path, reason: err.Error()})
			continue
		}
		reps = append(reps, rep)
	}
	if len(reps) == 0 {
		return nil, noneCompared(strings.Join(pos, " "), pl.skips[first-len(skips):])
	}
	return reps, nil
}

// unsuitable says why a recording cannot be pooled as the options
// simulate it ("" when it can): a call trace (a trace times one call per
// size of the run its JSON file times), or a recording whose hosts do
// not match the simulation's. A split-host run that does not record its
// hosts (NCCL_HOSTID in its nccl_env, no "hosts") would be simulated on
// one host, over P2P, without --nodes; a run of one host (no "hosts",
// NCCL_HOSTID or net_probe) would be simulated over the network with
// --nodes 2 or more; and a recording of H hosts is not one of --nodes N.
// A file compared alone is compared whatever its hosts (with a warning
// for the first case).
func (o *compareOpts) unsuitable(in *hwcmp.Input) string {
	if in.Kind != hwcmp.KindJSON {
		return "a call trace: pool run gpu --json files (a trace times one call per size of the run its JSON file times)"
	}
	hostID := in.NCCLEnv["NCCL_HOSTID"]
	switch {
	case in.Hosts > 0 && o.nodes > 0 && o.nodes != in.Hosts:
		return fmt.Sprintf("recorded on %d hosts, not the %d of --nodes", in.Hosts, o.nodes)
	case in.Hosts == 0 && o.nodes == 0 && hostID != "" && in.NRanks > 1:
		return fmt.Sprintf("a split-host run (NCCL_HOSTID=%s) that does not record its hosts: on one host it would run over P2P; "+
			"compare such files with --nodes %d and the topology of one host (e.g. --match 'net-*' --topo a topo-1gpu.xml --nodes %d)",
			hostID, in.NRanks, in.NRanks)
	case in.Hosts == 0 && o.nodes > 1 && hostID == "" && in.Host.LatencyUs == 0:
		return fmt.Sprintf("recorded on one host (no hosts, NCCL_HOSTID or net_probe): --nodes %d would simulate its ranks over the network", o.nodes)
	}
	return ""
}

// comparePooled compares every input (poolInputs) as the options say,
// prints a line per file and the statistics of the valid rows pooled per
// transport, column and protocol (hwcmp.Pool), and writes both with
// --json.
func comparePooled(pos []string, o *compareOpts, jsonOut string, prog *progressLine, stdout, stderr io.Writer) error {
	pl := &pooling{notes: prog.writer(stderr), prog: prog}
	reps, err := pl.compareAll(pos, o, "")
	pl.summary()
	if err != nil {
		return err
	}
	pooled, left := hwcmp.Pool(reps)
	if jsonOut != "-" {
		printPooled(stdout, reps, pooled, left, len(pl.skips))
	}
	if jsonOut == "" {
		return nil
	}
	doc := pooledJSON{Rule: hwcmp.ValidRule, LeftOut: leftOutJSONOf(left)}
	for _, rep := range reps {
		doc.Files = append(doc.Files, compareDoc(rep, nil))
	}
	for _, s := range pl.skips {
		doc.Skipped = append(doc.Skipped, skippedJSON{File: s.path, Reason: s.reason})
	}
	doc.Pooled = poolStatsJSON(pooled)
	if err := writeJSON(jsonOut, stdout, doc); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// printPooled prints a line per report (its transport and each column's
// median and maximum error, every row and steady ones) and the pooled
// statistics of the valid rows, with the columns left out (left) and
// the count of files skipped.
func printPooled(w io.Writer, reps []*hwcmp.Report, pooled []hwcmp.PoolStat, left hwcmp.LeftOut, skippedFiles int) {
	dir := commonDir(reps)
	name := func(path string) string { return strings.TrimPrefix(path, dir) }
	width := len("file")
	for _, rep := range reps {
		width = max(width, len(name(rep.Input.Path)))
	}
	fmt.Fprintf(w, "# replay compare: %s", plural(len(reps), "recording"))
	if dir != "" {
		fmt.Fprintf(w, " under %s", dir)
	}
	if skippedFiles > 0 {
		fmt.Fprintf(w, " (%s skipped: see stderr)", plural(skippedFiles, "input"))
	}
	fmt.Fprintf(w, "; calibration %s\n", reps[0].Calib)
	fmt.Fprintf(w, "# per file: |err| median/max over every row (steady: without the rows whose median repetition is over %gx the best)\n", sim.DisturbedRatio)
	fmt.Fprintf(w, "# %-*s %-10s %4s  %-28s %s\n", width, "file", "transport", "rows", "ours", "nccl")
	for _, rep := range reps {
		fmt.Fprintf(w, "  %-*s %-10s %4d  %-28s %s\n", width, name(rep.Input.Path), rep.Transport, len(rep.Rows),
			fileErrors(rep, hwcmp.ColOurs), fileErrors(rep, hwcmp.ColNCCL))
	}
	fmt.Fprintf(w, "#\n# pooled per transport, column and protocol (small: < %d KiB), valid rows only: %s\n", hwcmp.SmallBytes>>10, hwcmp.ValidRule)
	fmt.Fprintf(w, "# %s\n", leftOutLine(left))
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

// leftOutLine says how many rows' columns the pool left out, and why.
func leftOutLine(l hwcmp.LeftOut) string {
	return fmt.Sprintf("left out: %d of %d rows' columns (%d with a wrong result, %d not simulated as recorded, %d disturbed)",
		l.Total(), l.Columns, l.Wrong, l.NotAsRecorded, l.Disturbed)
}

// leftOutJSON is hwcmp.LeftOut in --json.
type leftOutJSON struct {
	Columns       int `json:"columns"`
	Total         int `json:"left_out"`
	Wrong         int `json:"wrong"`
	NotAsRecorded int `json:"not_as_recorded"`
	Disturbed     int `json:"disturbed"`
}

// leftOutJSONOf is l as --json writes it.
func leftOutJSONOf(l hwcmp.LeftOut) leftOutJSON {
	return leftOutJSON{Columns: l.Columns, Total: l.Total(), Wrong: l.Wrong, NotAsRecorded: l.NotAsRecorded, Disturbed: l.Disturbed}
}

// skippedJSON is an input a pooled comparison skipped, in --json.
type skippedJSON struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
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
	Files []compareJSON `json:"files"`
	// Skipped are the inputs left out; Rule says which rows' columns
	// Pooled keeps, LeftOut how many it left out.
	Skipped []skippedJSON  `json:"skipped,omitempty"`
	Rule    string         `json:"rule"`
	LeftOut leftOutJSON    `json:"left_out"`
	Pooled  []poolStatJSON `json:"pooled"`
}

// compareStarts compares the recordings of every start (one directory
// each), prints each start's statistics pooled per transport, column
// and protocol and the hardware's start-to-start repeatability
// (hwcmp.Floors) with the worst widest cells, and writes all of it with
// --json.
func compareStarts(dirs []string, o *compareOpts, worst int, jsonOut string, prog *progressLine, stdout, stderr io.Writer) error {
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
	pl := &pooling{notes: prog.writer(stderr), prog: prog}
	for i, d := range dirs {
		reps, err := pl.compareAll([]string{d}, o, fmt.Sprintf("start %d/%d, ", i+1, len(dirs)))
		if err != nil {
			pl.summary()
			return err
		}
		starts = append(starts, hwcmp.Start{Name: filepath.Clean(d), Dir: d, Reports: reps})
	}
	pl.summary()
	rep := hwcmp.Floors(starts)
	pooled := make([][]hwcmp.PoolStat, len(starts))
	left := make([]hwcmp.LeftOut, len(starts))
	for i, st := range starts {
		pooled[i], left[i] = hwcmp.Pool(st.Reports)
	}
	if jsonOut != "-" {
		printStarts(stdout, starts, pooled, left, rep, worst)
	}
	if jsonOut == "" {
		return nil
	}
	doc := startsJSON{Rule: hwcmp.ValidRule}
	for _, s := range pl.skips {
		doc.Skipped = append(doc.Skipped, skippedJSON{File: s.path, Reason: s.reason})
	}
	for i, st := range starts {
		doc.Starts = append(doc.Starts, startJSON{Start: st.Name, Files: len(st.Reports), LeftOut: leftOutJSONOf(left[i]), Pooled: poolStatsJSON(pooled[i])})
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
func printStarts(w io.Writer, starts []hwcmp.Start, pooled [][]hwcmp.PoolStat, left []hwcmp.LeftOut, rep *hwcmp.Repeatability, worst int) {
	floors, cells := rep.Floors, rep.Cells
	fmt.Fprintf(w, "# replay compare --starts: %d starts; calibration %s\n", len(starts), starts[0].Reports[0].Calib)
	fmt.Fprintf(w, "# per start: |err| median/max over its valid rows, pooled: %s\n", hwcmp.ValidRule)
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
		fmt.Fprintf(w, "#   start %d: %s (%d recordings); %s\n", i+1, st.Name, len(st.Reports), leftOutLine(left[i]))
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
		var om, ox, sm, sx []float64
		for _, h := range run {
			om, ox = append(om, h.OthersMedianAbs), append(ox, h.OthersMaxAbs)
			sm, sx = append(sm, h.SimMedianAbs), append(sx, h.SimMaxAbs)
		}
		h := run[0]
		fmt.Fprintf(w, "  %-5s %-10s %-7s %-8s %4s  %-18s %s\n", h.Column, h.Transport, h.Proto, "mean", "",
			medianMax(stats.Mean(om), stats.Mean(ox)), medianMax(stats.Mean(sm), stats.Mean(sx)))
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
	Start   string         `json:"start"`
	Files   int            `json:"files"`
	LeftOut leftOutJSON    `json:"left_out"`
	Pooled  []poolStatJSON `json:"pooled"`
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
	Skipped   []skippedJSON   `json:"skipped,omitempty"`
	Rule      string          `json:"rule"`
	Starts    []startJSON     `json:"starts"`
	Floors    []floorJSON     `json:"floors"`
	Hindsight []hindsightJSON `json:"hindsight"`
	Cells     []floorCellJSON `json:"cells"`
}
