package sim

import (
	"fmt"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// Actor phases.
const (
	phOpStart uint8 = iota // load the next primitive call
	phWait                 // wait for receive data and send credits
	phData                 // start the slice's transfers
	phFinish               // transfers running; then post
	phDone
)

// cop is the part of a primitive call (model.ProgOp) that the engine
// needs, packed in 16 bytes (buffer offsets do not change the timing).
type cop struct {
	n                  int32
	recvStep, sendStep uint32
	kind               model.PrimKind
	flags              uint8
}

// compactOps appends the packed form of ops to buf.
func compactOps(ops []model.ProgOp, buf []cop) []cop {
	for i := range ops {
		o := &ops[i]
		buf = append(buf, cop{n: o.N, recvStep: o.RecvStep, sendStep: o.SendStep, kind: o.Kind, flags: o.Flags})
	}
	return buf
}

// actor is one lane of the Program.
type actor struct {
	lane *model.ProgLane
	// ops are the lane's calls, packed (a window of the lane when
	// streamed)
	ops     []cop
	op      int // index into ops
	opBase  int // index of ops[0] in the whole lane (streamed lanes)
	nOps    int // primitive calls of the whole lane
	li      int // index of the lane among its rank's on its channel (streamed lanes)
	sl, nsl int
	phase   uint8
	waiting bool
	pending int32
	frac    float64 // share of the channel's thread block
	// kind and rate are the current call's primitive and copy rate (data
	// bytes per ps), kept here to spare the lane's ops on the hot path
	kind   model.PrimKind
	rate   float64
	remote int // sends that store into another GPU's memory
	// hostSends and hostRecvs count the connections whose data goes
	// through host memory (stores into it, loads from it)
	hostSends, hostRecvs int
	// remoteRecvs counts the receive connections whose data the lane loads
	// from the sender's memory (P2P read mode)
	remoteRecvs int
	// fenced says the current slice has paid its remote fence
	fenced bool
	start  Time // when the current slice's data and credits were there
	finish Time
	// cur is the current slice of the current call
	cur model.ProgSlice
	// cop is the current call (a copy: the lane's calls are cold)
	cop cop
}

// connState is the flow-control state of one connection as its two ends
// see it (the values are the visible ones: posts travel with latency).
type connState struct {
	tail, head, started uint64
	sender, recver      int32
	// lat, capB (bytes/ps, 0: none), res and w are the route's, kept
	// here to spare a pointer chase on the hot path
	lat    Time
	capB   float64
	w      float64
	res    []int32
	rt     *route
	bytes  int64
	wire   int64
	slices int64
	steps  uint64
}

// ConnStats is the traffic of one connection of a run.
type ConnStats struct {
	From, To, Channel int
	Transport         string
	Bytes             int64 // user data bytes
	WireBytes         int64 // bytes on the wire (LL/LL128 lines included)
	Slices            int64
	Steps             uint64
}

// LinkStats is the traffic of one link resource of a run.
type LinkStats struct {
	Name     string
	Type     string
	CapGBps  float64 // effective capacity
	Bytes    float64 // wire bytes carried
	PeakGBps float64 // largest sum of rates of its flows at any time
}

// Result is what a simulated collective produced.
type Result struct {
	// TimeUs is the predicted time of the call as nccl-tests measures it:
	// the launch cost plus the time until the last lane finished.
	TimeUs float64
	// KernelUs is the time from the start of the lanes to the last finish.
	KernelUs float64
	// Events is the number of events the engine processed.
	Events uint64
	// Slices is the number of slices executed over all lanes.
	Slices int64
	// Reshares is the number of fair-share recomputations.
	Reshares uint64
	Conns    []ConnStats
	// Links lists the resources that carried traffic, in resource order.
	Links []LinkStats
	// RankKernelUs is, per rank, the time from the start of the lanes to
	// the end of the rank's last lane.
	RankKernelUs []float64
	// Folded is the number of hosts the fast mode folded onto one to run
	// the call (their lanes, events and slices are not counted), 0 when the
	// call ran step-accurate.
	Folded int
	// Merged is the number of channels the fast mode ran as another,
	// identical one (0 when none or step-accurate).
	Merged int
	// Fast says, for a call simulated in the fast (or auto) mode, how it
	// was aggregated, or why it could not be and ran step-accurate
	// ("step-accurate: ..."); empty when the mode asked for step-accurate.
	Fast string
}

// runner is the state of one simulated Program.
type runner struct {
	m       *Machine
	p       *model.Program
	c       *Calib
	pc      *ProtoCalib
	q       queue
	fab     fabric
	actors  []actor
	conns   []connState
	now     Time
	events  uint64
	slices  int64
	esize   int64
	credits uint64
	stream  bool // LL/LL128: data streams through, receivers start on the first line
	opOv    Time
	slOv    Time
	copyBps float64 // bytes (loads + stores) per ps of a whole block
	// remoteCost is the cost of a store into a peer's memory in units of a
	// local load or store
	remoteCost float64
	// loadCost is the cost of a load in units of a local store;
	// hostLoad and hostStore those of loads from and stores into host
	// memory
	loadCost, hostLoad, hostStore float64
	// remoteLoad is the cost of a load from a peer's memory (read mode)
	remoteLoad float64
	// fence is the remote fence of a slice that stores into a peer's
	// memory; read says Simple P2P steps run in read mode
	fence   Time
	read    bool
	scratch []model.ProgSlice
	// rec, when set, receives every slice as it ends; steps numbers the
	// slices of every (rank, channel) for it.
	rec   func(*SliceEvent)
	steps []int64
	ev    SliceEvent
	// gen, when set, streams the lanes: each actor holds a window of at
	// most streamWindow calls of its lane and regenerates the lane into
	// genOps to move the window on.
	gen    *model.ProgGen
	genOps []model.ProgOp
	// total is the number of slices the run executes (for Progress).
	total int64
}

// streamWindow is the number of primitive calls a streamed lane keeps in
// memory at a time.
const streamWindow = 512

// SliceEvent is one slice a lane executed: one wait/post round of a
// primitive call on one rank and channel.
type SliceEvent struct {
	Rank, Channel int32
	// SendPeer and RecvPeer are the first peer the slice sends to and
	// receives from, -1 where it does not.
	SendPeer, RecvPeer int32
	Prim               model.PrimKind
	Proto              model.Protocol
	// Step numbers the slices of one rank on one channel in execution
	// order (the k-th slice sending from a to b on a channel pairs with
	// the k-th slice of b receiving from a there).
	Step  int64
	Bytes int64 // data bytes
	// Start is when the slice's data and send credits were there (the
	// slice's overhead follows); End is when it posted.
	Start, End Time
}

// Run simulates one Program on the machine and returns its predicted time
// and traffic. The Program must use the machine's ranks; its connections'
// channels select the NICs of network routes.
func (m *Machine) Run(p *model.Program) (*Result, error) {
	return m.RunRecord(p, nil)
}

// RunRecord is Run that also reports every slice to rec as it ends, in
// virtual time order of their ends (the event is reused: copy it to keep
// it). A nil rec records nothing.
func (m *Machine) RunRecord(p *model.Program, rec func(*SliceEvent)) (*Result, error) {
	return m.run(p, nil, rec)
}

// run is RunRecord with optional routes: routes[i], when routes is not
// nil, is the route of connection i instead of the machine's own (the
// fast mode folds a ring onto one host's resources this way).
func (m *Machine) run(p *model.Program, routes []*route, rec func(*SliceEvent)) (*Result, error) {
	if p == nil {
		return nil, fmt.Errorf("sim: nil program")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	return m.exec(p, routes, rec, nil, nil, nil)
}

// RunGen is RunRecord on the Program of a generator, streaming its lanes:
// every lane keeps at most a window of its primitive calls in memory, so
// that large jobs run in bounded memory. The result is the same as
// RunRecord(g.Program(), rec).
func (m *Machine) RunGen(g *model.ProgGen, rec func(*SliceEvent)) (*Result, error) {
	h := g.Header()
	if err := h.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	var nops []int
	var wins [][]cop
	var full []model.ProgOp
	for r := 0; r < h.NRanks; r++ {
		for _, ch := range g.Channels() {
			for i := 0; i < g.NumLanes(r, ch); i++ {
				l := g.Lane(r, ch, i, full)
				full = l.Ops
				for _, c := range append(l.Recv[:len(l.Recv):len(l.Recv)], l.Send...) {
					if c < 0 || int(c) >= len(h.Conns) {
						return nil, fmt.Errorf("sim: lane of rank %d channel %d uses connection %d outside %d", r, ch, c, len(h.Conns))
					}
				}
				wins = append(wins, compactOps(l.Ops[:min(len(l.Ops), streamWindow)], nil))
				l.Ops = nil
				h.Lanes = append(h.Lanes, l)
				nops = append(nops, len(full))
			}
		}
	}
	return m.exec(h, nil, rec, g, nops, wins)
}

// exec runs a checked Program (lanes streamed when gen is set: nops then
// gives the length of each whole lane and wins its first window of calls).
func (m *Machine) exec(p *model.Program, routes []*route, rec func(*SliceEvent), gen *model.ProgGen, nops []int, wins [][]cop) (*Result, error) {
	if p.NRanks != m.Cluster.NRanks {
		return nil, fmt.Errorf("sim: program has %d ranks, the machine %d", p.NRanks, m.Cluster.NRanks)
	}
	x := &runner{m: m, p: p, c: m.calib, esize: int64(p.Dtype.Size()), credits: uint64(p.Credits), rec: rec, gen: gen}
	if rec != nil {
		x.steps = make([]int64, p.NRanks*max(p.NChannels, 1))
	}
	x.pc = x.c.Proto(p.Proto)
	x.stream = p.Proto != model.ProtoSimple
	x.opOv = usToPs(x.pc.OpOverheadUs)
	x.slOv = usToPs(x.pc.SliceOverheadUs)
	x.copyBps = x.pc.CopyGBps * 1e-3
	x.remoteCost = x.pc.remoteStoreCost()
	x.loadCost = x.pc.loadCost()
	x.hostLoad = x.pc.hostLoadCost()
	x.hostStore = x.pc.hostStoreCost()
	x.remoteLoad = x.pc.remoteLoadCost()
	x.fence = usToPs(x.pc.RemoteFenceUs)
	x.read = p.Proto == model.ProtoSimple && x.c.p2pRead(p.Coll)
	x.fab.res = make([]resource, len(m.res))
	copy(x.fab.res, m.res)
	for i := range x.fab.res {
		x.fab.res[i].flows = nil
	}
	x.conns = make([]connState, len(p.Conns))
	for i, cn := range p.Conns {
		var rt *route
		if routes != nil {
			rt = routes[i]
		} else {
			var err error
			if rt, err = m.route(int(cn.From), int(cn.To), int(cn.Channel)); err != nil {
				return nil, err
			}
		}
		x.conns[i] = connState{sender: -1, recver: -1, rt: rt, lat: rt.lat, capB: rt.capGBps * 1e-3, w: rt.w, res: rt.res}
	}
	x.actors = make([]actor, len(p.Lanes))
	type rc struct{ r, c int32 }
	perBlock := map[rc]int{}
	for i := range p.Lanes {
		perBlock[rc{p.Lanes[i].Rank, p.Lanes[i].Channel}]++
	}
	seen := map[rc]int{}
	for i := range p.Lanes {
		l := &p.Lanes[i]
		a := &x.actors[i]
		a.lane = l
		a.frac = 1
		a.nOps = len(l.Ops)
		if gen != nil {
			a.ops = wins[i]
		} else {
			a.ops = compactOps(l.Ops, make([]cop, 0, len(l.Ops)))
		}
		k := rc{l.Rank, l.Channel}
		if gen != nil {
			a.nOps = nops[i]
			a.li = seen[k]
		}
		if n := perBlock[k]; n == 2 && p.Algo == model.AlgoTree { // reduce-up and broadcast-down groups
			if seen[k] == 0 {
				a.frac = x.pc.ReduceFrac
			} else {
				a.frac = 1 - x.pc.ReduceFrac
			}
		} else if n >= 2 { // p2p: the block's warps split between directions
			a.frac = 1 / float64(n)
		}
		seen[k]++
		for _, c := range l.Send {
			x.conns[c].sender = int32(i)
			switch rt := x.conns[c].rt; {
			case rt.hostSend:
				a.hostSends++
			case x.read && rt.transport == TransportP2P:
				// read mode: the sender stores into its own memory
			case rt.transport != TransportNET && len(rt.res) > 0:
				a.remote++
			}
		}
		for _, c := range l.Recv {
			x.conns[c].recver = int32(i)
			rt := x.conns[c].rt
			switch {
			case rt.hostRecv:
				a.hostRecvs++
			case x.read && rt.transport == TransportP2P && len(rt.res) > 0:
				a.remoteRecvs++
			}
		}
	}
	if st := usToPs(x.pc.StartUs); st > 0 {
		for i := range x.actors {
			x.q.push(st, evWake, int32(i), 0)
		}
	} else {
		for i := range x.actors {
			x.advance(int32(i))
		}
	}
	if m.Progress != nil {
		spc := int64(1)
		if p.Proto == model.ProtoSimple {
			spc = int64(p.SlicesPerChunk)
		}
		for i := range x.actors {
			x.total += int64(x.actors[i].nOps) * spc
		}
	}
	for !x.q.empty() {
		ev := x.q.pop()
		x.now = ev.t
		x.events++
		if x.events&0xffff == 0 && m.Progress != nil {
			m.Progress(x.slices, x.total)
		}
		switch ev.kind {
		case evWake:
			x.advance(ev.id)
		case evFlow:
			if !x.fab.current(ev.id, ev.val) {
				continue
			}
			owner := x.fab.flows[ev.id].owner
			x.fab.finish(&x.q, x.now, ev.id)
			a := &x.actors[owner]
			a.pending--
			if a.pending == 0 {
				x.advance(owner)
			}
		case evTail:
			c := &x.conns[ev.id]
			if ev.val > c.tail {
				c.tail = ev.val
			}
			x.wake(c.recver)
		case evStarted:
			c := &x.conns[ev.id]
			if ev.val > c.started {
				c.started = ev.val
			}
			x.wake(c.recver)
		case evHead:
			c := &x.conns[ev.id]
			if ev.val > c.head {
				c.head = ev.val
			}
			x.wake(c.sender)
		}
	}
	var end Time
	for i := range x.actors {
		a := &x.actors[i]
		if a.phase != phDone {
			return nil, x.deadlock()
		}
		end = max(end, a.finish)
	}
	return x.result(end), nil
}

func (x *runner) wake(ai int32) {
	if ai >= 0 && x.actors[ai].waiting {
		x.advance(ai)
	}
}

// deadlock describes the first blocked lanes.
func (x *runner) deadlock() error {
	var b strings.Builder
	n := 0
	for i := range x.actors {
		a := &x.actors[i]
		if a.phase == phDone {
			continue
		}
		if n < 4 {
			fmt.Fprintf(&b, "; lane %d (rank %d channel %d) blocked at op %d slice %d", i, a.lane.Rank, a.lane.Channel, a.opBase+a.op, a.sl)
		}
		n++
	}
	return fmt.Errorf("sim: deadlock at %.3f us: %d lane(s) cannot progress%s", float64(x.now)/psPerUs, n, b.String())
}

// wireBytes is what n data bytes occupy on the wire with the protocol.
func (x *runner) wireBytes(n int64) int64 {
	switch x.p.Proto {
	case model.ProtoLL:
		return (n + model.LLLineData - 1) / model.LLLineData * model.LLLineBytes
	case model.ProtoLL128:
		return (n + model.LL128LineData - 1) / model.LL128LineData * model.LL128LineBytes
	}
	return n
}

// units is the memory traffic per data byte of a primitive call: its
// loads and stores, plus the reduction's extra cost per extra source.
func (x *runner) units(a *actor, k model.PrimKind, flags uint8) float64 {
	l := a.lane
	srcs, dsts := 0, 0
	hostSrcs, remoteSrcs := 0, 0
	if k.Receives() {
		srcs += len(l.Recv)
		hostSrcs, remoteSrcs = a.hostRecvs, a.remoteRecvs
	}
	if k.ReadsInput() || (k == model.PrimSend && flags&model.PrimFromOutput != 0) {
		srcs++
	}
	remote, host := 0, 0
	if k.Sends() {
		dsts += len(l.Send) - a.remote - a.hostSends
		remote, host = a.remote, a.hostSends
	}
	if k.WritesOutput() {
		dsts++
	}
	u := x.loadCost*float64(srcs-hostSrcs-remoteSrcs) + x.hostLoad*float64(hostSrcs) + x.remoteLoad*float64(remoteSrcs) + float64(dsts) +
		x.remoteCost*float64(remote) + x.hostStore*float64(host)
	if k.Receives() && k.ReadsInput() && srcs > 1 { // reductions
		u += x.pc.ReduceCost * float64(srcs-1)
	}
	return max(u, 0.05)
}

// advance runs actor ai until it has to wait.
func (x *runner) advance(ai int32) {
	a := &x.actors[ai]
	a.waiting = false
	l := a.lane
	for {
		switch a.phase {
		case phOpStart:
			if a.op >= len(a.ops) {
				if a.opBase+len(a.ops) < a.nOps {
					x.slide(a)
					continue
				}
				a.phase = phDone
				a.finish = x.now
				return
			}
			a.cop = a.ops[a.op]
			op := &a.cop
			x.scratch = x.p.Slices(model.ProgOp{Kind: op.kind, N: op.n, RecvStep: op.recvStep, SendStep: op.sendStep}, x.scratch[:0])
			a.nsl = len(x.scratch)
			a.cur = x.scratch[0]
			a.kind = op.kind
			a.rate = x.copyBps * a.frac / x.units(a, op.kind, op.flags) // data bytes per ps
			a.sl = 0
			a.phase = phWait
			if x.opOv > 0 {
				x.q.push(x.now+x.opOv, evWake, ai, 0)
				return
			}
		case phWait:
			s := &a.cur
			need := uint64(s.Steps)
			if a.kind.Receives() {
				for _, c := range l.Recv {
					cs := &x.conns[c]
					if x.stream {
						if cs.started < uint64(s.RecvStep)+need {
							a.waiting = true
							return
						}
					} else if cs.tail < uint64(s.RecvStep)+need {
						a.waiting = true
						return
					}
				}
			}
			if a.kind.Sends() {
				for _, c := range l.Send {
					if x.conns[c].head+x.credits < uint64(s.SendStep)+need {
						a.waiting = true
						return
					}
				}
			}
			a.phase = phData
			a.start = x.now
			if x.slOv > 0 {
				x.q.push(x.now+x.slOv, evWake, ai, 0)
				return
			}
		case phData:
			x.startSlice(ai, a)
			a.phase = phFinish
			if a.pending > 0 {
				return
			}
		case phFinish:
			s := &a.cur
			need := uint64(s.Steps)
			if x.stream && a.kind.Receives() {
				for _, c := range l.Recv {
					if x.conns[c].tail < uint64(s.RecvStep)+need {
						a.waiting = true
						return
					}
				}
			}
			if x.fence > 0 && !a.fenced && a.remote > 0 && a.kind.Sends() && s.Elems > 0 {
				// the fence waits for the slice's stores into the peers
				a.fenced = true
				x.q.push(x.now+x.fence, evWake, ai, 0)
				return
			}
			a.fenced = false
			x.post(a, s)
			if x.rec != nil {
				x.record(a, a.kind, s)
			}
			x.slices++
			a.sl++
			if a.sl < a.nsl {
				// The next slice of the call (recomputed: the actor keeps
				// only the current one).
				op := &a.cop
				x.scratch = x.p.Slices(model.ProgOp{Kind: op.kind, N: op.n, RecvStep: op.recvStep, SendStep: op.sendStep}, x.scratch[:0])
				a.cur = x.scratch[a.sl]
				a.phase = phWait
			} else {
				a.op++
				a.phase = phOpStart
			}
		default:
			return
		}
	}
}

// slide moves the window of a streamed lane to its next calls.
func (x *runner) slide(a *actor) {
	l := a.lane
	full := x.gen.Lane(int(l.Rank), int(l.Channel), a.li, x.genOps)
	x.genOps = full.Ops
	a.opBase += len(a.ops)
	a.ops = compactOps(full.Ops[a.opBase:min(a.opBase+streamWindow, len(full.Ops))], a.ops[:0])
	a.op = 0
}

// startSlice starts the transfers of the current slice of actor ai.
func (x *runner) startSlice(ai int32, a *actor) {
	l := a.lane
	s := &a.cur
	a.pending = 0
	data := s.Elems * x.esize
	sends := a.kind.Sends()
	if sends && x.stream {
		for _, c := range l.Send {
			cs := &x.conns[c]
			x.q.push(x.now+cs.lat, evStarted, c, uint64(s.SendStep)+uint64(s.Steps))
		}
	}
	if data <= 0 {
		return
	}
	rate := a.rate
	if sends {
		wire := x.wireBytes(data)
		scale := float64(wire) / float64(data)
		eff := x.pc.LinkEff
		for _, c := range l.Send {
			cs := &x.conns[c]
			capW := rate * scale
			if cs.capB > 0 {
				capW = min(capW, cs.capB*scale)
			}
			// A protocol efficiency below one makes its wire bytes occupy
			// the links longer; the links still account the true bytes.
			x.fab.start(&x.q, x.now, cs.res, float64(wire)/eff, float64(wire), capW/eff, cs.w, ai)
			a.pending++
		}
		return
	}
	x.fab.start(&x.q, x.now, nil, float64(data), float64(data), rate, 1, ai)
	a.pending++
}

// post publishes the end of a slice: tails (and data) to the receivers,
// heads (credits) back to the senders.
func (x *runner) post(a *actor, s *model.ProgSlice) {
	l := a.lane
	need := uint64(s.Steps)
	if a.kind.Sends() {
		data := s.Elems * x.esize
		for _, c := range l.Send {
			cs := &x.conns[c]
			cs.bytes += data
			cs.wire += x.wireBytes(data)
			cs.slices++
			cs.steps += need
			x.q.push(x.now+cs.lat, evTail, c, uint64(s.SendStep)+need)
		}
	}
	if a.kind.Receives() {
		for _, c := range l.Recv {
			cs := &x.conns[c]
			x.q.push(x.now+cs.lat, evHead, c, uint64(s.RecvStep)+need)
		}
	}
}

// record reports the slice that actor a just posted.
func (x *runner) record(a *actor, kind model.PrimKind, s *model.ProgSlice) {
	l := a.lane
	e := &x.ev
	*e = SliceEvent{Rank: l.Rank, Channel: l.Channel, SendPeer: -1, RecvPeer: -1, Prim: kind, Proto: x.p.Proto,
		Bytes: s.Elems * x.esize, Start: a.start, End: x.now}
	if kind.Sends() && len(l.Send) > 0 {
		e.SendPeer = x.p.Conns[l.Send[0]].To
	}
	if kind.Receives() && len(l.Recv) > 0 {
		e.RecvPeer = x.p.Conns[l.Recv[0]].From
	}
	if k := int(l.Rank)*max(x.p.NChannels, 1) + int(l.Channel); k >= 0 && k < len(x.steps) {
		e.Step = x.steps[k]
		x.steps[k]++
	}
	x.rec(e)
}

func (x *runner) result(end Time) *Result {
	r := &Result{
		KernelUs: float64(end) / psPerUs,
		Events:   x.events,
		Slices:   x.slices,
		Reshares: x.fab.reshares,
	}
	r.TimeUs = r.KernelUs + x.c.LaunchUs
	r.RankKernelUs = make([]float64, x.p.NRanks)
	for i := range x.actors {
		a := &x.actors[i]
		if rk := int(a.lane.Rank); rk >= 0 && rk < len(r.RankKernelUs) {
			r.RankKernelUs[rk] = max(r.RankKernelUs[rk], float64(a.finish)/psPerUs)
		}
	}
	for i, cn := range x.p.Conns {
		cs := &x.conns[i]
		r.Conns = append(r.Conns, ConnStats{From: int(cn.From), To: int(cn.To), Channel: int(cn.Channel),
			Transport: cs.rt.transport.String(), Bytes: cs.bytes, WireBytes: cs.wire, Slices: cs.slices, Steps: cs.steps})
	}
	for i := range x.fab.res {
		rs := &x.fab.res[i]
		if rs.bytes == 0 && rs.peak == 0 {
			continue
		}
		r.Links = append(r.Links, LinkStats{Name: rs.name, Type: x.m.resKind(int32(i)), CapGBps: rs.cap * 1e3,
			Bytes: rs.bytes, PeakGBps: rs.peak * 1e3})
	}
	return r
}

// LinkBytesByName sums the wire bytes of the result's links per name.
func (r *Result) LinkBytesByName() map[string]float64 {
	out := map[string]float64{}
	for _, l := range r.Links {
		out[l.Name] += l.Bytes
	}
	return out
}
