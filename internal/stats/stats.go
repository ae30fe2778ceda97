// Package stats holds the few summary statistics the comparisons and the
// fit report (medians of errors and of repetitions, means of probes),
// built on gonum.org/v1/gonum/stat, in one place so that every report
// computes them alike.
package stats

import (
	"slices"

	"gonum.org/v1/gonum/stat"
)

// Median is the median of v, v left as it is: the middle value of an odd
// count, the mean of the two middle values of an even count, 0 for none
// (NaN where v holds a NaN). gonum's empirical quantile at 0.5 is the
// lower of the two middle values of an even count.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	m := stat.Quantile(0.5, stat.Empirical, s, nil)
	if n := len(s); n%2 == 0 {
		return (m + s[n/2]) / 2
	}
	return m
}

// Mean is the arithmetic mean of v, 0 for none.
func Mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return stat.Mean(v, nil)
}

// DisturbedRatio is the one rule for a disturbed measurement, the same in
// every report: its time more than this many times its best repetition
// (the host slowed most of the repetitions, so the row says more about the
// host than about what was measured).
const DisturbedRatio = 1.25

// Disturbed reports whether a measured time us with best repetition best
// (0: unknown) is more than DisturbedRatio above it.
func Disturbed(us, best float64) bool { return best > 0 && us > DisturbedRatio*best }

// DisturbedReps reports whether a row timed by the median of its
// repetitions reps is Disturbed (false without repetitions).
func DisturbedReps(reps []float64) bool {
	if len(reps) == 0 {
		return false
	}
	return Disturbed(Median(reps), slices.Min(reps))
}
