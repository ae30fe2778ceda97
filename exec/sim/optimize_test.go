package sim

import (
	"math"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/optimize/functions"

	"github.com/twinccl/twinccl/model"
)

// box is [lo, hi] in each of n dimensions.
func box(n int, lo, hi float64) ([]float64, []float64) {
	l, h := make([]float64, n), make([]float64, n)
	for i := range l {
		l[i], h[i] = lo, hi
	}
	return l, h
}

// filled is n copies of v.
func filled(n int, v float64) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = v
	}
	return x
}

// TestBoxSearchRosenbrock: the default method and Nelder–Mead find the
// minimum of the extended Rosenbrock function, 0 at (1, ..., 1), in 2 and
// 10 dimensions from gonum's usual start, (-1.2, 1, -1.2, 1, ...), within
// the budget, counting every evaluation once.
func TestBoxSearchRosenbrock(t *testing.T) {
	for _, m := range []FitMethod{FitMethod(0), MethodNelderMead} {
		for _, n := range []int{2, 10} {
			x0 := make([]float64, n)
			for i := range x0 {
				x0[i] = []float64{-1.2, 1}[i%2]
			}
			calls := 0
			f := func(x []float64) float64 { calls++; return functions.ExtendedRosenbrock{}.Func(x) }
			lo, hi := box(n, -5, 5)
			bs := newBoxSearch(f, lo, hi, m, 3)
			x, fx := bs.search(x0, 20000, 0)
			assert.Less(t, fx, 1e-8, "%s n=%d", m, n)
			assert.InDeltaSlice(t, filled(n, 1), x, 1e-3, "%s n=%d", m, n)
			assert.Equal(t, calls, bs.evals, "%s n=%d: evaluations counted", m, n)
			assert.LessOrEqual(t, bs.evals, 20000, "%s n=%d", m, n)
		}
	}
}

// shiftedQuadratic is sum_i w_i (x_i - c_i)^2 over 36 dimensions, c
// reaching beyond [-1, 1] in a third of them: its minimum over the box
// [-1, 1]^36 is c clamped to it, on a bound in those dimensions.
func shiftedQuadratic() (f func([]float64) float64, want []float64) {
	const n = 36
	c, w := make([]float64, n), make([]float64, n)
	want = make([]float64, n)
	for i := range c {
		c[i] = 0.8 * math.Sin(float64(i+1))
		switch i % 6 {
		case 1:
			c[i] = 1.5
		case 4:
			c[i] = -2
		}
		w[i] = 1 + float64(i%5)
		want[i] = min(max(c[i], -1), 1)
	}
	return func(x []float64) float64 {
		var s float64
		for i := range x {
			s += w[i] * (x[i] - c[i]) * (x[i] - c[i])
		}
		return s
	}, want
}

// TestBoxSearchBoundedQuadratic: every method comes near the minimum of
// a shifted quadratic in 36 dimensions over a box that cuts it off (on a
// bound in 12 of them) within its budget, never scores a point outside
// the box and gives the same point on every run; the default method
// finds the minimum, on the bounds exactly.
func TestBoxSearchBoundedQuadratic(t *testing.T) {
	q, want := shiftedQuadratic()
	fmin := q(want)
	lo, hi := box(len(want), -1, 1)
	const budget = 20000
	for _, tc := range []struct {
		m         FitMethod
		excess, x float64 // bounds on f - fmin and on |x - want|
	}{
		{FitMethod(0), 1e-4, 1e-3}, // the coordinate search stops at steps of 1e-3
		{MethodNelderMead, 1e-4, 1e-2},
		{MethodLBFGS, 1e-3, 1e-2},
		{MethodBFGS, 1e-3, 1e-2},
		{MethodCmaEs, 0.1, 0.1}, // samples: slow to settle on 36 constants
	} {
		m := tc.m
		run := func() ([]float64, float64, int) {
			outside := 0
			f := func(x []float64) float64 {
				for i, v := range x {
					if v < lo[i] || v > hi[i] {
						outside++
					}
				}
				return q(x)
			}
			bs := newBoxSearch(f, lo, hi, m, 3)
			x, fx := bs.search(filled(len(want), 0), budget, 1)
			assert.Zero(t, outside, "%s: points scored outside the box", m)
			return x, fx, bs.evals
		}
		x, fx, evals := run()
		assert.Less(t, fx-fmin, tc.excess, "%s: f %g, minimum %g, after %d evaluations", m, fx, fmin, evals)
		assert.InDeltaSlice(t, want, x, tc.x, "%s", m)
		assert.LessOrEqual(t, evals, budget, "%s", m)
		if m == FitMethod(0) {
			for i := range x {
				if want[i] == hi[i] || want[i] == lo[i] {
					assert.Equal(t, want[i], x[i], "%s: coordinate %d not on its bound", m, i)
				}
			}
		}
		x2, fx2, evals2 := run()
		assert.Equal(t, x, x2, "%s: not deterministic", m)
		assert.Equal(t, fx, fx2, "%s", m)
		assert.Equal(t, evals, evals2, "%s", m)
	}
}

// TestParseFitMethod: every method's name reads back as it; the zero
// value is the default, the coordinate search.
func TestParseFitMethod(t *testing.T) {
	for _, m := range FitMethods {
		p, err := ParseFitMethod(m.String())
		require.NoError(t, err)
		assert.Equal(t, m, p)
	}
	assert.Equal(t, MethodCoordinate, FitMethod(0))
	assert.Equal(t, MethodCoordinate, FitMethods[0])
	_, err := ParseFitMethod("simplex")
	assert.Error(t, err)
}

// TestFitRecovers: a table simulated with known constants (the launch
// cost, LL's copy rate and its per-slice overhead) is fitted from a
// start with each of them off by a factor of 1.3 to 1.6: the fit finds
// them again, its evaluations counted once each (Step's count is
// FitResult.Evals, within MaxEvals), and a second fit gives the same
// calibration.
func TestFitRecovers(t *testing.T) {
	truth := quietCalib(t)
	rec := Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL, NChannels: 2}
	tb := &Table{Name: "allgather-ll.tsv", Harness: HarnessNCCLTests}
	for i, b := range []int64{1 << 10, 8 << 10, 64 << 10, 512 << 10, 4 << 20, 16 << 20} {
		tb.Rows = append(tb.Rows, Measurement{Coll: model.CollAllGather, Bytes: b, MeanUs: 1, Line: i + 1, Recorded: &rec})
	}
	ft := NewFitTable(tb, searchOn(t, h100x2Topo(), 1, tb))
	rows, err := ft.Compare(truth)
	require.NoError(t, err)
	for i := range ft.Rows {
		ft.Rows[i].MeanUs = rows[i].SimUs
	}
	get := map[string]func(*Calib) float64{
		"ll.copy_GBps":         func(c *Calib) float64 { return c.LL.CopyGBps },
		"ll.slice_overhead_us": func(c *Calib) float64 { return c.LL.SliceOverheadUs },
		"launch_us":            func(c *Calib) float64 { return c.LaunchUs },
	}
	start := truth.Clone()
	start.LL.CopyGBps *= 1.5
	start.LL.SliceOverheadUs /= 1.3
	start.LaunchUs *= 1.6
	for name, g := range get {
		require.Positive(t, g(truth), name)
	}
	only := regexp.MustCompile(`^(launch_us|ll\.copy_GBps|ll\.slice_overhead_us)$`).MatchString
	steps := 0
	opt := FitOptions{Only: only, MaxEvals: 600, Step: func(n int, _ float64) { steps = n }}
	fr, err := FitTables([]FitTable{ft}, start, opt)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"launch_us", "ll.copy_GBps", "ll.slice_overhead_us"}, fr.Params)
	for name, g := range get {
		assert.InEpsilon(t, g(truth), g(fr.Calib), 0.02, "%s: start %.4g", name, g(start))
		t.Logf("%s: truth %.5g start %.5g fitted %.5g (%d evaluations, loss %g)", name, g(truth), g(start), g(fr.Calib), fr.Evals, fr.Loss)
	}
	assert.Less(t, fr.Max, 0.005)
	assert.Equal(t, steps, fr.Evals)
	assert.LessOrEqual(t, fr.Evals, opt.MaxEvals)
	again, err := FitTables([]FitTable{ft}, start, opt)
	require.NoError(t, err)
	assert.Equal(t, fr.Loss, again.Loss)
	assert.Equal(t, fr.Evals, again.Evals)
	for name, g := range get {
		assert.Equal(t, g(fr.Calib), g(again.Calib), name)
	}
}
