package hwcmp

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// floorRow is a measured row with its simulated time: ours at hw (best
// repetition best), NCCL's at nccl (its best the same), the simulation
// at sim for both.
func floorRow(coll model.Collective, bytes int64, hw, best, nccl, sim float64) Row {
	r := Row{Call: Call{Coll: coll, Bytes: bytes, HwUs: hw, HwBestUs: best, NCCLUs: nccl, NCCLBestUs: nccl},
		SimProto: "Simple", TunerProto: "Simple", SimUs: sim, SimNCCLUs: sim}
	r.Err = (sim - hw) / hw
	r.NCCLErr = (sim - nccl) / nccl
	if nccl == 0 {
		r.NCCLErr = math.NaN()
	}
	return r
}

// floorReport is a report of dir/rec with rows, measured by kernel.
func floorReport(dir, rec, kernel string, rows ...Row) *Report {
	return &Report{Input: &Input{Path: filepath.Join(dir, rec), Kernel: kernel, NCCLVersion: "2.28.3"}, Transport: "P2P", Rows: rows}
}

// TestFloors: a cell is the same size of the same recording below each
// start's directory; its floor is the least largest error any one
// factor on the simulation reaches over the starts; disturbed rows,
// rows of one start and other builds stay out.
func TestFloors(t *testing.T) {
	ar := model.CollAllReduce
	starts := []Start{
		{Name: "a", Dir: "m/a", Reports: []*Report{
			floorReport("m/a", "heldout/x.json", "k1",
				floorRow(ar, 1024, 10, 10, 20, 11),   // ours r 1.1, NCCL r 0.55
				floorRow(ar, 2048, 40, 20, 0, 30),    // ours disturbed (40 > 1.25 x 20); no NCCL
				floorRow(ar, 4096, 100, 100, 0, 90)), // only here
		}},
		{Name: "b", Dir: "m/b", Reports: []*Report{
			floorReport("m/b", "heldout/x.json", "k1",
				floorRow(ar, 1024, 12, 12, 25, 11.5),
				floorRow(ar, 2048, 20, 20, 0, 30)),
			floorReport("m/b", "other/x.json", "k1", floorRow(ar, 1024, 5, 5, 0, 5)), // another recording
		}},
		{Name: "c", Dir: "m/c", Reports: []*Report{
			floorReport("m/c", "heldout/x.json", "k2", floorRow(ar, 1024, 8, 8, 16, 12)), // ours by another build
		}},
	}
	rep := Floors(starts)
	floors, cells := rep.Floors, rep.Cells
	type want struct {
		col, build string
		bytes      int64
		ratios     []float64 // NaN: none
	}
	nan := math.NaN()
	wants := []want{
		{ColNCCL, "2.28.3", 1024, []float64{11.0 / 20, 11.5 / 25, 12.0 / 16}},
		{ColOurs, "k1", 1024, []float64{1.1, 11.5 / 12, nan}},
	}
	if len(cells) != len(wants) {
		t.Fatalf("%d cells, want %d: %+v", len(cells), len(wants), cells)
	}
	for _, w := range wants {
		var c *FloorCell
		for i := range cells {
			if cells[i].Column == w.col && cells[i].Bytes == w.bytes {
				c = &cells[i]
			}
		}
		if c == nil {
			t.Fatalf("no %s cell of %d B", w.col, w.bytes)
		}
		if c.Recording != filepath.Join("heldout", "x.json") || c.Build != w.build || c.Op != "AllReduce" || c.Transport != "P2P" || c.Proto != "Simple" {
			t.Errorf("cell %+v: want recording heldout/x.json, build %s", c, w.build)
		}
		lo, hi := math.Inf(1), math.Inf(-1)
		for i, r := range w.ratios {
			got := c.Ratios[i]
			if math.IsNaN(r) != math.IsNaN(got) || !math.IsNaN(r) && math.Abs(got-r) > 1e-12 {
				t.Errorf("%s %d B start %d: ratio %v, want %v", w.col, w.bytes, i, got, r)
			}
			if !math.IsNaN(r) {
				lo, hi = min(lo, r), max(hi, r)
			}
		}
		if math.Abs(c.Floor-(hi-lo)/(hi+lo)) > 1e-12 {
			t.Errorf("%s %d B: floor %v, want %v", w.col, w.bytes, c.Floor, (hi-lo)/(hi+lo))
		}
		// The floor is reached by the factor 2/(hi+lo) and by no other:
		// nudging it either way makes some start worse.
		for _, k := range []float64{2 / (hi + lo), 2/(hi+lo) + 1e-3, 2/(hi+lo) - 1e-3} {
			worst := 0.0
			for _, r := range w.ratios {
				if !math.IsNaN(r) {
					worst = max(worst, math.Abs(k*r-1))
				}
			}
			if worst < c.Floor-1e-12 || k != 2/(hi+lo) && worst <= c.Floor {
				t.Errorf("%s %d B: factor %v reaches %v against the floor %v", w.col, w.bytes, k, worst, c.Floor)
			}
		}
		if c.SimMaxAbs < c.Floor {
			t.Errorf("%s %d B: the simulation's own largest error %v is below the floor %v", w.col, w.bytes, c.SimMaxAbs, c.Floor)
		}
	}
	if cells[0].Floor < cells[1].Floor {
		t.Errorf("cells not widest first: %v then %v", cells[0].Floor, cells[1].Floor)
	}
	if len(floors) != 2 || floors[0].Column != ColNCCL || floors[1].Column != ColOurs {
		t.Fatalf("floors %+v, want NCCL's then ours", floors)
	}
	for _, f := range floors {
		if f.Cells != 1 || f.MaxFloor != f.MedianFloor || f.Worst != filepath.Join("heldout", "x.json")+": AllReduce 1024 B" {
			t.Errorf("floor %+v: want its one cell", f)
		}
	}
	// Hindsight: each start's row against the median of the others'
	// ratios; start c's row of another build has no other start.
	type hs struct {
		col, start         string
		others, simulation float64
	}
	hwant := []hs{
		{ColNCCL, "a", 0.55/((11.5/25+12.0/16)/2) - 1, 0.55 - 1},
		{ColNCCL, "b", (11.5/25)/((0.55+12.0/16)/2) - 1, 11.5/25 - 1},
		{ColNCCL, "c", (12.0/16)/((0.55+11.5/25)/2) - 1, 12.0/16 - 1},
		{ColOurs, "a", 1.1/(11.5/12) - 1, 0.1},
		{ColOurs, "b", (11.5/12)/1.1 - 1, 11.5/12 - 1},
	}
	if len(rep.Hindsight) != len(hwant) {
		t.Fatalf("hindsight %+v, want %d entries", rep.Hindsight, len(hwant))
	}
	for i, w := range hwant {
		h := rep.Hindsight[i]
		if h.Column != w.col || h.Start != w.start || h.Rows != 1 ||
			math.Abs(h.OthersMaxAbs-math.Abs(w.others)) > 1e-12 || h.OthersMedianAbs != h.OthersMaxAbs ||
			math.Abs(h.SimMaxAbs-math.Abs(w.simulation)) > 1e-12 || h.SimMedianAbs != h.SimMaxAbs {
			t.Errorf("hindsight %d: %+v, want %s start %s: others %v, simulation %v", i, h, w.col, w.start, math.Abs(w.others), math.Abs(w.simulation))
		}
	}
}

// TestFloorsRecorded: on the H200 pair's NVLink recordings at the
// held-out sizes, every start of NCCL's column is one prediction of the
// kind the floor bounds, so no cell's floor exceeds the simulation's
// own largest error on it, and every cell was measured on two starts.
func TestFloorsRecorded(t *testing.T) {
	var starts []Start
	for _, s := range []string{"heldout", "rerun/heldout", "rerun2/heldout"} {
		st := Start{Name: s, Dir: filepath.Join(hwDir(), s)}
		for _, rec := range []string{"p2p-allreduce-simple.json", "p2p-broadcast-ll.json"} {
			in, cp := openMachineFile(t, hwDir(), filepath.Join(s, rec))
			rep, err := cp.Compare(in)
			if err != nil {
				t.Fatal(err)
			}
			st.Reports = append(st.Reports, rep)
		}
		starts = append(starts, st)
	}
	rep := Floors(starts)
	floors, cells := rep.Floors, rep.Cells
	if len(cells) < 16 {
		t.Fatalf("%d cells, want the held-out sizes of both recordings", len(cells))
	}
	for _, c := range cells {
		n := 0
		for _, r := range c.Ratios {
			if !math.IsNaN(r) {
				n++
			}
		}
		if n < 2 || len(c.Ratios) != len(starts) {
			t.Errorf("%s: %d of %d starts measured it", c.Name(), n, len(c.Ratios))
		}
		if c.Floor < 0 || c.Floor > c.SimMaxAbs+1e-12 {
			t.Errorf("%s %s: floor %v above the simulation's largest error %v", c.Column, c.Name(), c.Floor, c.SimMaxAbs)
		}
	}
	for _, f := range floors {
		if f.MedianFloor > f.MaxFloor || f.MaxFloor > f.SimMaxAbs+1e-12 {
			t.Errorf("%+v: want median <= max <= the simulation's largest error", f)
		}
	}
}
