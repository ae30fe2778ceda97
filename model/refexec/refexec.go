// Package refexec is the reference interpreter of model.Program: it runs
// every rank's lanes over real byte buffers on the CPU, with NCCL's
// connection semantics (ProgSlots slots per connection, sender head
// credits, Simple tail counters and size records, LL flag lines of 8 data
// bytes and LL128 lines of 120 data bytes with a 64-bit flag), and reports
// protocol violations with the rank, channel, lane, op and step where they
// happen. It is the correctness oracle for Program generators and the
// executor the conformance suite is proven against.
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
	acc     []byte
	tmp     []byte
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
	x.out = make([][]byte, p.NRanks)
	for r := range x.out {
		x.out[r] = make([]byte, p.OutCount*es)
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
	if int64(cap(x.acc)) < nb {
		x.acc = make([]byte, nb)
		x.tmp = make([]byte, nb)
	}
	acc := x.acc[:nb]
	inOff := (op.InOff + s.Offset) * x.esize
	outOff := (op.OutOff + s.Offset) * x.esize
	if nb == 0 {
		inOff, outOff = 0, 0 // empty slices may point past the buffers
	}
	// Gather the values: received data, reduced with the own input.
	if recv {
		for i, ci := range l.Recv {
			dst := acc
			if i > 0 {
				dst = x.tmp[:nb]
			}
			if err := x.readSlot(li, ls.op, ci, rstep, s, dst); err != nil {
				return false, err
			}
			if i > 0 {
				reduceInto(p.Dtype, p.Op, acc, dst)
			}
		}
		switch op.Kind {
		case model.PrimRecvReduceSend, model.PrimRecvReduceCopy, model.PrimRecvReduceCopySend:
			reduceInto(p.Dtype, p.Op, acc, x.in[rank][inOff:inOff+nb])
		}
	} else if op.Kind == model.PrimSend && op.Flags&model.PrimFromOutput != 0 {
		copy(acc, x.out[rank][outOff:outOff+nb])
	} else if op.Kind.ReadsInput() {
		copy(acc, x.in[rank][inOff:inOff+nb])
	}
	if op.Flags&model.PrimPostOp != 0 {
		PostOp(p.Dtype, p.Op, acc, p.NRanks)
	}
	if op.Kind.WritesOutput() {
		copy(x.out[rank][outOff:outOff+nb], acc)
	}
	if send {
		for _, ci := range l.Send {
			if err := x.writeSlot(li, ls.op, ci, sstep, s, acc); err != nil {
				return false, err
			}
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

// writeSlot stores one slice for step on connection ci.
func (x *runner) writeSlot(li, op int, ci int32, step uint64, s model.ProgSlice, data []byte) error {
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
	nb := int64(len(data))
	var wire int64
	switch p.Proto {
	case model.ProtoSimple:
		if nb > int64(p.StepBytes)*int64(s.Steps) {
			return x.violation(VOverrun, li, op, step, int(ci), "slice of %d bytes overflows %d step(s) of %d bytes", nb, s.Steps, p.StepBytes)
		}
		sl.data = append(sl.data[:0], data...)
		wire = nb
	case model.ProtoLL:
		lines := (nb + model.LLLineData - 1) / model.LLLineData
		wire = lines * model.LLLineBytes
		if wire > int64(p.StepBytes) {
			return x.violation(VOverrun, li, op, step, int(ci), "%d LL lines overflow a %d-byte step", lines, p.StepBytes)
		}
		sl.data = grow(sl.data, wire)
		flag := uint32(step + 1)
		var line [model.LLLineData]byte
		for i := int64(0); i < lines; i++ {
			line = [model.LLLineData]byte{}
			copy(line[:], data[i*model.LLLineData:])
			w := sl.data[i*model.LLLineBytes:]
			copy(w[0:4], line[0:4])
			le.PutUint32(w[4:], flag)
			copy(w[8:12], line[4:8])
			le.PutUint32(w[12:], flag)
		}
	default:
		lines := (nb + model.LL128LineData - 1) / model.LL128LineData
		wire = lines * model.LL128LineBytes
		if wire > int64(p.StepBytes) {
			return x.violation(VOverrun, li, op, step, int(ci), "%d LL128 lines overflow a %d-byte step", lines, p.StepBytes)
		}
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
	return nil
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

// readSlot takes step's slice from connection ci into dst.
func (x *runner) readSlot(li, op int, ci int32, step uint64, s model.ProgSlice, dst []byte) error {
	p := x.p
	c := &x.conns[ci]
	sl := &c.slots[step%model.ProgSlots]
	if p.Proto != model.ProtoSimple && len(dst) == 0 {
		// LL and LL128 wait on line flags only: a receive of no lines
		// neither waits nor reads (prims_ll.h), it just releases the step.
		return nil
	}
	if !sl.written || sl.step != step {
		return x.violation(VStaleSlot, li, op, step, int(ci), "slot %d from rank %d holds step %d (written %v), not step %d", step%model.ProgSlots, p.Conns[ci].From, sl.step, sl.written, step)
	}
	nb := int64(len(dst))
	if sl.size != nb {
		return x.violation(VSizeMismatch, li, op, step, int(ci), "receives %d bytes from rank %d but %d were sent", nb, p.Conns[ci].From, sl.size)
	}
	switch p.Proto {
	case model.ProtoSimple:
		copy(dst, sl.data[:nb])
	case model.ProtoLL:
		var line [model.LLLineData]byte
		for i := int64(0); i*model.LLLineData < nb; i++ {
			w := sl.data[i*model.LLLineBytes:]
			copy(line[0:4], w[0:4])
			copy(line[4:8], w[8:12])
			copy(dst[i*model.LLLineData:], line[:])
		}
	default:
		for i := int64(0); i*model.LL128LineData < nb; i++ {
			copy(dst[i*model.LL128LineData:], sl.data[i*model.LL128LineBytes:i*model.LL128LineBytes+model.LL128LineData])
		}
	}
	return nil
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
