package model

import (
	"fmt"
)

// ProgOptions are the optional inputs of Program generation.
type ProgOptions struct {
	// NChannels is the number of channels the collective may use; 0 means
	// the Plan's NChannels (the task's nMaxChannels in NCCL).
	NChannels int
	// Root is the root rank of Broadcast and Reduce.
	Root int
	// InPlace says the call's input and output are one buffer (NCCL's
	// in-place call, as PyTorch makes its broadcasts): a Broadcast root
	// then sends its data instead of copying it to its output and sending
	// it, and an AllGather rank sends its own block from the output. The
	// other collectives run the same primitives either way.
	InPlace bool
	// BuffSize is NCCL_BUFFSIZE, the Simple connection buffer in bytes
	// (0: NCCL's default, BuffSizeSimple): it sets the step, and so the
	// chunk and slice sizes, of Simple collectives (CheckBuffSizeSimple
	// says which values are allowed). LL and LL128 have buffers of their
	// own. AlltoAll Programs refuse a buffer other than the default.
	BuffSize int
	// Threads is NCCL's block size for the call (Program.Threads; 0: not
	// known).
	Threads int
	// Credits overrides the flow-control window (NCCL_STEPS when 0). Only
	// tests that check violation detection should set it.
	Credits int
	// P2P are the options of AlltoAll (p2p path) generation.
	P2P P2POptions
}

// otherBuffSize reports whether the options ask for a Simple buffer other
// than NCCL's default.
func (o ProgOptions) otherBuffSize() bool { return o.BuffSize != 0 && o.BuffSize != BuffSizeSimple }

// ProgGen generates the lanes of a collective Program one rank and channel at
// a time, so that very large Programs can be streamed instead of held in
// memory. Program() materialises all of them.
type ProgGen struct {
	hdr      Program
	plan     *Plan
	parts    []CollPart
	chLo     int
	ringIx   [][]int32 // [channel-chLo][rank] ring index
	ringRank [][]int32 // [channel-chLo][index] rank
	// p2p Programs are generated whole: mat holds them, and laneAt lists
	// the lanes of rank r on channel ch at r*NChannels+ch.
	mat    *Program
	laneAt [][]int32
	// inPlace is ProgOptions.InPlace
	inPlace bool
	// nv lays out NVLS and NVLS tree Programs (program_nvls.go); nil
	// otherwise. simpleStep is the Simple step size they chunk by.
	nv         *nvlsGen
	simpleStep int
}

// GenerateProgram builds the Program NCCL 2.28.9 runs for one collective:
// count elements (per rank for AllGather and ReduceScatter) of type d,
// reduced with op, on the rings or trees of plan, with algorithm a and
// protocol p. PAT, on two ranks, runs on the rings: its one dimension is
// the ring's hop, one step per chunk (a ring's Simple chunk is four steps
// in two slices).
func GenerateProgram(plan *Plan, c Collective, a Algorithm, p Protocol, count int64, d Dtype, op RedOp, opts ProgOptions) (*Program, error) {
	g, err := NewProgGen(plan, c, a, p, count, d, op, opts)
	if err != nil {
		return nil, err
	}
	return g.Program(), nil
}

// NewProgGen checks its inputs and prepares a generator (see GenerateProgram).
func NewProgGen(plan *Plan, c Collective, a Algorithm, p Protocol, count int64, d Dtype, op RedOp, opts ProgOptions) (*ProgGen, error) {
	if plan == nil || plan.NRanks < 1 {
		return nil, fmt.Errorf("generate %s: plan has no ranks", c)
	}
	n := plan.NRanks
	if !CollAllowed(c, a, p) {
		return nil, fmt.Errorf("generate %s: algorithm %s with protocol %s is not supported", c, a, p)
	}
	switch c {
	case CollSendRecv:
		return nil, fmt.Errorf("generate %s: a group of sends and receives needs its task list (GenerateP2PProgram)", c)
	case CollAlltoAll:
		if opts.otherBuffSize() {
			return nil, fmt.Errorf("generate %s: NCCL_BUFFSIZE=%d: p2p Programs use NCCL's default buffer only", c, opts.BuffSize)
		}
		po := opts.P2P
		if po.Credits == 0 {
			po.Credits = opts.Credits
		}
		prog, err := GenerateAlltoAllProgram(plan, p, count, d, po)
		if err != nil {
			return nil, err
		}
		return NewProgGenFromProgram(prog), nil
	}
	if d.Size() == 0 {
		return nil, fmt.Errorf("generate %s: unknown datatype %d", c, int(d))
	}
	if op < 0 || op >= NumRedOps {
		return nil, fmt.Errorf("generate %s: unknown reduction %d", c, int(op))
	}
	if count < 0 || count > 1<<40 {
		return nil, fmt.Errorf("generate %s: element count %d out of range", c, count)
	}
	if (c == CollBroadcast || c == CollReduce) && (opts.Root < 0 || opts.Root >= n) {
		return nil, fmt.Errorf("generate %s: root %d outside %d ranks", c, opts.Root, n)
	}
	nvls := a == AlgoNVLS || a == AlgoNVLSTree
	nch := opts.NChannels
	if nch == 0 {
		nch = plan.NChannels
		if nvls && plan.NVLSChannels > 0 {
			nch = plan.NVLSChannels
		}
	}
	if nch < 1 {
		return nil, fmt.Errorf("generate %s: no channels", c)
	}
	chunkSteps, sliceSteps := ChunkSliceSteps(c, a, p)
	credits := opts.Credits
	if credits == 0 {
		credits = ProgSlots
	}
	stepBytes := ProtoStepBytes(p)
	if opts.otherBuffSize() {
		if err := CheckBuffSizeSimple(int64(opts.BuffSize)); err != nil {
			return nil, fmt.Errorf("generate %s: %w", c, err)
		}
		if p == ProtoSimple {
			stepBytes = opts.BuffSize / ProgSlots
		}
	}
	g := &ProgGen{plan: plan, inPlace: opts.InPlace}
	g.hdr = Program{Coll: c, Algo: a, Proto: p, Dtype: d, Op: op, Count: count, NRanks: n, NChannels: nch,
		StepBytes: stepBytes, Credits: credits, SlicesPerChunk: chunkSteps / sliceSteps, StepsPerSlice: sliceSteps, Threads: opts.Threads}
	if c == CollBroadcast || c == CollReduce {
		g.hdr.Root = opts.Root
	}
	g.hdr.InCount, g.hdr.OutCount = count, count
	switch c {
	case CollAllGather:
		g.hdr.OutCount = count * int64(n)
	case CollReduceScatter:
		g.hdr.InCount = count * int64(n)
	}
	if count == 0 {
		return g, nil
	}
	if n == 1 {
		// NCCL runs a one-rank collective as a local copy (with the post op).
		g.parts = []CollPart{{Channel: 0, Offset: 0, Count: count}}
		return g, nil
	}
	if nvls {
		// NVLS connections step by NCCL_NVLS_CHUNKSIZE; chunks follow the
		// Simple step (nvlsChunkBytes).
		g.simpleStep, g.hdr.StepBytes = stepBytes, NVLSChunkBytes
		if err := g.initNVLS(nch); err != nil {
			return nil, fmt.Errorf("generate %s/%s: %w", c, a, err)
		}
		return g, nil
	}
	if !ProgramCovers(c, a, p, n) {
		// On two ranks PAT's one dimension is the ring's one hop; on more,
		// its log-depth schedule has no generator.
		return nil, fmt.Errorf("generate %s/%s: PAT Programs cover two ranks, not %d", c, a, n)
	}
	if err := g.checkPlan(nch); err != nil {
		return nil, fmt.Errorf("generate %s/%s: %w", c, a, err)
	}
	nNodes := max(plan.NNodes, 1)
	g.parts = collParts(c, a, p, d, count, nch, nNodes, n, stepBytes)
	if len(g.parts) == 0 {
		return g, nil
	}
	g.chLo = g.parts[0].Channel
	used := len(g.parts)
	if a != AlgoTree { // ring, or PAT on two ranks
		g.ringIx = make([][]int32, used)
		g.ringRank = make([][]int32, used)
		g.hdr.Conns = make([]ProgConn, 0, used*n)
		for k := 0; k < used; k++ {
			ch := g.chLo + k
			ring := plan.Rings[ch]
			g.ringIx[k] = make([]int32, n)
			g.ringRank[k] = make([]int32, n)
			for i, r := range ring {
				g.ringIx[k][r] = int32(i)
				g.ringRank[k][i] = int32(r)
			}
			for r := 0; r < n; r++ {
				next := ring[(int(g.ringIx[k][r])+1)%n]
				g.hdr.Conns = append(g.hdr.Conns, ProgConn{Channel: int32(ch), From: int32(r), To: int32(next)})
			}
		}
	} else {
		g.hdr.Conns = make([]ProgConn, 0, used*2*n)
		for k := 0; k < used; k++ {
			ch := g.chLo + k
			for r := 0; r < n; r++ {
				up := plan.Ranks[r].Tree[ch].Up
				if up < 0 {
					up = r // the root has no parent; its two slots stay unused
				}
				g.hdr.Conns = append(g.hdr.Conns,
					ProgConn{Channel: int32(ch), From: int32(r), To: int32(up)},
					ProgConn{Channel: int32(ch), From: int32(up), To: int32(r)})
			}
		}
	}
	return g, nil
}

// NewProgGenFromProgram wraps a materialised Program (p2p Programs are
// generated whole) in the ProgGen interface. The generator shares prog's
// lanes; Parts is empty.
func NewProgGenFromProgram(prog *Program) *ProgGen {
	g := &ProgGen{mat: prog}
	g.hdr = *prog
	g.hdr.Lanes = nil
	g.laneAt = make([][]int32, prog.NRanks*prog.NChannels)
	for i := range prog.Lanes {
		l := &prog.Lanes[i]
		if l.Rank < 0 || int(l.Rank) >= prog.NRanks || l.Channel < 0 || int(l.Channel) >= prog.NChannels {
			continue
		}
		k := int(l.Rank)*prog.NChannels + int(l.Channel)
		g.laneAt[k] = append(g.laneAt[k], int32(i))
	}
	return g
}

// checkPlan verifies the rings or trees the generator will use.
func (g *ProgGen) checkPlan(nch int) error {
	plan, n := g.plan, g.plan.NRanks
	if g.hdr.Algo != AlgoTree {
		if len(plan.Rings) < nch {
			return fmt.Errorf("plan has %d rings, need %d", len(plan.Rings), nch)
		}
		for c := 0; c < nch; c++ {
			if len(plan.Rings[c]) != n {
				return fmt.Errorf("ring %d has %d ranks, want %d", c, len(plan.Rings[c]), n)
			}
			seen := make([]bool, n)
			for _, r := range plan.Rings[c] {
				if r < 0 || r >= n || seen[r] {
					return fmt.Errorf("ring %d is not a permutation of the ranks", c)
				}
				seen[r] = true
			}
		}
		return nil
	}
	if len(plan.Ranks) != n {
		return fmt.Errorf("plan has %d rank entries, want %d", len(plan.Ranks), n)
	}
	for c := 0; c < nch; c++ {
		roots := 0
		for r := 0; r < n; r++ {
			if len(plan.Ranks[r].Tree) <= c {
				return fmt.Errorf("rank %d has no tree for channel %d", r, c)
			}
			t := plan.Ranks[r].Tree[c]
			if t.Up == -1 {
				roots++
			} else if t.Up < 0 || t.Up >= n || t.Up == r {
				return fmt.Errorf("channel %d: rank %d has parent %d", c, r, t.Up)
			} else if !progTreeHasChild(plan.Ranks[t.Up].Tree[c], r) {
				return fmt.Errorf("channel %d: rank %d's parent %d does not list it as a child", c, r, t.Up)
			}
			kids := 0
			for _, d := range t.Down {
				if d == -1 {
					continue
				}
				kids++
				if d < 0 || d >= n || plan.Ranks[d].Tree[c].Up != r {
					return fmt.Errorf("channel %d: rank %d's child %d does not have it as parent", c, r, d)
				}
			}
			if t.Up == -1 && kids == 0 {
				return fmt.Errorf("channel %d: root %d has no children", c, r)
			}
		}
		if roots != 1 {
			return fmt.Errorf("channel %d: tree has %d roots", c, roots)
		}
	}
	return nil
}

func progTreeHasChild(t TreeLinks, r int) bool {
	for _, d := range t.Down {
		if d == r {
			return true
		}
	}
	return false
}

// Header is the Program without lanes: its parameters and connections.
func (g *ProgGen) Header() *Program {
	h := g.hdr
	return &h
}

// Channels are the channels that carry lanes, in order.
func (g *ProgGen) Channels() []int {
	if g.mat != nil {
		var out []int
		for ch := 0; ch < g.mat.NChannels; ch++ {
			for r := 0; r < g.mat.NRanks; r++ {
				if len(g.laneAt[r*g.mat.NChannels+ch]) > 0 {
					out = append(out, ch)
					break
				}
			}
		}
		return out
	}
	out := make([]int, len(g.parts))
	for i, p := range g.parts {
		out[i] = p.Channel
	}
	return out
}

// Parts are the channel shares of the collective (empty for count 0).
func (g *ProgGen) Parts() []CollPart { return append([]CollPart(nil), g.parts...) }

// Program materialises every lane.
func (g *ProgGen) Program() *Program {
	if g.mat != nil {
		p := *g.mat
		p.Conns = append([]ProgConn(nil), g.mat.Conns...)
		p.Lanes = make([]ProgLane, 0, len(g.mat.Lanes))
		for r := 0; r < p.NRanks; r++ {
			for ch := 0; ch < p.NChannels; ch++ {
				p.Lanes = g.AppendLanes(p.Lanes, r, ch)
			}
		}
		return &p
	}
	p := g.hdr
	p.Conns = append([]ProgConn(nil), g.hdr.Conns...)
	for r := 0; r < p.NRanks; r++ {
		for _, part := range g.parts {
			p.Lanes = g.AppendLanes(p.Lanes, r, part.Channel)
		}
	}
	return &p
}

// AppendLanes appends the lanes of rank r on channel ch (with their ops) to
// lanes.
func (g *ProgGen) AppendLanes(lanes []ProgLane, r, ch int) []ProgLane {
	for i := 0; i < g.NumLanes(r, ch); i++ {
		l := g.Lane(r, ch, i, nil)
		lanes = append(lanes, l)
	}
	return lanes
}

// NumLanes is the number of lanes rank r runs on channel ch.
func (g *ProgGen) NumLanes(r, ch int) int {
	if g.mat != nil {
		if r < 0 || r >= g.mat.NRanks || ch < 0 || ch >= g.mat.NChannels {
			return 0
		}
		return len(g.laneAt[r*g.mat.NChannels+ch])
	}
	k := ch - g.chLo
	if k < 0 || k >= len(g.parts) || r < 0 || r >= g.hdr.NRanks {
		return 0
	}
	if g.nv != nil {
		return len(g.nv.roles(g.hdr.Coll, r, ch))
	}
	if g.hdr.NRanks > 1 && g.hdr.Algo == AlgoTree && g.plan.Ranks[r].Tree[ch].Up != -1 {
		return 2 // reduce-up and broadcast-down thread groups
	}
	return 1
}

// Lane generates lane i of rank r on channel ch, appending its ops to ops
// (pass a reused buffer to avoid allocation when streaming).
func (g *ProgGen) Lane(r, ch, i int, ops []ProgOp) ProgLane {
	l := ProgLane{Rank: int32(r), Channel: int32(ch)}
	if g.mat != nil {
		if i < 0 || i >= g.NumLanes(r, ch) {
			return l
		}
		src := &g.mat.Lanes[g.laneAt[r*g.mat.NChannels+ch][i]]
		l.Recv = append([]int32(nil), src.Recv...)
		l.Send = append([]int32(nil), src.Send...)
		l.Ops = append(ops[:0], src.Ops...)
		return l
	}
	k := ch - g.chLo
	if k < 0 || k >= len(g.parts) || r < 0 || r >= g.hdr.NRanks {
		return l
	}
	part := g.parts[k]
	if g.hdr.NRanks == 1 {
		l.Ops = g.copyOps(part, ops[:0])
		return l
	}
	if g.nv != nil {
		return g.nvlsLane(l, part, k, i, ops[:0])
	}
	if g.hdr.Algo == AlgoTree {
		return g.treeLane(l, part, k, i, ops[:0])
	}
	n := g.hdr.NRanks
	ix := int(g.ringIx[k][r])
	prev := int(g.ringRank[k][(ix+n-1)%n])
	l.Recv = []int32{int32(k*n + prev)}
	l.Send = []int32{int32(k*n + r)}
	ops = ops[:0]
	switch g.hdr.Coll {
	case CollAllReduce:
		ops = g.ringAllReduce(part, ix, ops)
	case CollAllGather:
		ops = g.ringAllGather(part, k, ix, r, ops)
	case CollReduceScatter:
		ops = g.ringReduceScatter(part, k, ix, r, ops)
	case CollBroadcast:
		ops = g.ringBroadcast(part, k, ix, r, ops)
	case CollReduce:
		ops = g.ringReduce(part, k, ix, r, ops)
	}
	l.Ops = ops
	return l
}

// add appends a primitive call, numbering its steps from the previous call.
func (g *ProgGen) add(ops []ProgOp, k PrimKind, flags uint8, in, out, n int64) []ProgOp {
	op := ProgOp{Kind: k, Flags: flags, N: int32(n), InOff: in, OutOff: out}
	if len(ops) > 0 {
		last := &ops[len(ops)-1]
		per := uint32(1)
		if g.hdr.Proto == ProtoSimple {
			per = uint32(g.hdr.SlicesPerChunk * g.hdr.StepsPerSlice)
		}
		op.RecvStep, op.SendStep = last.RecvStep, last.SendStep
		if last.Kind.Receives() {
			op.RecvStep += per
		}
		if last.Kind.Sends() {
			op.SendStep += per
		}
	}
	return append(ops, op)
}

func (g *ProgGen) copyOps(part CollPart, ops []ProgOp) []ProgOp {
	const maxN = 1 << 30
	for off := int64(0); off < part.Count; off += maxN {
		n := min(maxN, part.Count-off)
		ops = append(ops, ProgOp{Kind: PrimCopy, Flags: PrimPostOp, N: int32(n), InOff: off, OutOff: off})
	}
	return ops
}

// ringAllReduce is runRing of all_reduce.h (nccl-facts §8.2).
func (g *ProgGen) ringAllReduce(part CollPart, ix int, ops []ProgOp) []ProgOp {
	n := int64(g.hdr.NRanks)
	align := int64(16 / g.hdr.Dtype.Size())
	loop := n * part.ChunkCount
	for eo := int64(0); eo < part.Count; eo += loop {
		rem := part.Count - eo
		cc := part.ChunkCount
		if rem < loop {
			cc = progAlignUp(progDivUp(rem, n), align)
		}
		chunk := func(j int64) (int64, int64) {
			c := (int64(ix) + j + 2*n) % n
			co := c * cc
			return part.Offset + eo + co, max(0, min(cc, rem-co))
		}
		o, m := chunk(-1)
		ops = g.add(ops, PrimSend, PrimDirect, o, o, m)
		for j := int64(2); j < n; j++ {
			o, m = chunk(-j)
			ops = g.add(ops, PrimRecvReduceSend, PrimDirect, o, o, m)
		}
		o, m = chunk(0)
		ops = g.add(ops, PrimRecvReduceCopySend, PrimDirect|PrimPostOp, o, o, m)
		for j := int64(1); j < n-1; j++ {
			o, m = chunk(-j)
			ops = g.add(ops, PrimRecvCopySend, PrimDirect, o, o, m)
		}
		o, m = chunk(1)
		ops = g.add(ops, PrimRecv, PrimDirect, o, o, m)
	}
	return ops
}

// ringAllGather is runRing of all_gather.h (nccl-facts §8.3).
func (g *ProgGen) ringAllGather(part CollPart, k, ix, r int, ops []ProgOp) []ProgOp {
	n := g.hdr.NRanks
	cnt := g.hdr.Count
	at := func(j int) int64 { return int64(g.ringRank[k][(ix+j)%n]) } // ringRanks[j]
	for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
		m := min(part.ChunkCount, part.Count-eo)
		d := part.Offset + eo
		if g.inPlace {
			ops = g.add(ops, PrimSend, PrimDirect|PrimFromOutput, d, int64(r)*cnt+d, m)
		} else {
			ops = g.add(ops, PrimCopySend, PrimDirect, d, int64(r)*cnt+d, m)
		}
		for j := 1; j < n-1; j++ {
			ops = g.add(ops, PrimRecvCopySend, PrimDirect, 0, at(n-j)*cnt+d, m)
		}
		ops = g.add(ops, PrimRecv, PrimDirect, 0, at(1)*cnt+d, m)
	}
	return ops
}

// ringReduceScatter is runRing of reduce_scatter.h (nccl-facts §8.3).
func (g *ProgGen) ringReduceScatter(part CollPart, k, ix, r int, ops []ProgOp) []ProgOp {
	n := g.hdr.NRanks
	cnt := g.hdr.Count
	at := func(j int) int64 { return int64(g.ringRank[k][(ix+j)%n]) }
	for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
		m := min(part.ChunkCount, part.Count-eo)
		d := part.Offset + eo
		ops = g.add(ops, PrimSend, 0, at(n-1)*cnt+d, 0, m)
		for j := 2; j < n; j++ {
			ops = g.add(ops, PrimRecvReduceSend, 0, at(n-j)*cnt+d, 0, m)
		}
		ops = g.add(ops, PrimRecvReduceCopy, PrimPostOp, int64(r)*cnt+d, d, m)
	}
	return ops
}

// ringBroadcast is runRing of broadcast.h, whose primitives are the
// direct* variants (as AllGather's and AllReduce's; Reduce's and
// ReduceScatter's are not).
func (g *ProgGen) ringBroadcast(part CollPart, k, ix, r int, ops []ProgOp) []ProgOp {
	n := g.hdr.NRanks
	next := int(g.ringRank[k][(ix+1)%n])
	root := g.hdr.Root
	for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
		m := min(part.ChunkCount, part.Count-eo)
		d := part.Offset + eo
		switch {
		case r == root && g.inPlace:
			ops = g.add(ops, PrimSend, PrimDirect, d, d, m)
		case r == root:
			ops = g.add(ops, PrimCopySend, PrimDirect, d, d, m)
		case next == root:
			ops = g.add(ops, PrimRecv, PrimDirect, 0, d, m)
		default:
			ops = g.add(ops, PrimRecvCopySend, PrimDirect, 0, d, m)
		}
	}
	return ops
}

// ringReduce is runRing of reduce.h.
func (g *ProgGen) ringReduce(part CollPart, k, ix, r int, ops []ProgOp) []ProgOp {
	n := g.hdr.NRanks
	prev := int(g.ringRank[k][(ix+n-1)%n])
	root := g.hdr.Root
	for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
		m := min(part.ChunkCount, part.Count-eo)
		d := part.Offset + eo
		switch {
		case prev == root:
			ops = g.add(ops, PrimSend, 0, d, 0, m)
		case r == root:
			ops = g.add(ops, PrimRecvReduceCopy, PrimPostOp, d, d, m)
		default:
			ops = g.add(ops, PrimRecvReduceSend, 0, d, 0, m)
		}
	}
	return ops
}

// treeLane is runTreeSplit of all_reduce.h (nccl-facts §8.4): the root
// reduces and broadcasts in one lane; other ranks run a reduce-up lane (0)
// and a broadcast-down lane (1) side by side.
func (g *ProgGen) treeLane(l ProgLane, part CollPart, k, lane int, ops []ProgOp) ProgLane {
	n := g.hdr.NRanks
	r := int(l.Rank)
	t := g.plan.Ranks[r].Tree[part.Channel]
	up := func(child int) int32 { return int32(k*2*n + 2*child) }       // child -> parent
	down := func(child int) int32 { return int32(k*2*n + 2*child + 1) } // parent -> child
	var kids []int32
	var kidsDown []int32
	for _, d := range t.Down {
		if d >= 0 {
			kids = append(kids, up(d))
			kidsDown = append(kidsDown, down(d))
		}
	}
	leaf := len(kids) == 0
	var kind PrimKind
	var flags uint8 = PrimDirect
	switch {
	case t.Up == -1:
		l.Recv, l.Send = kids, kidsDown
		kind, flags = PrimRecvReduceCopySend, PrimDirect|PrimPostOp
	case lane == 0:
		l.Recv, l.Send = kids, []int32{up(r)}
		kind = PrimRecvReduceSend
		if leaf {
			kind = PrimSend
		}
	default:
		l.Recv, l.Send = []int32{down(r)}, kidsDown
		kind = PrimRecvCopySend
		if leaf {
			kind = PrimRecv
		}
	}
	if leaf && lane == 0 {
		l.Recv = nil
	}
	if leaf && lane == 1 {
		l.Send = nil
	}
	for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
		m := min(part.ChunkCount, part.Count-eo)
		d := part.Offset + eo
		ops = g.add(ops, kind, flags, d, d, m)
	}
	l.Ops = ops
	return l
}
