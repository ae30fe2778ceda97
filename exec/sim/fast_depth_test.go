package sim

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// TestDepthProbeIsTheSmallerCluster checks that a probe (the first k hosts
// of a cluster, searched again) simulates exactly as the same host file
// loaded with --nodes k.
func TestDepthProbeIsTheSmallerCluster(t *testing.T) {
	big := newSim(t, loadSearch(t, h100XML(t), 32), nil)
	p, err := big.probe(8)
	require.NoError(t, err)
	fresh := newSim(t, loadSearch(t, h100XML(t), 8), nil)
	for _, c := range []Call{
		{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple},
		{Coll: model.CollBroadcast, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 5},
	} {
		a, err := p.RunTimed(c, false)
		require.NoError(t, err)
		b, err := fresh.RunTimed(c, false)
		require.NoError(t, err)
		assert.Equal(t, b.TimeUs, a.TimeUs, "%s", c.Coll)
		assert.Equal(t, b.Events, a.Events, "%s", c.Coll)
	}
}

// TestDepthExtrapolationAgreesWithAccurate runs tree AllReduces and
// rooted chains on 32 hosts of 8 H100 step-accurately and extrapolated
// from probes of 4, 8 and 16 hosts, and tree AllReduces on 48 hosts
// (3 x 16) from probes of 6, 12 and 24: the extrapolation must fall within
// its own error estimate (the change of the per-level increment between
// the probe pairs, times the levels extrapolated) of the step-accurate
// time, up to the rounding of the times (1 ps per call).
func TestDepthExtrapolationAgreesWithAccurate(t *testing.T) {
	sims := map[int]*Simulator{}
	calls := []Call{
		{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple},
		{Coll: model.CollAllReduce, Count: 1 << 24, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple},
		{Coll: model.CollAllReduce, Count: 1 << 18, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoLL128},
		{Coll: model.CollAllReduce, Count: 1 << 16, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoLL},
		{Coll: model.CollBroadcast, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 77},
		{Coll: model.CollReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 130},
	}
	type tcase struct {
		nodes int
		c     Call
	}
	var cases []tcase
	for _, c := range calls {
		cases = append(cases, tcase{32, c})
	}
	for _, c := range calls[:3] {
		cases = append(cases, tcase{48, c})
	}
	var reports [][2]int64
	progressed := 0
	for _, tc := range cases {
		c := tc.c
		s := sims[tc.nodes]
		if s == nil {
			s = newSim(t, loadSearch(t, h100XML(t), tc.nodes), nil)
			s.Loop = 0
			s.Machine.Progress = func(done, total int64) { reports = append(reports, [2]int64{done, total}) }
			sims[tc.nodes] = s
		}
		g, cr, err := s.Generator(c)
		require.NoError(t, err)
		reports = reports[:0]
		x, errUs, why := s.extrapolateDepth(c, g, cr)
		require.NotNil(t, x, "%s: %s", c.Coll, why)
		// The probes' progress reaches replay sim's bar, never backwards.
		for i, r := range reports {
			require.LessOrEqual(t, r[0], r[1])
			if i > 0 {
				require.GreaterOrEqual(t, r[0], reports[i-1][0])
			}
		}
		if len(reports) > 0 {
			progressed++
		}
		a, err := s.RunTimed(c, false)
		require.NoError(t, err)
		d := x.TimeUs - a.TimeUs
		t.Logf("%d hosts %-9s %s/%-6s %10d B: accurate %10.3f us  extrapolated %10.3f us  diff %+8.3f us (%+.4f%%)  estimate %.3f us  events %d -> %d  [%s]",
			tc.nodes, c.Coll, a.Algo, a.Proto, c.Count*4, a.TimeUs, x.TimeUs, d, 100*d/a.TimeUs, errUs, a.Events, x.Events, x.Fast)
		assert.LessOrEqual(t, math.Abs(d), errUs+1e-6, "%s %d: outside the error estimate", c.Coll, c.Count)
	}
	assert.Positive(t, progressed, "no extrapolation reported progress")
}

// TestDepthExtrapolationRefuses checks that the extrapolation says why it
// does not apply, and that the fast mode then falls back without it.
func TestDepthExtrapolationRefuses(t *testing.T) {
	tree := Call{Coll: model.CollAllReduce, Count: 1 << 16, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple}
	ring := Call{Coll: model.CollAllReduce, Count: 1 << 16, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple}
	cases := []struct {
		nodes int
		c     Call
		want  string
	}{
		{16, tree, "no three smaller copies"},
		{24, tree, "no three smaller copies"}, // 3 x 8: 6, 12 and 24 hosts
		{40, tree, "no three smaller copies"}, // 5 x 8
		{32, ring, "no depth rule"},
	}
	for _, tc := range cases {
		s := newSim(t, loadSearch(t, h100XML(t), tc.nodes), nil)
		g, cr, err := s.Generator(tc.c)
		require.NoError(t, err)
		x, _, why := s.extrapolateDepth(tc.c, g, cr)
		assert.Nil(t, x)
		assert.Contains(t, why, tc.want, "--nodes %d %s/%s", tc.nodes, tc.c.Coll, tc.c.Algo)
	}
	// ModeAuto takes an extrapolation only within AutoApproxTolerance of
	// its estimate (for calls its exact checks can hold), ModeFast always.
	s32 := newSim(t, loadSearch(t, h100XML(t), 32), nil)
	s32.Loop = 0
	big := Call{Coll: model.CollAllReduce, Count: 1 << 24, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: model.ProtoSimple}
	g32, cr32, err := s32.Generator(big)
	require.NoError(t, err)
	x32, errUs, why := s32.extrapolateDepth(big, g32, cr32)
	require.NotNil(t, x32, why)
	for _, mode := range []Mode{ModeAuto, ModeFast} {
		s32.Mode = mode
		x, why := s32.fastDepth(big, g32, cr32, nil, "")
		if mode == ModeAuto && errUs > AutoApproxTolerance*x32.TimeUs {
			assert.Nil(t, x)
			assert.Contains(t, why, "above the auto mode's")
		} else {
			assert.NotNil(t, x, "%s: %s", mode, why)
		}
	}
	// A recorded run needs every slice: no extrapolation.
	s := newSim(t, loadSearch(t, h100XML(t), 32), nil)
	s.Mode = ModeFast
	s.Loop = 0
	n := 0
	cr, err := s.RunRecord(tree, func(*SliceEvent) { n++ })
	require.NoError(t, err)
	assert.NotContains(t, cr.Fast, "extrapolated")
	assert.Positive(t, n)
}
