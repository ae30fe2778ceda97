package profiler

import (
	"fmt"
	"strings"
	"sync"
)

// Log levels of NCCL's logger that the recorder uses.
const (
	LogWarn = 2
	LogInfo = 3
)

// Logger receives the recorder's messages (NCCL's logger in the plugin).
type Logger func(level int, msg string)

// commCtx is one communicator as NCCL's init described it.
type commCtx struct {
	hash      uint64
	hashKnown bool // versions 4 and 5 give it at init; 1-3 in each call
	name      string
	nNodes    int32
	nRanks    int32 // 0 where the version does not say
	rank      int32
	version   int
	finalized bool
	nextColl  int64
	p2pSeq    map[[2]int32]int64
	minOff    int64 // smallest host-minus-GPU time seen on a kernel channel
	hasOff    bool
}

// record is one recorded event: a call (coll or p2p), an API event, a
// proxy operation or a proxy step. Fields are ordered by size (152 bytes).
type record struct {
	start    int64
	stop     int64 // 0 until stopped
	comm     uint64
	call     int64
	count    int64
	stream   uint64
	enqueue  int64
	gpuStart uint64 // kernel channels: earliest start, latest end (GPU clock)
	gpuStop  uint64
	kStart   int64 // kernel channels as the host saw them
	kStop    int64
	bytes    int64
	dataNs   int64
	typ      uint32
	ctx      int32
	parent   int32 // record number, -1 if none
	rank     int32
	root     int32
	nch      int32
	channel  int32
	peer     int32
	step     int32
	op       uint16 // interned names
	dtype    uint16
	algo     uint16
	proto    uint16
	redop    uint16
	isSend   bool
}

// recordSlab holds the records in fixed blocks: growing it copies nothing
// (a slice would move every record at each doubling, and hold two copies
// for a while), and a record stays where it is.
type recordSlab struct {
	blocks [][]record
	n      int
}

const slabBlock = 4096 // records per block

func (s *recordSlab) at(i int32) *record { return &s.blocks[i/slabBlock][i%slabBlock] }

// grow adds a zero record and returns it.
func (s *recordSlab) grow() *record {
	if s.n%slabBlock == 0 {
		s.blocks = append(s.blocks, make([]record, slabBlock))
	}
	s.n++
	return s.at(int32(s.n - 1))
}

// Recorder keeps the events of every communicator of the process and
// writes them as one call trace (and, with proxy steps, one event trace).
// It is safe for concurrent use: NCCL calls from application threads and
// proxy threads at once.
type Recorder struct {
	cfg Config
	log Logger

	mu       sync.Mutex
	ctxs     []*commCtx
	recs     recordSlab
	names    []string
	nameIdx  map[string]uint16
	rawNames [numNameKinds]map[string]uint16 // NCCL's names, by kind, to interned trace names
	dropped  int64
	warned   bool
	dirty    bool // records since the last write
	writeMu  sync.Mutex
	apiLevel int // the newest ABI version an init came through
}

// New returns a recorder for cfg that reports through log.
func New(cfg Config, log Logger) *Recorder {
	if log == nil {
		log = func(int, string) {}
	}
	return &Recorder{cfg: cfg, log: log, names: []string{""}, nameIdx: map[string]uint16{"": 0}}
}

// Config returns the recorder's configuration.
func (r *Recorder) Config() Config { return r.cfg }

// Init adds a communicator and returns its context. version is the ABI
// version NCCL loaded; versions 1 to 3 give no communicator (hash, rank,
// nranks come with each call).
func (r *Recorder) Init(version int, commHash uint64, commName string, nNodes, nRanks, rank int32) Context {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := &commCtx{hash: commHash, hashKnown: version >= 4, name: commName, nNodes: nNodes, rank: rank,
		version: version, p2pSeq: map[[2]int32]int64{}}
	if version >= 4 {
		c.nRanks = nRanks
	} else {
		c.rank = -1
	}
	r.apiLevel = max(r.apiLevel, version)
	r.ctxs = append(r.ctxs, c)
	r.log(LogInfo, fmt.Sprintf("twinccl profiler: communicator %#x (%q) rank %d of %d, profiler API v%d, trace %s",
		commHash, commName, rank, nRanks, version, r.cfg.CallPath()))
	return Context(len(r.ctxs))
}

func (r *Recorder) ctx(c Context) (*commCtx, int32) {
	if c == 0 || int(c) > len(r.ctxs) {
		return nil, -1
	}
	return r.ctxs[c-1], int32(c - 1)
}

// rec returns the record behind handle h (a plain record handle), or nil.
func (r *Recorder) rec(h Handle) (*record, int32) {
	h &^= NoStopFlag
	if h == 0 || h&KernelFlag != 0 || uint64(h) > uint64(r.recs.n) {
		return nil, -1
	}
	return r.recs.at(int32(h - 1)), int32(h - 1)
}

// Kinds of NCCL names, each converted to the trace's by its own rule.
const (
	nameOp = iota
	nameDatatype
	nameAlgo
	nameProto
	nameRedOp
	numNameKinds
)

var nameConv = [numNameKinds]func(string) string{
	nameOp: opName, nameDatatype: datatypeName, nameAlgo: algoName, nameProto: protoName,
	nameRedOp: func(s string) string { return s },
}

// name returns the interned trace name of NCCL's name raw, converting each
// distinct raw name once. raw may alias C memory: it is only looked up,
// and copied where kept.
func (r *Recorder) name(kind int, raw string) uint16 {
	if id, ok := r.rawNames[kind][raw]; ok {
		return id
	}
	own := strings.Clone(raw)
	id := r.intern(nameConv[kind](own))
	if r.rawNames[kind] == nil {
		r.rawNames[kind] = map[string]uint16{}
	}
	r.rawNames[kind][own] = id
	return id
}

func (r *Recorder) intern(s string) uint16 {
	if i, ok := r.nameIdx[s]; ok {
		return i
	}
	if len(r.names) == 1<<16 {
		return 0
	}
	i := uint16(len(r.names))
	r.names = append(r.names, s)
	r.nameIdx[s] = i
	return i
}

// add appends a record unless the cap is reached, warning once.
func (r *Recorder) add(rec record) Handle {
	if r.recs.n >= r.cfg.MaxEvents {
		r.dropped++
		if !r.warned {
			r.warned = true
			r.log(LogWarn, fmt.Sprintf("twinccl profiler: %d events kept, the cap (%s): later calls are not recorded; the trace says how many were dropped",
				r.cfg.MaxEvents, EnvMaxEvents))
		}
		return 0
	}
	*r.recs.grow() = rec
	r.dirty = true
	return Handle(r.recs.n)
}

// Start records the start of an event and returns its handle (0 for an
// event the recorder does not keep).
func (r *Recorder) Start(cx Context, ev *Event) Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ci := r.ctx(cx)
	if c == nil {
		return 0
	}
	switch ev.Type {
	case TypeCollApi, TypeP2pApi:
		h := r.add(record{typ: ev.Type, ctx: ci, parent: -1, start: ev.HostNs, stream: ev.Stream,
			count: int64(ev.Count), dtype: r.name(nameDatatype, ev.Datatype)})
		if h != 0 {
			h |= NoStopFlag
		}
		return h
	case TypeColl, TypeP2p:
		return r.startCall(c, ci, ev)
	case TypeKernelCh:
		p, pi := r.rec(ev.Parent)
		if p == nil || (p.typ != TypeColl && p.typ != TypeP2p) {
			return 0
		}
		if ev.PTimer != 0 {
			if p.gpuStart == 0 || ev.PTimer < p.gpuStart {
				p.gpuStart = ev.PTimer
			}
			c.observe(ev.HostNs, ev.PTimer)
		}
		if p.kStart == 0 || ev.HostNs < p.kStart {
			p.kStart = ev.HostNs
		}
		r.dirty = true
		return KernelFlag | Handle(pi+1)
	case TypeProxyOp:
		parent := int32(-1)
		if !ev.Foreign {
			if p, pi := r.rec(ev.Parent); p != nil && (p.typ == TypeColl || p.typ == TypeP2p) {
				parent = pi
			}
		}
		return r.add(record{typ: ev.Type, ctx: ci, parent: parent, start: ev.HostNs, channel: ev.Channel,
			peer: ev.Peer, isSend: ev.IsSend, rank: ev.Rank})
	case TypeProxyStep:
		p, pi := r.rec(ev.Parent)
		if p == nil || p.typ != TypeProxyOp {
			return 0
		}
		return r.add(record{typ: ev.Type, ctx: ci, parent: pi, start: ev.HostNs, step: ev.Step})
	}
	return 0
}

// observe keeps the smallest host-minus-GPU time of a kernel channel
// event: the host saw the GPU's timestamp at least that late, so this is
// the tightest estimate of the offset between the two clocks.
func (c *commCtx) observe(hostNs int64, gpu uint64) {
	off := hostNs - int64(gpu)
	if !c.hasOff || off < c.minOff {
		c.minOff, c.hasOff = off, true
	}
}

func (r *Recorder) startCall(c *commCtx, ci int32, ev *Event) Handle {
	if !c.hashKnown && ev.CommHash != 0 {
		c.hash, c.hashKnown = ev.CommHash, true
	}
	if c.version < 4 && ev.Rank >= 0 {
		c.rank = ev.Rank
	}
	opID := r.name(nameOp, ev.Func)
	op := r.names[opID]
	redop := r.name(nameRedOp, ev.RedOp)
	if op != "AllReduce" && op != "Reduce" && op != "ReduceScatter" {
		redop = 0 // version 1 gives an operation (sum, 0) to every call
	}
	rec := record{typ: ev.Type, ctx: ci, parent: -1, start: ev.HostNs, enqueue: ev.HostNs, comm: c.hash, rank: c.rank,
		op: opID, dtype: r.name(nameDatatype, ev.Datatype), algo: r.name(nameAlgo, ev.Algo),
		proto: r.name(nameProto, ev.Proto), redop: redop, count: int64(ev.Count),
		root: -1, nch: ev.NChannels}
	if p, pi := r.rec(ev.Parent); p != nil && (p.typ == TypeCollApi || p.typ == TypeP2pApi) {
		rec.parent, rec.stream, rec.enqueue = pi, p.stream, p.start
		// The count and datatype the application passed: NCCL's task
		// counts AllGather and Broadcast in bytes (ncclInt8).
		if p.dtype != 0 {
			rec.count, rec.dtype = p.count, p.dtype
		}
	}
	if ev.Type == TypeColl {
		if rooted(op) {
			rec.root = ev.Root
		}
		rec.call = c.nextColl
		c.nextColl++ // numbered even when dropped: every rank numbers alike
		return r.add(rec)
	}
	rec.root = ev.Peer
	sender, receiver := c.rank, ev.Peer
	if op == "Recv" {
		sender, receiver = ev.Peer, c.rank
	}
	key := [2]int32{sender, receiver}
	call, err := P2PCall(sender, receiver, c.p2pSeq[key])
	if err != nil {
		r.dropped++
		r.log(LogWarn, fmt.Sprintf("twinccl profiler: communicator %#x: %v: not recorded", c.hash, err))
		return 0
	}
	rec.call = call
	c.p2pSeq[key]++ // numbered even when dropped, as the peer numbers it
	return r.add(rec)
}

// Stop records the end of an event.
func (r *Recorder) Stop(h Handle, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h&KernelFlag != 0 {
		if p, _ := r.rec(h &^ KernelFlag); p != nil && now > p.kStop {
			p.kStop = now
			r.dirty = true
		}
		return
	}
	if h&NoStopFlag != 0 {
		return
	}
	if p, _ := r.rec(h); p != nil {
		p.stop = now
		r.dirty = true
	}
}

// Record records a state change: a kernel channel's end (its GPU time in
// pTimer), a proxy step's progress (bytes in transSize).
func (r *Recorder) Record(h Handle, state int32, transSize uint64, pTimer uint64, now int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if h&KernelFlag != 0 {
		p, _ := r.rec(h &^ KernelFlag)
		if p == nil || state != StateKernelChStop || pTimer == 0 {
			return
		}
		if pTimer > p.gpuStop {
			p.gpuStop = pTimer
		}
		if c, _ := r.ctx(Context(p.ctx + 1)); c != nil {
			c.observe(now, pTimer)
		}
		r.dirty = true
		return
	}
	p, _ := r.rec(h)
	if p == nil || p.typ != TypeProxyStep {
		return
	}
	if int64(transSize) > p.bytes {
		p.bytes = int64(transSize)
	}
	switch state {
	case StateProxyStepSendWait, StateProxyStepRecvFlushWait, StateProxyStepRecvGPUWait:
		if p.dataNs == 0 {
			p.dataNs = now
		}
	}
	r.dirty = true
}

// Finalize closes a communicator's context and writes the process's
// traces with everything recorded so far (every communicator's calls: the
// file is the process's, rewritten whole). It writes when something was
// recorded since the last write, and at the last communicator's finalize:
// a job tearing down many communicators at once writes twice, not once
// per communicator.
func (r *Recorder) Finalize(cx Context) error {
	r.mu.Lock()
	c, _ := r.ctx(cx)
	if c == nil {
		r.mu.Unlock()
		return fmt.Errorf("twinccl profiler: finalize of an unknown context %d", cx)
	}
	c.finalized = true
	write := r.dirty
	if !write {
		write = true
		for _, o := range r.ctxs {
			write = write && o.finalized
		}
	}
	r.mu.Unlock()
	if !write {
		return nil
	}
	return r.Write()
}

// Flush writes the traces if anything was recorded since the last write
// (at process exit, for communicators never finalized).
func (r *Recorder) Flush() error {
	r.mu.Lock()
	dirty := r.dirty
	r.mu.Unlock()
	if !dirty {
		return nil
	}
	return r.Write()
}
