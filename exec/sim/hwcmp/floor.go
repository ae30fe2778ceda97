package hwcmp

import (
	"cmp"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/twinccl/twinccl/internal/stats"
)

// Start is the comparisons of one start of a machine: every recording
// made in one session on it (e.g. testdata/hw/h200x2/rerun7), found
// under Dir.
type Start struct {
	// Name names the start in output (e.g. its directory).
	Name string
	// Dir is the directory the recordings were found under: a
	// recording's path below it is what matches it with the same
	// recording of another start.
	Dir string
	// Reports are the start's comparisons.
	Reports []*Report
}

// FloorCell is one row measured on several starts: the same size of
// the same recording (its path below each start's Dir) in one column,
// by the same build (Build).
type FloorCell struct {
	Transport, Column, Proto string
	// Build is what measured the column: our executor's kernel build
	// and revision (Input.Kernel, Input.Revision) for ColOurs, NCCL's
	// version for ColNCCL ("" where the recordings do not say; before
	// run gpu recorded its revision, the kernel alone tells builds
	// apart, and a change of the host side goes unseen). Starts measured by different builds
	// are different cells: their disagreement is the builds', not the
	// hardware's.
	Build string
	// Recording is the recording's path below its start's directory.
	Recording string
	Op        string
	Bytes     int64
	// Ratios is, per start of the Floors call in their order, the
	// simulated over the measured time of the row where the start has it
	// steady and valid (Row.Invalid: not disturbed, its result right, run
	// as recorded), NaN where it does not.
	Ratios []float64
	// Floor is (max - min) / (max + min) of the ratios: the least
	// largest error over the starts of any prediction that differs from
	// the simulation's by one factor for the row on every start (the
	// factor 2 / (max + min) reaches it).
	Floor float64
	// SimMaxAbs is the simulation's own largest |error| over the starts.
	SimMaxAbs float64
}

// Floor summarizes the cells of one transport, column and protocol.
type Floor struct {
	Transport, Column, Proto string
	// Cells counts the rows measured steady on at least two starts.
	Cells int
	// MedianFloor and MaxFloor are the median and the largest of the
	// cells' floors. No prediction that follows the simulation's start
	// to start changes (its host probes' scaling) keeps every start's
	// largest error below MaxFloor.
	MedianFloor, MaxFloor float64
	// Worst names the cell of MaxFloor.
	Worst string
	// SimMaxAbs is the simulation's largest |error| on the cells' rows.
	SimMaxAbs float64
}

// Hindsight compares, on one start, the simulation with what it would
// have reached knowing the other starts: each row predicted by the
// simulation times the factor that puts the median of the other starts'
// ratios (simulated over measured) on 1, the best a simulator tuned
// per row on those starts can expect of this one.
type Hindsight struct {
	Start                    string
	Transport, Column, Proto string
	// Rows counts the start's steady rows that another start measured
	// steady too.
	Rows int
	// OthersMedianAbs and OthersMaxAbs are the median and largest
	// |error| of the hindsight prediction; SimMedianAbs and SimMaxAbs
	// the simulation's own on the same rows.
	OthersMedianAbs, OthersMaxAbs float64
	SimMedianAbs, SimMaxAbs       float64
}

// Repeatability is what Floors measures.
type Repeatability struct {
	// Floors summarize the cells per transport, column and protocol.
	Floors []Floor
	// Hindsight is, per transport, column, protocol and start (in the
	// starts' order), the simulation against the other starts' median.
	Hindsight []Hindsight
	// Cells are every row measured steady on two starts or more.
	Cells []FloorCell
}

// Floors measures how repeatable the hardware was from start to start,
// and so how close any simulator can come to it: per row measured
// steady on at least two starts (the same size of the same recording,
// per column), the spread of the simulation's ratio to the measurement
// over the starts. A row whose recordings disagree by more than a
// tolerance allows cannot be predicted within it on every start; the
// ratio, rather than the measured time alone, keeps what the
// simulation already explains of a start (the host probes' scaling of
// the socket costs). Cells come widest first, then by transport,
// column, protocol, recording, op and size; the summaries in
// transport, column and protocol order, and with them how each start's
// rows compare with the other starts' median (Hindsight).
func Floors(starts []Start) *Repeatability {
	type key struct {
		transport, col, build, proto, rec, op string
		bytes                                 int64
	}
	ratios := map[key][]float64{}
	for si, st := range starts {
		for _, rep := range st.Reports {
			rec, err := filepath.Rel(st.Dir, rep.Input.Path)
			if err != nil {
				rec = rep.Input.Path
			}
			build := map[string]string{ColOurs: strings.TrimSpace(rep.Input.Kernel + " " + rep.Input.Revision), ColNCCL: rep.Input.NCCLVersion}
			for i := range rep.Rows {
				r := &rep.Rows[i]
				for _, col := range []string{ColOurs, ColNCCL} {
					e, proto := r.colErr(col)
					if math.IsNaN(e) || math.IsInf(e, 0) || r.Invalid(col) != "" {
						continue
					}
					k := key{rep.Transport, col, build[col], proto, rec, r.Coll.String(), r.Bytes}
					v := ratios[k]
					if v == nil {
						v = make([]float64, len(starts))
						for j := range v {
							v[j] = math.NaN()
						}
						ratios[k] = v
					}
					v[si] = 1 + e
				}
			}
		}
	}
	var cells []FloorCell
	for k, v := range ratios {
		lo, hi, n, simMax := math.Inf(1), math.Inf(-1), 0, 0.0
		for _, r := range v {
			if math.IsNaN(r) {
				continue
			}
			n++
			lo, hi = min(lo, r), max(hi, r)
			simMax = max(simMax, math.Abs(r-1))
		}
		if n < 2 {
			continue
		}
		cells = append(cells, FloorCell{Transport: k.transport, Column: k.col, Build: k.build, Proto: k.proto, Recording: k.rec, Op: k.op,
			Bytes: k.bytes, Ratios: v, Floor: (hi - lo) / (hi + lo), SimMaxAbs: simMax})
	}
	slices.SortFunc(cells, func(a, b FloorCell) int {
		return cmp.Or(cmp.Compare(b.Floor, a.Floor), strings.Compare(a.Transport, b.Transport), strings.Compare(a.Column, b.Column),
			strings.Compare(a.Build, b.Build), strings.Compare(a.Proto, b.Proto), strings.Compare(a.Recording, b.Recording),
			strings.Compare(a.Op, b.Op), cmp.Compare(a.Bytes, b.Bytes))
	})
	type group struct{ transport, col, proto string }
	byGroup := map[group][]*FloorCell{}
	var groups []group
	for i := range cells {
		c := &cells[i]
		g := group{c.Transport, c.Column, c.Proto}
		if byGroup[g] == nil {
			groups = append(groups, g)
		}
		byGroup[g] = append(byGroup[g], c)
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(strings.Compare(a.transport, b.transport), strings.Compare(a.col, b.col), strings.Compare(a.proto, b.proto))
	})
	var out []Floor
	for _, g := range groups {
		cs := byGroup[g] // widest first
		f := Floor{Transport: g.transport, Column: g.col, Proto: g.proto, Cells: len(cs), MaxFloor: cs[0].Floor, Worst: cs[0].Name()}
		fl := make([]float64, len(cs))
		for i, c := range cs {
			fl[i] = c.Floor
			f.SimMaxAbs = max(f.SimMaxAbs, c.SimMaxAbs)
		}
		f.MedianFloor = stats.Median(fl)
		out = append(out, f)
	}
	rep := &Repeatability{Floors: out, Cells: cells}
	for _, g := range groups {
		for si, st := range starts {
			var others, own []float64
			for _, c := range byGroup[g] {
				r := c.Ratios[si]
				if math.IsNaN(r) {
					continue
				}
				var rest []float64
				for j, o := range c.Ratios {
					if j != si && !math.IsNaN(o) {
						rest = append(rest, o)
					}
				}
				others = append(others, math.Abs(r/stats.Median(rest)-1))
				own = append(own, math.Abs(r-1))
			}
			if len(own) == 0 {
				continue
			}
			rep.Hindsight = append(rep.Hindsight, Hindsight{Start: st.Name, Transport: g.transport, Column: g.col, Proto: g.proto,
				Rows: len(own), OthersMedianAbs: stats.Median(others), OthersMaxAbs: slices.Max(others),
				SimMedianAbs: stats.Median(own), SimMaxAbs: slices.Max(own)})
		}
	}
	return rep
}

// Name is the cell as output names it: recording, op and size.
func (c *FloorCell) Name() string {
	return fmt.Sprintf("%s: %s %d B", c.Recording, c.Op, c.Bytes)
}
