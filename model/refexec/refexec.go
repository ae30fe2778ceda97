// Package refexec is the reference interpreter of model.Program: it runs
// every rank's lanes over real byte buffers on the CPU, with NCCL's
// connection semantics (ProgSlots slots per connection, sender head
// credits, Simple tail counters and size records, LL flag lines of 8 data
// bytes and LL128 lines of 120 data bytes with a 64-bit flag), and reports
// protocol violations with the rank, channel, lane, op and step where they
// happen. NVLS connections (model.ConnNVLSReduce, ConnNVLSBcast) are slot
// rings like any other: a multimem reduction (model.PrimMultimemReduce*)
// reads the slot of every receive peer and reduces them, as the NVSwitch
// does over every member's unicast buffer, and a store to several send
// peers is the switch's multicast. It is the correctness oracle for
// Program generators and the executor the conformance suite is proven
// against.
package refexec

import (
	"fmt"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// ViolationKind classifies a protocol violation.
type ViolationKind string

// Violation kinds.
const (
	// VStepOrder: an op claims a step other than its connection's counter.
	VStepOrder ViolationKind = "step-order"
	// VOverrun: a sender overwrote a slot its receiver had not released.
	VOverrun ViolationKind = "credit-overrun"
	// VStaleSlot: a receiver was let through to a slot written for another step.
	VStaleSlot ViolationKind = "stale-slot"
	// VSizeMismatch: a receiver expected another byte count than was sent.
	VSizeMismatch ViolationKind = "size-mismatch"
	// VDeadlock: no lane can progress and some have not finished.
	VDeadlock ViolationKind = "deadlock"
	// VLeftover: a run ended with data sent but never received.
	VLeftover ViolationKind = "leftover"
	// VInvalid: the Program or the buffers are malformed.
	VInvalid ViolationKind = "invalid"
)

// Violation is a protocol error found while running a Program.
type Violation struct {
	Kind    ViolationKind
	Rank    int
	Channel int
	Lane    int // index into Program.Lanes, -1 when not tied to a lane
	Op      int // op index in the lane, -1 when not tied to an op
	Step    uint64
	Conn    int // connection index, -1 when not tied to one
	Msg     string
}

func (v *Violation) Error() string {
	return fmt.Sprintf("refexec: %s at rank %d channel %d lane %d op %d step %d: %s", v.Kind, v.Rank, v.Channel, v.Lane, v.Op, v.Step, v.Msg)
}

// Options tune a run.
type Options struct {
	// RecordSlices keeps, for every connection, the byte count of every
	// slice sent on it (in order), for step-accounting tests.
	RecordSlices bool
	// Outputs, when it holds one buffer of p.OutCount elements per rank,
	// are used as the output buffers instead of fresh zeroed ones (callers
	// that run many Programs avoid the allocation). Elements the Program
	// does not write keep their contents.
	Outputs [][]byte
}

// ConnStats counts the traffic of one connection.
type ConnStats struct {
	Steps      uint64  // steps the sender posted
	Slices     int     // slices (wait/post rounds) sent
	Bytes      int64   // user data bytes sent
	WireBytes  int64   // bytes written to slots, LL/LL128 line overhead included
	SliceBytes []int64 // per slice data bytes, with Options.RecordSlices
}

// Result is what a run produced.
type Result struct {
	Outputs [][]byte    // per rank output buffer
	Conns   []ConnStats // per connection
	Slices  int64       // slices executed over all lanes
}

type slot struct {
	step    uint64 // step the data was written for
	written bool
	steps   int   // steps the write spans (Simple slices span StepsPerSlice slots)
	size    int64 // data bytes written (connFifo size)
	data    []byte
}

type conn struct {
	sendStep, recvStep uint64 // next step of the sending / receiving lane
	head               uint64 // released by the receiver
	tail               uint64 // posted by the sender (Simple)
	slots              [model.ProgSlots]slot
}

type laneState struct {
	op     int
	slices []model.ProgSlice
	slice  int
	done   bool
}

type runner struct {
	p       *model.Program
	in, out [][]byte
	conns   []conn
	stats   []ConnStats
	opt     Options
	esize   int64
	acc     []byte   // staging of LL/LL128 sends that store nowhere else
	unpack  [][]byte // per receive peer: unpacked LL/LL128 data
	srcs    [][]byte
	dsts    [][]byte
	slices  int64
}

// Run executes p over inputs (one buffer of p.InCount elements per rank)
// and returns the output buffers. It returns a *Violation on any protocol
// error, or a plain error when the Program or the inputs are malformed.
func Run(p *model.Program, inputs [][]byte, opt Options) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("refexec: %w", err)
	}
	es := int64(p.Dtype.Size())
	if len(inputs) != p.NRanks {
		return nil, fmt.Errorf("refexec: %d input buffers for %d ranks", len(inputs), p.NRanks)
	}
	for r, b := range inputs {
		if int64(len(b)) != p.InCount*es {
			return nil, fmt.Errorf("refexec: rank %d input has %d bytes, want %d", r, len(b), p.InCount*es)
		}
	}
	x := &runner{p: p, in: inputs, opt: opt, esize: es}
	x.out = opt.Outputs
	reuse := len(x.out) == p.NRanks
	for r := 0; reuse && r < p.NRanks; r++ {
		reuse = int64(len(x.out[r])) == p.OutCount*es
	}
	if !reuse {
		x.out = make([][]byte, p.NRanks)
		for r := range x.out {
			x.out[r] = make([]byte, p.OutCount*es)
		}
	}
	x.conns = make([]conn, len(p.Conns))
	x.stats = make([]ConnStats, len(p.Conns))
	lanes := make([]laneState, len(p.Lanes))
	for i := range lanes {
		lanes[i].done = len(p.Lanes[i].Ops) == 0
		if !lanes[i].done {
			lanes[i].slices = p.Slices(p.Lanes[i].Ops[0], nil)
		}
	}
	for {
		progressed, remaining := false, 0
		for li := range lanes {
			ls := &lanes[li]
			for !ls.done {
				ok, err := x.step(li, ls)
				if err != nil {
					return nil, err
				}
				if !ok {
					break
				}
				progressed = true
			}
			if !ls.done {
				remaining++
			}
		}
		if remaining == 0 {
			break
		}
		if !progressed {
			return nil, x.deadlock(lanes)
		}
	}
	for ci := range x.conns {
		c := &x.conns[ci]
		if c.sendStep != c.recvStep {
			cn := p.Conns[ci]
			return nil, &Violation{Kind: VLeftover, Rank: int(cn.To), Channel: int(cn.Channel), Lane: -1, Op: -1, Step: c.recvStep, Conn: ci,
				Msg: fmt.Sprintf("connection %d (%d->%d) sent %d steps but %d were received", ci, cn.From, cn.To, c.sendStep, c.recvStep)}
		}
	}
	return &Result{Outputs: x.out, Conns: x.stats, Slices: x.slices}, nil
}

// why explains what a blocked lane waits for.
func (x *runner) why(li int, ls *laneState) string {
	l := &x.p.Lanes[li]
	op := l.Ops[ls.op]
	s := ls.slices[ls.slice]
	var b strings.Builder
	fmt.Fprintf(&b, "rank %d channel %d lane %d op %d %s recv step %d send step %d:", l.Rank, l.Channel, li, ls.op, op.Kind, s.RecvStep, s.SendStep)
	if op.Kind.Receives() {
		for _, ci := range l.Recv {
			if !x.recvReady(ci, uint64(s.RecvStep), s) {
				c := &x.conns[ci]
				fmt.Fprintf(&b, " waits for data from rank %d on connection %d (receiver at step %d, sender at step %d)", x.p.Conns[ci].From, ci, c.recvStep, c.sendStep)
			}
		}
	}
	if op.Kind.Sends() {
		for _, ci := range l.Send {
			c := &x.conns[ci]
			if c.head+uint64(x.p.Credits) < uint64(s.SendStep)+uint64(s.Steps) {
				fmt.Fprintf(&b, " waits for credit from rank %d on connection %d (head %d)", x.p.Conns[ci].To, ci, c.head)
			}
		}
	}
	return b.String()
}

func (x *runner) deadlock(lanes []laneState) error {
	var blocked []string
	first := -1
	for li := range lanes {
		if lanes[li].done {
			continue
		}
		if first < 0 {
			first = li
		}
		if len(blocked) < 8 {
			blocked = append(blocked, x.why(li, &lanes[li]))
		}
	}
	l := &x.p.Lanes[first]
	ls := &lanes[first]
	return &Violation{Kind: VDeadlock, Rank: int(l.Rank), Channel: int(l.Channel), Lane: first, Op: ls.op,
		Step: uint64(ls.slices[ls.slice].RecvStep), Conn: -1, Msg: "no lane can progress: " + strings.Join(blocked, "; ")}
}

func (x *runner) violation(k ViolationKind, li, op int, step uint64, ci int, format string, args ...any) error {
	l := &x.p.Lanes[li]
	return &Violation{Kind: k, Rank: int(l.Rank), Channel: int(l.Channel), Lane: li, Op: op, Step: step, Conn: ci, Msg: fmt.Sprintf(format, args...)}
}

// recvReady reports whether step's data has arrived on connection ci: the
// tail for Simple, every expected line's flag for LL and LL128.
func (x *runner) recvReady(ci int32, step uint64, s model.ProgSlice) bool {
	c := &x.conns[ci]
	if c.recvStep != step {
		return true // reported as a step-order violation by the caller
	}
	switch x.p.Proto {
	case model.ProtoSimple:
		return c.tail >= step+uint64(s.Steps)
	case model.ProtoLL:
		sl := &c.slots[step%model.ProgSlots]
		lines := (s.Elems*x.esize + model.LLLineData - 1) / model.LLLineData
		if int64(len(sl.data)) < lines*model.LLLineBytes {
			return false
		}
		flag := uint32(step + 1)
		for i := int64(0); i < lines; i++ {
			w := sl.data[i*model.LLLineBytes:]
			if le.Uint32(w[4:]) != flag || le.Uint32(w[12:]) != flag {
				return false
			}
		}
		return true
	default:
		sl := &c.slots[step%model.ProgSlots]
		lines := (s.Elems*x.esize + model.LL128LineData - 1) / model.LL128LineData
		if int64(len(sl.data)) < lines*model.LL128LineBytes {
			return false
		}
		for i := int64(0); i < lines; i++ {
			if le.Uint64(sl.data[i*model.LL128LineBytes+model.LL128LineData:]) != step+1 {
				return false
			}
		}
		return true
	}
}

// step runs the next slice of lane li. It reports false when the lane must
// wait.
func (x *runner) step(li int, ls *laneState) (bool, error) {
	p := x.p
	l := &p.Lanes[li]
	op := l.Ops[ls.op]
	s := ls.slices[ls.slice]
	rstep, sstep := uint64(s.RecvStep), uint64(s.SendStep)
	recv, send := op.Kind.Receives(), op.Kind.Sends()
	if recv {
		for _, ci := range l.Recv {
			c := &x.conns[ci]
			if c.recvStep != rstep {
				return false, x.violation(VStepOrder, li, ls.op, rstep, int(ci), "%s receives step %d but connection %d (from rank %d) is at step %d", op.Kind, rstep, ci, p.Conns[ci].From, c.recvStep)
			}
			if !x.recvReady(ci, rstep, s) {
				return false, nil
			}
		}
	}
	if send {
		for _, ci := range l.Send {
			c := &x.conns[ci]
			if c.sendStep != sstep {
				return false, x.violation(VStepOrder, li, ls.op, sstep, int(ci), "%s sends step %d but connection %d (to rank %d) is at step %d", op.Kind, sstep, ci, p.Conns[ci].To, c.sendStep)
			}
			if c.head+uint64(p.Credits) < sstep+uint64(s.Steps) {
				return false, nil
			}
		}
	}
	nb := s.Elems * x.esize
	rank := int(l.Rank)
	inOff := (op.InOff + s.Offset) * x.esize
	outOff := (op.OutOff + s.Offset) * x.esize
	if nb == 0 {
		inOff, outOff = 0, 0 // empty slices may point past the buffers
	}
	// Sources: the received slices (Simple slots are read in place, LL and
	// LL128 lines unpacked), then the own input or output.
	srcs := x.srcs[:0]
	if recv {
		for i, ci := range l.Recv {
			b, err := x.readSlot(li, ls.op, ci, rstep, s, i)
			if err != nil {
				return false, err
			}
			if b != nil {
				srcs = append(srcs, b)
			}
		}
		switch op.Kind {
		case model.PrimRecvReduceSend, model.PrimRecvReduceCopy, model.PrimRecvReduceCopySend:
			srcs = append(srcs, x.in[rank][inOff:inOff+nb])
		}
	} else if op.Kind == model.PrimSend && op.Flags&model.PrimFromOutput != 0 {
		srcs = append(srcs, x.out[rank][outOff:outOff+nb])
	} else if op.Kind.ReadsInput() {
		srcs = append(srcs, x.in[rank][inOff:inOff+nb])
	}
	// Destinations: the own output and, for Simple, the send slots written
	// in place; LL and LL128 stage the values and pack them into lines.
	dsts := x.dsts[:0]
	if op.Kind.WritesOutput() {
		dsts = append(dsts, x.out[rank][outOff:outOff+nb])
	}
	if send {
		for _, ci := range l.Send {
			if err := x.claimSlot(li, ls.op, ci, sstep, s, nb); err != nil {
				return false, err
			}
			if p.Proto == model.ProtoSimple {
				dsts = append(dsts, x.conns[ci].slots[sstep%model.ProgSlots].data[:nb])
			}
		}
		if p.Proto != model.ProtoSimple && len(dsts) == 0 {
			if int64(cap(x.acc)) < nb {
				x.acc = make([]byte, nb)
			}
			dsts = append(dsts, x.acc[:nb])
		}
	}
	if len(dsts) > 0 && nb > 0 {
		if len(srcs) == 0 {
			return false, x.violation(VInvalid, li, ls.op, rstep, -1, "%s has data to store but nothing to read", op.Kind)
		}
		x.kernel(dsts, srcs, op.Flags&model.PrimPostOp != 0)
	}
	x.srcs, x.dsts = srcs[:0], dsts[:0]
	if send {
		for _, ci := range l.Send {
			x.commitSlot(ci, sstep, s, dsts[0][:nb])
		}
	}
	// Post: receivers release their slots (head), senders publish (tail).
	if recv {
		for _, ci := range l.Recv {
			c := &x.conns[ci]
			c.recvStep = rstep + uint64(s.Steps)
			c.head = c.recvStep
		}
	}
	if send {
		for _, ci := range l.Send {
			c := &x.conns[ci]
			c.sendStep = sstep + uint64(s.Steps)
			if p.Proto == model.ProtoSimple {
				c.tail = c.sendStep
			}
		}
	}
	x.slices++
	ls.slice++
	if ls.slice == len(ls.slices) {
		ls.op++
		ls.slice = 0
		if ls.op == len(l.Ops) {
			ls.done = true
		} else {
			ls.slices = p.Slices(l.Ops[ls.op], ls.slices[:0])
		}
	}
	return true, nil
}

// claimSlot checks that the slots step's slice covers on connection ci
// were released by the receiver and prepares the first one for nb data
// bytes (Simple: the slot holds the data itself).
func (x *runner) claimSlot(li, op int, ci int32, step uint64, s model.ProgSlice, nb int64) error {
	p := x.p
	c := &x.conns[ci]
	first := step % model.ProgSlots
	if int(first)+s.Steps > model.ProgSlots {
		return x.violation(VInvalid, li, op, step, int(ci), "a slice of %d steps from slot %d wraps the %d-slot buffer", s.Steps, first, model.ProgSlots)
	}
	// Every slot the slice covers must have been released by the receiver.
	for k := 0; k < s.Steps; k++ {
		sl := &c.slots[(step+uint64(k))%model.ProgSlots]
		if sl.written && sl.step+uint64(sl.steps) > c.head {
			return x.violation(VOverrun, li, op, step, int(ci), "send to rank %d overwrites slot %d holding step %d, which the receiver has not released (head %d, credits %d)",
				p.Conns[ci].To, (step+uint64(k))%model.ProgSlots, sl.step, c.head, p.Credits)
		}
		sl.written = false
	}
	sl := &c.slots[first]
	switch p.Proto {
	case model.ProtoSimple:
		if nb > int64(p.StepBytes)*int64(s.Steps) {
			return x.violation(VOverrun, li, op, step, int(ci), "slice of %d bytes overflows %d step(s) of %d bytes", nb, s.Steps, p.StepBytes)
		}
		if int64(cap(sl.data)) < nb {
			sl.data = make([]byte, nb)
		}
		sl.data = sl.data[:nb]
	case model.ProtoLL:
		lines := (nb + model.LLLineData - 1) / model.LLLineData
		if lines*model.LLLineBytes > int64(p.StepBytes) {
			return x.violation(VOverrun, li, op, step, int(ci), "%d LL lines overflow a %d-byte step", lines, p.StepBytes)
		}
	default:
		lines := (nb + model.LL128LineData - 1) / model.LL128LineData
		if lines*model.LL128LineBytes > int64(p.StepBytes) {
			return x.violation(VOverrun, li, op, step, int(ci), "%d LL128 lines overflow a %d-byte step", lines, p.StepBytes)
		}
	}
	return nil
}

// commitSlot publishes step's slice on connection ci: Simple data is in
// the slot already; LL and LL128 pack data into flagged lines.
func (x *runner) commitSlot(ci int32, step uint64, s model.ProgSlice, data []byte) {
	p := x.p
	c := &x.conns[ci]
	sl := &c.slots[step%model.ProgSlots]
	nb := int64(len(data))
	var wire int64
	switch p.Proto {
	case model.ProtoSimple:
		wire = nb
	case model.ProtoLL:
		lines := (nb + model.LLLineData - 1) / model.LLLineData
		wire = lines * model.LLLineBytes
		sl.data = grow(sl.data, wire)
		packLL(sl.data, data, uint32(step+1))
	default:
		lines := (nb + model.LL128LineData - 1) / model.LL128LineData
		wire = lines * model.LL128LineBytes
		sl.data = grow(sl.data, wire)
		for i := int64(0); i < lines; i++ {
			w := sl.data[i*model.LL128LineBytes : (i+1)*model.LL128LineBytes]
			k := copy(w[:model.LL128LineData], data[i*model.LL128LineData:])
			clear(w[k:model.LL128LineData])
			le.PutUint64(w[model.LL128LineData:], step+1)
		}
	}
	sl.step, sl.steps, sl.size, sl.written = step, s.Steps, nb, true
	st := &x.stats[ci]
	st.Steps += uint64(s.Steps)
	st.Slices++
	st.Bytes += nb
	st.WireBytes += wire
	if x.opt.RecordSlices {
		st.SliceBytes = append(st.SliceBytes, nb)
	}
}

// packLL writes data as LL lines {data1, flag, data2, flag} into w.
func packLL(w, data []byte, flag uint32) {
	full := int64(len(data)) / model.LLLineData
	for i := int64(0); i < full; i++ {
		d := data[i*model.LLLineData : i*model.LLLineData+8 : i*model.LLLineData+8]
		o := w[i*model.LLLineBytes : i*model.LLLineBytes+16 : i*model.LLLineBytes+16]
		le.PutUint64(o[0:], uint64(le.Uint32(d[0:]))|uint64(flag)<<32)
		le.PutUint64(o[8:], uint64(le.Uint32(d[4:]))|uint64(flag)<<32)
	}
	if rest := data[full*model.LLLineData:]; len(rest) > 0 {
		var line [model.LLLineData]byte
		copy(line[:], rest)
		o := w[full*model.LLLineBytes:]
		le.PutUint64(o[0:], uint64(le.Uint32(line[0:]))|uint64(flag)<<32)
		le.PutUint64(o[8:], uint64(le.Uint32(line[4:]))|uint64(flag)<<32)
	}
}

// unpackLL reads the data of LL lines w into dst.
func unpackLL(dst, w []byte) {
	full := int64(len(dst)) / model.LLLineData
	for i := int64(0); i < full; i++ {
		o := w[i*model.LLLineBytes : i*model.LLLineBytes+16 : i*model.LLLineBytes+16]
		d := dst[i*model.LLLineData : i*model.LLLineData+8 : i*model.LLLineData+8]
		le.PutUint32(d[0:], le.Uint32(o[0:]))
		le.PutUint32(d[4:], le.Uint32(o[8:]))
	}
	if rest := dst[full*model.LLLineData:]; len(rest) > 0 {
		var line [model.LLLineData]byte
		o := w[full*model.LLLineBytes:]
		copy(line[0:4], o[0:4])
		copy(line[4:8], o[8:12])
		copy(rest, line[:])
	}
}

// grow returns b with length n, keeping old contents (stale flags stay).
func grow(b []byte, n int64) []byte {
	if int64(cap(b)) >= n {
		return b[:max(int64(len(b)), n)]
	}
	nb := make([]byte, n)
	copy(nb, b)
	return nb
}

// readSlot checks step's slice on connection ci and returns its data: the
// slot itself for Simple, the unpacked lines (in the buffer of receive
// peer i) for LL and LL128. It returns nil for an LL or LL128 receive of
// no lines, which neither waits nor reads (prims_ll.h): it only releases
// the step.
func (x *runner) readSlot(li, op int, ci int32, step uint64, s model.ProgSlice, i int) ([]byte, error) {
	p := x.p
	c := &x.conns[ci]
	sl := &c.slots[step%model.ProgSlots]
	nb := s.Elems * x.esize
	if p.Proto != model.ProtoSimple && nb == 0 {
		return nil, nil
	}
	if !sl.written || sl.step != step {
		return nil, x.violation(VStaleSlot, li, op, step, int(ci), "slot %d from rank %d holds step %d (written %v), not step %d", step%model.ProgSlots, p.Conns[ci].From, sl.step, sl.written, step)
	}
	if sl.size != nb {
		return nil, x.violation(VSizeMismatch, li, op, step, int(ci), "receives %d bytes from rank %d but %d were sent", nb, p.Conns[ci].From, sl.size)
	}
	if p.Proto == model.ProtoSimple {
		return sl.data[:nb], nil
	}
	for len(x.unpack) <= i {
		x.unpack = append(x.unpack, nil)
	}
	if int64(cap(x.unpack[i])) < nb {
		x.unpack[i] = make([]byte, nb)
	}
	dst := x.unpack[i][:nb]
	if p.Proto == model.ProtoLL {
		unpackLL(dst, sl.data)
		return dst, nil
	}
	for k := int64(0); k*model.LL128LineData < nb; k++ {
		copy(dst[k*model.LL128LineData:], sl.data[k*model.LL128LineBytes:k*model.LL128LineBytes+model.LL128LineData])
	}
	return dst, nil
}

// Executor adapts Run to the conformance suite's Executor interface.
type Executor struct {
	Options Options
}

// Name identifies the executor in test reports.
func (Executor) Name() string { return "refexec" }

// Execute runs p and returns its output buffers.
func (e Executor) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	r, err := Run(p, inputs, e.Options)
	if err != nil {
		return nil, err
	}
	return r.Outputs, nil
}
