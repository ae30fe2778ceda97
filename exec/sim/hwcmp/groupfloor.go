package hwcmp

import (
	"cmp"
	"path"
	"slices"
	"strings"

	"github.com/twinccl/twinccl/internal/stats"
)

// GroupKey names a group of compared rows, the unit in which accuracy
// is reported and checked: the machine kind that recorded them (a
// manifest's machine column, e.g. h100x2), the column (ColNCCL or
// ColOurs), the transport (Report.Transport), the protocol the row ran
// (NCCL's column: the tuner's) and the collective.
type GroupKey struct {
	Machine, Column, Transport, Proto, Op string
}

// Compare orders keys by machine, column, transport, protocol and op.
func (k GroupKey) Compare(o GroupKey) int {
	return cmp.Or(strings.Compare(k.Machine, o.Machine), strings.Compare(k.Column, o.Column), strings.Compare(k.Transport, o.Transport),
		strings.Compare(k.Proto, o.Proto), strings.Compare(k.Op, o.Op))
}

// Recorded is a compared recording of a machine: its path (relative to
// the repository's root, with forward slashes) says which start of the
// machine it belongs to (StartDir).
type Recorded struct {
	Machine, Path string
	Report        *Report
}

// GroupFloor summarizes the floors of a group's cells (FloorCell): how
// many rows were measured steady on two starts or more, and the median
// and largest of their floors.
type GroupFloor struct {
	Cells       int
	Median, Max float64
}

// GroupFloors measures the hardware's start-to-start repeatability of
// each machine's recordings (Floors over its starts: the directories of
// its recordings, StartDir), per group (GroupKey): the median and
// largest floor of the rows measured steady on two starts or more. A
// machine with one start has no floors. Our column's cells count only
// where the build that measured them starts with one of builds (the
// kernels our calibrations were fitted on): another build's spread is
// the builds', not the hardware's. replay accuracy's report and the
// accuracy tables of testdata/accuracy both take their floors from here.
func GroupFloors(recs []Recorded, builds []string) map[GroupKey]GroupFloor {
	type startKey struct{ machine, dir string }
	byStart := map[startKey][]*Report{}
	var keys []startKey
	for _, r := range recs {
		k := startKey{r.Machine, StartDir(r.Path)}
		if byStart[k] == nil {
			keys = append(keys, k)
		}
		byStart[k] = append(byStart[k], r.Report)
	}
	slices.SortFunc(keys, func(a, b startKey) int {
		return cmp.Or(strings.Compare(a.machine, b.machine), strings.Compare(a.dir, b.dir))
	})
	floors := map[GroupKey][]float64{}
	for i := 0; i < len(keys); {
		j := i
		var starts []Start
		for ; j < len(keys) && keys[j].machine == keys[i].machine; j++ {
			starts = append(starts, Start{Name: keys[j].dir, Dir: keys[j].dir, Reports: byStart[keys[j]]})
		}
		if len(starts) > 1 {
			for _, c := range Floors(starts).Cells {
				if c.Column == ColOurs && !slices.ContainsFunc(builds, func(b string) bool { return strings.HasPrefix(c.Build, b) }) {
					continue
				}
				k := GroupKey{keys[i].machine, c.Column, c.Transport, c.Proto, c.Op}
				floors[k] = append(floors[k], c.Floor)
			}
		}
		i = j
	}
	out := map[GroupKey]GroupFloor{}
	for k, v := range floors {
		out[k] = GroupFloor{Cells: len(v), Median: stats.Median(v), Max: slices.Max(v)}
	}
	return out
}

// StartDir is the start a recording belongs to: its directory (path
// with forward slashes), less a trailing proto/ or heldout/ (the groups
// of one start).
func StartDir(p string) string {
	d := path.Dir(p)
	for _, g := range []string{"/proto", "/heldout"} {
		d = strings.TrimSuffix(d, g)
	}
	return d
}
