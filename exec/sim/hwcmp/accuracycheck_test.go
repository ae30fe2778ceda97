package hwcmp

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/manifest"
)

// accSample is a measured data set of three groups, one with a floor.
func accSample() *accMeasured {
	k := func(role manifest.Role, col, proto string) accGroupKey {
		return accGroupKey{role, GroupKey{"m", col, "P2P", proto, "AllReduce"}}
	}
	return &accMeasured{Left: map[string]int{"NCCL: disturbed": 3}, Groups: []accGroup{
		{Key: k(manifest.Eval, ColNCCL, "LL"), Files: 2, Rows: 10, Median: 0.03, Max: 0.10, HasFloor: true, Floor: GroupFloor{Cells: 4, Median: 0.06, Max: 0.08}},
		{Key: k(manifest.Eval, ColOurs, "LL"), Files: 1, Rows: 5, Median: 0.05, Max: 0.20},
		{Key: k(manifest.Fit, ColNCCL, "Simple"), Files: 3, Rows: 12, Median: 0.02, Max: 0.04},
	}}
}

// TestAccuracyTableRoundTrip: a written table reads back as written, and
// the same measurement passes its check.
func TestAccuracyTableRoundTrip(t *testing.T) {
	m := accSample()
	text := accTableText(t, "m", m)
	assert.NotContains(t, text, " \n", "trailing blanks")
	rec, err := readAccTable(strings.NewReader(text), "m.txt")
	require.NoError(t, err)
	require.Len(t, rec.Groups, 3)
	for i, g := range rec.Groups {
		assert.Equal(t, m.Groups[i].Key, g.Key)
		assert.Equal(t, m.Groups[i].HasFloor, g.HasFloor)
		assert.InDelta(t, m.Groups[i].Max, g.Max, 1e-9)
	}
	// floor above the recorded median: bound = floor + margin
	assert.InDelta(t, 0.06+accuracyMargin, rec.Groups[0].BoundMedian, 1e-9)
	assert.InDelta(t, 0.10+accuracyMargin, rec.Groups[0].BoundMax, 1e-9)
	assert.Empty(t, checkAccTable(rec, accHeader("m", m.Left), m.Groups))
}

// TestAccuracyCheckCanFail: the check names a regression beyond the
// bound, an improvement beyond the margin, a changed count, a group gone
// or new, a bound edited by hand and a header that differs; and passes a
// change within the margin, and one within the floor.
func TestAccuracyCheckCanFail(t *testing.T) {
	m := accSample()
	rec, err := readAccTable(strings.NewReader(accTableText(t, "m", m)), "m.txt")
	require.NoError(t, err)
	header := accHeader("m", m.Left)
	check := func(change func(g []accGroup) []accGroup) string {
		g := append([]accGroup(nil), m.Groups...)
		return strings.Join(checkAccTable(rec, header, change(g)), "\n")
	}
	ok := func(g []accGroup) []accGroup {
		g[1].Max += accuracyMargin * 0.9    // within the margin
		g[0].Median = 0.06 + accuracyMargin // up to the floor plus the margin
		return g
	}
	assert.Empty(t, check(ok))
	assert.Contains(t, check(func(g []accGroup) []accGroup { g[1].Max += accuracyMargin * 1.1; return g }),
		"eval m ours P2P LL AllReduce: max |error| 22.20%, above its bound 22.00% (recorded 20.00%, floor 0.00%): a regression")
	assert.Contains(t, check(func(g []accGroup) []accGroup { g[0].Median = 0.081; return g }), "median |error| 8.10%, above its bound 8.00%")
	assert.Contains(t, check(func(g []accGroup) []accGroup { g[2].Median = 0.02 - accuracyMargin*0.6; g[2].Max = 0.01; return g }),
		"fit m NCCL P2P Simple AllReduce: max |error| 1.00%, more than the margin below the recorded 4.00%: an improvement")
	assert.Contains(t, check(func(g []accGroup) []accGroup { g[2].Rows = 11; return g }), "3 files, 11 rows now; the table has 3, 12")
	assert.Contains(t, check(func(g []accGroup) []accGroup { return g[:2] }), "fit m NCCL P2P Simple AllReduce: no rows now")
	assert.Contains(t, check(func(g []accGroup) []accGroup {
		n := g[2]
		n.Key.Op = "Broadcast"
		return append(g, n)
	}), "fit m NCCL P2P Simple Broadcast: 12 rows now, not in the table")
	assert.Equal(t, "  header now:   # Left out: 4 NCCL: disturbed.\n  header table: # Left out: 3 NCCL: disturbed.",
		strings.Join(checkAccTable(rec, accHeader("m", map[string]int{"NCCL: disturbed": 4}), m.Groups), "\n"))
	edited := *rec
	edited.Groups = append([]accRecordedGroup(nil), rec.Groups...)
	edited.Groups[1].BoundMax += 0.05
	assert.Contains(t, strings.Join(checkAccTable(&edited, header, m.Groups), "\n"), "bound-max 27.00, but max(20.00, floor 0.00) + margin is 22.00")
}

// TestAccuracyTableBadInput: a table that cannot be read is an error
// naming the file and line.
func TestAccuracyTableBadInput(t *testing.T) {
	good := accTableText(t, "m", accSample())
	lines := strings.Split(good, "\n")
	col := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "role") {
			col = i
		}
	}
	for name, c := range map[string]struct {
		text, want string
	}{
		"no columns":           {"# only a comment\n", "m.txt: no column line"},
		"bad columns":          {"role machine\n", "m.txt:1: columns"},
		"short line":           {strings.Join(lines[:col+1], "\n") + "\neval m NCCL P2P\n", "4 fields, want 15"},
		"bad role":             {strings.Join(lines[:col+2], "\n") + "\n" + strings.Replace(lines[col+2], "eval", "evil", 1) + "\n", `role "evil"`},
		"bad number":           {strings.Join(lines[:col+1], "\n") + "\n" + strings.Replace(lines[col+1], "3.00", "x", 1) + "\n", `median "x"`},
		"out of order":         {strings.Join(lines[:col+1], "\n") + "\n" + lines[col+2] + "\n" + lines[col+1] + "\n", "out of order or twice"},
		"comment among groups": {strings.Join(lines[:col+2], "\n") + "\n# late\n", "a comment among the groups"},
	} {
		_, err := readAccTable(strings.NewReader(c.text), "m.txt")
		if assert.Error(t, err, name) {
			assert.Contains(t, err.Error(), c.want, name)
			assert.Contains(t, err.Error(), "m.txt", name)
		}
	}
}
