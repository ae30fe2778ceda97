package hwcmp

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
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/internal/manifest"
)

// rewrite regenerates the accuracy tables from the current simulator.
var rewrite = flag.Bool("rewrite", false, "rewrite testdata/accuracy/*.txt from the current simulator (after an intended change; review the diff)")

// accuracyMargin is the one margin of the accuracy tables, in |error|
// (0.02: 2 percentage points): how far a group's median or largest
// |error| may rise above the larger of its recorded value and its
// hardware repeatability floor before TestAccuracy calls it a regression,
// and how far it may fall below its recorded value before the table is
// stale. The simulator is deterministic, so an unchanged tree reproduces
// every recorded value exactly; the margin is what a change may move a
// group by without a rewrite and a reviewed diff.
const accuracyMargin = 0.02

// accuracyDir holds the tables.
func accuracyDir() string { return filepath.Join(accRepoRoot(), "testdata", "accuracy") }

// TestAccuracy simulates every recording and timing table of the
// manifest, fit and eval alike (nothing is fitted: eval data only
// checks), and compares each group's median and largest |error| with the
// table of its data set in testdata/accuracy (accHeader states the rule).
// With -rewrite it writes the tables instead.
func TestAccuracy(t *testing.T) {
	root := accRepoRoot()
	m, err := manifest.Load(filepath.Join(root, filepath.FromSlash(manifest.Path)))
	require.NoError(t, err)
	sets := accDataSets(m)
	require.NotEmpty(t, sets)
	var names []string
	for _, ds := range sets {
		names = append(names, ds.Name+".txt")
		t.Run(ds.Name, func(t *testing.T) {
			// the shared baselines and topologies beside the checkout
			for _, e := range ds.Entries {
				for _, p := range []string{e.Path, e.ReportOption("topo")} {
					if rel, ok := strings.CutPrefix(p, "../"); ok {
						if _, err := os.Stat(filepath.Join(root, "..", filepath.FromSlash(rel))); err != nil {
							t.Skipf("%s (%s:%d) is not beside the checkout: %v", p, manifest.Path, e.Line, err)
						}
					}
				}
			}
			got, err := measureDataSet(root, ds)
			require.NoError(t, err)
			require.NotEmpty(t, got.Groups, "%s: no rows measured", ds.Name)
			file := filepath.Join(accuracyDir(), ds.Name+".txt")
			if *rewrite {
				require.NoError(t, atomicfile.Write(file, func(w io.Writer) error { return writeAccTable(w, ds.Name, got) }))
				return
			}
			f, err := os.Open(file)
			require.NoError(t, err, "run go test ./exec/sim/hwcmp -run Accuracy -rewrite to write it")
			defer f.Close()
			want, err := readAccTable(f, filepath.ToSlash(filepath.Join("testdata", "accuracy", ds.Name+".txt")))
			require.NoError(t, err)
			if problems := checkAccTable(want, accHeader(ds.Name, got.Left), got.Groups); len(problems) > 0 {
				t.Errorf("%s differs from the simulator (go test ./exec/sim/hwcmp -run Accuracy -rewrite rewrites it after an intended change):\n%s",
					filepath.Base(file), strings.Join(problems, "\n"))
			}
		})
	}
	// Every table is a data set's: none left behind by a data set gone.
	files, err := filepath.Glob(filepath.Join(accuracyDir(), "*.txt"))
	require.NoError(t, err)
	for _, f := range files {
		if !slices.Contains(names, filepath.Base(f)) {
			if *rewrite {
				require.NoError(t, os.Remove(f))
				continue
			}
			t.Errorf("%s: no data set of %s has this name (want one of %s)", f, manifest.Path, strings.Join(names, ", "))
		}
	}
}

// checkAccTable compares the groups measured now (got, in order) with a
// table (want, whose header must be header), and returns one line per
// problem: a header that differs, a group gone or new, a file or row
// count that differs, a bound column that does not follow from the
// recorded values, a median or max above its bound (a regression) or
// more than the margin below its recorded value (an improvement the table
// does not keep).
func checkAccTable(want *accRecorded, header string, got []accGroup) []string {
	var out []string
	if want.Header != header {
		// the header's lines that differ (what was left out, the margin)
		now, table := strings.Split(header, "\n"), strings.Split(want.Header, "\n")
		for _, l := range now {
			if !slices.Contains(table, l) {
				out = append(out, "  header now:   "+l)
			}
		}
		for _, l := range table {
			if !slices.Contains(now, l) {
				out = append(out, "  header table: "+l)
			}
		}
	}
	byKey := map[accGroupKey]accGroup{}
	for _, g := range got {
		byKey[g.Key] = g
	}
	seen := map[accGroupKey]bool{}
	for _, w := range want.Groups {
		seen[w.Key] = true
		g, ok := byKey[w.Key]
		if !ok {
			out = append(out, fmt.Sprintf("  line %d: %s: no rows now", w.Line, w.Key))
			continue
		}
		if g.Files != w.Files || g.Rows != w.Rows {
			out = append(out, fmt.Sprintf("  line %d: %s: %d files, %d rows now; the table has %d, %d", w.Line, w.Key, g.Files, g.Rows, w.Files, w.Rows))
		}
		var flm, flx float64
		if w.HasFloor {
			flm, flx = w.Floor.Median, w.Floor.Max
		}
		for _, s := range []struct {
			name                 string
			now, recorded, floor float64
			stated               float64
		}{{"median", g.Median, w.Median, flm, w.BoundMedian}, {"max", g.Max, w.Max, flx, w.BoundMax}} {
			bound := accBound(s.recorded, s.floor)
			switch {
			case math.Abs(bound-s.stated) > 0.0001:
				out = append(out, fmt.Sprintf("  line %d: %s: bound-%s %s, but max(%s, floor %s) + margin is %s", w.Line, w.Key, s.name,
					pct(s.stated), pct(s.recorded), pct(s.floor), pct(bound)))
			case s.now > bound:
				out = append(out, fmt.Sprintf("  line %d: %s: %s |error| %s%%, above its bound %s%% (recorded %s%%, floor %s%%): a regression",
					w.Line, w.Key, s.name, pct(s.now), pct(bound), pct(s.recorded), pct(s.floor)))
			case s.now < s.recorded-accuracyMargin:
				out = append(out, fmt.Sprintf("  line %d: %s: %s |error| %s%%, more than the margin below the recorded %s%%: an improvement; rewrite the table to keep it",
					w.Line, w.Key, s.name, pct(s.now), pct(s.recorded)))
			}
		}
	}
	for _, g := range got {
		if !seen[g.Key] {
			out = append(out, fmt.Sprintf("  %s: %d rows now, not in the table", g.Key, g.Rows))
		}
	}
	return out
}

// accTableText writes a measured data set as its table would be.
func accTableText(t *testing.T, name string, m *accMeasured) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, writeAccTable(&b, name, m))
	return b.String()
}
