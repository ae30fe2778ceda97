package main

import (
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
	"github.com/twinccl/twinccl/traces"
)

// runComm is one communicator of a replayed trace: its members (job
// ranks, by rank in the communicator), its own NCCL init on them and the
// job hosts of its nodes.
type runComm struct {
	hash    uint64
	members []int
	sim     *sim.Simulator
	hosts   []int
	calls   int
	// the predicted and recorded spans of its calls (ns; start -1: none)
	predStart, predEnd float64
	recStart, recEnd   int64
	// the calls' kernel times on the rank that started last (the
	// shortest), summed (ns): the recording's and the simulation's
	recKernels, predKernels float64
}

// runComms finds the communicators of a trace's calls and checks them
// against a job of n ranks. The trace's metadata (traces.MetaComms) gives
// the job (global) rank of every rank of each communicator it lists; a
// communicator it does not list has its ranks for job ranks. Every call
// must be on all its communicator's ranks, each once, and every job rank
// a rank of the topology.
func runComms(path string, calls []*runCall, n int, meta map[string]string) ([]*runComm, error) {
	listed := map[uint64][]int32{}
	if v, ok := meta[traces.MetaComms]; ok {
		comms, err := traces.DecodeComms(v)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, c := range comms {
			listed[c.ID] = c.Ranks
		}
	}
	byHash := map[uint64]*runComm{}
	var out []*runComm
	for _, c := range calls {
		where := fmt.Sprintf("%s: communicator %#x call %d", path, c.comm, c.seq)
		cm := byHash[c.comm]
		if cm == nil {
			nr := int(c.rows[0].NRanks)
			cm = &runComm{hash: c.comm, predStart: -1, recStart: -1}
			if ranks, ok := listed[c.comm]; ok {
				for _, g := range ranks {
					cm.members = append(cm.members, int(g))
				}
			} else {
				if nr < 1 || nr > n {
					return nil, fmt.Errorf("%s: the communicator has %d ranks but the topology %d (--nodes N replicates a single-host file)", where, nr, n)
				}
				for r := range nr {
					cm.members = append(cm.members, r)
				}
			}
			for r, g := range cm.members {
				if g >= n {
					return nil, fmt.Errorf("%s: rank %d is job rank %d but the topology has %d rank(s) (ranks 0-%d; --nodes N replicates a single-host file)", where, r, g, n, n-1)
				}
			}
			byHash[c.comm] = cm
			out = append(out, cm)
		}
		if len(c.rows) != len(cm.members) {
			return nil, fmt.Errorf("%s: the call has %d of the communicator's %d rank(s): only calls on all their ranks are simulated", where, len(c.rows), len(cm.members))
		}
		for i, r := range c.rows {
			switch {
			case i > 0 && r.Rank == c.rows[i-1].Rank:
				return nil, fmt.Errorf("%s: rank %d appears twice", where, r.Rank)
			case int(r.NRanks) != len(cm.members):
				return nil, fmt.Errorf("%s: rank %d says the communicator has %d ranks, the trace %d", where, r.Rank, r.NRanks, len(cm.members))
			case r.Rank < 0 || int(r.Rank) >= len(cm.members):
				return nil, fmt.Errorf("%s: rank %d outside the communicator's %d ranks", where, r.Rank, len(cm.members))
			}
		}
		c.group = cm
		cm.calls++
	}
	return out, nil
}

// jobRank is the job rank of a row of call c.
func jobRank(c *runCall, r *traces.CallRow) int32 { return int32(c.group.members[r.Rank]) }

// needsJob reports whether a trace's calls may overlap: several
// communicators, one not over the whole job in rank order, or a rank
// with several streams.
func needsJob(calls []*runCall, comms []*runComm, n int) bool {
	if len(comms) != 1 || len(comms[0].members) != n {
		return true
	}
	for r, g := range comms[0].members {
		if r != g {
			return true
		}
	}
	streams := map[int32]uint64{}
	for _, c := range calls {
		for i := range c.rows {
			r := &c.rows[i]
			if s, ok := streams[jobRank(c, r)]; ok && s != r.Stream {
				return true
			}
			streams[jobRank(c, r)] = r.Stream
		}
	}
	return false
}

// jobReplay is the state of a replay of concurrent calls on one engine.
type jobReplay struct {
	in       string
	job      *sim.Job
	calls    []*runCall
	comm     map[uint64]*runComm
	hostGaps bool
	cw       *traces.CallWriter
	ew       *traces.EventWriter
	evBuf    []traces.EventRow
	evErr    error
	// lone runs a call that nothing could overlap by itself (runAlone);
	// memo holds the isolated results of distinct calls, their slices
	// while cachedSlices is within runCacheSlices
	lone         bool
	memo         map[commCall]runMemo
	cachedSlices int64
	// the job's predicted and recorded spans (ns; start -1: none)
	predStart, predEnd float64
	recStart, recEnd   int64
	// firstEnqueue is each job rank's first recorded enqueue
	firstEnqueue map[int32]int64
}

// setupComms runs every communicator's own NCCL init (the whole job's when
// it is one over all ranks in order) and maps its nodes onto the job's hosts.
func setupComms(comms []*runComm, whole *search.Result, jobSim *sim.Simulator, calib *sim.Calib, topoArgs []string, nodes int, lookup func(string) (string, bool)) error {
	n := whole.Cluster.NRanks
	for _, cm := range comms {
		res := whole
		identity := len(cm.members) == n
		for r, g := range cm.members {
			identity = identity && r == g
		}
		if !identity {
			var err error
			if res, err = searchTopologyRanks(topoArgs, nodes, cm.members, lookup); err != nil {
				return fmt.Errorf("communicator %#x (job ranks %s): %w", cm.hash, rankList(cm.members), err)
			}
		}
		s, err := sim.NewSimulator(res, calib)
		if err != nil {
			return err
		}
		s.Machine.SetSettings(jobSim.Machine.Settings())
		s.Mode = jobSim.Mode
		cm.sim = s
		if cm.hosts, err = sim.CommHosts(jobSim.Machine, cm.members, res.Cluster); err != nil {
			return err
		}
	}
	return nil
}

func (jr *jobReplay) flushEvents() {
	if len(jr.evBuf) > 0 && jr.evErr == nil {
		if err := jr.ew.Append(jr.evBuf...); err != nil {
			jr.evErr = fmt.Errorf("event trace: %w", err)
		}
	}
	jr.evBuf = jr.evBuf[:0]
}

// psOf is a time in ns as the engine's (ps).
func psOf(ns float64) sim.Time { return sim.Time(math.Round(ns * 1e3)) }

// enqueueOf is the enqueue time of a call on a job rank.
func enqueueOf(c *runCall, rank int32) int64 {
	for i := range c.rows {
		if jobRank(c, &c.rows[i]) == rank {
			return c.rows[i].EnqueueNs
		}
	}
	return 0
}

// printComms prints each communicator's calls and makespans.
func printComms(w io.Writer, comms []*runComm) {
	fmt.Fprintf(w, "%-18s %5s %-12s %6s %14s %14s %14s %14s\n", "communicator", "ranks", "job ranks", "calls", "recorded(us)", "predicted(us)", "rec kernels", "pred kernels")
	for _, cm := range comms {
		rec := "-"
		if cm.recStart >= 0 && cm.recEnd > cm.recStart {
			rec = fmt.Sprintf("%.2f", float64(cm.recEnd-cm.recStart)/1e3)
		}
		pred := "-"
		if cm.predStart >= 0 {
			pred = fmt.Sprintf("%.2f", (cm.predEnd-cm.predStart)/1e3)
		}
		members := strings.ReplaceAll(rankList(cm.members), " ", ",")
		if len(members) > 12 {
			members = members[:9] + "..."
		}
		recK := "-"
		if cm.recKernels > 0 {
			recK = fmt.Sprintf("%.2f", cm.recKernels/1e3)
		}
		fmt.Fprintf(w, "0x%016x %5d %-12s %6d %14s %14s %14s %14.2f\n", cm.hash, len(cm.members), members, cm.calls, rec, pred, recK, cm.predKernels/1e3)
	}
}

// toSimCall turns a call's first row into the call to simulate.
func toSimCall(where string, r0 traces.CallRow) (sim.Call, error) {
	coll, err := model.ParseCollective(r0.Op)
	if err != nil {
		return sim.Call{}, fmt.Errorf("%s: %v", where, err)
	}
	dt, err := model.ParseDtype(r0.Datatype)
	if err != nil {
		return sim.Call{}, fmt.Errorf("%s: %v", where, err)
	}
	sc := sim.Call{Coll: coll, Count: r0.Count, Dtype: dt, Op: model.RedSum, Root: max(int(r0.Root), 0), Algo: -1, Proto: -1}
	if r0.RedOp != "" {
		if sc.Op, err = model.ParseRedOp(r0.RedOp); err != nil {
			return sim.Call{}, fmt.Errorf("%s: %v", where, err)
		}
	}
	if r0.Algorithm != "" && !coll.IsP2P() {
		if sc.Algo, err = model.ParseAlgorithm(r0.Algorithm); err != nil {
			return sim.Call{}, fmt.Errorf("%s: %v", where, err)
		}
	}
	if r0.Protocol != "" {
		if sc.Proto, err = model.ParseProtocol(r0.Protocol); err != nil {
			return sim.Call{}, fmt.Errorf("%s: %v", where, err)
		}
	}
	return sc, nil
}

// replayJob replays calls that may overlap (several communicators or
// streams) on one engine of the whole job, and prints the makespans, of
// the job and of each communicator.
func replayJob(in string, calls []*runCall, comms []*runComm, res *search.Result, s *sim.Simulator, hostGaps, lone bool,
	pair *tracePair, callPath, eventPath string, settings map[string]string, envFrom string,
	bar *progressBar, stdout io.Writer) error {
	jr := &jobReplay{in: in, job: sim.NewJob(s.Machine), calls: calls, comm: map[uint64]*runComm{},
		hostGaps: hostGaps, cw: pair.Calls, ew: pair.Events, firstEnqueue: map[int32]int64{}, lone: lone, memo: map[commCall]runMemo{}}
	for _, cm := range comms {
		jr.comm[cm.hash] = cm
	}
	for _, c := range calls {
		for i := range c.rows {
			r := &c.rows[i]
			g := jobRank(c, r)
			if f, ok := jr.firstEnqueue[g]; r.EnqueueNs >= 0 && (!ok || r.EnqueueNs < f) {
				jr.firstEnqueue[g] = r.EnqueueNs
			}
		}
	}
	err := jr.replay(bar)
	bar.done()
	if err != nil {
		return err
	}
	predStart, predEnd, recStart, recEnd := jr.predStart, jr.predEnd, jr.recStart, jr.recEnd
	// Both files appear together, complete, or neither does.
	if err := pair.commit(); err != nil {
		return fmt.Errorf("--out %s, %s: %w", callPath, eventPath, err)
	}
	fmt.Fprintf(stdout, "# replay run: %s on %s, %d rank(s), %d call(s) of %d communicator(s) in one engine (calls in flight together share the links), settings %s\n",
		in, res.Cluster.File, res.Cluster.NRanks, len(calls), len(comms), settingsLine(settings))
	if envFrom != "" {
		fmt.Fprintf(stdout, "# settings recorded in %s, the --json file of the same run\n", envFrom)
	}
	if recStart >= 0 && recEnd > recStart {
		fmt.Fprintf(stdout, "recorded makespan  %12.2f us\n", float64(recEnd-recStart)/1e3)
	}
	fmt.Fprintf(stdout, "predicted makespan %12.2f us\n", (predEnd-max(predStart, 0))/1e3)
	var recK, predK float64
	for _, cm := range comms {
		recK, predK = recK+cm.recKernels, predK+cm.predKernels
	}
	if recK > 0 {
		fmt.Fprintf(stdout, "recorded kernels   %12.2f us (each call's kernel on the rank that started last, summed)\n", recK/1e3)
	}
	fmt.Fprintf(stdout, "predicted kernels  %12.2f us\n", predK/1e3)
	printComms(stdout, comms)
	fmt.Fprintf(stdout, "wrote %s and %s\n", callPath, eventPath)
	return nil
}
