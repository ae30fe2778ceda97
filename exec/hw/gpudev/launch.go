package gpudev

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// Launch is one rank's part of a Program uploaded to the GPU: the lane
// table and primitive calls the interpreter kernel reads. It can be
// enqueued any number of times (also inside a CUDA graph capture).
type Launch struct {
	d      *Device
	p      *model.Program
	fn     *cuda.Function
	desc   cuda.DevicePtr // TwProg
	mem    []cuda.DevicePtr
	nLanes int
	// threads is the block size: 512, or fewer for LL and LL128 Programs
	// whose calls are all small (fewer warps make each barrier cheaper).
	threads int
	// lanes are the Program's lane indices, in block order.
	lanes []int
	// trace holds kernels.TraceWords u64 per slice of every lane when
	// tracing, laid out lane after lane; traceAt is each lane's first word.
	trace   cuda.DevicePtr
	traceAt []int
	slices  []int
	// net are the launch's net connection ends: Enqueue wakes their proxy.
	net []*transport.Conn
	// copy marks a copy launch (copy.go): Enqueue issues copies, the
	// rank's part of the Program, instead of the kernel.
	copy   bool
	copies []copySeg
}

// Prepare uploads this rank's part of p: it sets up any connections the
// Program needs that this rank does not hold yet (every rank of the job
// must prepare the same Programs in the same order), compiles the kernel
// for p's datatype and reduction if needed and writes the lane table.
// With trace set, every launch records %globaltimer stamps per slice.
// Without, a rank whose part only copies its input to its output (a
// one-rank communicator's call) gets a copy launch, without a kernel (see
// copy.go); tracing keeps the interpreter, whose slices have the stamps.
func (d *Device) Prepare(p *model.Program, trace bool) (*Launch, error) {
	me := d.comm.Rank()
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("gpudev rank %d: %w", me, err)
	}
	if p.NRanks != d.comm.NRanks() {
		return nil, fmt.Errorf("gpudev rank %d: program for %d ranks in a job of %d", me, p.NRanks, d.comm.NRanks())
	}
	// The interpreter's connections are point to point: NVLS Programs
	// need multicast objects, which it does not create.
	if err := p.PointToPoint(); err != nil {
		return nil, fmt.Errorf("gpudev rank %d: %w", me, err)
	}
	if p.StepBytes > model.ProtoStepBytes(p.Proto) {
		return nil, fmt.Errorf("gpudev rank %d: step of %d bytes exceeds the %s slot of %d", me, p.StepBytes, p.Proto, model.ProtoStepBytes(p.Proto))
	}
	if p.Proto == model.ProtoSimple && model.ProgSlots%(p.SlicesPerChunk*p.StepsPerSlice) != 0 {
		return nil, fmt.Errorf("gpudev rank %d: %d slices x %d steps per call do not divide the %d slots", me, p.SlicesPerChunk, p.StepsPerSlice, model.ProgSlots)
	}
	if err := d.checkTransport(p); err != nil {
		return nil, fmt.Errorf("gpudev rank %d: %w", me, err)
	}
	keys := transport.ProgramKeys(p)
	used := make([]bool, len(p.Conns))
	for li := range p.Lanes {
		for _, c := range p.Lanes[li].Recv {
			used[c] = true
		}
		for _, c := range p.Lanes[li].Send {
			used[c] = true
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("gpudev rank %d: device closed", me)
	}
	if err := d.connect(keys, used); err != nil {
		return nil, err
	}
	if !trace && localCopy() {
		if segs, ok := copyPlan(p, me); ok {
			return &Launch{d: d, p: p, copy: true, copies: segs}, nil
		}
	}
	fn, err := kernelFor(d.ctx, p.Dtype, p.Op, p.Proto)
	if err != nil {
		return nil, fmt.Errorf("gpudev rank %d: %w", me, err)
	}
	l := &Launch{d: d, p: p, fn: fn}
	var opsBytes []byte
	opStart := []int{}
	for li := range p.Lanes {
		ln := &p.Lanes[li]
		if int(ln.Rank) != me {
			continue
		}
		if len(ln.Recv) > kernels.MaxPeers || len(ln.Send) > kernels.MaxPeers {
			return nil, fmt.Errorf("gpudev rank %d: lane %d has %d/%d peers, the kernel takes %d", me, li, len(ln.Recv), len(ln.Send), kernels.MaxPeers)
		}
		l.lanes = append(l.lanes, li)
		opStart = append(opStart, len(opsBytes))
		for _, op := range ln.Ops {
			opsBytes = appendOp(opsBytes, op)
		}
	}
	l.nLanes = len(l.lanes)
	if l.nLanes == 0 {
		return l, nil
	}
	l.net = d.launchNetConns(p, keys, l.lanes)
	l.threads = blockThreads(p, l.lanes)
	ops, err := l.upload(opsBytes)
	if err != nil {
		return nil, err
	}
	if trace {
		total := 0
		for _, li := range l.lanes {
			l.traceAt = append(l.traceAt, total*kernels.TraceWords)
			n := countSlices(p, &p.Lanes[li])
			l.slices = append(l.slices, n)
			total += n
		}
		if l.trace, err = l.alloc(uint64(max(total, 1) * kernels.TraceWords * 8)); err != nil {
			l.Release()
			return nil, err
		}
	}
	desc := make([]byte, 0, kernels.ProgHeaderSize+l.nLanes*kernels.LaneSize)
	read := 0
	if SimpleRead(p.Coll) {
		read = 1
	}
	for _, v := range []int{int(p.Proto), p.StepBytes, p.Credits, p.SlicesPerChunk, p.StepsPerSlice, p.NRanks, l.nLanes, read} {
		desc = le.AppendUint32(desc, uint32(v))
	}
	for bi, li := range l.lanes {
		ln := &p.Lanes[li]
		desc = le.AppendUint32(desc, uint32(len(ln.Recv)))
		desc = le.AppendUint32(desc, uint32(len(ln.Send)))
		desc = le.AppendUint32(desc, d.laneFlags(d.comm.Rank(), ln, keys))
		desc = le.AppendUint32(desc, 0)
		for _, send := range []bool{false, true} {
			conns := ln.Recv
			if send {
				conns = ln.Send
			}
			for i := 0; i < kernels.MaxPeers; i++ {
				v := uint64(0)
				if i < len(conns) {
					v = uint64(d.ends[endKey{keys[conns[i]], send}])
				}
				desc = le.AppendUint64(desc, v)
			}
		}
		for _, send := range []bool{false, true} {
			n := len(ln.Recv)
			if send {
				n = len(ln.Send)
			}
			steps := uint64(p.LaneSteps(li, send))
			for i := 0; i < kernels.MaxPeers; i++ {
				v := uint64(0)
				if i < n {
					v = steps
				}
				desc = le.AppendUint64(desc, v)
			}
		}
		desc = le.AppendUint64(desc, uint64(ops)+uint64(opStart[bi]))
		desc = le.AppendUint64(desc, uint64(len(ln.Ops)))
		tr := uint64(0)
		if trace {
			tr = uint64(l.trace) + uint64(l.traceAt[bi]*8)
		}
		desc = le.AppendUint64(desc, tr)
	}
	if l.desc, err = l.upload(desc); err != nil {
		l.Release()
		return nil, err
	}
	return l, nil
}

// blockThreads sizes the block for the largest call of the lanes: one LL
// line per thread, four LL128 lines per warp, between 2 warps and the
// block the interpreter is compiled for (maxThreads); Simple Programs
// always get the whole of it (or TWINCCL_SIMPLE_THREADS, a tuning
// experiment; more needs a kernel compiled with a larger TW_NTHREADS
// through TWINCCL_KERNEL_OPTIONS).
func blockThreads(p *model.Program, lanes []int) int {
	if p.Proto == model.ProtoSimple {
		if v, err := strconv.Atoi(os.Getenv("TWINCCL_SIMPLE_THREADS")); err == nil && v >= 32 && v <= 1024 && v%32 == 0 {
			return v
		}
		return maxThreads(p.Proto)
	}
	return p.LineThreads(lanes, maxThreads(p.Proto))
}

// appendOp writes op in the binary encoding's 32-byte record (TwOp).
func appendOp(b []byte, op model.ProgOp) []byte {
	b = append(b, byte(op.Kind), op.Flags, 0, 0)
	b = le.AppendUint32(b, uint32(op.N))
	b = le.AppendUint32(b, op.RecvStep)
	b = le.AppendUint32(b, op.SendStep)
	b = le.AppendUint64(b, uint64(op.InOff))
	b = le.AppendUint64(b, uint64(op.OutOff))
	return b
}

func countSlices(p *model.Program, ln *model.ProgLane) int {
	n := 0
	for _, op := range ln.Ops {
		if op.Kind == model.PrimNop {
			continue
		}
		if p.Proto == model.ProtoSimple {
			n += p.SlicesPerChunk
		} else {
			n++
		}
	}
	return n
}

func (l *Launch) alloc(n uint64) (cuda.DevicePtr, error) {
	p, err := l.d.ctx.MemAlloc(max(n, 8))
	if err != nil {
		return 0, fmt.Errorf("gpudev rank %d: program memory (%d bytes): %w", l.d.comm.Rank(), n, err)
	}
	l.mem = append(l.mem, p)
	return p, nil
}

func (l *Launch) upload(b []byte) (cuda.DevicePtr, error) {
	p, err := l.alloc(uint64(len(b)))
	if err != nil {
		return 0, err
	}
	if len(b) > 0 {
		if err := l.d.ctx.MemcpyHtoD(p, b); err != nil {
			return 0, fmt.Errorf("gpudev rank %d: upload program: %w", l.d.comm.Rank(), err)
		}
	}
	return p, nil
}

// Release frees the launch's GPU memory (after its last use completed).
func (l *Launch) Release() error {
	var first error
	for _, p := range l.mem {
		if err := l.d.ctx.MemFree(p); err != nil && first == nil {
			first = err
		}
	}
	l.mem = nil
	return first
}

// Program is the Program the launch runs.
func (l *Launch) Program() *model.Program { return l.p }

// Enqueue launches the kernel on s (the device's stream when nil) over
// in (p.InCount elements) and out (p.OutCount elements) in GPU memory; a
// copy launch (Copy) enqueues its device-to-device copies on s instead,
// none where in and out are one buffer.
func (l *Launch) Enqueue(s *cuda.Stream, in, out cuda.DevicePtr) error {
	if s == nil {
		s = l.d.stream
	}
	if l.copy {
		return l.enqueueCopies(s, in, out)
	}
	if l.nLanes == 0 {
		return nil
	}
	timeout := l.d.Timeout
	if timeout <= 0 {
		timeout = l.d.comm.Timeout()
	}
	ctrl := l.d.ctrl.DevicePtr()
	err := l.fn.Launch(cuda.Dim3{X: uint32(l.nLanes), Y: 1, Z: 1}, cuda.Dim3{X: uint32(l.threads), Y: 1, Z: 1}, 0, s,
		uint64(l.desc), uint64(in), uint64(out), uint64(ctrl)+64, uint64(ctrl), uint64(timeout.Nanoseconds()))
	if err != nil {
		return fmt.Errorf("gpudev rank %d: launch: %w", l.d.comm.Rank(), err)
	}
	l.Notify()
	return nil
}

// Notify wakes the proxy of the launch's net connections, as Enqueue does
// after each launch. A caller that starts the kernel by other means (a
// CUDA graph that captured Enqueue) calls it after each such start, so
// that a proxy that went idle polls at once instead of after its nap.
func (l *Launch) Notify() {
	for _, c := range l.net {
		c.Notify()
	}
}

// Check reads the status a finished launch left (after the stream was
// synchronised) and turns a timeout or abort into an error naming the
// lane's peers. A copy launch has no status: its copies' errors come from
// the stream.
func (l *Launch) Check() error {
	if l.copy {
		return nil
	}
	st := *l.d.statusWord()
	if st == 0 {
		return nil
	}
	*l.d.statusWord() = 0
	me := l.d.comm.Rank()
	code, bi := st>>24, int(st&0xffffff)
	where := ""
	if bi < len(l.lanes) {
		ln := &l.p.Lanes[l.lanes[bi]]
		where = fmt.Sprintf(" on channel %d waiting for %s", ln.Channel, peerList(l.p, ln))
	}
	if lost := l.d.comm.LostPeer(); lost >= 0 {
		return fmt.Errorf("gpudev rank %d: rank %d was lost%s", me, lost, where)
	}
	switch code {
	case kernels.StatusTimeout:
		return fmt.Errorf("gpudev rank %d: no progress for %v%s", me, l.d.timeout(), where)
	case kernels.StatusAbort:
		return fmt.Errorf("gpudev rank %d: aborted%s", me, where)
	case kernels.StatusProto:
		return fmt.Errorf("gpudev rank %d: the interpreter launched was built for another protocol than the Program's %s", me, l.p.Proto)
	}
	return fmt.Errorf("gpudev rank %d: kernel status %#x", me, st)
}

func (d *Device) timeout() time.Duration {
	if d.Timeout > 0 {
		return d.Timeout
	}
	return d.comm.Timeout()
}

func peerList(p *model.Program, ln *model.ProgLane) string {
	s := ""
	for _, c := range ln.Recv {
		s += fmt.Sprintf("rank %d (recv) ", p.Conns[c].From)
	}
	for _, c := range ln.Send {
		s += fmt.Sprintf("rank %d (send) ", p.Conns[c].To)
	}
	if s == "" {
		return "nothing"
	}
	return s[:len(s)-1]
}

// Run enqueues l on the device's stream, waits for it and checks its status.
func (l *Launch) Run(in, out cuda.DevicePtr) error {
	if err := l.Enqueue(nil, in, out); err != nil {
		return err
	}
	if err := l.d.stream.Synchronize(); err != nil {
		return fmt.Errorf("gpudev rank %d: %w", l.d.comm.Rank(), err)
	}
	return l.Check()
}

// SliceTrace is one slice as the kernel stamped it (%globaltimer, ns).
type SliceTrace struct {
	Lane, Op, Slice       int
	Start, DataStart, End uint64
	Channel, Rank         int
	Kind                  model.PrimKind
	Bytes                 int64
}

// Trace reads the stamps of the last finished launch (Prepare with trace).
func (l *Launch) Trace() ([]SliceTrace, error) {
	if l.trace == 0 {
		return nil, nil
	}
	total := 0
	for _, n := range l.slices {
		total += n
	}
	raw := make([]byte, total*kernels.TraceWords*8)
	if err := l.d.ctx.MemcpyDtoH(raw, l.trace); err != nil {
		return nil, fmt.Errorf("gpudev rank %d: read trace: %w", l.d.comm.Rank(), err)
	}
	var out []SliceTrace
	var sl []model.ProgSlice
	es := int64(l.p.Dtype.Size())
	for bi, li := range l.lanes {
		ln := &l.p.Lanes[li]
		for i := 0; i < l.slices[bi]; i++ {
			w := raw[(l.traceAt[bi]+i*kernels.TraceWords)*8:]
			id := le.Uint64(w)
			op, s := int(id>>8), int(id&0xff)
			t := SliceTrace{Lane: li, Op: op, Slice: s, Start: le.Uint64(w[8:]), DataStart: le.Uint64(w[16:]), End: le.Uint64(w[24:]),
				Channel: int(ln.Channel), Rank: int(ln.Rank)}
			if op < len(ln.Ops) {
				t.Kind = ln.Ops[op].Kind
				sl = l.p.Slices(ln.Ops[op], sl[:0])
				if s < len(sl) {
					t.Bytes = sl[s].Elems * es
				}
			}
			out = append(out, t)
		}
	}
	return out, nil
}

// laneFlags are the TwLane.flags of rank me's lane ln: kernels.LaneHostRecv
// when one of its receive connections has its buffer in host memory (SHM,
// or NET staged through host memory), kernels.LaneHostSend when one of
// its send connections has.
func (d *Device) laneFlags(me int, ln *model.ProgLane, keys []transport.Key) uint32 {
	var f uint32
	for _, ci := range ln.Recv {
		if l := d.Link(keys[ci].From, me); l == LinkSHM || l == LinkNet {
			f |= kernels.LaneHostRecv
		}
	}
	for _, ci := range ln.Send {
		if l := d.Link(me, keys[ci].To); l == LinkSHM || l == LinkNet {
			f |= kernels.LaneHostSend
		}
	}
	return f
}
