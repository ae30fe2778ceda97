package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"gonum.org/v1/gonum/diff/fd"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

// FitMethod is the search a fit runs in log space ("replay calibrate
// --method"), every one of them by gonum.org/v1/gonum/optimize.Minimize.
type FitMethod int

const (
	// MethodCoordinate, the default, is a coordinate search
	// (coordinateSearch: gonum has none, it is an optimize.Method of
	// ours) with half the budget, then gonum's Nelder–Mead from its point
	// with the rest. With 3000 evaluations of a fit of 41 constants to 120
	// rows of the H100 pair (rerun13 and rerun16 proto/p2p-*-{ll,simple},
	// NCCL's column, from calib/h100.json: loss 0.00584) it reached a loss
	// of 0.00219, Nelder–Mead alone 0.00320, L-BFGS 0.00373, CMA-ES
	// 0.00386; on 7 of those constants and the LL half of the rows (stage
	// 1 of testdata/hw/fit-nccl-h100.sh: 0.00689) CMA-ES reached 0.00519,
	// the others 0.00548 to 0.00553.
	MethodCoordinate FitMethod = iota
	// MethodNelderMead is gonum's Nelder–Mead simplex search (its step
	// parameters adapted to the dimension), restarted from the best point
	// with a smaller simplex.
	MethodNelderMead
	// MethodCmaEs is gonum's CMA-ES (CmaEsChol), its samples drawn from a
	// generator seeded with a fixed number per search and restart.
	MethodCmaEs
	// MethodLBFGS is gonum's L-BFGS on a forward finite-difference
	// gradient (gonum.org/v1/gonum/diff/fd), each gradient as many
	// evaluations as there are constants.
	MethodLBFGS
	// MethodBFGS is gonum's BFGS on the same gradient.
	MethodBFGS
)

// FitMethods are the methods ParseFitMethod knows, the default first.
var FitMethods = []FitMethod{MethodCoordinate, MethodNelderMead, MethodCmaEs, MethodLBFGS, MethodBFGS}

// String is the method's name on the command line.
func (m FitMethod) String() string {
	switch m {
	case MethodCoordinate:
		return "coordinate"
	case MethodNelderMead:
		return "neldermead"
	case MethodCmaEs:
		return "cmaes"
	case MethodLBFGS:
		return "lbfgs"
	case MethodBFGS:
		return "bfgs"
	}
	return fmt.Sprintf("FitMethod(%d)", int(m))
}

// ParseFitMethod reads a method's name (FitMethods).
func ParseFitMethod(s string) (FitMethod, error) {
	var names []string
	for _, m := range FitMethods {
		if m.String() == s {
			return m, nil
		}
		names = append(names, m.String())
	}
	return 0, fmt.Errorf("unknown method %q (%s)", s, strings.Join(names, ", "))
}

// boxPenalty weighs the squared distance of a point outside the bounds
// to its projection onto them (in log space, added to the loss there):
// beyond a bound the loss of the projection does not change, and without
// the penalty a search that stepped there would find no way back (from 1,
// a table made with an LL link efficiency of 1.15 was fitted to its
// bound, 1.25).
const boxPenalty = 1.0

// fdStep is the finite-difference step of the gradient methods in log
// space (a factor of 1.001), chosen, not tuned: the simulated times are
// only piecewise smooth in the constants.
const fdStep = 1e-3

// boxSearch minimises f over the box [lo, hi] with a method run by
// gonum's optimize.Minimize. The searches of one boxSearch share its count of evaluations
// (every call of f counts once) and its lowest value.
type boxSearch struct {
	// f is the objective at a point within the bounds (it must not keep
	// the slice); +Inf marks a point it cannot score.
	f      func(x []float64) float64
	lo, hi []float64
	method FitMethod
	// restarts is the number of the method's runs per search, each from
	// the best point yet with a smaller initial step (at least 1).
	restarts int
	// step, when set, is called after every evaluation with the count so
	// far and the lowest value yet.
	step func(evals int, lowest float64)
	// restarted, when set, is called after each run of a search with its
	// index, the count of evaluations so far and the best point yet.
	restarted func(r, evals int, best []float64)

	evals  int
	lowest float64
}

func newBoxSearch(f func([]float64) float64, lo, hi []float64, method FitMethod, restarts int) *boxSearch {
	return &boxSearch{f: f, lo: lo, hi: hi, method: method, restarts: max(restarts, 1), lowest: math.Inf(1)}
}

// project is x put onto the bounds, and the squared distance it moved.
func (b *boxSearch) project(dst, x []float64) float64 {
	var d2 float64
	for i, v := range x {
		p := min(max(v, b.lo[i]), b.hi[i])
		d2 += (v - p) * (v - p)
		dst[i] = p
	}
	return d2
}

// search minimises f from x0 (put onto the bounds) with at most maxEvals
// evaluations, split between the restarts: the best point found, within
// the bounds, and f there. seed makes a randomised method's draws those
// of this search alone. Deterministic.
func (b *boxSearch) search(x0 []float64, maxEvals int, seed uint64) ([]float64, float64) {
	n := len(x0)
	best := make([]float64, n)
	b.project(best, x0)
	bestF := math.Inf(1)
	limit := b.evals + maxEvals
	stop := limit // the current run's last evaluation
	at := make([]float64, n)
	// lastX, lastF are the latest evaluation, for the origin of a
	// finite-difference gradient.
	lastX, lastF := make([]float64, n), math.NaN()
	// penalised is f at x's projection onto the bounds plus boxPenalty
	// times the squared distance to it: what the methods minimise.
	penalised := func(x []float64) float64 {
		if b.evals >= stop {
			// a gradient's evaluations past the budget: not run, and the
			// run ends after this one
			return math.Inf(1)
		}
		d2 := b.project(at, x)
		v := b.f(at)
		b.evals++
		if v < bestF {
			copy(best, at)
			bestF = v
		}
		if v < b.lowest {
			b.lowest = v
		}
		if b.step != nil {
			b.step(b.evals, b.lowest)
		}
		v += boxPenalty * d2
		copy(lastX, x)
		lastF = v
		return v
	}
	penalised(best)
	method := b.method
	if method == MethodCoordinate {
		// a coordinate search with half the budget, robust where one
		// constant pins a family of rows, then Nelder–Mead
		stop = b.evals + (limit-b.evals)/2
		minimize(penalised, best, bestF, &stop, b, &coordinateSearch{Step: 0.5, MinStep: 1e-3, Lo: b.lo, Hi: b.hi}, nil)
		method = MethodNelderMead
	}
	for r := 0; r < b.restarts && b.evals < limit; r++ {
		stop = b.evals + (limit-b.evals)/(b.restarts-r)
		b.run(method, penalised, best, bestF, r, seed, &stop, lastX, &lastF)
		if b.restarted != nil {
			b.restarted(r, b.evals, best)
		}
	}
	return best, bestF
}

// run is one run of the method from x (value fx), until the evaluation
// count reaches *stop or the method converges.
func (b *boxSearch) run(m FitMethod, f func([]float64) float64, x []float64, fx float64, r int, seed uint64, stop *int, lastX []float64, lastF *float64) {
	n := len(x)
	// the initial step in log space: 0.3 (a factor of 1.35), smaller on
	// every restart; CMA-ES's samples spread a third as far (from a
	// fitted start, samples 0.3 apart in every constant at once found
	// nothing better in 3000 evaluations of 41 constants)
	scale := 0.3 / float64(r+1)
	if m == MethodCmaEs {
		scale /= 3
	}
	var grad func(grad, x []float64)
	var method optimize.Method
	switch m {
	case MethodCmaEs:
		// gonum samples the first generation from InitCholesky (the
		// identity when nil: a factor of e on every constant) and only
		// updates with InitStepSize: both say scale
		var chol mat.Cholesky
		d := mat.NewDiagDense(n, nil)
		for i := range n {
			d.SetDiag(i, scale*scale)
		}
		chol.Factorize(d)
		method = &optimize.CmaEsChol{InitStepSize: scale, InitCholesky: &chol, Src: rand.NewPCG(seed, uint64(r))}
	case MethodLBFGS, MethodBFGS:
		grad = func(grad, x []float64) {
			s := &fd.Settings{Formula: fd.Forward, Step: fdStep}
			if slices.Equal(x, lastX) {
				s.OriginKnown, s.OriginValue = true, *lastF
			}
			fd.Gradient(grad, f, x, s)
		}
		if m == MethodLBFGS {
			method = &optimize.LBFGS{GradStopThreshold: 1e-8}
		} else {
			method = &optimize.BFGS{GradStopThreshold: 1e-8}
		}
	default:
		method = &optimize.NelderMead{SimplexSize: scale}
	}
	minimize(f, x, fx, stop, b, method, grad)
}

// minimize runs method on f (gradient grad, if any) from x, whose value
// fx is known where finite, until b's count of evaluations reaches *stop
// or the method converges. The method's own result is not needed: every
// evaluation has kept the best point (boxSearch.search), and a method
// that fails (a line search that finds no step) leaves the next run to
// go on from it.
func minimize(f func([]float64) float64, x []float64, fx float64, stop *int, b *boxSearch, method optimize.Method, grad func(grad, x []float64)) {
	p := optimize.Problem{
		Func: f,
		Grad: grad,
		Status: func() (optimize.Status, error) {
			if b.evals >= *stop {
				return optimize.FunctionEvaluationLimit, nil
			}
			return optimize.NotTerminated, nil
		},
	}
	settings := &optimize.Settings{
		// a run stops when its best point has not moved the loss by
		// 1e-10 over 10 iterations per constant (and at *stop)
		Converger: &optimize.FunctionConverge{Absolute: 1e-10, Relative: 1e-10, Iterations: max(100, 10*len(x))},
	}
	switch method.(type) {
	case *optimize.NelderMead, *coordinateSearch:
		if !math.IsInf(fx, 1) {
			// x's value is known: the first vertex, or the point the
			// search moves from, costs nothing
			settings.InitValues = &optimize.Location{F: fx}
		}
	}
	_, _ = optimize.Minimize(p, slices.Clone(x), settings, method)
}

// coordinateSearch is a deterministic coordinate (compass) search as a
// gonum optimize.Method: it tries each coordinate in turn up and down by
// Step (its moves stopped at the bounds Lo, Hi where set; one that cannot
// move is not tried), keeps the first improvement, and halves Step after
// a sweep without one, until Step falls below MinStep.
type coordinateSearch struct {
	Step, MinStep float64
	Lo, Hi        []float64

	status optimize.Status
}

func (c *coordinateSearch) Init(dim, tasks int) int {
	c.status = optimize.NotTerminated
	return 1
}

func (*coordinateSearch) Uses(optimize.Available) (optimize.Available, error) {
	return optimize.Available{}, nil
}

func (c *coordinateSearch) Status() (optimize.Status, error) { return c.status, nil }

func (c *coordinateSearch) Run(operation chan<- optimize.Task, result <-chan optimize.Task, tasks []optimize.Task) {
	defer close(operation)
	finish := func() {
		for range result {
		}
	}
	// do sends task with op and returns its result; false once the
	// optimisation is ending (the rest of the results read)
	do := func(task *optimize.Task, op optimize.Operation) bool {
		task.Op = op
		operation <- *task
		*task = <-result
		if task.Op == optimize.PostIteration {
			finish()
			return false
		}
		return true
	}
	task := tasks[0]
	if task.Op&optimize.FuncEvaluation == 0 && !do(&task, optimize.FuncEvaluation) {
		return
	}
	x, fx := slices.Clone(task.X), task.F
	if !do(&task, optimize.MajorIteration) {
		return
	}
	for step := c.Step; step >= c.MinStep; {
		improved := false
		for i := range x {
			for _, d := range []float64{step, -step} {
				copy(task.X, x)
				task.X[i] += d
				if c.Lo != nil {
					task.X[i] = min(max(task.X[i], c.Lo[i]), c.Hi[i])
				}
				if task.X[i] == x[i] {
					continue
				}
				if !do(&task, optimize.FuncEvaluation) {
					return
				}
				if task.F < fx {
					copy(x, task.X)
					fx, improved = task.F, true
					if !do(&task, optimize.MajorIteration) {
						return
					}
					break
				}
			}
		}
		if !improved {
			step /= 2
		}
	}
	c.status = optimize.MethodConverge
	task.Op = optimize.MethodDone
	operation <- task
	<-result // PostIteration
	finish()
}
