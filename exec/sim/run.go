package sim

import (
	"cmp"
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

// cop is a run of primitive calls (model.ProgOp) that the engine runs
// alike: reps calls of the same primitive, flags and element count whose
// steps follow one another (each call starts where the previous one's
// steps end, as the generators number them). recvStep and sendStep are
// those of the first call. Buffer offsets do not change the timing, so a
// ring lane of thousands of calls packs into a handful of runs.
type cop struct {
	n                  int32
	recvStep, sendStep uint32
	kind               model.PrimKind
	flags              uint8
	reps               uint16
}

// maxReps is the most calls one run holds.
const maxReps = 1<<16 - 1

// compactOps appends the runs of ops to buf, at most maxRuns of them
// (maxRuns <= 0: no limit), and returns buf with the number of calls of
// ops that the appended runs hold. per is the number of steps one call
// consumes in each direction it uses (Program.OpSteps).
func compactOps(ops []model.ProgOp, per uint32, buf []cop, maxRuns int) ([]cop, int) {
	first := len(buf)
	for i := range ops {
		o := &ops[i]
		if k := len(buf); k > first {
			r := &buf[k-1]
			if r.kind == o.Kind && r.flags == o.Flags && r.n == o.N && r.reps < maxReps {
				reps := uint32(r.reps)
				rs, ss := r.recvStep, r.sendStep
				if o.Kind.Receives() {
					rs += reps * per
				}
				if o.Kind.Sends() {
					ss += reps * per
				}
				if o.RecvStep == rs && o.SendStep == ss {
					r.reps++
					continue
				}
			}
		}
		if maxRuns > 0 && len(buf)-first == maxRuns {
			return buf, i
		}
		buf = append(buf, cop{n: o.N, recvStep: o.RecvStep, sendStep: o.SendStep, kind: o.Kind, flags: o.Flags, reps: 1})
	}
	return buf, len(ops)
}

// actor is the state of one lane of the Program that its every slice
// touches, in one 64-byte cache line; the rest is in actorCold.
type actor struct {
	pending int32 // transfers of the current slice in flight
	// opR and opS are the current call's first steps; n its element count
	// (0 when negative)
	opR, opS uint32
	n        int32
	// the lane's connections: runner.cids[rb:sb] are those it receives
	// from, runner.cids[sb:se] those it sends to
	rb, sb, se int32
	// rep is the current call within the current run of calls, which
	// holds reps; sl is the current slice of the call
	rep, reps, sl uint16
	phase         uint8
	// fenced says the current slice has paid its remote fence
	fenced bool
	// hostSend says some send connection is a SHM one, its buffer in host
	// memory (HostFenceUs); proxySend that one goes through a socket
	// proxy (SocketCalib.PostFenceUs)
	hostSend, proxySend bool
	// kind is the current call's primitive; recvs and sends say whether
	// it receives and sends
	kind         model.PrimKind
	recvs, sends bool
	// remote says the lane stores into another GPU's memory; hostRecv
	// that it loads what it receives from host memory; p2pSend that it
	// sends to another GPU over P2P, in either mode (ForwardUs)
	remote, hostRecv, p2pSend bool
	// relay says the lane receives from one GPU and sends to another over
	// P2P (a ring of three or more ranks): what it posts while it
	// receives reaches its receiver RelayUs late, after RelayHoldUs
	relay bool
	// turned says the lane's last slice with data stored into a SHM
	// connection's host memory: its next receive from host memory pays
	// HostTurnUs
	turned bool
	// slice is the number of elements of each slice of the current call
	slice int64
	// rate is the current call's copy rate (data bytes per ps)
	rate float64
}

// elems is the number of elements of the current slice: the call cut as
// model.Program.Slices does (Simple: SlicesPerChunk slices of slice
// elements, the last ones possibly short or empty; LL, LL128: one).
func (a *actor) elems() int64 {
	return max(0, min(a.slice, int64(a.n)-int64(a.sl)*a.slice))
}

// actorCold is the state of a lane that its calls, not its slices, use.
type actorCold struct {
	// ops are the lane's calls in runs (a window of the lane when
	// streamed); op indexes them
	ops []cop
	op  int
	// opBase is the index in the whole lane of the first call of the
	// current run, winEnd that of the first call after the window, nOps
	// the number of calls of the whole lane
	opBase, winEnd, nOps int
	li                   int     // index of the lane among its rank's on its channel (streamed lanes)
	frac                 float64 // share of the channel's thread block
	remote               int     // sends that store into another GPU's memory
	// treeGroup says which of a tree rank's two groups of threads the
	// lane is (treeUp, treeDown), or neither (0)
	treeGroup int8
	// hostSends and hostRecvs count the connections whose data goes
	// through host memory (stores into it, loads from it)
	hostSends, hostRecvs int
	// remoteRecvs counts the receive connections whose data the lane loads
	// from the sender's memory (P2P read mode)
	remoteRecvs int
	// direct says every call of the lane pays DirectUs before its first
	// primitive (see Machine.exec)
	direct bool
	// kinds has bit k set once the current call ran a primitive of kind k
	// (FirstOpUs)
	kinds uint16
	// shm says the lane sends or receives through SHM host memory
	// (HostStartUs)
	shm bool
	// sent is what the lane sends to each of its send connections, added
	// up one run of calls at a time (a call's slices post the same
	// data to every send connection)
	sent connTraffic
	// start is when the current slice began: when the lane turned to it,
	// before it waited for its data and credits, as the kernel stamps it,
	// and data when they were there (kept for the record only)
	start, data Time
	finish      Time
	lane        *model.ProgLane
	// spanR and spanS are the steps one call of the lane consumes on its
	// receive and send connections; offR and offS the step offsets of the
	// current call of a loop (the call index times the span)
	spanR, spanS uint32
	offR, offS   uint32
}

// recvConn is the receiving end of a connection: the steps its receiver
// sees (posts travel with latency).
type recvConn struct {
	tail, started uint64
	lat           Time
	recver        int32
	// res and nres are the route's recvRes in runner.resIDs (nres 0:
	// none, the receiver's loads cross no link); capB and w the route's,
	// as in sendConn
	res, nres int32
	capB, w   float64
	// blocked says the receiver waits for this connection's data: only
	// then does a post that reaches it resume the receiver
	blocked bool
}

// sendConn is the sending end of a connection, in one 64-byte cache
// line: the credits its sender sees and what its slices need of the route
// (lat, capB in bytes/ps with 0 for none, w, ib and the resources
// runner.resIDs[res:res+nres] are the route's, kept here to spare a
// pointer chase on the hot path).
type sendConn struct {
	head      uint64
	lat       Time
	capB      float64
	w         float64
	ib        *ibCost
	res, nres int32
	sender    int32
	// proxyFrom and proxyTo are the ranks whose socket proxy threads
	// carry the connection's slices, -1 when none do
	proxyFrom, proxyTo int32
	// blocked says the sender waits for this connection's credits
	blocked bool
	// seenTail and seenStart are when the receiver sees the last tail
	// (and, LL and LL128, the last slice's first lines) posted: a
	// sender's posts become visible in the order it made them
	seenTail, seenStart Time
}

// connTraffic is the traffic of a connection, or what a lane sends to
// each of its send connections (its steps are its slices times the steps
// of a slice).
type connTraffic struct {
	bytes, wire, slices int64
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
	// LoopCalls is the number of timed calls of the back-to-back loop the
	// result comes from (Machine.LoopCalls; 0: one isolated call). TimeUs,
	// KernelUs, RankKernelUs and the traffic are then per call.
	LoopCalls int
}

// runner is the state of one simulated Program.
type runner struct {
	m    *Machine
	p    *model.Program
	nvls bool // p is an NVLS or NVLS tree Program (nvls.go)
	c    *Calib
	pc   *ProtoCalib
	q    *queue
	fab  *fabric
	// base is added to the actor and connection ids of the events and
	// flows this runner schedules: runners of concurrent calls share one
	// queue and fabric (Job), each with its own range of ids; 0 alone
	base int32
	// left is the number of lanes not done
	left   int
	actors []actor
	cold   []actorCold
	// rc and sc are the two ends of every connection, rt its route
	rc []recvConn
	sc []sendConn
	rt []*route
	// lineEff is, per connection, the efficiency its wire traffic moves
	// at on its links: the protocol's LinkEff over P2P, its HostLinkEff
	// through host memory and the network
	lineEff []float64
	// cids holds the connections of every lane (see actor.rb)
	cids []int32
	// resIDs holds the resources of every connection's route
	resIDs  []int32
	now     Time
	events  uint64
	slices  int64
	esize   int64
	credits uint64
	proto   model.Protocol
	stream  bool // LL/LL128: data streams through, receivers start on the first line
	// spc and sps are the slices of a call and the steps of a slice;
	// stepElems the elements of a step (Simple)
	spc, sps  int64
	stepElems int64
	// per is the number of steps a call consumes (Program.OpSteps)
	per  uint32
	opOv Time
	slOv Time
	// directOv is DirectUs, paid at the start of every call by the lanes
	// of a Simple collective whose calls start with a direct primitive
	directOv Time
	// firstOv is FirstOpUs and ThreadOpUs on the block's threads, paid
	// by the first call of each primitive kind in a call of a collective;
	// threadOv is ThreadCallUs on them, paid at the start of every call
	// of a collective by every lane
	firstOv, threadOv Time
	// collOv is the collective's CollUs, paid at the start of every call
	// by every lane
	collOv Time
	// hostStart is HostStartUs, paid at the start of every call by the
	// lanes with a connection through SHM host memory
	hostStart Time
	hostLat   Time // HostLoadUs
	// hostTurn is HostTurnUs (SHM lanes that receive after they sent)
	hostTurn Time
	// emptyOv is EmptySliceUs (Simple slices without data of SHM lanes)
	emptyOv Time
	// hostRound is the wait of every further round of loads of an LL slice
	// received from host memory (HostRoundUs), roundThreads the block's
	// threads that load a line each per round and roundLines the lines a
	// thread may have in flight (HostRoundLines)
	hostRound    Time
	roundThreads float64
	roundLines   int64
	copyBps      float64 // bytes (loads + stores) per ps of a whole block
	// remoteCost is the cost of a store into a peer's memory in units of a
	// local load or store
	remoteCost float64
	// loadCost is the cost of a load in units of a local store;
	// hostLoad and hostStore those of loads from and stores into host
	// memory
	loadCost, hostLoad, hostStore float64
	// recvLoad is the cost of a load from the lane's own receive buffer
	// in GPU memory (ProtoCalib.RecvLoadCost).
	recvLoad float64
	// remoteLoad is the cost of a load from a peer's memory (read mode)
	remoteLoad float64
	// hostFence is the fence of a Simple slice that stores into a SHM
	// connection's host memory (HostFenceUs); postFence that of an LL or
	// LL128 slice sent through a socket proxy (SocketCalib.PostFenceUs)
	hostFence, postFence Time
	// fence is the remote fence of a slice that stores into a peer's
	// memory, forward what a step that receives and sends to a peer GPU
	// adds to it (ForwardUs); read says Simple P2P steps run in read mode
	fence, forward Time
	// relay is how much later than its link's latency what a relaying
	// lane posts while it receives is seen (RelayUs); relayHold what such
	// a step holds the lane (RelayHoldUs)
	relay, relayHold Time
	read             bool
	// rec, when set, receives every slice as it ends; steps numbers the
	// slices of every (rank, channel) for it.
	rec   func(*SliceEvent)
	steps []int64
	ev    SliceEvent
	// gen, when set, streams the lanes: each actor holds a window of at
	// most window runs of calls of its lane and regenerates the lane into
	// genOps to move the window on.
	gen    *model.ProgGen
	genOps []model.ProgOp
	window int
	// total is the number of slices the run executes (for Progress).
	total int64
	// loop is the back-to-back loop being run (nil: one call).
	loop *loopState
	// Socket proxy threads (SocketCalib): proxySendOp and proxyRecvOp
	// are the fixed times of an operation (ps), proxyPs the time per byte
	// copied; proxyFree is when each rank's proxy is next free,
	// proxyRecv[c] the receive operations of connection c on their way to
	// its receiver's proxy (their durations, in order)
	proxySendOp, proxyRecvOp float64
	// recvPost is the part of proxyRecvOp (ps) a receive operation can
	// spend before its message arrives (SocketCalib.RecvPostUs), from
	// recvReady[c] on: when connection c's previous receive operation
	// ended, or its call's operation began (SerialCalls)
	recvPost float64
	// recvConn is the part of proxyRecvOp (ps), at its end, that holds
	// the operation's connection (recvReady) but not its proxy
	// (SocketCalib.RecvConnUs)
	recvConn  float64
	recvReady []Time
	// payloadOp is the further time (ps) a message costs each proxy
	// when its payload is not inline (SocketCalib.PayloadOpUs), and
	// payloadSendOp what it costs its sender's on top
	// (SocketCalib.PayloadSendOpUs)
	payloadOp, payloadSendOp float64
	// proxySimple is the latency a Simple slice adds on a socket
	// connection (SocketCalib.SimpleUs; 0 for LL and LL128)
	proxySimple Time
	proxyPs     float64
	// flagPs is the send proxy's time per wire byte to check an LL or
	// LL128 slice's flags (SocketCalib.FlagCheckGBps; 0 for Simple)
	flagPs float64
	// duplex multiplies the copy time per byte of the proxy of a rank
	// that has both sent (proxySent) and received (proxyRcvd) slices
	// through sockets in the run (SocketCalib.DuplexCost)
	duplex               float64
	proxySent, proxyRcvd []bool
	proxyFree            []Time
	proxyRecv            [][]float64
	// proxyDone[c] is the steps connection c's receiving GPU consumed
	// (its last head), which the receive proxy's operation of the next
	// call waits for (SocketCalib.SerialCalls); proxyParked[c] the tails
	// of the slices that reached the proxy before, in order
	proxyDone   []uint64
	proxyParked [][]uint64
}

// streamWindow is the number of runs of primitive calls (see cop) a
// streamed lane keeps in memory at a time.
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
	// Start is when the lane turned to the slice, before it waited for
	// its data and send credits (what twinccl's kernel stamps as a
	// slice's start), Data when they were there (the kernel's data
	// start); End is when it posted.
	Start, Data, End Time
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
	return m.exec(p, routes, rec, nil)
}

// RunGen is RunRecord on the Program of a generator, streaming its lanes:
// every lane keeps at most a window of its primitive calls in memory, so
// that large jobs run in bounded memory. The result is the same as
// RunRecord(g.Program(), rec).
func (m *Machine) RunGen(g *model.ProgGen, rec func(*SliceEvent)) (*Result, error) {
	h, st, err := m.streamOf(g)
	if err != nil {
		return nil, err
	}
	return m.exec(h, nil, rec, st)
}

// streamOf is the Program of a generator with its lanes' calls left out,
// and the first window of every lane (see streamed).
func (m *Machine) streamOf(g *model.ProgGen) (*model.Program, *streamed, error) {
	h := g.Header()
	if err := h.Validate(); err != nil {
		return nil, nil, fmt.Errorf("sim: %w", err)
	}
	per, window := uint32(h.OpSteps()), m.streamWindow()
	st := &streamed{gen: g}
	var full []model.ProgOp
	var buf []cop
	for r := 0; r < h.NRanks; r++ {
		for _, ch := range g.Channels() {
			for i := 0; i < g.NumLanes(r, ch); i++ {
				l := g.Lane(r, ch, i, full)
				full = l.Ops
				for _, cs := range [2][]int32{l.Recv, l.Send} {
					for _, c := range cs {
						if c < 0 || int(c) >= len(h.Conns) {
							return nil, nil, fmt.Errorf("sim: lane of rank %d channel %d uses connection %d outside %d", r, ch, c, len(h.Conns))
						}
					}
				}
				buf, _ = compactOps(l.Ops, per, buf[:0], window)
				st.wins = append(st.wins, append([]cop(nil), buf...))
				if m.LoopCalls > 0 {
					spanR, spanS := laneSpans(l.Ops, per)
					st.spans = append(st.spans, [2]uint32{spanR, spanS})
				}
				l.Ops = nil
				h.Lanes = append(h.Lanes, l)
				st.nops = append(st.nops, len(full))
			}
		}
	}
	return h, st, nil
}

// streamed is a Program whose lanes a generator streams: nops gives the
// length of each whole lane, wins its first window of calls and spans
// (looped runs only) the steps one call of it consumes on its receive and
// send connections.
type streamed struct {
	gen   *model.ProgGen
	nops  []int
	wins  [][]cop
	spans [][2]uint32
}

// laneSpans returns the steps a lane's calls consume on its receive and
// send connections: where the last call that receives (sends) ends.
func laneSpans(ops []model.ProgOp, per uint32) (recv, send uint32) {
	r, sn := model.OpsSteps(ops, int(per))
	return uint32(r), uint32(sn)
}

// streamWindow is the number of runs a streamed lane keeps in memory.
func (m *Machine) streamWindow() int {
	if m.streamRuns > 0 {
		return m.streamRuns
	}
	return streamWindow
}

// exec runs a checked Program (its lanes streamed when st is set), as
// one call or as a back-to-back loop of them (Machine.LoopCalls).
func (m *Machine) exec(p *model.Program, routes []*route, rec func(*SliceEvent), st *streamed) (*Result, error) {
	x, err := m.newRunner(p, routes, rec, st, &queue{}, nil)
	if err != nil {
		return nil, err
	}
	x.begin()
	x.run()
	var end Time
	for i := range x.actors {
		if x.actors[i].phase != phDone {
			return nil, x.deadlock()
		}
		end = max(end, x.cold[i].finish)
	}
	r := x.result(end)
	if x.loop != nil {
		x.loop.finish(r, x.c.launchUs(x.p.NChannels))
	}
	return r, nil
}

// newRunner prepares a checked Program (its lanes streamed when st is
// set) to run on queue q and fabric fab: a fabric of its own, with the
// machine's resources, when fab is nil; shared with the runners of
// concurrent calls otherwise (Job).
func (m *Machine) newRunner(p *model.Program, routes []*route, rec func(*SliceEvent), st *streamed, q *queue, fab *fabric) (*runner, error) {
	var gen *model.ProgGen
	if st != nil {
		gen = st.gen
	}
	if p.NRanks != m.Cluster.NRanks {
		return nil, fmt.Errorf("sim: program has %d ranks, the machine %d", p.NRanks, m.Cluster.NRanks)
	}
	x := &runner{m: m, p: p, c: m.calib, esize: int64(p.Dtype.Size()), credits: uint64(p.Credits), rec: rec, gen: gen, proto: p.Proto, q: q,
		nvls: p.Algo == model.AlgoNVLS || p.Algo == model.AlgoNVLSTree}
	if rec != nil {
		x.steps = make([]int64, p.NRanks*max(p.NChannels, 1))
	}
	x.pc = x.c.Proto(p.Proto)
	x.stream = p.Proto != model.ProtoSimple
	x.spc, x.sps = 1, 1
	if p.Proto == model.ProtoSimple {
		x.spc, x.sps = int64(p.SlicesPerChunk), int64(p.StepsPerSlice)
		x.stepElems = int64(p.StepBytes / max(1, p.Dtype.Size()))
	}
	x.per = uint32(p.OpSteps())
	x.window = m.streamWindow()
	x.opOv = usToPs(x.pc.OpOverheadUs)
	if !p.Coll.IsP2P() {
		x.collOv = usToPs(x.pc.CollUs[p.Coll.String()])
		if p.Proto == model.ProtoSimple {
			x.directOv = usToPs(x.pc.DirectUs)
		}
	}
	x.slOv = usToPs(x.pc.SliceOverheadUs)
	if p.Coll.IsP2P() && x.pc.P2PSliceOverheadUs > 0 {
		x.slOv = usToPs(x.pc.P2PSliceOverheadUs)
	}
	x.hostLat = usToPs(x.pc.HostLoadUs)
	x.hostTurn = usToPs(x.pc.HostTurnUs)
	x.hostStart = usToPs(x.pc.HostStartUs)
	if (p.Proto == model.ProtoLL || p.Proto == model.ProtoSimple) && x.pc.HostRoundUs > 0 {
		x.hostRound = usToPs(x.pc.HostRoundUs)
		x.roundLines = int64(max(1, x.pc.HostRoundLines))
	}
	x.remoteCost = x.pc.remoteStoreCost()
	x.loadCost = x.pc.loadCost()
	x.recvLoad = x.pc.recvLoadCost()
	x.hostLoad = x.pc.hostLoadCost()
	x.hostStore = x.pc.hostStoreCost()
	x.remoteLoad = x.pc.remoteLoadCost()
	x.fence = usToPs(x.pc.RemoteFenceUs)
	x.forward = usToPs(x.pc.ForwardUs)
	x.relay = usToPs(x.pc.RelayUs)
	x.relayHold = usToPs(x.pc.RelayHoldUs)
	if x.proto == model.ProtoSimple {
		x.hostFence = usToPs(x.pc.HostFenceUs)
		x.emptyOv = usToPs(x.pc.EmptySliceUs)
	}
	x.read = p.Proto == model.ProtoSimple && x.c.p2pRead(p.Coll)
	if fab == nil {
		fab = &fabric{res: make([]resource, len(m.res))}
		copy(fab.res, m.res)
		for i := range fab.res {
			fab.res[i].flows = nil
		}
	}
	x.fab = fab
	x.rc = make([]recvConn, len(p.Conns))
	x.sc = make([]sendConn, len(p.Conns))
	x.lineEff = make([]float64, len(p.Conns))
	x.rt = make([]*route, len(p.Conns))
	nres := 0
	for i, cn := range p.Conns {
		var rt *route
		if routes != nil {
			rt = routes[i]
		} else {
			var err error
			if rt, err = m.connRoute(cn); err != nil {
				return nil, err
			}
		}
		x.rt[i] = rt
		nres += len(rt.res) + len(rt.recvRes)
	}
	// The routes' resources, in one array (flows read them on every
	// start and end).
	x.resIDs = make([]int32, 0, nres)
	for i, rt := range x.rt {
		lo := len(x.resIDs)
		x.resIDs = append(x.resIDs, rt.res...)
		x.rc[i] = recvConn{recver: -1, lat: rt.lat}
		if len(rt.recvRes) > 0 {
			lo := len(x.resIDs)
			x.resIDs = append(x.resIDs, rt.recvRes...)
			x.rc[i].res, x.rc[i].nres = int32(lo), int32(len(rt.recvRes))
			x.rc[i].capB, x.rc[i].w = rt.capGBps*1e-3, rt.w
		}
		lat := rt.lat
		if rt.transport == TransportSHM { // a post through host memory (HostPostUs)
			lat += usToPs(x.pc.HostPostUs)
		}
		x.sc[i] = sendConn{sender: -1, lat: lat, capB: rt.capGBps * 1e-3, w: rt.w, ib: rt.ib, res: int32(lo), nres: int32(len(rt.res)),
			proxyFrom: -1, proxyTo: -1}
		x.lineEff[i] = cmp.Or(x.pc.LinkEff, 1)
		if rt.transport != TransportP2P && x.pc.HostLinkEff > 0 {
			x.lineEff[i] = x.pc.HostLinkEff
		}
		if rt.proxyCopies > 0 {
			if x.proxyFree == nil {
				x.proxySendOp = x.c.NetSocket.SendOpUs * psPerUs
				x.proxyRecvOp = x.c.NetSocket.RecvOpUs * psPerUs
				x.recvPost = min(x.c.NetSocket.RecvPostUs*psPerUs, x.proxyRecvOp)
				x.recvConn = min(x.c.NetSocket.RecvConnUs*psPerUs, x.proxyRecvOp)
				x.payloadOp = x.c.NetSocket.PayloadOpUs * psPerUs
				x.payloadSendOp = x.c.NetSocket.PayloadSendOpUs * psPerUs
				if x.proto == model.ProtoSimple {
					x.proxySimple = usToPs(x.c.NetSocket.SimpleUs)
				} else {
					x.postFence = usToPs(x.c.NetSocket.PostFenceUs)
				}
				x.proxyPs = 1 / (x.c.NetSocket.proxyGBps() * 1e-3)
				if g := x.c.NetSocket.FlagCheckGBps; g > 0 && x.proto != model.ProtoSimple {
					x.flagPs = 1 / (g * 1e-3)
				}
				x.proxyFree = make([]Time, p.NRanks)
				x.duplex = x.c.NetSocket.duplexCost(x.proto)
				x.proxySent, x.proxyRcvd = make([]bool, p.NRanks), make([]bool, p.NRanks)
				x.proxyRecv = make([][]float64, len(p.Conns))
				x.recvReady = make([]Time, len(p.Conns))
				if x.c.NetSocket.SerialCalls {
					x.proxyDone = make([]uint64, len(p.Conns))
					x.proxyParked = make([][]uint64, len(p.Conns))
				}
			}
			// the ranks of the lanes that send and receive it (below):
			// in a folded or aggregated Program they stand for the
			// connection's own ends
			cn := p.Conns[i]
			x.sc[i].proxyFrom, x.sc[i].proxyTo = cn.From, cn.To
		}
	}
	x.actors = make([]actor, len(p.Lanes))
	x.cold = make([]actorCold, len(p.Lanes))
	nc := 0
	for i := range p.Lanes {
		nc += len(p.Lanes[i].Recv) + len(p.Lanes[i].Send)
	}
	x.cids = make([]int32, 0, nc)
	var opsBuf []cop
	if gen == nil {
		n := 0
		for i := range p.Lanes {
			n += len(p.Lanes[i].Ops)
		}
		opsBuf = make([]cop, 0, min(n, 1<<16))
	}
	type rc struct{ r, c int32 }
	perBlock := map[rc]int{}
	for i := range p.Lanes {
		perBlock[rc{p.Lanes[i].Rank, p.Lanes[i].Channel}]++
	}
	seen := map[rc]int{}
	nvlsFrac := nvlsFracs(p)
	for i := range p.Lanes {
		l := &p.Lanes[i]
		a, ac := &x.actors[i], &x.cold[i]
		ac.lane = l
		ac.frac = 1
		if gen != nil {
			ac.ops = st.wins[i]
			ac.nOps = st.nops[i]
			if m.LoopCalls > 0 {
				ac.spanR, ac.spanS = st.spans[i][0], st.spans[i][1]
			}
		} else {
			lo := len(opsBuf)
			opsBuf, _ = compactOps(l.Ops, x.per, opsBuf, 0)
			ac.ops = opsBuf[lo:len(opsBuf):len(opsBuf)]
			ac.nOps = len(l.Ops)
			if m.LoopCalls > 0 {
				ac.spanR, ac.spanS = laneSpans(l.Ops, x.per)
			}
		}
		for _, r := range ac.ops {
			ac.winEnd += int(r.reps)
		}
		k := rc{l.Rank, l.Channel}
		if gen != nil {
			ac.li = seen[k]
		}
		if nvlsFrac != nil && nvlsFrac[i] > 0 { // NVLS groups (nvls.go)
			ac.frac = nvlsFrac[i]
		} else if n := perBlock[k]; n == 2 && p.Algo == model.AlgoTree { // reduce-up and broadcast-down groups (frac: sizeBlock)
			ac.treeGroup = treeDown
			if seen[k] == 0 {
				ac.treeGroup = treeUp
			}
		} else if n >= 2 { // p2p: the block's warps split between directions
			ac.frac = min(1, 2*x.pc.p2pLaneShare()/float64(n))
		}
		seen[k]++
		a.rb = int32(len(x.cids))
		x.cids = append(x.cids, l.Recv...)
		a.sb = int32(len(x.cids))
		x.cids = append(x.cids, l.Send...)
		a.se = int32(len(x.cids))
		for _, c := range l.Send {
			x.sc[c].sender = int32(i)
			if x.sc[c].proxyFrom >= 0 {
				x.sc[c].proxyFrom = l.Rank
				a.proxySend = true
			}
			switch rt := x.rt[c]; {
			case rt.hostSend:
				ac.hostSends++
				a.hostSend = a.hostSend || rt.transport == TransportSHM
				ac.shm = ac.shm || rt.transport == TransportSHM
			case x.read && rt.transport == TransportP2P:
				// read mode: the sender stores into its own memory
				a.p2pSend = a.p2pSend || len(rt.res) > 0
			case rt.transport != TransportNET && len(rt.res) > 0:
				ac.remote++
				a.remote = true
				a.p2pSend = a.p2pSend || rt.transport == TransportP2P
			}
		}
		a.relay = (x.relay > 0 || x.relayHold > 0) && relays(p, l, x.rt)
		ac.direct = x.directOv > 0 && len(ac.ops) > 0 && ac.ops[0].flags&model.PrimDirect != 0
		for _, c := range l.Recv {
			x.rc[c].recver = int32(i)
			if x.sc[c].proxyTo >= 0 {
				x.sc[c].proxyTo = l.Rank
			}
			rt := x.rt[c]
			switch {
			case rt.hostRecv:
				ac.hostRecvs++
				a.hostRecv = true
				ac.shm = ac.shm || rt.transport == TransportSHM
			case x.read && rt.transport == TransportP2P && len(rt.res) > 0:
				ac.remoteRecvs++
			}
		}
	}
	n := x.largestCall()
	x.sizeBlock(n * x.esize)
	x.cacheHostMem(n)
	if m.LoopCalls > 0 {
		lp, err := x.newLoop(m.LoopCalls)
		if err != nil {
			return nil, err
		}
		x.loop = lp
	}
	if m.Progress != nil {
		for i := range x.cold {
			x.total += int64(x.cold[i].nOps) * x.spc
		}
		if x.loop != nil {
			x.total *= int64(x.loop.calls)
		}
	}
	x.left = len(x.actors)
	return x, nil
}

// begin starts every lane now (after the calibration's StartUs).
func (x *runner) begin() {
	if start := usToPs(x.pc.StartUs); start > 0 {
		for i := range x.actors {
			x.push(x.now+start, evWake, int32(i), 0)
		}
	} else {
		for i := range x.actors {
			x.advance(int32(i))
		}
	}
}

// push schedules an event of this runner's actor or connection id.
func (x *runner) push(t Time, kind uint8, id int32, val uint64) {
	x.q.push(t, kind, id+x.base, val)
}

// sliceElems is the size in elements of the slices a primitive call of
// n elements is cut into, as model.Program.Slices cuts it: Simple calls
// into SlicesPerChunk slices, LL and LL128 calls into one.
func (x *runner) sliceElems(n int64) int64 {
	if x.proto == model.ProtoSimple {
		return max((n+16*x.spc-1)/(16*x.spc)*16, x.stepElems*x.sps/32)
	}
	return n
}

// largestCall is the element count of the largest primitive call among
// the lanes' loaded runs (a streamed lane's later windows repeat its
// first window's chunks).
func (x *runner) largestCall() int64 {
	var n int64
	for i := range x.cold {
		for _, r := range x.cold[i].ops {
			n = max(n, int64(r.n))
		}
	}
	return n
}

// cacheHostMem sets the bandwidth of each host memory the run's
// connections stage data in from the footprint of their buffers
// (Calib.HostCacheMiB): per connection, its slots times what one slice
// of the run's largest primitive call, of n elements, fills of them.
func (x *runner) cacheHostMem(n int64) {
	if x.c.HostCacheMiB <= 0 {
		return
	}
	span := min(x.wireBytes(x.sliceElems(n)*x.esize), x.sps*int64(x.p.StepBytes))
	perConn := float64(x.credits) / float64(x.sps) * float64(span)
	var foot map[int32]float64
	for _, rt := range x.rt {
		if !rt.hostSend && !rt.hostRecv {
			continue
		}
		mem := int32(-1)
		for _, ids := range [2][]int32{rt.res, rt.recvRes} {
			for _, id := range ids {
				if x.m.extra[id] == extraMem && id != mem {
					if foot == nil {
						foot = map[int32]float64{}
					}
					foot[id] += rt.w * perConn
					mem = id
				}
			}
		}
	}
	for id, f := range foot {
		x.fab.res[id].cap = x.c.hostMemFor(f) * 1e-3
	}
}

// run runs the events until the queue is empty.
func (x *runner) run() {
	progress := x.m.Progress
	x.fab.batch = !x.m.unbatched
	for {
		if len(x.fab.pending) > 0 && (x.q.empty() || x.q.nextTime() != x.now) {
			// Every event of this time has run: settle the sharing.
			x.fab.flush(x.q, x.now)
		}
		if x.q.empty() {
			break
		}
		ev := x.q.pop()
		x.now = ev.t
		x.events++
		if progress != nil && x.events&0xffff == 0 {
			progress(x.slices, x.total)
		}
		x.handle(ev)
	}
}

// handle runs one event of this runner: ev.id is the runner's own actor or
// connection id, or (evFlow) the fabric's flow id.
func (x *runner) handle(ev event) {
	switch ev.kind {
	case evWake:
		x.advance(ev.id)
	case evFlow:
		if !x.fab.current(ev.id, ev.val) {
			return
		}
		owner := x.fab.flows[ev.id].owner - x.base
		x.fab.finish(x.q, x.now, ev.id)
		a := &x.actors[owner]
		a.pending--
		if a.pending == 0 {
			x.advance(owner)
		}
	case evTail:
		c := &x.rc[ev.id]
		c.tail = max(c.tail, ev.val)
		c.started = max(c.started, ev.val) // posted data is visible
		x.resume(&c.blocked, c.recver)
	case evProxyRecv:
		if x.proxyDone != nil && (len(x.proxyParked[ev.id]) > 0 || x.proxyDone[ev.id] < x.callBase(ev.id, ev.val)) {
			x.proxyParked[ev.id] = append(x.proxyParked[ev.id], ev.val)
			return
		}
		x.proxyTake(ev.id, ev.val, x.recvPost)
	case evStarted:
		c := &x.rc[ev.id]
		c.started = max(c.started, ev.val)
		x.resume(&c.blocked, c.recver)
	case evHead:
		c := &x.sc[ev.id]
		c.head = max(c.head, ev.val)
		x.resume(&c.blocked, c.sender)
	}
}

// resume advances actor ai when it waits for the connection end whose
// blocked flag this is (see ready), clearing the flag.
func (x *runner) resume(blocked *bool, ai int32) {
	if *blocked {
		*blocked = false
		x.advance(ai)
	}
}

// deadlock describes the first blocked lanes.
func (x *runner) deadlock() error {
	var b strings.Builder
	n := 0
	for i := range x.actors {
		a, ac := &x.actors[i], &x.cold[i]
		if a.phase == phDone {
			continue
		}
		if n < 4 {
			fmt.Fprintf(&b, "; lane %d (rank %d channel %d) blocked at op %d slice %d", i, ac.lane.Rank, ac.lane.Channel, ac.opBase+int(a.rep), a.sl)
		}
		n++
	}
	return fmt.Errorf("sim: deadlock at %.3f us: %d lane(s) cannot progress%s", float64(x.now)/psPerUs, n, b.String())
}

// Tree groups (actorCold.treeGroup).
const (
	treeUp   = 1 // a tree rank's reduce-up group
	treeDown = 2 // its broadcast-down group
)

// sizeBlock sets what depends on the block size the calls run on
// (ProtoCalib.blockThreads): the first call of each primitive kind's cost
// (firstOv), the rounds of an LL slice received from host memory
// (roundThreads), the copy rate, and the share of it each of a tree
// rank's two groups of threads sustains (ProtoCalib.treeGroupShare). A
// block sized to the call (LineThreads) takes the largest primitive
// call, of opBytes (largestCall).
func (x *runner) sizeBlock(opBytes int64) {
	p := x.p
	if !p.Coll.IsP2P() {
		d := x.pc.threadDoublings(p, opBytes)
		x.firstOv = usToPs(x.pc.FirstOpUs + x.pc.ThreadOpUs*d)
		x.threadOv = usToPs(x.pc.ThreadCallUs * d)
	}
	if x.hostRound > 0 {
		x.roundThreads = float64(x.pc.blockThreads(p, opBytes))
	}
	x.copyBps = x.pc.CopyGBps * 1e-3 * x.pc.threadRate(p, opBytes)
	for i := range x.cold {
		if g := x.cold[i].treeGroup; g != 0 {
			x.cold[i].frac = x.pc.treeGroupShare(p, opBytes, g == treeUp)
		}
	}
	if g := x.pc.GPUCopyGBps; g > 0 && !p.Coll.IsP2P() {
		x.copyBps = min(x.copyBps, g*1e-3/float64(max(p.NChannels, 1)))
	}
}

// wireBytes is what n data bytes occupy on the wire with the protocol.
func (x *runner) wireBytes(n int64) int64 {
	switch x.proto {
	case model.ProtoLL:
		return (n + model.LLLineData - 1) / model.LLLineData * model.LLLineBytes
	case model.ProtoLL128:
		return (n + model.LL128LineData - 1) / model.LL128LineData * model.LL128LineBytes
	}
	return n
}

// units is the memory traffic per data byte of a primitive call: its
// loads and stores, plus the reduction's extra cost per extra source.
func (x *runner) units(a *actor, ac *actorCold, k model.PrimKind, flags uint8) float64 {
	if x.nvls {
		return x.nvlsUnits(a, k)
	}
	srcs, dsts := 0, 0
	recvSrcs, hostSrcs, remoteSrcs := 0, 0, 0
	if k.Receives() {
		recvSrcs = int(a.sb - a.rb)
		srcs += recvSrcs
		hostSrcs, remoteSrcs = ac.hostRecvs, ac.remoteRecvs
	}
	inputSrcs := 0
	if k.ReadsInput() || (k == model.PrimSend && flags&model.PrimFromOutput != 0) {
		srcs++
		inputSrcs = 1
	}
	remote, host := 0, 0
	if k.Sends() {
		dsts += int(a.se-a.sb) - ac.remote - ac.hostSends
		remote, host = ac.remote, ac.hostSends
	}
	if k.WritesOutput() {
		dsts++
	}
	u := x.loadCost*float64(inputSrcs) + x.recvLoad*float64(recvSrcs-hostSrcs-remoteSrcs) + x.hostLoad*float64(hostSrcs) +
		x.remoteLoad*float64(remoteSrcs) + float64(dsts) + x.remoteCost*float64(remote) + x.hostStore*float64(host)
	if k.Receives() && k.ReadsInput() && srcs > 1 { // reductions
		u += x.pc.ReduceCost*float64(srcs-1) + x.pc.HostReduceCost*float64(hostSrcs)
	}
	return max(u, 0.05)
}

// loadRun makes the actor's next run of calls its current one, at its
// first call, and reports false when the lane has no more calls.
func (x *runner) loadRun(ai int32, a *actor) bool {
	ac := &x.cold[ai]
	if a.reps > 0 { // the previous run
		ac.op++
		ac.opBase += int(a.reps)
	}
	if ac.op >= len(ac.ops) {
		if ac.winEnd >= ac.nOps {
			return false
		}
		x.slide(ac)
	}
	r := &ac.ops[ac.op]
	a.rep, a.reps = 0, r.reps
	a.kind = r.kind
	a.recvs, a.sends = r.kind.Receives(), r.kind.Sends()
	a.rate = x.copyBps * ac.frac / x.units(a, ac, r.kind, r.flags) // data bytes per ps
	a.opR, a.opS = r.recvStep+ac.offR, r.sendStep+ac.offS
	a.n = max(r.n, 0)
	a.slice = x.sliceElems(int64(a.n))
	if a.sends {
		// What the run's slices will post to every send connection.
		var bytes, wire int64
		for s := int64(0); s < x.spc; s++ {
			d := max(0, min(a.slice, int64(a.n)-s*a.slice)) * x.esize
			bytes += d
			wire += x.wireBytes(d)
		}
		k := int64(r.reps)
		ac.sent.bytes += k * bytes
		ac.sent.wire += k * wire
		ac.sent.slices += k * x.spc
	}
	return true
}

// advance runs actor ai until it has to wait.
func (x *runner) advance(ai int32) {
	a := &x.actors[ai]
	need := uint64(x.sps)
	for {
		switch a.phase {
		case phOpStart:
			if a.rep == a.reps && !x.loadRun(ai, a) {
				a.phase = phDone
				x.cold[ai].finish = x.now
				x.left--
				if x.loop != nil {
					x.laneEnded(ai)
				}
				return
			}
			a.sl = 0
			a.phase = phWait
			ov := x.opOv
			ac := &x.cold[ai]
			if a.rep == 0 && ac.op == 0 && ac.opBase == 0 { // the call's first primitive
				ac.kinds = 0
				ov += x.collOv + x.threadOv
				if ac.direct {
					ov += x.directOv
				}
				if ac.shm {
					ov += x.hostStart
				}
			}
			if bit := uint16(1) << a.kind; ac.kinds&bit == 0 {
				ac.kinds |= bit
				ov += x.firstOv
			}
			if x.rec != nil { // the first slice begins after the overhead
				ac.start = x.now + ov
			}
			if ov > 0 {
				if x.ready(a, false) {
					// The first slice's data and credits are there, and
					// stay: one wake covers the call's overhead and the
					// slice's (what the next two phases would pay).
					a.phase = phData
					if x.rec != nil {
						ac.data = x.now + ov
					}
					x.push(x.now+ov+x.sliceDelay(ai, a), evWake, ai, 0)
					return
				}
				x.push(x.now+ov, evWake, ai, 0)
				return
			}
		case phWait:
			if !x.ready(a, true) {
				return
			}
			a.phase = phData
			if x.rec != nil {
				x.cold[ai].data = x.now
			}
			if d := x.sliceDelay(ai, a); d > 0 {
				x.push(x.now+d, evWake, ai, 0)
				return
			}
		case phData:
			x.startSlice(ai, a)
			a.phase = phFinish
			if a.pending > 0 {
				return
			}
		case phFinish:
			st := uint32(a.sl) * uint32(x.sps)
			if x.stream && a.recvs {
				want := uint64(a.opR+st) + need
				for _, c := range x.cids[a.rb:a.sb] {
					if cs := &x.rc[c]; cs.tail < want {
						cs.blocked = true
						return
					}
				}
			}
			if f := x.fenceOf(a); f > 0 && !a.fenced && a.sends && a.elems() > 0 {
				// the fence waits for the slice's stores into the peers
				// or into host memory
				a.fenced = true
				x.push(x.now+f, evWake, ai, 0)
				return
			}
			a.fenced = false
			x.post(a, st)
			if x.rec != nil {
				x.record(ai, a)
			}
			x.slices++
			a.sl++
			if int64(a.sl) < x.spc {
				a.phase = phWait
				if x.rec != nil { // the next slice begins now
					x.cold[ai].start = x.now
				}
			} else {
				// the next call: of the same run, its steps follow
				a.rep++
				if a.recvs {
					a.opR += x.per
				}
				if a.sends {
					a.opS += x.per
				}
				a.phase = phOpStart
			}
		default:
			return
		}
	}
}

// ready reports whether the data and send credits of actor a's current
// slice are visible (LL, LL128: the slice's first lines). Both only grow,
// so a ready slice stays ready. With block, the first connection it
// waits for is marked blocked: what reaches that connection resumes the
// actor (the others need not: it would wait for that one again).
func (x *runner) ready(a *actor, block bool) bool {
	st := uint32(a.sl) * uint32(x.sps)
	need := uint64(x.sps)
	if a.recvs {
		want := uint64(a.opR+st) + need
		for _, c := range x.cids[a.rb:a.sb] {
			cs := &x.rc[c]
			seen := cs.tail
			if x.stream {
				seen = cs.started
			}
			if seen < want {
				cs.blocked = cs.blocked || block
				return false
			}
		}
	}
	if a.sends {
		want := uint64(a.opS+st) + need
		for _, c := range x.cids[a.sb:a.se] {
			if cs := &x.sc[c]; cs.head+x.credits < want {
				cs.blocked = cs.blocked || block
				return false
			}
		}
	}
	return true
}

// sliceDelay is the overhead actor ai's current slice pays once ready
// (SliceOverheadUs, and HostLoadUs for what it receives from host memory,
// plus HostRoundUs for each further round of an LL slice's loads, or for
// each further pass of a Simple slice's that its copy does not cover; a
// Simple slice without data pays EmptySliceUs on a lane through SHM host
// memory, nothing elsewhere).
func (x *runner) sliceDelay(ai int32, a *actor) Time {
	if x.proto == model.ProtoSimple && a.elems() == 0 {
		if x.cold[ai].shm {
			return x.emptyOv
		}
		return 0
	}
	if a.recvs && a.hostRecv {
		rounds := x.hostRound * Time(x.hostRounds(ai, a)-1)
		if x.proto == model.ProtoSimple {
			// A Simple slice's further passes overlap its copy: they
			// cost what the copy at the lane's rate does not cover.
			rounds = max(0, rounds-Time(float64(a.elems()*x.esize)/a.rate))
		}
		d := x.slOv + x.hostLat + rounds
		if a.turned {
			d += x.hostTurn
		}
		return d
	}
	return x.slOv
}

// hostRounds is the number of rounds of loads in which actor ai's lane
// receives its current LL slice from host memory: each of its threads (its
// share of the block) loads one line, of 8 data bytes, per round and
// waits for it before the next, or roundLines lines at once where the
// slice gives every thread that many (twinccl's kernel; NCCL loads one).
// A round is a read across PCIe; NCCL halves its threads on small calls,
// so that a 3 KiB Broadcast takes three of them (Program.Threads). A
// Simple slice's rounds are its passes (simplePasses).
func (x *runner) hostRounds(ai int32, a *actor) int64 {
	if x.hostRound == 0 {
		return 1
	}
	if x.proto == model.ProtoSimple {
		return x.simplePasses(ai, a)
	}
	lines := (a.elems()*x.esize + model.LLLineData - 1) / model.LLLineData
	threads := int64(max(32, x.roundThreads*x.cold[ai].frac)) // at least a warp
	per := threads
	if lines >= x.roundLines*threads {
		per *= x.roundLines
	}
	return max(1, (lines+per-1)/per)
}

// NCCL's Simple copy loop (reduceCopy) moves a warp's data in hunks:
// first whole hunks of simpleBigHunk bytes (16-byte packs, eight per
// thread, loaded before any is stored), then what is left in hunks of
// simpleSmallHunk (a pack per thread), hunk i on worker warp i mod W.
const (
	simpleBigHunk   = 16 * 8 * 32
	simpleSmallHunk = 16 * 32
)

// simplePasses is the number of passes of loads in which actor ai's lane
// receives its current Simple slice from host memory: the hunks of its
// worker warps (its share of the block, less the warp NCCL keeps for
// synchronisation), a read across PCIe each, those of one warp in turn.
// On two H100 NCCL's Reduce over SHM at 96 threads (two worker warps)
// took 11.8-12.7 us at 1 and 4 KiB (one pass) and 14.6-16.1 at 3.5 and
// 7 KiB (four; testdata/hw/h100x2/shm-fine).
func (x *runner) simplePasses(ai int32, a *actor) int64 {
	bytes := a.elems() * x.esize
	big := bytes / simpleBigHunk
	hunks := big + (bytes-big*simpleBigHunk+simpleSmallHunk-1)/simpleSmallHunk
	warps := max(1, int64(x.roundThreads*x.cold[ai].frac)/32-1)
	return max(1, (hunks+warps-1)/warps)
}

// slide moves the window of a streamed lane to its next calls.
func (x *runner) slide(ac *actorCold) {
	l := ac.lane
	full := x.gen.Lane(int(l.Rank), int(l.Channel), ac.li, x.genOps)
	x.genOps = full.Ops
	var k int
	ac.ops, k = compactOps(full.Ops[ac.winEnd:], x.per, ac.ops[:0], x.window)
	ac.winEnd += k
	ac.op = 0
}

// startSlice starts the transfers of the current slice of actor ai.
func (x *runner) startSlice(ai int32, a *actor) {
	a.pending = 0
	data := a.elems() * x.esize
	if a.sends && x.stream {
		st := uint64(a.opS+uint32(a.sl)*uint32(x.sps)) + uint64(x.sps)
		for _, c := range x.cids[a.sb:a.se] {
			if cs := &x.sc[c]; cs.proxyFrom < 0 { // a proxy hands over whole slices
				cs.seenStart = x.visible(a, cs, cs.seenStart)
				x.push(cs.seenStart, evStarted, c, st)
			}
		}
	}
	if data <= 0 {
		return
	}
	rate := a.rate
	wire := x.wireBytes(data)
	scale := float64(wire) / float64(data)
	if a.recvs {
		// Loads that cross links (SHMReadLeg), at the lane's rate.
		for _, c := range x.cids[a.rb:a.sb] {
			rs := &x.rc[c]
			if rs.nres == 0 {
				continue
			}
			capW := rate * scale
			if rs.capB > 0 {
				capW = min(capW, rs.capB*scale)
			}
			res := x.resIDs[rs.res : rs.res+rs.nres : rs.res+rs.nres]
			eff := x.lineEff[c]
			x.fab.start(x.q, x.now, res, float64(wire)/eff, float64(wire), capW/eff, rs.w, ai+x.base)
			a.pending++
		}
	}
	if a.sends {
		for _, c := range x.cids[a.sb:a.se] {
			cs := &x.sc[c]
			capW := rate * scale
			if cs.capB > 0 {
				capW = min(capW, cs.capB*scale)
			}
			if ib := cs.ib; ib != nil {
				capW = min(capW, ib.msgCap(wire)) // RDMA message costs (ib.go)
			}
			// A protocol efficiency below one makes its wire bytes occupy
			// the links longer; the links still account the true bytes.
			res := x.resIDs[cs.res : cs.res+cs.nres : cs.res+cs.nres]
			eff := x.lineEff[c]
			x.fab.start(x.q, x.now, res, float64(wire)/eff, float64(wire), capW/eff, cs.w, ai+x.base)
			a.pending++
		}
		return
	}
	if a.pending == 0 {
		x.fab.start(x.q, x.now, nil, float64(data), float64(data), rate, 1, ai+x.base)
		a.pending++
	}
}

// post publishes the end of a slice: tails (and data) to the receivers,
// heads (credits) back to the senders.
func (x *runner) post(a *actor, st uint32) {
	need := uint64(x.sps)
	if a.recvs && a.hostRecv {
		a.turned = false
	}
	if a.sends && a.hostSend && a.elems() > 0 {
		a.turned = true
	}
	if a.sends {
		tail := uint64(a.opS+st) + need
		for _, c := range x.cids[a.sb:a.se] {
			cs := &x.sc[c]
			if cs.proxyFrom >= 0 {
				x.proxySend(c, cs, tail, a.elems()*x.esize)
				continue
			}
			cs.seenTail = x.visible(a, cs, cs.seenTail)
			x.push(cs.seenTail, evTail, c, tail)
		}
	}
	if a.recvs {
		head := uint64(a.opR+st) + need
		for _, c := range x.cids[a.rb:a.sb] {
			x.push(x.now+x.rc[c].lat, evHead, c, head)
			if x.proxyDone != nil && x.sc[c].proxyFrom >= 0 {
				x.proxyConsumed(c, head)
			}
		}
	}
}

// visible is when the receiver of connection cs sees what actor a posts
// to it now, where the last such post was seen at last: after the link's
// latency, plus the relay's delay for a relaying lane's receiving steps,
// and never before an earlier post.
func (x *runner) visible(a *actor, cs *sendConn, last Time) Time {
	at := x.now + cs.lat
	if a.relay && a.recvs {
		at += x.relay
	}
	return max(at, last)
}

// relays says lane l of Program p receives from one GPU and sends to
// another, both over P2P routes between GPUs (routes by connection).
func relays(p *model.Program, l *model.ProgLane, routes []*route) bool {
	for _, rc := range l.Recv {
		for _, sc := range l.Send {
			from, to := p.Conns[rc].From, p.Conns[sc].To
			if from != to && from != l.Rank && to != l.Rank &&
				routes[rc].transport == TransportP2P && len(routes[rc].res) > 0 &&
				routes[sc].transport == TransportP2P && len(routes[sc].res) > 0 {
				return true
			}
		}
	}
	return false
}

// proxySend hands a slice of data bytes, posted now on socket connection
// c up to step tail, to the proxies: the sender's sends it, and once it
// crossed the network (the route's latency), the receiver's takes it in;
// the receiver sees it when that ends. Every slice is an operation of each
// proxy, empty ones too (the proxies exchange a message for it).
func (x *runner) proxySend(c int32, cs *sendConn, tail uint64, data int64) {
	wire := float64(x.wireBytes(data))
	op, sendOp := 0.0, 0.0
	if int64(wire) > x.c.NetSocket.InlineBytes {
		op, sendOp = x.payloadOp, x.payloadSendOp
	}
	from, to := cs.proxyFrom, cs.proxyTo
	x.proxySent[from], x.proxyRcvd[to] = true, true
	sendPs, recvPs := x.proxyPs, x.proxyPs
	if x.proxyRcvd[from] {
		sendPs *= x.duplex
	}
	if x.proxySent[to] {
		recvPs *= x.duplex
	}
	send := x.proxySendOp + op + sendOp + x.rt[c].proxyCopies*wire*sendPs + wire*x.flagPs
	x.proxyRecv[c] = append(x.proxyRecv[c], x.proxyRecvOp+op+wire*recvPs)
	x.push(x.proxyServe(from, send)+cs.lat, evProxyRecv, c, tail)
}

// proxyTake serves the receive operation of the slice of connection c
// up to step tail, which arrived now, on its receiver's proxy; the
// receiver sees the slice when it ends, a Simple one after the tail's
// hand-off (proxySimple). Up to early ps of it ran before the arrival
// where the proxy was idle then and the operation could be posted
// (recvReady); its last recvConn ps hold the connection alone, the proxy
// being free for other connections' operations then.
func (x *runner) proxyTake(c int32, tail uint64, early float64) {
	pend := x.proxyRecv[c]
	x.proxyRecv[c] = pend[1:]
	r := x.sc[c].proxyTo
	start := max(x.now-Time(early+0.5), x.proxyFree[r], x.recvReady[c])
	end := max(start+Time(pend[0]+0.5), x.now) // past proxyFree[r], as start is
	x.proxyFree[r] = max(end-Time(x.recvConn+0.5), start)
	x.recvReady[c] = end
	x.push(end+x.proxySimple, evTail, c, tail)
}

// callBase is the first step of the call of a loop that the slice of
// connection c up to step tail belongs to (0 outside a loop).
func (x *runner) callBase(c int32, tail uint64) uint64 {
	r := x.rc[c].recver
	if x.loop == nil || tail == 0 || r < 0 {
		return 0
	}
	span := uint64(x.cold[r].spanR)
	if span == 0 {
		return 0
	}
	return (tail - 1) / span * span
}

// proxyConsumed notes that connection c's receiving GPU consumed its
// steps up to head, and starts the receive operations that waited for
// it: NCCL's proxy runs the operations of one connection one call after
// the other, and a receive operation ends only when its GPU consumed
// every slice of it (SocketCalib.SerialCalls).
func (x *runner) proxyConsumed(c int32, head uint64) {
	x.proxyDone[c] = max(x.proxyDone[c], head)
	if x.callBase(c, head+1) == head {
		// the call's last slice: the next call's operation begins now
		x.recvReady[c] = max(x.recvReady[c], x.now)
	}
	for len(x.proxyParked[c]) > 0 && x.proxyDone[c] >= x.callBase(c, x.proxyParked[c][0]) {
		tail := x.proxyParked[c][0]
		x.proxyParked[c] = x.proxyParked[c][1:]
		x.proxyTake(c, tail, 0)
	}
}

// proxyServe queues an operation of d ps on rank r's socket proxy thread,
// which serves them one at a time, and returns when it ends. (Channels
// through proxies are never merged, see mergeable: every operation is
// one.)
func (x *runner) proxyServe(r int32, d float64) Time {
	end := max(x.now, x.proxyFree[r]) + Time(d+0.5)
	x.proxyFree[r] = end
	return end
}

// record reports the slice that actor a just posted.
func (x *runner) record(ai int32, a *actor) {
	ac := &x.cold[ai]
	l := ac.lane
	kind := a.kind
	e := &x.ev
	*e = SliceEvent{Rank: l.Rank, Channel: l.Channel, SendPeer: -1, RecvPeer: -1, Prim: kind, Proto: x.p.Proto,
		Bytes: a.elems() * x.esize, Start: ac.start, Data: ac.data, End: x.now}
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
	r.TimeUs = r.KernelUs + x.c.launchUs(x.p.NChannels)
	r.RankKernelUs = make([]float64, x.p.NRanks)
	for i := range x.cold {
		ac := &x.cold[i]
		if rk := int(ac.lane.Rank); rk >= 0 && rk < len(r.RankKernelUs) {
			r.RankKernelUs[rk] = max(r.RankKernelUs[rk], float64(ac.finish)/psPerUs)
		}
	}
	ct := make([]connTraffic, len(x.p.Conns))
	for i := range x.actors {
		a, s := &x.actors[i], &x.cold[i].sent
		for _, c := range x.cids[a.sb:a.se] {
			ct[c].bytes += s.bytes
			ct[c].wire += s.wire
			ct[c].slices += s.slices
		}
	}
	for i, cn := range x.p.Conns {
		t := &ct[i]
		r.Conns = append(r.Conns, ConnStats{From: int(cn.From), To: int(cn.To), Channel: int(cn.Channel),
			Transport: x.rt[i].transport.String(), Bytes: t.bytes, WireBytes: t.wire, Slices: t.slices, Steps: uint64(t.slices) * uint64(x.sps)})
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

// fenceOf is the fence a slice of actor a pays after its stores and
// before it posts: the remote fence when it stores into a peer GPU's
// memory, the host fence when it stores into a SHM connection's host
// memory, the post fence when it sends through a socket proxy, the
// longest of those that apply; plus ForwardUs for a step that receives
// and sends to a peer GPU, and RelayHoldUs for a relaying lane's.
func (x *runner) fenceOf(a *actor) Time {
	var f Time
	if a.remote {
		f = x.fence
	}
	if a.hostSend {
		f = max(f, x.hostFence)
	}
	if a.proxySend {
		f = max(f, x.postFence)
	}
	if a.p2pSend && a.recvs {
		f += x.forward
	}
	if a.relay && a.recvs {
		f += x.relayHold
	}
	return f
}
