package model

import (
	"errors"
	"fmt"
)

// PrimKind is a primitive operation of NCCL's device code (primitives.h):
// what a lane does with its receive peers, its own input and output
// buffers, and its send peers for one chunk.
type PrimKind uint8

// Primitives. "Recv" means: wait for and consume the step(s) of every receive
// peer; "Send": write the step(s) of every send peer; "Reduce": combine the
// received values with the own input; "Copy": store into the own output.
const (
	PrimNop                PrimKind = iota // consumes nothing
	PrimSend                               // input (or output, PrimFromOutput) -> send peers
	PrimRecv                               // recv peer -> output
	PrimRecvReduceSend                     // recv peers (+) input -> send peers
	PrimRecvReduceCopy                     // recv peers (+) input -> output
	PrimRecvReduceCopySend                 // recv peers (+) input -> output and send peers
	PrimRecvCopySend                       // recv peer -> output and send peers
	PrimCopySend                           // input -> output and send peers
	PrimCopy                               // input -> output, no peers (one rank, send to self)
	// PrimRecvSend forwards what the receive peer sent to the send peers
	// without storing it (NCCL's directRecvDirectSend on a lane whose
	// output another lane writes: an NVLS tree's broadcast from the
	// network into the node).
	PrimRecvSend
	// PrimMultimemReduceSend is NVLS's reduction by the NVSwitch: one
	// multimem.ld_reduce makes the switch load the slot of every receive
	// peer (the unicast buffers of a multicast group, and an NVLS tree's
	// children) and return their reduction, without the own input; the
	// result goes to every send peer (a multimem.st the switch copies to
	// every member of the multicast group, or a tree parent).
	PrimMultimemReduceSend
	// PrimMultimemReduceCopy is the same switch reduction of every receive
	// peer stored into the own output (NVLS ReduceScatter).
	PrimMultimemReduceCopy
	NumPrimKinds
)

var primNames = [NumPrimKinds]string{"nop", "send", "recv", "recvReduceSend", "recvReduceCopy",
	"recvReduceCopySend", "recvCopySend", "copySend", "copy", "recvSend", "multimemReduceSend", "multimemReduceCopy"}

func (k PrimKind) String() string {
	if k < NumPrimKinds {
		return primNames[k]
	}
	return fmt.Sprintf("PrimKind(%d)", int(k))
}

// ParsePrimKind reads a primitive name as String writes it (case-insensitive).
func ParsePrimKind(s string) (PrimKind, error) {
	if i := lookupName(primNames[:], s); i >= 0 {
		return PrimKind(i), nil
	}
	return 0, fmt.Errorf("unknown primitive %q", s)
}

// Receives reports whether the primitive consumes steps from receive peers.
func (k PrimKind) Receives() bool {
	switch k {
	case PrimRecv, PrimRecvReduceSend, PrimRecvReduceCopy, PrimRecvReduceCopySend, PrimRecvCopySend,
		PrimRecvSend, PrimMultimemReduceSend, PrimMultimemReduceCopy:
		return true
	}
	return false
}

// Multimem reports whether the primitive reduces its receive peers in the
// NVSwitch (multimem.ld_reduce) rather than on the GPU.
func (k PrimKind) Multimem() bool { return k == PrimMultimemReduceSend || k == PrimMultimemReduceCopy }

// Sends reports whether the primitive produces steps for send peers.
func (k PrimKind) Sends() bool {
	switch k {
	case PrimSend, PrimRecvReduceSend, PrimRecvReduceCopySend, PrimRecvCopySend, PrimCopySend,
		PrimRecvSend, PrimMultimemReduceSend:
		return true
	}
	return false
}

// ReadsInput reports whether the primitive reads the own input buffer.
func (k PrimKind) ReadsInput() bool {
	switch k {
	case PrimSend, PrimRecvReduceSend, PrimRecvReduceCopy, PrimRecvReduceCopySend, PrimCopySend, PrimCopy:
		return true
	}
	return false
}

// WritesOutput reports whether the primitive stores into the own output.
func (k PrimKind) WritesOutput() bool {
	switch k {
	case PrimRecv, PrimRecvReduceCopy, PrimRecvReduceCopySend, PrimRecvCopySend, PrimCopySend, PrimCopy,
		PrimMultimemReduceCopy:
		return true
	}
	return false
}

// Primitive flags.
const (
	// PrimPostOp applies the reduction's post operation (avg: divide by the
	// rank count) to the values the primitive stores and sends.
	PrimPostOp uint8 = 1 << iota
	// PrimDirect marks NCCL's direct* variant (peer buffers read or written
	// in place with Simple). Programs move the same bytes either way.
	PrimDirect
	// PrimFromOutput makes a send read the own output instead of the input
	// (directSendFromOutput; in-place AllGather).
	PrimFromOutput
	primFlagMask = PrimPostOp | PrimDirect | PrimFromOutput
)

// ProgOp is one primitive call: N elements at element offset InOff of the
// input buffer (when it reads the input) and OutOff of the output buffer
// (when it writes the output). RecvStep and SendStep are the step counters
// of the lane's receive and send connections when the call starts (NCCL
// keeps one per direction); a call that receives or sends consumes
// SlicesPerChunk x StepsPerSlice steps in that direction on Simple and one
// step on LL and LL128.
type ProgOp struct {
	Kind     PrimKind
	Flags    uint8
	N        int32
	RecvStep uint32
	SendStep uint32
	InOff    int64
	OutOff   int64
}

// ConnKind says how a connection's data moves between its two ranks.
type ConnKind uint8

// Connection kinds.
const (
	// ConnP2P is a point-to-point connection: NCCL's transport choice
	// (P2P, SHM or NET) for the pair carries it.
	ConnP2P ConnKind = iota
	// ConnNVLSReduce is one member's unicast buffer of an NVLS multicast
	// group (NCCL's nvls "Reduce UC -> MC" connection): From stores its
	// data locally, To's multimem.ld_reduce pulls it through the NVSwitch
	// together with every other member's (PrimMultimemReduce*).
	ConnNVLSReduce
	// ConnNVLSBcast is one member's unicast buffer of an NVLS multicast
	// group written by From's multimem.st ("Broadcast MC -> UC"): the
	// NVSwitch copies From's one store to every member, To among them.
	ConnNVLSBcast
	NumConnKinds
)

var connKindNames = [NumConnKinds]string{"p2p", "nvlsReduce", "nvlsBcast"}

func (k ConnKind) String() string {
	if k < NumConnKinds {
		return connKindNames[k]
	}
	return fmt.Sprintf("ConnKind(%d)", int(k))
}

// NVLS reports whether the connection is a buffer of an NVLS multicast
// group (the NVSwitch moves its data).
func (k ConnKind) NVLS() bool { return k == ConnNVLSReduce || k == ConnNVLSBcast }

// ProgConn is a one-way connection on a channel, with its own slot ring.
type ProgConn struct {
	Channel  int32
	From, To int32
	Kind     ConnKind
}

// ProgLane is a group of threads of one rank on one channel running one
// sequence of primitives with fixed peers (one Primitives object in NCCL:
// a ring, the reduce half or the broadcast half of a tree, one p2p
// direction). Every op advances all its connections together.
type ProgLane struct {
	Rank, Channel int32
	Recv          []int32 // connection indices received from
	Send          []int32 // connection indices sent to
	Ops           []ProgOp
}

// Program is the full description of one collective (or p2p group) over
// all ranks and channels: connections, lanes and their primitive calls.
// Both exec/sim and exec/hw interpret it; model/refexec is its reference.
type Program struct {
	Coll      Collective
	Algo      Algorithm
	Proto     Protocol
	Dtype     Dtype
	Op        RedOp
	Root      int
	Count     int64 // elements: per rank for AllGather/ReduceScatter, else the whole buffer
	NRanks    int
	NChannels int
	// InCount and OutCount are the element counts of every rank's input and
	// output buffers.
	InCount, OutCount int64
	// StepBytes is the slot size (wire bytes of one step).
	StepBytes int
	// Credits is the number of steps a sender may run ahead of its
	// receiver (NCCL_STEPS). The slot ring always has ProgSlots slots.
	Credits int
	// SlicesPerChunk and StepsPerSlice cut a Simple primitive call.
	SlicesPerChunk, StepsPerSlice int
	// Threads is the thread count of each channel's block NCCL launches the
	// call with (the tuner's nWarps*32: fewer on small calls), 0 where
	// it is not known. The simulator uses it where a protocol's cost
	// depends on it (an LL receiver's rounds of loads from host memory);
	// our executor's kernel has a block size of its own.
	Threads int
	Conns   []ProgConn
	Lanes   []ProgLane
}

// MaxProgThreads is the largest Program.Threads: CUDA's block size limit.
const MaxProgThreads = 1024

// ProgSlice is one wait/post round of a primitive: Steps steps starting at
// RecvStep on the receive side and SendStep on the send side, carrying
// Elems elements from element Offset of the call.
type ProgSlice struct {
	RecvStep, SendStep uint32
	Steps              int
	Offset             int64
	Elems              int64
}

// Slices cuts a primitive call into its slices as prims_simple.h does
// (Simple: SlicesPerChunk slices, the last ones possibly empty) or one slice
// of one step (LL, LL128). The slices are appended to buf.
func (p *Program) Slices(op ProgOp, buf []ProgSlice) []ProgSlice {
	n := int64(op.N)
	if n < 0 {
		n = 0
	}
	if p.Proto != ProtoSimple {
		return append(buf, ProgSlice{RecvStep: op.RecvStep, SendStep: op.SendStep, Steps: 1, Offset: 0, Elems: n})
	}
	spc, sps := int64(p.SlicesPerChunk), int64(p.StepsPerSlice)
	stepElems := int64(p.StepBytes / max(1, p.Dtype.Size()))
	slice := max(progDivUp(n, 16*spc)*16, stepElems*sps/32)
	off := int64(0)
	rs, ss := op.RecvStep, op.SendStep
	for s := int64(0); s < spc; s++ {
		e := min(slice, n-off)
		e = max(e, 0)
		buf = append(buf, ProgSlice{RecvStep: rs, SendStep: ss, Steps: int(sps), Offset: off, Elems: e})
		off += e
		rs += uint32(sps)
		ss += uint32(sps)
	}
	return buf
}

// OpSteps is the number of steps one primitive call consumes.
func (p *Program) OpSteps() int {
	if p.Proto != ProtoSimple {
		return 1
	}
	return p.SlicesPerChunk * p.StepsPerSlice
}

// NumOps is the number of primitive calls over all lanes.
func (p *Program) NumOps() int {
	n := 0
	for i := range p.Lanes {
		n += len(p.Lanes[i].Ops)
	}
	return n
}

// Validate checks the structure of a Program: header values, connection
// and lane references, op kinds, flags, counts, buffer bounds, per-op data
// limits. Step numbering and flow control are checked when the Program runs
// (model/refexec).
func (p *Program) Validate() error {
	if p.NRanks < 1 || p.NRanks > 1<<20 {
		return fmt.Errorf("program: rank count %d out of range", p.NRanks)
	}
	if p.NChannels < 0 || p.NChannels > 1<<12 {
		return fmt.Errorf("program: channel count %d out of range", p.NChannels)
	}
	if p.Proto < 0 || p.Proto >= NumProtocols {
		return fmt.Errorf("program: unknown protocol %d", int(p.Proto))
	}
	if p.Dtype.Size() == 0 {
		return fmt.Errorf("program: unknown datatype %d", int(p.Dtype))
	}
	if p.Op < 0 || p.Op >= NumRedOps {
		return fmt.Errorf("program: unknown reduction %d", int(p.Op))
	}
	if p.InCount < 0 || p.OutCount < 0 || p.Count < 0 {
		return fmt.Errorf("program: negative element count")
	}
	if p.StepBytes <= 0 || p.StepBytes > 1<<30 {
		return fmt.Errorf("program: step size %d out of range", p.StepBytes)
	}
	if p.Credits < 1 || p.Credits > 1<<16 {
		return fmt.Errorf("program: credit count %d out of range", p.Credits)
	}
	if p.Threads < 0 || p.Threads > MaxProgThreads {
		return fmt.Errorf("program: %d threads per block outside [0, %d]", p.Threads, MaxProgThreads)
	}
	if p.Proto == ProtoSimple && (p.SlicesPerChunk < 1 || p.StepsPerSlice < 1 || p.SlicesPerChunk*p.StepsPerSlice > ProgSlots) {
		return fmt.Errorf("program: %d slices per chunk x %d steps per slice invalid", p.SlicesPerChunk, p.StepsPerSlice)
	}
	for i, c := range p.Conns {
		if c.Channel < 0 || int(c.Channel) >= p.NChannels || c.From < 0 || int(c.From) >= p.NRanks || c.To < 0 || int(c.To) >= p.NRanks {
			return fmt.Errorf("program: connection %d (channel %d, %d->%d) out of range", i, c.Channel, c.From, c.To)
		}
		if c.Kind >= NumConnKinds {
			return fmt.Errorf("program: connection %d (channel %d, %d->%d) has unknown kind %d", i, c.Channel, c.From, c.To, c.Kind)
		}
	}
	senders := make([]int32, len(p.Conns))
	receivers := make([]int32, len(p.Conns))
	for i := range senders {
		senders[i], receivers[i] = -1, -1
	}
	elem := int64(p.Dtype.Size())
	maxData := int64(ProtoStepData(p.Proto))
	if p.Proto == ProtoSimple {
		maxData = int64(p.StepBytes) * int64(p.StepsPerSlice)
	} else if p.Proto == ProtoLL {
		maxData = int64(p.StepBytes / LLLineBytes * LLLineData)
	} else {
		maxData = int64(p.StepBytes / LL128LineBytes * LL128LineData)
	}
	var slices []ProgSlice
	for li := range p.Lanes {
		l := &p.Lanes[li]
		where := fmt.Sprintf("program: lane %d (rank %d, channel %d)", li, l.Rank, l.Channel)
		if l.Rank < 0 || int(l.Rank) >= p.NRanks || l.Channel < 0 || int(l.Channel) >= p.NChannels {
			return fmt.Errorf("%s: rank or channel out of range", where)
		}
		for _, c := range l.Recv {
			if c < 0 || int(c) >= len(p.Conns) {
				return fmt.Errorf("%s: receive connection %d out of range", where, c)
			}
			cn := p.Conns[c]
			if cn.To != l.Rank || cn.Channel != l.Channel {
				return fmt.Errorf("%s: receives on connection %d (channel %d, %d->%d) that is not its own", where, c, cn.Channel, cn.From, cn.To)
			}
			if receivers[c] >= 0 {
				return fmt.Errorf("%s: connection %d already received by lane %d", where, c, receivers[c])
			}
			receivers[c] = int32(li)
		}
		for _, c := range l.Send {
			if c < 0 || int(c) >= len(p.Conns) {
				return fmt.Errorf("%s: send connection %d out of range", where, c)
			}
			cn := p.Conns[c]
			if cn.From != l.Rank || cn.Channel != l.Channel {
				return fmt.Errorf("%s: sends on connection %d (channel %d, %d->%d) that is not its own", where, c, cn.Channel, cn.From, cn.To)
			}
			if senders[c] >= 0 {
				return fmt.Errorf("%s: connection %d already sent on by lane %d", where, c, senders[c])
			}
			senders[c] = int32(li)
		}
		for oi, op := range l.Ops {
			if op.Kind >= NumPrimKinds {
				return fmt.Errorf("%s op %d: unknown primitive %d", where, oi, op.Kind)
			}
			if op.Flags&^primFlagMask != 0 {
				return fmt.Errorf("%s op %d: unknown flags %#x", where, oi, op.Flags)
			}
			if op.N < 0 {
				return fmt.Errorf("%s op %d: negative element count %d", where, oi, op.N)
			}
			if op.Kind.Receives() && len(l.Recv) == 0 {
				return fmt.Errorf("%s op %d: %s on a lane without receive peers", where, oi, op.Kind)
			}
			if op.Kind.Sends() && len(l.Send) == 0 {
				return fmt.Errorf("%s op %d: %s on a lane without send peers", where, oi, op.Kind)
			}
			n := int64(op.N)
			readsIn := op.Kind.ReadsInput() && (op.Flags&PrimFromOutput == 0 || op.Kind != PrimSend)
			if readsIn && n > 0 && (op.InOff < 0 || op.InOff+n > p.InCount) {
				return fmt.Errorf("%s op %d: input [%d,+%d) outside %d elements", where, oi, op.InOff, n, p.InCount)
			}
			readsOut := op.Kind == PrimSend && op.Flags&PrimFromOutput != 0
			if (op.Kind.WritesOutput() || readsOut) && n > 0 && (op.OutOff < 0 || op.OutOff+n > p.OutCount) {
				return fmt.Errorf("%s op %d: output [%d,+%d) outside %d elements", where, oi, op.OutOff, n, p.OutCount)
			}
			if op.Kind.Receives() || op.Kind.Sends() {
				slices = p.Slices(op, slices[:0])
				for _, s := range slices {
					if s.Elems*elem > maxData {
						return fmt.Errorf("%s op %d: slice of %d bytes exceeds %d bytes of %d step(s)", where, oi, s.Elems*elem, maxData, s.Steps)
					}
				}
			}
		}
	}
	for i := range p.Conns {
		if (senders[i] < 0) != (receivers[i] < 0) {
			return fmt.Errorf("program: connection %d (channel %d, %d->%d) has a sender lane %d but receiver lane %d", i, p.Conns[i].Channel, p.Conns[i].From, p.Conns[i].To, senders[i], receivers[i])
		}
		if senders[i] < 0 {
			continue
		}
		// Both ends carry the connection's step counter into the next
		// Program; they must agree on where this one leaves it.
		if s, r := p.LaneSteps(int(senders[i]), true), p.LaneSteps(int(receivers[i]), false); s != r {
			return fmt.Errorf("program: connection %d (channel %d, %d->%d): its sender lane %d ends at step %d, its receiver lane %d at step %d",
				i, p.Conns[i].Channel, p.Conns[i].From, p.Conns[i].To, senders[i], s, receivers[i], r)
		}
	}
	return nil
}

// ErrNeedsMulticast marks a Program that an executor without NVLS
// multicast objects cannot run (twinccl's GPU interpreter: our GPU
// machines must not create them).
var ErrNeedsMulticast = errors.New("needs NVLS multicast objects")

// PointToPoint reports, as an error wrapping ErrNeedsMulticast that names
// the first one, whether p uses an NVLS connection or a switch reduction:
// nil when every connection is point to point.
func (p *Program) PointToPoint() error {
	for i, c := range p.Conns {
		if c.Kind.NVLS() {
			return fmt.Errorf("program: connection %d (channel %d, %d->%d) is an NVLS %s buffer: %w", i, c.Channel, c.From, c.To, c.Kind, ErrNeedsMulticast)
		}
	}
	for li := range p.Lanes {
		for oi, op := range p.Lanes[li].Ops {
			if op.Kind.Multimem() {
				return fmt.Errorf("program: lane %d op %d is a %s: %w", li, oi, op.Kind, ErrNeedsMulticast)
			}
		}
	}
	return nil
}

// LaneSteps is how far lane li's calls advance its send (send true) or
// receive connections: the end of its last call in that direction. Every
// connection of a lane direction moves together.
func (p *Program) LaneSteps(li int, send bool) int64 {
	recv, snd := OpsSteps(p.Lanes[li].Ops, p.OpSteps())
	if send {
		return snd
	}
	return recv
}

// OpsSteps is how far a lane's calls ops, each consuming opSteps steps in
// a direction it uses (Program.OpSteps), advance its receive and its send
// connections: the end of the last call in each direction.
func OpsSteps(ops []ProgOp, opSteps int) (recv, send int64) {
	per := int64(opSteps)
	for i := range ops {
		op := &ops[i]
		if op.Kind.Receives() {
			recv = max(recv, int64(op.RecvStep)+per)
		}
		if op.Kind.Sends() {
			send = max(send, int64(op.SendStep)+per)
		}
	}
	return recv, send
}

// StepRound is the granularity a connection's step counter is rounded up
// to between Programs, as NCCL's primitives round theirs at the start of
// an operation: a Simple chunk (SlicesPerChunk x StepsPerSlice steps, so
// a slice never wraps the slot ring), one step on LL and LL128. Successive
// Programs on a connection then use successive slots, and a sender may
// run up to Credits steps ahead into its next call.
func (p *Program) StepRound() int64 {
	g := int64(p.OpSteps())
	if g < 1 || ProgSlots%g != 0 {
		return ProgSlots
	}
	return g
}

// LineThreads is the block size twinccl's kernel launches an LL or LL128
// Program with (exec/hw/gpudev): LineThreadsFor the largest primitive
// call of lanes, the lanes of the launch (one rank's).
func (p *Program) LineThreads(lanes []int, maxThreads int) int {
	maxN := int64(0)
	for _, li := range lanes {
		for _, op := range p.Lanes[li].Ops {
			maxN = max(maxN, int64(op.N))
		}
	}
	return LineThreadsFor(p.Proto, maxN*int64(p.Dtype.Size()), maxThreads)
}

// LineThreadsFor is the block size twinccl's kernel gives an LL or LL128
// launch whose largest primitive call moves bytes: one thread per LL line,
// a warp per four LL128 lines, rounded up to a warp, at least 64 and at
// most maxThreads. Simple, and a maxThreads below 64, give maxThreads.
func LineThreadsFor(p Protocol, bytes int64, maxThreads int) int {
	if p == ProtoSimple || maxThreads < 64 {
		return maxThreads
	}
	var t int64
	if p == ProtoLL {
		t = (bytes + LLLineData - 1) / LLLineData
	} else {
		lines := (bytes + LL128LineData - 1) / LL128LineData
		t = (lines + 3) / 4 * 32
	}
	t = (t + 31) / 32 * 32
	return int(min(max(t, 64), int64(maxThreads)))
}

// TreeSplitThreads is how NCCL's tree AllReduce (runTreeSplit) divides a
// block of threads between a non-root rank's two groups: up, the first
// threads, reduce towards the root, and the rest (down) broadcast its
// result back. Simple gives the reduce group half the block, plus two
// warps when that half is 256 threads or more (384 and 256 of a 640-thread
// block); LL and LL128 give it 70% of the warps.
func TreeSplitThreads(p Protocol, threads int) (up, down int) {
	if p == ProtoSimple {
		up = threads / 2
		if up >= 256 {
			up += 64
		}
	} else {
		up = threads * 7 / (10 * 32) * 32
	}
	up = min(up, threads)
	return up, threads - up
}
