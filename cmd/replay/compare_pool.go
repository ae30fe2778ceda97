package main

import (
	"fmt"
	"io"
	"io/fs"
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
// every JSON file under each directory named (run gpu's sweeps; the call
// traces beside them repeat one call per size of the same runs), in
// name order.
func poolInputs(pos []string) ([]string, error) {
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
			if !d.IsDir() && strings.EqualFold(filepath.Ext(path), ".json") {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no JSON recordings (run gpu --json files) under it", p)
		}
		slices.Sort(found)
		out = append(out, found...)
	}
	return out, nil
}

// comparePooled compares every input (poolInputs) as the options say,
// prints a line per file and the statistics pooled per transport, column
// and protocol (hwcmp.Pool), and writes both with --json.
func comparePooled(pos []string, o *compareOpts, jsonOut string, stdout, stderr io.Writer) error {
	paths, err := poolInputs(pos)
	if err != nil {
		return err
	}
	var reps []*hwcmp.Report
	for _, p := range paths {
		in, err := hwcmp.Open(p)
		if err != nil {
			return err
		}
		if in.Kind != hwcmp.KindJSON {
			return fmt.Errorf("%w: %s is a call trace: pool run gpu --json files (a trace times one call per size of the run its JSON file times)", errUsage, p)
		}
		rep, _, err := o.compare(in, stderr)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
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
	for _, s := range pooled {
		doc.Pooled = append(doc.Pooled, poolStatJSON{Transport: s.Transport, Files: s.Files, compareStatJSON: statJSON(s.Stat)})
	}
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
	s := fmt.Sprintf("%.1f/%.1f%%", 100*all.MedianAbs, 100*all.MaxAbs)
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

// pooledJSON is the --json document of several inputs.
type pooledJSON struct {
	Files  []compareJSON  `json:"files"`
	Pooled []poolStatJSON `json:"pooled"`
}
