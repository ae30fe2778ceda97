package sim

import (
	"fmt"
	"math"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// GINCalib are the costs of GPU-initiated networking (GIN, NCCL 2.28's
// device API; see RunGin) besides the RDMA costs of IBCalib. Zero fields
// take their defaults.
type GINCalib struct {
	// IssueUs is the time a lane (the cooperating threads of a put) spends
	// issuing one put: reserving work-request slots, writing the work
	// requests and ringing the NIC's doorbell, or for a local peer writing
	// its descriptor. Puts of one lane are issued one after another; a
	// barrier's signals are issued together, for the price of one.
	// 0: 0.3, an assumption (a few stores to GPU memory and one posted
	// PCIe write to the doorbell page) until measured.
	IssueUs float64 `json:"issue_us,omitempty"`
	// LocalCopyGBps is the memory traffic (loads plus stores) with which
	// one context moves the payload of a put to a peer of its own host
	// (over NVLink or PCIe, as the topology's P2P path goes) or to
	// itself. A P2P put loads each byte and stores it into the peer's
	// memory, so it moves data at LocalCopyGBps/(load_cost +
	// remote_store_cost) of the Simple protocol. 0: simple.copy_GBps,
	// the rate of one thread block in the collectives' model.
	LocalCopyGBps float64 `json:"local_copy_GBps,omitempty"`
}

// issueUs is IssueUs with its default.
func (c *GINCalib) issueUs() float64 {
	if c.IssueUs == 0 {
		return 0.3
	}
	return c.IssueUs
}

// validate checks the fields' ranges (0 is always valid: the default).
func (c *GINCalib) validate(name string) error {
	for _, k := range []struct {
		name string
		v    float64
	}{{"gin.issue_us", c.IssueUs}, {"gin.local_copy_GBps", c.LocalCopyGBps}} {
		if math.IsNaN(k.v) || math.IsInf(k.v, 0) || k.v < 0 || k.v > 1e6 {
			return fmt.Errorf("calibration %q: %s = %v out of range [0, 1e6]", name, k.name, k.v)
		}
	}
	return nil
}

// GinOpKind is the kind of one operation of a GIN lane.
type GinOpKind uint8

// GIN operations (the device API of reference/gin.md).
const (
	// GinPut writes Bytes from the lane's rank into Peer's window on
	// Context. With SignalAdd > 0, Peer's signal Signal grows by SignalAdd
	// once this put's payload, and that of every earlier put of the rank
	// on the same context to the same peer, is there. With CounterInc,
	// the rank's own counter Counter grows by one once the source has
	// been consumed. The lane goes on once the put is issued.
	GinPut GinOpKind = iota
	// GinWaitSignal waits until the rank's signal Signal reaches Value.
	GinWaitSignal
	// GinWaitCounter waits until the rank's counter Counter reaches Value.
	GinWaitCounter
	// GinFlush waits until every put the rank issued on Context before it
	// has left its source buffer (it says nothing of arrival).
	GinFlush
	// GinBarrier is a barrier over all ranks made of the same primitives:
	// a zero-byte put with a signal increment on Signal to every other
	// rank (on Context), then a wait until the rank's own Signal reaches
	// Value (k*(ranks-1) for the k-th barrier on that signal).
	GinBarrier
	// GinDelay keeps the lane busy for DelayUs (computation).
	GinDelay
)

// String names the operation.
func (k GinOpKind) String() string {
	switch k {
	case GinPut:
		return "put"
	case GinWaitSignal:
		return "waitSignal"
	case GinWaitCounter:
		return "waitCounter"
	case GinFlush:
		return "flush"
	case GinBarrier:
		return "barrier"
	case GinDelay:
		return "delay"
	}
	return fmt.Sprintf("GinOpKind(%d)", int(k))
}

// GinOp is one operation of a GIN lane; the fields that apply depend on
// Kind (see the GinOpKind constants).
type GinOp struct {
	Kind    GinOpKind
	Peer    int
	Context int
	Bytes   int64
	// Signal is a signal slot: the peer's (put), the rank's own (waits,
	// barrier).
	Signal int
	// SignalAdd is a put's remote action: 0 none, 1 SignalInc, more
	// SignalAdd.
	SignalAdd uint64
	// Counter is a counter slot of the rank; a put increments it when
	// CounterInc is set.
	Counter    int
	CounterInc bool
	// Value is what a wait or a barrier waits for.
	Value   uint64
	DelayUs float64
}

// GinLane is a sequence of GIN operations run by one thread block of a
// rank.
type GinLane struct {
	Rank int
	Ops  []GinOp
}

// GinProgram is what the ranks of a GIN kernel do: its lanes run from
// time 0 (after the kernel launch) until each has run its last operation.
type GinProgram struct {
	NRanks int
	// Contexts is the number of GIN contexts: independent network queues,
	// one QP per context and peer (contexts 0..Contexts-1).
	Contexts int
	// Signals and Counters are the sizes of every rank's signal and
	// counter tables (all start at 0).
	Signals, Counters int
	Lanes             []GinLane
}

// Validate checks that every operation addresses existing ranks,
// contexts, signals and counters.
func (p *GinProgram) Validate() error {
	if p.NRanks < 1 {
		return fmt.Errorf("gin program: %d ranks", p.NRanks)
	}
	if p.Contexts < 1 || p.Contexts > 1024 {
		return fmt.Errorf("gin program: %d contexts: want 1..1024", p.Contexts)
	}
	if p.Signals < 0 || p.Counters < 0 {
		return fmt.Errorf("gin program: negative signal or counter table")
	}
	for li, l := range p.Lanes {
		if l.Rank < 0 || l.Rank >= p.NRanks {
			return fmt.Errorf("gin program: lane %d: rank %d outside %d ranks", li, l.Rank, p.NRanks)
		}
		for oi, op := range l.Ops {
			bad := func(format string, a ...any) error {
				return fmt.Errorf("gin program: lane %d (rank %d) op %d (%s): %s", li, l.Rank, oi, op.Kind, fmt.Sprintf(format, a...))
			}
			ctxOK := op.Context >= 0 && op.Context < p.Contexts
			sigOK := op.Signal >= 0 && op.Signal < p.Signals
			switch op.Kind {
			case GinPut:
				switch {
				case op.Peer < 0 || op.Peer >= p.NRanks:
					return bad("peer %d outside %d ranks", op.Peer, p.NRanks)
				case !ctxOK:
					return bad("context %d outside %d", op.Context, p.Contexts)
				case op.Bytes < 0:
					return bad("negative size %d", op.Bytes)
				case op.SignalAdd > 0 && !sigOK:
					return bad("signal %d outside %d", op.Signal, p.Signals)
				case op.CounterInc && (op.Counter < 0 || op.Counter >= p.Counters):
					return bad("counter %d outside %d", op.Counter, p.Counters)
				}
			case GinWaitSignal:
				if !sigOK {
					return bad("signal %d outside %d", op.Signal, p.Signals)
				}
			case GinWaitCounter:
				if op.Counter < 0 || op.Counter >= p.Counters {
					return bad("counter %d outside %d", op.Counter, p.Counters)
				}
			case GinFlush:
				if !ctxOK {
					return bad("context %d outside %d", op.Context, p.Contexts)
				}
			case GinBarrier:
				if !ctxOK || !sigOK {
					return bad("context %d or signal %d out of range", op.Context, op.Signal)
				}
			case GinDelay:
				if math.IsNaN(op.DelayUs) || op.DelayUs < 0 || op.DelayUs > 1e9 {
					return bad("delay %v us", op.DelayUs)
				}
			default:
				return bad("unknown operation")
			}
		}
	}
	return nil
}

// GinAlltoAllProgram is NCCL's GIN all-to-all example with bytesPerPeer
// bytes from every rank to every rank (itself included), spread over
// contexts thread blocks: block b of every rank uses context b and data
// signal b; it takes part in a barrier (on signal contexts+b), puts its
// share of the slice for each peer p (the ranks after its own first,
// itself last) into p's window at offset rank*size with SignalInc on
// signal b, waits until signal b has counted one put from every rank,
// and flushes.
func GinAlltoAllProgram(nRanks, contexts int, bytesPerPeer int64) (*GinProgram, error) {
	if nRanks < 1 || contexts < 1 || bytesPerPeer < 0 {
		return nil, fmt.Errorf("gin all-to-all: %d ranks, %d contexts, %d bytes per peer", nRanks, contexts, bytesPerPeer)
	}
	p := &GinProgram{NRanks: nRanks, Contexts: contexts, Signals: 2 * contexts}
	for r := 0; r < nRanks; r++ {
		for b := 0; b < contexts; b++ {
			part := bytesPerPeer / int64(contexts)
			if int64(b) < bytesPerPeer%int64(contexts) {
				part++
			}
			ops := make([]GinOp, 0, nRanks+3)
			ops = append(ops, GinOp{Kind: GinBarrier, Context: b, Signal: contexts + b, Value: uint64(nRanks - 1)})
			for i := 1; i <= nRanks; i++ {
				ops = append(ops, GinOp{Kind: GinPut, Peer: (r + i) % nRanks, Context: b, Bytes: part, Signal: b, SignalAdd: 1})
			}
			ops = append(ops, GinOp{Kind: GinWaitSignal, Signal: b, Value: uint64(nRanks)},
				GinOp{Kind: GinFlush, Context: b})
			p.Lanes = append(p.Lanes, GinLane{Rank: r, Ops: ops})
		}
	}
	return p, nil
}

// GinPutRecord is the history of one put of a GIN run (times in ps from
// the start of the lanes; Signaled and Counted are -1 when the put had no
// such action).
type GinPutRecord struct {
	Rank, Peer, Context, Lane int
	Bytes                     int64
	// Local says the payload went by a copy within the host (P2P path,
	// or to the rank itself) rather than through the NICs.
	Local bool
	// Seq numbers the puts of the rank on the context in issue order.
	Seq int
	// Signal and Counter are the slots of the actions (-1: none);
	// SignalAdd is what the put adds to the signal.
	Signal, Counter int
	SignalAdd       uint64
	// Issued: the put was issued (work requests posted); Started: its
	// queue (QP, or local copy queue) began it; Left: its payload had
	// left the source; Arrived: the payload was all in the peer's window;
	// Signaled: the peer's signal moved; Completed: the source side saw it
	// complete (what flush waits for); Counted: the local counter moved.
	Issued, Started, Left, Arrived, Signaled, Completed, Counted Time
}

// GinOpRecord is when one operation of a lane began and ended.
type GinOpRecord struct {
	Lane, Op   int
	Kind       GinOpKind
	Start, End Time
}

// GinResult is what a simulated GIN program produced.
type GinResult struct {
	// TimeUs is the launch cost plus KernelUs.
	TimeUs float64
	// KernelUs is the time until the last lane finished.
	KernelUs float64
	Events   uint64
	Puts     []GinPutRecord
	Ops      []GinOpRecord
	// Links lists the resources that carried traffic, in resource order.
	Links []LinkStats
	// Signals and Counters are every rank's final tables.
	Signals, Counters [][]uint64
}

// Event kinds of a GIN run, besides the fabric's evFlow.
const (
	ginWake     uint8 = 64 + iota // lane id
	ginLeft                       // put id: a zero-byte put's work request is done
	ginFree                       // queue id: the queue may start its next put
	ginArrive                     // put id: payload in the peer's window
	ginSignal                     // put id: the peer's signal moves
	ginComplete                   // put id: completion seen at the source
	ginCount                      // put id: the local counter moves
)

// ginRoute is the way of a put's payload.
type ginRoute struct {
	res []int32
	lat Time
	// ack is the round trip from the payload leaving the source to the
	// source seeing the completion: to the remote NIC and back (the
	// acknowledgement does not wait for the remote PCIe write), then the
	// completion written into the GPU's memory.
	ack   Time
	local bool    // a copy within the host (its queue is the context's copy queue)
	rate  float64 // local copies: data bytes/ps
	desc  string
}

type ginPut struct {
	rec  GinPutRecord
	add  uint64
	rt   *ginRoute
	q    int32
	ctxi int32
}

type ginQueue struct {
	busy bool
	pend []int32
}

// ginCtx tracks the completions of one rank's puts on one context.
type ginCtx struct {
	issued int
	done   []bool
	low    int // every put below low has completed
}

// Lane phases.
const (
	ginOpStart uint8 = iota
	ginBusy          // issuing or computing; a wake event comes
	ginWaiting       // waiting for a signal, counter or completions
	ginDone
)

type ginLane struct {
	rank    int32
	op      int
	phase   uint8
	start   Time
	flushTo int
	finish  Time
}

type ginRunner struct {
	m         *Machine
	p         *GinProgram
	q         queue
	fab       fabric
	now       Time
	events    uint64
	issuePs   Time
	msgPs     Time
	ib        *ibCost
	maxMsg    int64
	lanes     []ginLane
	rankLanes [][]int32
	sig, ctr  [][]uint64
	puts      []ginPut
	qs        []ginQueue
	qIndex    map[[3]int32]int32
	ctxs      []ginCtx
	routes    map[[3]int32]*ginRoute
	ops       []GinOpRecord
}

// RunGin simulates a GIN program on the machine. Puts to a rank of
// another host go through the NICs the GPUs use for the put's context
// (NCCL's per-channel NIC choice, channel = context) with GPUDirect RDMA
// and the RDMA costs of Calib.NetIB: the NIC reads the source over PCIe,
// moves it as work requests of at most max_msg_bytes on the context's QP
// to that peer, and the remote signal is an atomic work request queued
// behind them on the same QP, so it lands after the payload and after
// every earlier put of the QP. The put has completed at the source (flush,
// counters) when its last work request is acknowledged, a round trip
// after it left; the counter is then bumped by one more work request (the
// companion QP). Puts to a GPU of the same host go over the P2P path
// between the GPUs when NCCL would use P2P between them (else through the
// NIC), and puts to the rank itself within its memory: they are copies at
// Calib.GIN's local copy rate, in issue order on the context's copy queue
// (one per rank and context, as twinccl's proxy backend runs them on one
// stream per context), the signal stored after the payload. All payloads
// share the links with each other (max-min fairly).
func (m *Machine) RunGin(p *GinProgram) (*GinResult, error) {
	if p == nil {
		return nil, fmt.Errorf("sim: nil gin program")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if p.NRanks != m.Cluster.NRanks {
		return nil, fmt.Errorf("sim: gin program has %d ranks, the machine %d", p.NRanks, m.Cluster.NRanks)
	}
	c := m.calib
	x := &ginRunner{m: m, p: p, issuePs: usToPs(c.GIN.issueUs()), ib: newIBCost(&c.NetIB), maxMsg: c.NetIB.maxMsg(),
		qIndex: map[[3]int32]int32{}, routes: map[[3]int32]*ginRoute{}}
	x.msgPs = Time(math.Round(x.ib.msgPs))
	x.fab.res = make([]resource, len(m.res))
	copy(x.fab.res, m.res)
	for i := range x.fab.res {
		x.fab.res[i].flows = nil
	}
	// Resolve every route first: a topology that cannot carry the
	// program is an error before anything runs.
	for _, l := range p.Lanes {
		for _, op := range l.Ops {
			switch op.Kind {
			case GinPut:
				if _, err := x.route(l.Rank, op.Peer, op.Context); err != nil {
					return nil, err
				}
			case GinBarrier:
				for peer := 0; peer < p.NRanks; peer++ {
					if peer != l.Rank {
						if _, err := x.route(l.Rank, peer, op.Context); err != nil {
							return nil, err
						}
					}
				}
			}
		}
	}
	x.sig = make([][]uint64, p.NRanks)
	x.ctr = make([][]uint64, p.NRanks)
	for r := range x.sig {
		x.sig[r] = make([]uint64, p.Signals)
		x.ctr[r] = make([]uint64, p.Counters)
	}
	x.ctxs = make([]ginCtx, p.NRanks*p.Contexts)
	x.lanes = make([]ginLane, len(p.Lanes))
	x.rankLanes = make([][]int32, p.NRanks)
	for i, l := range p.Lanes {
		x.lanes[i].rank = int32(l.Rank)
		x.rankLanes[l.Rank] = append(x.rankLanes[l.Rank], int32(i))
	}
	for i := range x.lanes {
		x.advance(int32(i))
	}
	for !x.q.empty() {
		ev := x.q.pop()
		x.now = ev.t
		x.events++
		switch ev.kind {
		case evFlow:
			if !x.fab.current(ev.id, ev.val) {
				continue
			}
			pid := x.fab.flows[ev.id].owner
			x.fab.finish(&x.q, x.now, ev.id)
			x.left(pid)
		case ginWake:
			x.advance(ev.id)
		case ginLeft:
			x.left(ev.id)
		case ginFree:
			q := &x.qs[ev.id]
			q.busy = false
			if len(q.pend) > 0 {
				next := q.pend[0]
				q.pend = q.pend[1:]
				x.start(next)
			}
		case ginArrive:
			x.puts[ev.id].rec.Arrived = x.now
		case ginSignal:
			pu := &x.puts[ev.id]
			pu.rec.Signaled = x.now
			x.sig[pu.rec.Peer][pu.rec.Signal] += pu.add
			x.wakeRank(pu.rec.Peer)
		case ginComplete:
			pu := &x.puts[ev.id]
			pu.rec.Completed = x.now
			cx := &x.ctxs[pu.ctxi]
			cx.done[pu.rec.Seq] = true
			for cx.low < len(cx.done) && cx.done[cx.low] {
				cx.low++
			}
			if pu.rec.Counter >= 0 {
				d := Time(0)
				if !pu.rt.local {
					d = x.msgPs // the companion QP's atomic
				}
				x.q.push(x.now+d, ginCount, ev.id, 0)
			}
			x.wakeRank(pu.rec.Rank)
		case ginCount:
			pu := &x.puts[ev.id]
			pu.rec.Counted = x.now
			x.ctr[pu.rec.Rank][pu.rec.Counter]++
			x.wakeRank(pu.rec.Rank)
		}
	}
	var end Time
	var b strings.Builder
	stuck := 0
	for i := range x.lanes {
		l := &x.lanes[i]
		if l.phase != ginDone {
			if stuck < 4 {
				op := p.Lanes[i].Ops[l.op]
				fmt.Fprintf(&b, "; lane %d (rank %d) at op %d (%s", i, l.rank, l.op, op.Kind)
				switch op.Kind {
				case GinWaitSignal, GinBarrier:
					fmt.Fprintf(&b, " signal %d at %d of %d", op.Signal, x.sig[l.rank][op.Signal], op.Value)
				case GinWaitCounter:
					fmt.Fprintf(&b, " counter %d at %d of %d", op.Counter, x.ctr[l.rank][op.Counter], op.Value)
				}
				b.WriteString(")")
			}
			stuck++
			continue
		}
		end = max(end, l.finish)
	}
	if stuck > 0 {
		return nil, fmt.Errorf("sim: gin deadlock at %.3f us: %d lane(s) wait forever%s", float64(x.now)/psPerUs, stuck, b.String())
	}
	r := &GinResult{KernelUs: float64(end) / psPerUs, Events: x.events, Ops: x.ops, Signals: x.sig, Counters: x.ctr}
	r.TimeUs = r.KernelUs + c.LaunchUs
	r.Puts = make([]GinPutRecord, len(x.puts))
	for i := range x.puts {
		r.Puts[i] = x.puts[i].rec
	}
	for i := range x.fab.res {
		rs := &x.fab.res[i]
		if rs.bytes == 0 && rs.peak == 0 {
			continue
		}
		r.Links = append(r.Links, LinkStats{Name: rs.name, Type: m.resKind(int32(i)), CapGBps: rs.cap * 1e3,
			Bytes: rs.bytes, PeakGBps: rs.peak * 1e3})
	}
	return r, nil
}

// route returns (building it once) the way of a put from rank from to
// rank to on a context.
func (x *ginRunner) route(from, to, ctx int) (*ginRoute, error) {
	k := [3]int32{int32(from), int32(to), int32(ctx)}
	if rt, ok := x.routes[k]; ok {
		return rt, nil
	}
	rt, err := x.m.ginRoute(from, to, ctx)
	if err != nil {
		return nil, fmt.Errorf("sim: gin put %d->%d on context %d: %w", from, to, ctx, err)
	}
	x.routes[k] = rt
	return rt, nil
}

// ginRoute builds the way of a put (see RunGin).
func (m *Machine) ginRoute(from, to, ctx int) (*ginRoute, error) {
	if from < 0 || from >= len(m.rankNode) || to < 0 || to >= len(m.rankNode) {
		return nil, fmt.Errorf("rank out of range")
	}
	sp := &m.calib.Simple
	copyBps := m.calib.Simple.CopyGBps * 1e-3
	if v := m.calib.GIN.LocalCopyGBps; v > 0 {
		copyBps = v * 1e-3
	}
	na, nb := m.rankNode[from], m.rankNode[to]
	sa, sb := m.Cluster.Nodes[na].System, m.Cluster.Nodes[nb].System
	ga, gb := sa.GPUByRank(from), sb.GPUByRank(to)
	if ga == nil || gb == nil {
		return nil, fmt.Errorf("rank without a GPU on its node")
	}
	if from == to {
		return &ginRoute{local: true, rate: copyBps / (sp.loadCost() + 1), desc: "self"}, nil
	}
	if na == nb {
		if p2p, _, _ := sa.CheckP2P(ga, gb); p2p {
			rt := &route{w: 1}
			if err := m.linksToRoute(rt, ga.Path(gb), ga.Name()+" to "+gb.Name()); err != nil {
				return nil, err
			}
			return &ginRoute{res: rt.res, lat: rt.lat, local: true, rate: copyBps / (sp.loadCost() + sp.remoteStoreCost()),
				desc: "P2P/" + ga.Path(gb).Type.String()}, nil
		}
	}
	neta, err := sa.LocalNet(ga, ctx)
	if err != nil {
		return nil, err
	}
	netb, err := sb.LocalNet(gb, ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range []*model.Node{neta, netb} {
		if model.IsSocketNIC(n) {
			return nil, fmt.Errorf("GIN needs RDMA NICs: %s is a socket device", n.NET.Name)
		}
	}
	gdrA, err := sa.CheckGDR(ga, neta, true)
	if err != nil {
		return nil, err
	}
	gdrB, err := sb.CheckGDR(gb, netb, false)
	if err != nil {
		return nil, err
	}
	if gdrA == model.GDRDisabled || gdrB == model.GDRDisabled {
		return nil, fmt.Errorf("GIN needs GPUDirect RDMA between %s and %s and between %s and %s", ga.Name(), neta.NET.Name, netb.NET.Name, gb.Name())
	}
	rt := &route{w: 1, transport: TransportNET, gdr: true}
	if err := m.linksToRoute(rt, ga.Path(neta), ga.Name()+" to "+neta.Name()); err != nil {
		return nil, err
	}
	if err := m.fabricHop(rt, na, neta, nb, netb, ctx); err != nil {
		return nil, err
	}
	m.applyIB(rt, false)
	half := rt.lat // source GPU to the remote NIC
	if err := m.linksToRoute(rt, netb.Path(gb), netb.Name()+" to "+gb.Name()); err != nil {
		return nil, err
	}
	for _, id := range rt.res[len(rt.res)-len(netb.Path(gb).Links):] {
		if m.resType[id] == model.LinkNET {
			rt.lat -= m.res[id].lat // counted in the write latency already
		}
	}
	return &ginRoute{res: rt.res, lat: rt.lat, ack: 2 * half, desc: fmt.Sprintf("GIN/%s->%s", neta.NET.Name, netb.NET.Name)}, nil
}

// queue returns the queue of a put: the context's QP to the peer, or the
// rank's copy queue of the context for local puts.
func (x *ginRunner) queue(rank, peer, ctx int, local bool) int32 {
	k := [3]int32{int32(rank), int32(ctx), int32(peer)}
	if local {
		k[2] = -1
	}
	if q, ok := x.qIndex[k]; ok {
		return q
	}
	x.qs = append(x.qs, ginQueue{})
	q := int32(len(x.qs) - 1)
	x.qIndex[k] = q
	return q
}

// wakeRank resumes the waiting lanes of rank r.
func (x *ginRunner) wakeRank(r int) {
	for _, li := range x.rankLanes[r] {
		if x.lanes[li].phase == ginWaiting {
			x.advance(li)
		}
	}
}

// advance runs lane li until it has to wait.
func (x *ginRunner) advance(li int32) {
	l := &x.lanes[li]
	ops := x.p.Lanes[li].Ops
	r := int(l.rank)
	for l.op < len(ops) {
		op := &ops[l.op]
		if l.phase == ginOpStart {
			l.start = x.now
		}
		switch op.Kind {
		case GinPut:
			if l.phase == ginOpStart && x.issuePs > 0 {
				l.phase = ginBusy
				x.q.push(x.now+x.issuePs, ginWake, li, 0)
				return
			}
			ctr := -1
			if op.CounterInc {
				ctr = op.Counter
			}
			x.post(li, r, op.Peer, op.Context, op.Bytes, op.Signal, op.SignalAdd, ctr)
		case GinBarrier:
			if l.phase == ginOpStart && x.issuePs > 0 {
				l.phase = ginBusy
				x.q.push(x.now+x.issuePs, ginWake, li, 0)
				return
			}
			if l.phase != ginWaiting {
				for i := 1; i < x.p.NRanks; i++ {
					x.post(li, r, (r+i)%x.p.NRanks, op.Context, 0, op.Signal, 1, -1)
				}
				l.phase = ginWaiting
			}
			if x.sig[r][op.Signal] < op.Value {
				return
			}
		case GinWaitSignal:
			if x.sig[r][op.Signal] < op.Value {
				l.phase = ginWaiting
				return
			}
		case GinWaitCounter:
			if x.ctr[r][op.Counter] < op.Value {
				l.phase = ginWaiting
				return
			}
		case GinFlush:
			cx := &x.ctxs[r*x.p.Contexts+op.Context]
			if l.phase == ginOpStart {
				l.flushTo = cx.issued
			}
			if cx.low < l.flushTo {
				l.phase = ginWaiting
				return
			}
		case GinDelay:
			if l.phase == ginOpStart {
				if d := usToPs(op.DelayUs); d > 0 {
					l.phase = ginBusy
					x.q.push(x.now+d, ginWake, li, 0)
					return
				}
			}
		}
		x.ops = append(x.ops, GinOpRecord{Lane: int(li), Op: l.op, Kind: op.Kind, Start: l.start, End: x.now})
		l.op++
		l.phase = ginOpStart
	}
	l.phase = ginDone
	l.finish = x.now
}

// post issues a put: it joins its queue, and starts when the queue is
// free.
func (x *ginRunner) post(li int32, rank, peer, ctx int, bytes int64, sig int, add uint64, ctr int) {
	rt := x.routes[[3]int32{int32(rank), int32(peer), int32(ctx)}]
	ci := int32(rank*x.p.Contexts + ctx)
	cx := &x.ctxs[ci]
	if add == 0 {
		sig = -1
	}
	pu := ginPut{rt: rt, add: add, ctxi: ci, q: x.queue(rank, peer, ctx, rt.local),
		rec: GinPutRecord{Rank: rank, Peer: peer, Context: ctx, Lane: int(li), Bytes: bytes, Local: rt.local, Seq: cx.issued,
			Signal: sig, SignalAdd: add, Counter: ctr, Issued: x.now, Started: -1, Left: -1, Arrived: -1, Signaled: -1, Completed: -1, Counted: -1}}
	cx.issued++
	cx.done = append(cx.done, false)
	x.puts = append(x.puts, pu)
	id := int32(len(x.puts) - 1)
	q := &x.qs[pu.q]
	if q.busy {
		q.pend = append(q.pend, id)
		return
	}
	x.start(id)
}

// start begins put id on its (free) queue.
func (x *ginRunner) start(id int32) {
	pu := &x.puts[id]
	x.qs[pu.q].busy = true
	pu.rec.Started = x.now
	n := pu.rec.Bytes
	if n == 0 {
		d := Time(0)
		if !pu.rt.local {
			d = x.msgPs // a no-op work request
		}
		x.q.push(x.now+d, ginLeft, id, 0)
		return
	}
	var capB float64
	if pu.rt.local {
		capB = pu.rt.rate
	} else {
		wrs := (n + x.maxMsg - 1) / x.maxMsg
		capB = float64(n) / (float64(wrs) * x.ib.msgPs)
		if x.ib.qpBpps > 0 {
			capB = min(capB, x.ib.qpBpps)
		}
	}
	x.fab.start(&x.q, x.now, pu.rt.res, float64(n), float64(n), capB, 1, id)
}

// left handles the payload of put id having left its source: arrival,
// signal, completion and the queue's next put follow.
func (x *ginRunner) left(id int32) {
	pu := &x.puts[id]
	pu.rec.Left = x.now
	lat := pu.rt.lat
	x.q.push(x.now+lat, ginArrive, id, 0)
	free := x.now
	if pu.rt.local {
		if pu.add > 0 {
			// stored after the payload (a fence between): scheduled after
			// the arrival, at the same time at the earliest
			x.q.push(x.now+lat, ginSignal, id, 0)
		}
		x.q.push(x.now, ginComplete, id, 0)
	} else {
		if pu.add > 0 {
			free += x.msgPs // the atomic, behind the writes on the QP
			x.q.push(free+lat, ginSignal, id, 0)
		}
		x.q.push(free+pu.rt.ack, ginComplete, id, 0) // acknowledged
	}
	x.q.push(free, ginFree, pu.q, 0)
}
