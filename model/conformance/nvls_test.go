package conformance_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// nvlsLane finds the first lane of rank r whose first op is kind k.
func nvlsLane(p *model.Program, r int, k model.PrimKind) *model.ProgLane {
	for i := range p.Lanes {
		l := &p.Lanes[i]
		if int(l.Rank) == r && len(l.Ops) > 0 && l.Ops[0].Kind == k {
			return l
		}
	}
	return nil
}

// TestNVLSMutationsAreCaught shows that the conformance check of NVLS
// Programs fails on plausible generator bugs: the switch reduction must
// cover every member, heads must own disjoint shares, the tree must carry
// the other nodes' contributions.
func TestNVLSMutationsAreCaught(t *testing.T) {
	ar := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoNVLS, Proto: model.ProtoSimple, Dtype: model.DtypeInt32,
		Op: model.RedSum, NRanks: 4, NChannels: 2, Count: 70_001}
	rs := conformance.Case{Coll: model.CollReduceScatter, Algo: model.AlgoNVLS, Proto: model.ProtoSimple, Dtype: model.DtypeBF16,
		Op: model.RedMax, NRanks: 5, NChannels: 1, Count: 9_001}
	ag := conformance.Case{Coll: model.CollAllGather, Algo: model.AlgoNVLS, Proto: model.ProtoSimple, Dtype: model.DtypeUint8,
		NRanks: 3, NChannels: 2, Count: 50_001}
	tree := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoNVLSTree, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 16, NChannels: 2, Count: 70_001}
	for _, tc := range []struct {
		name string
		c    conformance.Case
		m    func(p *model.Program)
	}{
		{"reduce-misses-a-member", ar, func(p *model.Program) {
			// the head's reduction forgets one member's buffer: the
			// member's scatter lane then sends into a connection nobody
			// reads, which the reference reports (or the sum is wrong)
			l := nvlsLane(p, 0, model.PrimMultimemReduceSend)
			l.Recv = l.Recv[:len(l.Recv)-1]
		}},
		{"scatter-wrong-share", ar, func(p *model.Program) {
			l := nvlsLane(p, 1, model.PrimSend)
			l.Ops[0].InOff += int64(l.Ops[0].N)
		}},
		{"gather-wrong-place", ag, func(p *model.Program) {
			l := nvlsLane(p, 2, model.PrimRecv)
			l.Ops[0].OutOff++
		}},
		{"reduce-copies-instead", rs, func(p *model.Program) {
			l := nvlsLane(p, 3, model.PrimMultimemReduceCopy)
			l.Recv = l.Recv[:1]
		}},
		{"tree-drops-a-child", tree, func(p *model.Program) {
			for i := range p.Lanes {
				l := &p.Lanes[i]
				if len(l.Ops) > 0 && l.Ops[0].Kind == model.PrimMultimemReduceSend && len(l.Recv) > 8 {
					l.Recv = l.Recv[:8]
					return
				}
			}
			t.Fatal("no head of the tree has a child")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, conformance.Check(refexec.Executor{}, tc.c), "unmodified")
			p, err := tc.c.Program()
			require.NoError(t, err)
			err = conformance.CheckProgram(mutating{tc.name, tc.m}, tc.c, p)
			require.Error(t, err)
		})
	}
}

// TestNVLSProgramShape checks the structure of NCCL's NVLS kernels: on
// one node every rank is a head, scatters to and gathers from every head
// through the multicast groups, and each head's switch reduction reads
// every member; the reduction moves each element through the switch
// once per member and the multicast once per head.
func TestNVLSProgramShape(t *testing.T) {
	const n, nch = 8, 16
	plan := model.SyntheticPlan(n, 4, false)
	count := int64(1 << 22)
	p, err := model.GenerateProgram(plan, model.CollAllReduce, model.AlgoNVLS, model.ProtoSimple, count, model.DtypeFP32, model.RedSum,
		model.ProgOptions{NChannels: nch})
	require.NoError(t, err)
	require.Equal(t, model.NVLSChunkBytes, p.StepBytes)
	require.Equal(t, nch, p.NChannels, "NVLS runs on its own channels, not the plan's 4")
	red, bc := 0, 0
	for _, c := range p.Conns {
		switch c.Kind {
		case model.ConnNVLSReduce:
			red++
		case model.ConnNVLSBcast:
			bc++
		}
	}
	require.Equal(t, nch*n*n, red)
	require.Equal(t, nch*n*n, bc)
	// every rank: n scatter lanes, n gather lanes and one reduce lane per channel
	require.Len(t, p.Lanes, nch*n*(2*n+1))
	r, err := refexec.Run(p, conformance.Inputs(conformance.Case{Coll: model.CollAllReduce, Dtype: model.DtypeFP32, NRanks: n, Count: count}, p), refexec.Options{})
	require.NoError(t, err)
	var redBytes, bcBytes int64
	for i, st := range r.Conns {
		if p.Conns[i].Kind == model.ConnNVLSReduce {
			redBytes += st.Bytes
		} else {
			bcBytes += st.Bytes
		}
	}
	require.Equal(t, int64(n)*count*4, redBytes, "each member's whole buffer reaches the switch once")
	require.Equal(t, int64(n)*count*4, bcBytes, "each head's share is multicast to every member")
}
