package sim

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// Call is one collective call to simulate.
type Call struct {
	Coll model.Collective
	// Count is NCCL's count argument: elements per rank for AllGather and
	// ReduceScatter, elements of the buffer otherwise.
	Count int64
	Dtype model.Dtype
	Op    model.RedOp
	Root  int
	// Algo and Proto force an algorithm and a protocol; negative values
	// take the tuner's choice.
	Algo  model.Algorithm
	Proto model.Protocol
	// NChannels forces the channel budget; 0 takes the tuner's.
	NChannels int
	// InPlace runs the call on one buffer for input and output (see
	// model.ProgOptions.InPlace): PyTorch's broadcast, all_reduce and
	// reduce are in place, nccl-tests times both.
	InPlace bool
}

// CallResult is a simulated call with the decisions it ran with.
type CallResult struct {
	Algo      model.Algorithm
	Proto     model.Protocol
	NChannels int // channels that carried work
	// TunerUs is the tuner's own predicted time of its choice (NCCL's
	// cost model), or -1 when the pair was forced and not costed.
	TunerUs float64
	*Result
}

// Simulator couples a Machine with the tuner of the same search result.
type Simulator struct {
	Machine *Machine
	Search  *search.Result
	// Mode selects step-accurate (the default), fast or automatic runs.
	Mode Mode
	// Harness names the timing harness Compare predicts (see
	// HarnessPyTorch); its calibrated cost is added to every compared row.
	// Empty: nccl-tests.
	Harness string
	// Loop is the number of timed calls of the back-to-back loop that
	// RunTimed simulates after an aligning call, as timing harnesses run
	// them (Machine.LoopCalls); 0 simulates one isolated call.
	// NewSimulator sets DefaultLoopCalls.
	Loop int
	// Eager times the loop as issued by the host outside a CUDA graph
	// (Machine.EagerCalls, Calib.HostCallUs): nccl-tests without -G.
	Eager bool
}

// DefaultLoopCalls is the number of timed calls a Simulator's loop runs
// by default: the steady state of every pipeline between calls (a rank
// running ahead of its peers by its send credits) shows from the second
// call on, and each call costs a whole run of the Program.
const DefaultLoopCalls = 2

// NewSimulator prepares the result of search.Run for simulation.
func NewSimulator(res *search.Result, c *Calib) (*Simulator, error) {
	if res == nil {
		return nil, fmt.Errorf("sim: no search result")
	}
	m, err := NewMachine(res.Cluster, res.Plan, c)
	if err != nil {
		return nil, err
	}
	return &Simulator{Machine: m, Search: res, Loop: DefaultLoopCalls}, nil
}

// clone is a Simulator of the same search, calibration, settings, mode,
// harness and loop on a Machine of its own (a Machine is not safe for
// concurrent use; the search result is only read).
func (s *Simulator) clone() (*Simulator, error) { return s.WithCalib(s.Machine.calib) }

// WithCalib is a Simulator of the same search, settings, mode, harness
// and loop on a Machine of its own with calibration c (e.g. c scaled to
// a recording's host, Calib.ForHost).
func (s *Simulator) WithCalib(c *Calib) (*Simulator, error) {
	old := s.Machine
	m, err := NewMachine(old.Cluster, old.Plan, c)
	if err != nil {
		return nil, err
	}
	m.SetSettings(old.settings)
	if old.fab != nil {
		if err := m.SetFabric(old.fab.f); err != nil {
			return nil, err
		}
	}
	m.streamRuns = old.streamRuns
	cs := *s
	cs.Machine = m
	return &cs, nil
}

// Program generates the Program a call runs, with the tuner's algorithm,
// protocol and channels unless the call forces them.
func (s *Simulator) Program(c Call) (*model.Program, CallResult, error) {
	if c.Coll.IsP2P() {
		return s.p2pProgram(c)
	}
	g, cr, err := s.Generator(c)
	if err != nil {
		return nil, cr, err
	}
	return g.Program(), cr, nil
}

// Generator is Program without materialising the lanes: the generator
// streams them per rank and channel.
func (s *Simulator) Generator(c Call) (*model.ProgGen, CallResult, error) {
	var cr CallResult
	if c.Count < 0 {
		return nil, cr, fmt.Errorf("sim: %s: negative count %d", c.Coll, c.Count)
	}
	if c.Dtype.Size() == 0 {
		return nil, cr, fmt.Errorf("sim: unknown datatype %d", int(c.Dtype))
	}
	if c.Coll.IsP2P() {
		p, cr, err := s.p2pProgram(c)
		if err != nil {
			return nil, cr, err
		}
		return model.NewProgGenFromProgram(p), cr, nil
	}
	if int(c.Coll) >= model.NumTunedCollectives || c.Coll < 0 {
		return nil, cr, fmt.Errorf("sim: %s is not simulated (collectives: broadcast, reduce, allgather, reducescatter, allreduce, alltoall, sendrecv)", c.Coll)
	}
	ch, err := s.Search.Tuning.ChooseCall(search.Call{Coll: c.Coll, Count: c.Count, TypeSize: c.Dtype.Size(),
		ScaledReduce: c.Op == model.RedAvg, NVLSUnsupported: !model.NVLSSupported(c.Op, c.Dtype)})
	if err != nil {
		return nil, cr, fmt.Errorf("sim: %w", err)
	}
	algo, proto, nch := ch.Algo, ch.Proto, ch.NChannels
	cr.TunerUs = float64(ch.TimeUs)
	if c.Algo >= 0 || c.Proto >= 0 {
		if c.Algo >= 0 {
			algo = c.Algo
			if c.Proto < 0 {
				proto = bestProto(ch, c.Coll, algo, proto)
			}
		}
		if c.Proto >= 0 {
			proto = c.Proto
		}
		if algo != ch.Algo || proto != ch.Proto {
			cr.TunerUs = -1
			if v := ch.Costs[algo][proto]; v >= 0 {
				cr.TunerUs = float64(v)
			}
			nch = s.Search.Plan.NChannels
			if (algo == model.AlgoNVLS || algo == model.AlgoNVLSTree) && s.Search.Plan.NVLSChannels > 0 {
				nch = s.Search.Plan.NVLSChannels // topoGetAlgoInfo's nvlsChannels
			}
		}
	}
	if c.NChannels > 0 {
		if c.NChannels > s.Search.Plan.NChannels {
			return nil, cr, fmt.Errorf("sim: %d channels requested, the plan has %d", c.NChannels, s.Search.Plan.NChannels)
		}
		nch = c.NChannels
	}
	genAlgo := algo
	if algo == model.AlgoPAT && !model.ProgramCovers(c.Coll, algo, proto, s.Search.Plan.NRanks) {
		// PAT (one GPU per node) has a Program generator for two ranks
		// only, where its one dimension is the ring's hop with one step
		// per chunk: on more it runs as a ring on the same channels,
		// whose latency its log-depth schedule beats.
		genAlgo = model.AlgoRing
	}
	if !model.CollAllowed(c.Coll, genAlgo, proto) {
		return nil, cr, fmt.Errorf("sim: %s with %s/%s has no Program (%s)", c.Coll, algo, proto, ProgramAlgorithms)
	}
	nch = max(nch, 1)
	// NCCL's block size for what runs: the tuner's size on the channels used
	threads := s.Search.Tuning.Threads(algo, proto, ch.NBytes, nch)
	g, err := model.NewProgGen(s.Search.Plan, c.Coll, genAlgo, proto, c.Count, c.Dtype, c.Op,
		model.ProgOptions{NChannels: nch, Root: c.Root, InPlace: c.InPlace, BuffSize: s.Machine.settings.BuffSize, Threads: threads})
	if err != nil {
		return nil, cr, fmt.Errorf("sim: %w", err)
	}
	cr.Algo, cr.Proto = algo, proto
	cr.NChannels = len(g.Channels())
	return g, cr, nil
}

// nvlsNotFolded is why NVLS and NVLSTree calls run step-accurate in the
// fast mode: its folding maps point-to-point routes only, not the
// NVSwitch's (nvls.go).
const nvlsNotFolded = "NVLS: the fast mode folds point-to-point routes, not the NVSwitch's"

func nvlsAlgo(a model.Algorithm) bool { return a == model.AlgoNVLS || a == model.AlgoNVLSTree }

// ProgramAlgorithms says which algorithms have Programs, for messages.
const ProgramAlgorithms = "Ring for every collective; Tree, NVLS and NVLSTree for AllReduce; NVLS and PAT (two ranks) for AllGather and ReduceScatter; all with Simple, Ring and Tree with LL and LL128 too"

// bestProto is the protocol the tuner's costs rate best for algo (NCCL
// with NCCL_ALGO alone set): the cheapest costed one; when the tuner
// costs none (the algorithm is not available here), the first one algo
// has a Program with for coll, so that the generator says why; else def.
func bestProto(ch search.Choice, coll model.Collective, algo model.Algorithm, def model.Protocol) model.Protocol {
	best, bestCost := model.Protocol(-1), float32(-1)
	for p := model.Protocol(0); p < model.NumProtocols; p++ {
		if v := ch.Costs[algo][p]; v >= 0 && (bestCost < 0 || v < bestCost) {
			best, bestCost = p, v
		}
	}
	if best >= 0 {
		return best
	}
	if model.CollAllowed(coll, algo, def) {
		return def
	}
	for p := model.Protocol(0); p < model.NumProtocols; p++ {
		if model.CollAllowed(coll, algo, p) {
			return p
		}
	}
	return def
}

// p2pProgram generates the Program of an AlltoAll (Count elements per
// peer) or of nccl-tests' SendRecv pattern (every rank sends Count
// elements to the next rank and receives as many from the previous one)
// on NCCL's p2p schedule. The protocol is NCCL's per-transfer choice
// (model.P2PProtocol) for the transfers between distinct ranks, unless
// forced; the channels are the plan's p2p channels.
func (s *Simulator) p2pProgram(c Call) (*model.Program, CallResult, error) {
	cr := CallResult{Algo: model.AlgoRing, TunerUs: -1}
	plan := s.Search.Plan
	n := plan.NRanks
	if c.Algo >= 0 && c.Algo != model.AlgoRing {
		return nil, cr, fmt.Errorf("sim: %s runs on the p2p schedule: --algo %s does not apply", c.Coll, c.Algo)
	}
	if c.NChannels > 0 {
		return nil, cr, fmt.Errorf("sim: %s uses the plan's p2p channels (%d per peer): a channel budget does not apply", c.Coll, plan.P2PChannelsPerPeer)
	}
	bytes := c.Count * int64(c.Dtype.Size())
	_, chMax := model.P2PChannelRange(n, plan.P2PChannels, plan.P2PChannelsPerPeer)
	proto := model.P2PProtocol(bytes, chMax, plan.NNodes > 1, false)
	if c.Proto >= 0 {
		if c.Proto == model.ProtoLL128 {
			return nil, cr, fmt.Errorf("sim: %s has no LL128 p2p Program (Simple or LL)", c.Coll)
		}
		proto = c.Proto
	}
	var p *model.Program
	var err error
	if c.Coll == model.CollAlltoAll {
		p, err = model.GenerateAlltoAllProgram(plan, proto, c.Count, c.Dtype, model.P2POptions{})
	} else {
		tasks := make([]model.P2PTask, 0, 2*n)
		for r := 0; r < n; r++ {
			tasks = append(tasks,
				model.P2PTask{Rank: r, Peer: (r + 1) % n, Send: true, Count: c.Count},
				model.P2PTask{Rank: r, Peer: (r + n - 1) % n, Send: false, Count: c.Count})
		}
		p, err = model.GenerateP2PProgram(plan, tasks, proto, c.Dtype, model.P2POptions{})
	}
	if err != nil {
		return nil, cr, fmt.Errorf("sim: %w", err)
	}
	cr.Proto = proto
	used := map[int32]bool{}
	for i := range p.Lanes {
		used[p.Lanes[i].Channel] = true
	}
	cr.NChannels = len(used)
	return p, cr, nil
}

// Run simulates one call.
func (s *Simulator) Run(c Call) (CallResult, error) {
	return s.RunRecord(c, nil)
}

// RunTimed simulates a call as a timing loop measures it: s.Loop calls
// back to back on every rank after an aligning one, the result per call
// (see loop.go). kernel asks for one isolated call instead, the time of a
// traced kernel.
func (s *Simulator) RunTimed(c Call, kernel bool) (CallResult, error) {
	saved, savedEager := s.Machine.LoopCalls, s.Machine.EagerCalls
	defer func() { s.Machine.LoopCalls, s.Machine.EagerCalls = saved, savedEager }()
	s.Machine.LoopCalls, s.Machine.EagerCalls = s.Loop, s.Eager
	if kernel {
		s.Machine.LoopCalls = 0
	}
	return s.Run(c)
}

// RunRecord simulates one call and reports its slices to rec (see
// Machine.RunRecord); a nil rec records nothing.
//
// In ModeFast (and ModeAuto above AutoFastSlices) a ring collective over
// identical hosts runs folded onto host 0 (see Fold); any other call runs
// reduced to the orbits of its symmetries (hosts rotated onto host 0 where
// the Program is symmetric under that rotation, identical channels merged;
// see Machine.aggregate), and step-accurate when it has none. rec then
// sees the slices of the lanes that ran only, and Result.Fast says what
// was done.
func (s *Simulator) RunRecord(c Call, rec func(*SliceEvent)) (CallResult, error) {
	if c.Coll.IsP2P() {
		p, cr, err := s.p2pProgram(c)
		if err != nil {
			return cr, err
		}
		var r *Result
		if s.wantFast(func() int64 { return programSlices(p) * s.Machine.runCalls() }) {
			r, err = s.runFastProgram(p, "", rec)
		} else {
			r, err = s.Machine.RunRecord(p, rec)
		}
		if err != nil {
			return cr, fmt.Errorf("%s %s/%s count %d: %w", c.Coll, cr.Algo, cr.Proto, c.Count, err)
		}
		cr.Result = r
		return cr, nil
	}
	g, cr, err := s.Generator(c)
	if err != nil {
		return cr, err
	}
	var r *Result
	if nvlsAlgo(cr.Algo) && s.Mode != ModeAccurate {
		r, err = s.Machine.RunGen(g, rec)
		if err != nil {
			return cr, fmt.Errorf("%s %s/%s count %d: %w", c.Coll, cr.Algo, cr.Proto, c.Count, err)
		}
		if s.wantFast(func() int64 { return estimateSlices(g) * s.Machine.runCalls() }) {
			r.Fast = "step-accurate: " + nvlsNotFolded
		}
		cr.Result = r
		return cr, nil
	}
	if s.wantFast(func() int64 { return estimateSlices(g) * s.Machine.runCalls() }) {
		f, why := s.Machine.fold(g, s.Mode)
		var x *Result
		if f == nil {
			x, why = s.fastDepth(c, g, cr, rec, why)
		}
		switch {
		case f != nil:
			r, err = s.Machine.runFolded(f, rec)
		case x != nil:
			r = x
		case estimateSlices(g) > MaxAggregateSlices:
			// Checking the other symmetries needs the whole Program in
			// memory: stream it step-accurate instead.
			r, err = s.Machine.RunGen(g, rec)
			if err == nil {
				r.Fast = fmt.Sprintf("step-accurate: ring fold: %s; over %d slices, too large to check other symmetries", why, MaxAggregateSlices)
			}
		default:
			r, err = s.runFastProgram(g.Program(), "ring fold: "+why, rec)
		}
	} else {
		r, err = s.Machine.RunGen(g, rec)
	}
	if err != nil {
		return cr, fmt.Errorf("%s %s/%s count %d: %w", c.Coll, cr.Algo, cr.Proto, c.Count, err)
	}
	cr.Result = r
	return cr, nil
}

// MaxAggregateSlices bounds the (estimated) slices of a call whose Program
// the fast mode materialises to look for host rotation and identical
// channels (Machine.aggregate); larger calls that the ring fold does not
// cover run step-accurate, streamed.
const MaxAggregateSlices = 32_000_000

// wantFast reports whether the mode asks for a fast run of a call of
// (estimated) slices.
func (s *Simulator) wantFast(slices func() int64) bool {
	switch s.Mode {
	case ModeFast:
		return true
	case ModeAuto:
		return slices() > AutoFastSlices
	}
	return false
}

// runFastProgram runs a Program reduced by its symmetries, or
// step-accurate (saying why in Result.Fast) when it has none.
func (s *Simulator) runFastProgram(p *model.Program, why0 string, rec func(*SliceEvent)) (*Result, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	a, why := s.Machine.aggregate(p)
	if a != nil {
		return s.Machine.runAggregated(a, rec)
	}
	r, err := s.Machine.exec(p, nil, rec, nil)
	if err != nil {
		return nil, err
	}
	if why0 != "" {
		why = why0 + "; " + why
	}
	r.Fast = "step-accurate: " + why
	return r, nil
}

// programSlices is the number of slices a run of p executes.
func programSlices(p *model.Program) int64 {
	spc := int64(1)
	if p.Proto == model.ProtoSimple {
		spc = int64(p.SlicesPerChunk)
	}
	return int64(p.NumOps()) * spc
}

// Fold reports whether the call can run aggregated in the fast mode
// (ring fold, host rotation or merged channels), and what the
// aggregation is or why there is none.
func (s *Simulator) Fold(c Call) (bool, string, error) {
	if c.Coll.IsP2P() {
		p, _, err := s.p2pProgram(c)
		if err != nil {
			return false, "", err
		}
		a, why := s.Machine.aggregate(p)
		if a == nil {
			return false, why, nil
		}
		return true, a.describe(), nil
	}
	g, cr, err := s.Generator(c)
	if err != nil {
		return false, "", err
	}
	if nvlsAlgo(cr.Algo) {
		return false, nvlsNotFolded, nil
	}
	if f, _ := s.Machine.fold(g, s.Mode); f != nil {
		return true, "ring fold", nil
	}
	a, why := s.Machine.aggregate(g.Program())
	if a == nil {
		return false, why, nil
	}
	return true, a.describe(), nil
}
