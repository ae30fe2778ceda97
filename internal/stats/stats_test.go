package stats

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMedian: the middle value of an odd count, the mean of the middle two
// of an even count, 0 for none, the input left unsorted.
func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{3, 1}, 2},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.1, 0.7, 0.2, 0.4, 0.3, 0.9}, (0.3 + 0.4) / 2},
	} {
		in := append([]float64(nil), tc.v...)
		assert.Equal(t, tc.want, Median(tc.v), "%v", tc.v)
		assert.Equal(t, in, tc.v, "input reordered")
	}
	assert.True(t, math.IsNaN(Median([]float64{1, math.NaN(), 2})))
}

// TestMean: the arithmetic mean, 0 for none.
func TestMean(t *testing.T) {
	assert.Equal(t, 0.0, Mean(nil))
	assert.Equal(t, 2.0, Mean([]float64{1, 2, 3}))
	assert.Equal(t, 2.5, Mean([]float64{2, 3}))
}

func TestDisturbed(t *testing.T) {
	assert.False(t, DisturbedReps(nil), "no repetitions: not disturbed")
	assert.False(t, DisturbedReps([]float64{10, 12, 12.5}), "median 12 is 1.2x the best")
	assert.True(t, DisturbedReps([]float64{10, 13, 14}), "median 13 is 1.3x the best")
	assert.False(t, Disturbed(12.5, 10), "exactly 1.25x is not above it")
	assert.False(t, Disturbed(100, 0), "an unknown best")
}
