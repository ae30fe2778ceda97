// Package hostdev is the host device of the hardware runtime: it runs one
// rank's lanes of a model.Program on host memory, with the reference
// interpreter's semantics (model/refexec), over the real connections of
// exec/hw/transport (shm between processes of a host, the net transport
// between hosts). A CPU backend in the spirit of Gloo: every primitive is
// executed slice by slice with NCCL's flow control (8 slots, head credits,
// Simple tail counters and connFifo sizes, LL flag lines of 8 data bytes,
// LL128 lines of 120 data bytes and a 64-bit flag).
//
// Lanes of a rank run round-robin on one goroutine (refexec's schedule):
// a lane that cannot progress is passed over, so lanes that depend on
// each other through other ranks never deadlock. A run with no progress
// for the comm's timeout, or a lost peer, ends with an error naming the
// peers waited on.
package hostdev

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// Device runs Programs for one rank.
type Device struct {
	comm *bootstrap.Comm
	set  *transport.Set
	// Timeout bounds the time without progress (the comm's timeout when 0).
	Timeout time.Duration
	// Trace, when set, receives one event per executed slice (the
	// event trace of a call); nil costs nothing.
	Trace func(SliceEvent)

	unpack [][]byte
	acc    []byte
	// Workers is the number of goroutines that share the reduction and
	// copies of one large slice (GOMAXPROCS, or TWINCCL_REDUCE_THREADS,
	// when 0; 1 keeps it on the device goroutine).
	Workers int
	work    workers
	// view, when set, makes the device a communicator's over a subset of
	// the job's ranks (Split): Programs use its ranks.
	view *commView
}

// New returns the host device of the rank that comm and set belong to.
func New(comm *bootstrap.Comm, set *transport.Set) *Device {
	return &Device{comm: comm, set: set}
}

// Stats count what a run did.
type Stats struct {
	Slices int64
	Bytes  int64 // data bytes sent
}

// SliceEvent is one executed slice of a rank's lane: what an event
// trace row records.
type SliceEvent struct {
	Channel int
	// SendPeer and RecvPeer are the first peer the slice sends to and
	// receives from, -1 when it does not.
	SendPeer, RecvPeer int
	Prim               model.PrimKind
	Proto              model.Protocol
	// Step numbers the rank's slices on the channel in execution order.
	Step int64
	// Bytes is the slice's payload.
	Bytes int64
	// Start and End are when the slice's data movement began (its inputs
	// had arrived and its credits were there) and when it was posted.
	Start, End time.Time
}

type laneState struct {
	li     int
	op     int
	slices []model.ProgSlice
	slice  int
	done   bool
}

type run struct {
	d       *Device
	p       *model.Program
	me      int
	in, out []byte
	es      int64
	conns   []*transport.Conn // per Program connection, nil when not ours
	base    []uint64
	last    []uint64 // relative step reached per connection
	st      Stats
	chStep  []int64 // per channel: slices executed (traces)
	srcs    [][]byte
	dsts    [][]byte
}

// Run executes this rank's lanes of p: in holds p.InCount elements, out
// p.OutCount. Every rank of the job must run the same Program.
func (d *Device) Run(p *model.Program, in, out []byte) (Stats, error) {
	me, nranks := d.comm.Rank(), d.comm.NRanks()
	if d.view != nil {
		me, nranks = d.view.rank, len(d.view.members)
	}
	if err := p.Validate(); err != nil {
		return Stats{}, fmt.Errorf("hostdev rank %d: %w", me, err)
	}
	if p.NRanks != nranks {
		return Stats{}, fmt.Errorf("hostdev rank %d: program for %d ranks in a communicator of %d", me, p.NRanks, nranks)
	}
	es := int64(p.Dtype.Size())
	if int64(len(in)) != p.InCount*es || int64(len(out)) != p.OutCount*es {
		return Stats{}, fmt.Errorf("hostdev rank %d: buffers of %d/%d bytes, want %d/%d", me, len(in), len(out), p.InCount*es, p.OutCount*es)
	}
	if p.StepBytes > transport.SlotStride(p.Proto) {
		return Stats{}, fmt.Errorf("hostdev rank %d: step of %d bytes exceeds the %s slot of %d", me, p.StepBytes, p.Proto, transport.SlotStride(p.Proto))
	}
	conns, err := d.set.Connect(d.keys(p))
	if err != nil {
		return Stats{}, err
	}
	r := &run{d: d, p: p, me: me, in: in, out: out, es: es, conns: conns,
		base: make([]uint64, len(conns)), last: make([]uint64, len(conns))}
	if d.Trace != nil {
		r.chStep = make([]int64, p.NChannels)
	}
	// Round every connection's step up to a Simple chunk, as NCCL does
	// (model.Program.StepRound: a slice never wraps the slot ring), and
	// return the skipped credits / post the skipped steps.
	g := uint64(p.StepRound())
	for i, c := range conns {
		if c == nil {
			continue
		}
		b := (c.Step + g - 1) / g * g
		r.base[i] = b
		if c.Send {
			c.Mem.SetTail(b)
		}
		if !c.Send || c.Kind == transport.KindSelf {
			c.Mem.SetHead(b)
		}
		c.Notify()
	}
	var lanes []laneState
	for li := range p.Lanes {
		l := &p.Lanes[li]
		if int(l.Rank) != me || len(l.Ops) == 0 {
			continue
		}
		lanes = append(lanes, laneState{li: li, slices: p.Slices(l.Ops[0], nil)})
	}
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = d.comm.Timeout()
	}
	lost := d.comm.Lost()
	var bo transport.Backoff
	lastProgress := time.Now()
	for remaining := len(lanes); remaining > 0; {
		progressed := false
		remaining = 0
		for i := range lanes {
			ls := &lanes[i]
			for !ls.done {
				ok, err := r.step(ls)
				if err != nil {
					return r.st, err
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
		if progressed {
			bo.Reset()
			lastProgress = time.Time{}
			continue
		}
		select {
		case <-lost:
			return r.st, fmt.Errorf("hostdev rank %d: %w; blocked: %s", me, d.comm.Err(), r.blocked(lanes))
		default:
		}
		if lastProgress.IsZero() {
			lastProgress = time.Now()
		} else if bo.Waits()%1024 == 0 && time.Since(lastProgress) > timeout {
			return r.st, fmt.Errorf("hostdev rank %d: timed out: no progress for %v: %s", me, timeout, r.blocked(lanes))
		}
		bo.Wait()
	}
	for i, c := range conns {
		if c != nil {
			c.Step = r.base[i] + r.last[i]
		}
	}
	return r.st, nil
}

// blocked describes what the unfinished lanes wait for, naming peers.
func (r *run) blocked(lanes []laneState) string {
	var parts []string
	for i := range lanes {
		ls := &lanes[i]
		if ls.done {
			continue
		}
		l := &r.p.Lanes[ls.li]
		op := l.Ops[ls.op]
		s := ls.slices[ls.slice]
		var w []string
		if op.Kind.Receives() {
			for _, ci := range l.Recv {
				if ok, _ := r.recvReady(ci, r.base[ci]+uint64(s.RecvStep), s, 0); !ok {
					w = append(w, fmt.Sprintf("data from rank %d", r.p.Conns[ci].From))
				}
			}
		}
		if op.Kind.Sends() {
			for _, ci := range l.Send {
				c := r.conns[ci]
				if c.Mem.Head()+uint64(r.p.Credits) < r.base[ci]+uint64(s.SendStep)+uint64(s.Steps) {
					w = append(w, fmt.Sprintf("credit from rank %d", r.p.Conns[ci].To))
				}
			}
		}
		parts = append(parts, fmt.Sprintf("channel %d lane %d op %d %s waits for %s", l.Channel, ls.li, ls.op, op.Kind, strings.Join(w, ", ")))
		if len(parts) == 4 {
			break
		}
	}
	return strings.Join(parts, "; ")
}

// recvReady reports whether the slice's data arrived on connection ci at
// absolute step abs; for LL and LL128 it also unpacks the data into the
// unpack buffer of receive peer i.
func (r *run) recvReady(ci int32, abs uint64, s model.ProgSlice, i int) (bool, error) {
	c := r.conns[ci]
	m := c.Mem
	p := r.p
	nb := s.Elems * r.es
	if p.Proto != model.ProtoSimple && nb == 0 {
		return true, nil
	}
	// Simple data is announced by the tail counter; LL and LL128 lines
	// carry their flags, over shm and net alike (the net proxy stores
	// received lines flag last and leaves the tail alone).
	if p.Proto == model.ProtoSimple && m.Tail() < abs+uint64(s.Steps) {
		return false, nil
	}
	slot := int(abs % model.ProgSlots)
	switch p.Proto {
	case model.ProtoSimple:
		return true, nil
	case model.ProtoLL:
		dst := r.unpackBuf(i, nb)
		lines := (nb + model.LLLineData - 1) / model.LLLineData
		w := wordsOf(m.Slot(model.ProtoLL, slot), lines*2)
		flag := uint32(abs + 1)
		var tmp [8]byte
		for k := int64(0); k < lines; k++ {
			a := atomic.LoadUint64(&w[2*k])
			b := atomic.LoadUint64(&w[2*k+1])
			if uint32(a>>32) != flag || uint32(b>>32) != flag {
				return false, nil
			}
			o := k * model.LLLineData
			if o+8 <= nb {
				le32(dst[o:], uint32(a))
				le32(dst[o+4:], uint32(b))
			} else {
				le32(tmp[0:], uint32(a))
				le32(tmp[4:], uint32(b))
				copy(dst[o:], tmp[:])
			}
		}
		return true, nil
	default:
		dst := r.unpackBuf(i, nb)
		lines := (nb + model.LL128LineData - 1) / model.LL128LineData
		buf := m.Slot(model.ProtoLL128, slot)
		w := wordsOf(buf, lines*16)
		for k := int64(0); k < lines; k++ {
			if atomic.LoadUint64(&w[16*k+15]) != abs+1 {
				return false, nil
			}
			copy(dst[k*model.LL128LineData:], buf[k*model.LL128LineBytes:k*model.LL128LineBytes+model.LL128LineData])
		}
		return true, nil
	}
}

func (r *run) unpackBuf(i int, nb int64) []byte {
	d := r.d
	for len(d.unpack) <= i {
		d.unpack = append(d.unpack, nil)
	}
	if int64(cap(d.unpack[i])) < nb {
		d.unpack[i] = make([]byte, nb)
	}
	return d.unpack[i][:nb]
}

func wordsOf(b []byte, n int64) []uint64 {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), n)[:n:n]
}

func le32(b []byte, v uint32) { b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24) }

// step runs the next slice of a lane; false when it must wait.
func (r *run) step(ls *laneState) (bool, error) {
	p := r.p
	l := &p.Lanes[ls.li]
	op := l.Ops[ls.op]
	s := ls.slices[ls.slice]
	recv, send := op.Kind.Receives(), op.Kind.Sends()
	nb := s.Elems * r.es
	where := func() string {
		return fmt.Sprintf("hostdev rank %d channel %d lane %d op %d (%s)", r.me, l.Channel, ls.li, ls.op, op.Kind)
	}
	if send {
		for _, ci := range l.Send {
			abs := r.base[ci] + uint64(s.SendStep)
			if r.conns[ci].Mem.Head()+uint64(p.Credits) < abs+uint64(s.Steps) {
				return false, nil
			}
		}
	}
	srcs := r.srcs[:0]
	if recv {
		for i, ci := range l.Recv {
			abs := r.base[ci] + uint64(s.RecvStep)
			ok, err := r.recvReady(ci, abs, s, i)
			if err != nil || !ok {
				return false, err
			}
		}
		for i, ci := range l.Recv {
			abs := r.base[ci] + uint64(s.RecvStep)
			if p.Proto == model.ProtoSimple {
				m := r.conns[ci].Mem
				slot := int(abs % model.ProgSlots)
				e := m.Fifo(slot)
				if e.Step != int64(abs) || e.Size != nb {
					return false, fmt.Errorf("%s: slot %d from rank %d holds step %d of %d bytes, want step %d of %d bytes", where(), slot, p.Conns[ci].From, e.Step, e.Size, abs, nb)
				}
				srcs = append(srcs, m.Slot(model.ProtoSimple, slot)[:nb])
			} else if nb > 0 {
				srcs = append(srcs, r.d.unpack[i][:nb])
			}
		}
	}
	var start time.Time
	if r.d.Trace != nil {
		start = time.Now()
	}
	inOff := (op.InOff + s.Offset) * r.es
	outOff := (op.OutOff + s.Offset) * r.es
	if nb == 0 {
		inOff, outOff = 0, 0
	}
	switch {
	case recv:
		switch op.Kind {
		case model.PrimRecvReduceSend, model.PrimRecvReduceCopy, model.PrimRecvReduceCopySend:
			srcs = append(srcs, r.in[inOff:inOff+nb])
		}
	case op.Kind == model.PrimSend && op.Flags&model.PrimFromOutput != 0:
		srcs = append(srcs, r.out[outOff:outOff+nb])
	case op.Kind.ReadsInput():
		srcs = append(srcs, r.in[inOff:inOff+nb])
	}
	dsts := r.dsts[:0]
	if op.Kind.WritesOutput() {
		dsts = append(dsts, r.out[outOff:outOff+nb])
	}
	if send {
		if int64(s.Steps) > model.ProgSlots || nb > int64(p.StepBytes)*int64(s.Steps) {
			return false, fmt.Errorf("%s: slice of %d bytes over %d steps does not fit %d-byte steps", where(), nb, s.Steps, p.StepBytes)
		}
		if p.Proto == model.ProtoSimple {
			for _, ci := range l.Send {
				abs := r.base[ci] + uint64(s.SendStep)
				slot := int(abs % model.ProgSlots)
				if slot+s.Steps > model.ProgSlots {
					return false, fmt.Errorf("%s: slice of %d steps from slot %d wraps the slot ring", where(), s.Steps, slot)
				}
				dsts = append(dsts, r.conns[ci].Mem.Slot(model.ProtoSimple, slot)[:nb])
			}
		} else if len(dsts) == 0 {
			if int64(cap(r.d.acc)) < nb {
				r.d.acc = make([]byte, nb)
			}
			dsts = append(dsts, r.d.acc[:nb])
		}
	}
	if len(dsts) > 0 && nb > 0 {
		if len(srcs) == 0 {
			return false, fmt.Errorf("%s: data to store but nothing to read", where())
		}
		r.d.combine(p.Dtype, p.Op, dsts, srcs, op.Flags&model.PrimPostOp != 0, p.NRanks)
	}
	r.srcs, r.dsts = srcs[:0], dsts[:0]
	if send {
		for _, ci := range l.Send {
			abs := r.base[ci] + uint64(s.SendStep)
			var data []byte
			if nb > 0 {
				data = dsts[0][:nb]
			}
			r.commit(r.conns[ci], abs, s, data)
			r.st.Bytes += nb
		}
	}
	// Post: receivers release their slots (head), senders publish (tail).
	if recv {
		for _, ci := range l.Recv {
			c := r.conns[ci]
			r.last[ci] = uint64(s.RecvStep) + uint64(s.Steps)
			c.Mem.SetHead(r.base[ci] + r.last[ci])
			c.Notify()
		}
	}
	if send {
		for _, ci := range l.Send {
			c := r.conns[ci]
			r.last[ci] = uint64(s.SendStep) + uint64(s.Steps)
			c.Mem.SetTail(r.base[ci] + r.last[ci])
			c.Notify()
		}
	}
	r.st.Slices++
	if r.d.Trace != nil {
		ev := SliceEvent{Channel: int(l.Channel), SendPeer: -1, RecvPeer: -1, Prim: op.Kind, Proto: p.Proto,
			Step: r.chStep[l.Channel], Bytes: nb, Start: start, End: time.Now()}
		if send && len(l.Send) > 0 {
			ev.SendPeer = int(p.Conns[l.Send[0]].To)
		}
		if recv && len(l.Recv) > 0 {
			ev.RecvPeer = int(p.Conns[l.Recv[0]].From)
		}
		r.chStep[l.Channel]++
		r.d.Trace(ev)
	}
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

// commit writes the slice's connFifo entry and, for LL and LL128, packs
// the data into flagged lines (Simple data is in the slot already).
func (r *run) commit(c *transport.Conn, abs uint64, s model.ProgSlice, data []byte) {
	p := r.p
	slot := int(abs % model.ProgSlots)
	nb := int64(len(data))
	wire := nb
	switch p.Proto {
	case model.ProtoLL:
		lines := (nb + model.LLLineData - 1) / model.LLLineData
		wire = lines * model.LLLineBytes
		w := wordsOf(c.Mem.Slot(model.ProtoLL, slot), lines*2)
		flag := uint64(uint32(abs+1)) << 32
		full := nb / model.LLLineData
		for k := int64(0); k < full; k++ {
			d := data[k*8 : k*8+8 : k*8+8]
			w[2*k] = uint64(uint32(d[0])|uint32(d[1])<<8|uint32(d[2])<<16|uint32(d[3])<<24) | flag
			w[2*k+1] = uint64(uint32(d[4])|uint32(d[5])<<8|uint32(d[6])<<16|uint32(d[7])<<24) | flag
		}
		if full < lines {
			var t [8]byte
			copy(t[:], data[full*8:])
			w[2*full] = uint64(uint32(t[0])|uint32(t[1])<<8|uint32(t[2])<<16|uint32(t[3])<<24) | flag
			w[2*full+1] = uint64(uint32(t[4])|uint32(t[5])<<8|uint32(t[6])<<16|uint32(t[7])<<24) | flag
		}
	case model.ProtoLL128:
		lines := (nb + model.LL128LineData - 1) / model.LL128LineData
		wire = lines * model.LL128LineBytes
		buf := c.Mem.Slot(model.ProtoLL128, slot)
		w := wordsOf(buf, lines*16)
		for k := int64(0); k < lines; k++ {
			line := buf[k*model.LL128LineBytes : k*model.LL128LineBytes+model.LL128LineData]
			n := copy(line, data[k*model.LL128LineData:])
			clear(line[n:])
			atomic.StoreUint64(&w[16*k+15], abs+1)
		}
	}
	c.Mem.SetFifo(slot, transport.FifoEntry{Size: nb, Wire: wire, Step: int64(abs), Steps: int32(s.Steps), Proto: int32(p.Proto)})
}
