package model

import (
	"fmt"
	"math/bits"
	"sort"
)

// P2P Programs: NCCL's Send/Recv path (nccl-facts §5.5, §7.1, §8.5). A
// group of sends and receives is cut, per rank, into rounds of the peer
// schedule (ncclP2pSchedule); each round's transfer is split into parts
// placed on the p2p channels from the round's bit-reversed channel base,
// and every part is moved in chunks of one step (ProtoSimple<1,1> or LL).

// P2PScheduleGroupSize is NCCL_P2P_SCHEDULE_GROUP_SIZE's default
// (NCCL_MAX_DEV_WORK_P2P_PER_BATCH), the peer group size of multi-node
// schedules.
const P2PScheduleGroupSize = 8

// P2PMaxWorksPerBatch is NCCL_MAX_DEV_WORK_P2P_PER_BATCH, the p2p works one
// channel batch holds; multi-node channel bases advance once per batch.
const P2PMaxWorksPerBatch = 8

// P2PTask is one ncclSend or ncclRecv of a rank inside a group.
type P2PTask struct {
	Rank int  // the calling rank
	Peer int  // the rank sent to or received from; Rank itself is a local copy
	Send bool // ncclSend when true, ncclRecv otherwise
	// Count is the element count; Offset is the element offset of the data
	// in the rank's input buffer (sends) or output buffer (receives).
	Count, Offset int64
}

// P2POptions are the optional inputs of p2p Program generation.
type P2POptions struct {
	// P2PChannels and ChannelsPerPeer override the Plan's p2pnChannels and
	// p2pnChannelsPerPeer (both powers of two) when not zero.
	P2PChannels, ChannelsPerPeer int
	// ChunkBytes is comm->p2pChunkSize, the Simple step size of p2p
	// connections; 0 means P2PChunkSizeNVL on one node and
	// P2PChunkSizeDefault otherwise. It must be a multiple of 16.
	ChunkBytes int
	// GroupSize is NCCL_P2P_SCHEDULE_GROUP_SIZE for multi-node schedules
	// (P2PScheduleGroupSize when 0).
	GroupSize int
	// Schedule replaces the peer schedule that P2PSchedule computes:
	// Schedule[rank][round]. Only experiments and tests set it.
	Schedule [][]P2PRound
	// Credits overrides the flow-control window (NCCL_STEPS when 0).
	Credits int
}

// P2PRound is one round of a rank's peer schedule: it sends to Send and
// receives from Recv.
type P2PRound struct {
	Send, Recv int
}

// p2pTopo is the node structure the schedule works on.
type p2pTopo struct {
	nNodes    int
	node      []int   // per rank
	local     []int   // per rank: local rank
	nodeRanks [][]int // per node: ranks by local rank
}

func newP2PTopo(plan *Plan) (*p2pTopo, error) {
	n := plan.NRanks
	t := &p2pTopo{node: make([]int, n), local: make([]int, n)}
	switch {
	case len(plan.NodeRanks) > 0:
		t.nodeRanks = plan.NodeRanks
	case len(plan.Ranks) == n:
		for r, rc := range plan.Ranks {
			if rc.Node < 0 || rc.Node > n || rc.LocalRank < 0 || rc.LocalRank >= n {
				return nil, fmt.Errorf("rank %d: node %d, local rank %d out of range", r, rc.Node, rc.LocalRank)
			}
			for len(t.nodeRanks) <= rc.Node {
				t.nodeRanks = append(t.nodeRanks, nil)
			}
			nr := t.nodeRanks[rc.Node]
			for len(nr) <= rc.LocalRank {
				nr = append(nr, -1)
			}
			nr[rc.LocalRank] = r
			t.nodeRanks[rc.Node] = nr
		}
	default:
		all := make([]int, n)
		for r := range all {
			all[r] = r
		}
		t.nodeRanks = [][]int{all}
	}
	t.nNodes = len(t.nodeRanks)
	seen := make([]bool, n)
	for nd, ranks := range t.nodeRanks {
		if len(ranks) == 0 {
			return nil, fmt.Errorf("node %d has no ranks", nd)
		}
		for l, r := range ranks {
			if r < 0 || r >= n || seen[r] {
				return nil, fmt.Errorf("node %d local rank %d: rank %d missing, out of range or repeated", nd, l, r)
			}
			seen[r] = true
			t.node[r], t.local[r] = nd, l
		}
	}
	for r, ok := range seen {
		if !ok {
			return nil, fmt.Errorf("rank %d is on no node", r)
		}
	}
	return t, nil
}

func gcdInt(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pow2Up is the smallest power of two >= n (1 for n <= 1).
func pow2Up(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

// groupSize is the schedule's group size: the configured size across
// nodes (all local ranks on one node), reduced to a divisor of every
// node's rank count.
func (t *p2pTopo) groupSize(configured int) int {
	gs := 0
	for _, nr := range t.nodeRanks {
		gs = max(gs, len(nr))
	}
	if t.nNodes > 1 {
		gs = configured
	}
	for _, nr := range t.nodeRanks {
		if len(nr)%gs != 0 || len(nr) < gs {
			gs = gcdInt(gs, len(nr))
		}
	}
	return gs
}

// P2PSchedule is NCCL's ncclP2pSchedule for every rank of plan: rank r's
// round i sends to sched[r][i].Send and receives from sched[r][i].Recv.
// Ranks are cut into groups of groupSize local ranks (P2PScheduleGroupSize
// when 0; one node uses all its local ranks); group deltas follow the
// quadratic sequence 0, 1, 3, 6, ... modulo the next power of two of the
// group count, skipping those out of range, and within a group delta the
// local delta runs 0..groupSize-1. The second result is the group size
// used, which the channel bases need.
func P2PSchedule(plan *Plan, groupSize int) ([][]P2PRound, int, error) {
	if plan == nil || plan.NRanks < 1 {
		return nil, 0, fmt.Errorf("p2p schedule: plan has no ranks")
	}
	t, err := newP2PTopo(plan)
	if err != nil {
		return nil, 0, fmt.Errorf("p2p schedule: %w", err)
	}
	if groupSize <= 0 {
		groupSize = P2PScheduleGroupSize
	}
	return t.schedule(plan.NRanks, groupSize)
}

func (t *p2pTopo) schedule(n, configured int) ([][]P2PRound, int, error) {
	gs := t.groupSize(configured)
	nGroups := n / gs
	groupNode := make([]int, 0, nGroups)
	groupLocal := make([]int, 0, nGroups)
	firstGroup := make([]int, t.nNodes)
	for nd, nr := range t.nodeRanks {
		firstGroup[nd] = len(groupNode)
		for g := 0; g < len(nr)/gs; g++ {
			groupNode = append(groupNode, nd)
			groupLocal = append(groupLocal, g*gs)
		}
	}
	if len(groupNode) != nGroups || n%gs != 0 {
		return nil, 0, fmt.Errorf("p2p schedule: %d ranks do not form groups of %d", n, gs)
	}
	pow := pow2Up(nGroups)
	sched := make([][]P2PRound, n)
	for r := 0; r < n; r++ {
		local := t.local[r] % gs
		group := t.local[r]/gs + firstGroup[t.node[r]]
		rounds := make([]P2PRound, 0, n)
		delta, step := 0, 0
		for {
			if delta < nGroups {
				sg := (group + delta) % nGroups
				rg := (group - delta + nGroups) % nGroups
				for d := 0; d < gs; d++ {
					sl := groupLocal[sg] + (local+d)%gs
					rl := groupLocal[rg] + (local-d+gs)%gs
					rounds = append(rounds, P2PRound{Send: t.nodeRanks[groupNode[sg]][sl], Recv: t.nodeRanks[groupNode[rg]][rl]})
				}
			}
			step++
			delta = (delta + step) & (pow - 1)
			if step == pow {
				break
			}
		}
		if len(rounds) != n {
			return nil, 0, fmt.Errorf("p2p schedule: rank %d got %d rounds for %d ranks", r, len(rounds), n)
		}
		sched[r] = rounds
	}
	return sched, gs, nil
}

// P2PChannelBase is ncclP2pChannelBaseForRound: the channel holding part 0
// of round's transfers. One node uses the round itself; several nodes
// advance the base once per batch of P2PMaxWorksPerBatch works within a
// group and per group delta. The base is bit-reversed within
// log2(p2pChannels) bits.
func P2PChannelBase(round, nNodes, groupSize, p2pChannels int) int {
	base := round
	if nNodes > 1 && groupSize > 0 {
		base = (round/groupSize)*int(progDivUp(int64(groupSize), P2PMaxWorksPerBatch)) + (round%groupSize)/P2PMaxWorksPerBatch
	}
	nb := bits.Len(uint(pow2Up(p2pChannels))) - 1
	if nb == 0 {
		return 0
	}
	return int(bits.Reverse32(uint32(base)) >> (32 - nb))
}

// P2PChannelForPart is ncclP2pChannelForPart: part p of a transfer whose
// base is base runs on channel (base+p) mod p2pChannels.
func P2PChannelForPart(p2pChannels, base, part int) int {
	return (base + part) & (p2pChannels - 1)
}

// P2PPartBounds is ncclP2pPartBounds: the byte range [beg, end) of part p
// of nParts of a bytes-long transfer (parts aligned to P2PPartAlign).
func P2PPartBounds(nParts, part int, bytes int64) (beg, end int64) {
	pb := progAlignUp(progDivUp(bytes, int64(nParts)), P2PPartAlign)
	return min(int64(part)*pb, bytes), min(int64(part+1)*pb, bytes)
}

// P2PNumParts is the number of channels addP2pToPlan gives one direction
// of a transfer of bytes with steps of stepBytes: one for an empty
// transfer, else min(chMin, ceil(bytes/minPart)) doubled while parts
// exceed maxPart and the count stays <= chMax/2. minPart and maxPart are
// stepBytes/2 and stepBytes on several nodes, stepBytes/8 and 32 x
// stepBytes on one.
func P2PNumParts(bytes int64, stepBytes, chMin, chMax, nNodes int) int {
	if bytes <= 0 {
		return 1
	}
	minPart, maxPart := int64(stepBytes/8), int64(stepBytes)*32
	if nNodes > 1 {
		minPart, maxPart = int64(stepBytes/2), int64(stepBytes)
	}
	minPart = max(minPart, 1)
	nch := int(min(int64(chMin), progDivUp(bytes, minPart)))
	nch = max(nch, 1)
	part := max(minPart, progDivUp(bytes, int64(nch)))
	for part > maxPart && nch <= chMax/2 {
		nch *= 2
		part = progDivUp(bytes, int64(nch))
	}
	return nch
}

// P2PChannelRange is scheduleP2pTasksToPlan's channel bounds per transfer:
// chMax is p2pnChannelsPerPeer and chMin is halved from it while
// chMin x nRanks exceeds p2pnChannels.
func P2PChannelRange(nRanks, p2pChannels, perPeer int) (chMin, chMax int) {
	chMax, chMin = perPeer, perPeer
	for chMin*nRanks > p2pChannels && chMin > 1 {
		chMin /= 2
	}
	return chMin, chMax
}

// P2PProtocol is the protocol NCCL picks for one direction of a p2p
// transfer: LL when the connection has LL buffers (not over the network,
// by default) and bytes <= chMax x P2PLLThreshold, else Simple. Copies to
// self use Simple.
func P2PProtocol(bytes int64, chMax int, network, self bool) Protocol {
	if !self && !network && bytes <= int64(chMax)*P2PLLThreshold {
		return ProtoLL
	}
	return ProtoSimple
}

// P2PChunk is addP2pToPlan's chunk: the data bytes one primitive call of
// a p2p direction moves, and the step size of the connection. Simple steps
// are chunkBytes (p2pChunkSize); LL steps are an eighth of the LL buffer
// (ProtoStepBytes) and carry half their size in data. Over the network a
// Simple transfer shorter than a step uses a quarter chunk, and any
// transfer shorter than eight steps half a chunk.
func P2PChunk(p Protocol, bytes int64, chunkBytes int, network bool) (chunkData, stepBytes int) {
	stepBytes = chunkBytes
	if p == ProtoLL {
		stepBytes = ProtoStepBytes(ProtoLL)
	}
	chunk := stepBytes
	if network {
		if p == ProtoSimple && bytes < int64(stepBytes) {
			chunk /= 4
		} else if bytes < 8*int64(stepBytes) {
			chunk /= 2
		}
	}
	if p == ProtoLL {
		chunk /= 2
	}
	return chunk, stepBytes
}

// GenerateAlltoAllProgram builds the Program of an AlltoAll of count
// elements per peer: every rank sends elements [peer x count, +count) of
// its input to every peer (itself included), which stores them at
// [rank x count, +count) of its output; NCCL runs it as a group of sends
// and receives over the p2p schedule. p is Simple or LL for every
// transfer (see P2PProtocol for NCCL's per-transfer choice).
func GenerateAlltoAllProgram(plan *Plan, p Protocol, count int64, d Dtype, opts P2POptions) (*Program, error) {
	if plan == nil || plan.NRanks < 1 {
		return nil, fmt.Errorf("generate AlltoAll: plan has no ranks")
	}
	n := plan.NRanks
	if count < 0 || count > 1<<40 || count*int64(n) > 1<<40 {
		return nil, fmt.Errorf("generate AlltoAll: element count %d out of range", count)
	}
	tasks := make([]P2PTask, 0, 2*n*n)
	for r := 0; r < n; r++ {
		for peer := 0; peer < n; peer++ {
			tasks = append(tasks,
				P2PTask{Rank: r, Peer: peer, Send: true, Count: count, Offset: int64(peer) * count},
				P2PTask{Rank: r, Peer: peer, Send: false, Count: count, Offset: int64(peer) * count})
		}
	}
	prog, err := generateP2P(plan, CollAlltoAll, tasks, p, d, opts)
	if err != nil {
		return nil, err
	}
	prog.Count = count
	prog.InCount, prog.OutCount = count*int64(n), count*int64(n)
	return prog, nil
}

// GenerateP2PProgram builds the Program of a group of ncclSend/ncclRecv
// calls (Coll CollSendRecv). Between every pair of ranks, the k-th send
// of a rank to a peer must match the k-th receive of the peer from that
// rank in count. Every rank's input and output buffers hold as many
// elements as the largest Offset+Count of any rank's sends and receives;
// Count is the largest task's count. p is Simple or LL for every transfer
// between two ranks; copies to self are local copies.
func GenerateP2PProgram(plan *Plan, tasks []P2PTask, p Protocol, d Dtype, opts P2POptions) (*Program, error) {
	return generateP2P(plan, CollSendRecv, tasks, p, d, opts)
}

type p2pLaneKey struct {
	rank, channel, peer int
	send                bool
}

type p2pConnKey struct{ channel, from, to int }

type p2pBuilder struct {
	prog  *Program
	lanes map[p2pLaneKey]int
	conns map[p2pConnKey]int32
}

func (b *p2pBuilder) conn(ch, from, to int) int32 {
	k := p2pConnKey{ch, from, to}
	if i, ok := b.conns[k]; ok {
		return i
	}
	i := int32(len(b.prog.Conns))
	b.prog.Conns = append(b.prog.Conns, ProgConn{Channel: int32(ch), From: int32(from), To: int32(to)})
	b.conns[k] = i
	return i
}

func (b *p2pBuilder) lane(rank, ch, peer int, send bool) *ProgLane {
	k := p2pLaneKey{rank, ch, peer, send}
	if i, ok := b.lanes[k]; ok {
		return &b.prog.Lanes[i]
	}
	l := ProgLane{Rank: int32(rank), Channel: int32(ch)}
	switch {
	case peer == rank:
	case send:
		l.Send = []int32{b.conn(ch, rank, peer)}
	default:
		l.Recv = []int32{b.conn(ch, peer, rank)}
	}
	b.lanes[k] = len(b.prog.Lanes)
	b.prog.Lanes = append(b.prog.Lanes, l)
	return &b.prog.Lanes[len(b.prog.Lanes)-1]
}

// addOp appends a call numbered one step after the lane's previous call.
func addOp(l *ProgLane, k PrimKind, in, out, n int64) {
	op := ProgOp{Kind: k, Flags: PrimDirect, N: int32(n), InOff: in, OutOff: out}
	if k == PrimCopy {
		op.Flags = 0
	}
	if len(l.Ops) > 0 {
		last := l.Ops[len(l.Ops)-1]
		op.RecvStep, op.SendStep = last.RecvStep, last.SendStep
		if last.Kind.Receives() {
			op.RecvStep++
		}
		if last.Kind.Sends() {
			op.SendStep++
		}
	}
	l.Ops = append(l.Ops, op)
}

func generateP2P(plan *Plan, coll Collective, tasks []P2PTask, p Protocol, d Dtype, opts P2POptions) (*Program, error) {
	where := "generate " + coll.String()
	if plan == nil || plan.NRanks < 1 {
		return nil, fmt.Errorf("%s: plan has no ranks", where)
	}
	n := plan.NRanks
	if p != ProtoSimple && p != ProtoLL {
		return nil, fmt.Errorf("%s: protocol %s is not a p2p protocol (Simple or LL)", where, p)
	}
	es := int64(d.Size())
	if es == 0 {
		return nil, fmt.Errorf("%s: unknown datatype %d", where, int(d))
	}
	nP2P := opts.P2PChannels
	if nP2P == 0 {
		nP2P = plan.P2PChannels
	}
	perPeer := opts.ChannelsPerPeer
	if perPeer == 0 {
		perPeer = plan.P2PChannelsPerPeer
	}
	if nP2P < 1 || nP2P > 1<<10 || nP2P&(nP2P-1) != 0 {
		return nil, fmt.Errorf("%s: p2p channel count %d is not a power of two in [1, 1024]", where, nP2P)
	}
	if perPeer < 1 || perPeer > nP2P || perPeer&(perPeer-1) != 0 {
		return nil, fmt.Errorf("%s: %d channels per peer is not a power of two in [1, %d]", where, perPeer, nP2P)
	}
	topo, err := newP2PTopo(plan)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	chunkBytes := opts.ChunkBytes
	if chunkBytes == 0 {
		chunkBytes = P2PChunkSizeDefault
		if topo.nNodes == 1 {
			chunkBytes = P2PChunkSizeNVL
		}
	}
	if chunkBytes < 64 || chunkBytes%16 != 0 || chunkBytes > 1<<30 {
		return nil, fmt.Errorf("%s: p2p chunk size %d is not a multiple of 16 in [64, 1 GiB]", where, chunkBytes)
	}
	gsz := opts.GroupSize
	if gsz <= 0 {
		gsz = P2PScheduleGroupSize
	}
	sched, gs := opts.Schedule, topo.groupSize(gsz)
	if sched == nil {
		if sched, gs, err = topo.schedule(n, gsz); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	} else {
		if len(sched) != n {
			return nil, fmt.Errorf("%s: schedule has %d ranks, want %d", where, len(sched), n)
		}
		for r, rounds := range sched {
			for i, rd := range rounds {
				if rd.Send < 0 || rd.Send >= n || rd.Recv < 0 || rd.Recv >= n {
					return nil, fmt.Errorf("%s: schedule of rank %d round %d names rank outside %d", where, r, i, n)
				}
			}
		}
	}

	// Per-rank queues, in call order, and the check that pairs match.
	sendQ := make([][][]P2PTask, n) // [rank][peer]
	recvQ := make([][][]P2PTask, n)
	for r := range sendQ {
		sendQ[r] = make([][]P2PTask, n)
		recvQ[r] = make([][]P2PTask, n)
	}
	var inCount, outCount, maxCount int64
	for i, t := range tasks {
		if t.Rank < 0 || t.Rank >= n || t.Peer < 0 || t.Peer >= n {
			return nil, fmt.Errorf("%s: task %d: rank %d or peer %d outside %d ranks", where, i, t.Rank, t.Peer, n)
		}
		if t.Count < 0 || t.Offset < 0 || t.Count > 1<<40 || t.Offset > 1<<40 {
			return nil, fmt.Errorf("%s: task %d: count %d or offset %d out of range", where, i, t.Count, t.Offset)
		}
		maxCount = max(maxCount, t.Count)
		if t.Send {
			sendQ[t.Rank][t.Peer] = append(sendQ[t.Rank][t.Peer], t)
			inCount = max(inCount, t.Offset+t.Count)
		} else {
			recvQ[t.Rank][t.Peer] = append(recvQ[t.Rank][t.Peer], t)
			outCount = max(outCount, t.Offset+t.Count)
		}
	}
	for r := 0; r < n; r++ {
		for peer := 0; peer < n; peer++ {
			s, rv := sendQ[r][peer], recvQ[peer][r]
			if len(s) != len(rv) {
				return nil, fmt.Errorf("%s: rank %d sends %d times to rank %d, which receives %d times from it", where, r, len(s), peer, len(rv))
			}
			for k := range s {
				if s[k].Count != rv[k].Count {
					return nil, fmt.Errorf("%s: send %d from rank %d to rank %d has %d elements, the matching receive %d", where, k, r, peer, s[k].Count, rv[k].Count)
				}
			}
		}
	}

	credits := opts.Credits
	if credits == 0 {
		credits = ProgSlots
	}
	prog := &Program{Coll: coll, Algo: AlgoRing, Proto: p, Dtype: d, Op: RedSum, Count: maxCount, NRanks: n, NChannels: nP2P,
		InCount: inCount, OutCount: outCount, Credits: credits, SlicesPerChunk: 1, StepsPerSlice: 1}
	_, prog.StepBytes = P2PChunk(p, 0, chunkBytes, false)
	b := &p2pBuilder{prog: prog, lanes: map[p2pLaneKey]int{}, conns: map[p2pConnKey]int32{}}
	chMin, chMax := P2PChannelRange(n, nP2P, perPeer)

	for r := 0; r < n; r++ {
		if len(sched[r]) == 0 && len(tasks) > 0 {
			return nil, fmt.Errorf("%s: rank %d has an empty schedule", where, r)
		}
		left := 0
		for peer := 0; peer < n; peer++ {
			left += len(sendQ[r][peer]) + len(recvQ[r][peer])
		}
		for left > 0 {
			progressed := false
			for round, rd := range sched[r] {
				var send, recv *P2PTask
				if q := sendQ[r][rd.Send]; len(q) > 0 {
					send = &q[0]
				}
				if q := recvQ[r][rd.Recv]; len(q) > 0 {
					recv = &q[0]
				}
				if send == nil && recv == nil {
					continue
				}
				if rd.Send == r && (send == nil) != (recv == nil) {
					return nil, fmt.Errorf("%s: rank %d copies to itself without a matching send and receive", where, r)
				}
				base := P2PChannelBase(round, topo.nNodes, gs, nP2P)
				if rd.Send == r {
					b.selfCopy(r, base, send, recv, es, chunkBytes, chMin, chMax, topo.nNodes, nP2P)
				} else {
					if send != nil {
						b.direction(r, rd.Send, true, send, base, es, chunkBytes, chMin, chMax, topo, nP2P)
					}
					if recv != nil {
						b.direction(r, rd.Recv, false, recv, base, es, chunkBytes, chMin, chMax, topo, nP2P)
					}
				}
				if send != nil {
					sendQ[r][rd.Send] = sendQ[r][rd.Send][1:]
					left--
				}
				if recv != nil {
					recvQ[r][rd.Recv] = recvQ[r][rd.Recv][1:]
					left--
				}
				progressed = true
			}
			if !progressed {
				return nil, fmt.Errorf("%s: rank %d has %d tasks for peers its schedule never visits", where, r, left)
			}
		}
	}
	// Lanes by rank, then channel, keeping creation order otherwise.
	sort.SliceStable(prog.Lanes, func(i, j int) bool {
		a, c := &prog.Lanes[i], &prog.Lanes[j]
		if a.Rank != c.Rank {
			return a.Rank < c.Rank
		}
		return a.Channel < c.Channel
	})
	if err := prog.Validate(); err != nil {
		return nil, fmt.Errorf("%s: the p2p schedule does not pair sends with receives: %w", where, err)
	}
	return prog, nil
}

// direction adds one direction of one round's transfer on rank r.
func (b *p2pBuilder) direction(r, peer int, send bool, t *P2PTask, base int, es int64, chunkBytes, chMin, chMax int, topo *p2pTopo, nP2P int) {
	p := b.prog.Proto
	bytes := t.Count * es
	network := topo.node[r] != topo.node[peer]
	chunk, step := P2PChunk(p, bytes, chunkBytes, network)
	chunkElems := max(int64(chunk)/es, 1)
	nParts := P2PNumParts(bytes, step, chMin, chMax, topo.nNodes)
	kind := PrimRecv
	if send {
		kind = PrimSend
	}
	for part := 0; part < nParts; part++ {
		beg, end := P2PPartBounds(nParts, part, bytes)
		l := b.lane(r, P2PChannelForPart(nP2P, base, part), peer, send)
		off, cnt := t.Offset+beg/es, (end-beg)/es
		// NCCL's loop runs at least once, so an empty part still moves
		// one empty step.
		for cur := int64(0); ; {
			m := min(chunkElems, cnt-cur)
			if send {
				addOp(l, kind, off+cur, 0, m)
			} else {
				addOp(l, kind, 0, off+cur, m)
			}
			cur += m
			if cur >= cnt {
				break
			}
		}
	}
}

// selfCopy adds a send to self as local copies, one per part.
func (b *p2pBuilder) selfCopy(r, base int, send, recv *P2PTask, es int64, chunkBytes, chMin, chMax, nNodes, nP2P int) {
	bytes := send.Count * es
	nParts := P2PNumParts(bytes, chunkBytes, chMin, chMax, nNodes)
	const maxN = 1 << 30
	for part := 0; part < nParts; part++ {
		beg, end := P2PPartBounds(nParts, part, bytes)
		if end == beg {
			continue
		}
		l := b.lane(r, P2PChannelForPart(nP2P, base, part), r, true)
		for cur := beg / es; cur < end/es; cur += maxN {
			m := min(maxN, end/es-cur)
			addOp(l, PrimCopy, send.Offset+cur, recv.Offset+cur, m)
		}
	}
}
