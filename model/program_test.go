package model_test

import (
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// runStats generates and runs a case, returning the program and the
// per-connection traffic the reference interpreter observed.
func runStats(t *testing.T, c conformance.Case) (*model.Program, *refexec.Result) {
	t.Helper()
	p, err := c.Program()
	if err != nil {
		t.Fatal(err)
	}
	res, err := refexec.Run(p, conformance.Inputs(c, p), refexec.Options{RecordSlices: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := conformance.CheckProgram(refexec.Executor{}, c, p); err != nil {
		t.Fatal(err)
	}
	return p, res
}

// wantConn checks that every used connection carried steps steps in
// slices whose data sizes are sliceBytes (in order, for one connection;
// all connections of a ring carry the same sizes when the chunks are full).
func wantConn(t *testing.T, res *refexec.Result, steps uint64, slices []int64) {
	t.Helper()
	used := 0
	for ci, st := range res.Conns {
		if st.Steps == 0 {
			continue
		}
		used++
		if st.Steps != steps {
			t.Errorf("connection %d: %d steps, want %d", ci, st.Steps, steps)
		}
		if slices == nil {
			continue
		}
		if len(st.SliceBytes) != len(slices) {
			t.Errorf("connection %d: %d slices, want %d", ci, len(st.SliceBytes), len(slices))
			continue
		}
		for i := range slices {
			if st.SliceBytes[i] != slices[i] {
				t.Errorf("connection %d slice %d: %d bytes, want %d", ci, i, st.SliceBytes[i], slices[i])
				break
			}
		}
	}
	if used == 0 {
		t.Errorf("no connection carried data")
	}
}

func repeat(v int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// proxySteps is nccl-facts §7.1's proxy step count for one channel part:
// nstepsPerLoop x ceil(nBytes/loopSize) x chunkSteps, loopSize =
// nChannels x nchunksPerLoop x chunkSize.
func proxySteps(nstepsPerLoop, nchunksPerLoop, chunkSteps int, nBytes, chunkSize int64) uint64 {
	loop := int64(nchunksPerLoop) * chunkSize
	return uint64(nstepsPerLoop) * uint64((nBytes+loop-1)/loop) * uint64(chunkSteps)
}

func TestRingAllReduceSimpleSteps(t *testing.T) {
	// 4 ranks, 1 channel, fp32. Simple ring AllReduce: chunkSteps 4, sliceSteps
	// 2, stepSize 512 KiB -> chunk 2 MiB (524288 floats), slice 1 MiB.
	const n = 4
	// One full loop: 4 chunks of 2 MiB = 8 MiB. RingTwice: 2(n-1) = 6
	// sends per connection, each 2 slices of 1 MiB -> 12 slices, 24 steps.
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: n, NChannels: 1, Count: n * 524288}
	_, res := runStats(t, c)
	if got := proxySteps(2*(n-1), n, 4, 8<<20, 2<<20); got != 24 {
		t.Fatalf("formula: %d", got)
	}
	wantConn(t, res, 24, repeat(1<<20, 12))

	// 2 loops + 12345 floats: 3 loops -> 6 x 3 x 4 = 72 steps. In the last
	// loop chunkCount = alignUp(ceil(12345/4), 16/4) = 3088 floats; each
	// call's slice size is max(ceil(3088/32)*16, 131072*2/32) = 8192 floats,
	// so a call carries one slice of its chunk and one empty slice.
	c.Count = 2*n*524288 + 12345
	_, res = runStats(t, c)
	nBytes := c.Count * 4
	if got := proxySteps(2*(n-1), n, 4, nBytes, 2<<20); got != 72 {
		t.Fatalf("formula: %d", got)
	}
	for ci, st := range res.Conns {
		if st.Steps != 72 || len(st.SliceBytes) != 36 {
			t.Fatalf("connection %d: %d steps, %d slices; want 72, 36", ci, st.Steps, len(st.SliceBytes))
		}
		for i := 0; i < 24; i++ {
			if st.SliceBytes[i] != 1<<20 {
				t.Fatalf("connection %d slice %d: %d bytes", ci, i, st.SliceBytes[i])
			}
		}
		// Last loop: chunk sizes 3088,3088,3088,3081 floats; connection of
		// ring index ix sends every chunk but ix (reduce-scatter) and every
		// chunk but ix+1 (all-gather), each as [chunk, 0].
		ix := ci // ring 0 is the identity
		chunks := []int64{3088 * 4, 3088 * 4, 3088 * 4, 3081 * 4}
		var want int64
		for k := 0; k < n; k++ {
			if k != ix {
				want += chunks[k]
			}
			if k != (ix+1)%n {
				want += chunks[k]
			}
		}
		var got int64
		for i := 24; i < 36; i++ {
			if i%2 == 1 && st.SliceBytes[i] != 0 {
				t.Fatalf("connection %d slice %d should be empty, has %d bytes", ci, i, st.SliceBytes[i])
			}
			got += st.SliceBytes[i]
		}
		if got != want {
			t.Fatalf("connection %d last loop: %d bytes, want %d", ci, got, want)
		}
	}
}

func TestRingAllGatherReduceScatterSimpleSteps(t *testing.T) {
	// 4 ranks, 1 channel, 524288 floats (2 MiB) per rank. Ring pattern:
	// nstepsPerLoop n-1 = 3, nchunksPerLoop n = 4, nBytes = 4 x 2 MiB,
	// loopSize = 4 x 2 MiB -> 3 x 1 x 4 = 12 steps, 6 slices of 1 MiB.
	for _, coll := range []model.Collective{model.CollAllGather, model.CollReduceScatter} {
		c := conformance.Case{Coll: coll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
			Op: model.RedSum, NRanks: 4, NChannels: 1, Count: 524288}
		_, res := runStats(t, c)
		if got := proxySteps(3, 4, 4, 8<<20, 2<<20); got != 12 {
			t.Fatalf("formula: %d", got)
		}
		wantConn(t, res, 12, repeat(1<<20, 6))
	}
	// 3 ranks, 1000 floats per rank: one chunk per rank of 4000 bytes; the
	// slice is max(ceil(1000/32)*16, 8192) = 8192 floats, so every call is
	// [4000 B, 0]: 2 calls x 4 steps = 8 steps, formula 2 x 1 x 4.
	c := conformance.Case{Coll: model.CollAllGather, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 3, NChannels: 1, Count: 1000}
	_, res := runStats(t, c)
	if got := proxySteps(2, 3, 4, 3*4000, 2<<20); got != 8 {
		t.Fatalf("formula: %d", got)
	}
	wantConn(t, res, 8, []int64{4000, 0, 4000, 0})
}

// TestPATTwoRanksSteps: PAT's AllGather and ReduceScatter on two ranks
// send each rank's part to the other in chunks of one step (PAT's chunk
// and slice steps are 1 and 1), so a part smaller than a step is one
// message, where the ring's Simple chunk is two slices, the second empty
// (two messages). PAT is Simple only, and its Programs cover two ranks.
func TestPATTwoRanksSteps(t *testing.T) {
	for _, coll := range []model.Collective{model.CollAllGather, model.CollReduceScatter} {
		c := conformance.Case{Coll: coll, Algo: model.AlgoPAT, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
			Op: model.RedSum, NRanks: 2, NChannels: 1, Count: 1000}
		p, res := runStats(t, c)
		if p.SlicesPerChunk != 1 || p.StepsPerSlice != 1 {
			t.Errorf("%s: %d slices per chunk x %d steps, want 1 x 1", coll, p.SlicesPerChunk, p.StepsPerSlice)
		}
		wantConn(t, res, 1, []int64{4000})
		c.Algo = model.AlgoRing
		_, res = runStats(t, c)
		wantConn(t, res, 4, []int64{4000, 0})
		if model.CollAllowed(coll, model.AlgoPAT, model.ProtoLL) {
			t.Errorf("%s: PAT with LL allowed", coll)
		}
		if !model.ProgramCovers(coll, model.AlgoPAT, model.ProtoSimple, 2) || model.ProgramCovers(coll, model.AlgoPAT, model.ProtoSimple, 4) {
			t.Errorf("%s: ProgramCovers of PAT: want two ranks only", coll)
		}
		c.Algo, c.NRanks = model.AlgoPAT, 4
		if _, err := c.Program(); err == nil || !strings.Contains(err.Error(), "two ranks") {
			t.Errorf("%s: PAT on 4 ranks: %v, want the two-rank error", coll, err)
		}
	}
}

func TestRingAllReduceLLAndLL128Steps(t *testing.T) {
	// LL: chunk = 64 KiB step / 2 = 32 KiB of data = 8192 floats, one step
	// per call, 4096 lines of 16 wire bytes. 4 ranks, one loop: 6 steps.
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 4, NChannels: 1, Count: 4 * 8192}
	_, res := runStats(t, c)
	if got := proxySteps(6, 4, 1, 4*32768, 32768); got != 6 {
		t.Fatalf("formula: %d", got)
	}
	wantConn(t, res, 6, repeat(32768, 6))
	for ci, st := range res.Conns {
		if st.WireBytes != 6*65536 {
			t.Errorf("LL connection %d: %d wire bytes, want %d", ci, st.WireBytes, 6*65536)
		}
	}
	// LL128: chunk = 614400 B step / 16 x 15 = 576000 B = 144000 floats, one
	// step per call, 4800 lines of 128 wire bytes.
	c.Proto, c.Count = model.ProtoLL128, 4*144000
	_, res = runStats(t, c)
	wantConn(t, res, 6, repeat(576000, 6))
	for ci, st := range res.Conns {
		if st.WireBytes != 6*614400 {
			t.Errorf("LL128 connection %d: %d wire bytes, want %d", ci, st.WireBytes, 6*614400)
		}
	}
}

func TestTreeAllReduceSteps(t *testing.T) {
	// Simple tree: ProtoSimple<1,1>, chunk = one 512 KiB step = 131072
	// floats. 3 x 131072 + 5 floats: TreeUpDown pattern, 1 step per loop,
	// ceil(1572884 / 524288) = 4 steps on every up and down connection:
	// 524288, 524288, 524288, 20 bytes.
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoTree, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 4, NChannels: 1, Count: 3*131072 + 5}
	_, res := runStats(t, c)
	if got := proxySteps(1, 1, 1, c.Count*4, 524288); got != 4 {
		t.Fatalf("formula: %d", got)
	}
	wantConn(t, res, 4, []int64{524288, 524288, 524288, 20})
	// 4 ranks have 3 parent links: 3 up + 3 down connections carry data.
	used := 0
	for _, st := range res.Conns {
		if st.Steps > 0 {
			used++
		}
	}
	if used != 6 {
		t.Errorf("%d tree connections used, want 6", used)
	}

	// Tree LL128 reduces its chunk (nccl-facts §7.1): 4 ranks on 1 node,
	// ppn 4, s = 1 + log2(1) + 0.4 = 1.4. nBytes = 576000 floats x 4 =
	// 2304000. 576000 -> 288000 -> 144000 -> 72000 while nBytes/chunk <
	// 1.4*64/4 = 22.4 and chunk > 128 KiB; 2304000/72000 = 32 >= 5.6 stops
	// the second loop. Round down to the 1920 B grain: 37 x 1920 = 71040.
	// Steps: ceil(2304000/71040) = 33; 32 full steps and 2304000 - 32 x
	// 71040 = 30720 bytes.
	c = conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoTree, Proto: model.ProtoLL128, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 4, NChannels: 1, Count: 576000}
	if got := model.CollChunkBytes(model.CollAllReduce, model.AlgoTree, model.ProtoLL128, 2304000, 1, 4); got != 71040 {
		t.Fatalf("tree LL128 chunk %d, want 71040", got)
	}
	_, res = runStats(t, c)
	wantConn(t, res, 33, append(repeat(71040, 32), 30720))
}

func TestCollPartsSplit(t *testing.T) {
	// AllReduce of 1 Mi floats (4 MiB) on 4 channels: traffic 8 MiB, 2 MiB
	// per channel; cells of ceil16(16 KiB / 2) = 8 KiB = 2048 floats, 512
	// cells, 128 per channel: lo 128 cells, 2 middle channels, hi 128 cells.
	parts := model.CollParts(model.CollAllReduce, model.AlgoRing, model.ProtoSimple, model.DtypeFP32, 1<<20, 4, 1, 8)
	if len(parts) != 4 {
		t.Fatalf("%d parts, want 4: %+v", len(parts), parts)
	}
	for i, p := range parts {
		if p.Channel != i || p.Offset != int64(i)*262144 || p.Count != 262144 || p.ChunkCount != 524288 {
			t.Errorf("part %d = %+v", i, p)
		}
	}
	// 1000 floats LL on 8 channels: LL traffic counts 2x4 = 8 per byte, so
	// 32000 B, 4000 B per channel; LL cells are ceil16(16 KiB / 8) = 2048 B =
	// 512 floats worth 16 KiB of traffic: one cell per channel, 512 floats
	// on channel 0 and the other 488 on channel 1.
	parts = model.CollParts(model.CollAllReduce, model.AlgoRing, model.ProtoLL, model.DtypeFP32, 1000, 8, 1, 8)
	if len(parts) != 2 || parts[0].Count != 512 || parts[1].Count != 488 || parts[1].Offset != 512 {
		t.Errorf("small split = %+v", parts)
	}
	// 10000 floats LL on 8 channels: traffic 320000 B, 40000 B per channel,
	// 20 cells of 512 floats, ceil(40000/16384) = 3 cells per channel: lo 3,
	// five middle channels of 3, hi 2 cells less the 240-float excess.
	parts = model.CollParts(model.CollAllReduce, model.AlgoRing, model.ProtoLL, model.DtypeFP32, 10000, 8, 1, 8)
	var sum int64
	for _, p := range parts {
		sum += p.Count
	}
	if len(parts) != 7 || sum != 10000 || parts[0].Count != 1536 || parts[5].Count != 1536 || parts[6].Count != 2*512-240 {
		t.Errorf("LL split = %+v", parts)
	}
	// AllGather moves bytes: 3000 floats per rank on 8 ranks, Simple, 8
	// channels: 12000 B, traffic 96000 B, 12000 B per channel, cells of
	// ceil16(16 KiB / 8) = 2048 B, 6 cells, one per channel (6 channels),
	// the last holding 12000-5*2048 = 1760 B = 440 floats.
	parts = model.CollParts(model.CollAllGather, model.AlgoRing, model.ProtoSimple, model.DtypeFP32, 3000, 8, 1, 8)
	if len(parts) != 6 || parts[0].Count != 512 || parts[5].Count != 440 || parts[5].Offset != 2560 {
		t.Errorf("AllGather split = %+v", parts)
	}
}

// TestStepRound: between Programs a connection's step counter rounds up
// to NCCL's chunk (ring Simple AllReduce and AllGather: 2 slices of 2
// steps; Broadcast: 1 step; LL and LL128: 1 step), never to the whole
// slot ring, so a sender may start its next call while the receiver
// still reads the last one; and every generated Program's connections
// end at the same step on both sides (Validate refuses the others).
func TestStepRound(t *testing.T) {
	for _, tc := range []struct {
		coll  model.Collective
		proto model.Protocol
		want  int64
	}{
		{model.CollAllReduce, model.ProtoSimple, 4},
		{model.CollAllGather, model.ProtoSimple, 4},
		{model.CollBroadcast, model.ProtoSimple, 1},
		{model.CollReduce, model.ProtoSimple, 1},
		{model.CollAllReduce, model.ProtoLL, 1},
		{model.CollAllReduce, model.ProtoLL128, 1},
	} {
		c := conformance.Case{Coll: tc.coll, Algo: model.AlgoRing, Proto: tc.proto, Dtype: model.DtypeFP32, NRanks: 4, NChannels: 2, Count: 1 << 20}
		p, err := c.Program()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.StepRound(); got != tc.want {
			t.Errorf("%s %s: StepRound %d, want %d", tc.coll, tc.proto, got, tc.want)
		}
		for li := range p.Lanes {
			for _, send := range []bool{false, true} {
				if n := p.LaneSteps(li, send); n%p.StepRound() != 0 && tc.proto == model.ProtoSimple && tc.want > 1 {
					t.Errorf("%s %s lane %d: ends at step %d, not a whole chunk", tc.coll, tc.proto, li, n)
				}
			}
		}
	}
}

// TestLineThreads: twinccl's LL and LL128 blocks are sized to the
// largest primitive call, one thread per 8-byte LL line and a warp per
// four 120-byte LL128 lines, from 64 threads up to the cap.
func TestLineThreads(t *testing.T) {
	for _, tc := range []struct {
		p     model.Protocol
		bytes int64
		want  int
	}{
		{model.ProtoLL, 0, 64},
		{model.ProtoLL, 8, 64},
		{model.ProtoLL, 1536, 192},    // 192 lines
		{model.ProtoLL, 1540, 224},    // 193 lines, rounded up to a warp
		{model.ProtoLL, 4096, 512},    // 512 lines
		{model.ProtoLL, 1 << 20, 512}, // capped
		{model.ProtoLL128, 120, 64},   // one line: a warp, at least 64
		{model.ProtoLL128, 3072, 224}, // 26 lines: 7 warps
		{model.ProtoLL128, 1 << 20, 512},
		{model.ProtoSimple, 8, 512},
	} {
		if got := model.LineThreadsFor(tc.p, tc.bytes, 512); got != tc.want {
			t.Errorf("model.LineThreadsFor(%v, %d B, 512) = %d, want %d", tc.p, tc.bytes, got, tc.want)
		}
	}
	if got := model.LineThreadsFor(model.ProtoLL, 1<<20, 32); got != 32 {
		t.Errorf("a cap below 64 threads: got %d, want the cap, 32", got)
	}
	// A Program's largest call: 1536 B of fp32 on one lane, less on another.
	p := &model.Program{Proto: model.ProtoLL, Dtype: model.DtypeFP32, Lanes: []model.ProgLane{
		{Ops: []model.ProgOp{{Kind: model.PrimSend, N: 100}}},
		{Ops: []model.ProgOp{{Kind: model.PrimRecv, N: 384}, {Kind: model.PrimRecv, N: 10}}},
	}}
	if got := p.LineThreads([]int{0, 1}, 512); got != 192 {
		t.Errorf("Program.LineThreads(both lanes) = %d, want 192", got)
	}
	if got := p.LineThreads([]int{0}, 512); got != 64 {
		t.Errorf("Program.LineThreads(lane 0: 400 B) = %d, want 64", got)
	}
}

// TestTreeSplitThreads: NCCL's split of a tree block between its reduce
// and broadcast groups (runTreeSplit).
func TestTreeSplitThreads(t *testing.T) {
	for _, tc := range []struct {
		p              model.Protocol
		threads        int
		wantUp, wantDn int
	}{
		{model.ProtoSimple, 640, 384, 256}, // half is 320 >= 256: two more warps
		{model.ProtoSimple, 384, 192, 192},
		{model.ProtoSimple, 512, 320, 192},
		{model.ProtoLL, 640, 448, 192}, // 70% of 20 warps: 14
		{model.ProtoLL128, 640, 448, 192},
		{model.ProtoLL, 96, 64, 32},
	} {
		up, dn := model.TreeSplitThreads(tc.p, tc.threads)
		if up != tc.wantUp || dn != tc.wantDn {
			t.Errorf("TreeSplitThreads(%v, %d) = %d, %d; want %d, %d", tc.p, tc.threads, up, dn, tc.wantUp, tc.wantDn)
		}
	}
}
