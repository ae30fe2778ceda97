package model_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// nodePlan is a plan of nodes with the given rank counts (ranks numbered
// node by node) and the given p2p channels.
func nodePlan(nodes []int, p2p, perPeer int) *model.Plan {
	p := &model.Plan{NNodes: len(nodes), P2PChannels: p2p, P2PChannelsPerPeer: perPeer}
	for nd, k := range nodes {
		var ranks []int
		for l := 0; l < k; l++ {
			ranks = append(ranks, p.NRanks)
			p.Ranks = append(p.Ranks, model.RankChannels{Rank: p.NRanks, Node: nd, LocalRank: l})
			p.NRanks++
		}
		p.NodeRanks = append(p.NodeRanks, ranks)
	}
	return p
}

func TestP2PScheduleIsAPairedPermutation(t *testing.T) {
	for _, nodes := range [][]int{{1}, {2}, {5}, {8}, {8, 8}, {8, 4}, {8, 8, 8}, {4, 4, 4, 4, 4}, {8, 8, 8, 8, 8, 8, 8, 8}} {
		plan := nodePlan(nodes, 8, 2)
		n := plan.NRanks
		sched, gs, err := model.P2PSchedule(plan, 0)
		if err != nil {
			t.Fatalf("%v: %v", nodes, err)
		}
		for r := 0; r < n; r++ {
			if sched[r][0] != (model.P2PRound{Send: r, Recv: r}) {
				t.Fatalf("%v gs %d: rank %d round 0 is %v, want itself", nodes, gs, r, sched[r][0])
			}
			seenS, seenR := make([]bool, n), make([]bool, n)
			for i, rd := range sched[r] {
				if seenS[rd.Send] || seenR[rd.Recv] {
					t.Fatalf("%v: rank %d visits a peer twice", nodes, r)
				}
				seenS[rd.Send], seenR[rd.Recv] = true, true
				// The peer receives from r in the same round.
				if sched[rd.Send][i].Recv != r {
					t.Fatalf("%v: rank %d sends to %d in round %d, which receives from %d", nodes, r, rd.Send, i, sched[rd.Send][i].Recv)
				}
			}
		}
	}
}

func TestP2PScheduleQuadraticGroupDeltas(t *testing.T) {
	// 16 nodes of 8: groups of 8, group deltas 0, 1, 3, 6, 10, 15, 5, 12,
	// 4, 13, 7, 2, 14, 11, 9, 8 (NCCL's example for 16); within a delta,
	// local deltas 0..7.
	nodes := make([]int, 16)
	for i := range nodes {
		nodes[i] = 8
	}
	plan := nodePlan(nodes, 32, 1)
	sched, gs, err := model.P2PSchedule(plan, 0)
	if err != nil || gs != 8 {
		t.Fatalf("gs %d, %v", gs, err)
	}
	want := []int{0, 1, 3, 6, 10, 15, 5, 12, 4, 13, 7, 2, 14, 11, 9, 8}
	r := 3*8 + 5 // group 3, local 5
	for g, d := range want {
		for l := 0; l < 8; l++ {
			rd := sched[r][g*8+l]
			wantSend := ((3+d)%16)*8 + (5+l)%8
			wantRecv := ((3-d+16)%16)*8 + (5-l+8)%8
			if rd.Send != wantSend || rd.Recv != wantRecv {
				t.Fatalf("round %d: %+v, want send %d recv %d", g*8+l, rd, wantSend, wantRecv)
			}
		}
	}
	// 12 ranks as nodes of 8 and 4: the group size falls to gcd(8,4) = 4.
	if _, gs, _ := model.P2PSchedule(nodePlan([]int{8, 4}, 8, 1), 0); gs != 4 {
		t.Fatalf("group size %d, want 4", gs)
	}
}

func TestP2PChannelBase(t *testing.T) {
	// One node: the round, bit-reversed in log2(8) = 3 bits.
	for round, want := range []int{0, 4, 2, 6, 1, 5, 3, 7, 0, 4} {
		if got := model.P2PChannelBase(round, 1, 8, 8); got != want {
			t.Errorf("round %d: base %d, want %d", round, got, want)
		}
	}
	// Several nodes, groups of 8: groupDelta*ceil(8/8) + localDelta/8.
	for _, c := range []struct{ round, gs, nch, want int }{
		{9, 8, 8, 4},    // 1 -> 100b
		{17, 8, 8, 2},   // 2 -> 010b
		{3, 8, 8, 0},    // 0
		{40, 8, 32, 20}, // 5 -> 00101b reversed 10100b
		{5, 4, 4, 2},    // 1 -> 10b
		{100, 8, 1, 0},  // one channel
		{11, 16, 16, 8}, // 0*2 + 11/8 = 1 -> 1000b
	} {
		if got := model.P2PChannelBase(c.round, 2, c.gs, c.nch); got != c.want {
			t.Errorf("round %d gs %d nch %d: base %d, want %d", c.round, c.gs, c.nch, got, c.want)
		}
	}
	if got := model.P2PChannelForPart(8, 6, 3); got != 1 {
		t.Errorf("part 3 from base 6 of 8: channel %d, want 1", got)
	}
}

func TestP2PPartsAndProtocol(t *testing.T) {
	if b, e := model.P2PPartBounds(2, 1, 5000); b != 4096 || e != 5000 {
		t.Errorf("part bounds %d..%d", b, e)
	}
	if b, e := model.P2PPartBounds(4, 3, 5000); b != 5000 || e != 5000 {
		t.Errorf("empty last part %d..%d", b, e)
	}
	// One node, Simple 512 KiB steps: minPart 64 KiB, maxPart 16 MiB.
	cases := []struct {
		bytes            int64
		step, lo, hi, nn int
		want             int
	}{
		{0, 524288, 4, 8, 1, 1},
		{1000, 524288, 4, 8, 1, 1},
		{200 << 10, 524288, 4, 8, 1, 4},
		{64 << 20, 524288, 2, 8, 1, 4},  // 32 MiB parts > 16 MiB: doubled to 4
		{600 << 20, 524288, 2, 8, 1, 8}, // doubling stops at chMax
		{1 << 20, 131072, 1, 4, 2, 4},   // two nodes: 128 KiB max part
		{100 << 10, 131072, 1, 4, 2, 1},
	}
	for _, c := range cases {
		if got := model.P2PNumParts(c.bytes, c.step, c.lo, c.hi, c.nn); got != c.want {
			t.Errorf("%d bytes, step %d, ch %d..%d, %d nodes: %d parts, want %d", c.bytes, c.step, c.lo, c.hi, c.nn, got, c.want)
		}
	}
	if lo, hi := model.P2PChannelRange(16, 8, 4); lo != 1 || hi != 4 {
		t.Errorf("channel range %d..%d", lo, hi)
	}
	if model.P2PProtocol(16384, 1, false, false) != model.ProtoLL || model.P2PProtocol(16385, 1, false, false) != model.ProtoSimple ||
		model.P2PProtocol(10, 1, true, false) != model.ProtoSimple || model.P2PProtocol(10, 1, false, true) != model.ProtoSimple {
		t.Errorf("P2PProtocol")
	}
	if c, s := model.P2PChunk(model.ProtoSimple, 100<<10, 131072, true); c != 32768 || s != 131072 {
		t.Errorf("net simple small chunk %d step %d", c, s)
	}
	if c, s := model.P2PChunk(model.ProtoLL, 1<<20, 131072, false); c != 32768 || s != 65536 {
		t.Errorf("LL chunk %d step %d", c, s)
	}
}

// p2pRun runs a p2p program with recorded slices and checks its data.
func p2pRun(t *testing.T, p *model.Program) *refexec.Result {
	t.Helper()
	in := make([][]byte, p.NRanks)
	for r := range in {
		in[r] = make([]byte, p.InCount*int64(p.Dtype.Size()))
		for i := range in[r] {
			in[r][i] = byte(r*31 + i*7)
		}
	}
	res, err := refexec.Run(p, in, refexec.Options{RecordSlices: true})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func connOf(t *testing.T, p *model.Program, ch, from, to int) int {
	t.Helper()
	for i, c := range p.Conns {
		if int(c.Channel) == ch && int(c.From) == from && int(c.To) == to {
			return i
		}
	}
	t.Fatalf("no connection on channel %d from %d to %d", ch, from, to)
	return -1
}

func TestP2PStepsAndBytes(t *testing.T) {
	// Two ranks on one node, 8 p2p channels, 2 per peer; AlltoAll of 3 MiB
	// of fp32 per peer, Simple. Rank 0 sends to 1 in round 1: base
	// reverse3(1) = 4, so parts on channels 4 and 5. 2 parts of 1.5 MiB,
	// each 3 chunks of 512 KiB: 3 steps of 524288 bytes per connection.
	plan := nodePlan([]int{2}, 8, 2)
	p, err := model.GenerateAlltoAllProgram(plan, model.ProtoSimple, 3<<20/4, model.DtypeFP32, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.StepBytes != model.P2PChunkSizeNVL || p.SlicesPerChunk != 1 || p.StepsPerSlice != 1 {
		t.Fatalf("header: step %d, %d x %d", p.StepBytes, p.SlicesPerChunk, p.StepsPerSlice)
	}
	res := p2pRun(t, p)
	for _, ch := range []int{4, 5} {
		for _, d := range [][2]int{{0, 1}, {1, 0}} {
			st := res.Conns[connOf(t, p, ch, d[0], d[1])]
			if st.Steps != 3 || !reflect.DeepEqual(st.SliceBytes, []int64{524288, 524288, 524288}) {
				t.Errorf("channel %d %d->%d: %d steps, slices %v", ch, d[0], d[1], st.Steps, st.SliceBytes)
			}
		}
	}
	if len(p.Conns) != 4 {
		t.Errorf("%d connections, want 4", len(p.Conns))
	}

	// LL, 40000 bytes: step 65536 wire bytes, 32768 data; minPart 8192 ->
	// 2 parts: 20480 and 19520 bytes, one step each.
	p, err = model.GenerateAlltoAllProgram(plan, model.ProtoLL, 10000, model.DtypeFP32, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	res = p2pRun(t, p)
	for ch, want := range map[int]int64{4: 20480, 5: 19520} {
		st := res.Conns[connOf(t, p, ch, 0, 1)]
		if st.Steps != 1 || st.Bytes != want || st.WireBytes != want*2 {
			t.Errorf("LL channel %d: %d steps, %d bytes, %d wire", ch, st.Steps, st.Bytes, st.WireBytes)
		}
	}

	// Two nodes of 8: rank 0 sends 100 KiB to rank 8 (network). Chunk
	// 128 KiB / 4 = 32 KiB because the transfer is shorter than a step;
	// minPart 64 KiB and chMin 1 give one part: 4 steps.
	plan = nodePlan([]int{8, 8}, 8, 2)
	p, err = model.GenerateP2PProgram(plan, []model.P2PTask{
		{Rank: 0, Peer: 8, Send: true, Count: 100 << 10},
		{Rank: 8, Peer: 0, Send: false, Count: 100 << 10},
	}, model.ProtoSimple, model.DtypeInt8, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.StepBytes != model.P2PChunkSizeDefault {
		t.Errorf("step %d", p.StepBytes)
	}
	res = p2pRun(t, p)
	sched, _, _ := model.P2PSchedule(plan, 0)
	round := 0
	for sched[0][round].Send != 8 {
		round++
	}
	ch := model.P2PChannelForPart(8, model.P2PChannelBase(round, 2, 8, 8), 0)
	st := res.Conns[connOf(t, p, ch, 0, 8)]
	if !reflect.DeepEqual(st.SliceBytes, []int64{32768, 32768, 32768, 4096}) {
		t.Errorf("network send: slices %v", st.SliceBytes)
	}
	if !reflect.DeepEqual(res.Outputs[8], p2pInput(0, 100<<10)) {
		t.Errorf("rank 8 did not receive rank 0's data")
	}

	// Zero bytes: one empty step each way.
	p, err = model.GenerateAlltoAllProgram(nodePlan([]int{3}, 4, 1), model.ProtoSimple, 0, model.DtypeFP32, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	res = p2pRun(t, p)
	for i, st := range res.Conns {
		if st.Steps != 1 || st.Bytes != 0 {
			t.Errorf("empty AlltoAll connection %d: %d steps, %d bytes", i, st.Steps, st.Bytes)
		}
	}
	if len(res.Conns) != 6 {
		t.Errorf("%d connections, want 6", len(res.Conns))
	}
}

func p2pInput(r int, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r*31 + i*7)
	}
	return b
}

func TestP2PErrors(t *testing.T) {
	plan := nodePlan([]int{4}, 4, 2)
	for name, tasks := range map[string][]model.P2PTask{
		"unmatched": {{Rank: 0, Peer: 1, Send: true, Count: 5}},
		"count":     {{Rank: 0, Peer: 1, Send: true, Count: 5}, {Rank: 1, Peer: 0, Count: 6}},
		"self":      {{Rank: 2, Peer: 2, Send: true, Count: 5}},
		"range":     {{Rank: 0, Peer: 9, Send: true, Count: 5}},
	} {
		if _, err := model.GenerateP2PProgram(plan, tasks, model.ProtoSimple, model.DtypeFP32, model.P2POptions{}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := model.GenerateAlltoAllProgram(plan, model.ProtoLL128, 5, model.DtypeFP32, model.P2POptions{}); err == nil {
		t.Errorf("LL128 accepted")
	}
	if _, err := model.GenerateAlltoAllProgram(plan, model.ProtoSimple, 5, model.DtypeFP32, model.P2POptions{P2PChannels: 3}); err == nil {
		t.Errorf("3 p2p channels accepted")
	}
	if _, err := model.GenerateProgram(plan, model.CollSendRecv, model.AlgoRing, model.ProtoSimple, 5, model.DtypeFP32, model.RedSum, model.ProgOptions{}); err == nil || !strings.Contains(err.Error(), "task list") {
		t.Errorf("SendRecv without tasks: %v", err)
	}
}

func TestAlltoAllThroughProgGen(t *testing.T) {
	c := conformance.Case{Coll: model.CollAlltoAll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP16,
		NRanks: 12, NChannels: 8, Count: 70_001, PerPeer: 4}
	plan := c.Plan()
	direct, err := model.GenerateAlltoAllProgram(plan, c.Proto, c.Count, c.Dtype, model.P2POptions{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := model.NewProgGen(plan, c.Coll, c.Algo, c.Proto, c.Count, c.Dtype, c.Op, model.ProgOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g.Program(), direct) {
		t.Fatalf("ProgGen and GenerateAlltoAllProgram differ")
	}
	lanes := 0
	for _, ch := range g.Channels() {
		for r := 0; r < c.NRanks; r++ {
			lanes += g.NumLanes(r, ch)
		}
	}
	if lanes != len(direct.Lanes) || g.Header().Lanes != nil {
		t.Fatalf("streamed %d lanes of %d", lanes, len(direct.Lanes))
	}
	if err := conformance.CheckProgram(refexec.Executor{}, c, direct); err != nil {
		t.Fatal(err)
	}
	b, err := direct.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	q, err := model.DecodeProgram(b)
	if err != nil || !reflect.DeepEqual(q, direct) {
		t.Fatalf("binary round trip: %v", err)
	}
	// SendRecv with copies to self, through the text form.
	sr := conformance.Case{Coll: model.CollSendRecv, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeBF16,
		NRanks: 3, NChannels: 4, Count: 9001}
	p, err := sr.Program()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	if q, err = model.ParseProgramText(&buf); err != nil || !reflect.DeepEqual(q, p) {
		t.Fatalf("text round trip: %v", err)
	}
	if err := conformance.CheckProgram(refexec.Executor{}, sr, q); err != nil {
		t.Fatal(err)
	}
}
