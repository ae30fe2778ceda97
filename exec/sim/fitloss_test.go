package sim

import (
	"math"
	"testing"
)

// TestFitLossAbsFollowsTheBulk: over a table whose rows agree but for one
// far off (a socket row that moved 3x between starts), the constant that
// minimises LossAbs is the bulk's, while LossSquares (with its worst-row
// term) is pulled most of the way to the outlier.
func TestFitLossAbsFollowsTheBulk(t *testing.T) {
	targets := []float64{10, 10, 10, 10, 10, 10, 30}
	loss := func(c float64, l FitLoss) float64 {
		rows := make([]Comparison, len(targets))
		for i, v := range targets {
			rows[i] = Comparison{Measurement: Measurement{MeanUs: v}, SimUs: c}
		}
		return fitLoss([][]Comparison{rows}, l)
	}
	best := func(l FitLoss) float64 {
		arg, min := 0.0, math.Inf(1)
		for c := 5.0; c <= 40; c += 0.05 {
			if f := loss(c, l); f < min {
				arg, min = c, f
			}
		}
		return arg
	}
	if c := best(LossAbs); math.Abs(c-10) > 0.1 {
		t.Errorf("abs loss: best constant %.2f, want the bulk's 10", c)
	}
	if c := best(LossSquares); c < 14 {
		t.Errorf("squares loss: best constant %.2f, want it pulled well above 10 by the 30 us row", c)
	}
	// Values: one table, log errors 0, ..., 0 and ln 3 at c = 10.
	e := math.Log(10.0 / 30)
	if got, want := loss(10, LossAbs), math.Abs(e)/7; math.Abs(got-want) > 1e-12 {
		t.Errorf("abs loss %.6f, want %.6f", got, want)
	}
	if got, want := loss(10, LossSquares), e*e/7+worstWeight*e*e; math.Abs(got-want) > 1e-12 {
		t.Errorf("squares loss %.6f, want %.6f", got, want)
	}
	for _, l := range []FitLoss{LossSquares, LossAbs} {
		if p, err := ParseFitLoss(l.String()); err != nil || p != l {
			t.Errorf("ParseFitLoss(%q) = %v, %v", l.String(), p, err)
		}
	}
	if _, err := ParseFitLoss("median"); err == nil {
		t.Error("ParseFitLoss accepted an unknown loss")
	}
}
