package sim

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// FitParam is one calibration constant the fitter may move: how to read
// it from and write it to a Calib. Values are fitted in log space, so they
// stay positive; Floor is added before the logarithm so that a constant
// may approach zero.
type FitParam struct {
	Name   string
	Floor  float64
	Lo, Hi float64
	get    func(*Calib) float64
	set    func(*Calib, float64)
}

// fitParams are the constants that measurements of one protocol set and
// link types can identify. Protocols and link types absent from the
// measurements keep their values.
func fitParams(protos []model.Protocol, links []model.LinkType) []FitParam {
	ps := []FitParam{{Name: "launch_us", Floor: 0.01, Lo: 0, Hi: 50,
		get: func(c *Calib) float64 { return c.LaunchUs }, set: func(c *Calib, v float64) { c.LaunchUs = v }}}
	for _, p := range protos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps,
			FitParam{Name: n + ".op_overhead_us", Floor: 0.01, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Proto(p).OpOverheadUs }, set: func(c *Calib, v float64) { c.Proto(p).OpOverheadUs = v }},
			FitParam{Name: n + ".slice_overhead_us", Floor: 0.01, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Proto(p).SliceOverheadUs }, set: func(c *Calib, v float64) { c.Proto(p).SliceOverheadUs = v }},
			FitParam{Name: n + ".copy_GBps", Floor: 0, Lo: 1, Hi: 1000,
				get: func(c *Calib) float64 { return c.Proto(p).CopyGBps }, set: func(c *Calib, v float64) { c.Proto(p).CopyGBps = v }},
			FitParam{Name: n + ".reduce_cost", Floor: 0.01, Lo: 0, Hi: 4,
				get: func(c *Calib) float64 { return c.Proto(p).ReduceCost }, set: func(c *Calib, v float64) { c.Proto(p).ReduceCost = v }},
			FitParam{Name: n + ".remote_store_cost", Floor: 0, Lo: 0.25, Hi: 8,
				get: func(c *Calib) float64 { return c.Proto(p).remoteStoreCost() }, set: func(c *Calib, v float64) { c.Proto(p).RemoteStoreCost = v }},
			FitParam{Name: n + ".load_cost", Floor: 0, Lo: 0.02, Hi: 2,
				get: func(c *Calib) float64 { return c.Proto(p).loadCost() }, set: func(c *Calib, v float64) { c.Proto(p).LoadCost = v }},
		)
	}
	for _, t := range links {
		k := t.String()
		ps = append(ps,
			FitParam{Name: "links." + k + ".eff", Floor: 0, Lo: 0.2, Hi: MaxLinkEff,
				get: func(c *Calib) float64 { return c.Links[k].Eff },
				set: func(c *Calib, v float64) { l := c.Links[k]; l.Eff = v; c.Links[k] = l }},
			FitParam{Name: "links." + k + ".latency_us", Floor: 0.01, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Links[k].LatencyUs },
				set: func(c *Calib, v float64) { l := c.Links[k]; l.LatencyUs = v; c.Links[k] = l }},
		)
	}
	return ps
}

// FitOptions control Fit.
type FitOptions struct {
	// MaxEvals bounds the objective evaluations (0: 3000).
	MaxEvals int
	// Restarts is the number of Nelder–Mead restarts from the best point
	// (0: 3).
	Restarts int
	// Progress, when set, is called after every restart.
	Progress func(restart, evals int, median, maxErr float64)
}

// FitResult is a fitted calibration and its comparison table.
type FitResult struct {
	Calib  *Calib
	Params []string
	Rows   []Comparison
	Median float64
	Max    float64
	Evals  int
}

// Fit adjusts the constants of start that the measurements can identify
// (launch cost, per-op and per-slice overheads, copy throughput and
// reduction cost of the protocols the tuner picks for them, efficiency and
// latency of the link types their routes cross) to minimise the squared
// log error of the simulated times, with a penalty on the worst row
// (worstWeight), by
// Nelder–Mead in log space. The mechanisms stay as they are: only these
// few constants move.
func Fit(res *search.Result, start *Calib, ms []Measurement, opt FitOptions) (*FitResult, error) {
	if opt.MaxEvals <= 0 {
		opt.MaxEvals = 3000
	}
	if opt.Restarts <= 0 {
		opt.Restarts = 3
	}
	base := start.Clone()
	sim, err := NewSimulator(res, base)
	if err != nil {
		return nil, err
	}
	// Which protocols and link types do the measurements exercise?
	first, err := sim.Compare(ms)
	if err != nil {
		return nil, err
	}
	protoSet := map[model.Protocol]bool{}
	for _, c := range first {
		protoSet[c.Proto] = true
	}
	var protos []model.Protocol
	for p := model.Protocol(0); p < model.NumProtocols; p++ {
		if protoSet[p] {
			protos = append(protos, p)
		}
	}
	links, err := usedLinkTypes(sim, ms)
	if err != nil {
		return nil, err
	}
	for _, t := range links {
		if _, ok := base.Links[t.String()]; !ok {
			base.Links[t.String()] = LinkCalib{Eff: 1}
		}
	}
	params := fitParams(protos, links)
	x0 := make([]float64, len(params))
	for i, p := range params {
		x0[i] = math.Log(max(p.get(base), p.Lo) + p.Floor)
	}
	decode := func(x []float64) *Calib {
		c := base.Clone()
		for i, p := range params {
			v := math.Exp(x[i]) - p.Floor
			v = min(max(v, p.Lo), p.Hi)
			p.set(c, v)
		}
		return c
	}
	evals := 0
	var evalErr error
	objective := func(x []float64) float64 {
		evals++
		c := decode(x)
		if err := c.Validate(); err != nil {
			return math.Inf(1)
		}
		s, err := NewSimulator(res, c)
		if err != nil {
			evalErr = err
			return math.Inf(1)
		}
		rows, err := s.Compare(ms)
		if err != nil {
			evalErr = err
			return math.Inf(1)
		}
		return fitLoss(rows)
	}
	best := x0
	bestF := objective(best)
	for r := 0; r < opt.Restarts && evals < opt.MaxEvals; r++ {
		budget := (opt.MaxEvals - evals) / (opt.Restarts - r)
		x, f := nelderMead(objective, best, 0.3/float64(r+1), budget)
		if f < bestF {
			best, bestF = x, f
		}
		if opt.Progress != nil {
			s, _ := NewSimulator(res, decode(best))
			rows, _ := s.Compare(ms)
			med, mx := ErrorStats(rows)
			opt.Progress(r, evals, med, mx)
		}
	}
	if math.IsInf(bestF, 1) {
		if evalErr != nil {
			return nil, fmt.Errorf("fit: %w", evalErr)
		}
		return nil, fmt.Errorf("fit: no valid calibration found")
	}
	c := decode(best)
	s, err := NewSimulator(res, c)
	if err != nil {
		return nil, err
	}
	rows, err := s.Compare(ms)
	if err != nil {
		return nil, err
	}
	med, mx := ErrorStats(rows)
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	return &FitResult{Calib: c, Params: names, Rows: rows, Median: med, Max: mx, Evals: evals}, nil
}

// fitLoss is the mean squared log error plus worstWeight times the worst
// squared log error (so that no size range is sacrificed to the others).
func fitLoss(rows []Comparison) float64 {
	var sum, worst float64
	for _, r := range rows {
		e := math.Log(r.SimUs / r.MeanUs)
		sum += e * e
		worst = max(worst, e*e)
	}
	return sum/float64(len(rows)) + worstWeight*worst
}

// usedLinkTypes lists the link types that carry the measurements'
// traffic, in type order.
func usedLinkTypes(s *Simulator, ms []Measurement) ([]model.LinkType, error) {
	set := map[model.LinkType]bool{}
	for _, m := range ms {
		cnt, err := CountOf(m.Coll, m.Bytes, model.DtypeFP32, s.Machine.Cluster.NRanks)
		if err != nil {
			return nil, err
		}
		p, _, err := s.Program(Call{Coll: m.Coll, Count: cnt, Dtype: model.DtypeFP32, Algo: -1, Proto: -1})
		if err != nil {
			return nil, err
		}
		for _, cn := range p.Conns {
			rt, err := s.Machine.route(int(cn.From), int(cn.To), int(cn.Channel))
			if err != nil {
				return nil, err
			}
			for _, r := range rt.res {
				set[s.Machine.resType[r]] = true
			}
		}
	}
	var out []model.LinkType
	for t := range set {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// nelderMead minimises f from x0 with an initial simplex of relative size
// step, within maxEvals evaluations. Deterministic.
func nelderMead(f func([]float64) float64, x0 []float64, step float64, maxEvals int) ([]float64, float64) {
	n := len(x0)
	pts := make([][]float64, n+1)
	vals := make([]float64, n+1)
	for i := range pts {
		pts[i] = append([]float64(nil), x0...)
		if i > 0 {
			pts[i][i-1] += step
		}
		vals[i] = f(pts[i])
	}
	evals := n + 1
	idx := make([]int, n+1)
	point := func(c []float64, d []float64, t float64) []float64 {
		out := make([]float64, n)
		for j := range out {
			out[j] = c[j] + t*(d[j]-c[j])
		}
		return out
	}
	for evals < maxEvals {
		for i := range idx {
			idx[i] = i
		}
		sort.SliceStable(idx, func(a, b int) bool { return vals[idx[a]] < vals[idx[b]] })
		lo, hi, nh := idx[0], idx[n], idx[n-1]
		if math.Abs(vals[hi]-vals[lo]) < 1e-10*(1+math.Abs(vals[lo])) {
			break
		}
		cen := make([]float64, n)
		for _, i := range idx[:n] {
			for j := range cen {
				cen[j] += pts[i][j] / float64(n)
			}
		}
		xr := point(cen, pts[hi], -1)
		fr := f(xr)
		evals++
		switch {
		case fr < vals[lo]:
			xe := point(cen, pts[hi], -2)
			fe := f(xe)
			evals++
			if fe < fr {
				pts[hi], vals[hi] = xe, fe
			} else {
				pts[hi], vals[hi] = xr, fr
			}
		case fr < vals[nh]:
			pts[hi], vals[hi] = xr, fr
		default:
			xc := point(cen, pts[hi], 0.5)
			if fr < vals[hi] {
				xc = point(cen, pts[hi], -0.5)
			}
			fc := f(xc)
			evals++
			if fc < min(fr, vals[hi]) {
				pts[hi], vals[hi] = xc, fc
			} else {
				for _, i := range idx[1:] {
					pts[i] = point(pts[lo], pts[i], 0.5)
					vals[i] = f(pts[i])
					evals++
				}
			}
		}
	}
	b := 0
	for i := range vals {
		if vals[i] < vals[b] {
			b = i
		}
	}
	return pts[b], vals[b]
}

// MaxLinkEff bounds the fitted efficiency of a link type: a link cannot
// carry more data than NCCL's bandwidth rating of it.
const MaxLinkEff = 1.0

// worstWeight is the weight of the worst row's squared log error in the
// fit's loss, next to the mean over all rows.
const worstWeight = 1.0
