package model_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// TestNVLSRefusals: NVLS Programs exist only where NCCL runs NVLS, and say
// why not elsewhere.
func TestNVLSRefusals(t *testing.T) {
	one := model.SyntheticPlan(8, 2, false)
	two := model.SyntheticPlan(16, 2, false)
	for _, tc := range []struct {
		name string
		plan *model.Plan
		c    model.Collective
		a    model.Algorithm
		p    model.Protocol
		d    model.Dtype
		op   model.RedOp
		want string
	}{
		{"prod", one, model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, model.DtypeFP32, model.RedProd, "cannot reduce fp32 with prod"},
		{"avg", one, model.CollReduceScatter, model.AlgoNVLS, model.ProtoSimple, model.DtypeFP16, model.RedAvg, "cannot reduce fp16 with avg"},
		{"fp32-max", one, model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, model.DtypeFP32, model.RedMax, "cannot reduce fp32 with max"},
		{"int8", one, model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, model.DtypeInt8, model.RedSum, "cannot reduce int8 with sum"},
		{"LL", one, model.CollAllReduce, model.AlgoNVLS, model.ProtoLL, model.DtypeFP32, model.RedSum, "not supported"},
		{"broadcast", one, model.CollBroadcast, model.AlgoNVLS, model.ProtoSimple, model.DtypeFP32, model.RedSum, "not supported"},
		{"tree-one-node", one, model.CollAllReduce, model.AlgoNVLSTree, model.ProtoSimple, model.DtypeFP32, model.RedSum, "runs across nodes"},
		{"nvls-two-nodes", two, model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, model.DtypeFP32, model.RedSum, "needs CollNet"},
		{"tree-allgather", two, model.CollAllGather, model.AlgoNVLSTree, model.ProtoSimple, model.DtypeFP32, model.RedSum, "not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := model.GenerateProgram(tc.plan, tc.c, tc.a, tc.p, 1000, tc.d, tc.op, model.ProgOptions{})
			require.ErrorContains(t, err, tc.want)
		})
	}
	// AllGather moves data only: every datatype runs.
	_, err := model.GenerateProgram(one, model.CollAllGather, model.AlgoNVLS, model.ProtoSimple, 1000, model.DtypeInt8, model.RedProd, model.ProgOptions{})
	require.NoError(t, err)
}

// TestNVLSSupportedMatchesNCCL is ncclNvlsSupported's table (NCCL 2.28.9
// src/include/device.h), written out pair by pair.
func TestNVLSSupportedMatchesNCCL(t *testing.T) {
	yes := map[model.Dtype][]model.RedOp{
		model.DtypeInt32: {model.RedSum, model.RedMax, model.RedMin}, model.DtypeUint32: {model.RedSum, model.RedMax, model.RedMin},
		model.DtypeInt64: {model.RedSum, model.RedMax, model.RedMin}, model.DtypeUint64: {model.RedSum, model.RedMax, model.RedMin},
		model.DtypeFP16: {model.RedSum, model.RedMax, model.RedMin}, model.DtypeBF16: {model.RedSum, model.RedMax, model.RedMin},
		model.DtypeFP32: {model.RedSum}, model.DtypeFP64: {model.RedSum},
	}
	for d := model.Dtype(0); d < model.NumDtypes; d++ {
		for op := model.RedOp(0); op < model.NumRedOps; op++ {
			want := false
			for _, o := range yes[d] {
				want = want || o == op
			}
			require.Equal(t, want, model.NVLSSupported(op, d), "%s %s", d, op)
		}
	}
}

// TestNVLSProgramEncoding: the text form keeps NVLS connection kinds; the
// binary form (the GPU interpreter's) refuses them.
func TestNVLSProgramEncoding(t *testing.T) {
	p, err := model.GenerateProgram(model.SyntheticPlan(4, 2, false), model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, 9000,
		model.DtypeBF16, model.RedMin, model.ProgOptions{NChannels: 2})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, p.WriteText(&b))
	q, err := model.ParseProgramText(strings.NewReader(b.String()))
	require.NoError(t, err)
	require.Equal(t, p.Conns, q.Conns)
	require.Equal(t, p.Lanes, q.Lanes)
	_, err = p.MarshalBinary()
	require.ErrorContains(t, err, "point-to-point connections only")
	require.ErrorIs(t, err, model.ErrNeedsMulticast)
	_, err = model.ParseProgramText(strings.NewReader(strings.Replace(b.String(), "kind=nvlsReduce", "kind=multicast", 1)))
	require.ErrorContains(t, err, `kind="multicast"`)
}
