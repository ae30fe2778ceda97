package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/exec/sim/hwcmp"
	"github.com/twinccl/twinccl/traces"
)

const runHelp = `Usage: replay run CALLS.parquet [--topo FILE.xml] [--nodes N] [--out PREFIX]
                  [--calib FILE.json] [--env KEY=VALUE ...] [--host-gaps=false]
                  [--fabric FILE.yaml] [--mode auto|fast|accurate] [--progress]

Replays a recorded call trace (package traces' call schema: one row per call and
rank) on a topology with the simulator. Every call runs with its recorded
collective, count, datatype, reduction and root, and with its recorded algorithm
and protocol when the trace has them (else the tuner's choice). Calls depend on
each other by stream order per rank: on every rank, a call starts when the
previous call of the same stream ended (calls are ordered by enqueue time, then
communicator and sequence number); a collective starts when all its ranks can
start it. A call is also issued no earlier than the trace recorded, relative to
its rank's first call (enqueue_ns: the host's time between calls, other work on
the GPU, a training step's compute), so that the two makespans compare;
--host-gaps=false runs every stream's calls back to back instead.

A job has many communicators: each row names its communicator (comm) and its
rank in it, and the trace's metadata (twinccl.comms, which "run grid --trace",
"replay sim --ranks --trace" and the importers write) the job rank of every rank
of each communicator; a communicator it does not list has its ranks for job
ranks. Every communicator runs its own NCCL init over its
members, as "replay search --ranks" does (the hosts see only their members' GPUs).
When calls may overlap (several communicators, one not over all ranks in order,
or a rank with several streams), all of them run in one engine on the job's
topology: calls in flight at the same time put their slices on the same links,
NVLink, PCIe, NICs and host memory, shared as one call's channels share them
(max-min fair, slice by slice), so that two bandwidth-bound calls over one NIC
take about twice as long as one; the calls of one communicator also share its
socket proxy threads (NCCL runs one per communicator and GPU). Calls in flight
together run step-accurate; a call that starts with none in flight and ends
before any other starts runs by itself, as "replay sim" runs it (--mode applies,
identical calls simulated once). Such replays also print each communicator's
calls and makespans.

The search, transports and tuner run under the NCCL_* settings the trace was
recorded under (its metadata, which "run gpu --trace" writes, else the nccl_env
of the --json file of the same run beside it), then this environment's, then
--env's: a trace recorded with NCCL_P2P_DISABLE=1 replays over SHM.

It writes PREFIX.calls.parquet (one row per call and rank, source "sim") and
PREFIX.events.parquet (one row per simulated slice), PREFIX defaulting to CALLS
without ".parquet" plus ".sim", and prints the recorded and predicted makespans
and the time the calls' kernels took on either side (each call's kernel on the
rank that started last, the shortest, which waited for no peer's launch, as
"replay compare" times a traced call; summed): a trace of calls the host issued
apart, as "run gpu --trace" writes them, has makespans made mostly of the time
between them, and its kernels are what the simulator predicts.
The job ranks must be ranks of the topology (--nodes N replicates a single-host
file).

` + fabricHelp + `
Flags:
`

// runCall is one collective call of a trace: its rows on every rank.
type runCall struct {
	comm  uint64
	seq   int64
	rows  []traces.CallRow // by rank
	call  sim.Call
	first int64 // earliest enqueue
	done  bool
	idx   int // index in the trace's calls
	// group is the call's communicator (runComms)
	group *runComm
	// chose is what the simulation of the call chose (algorithm, protocol,
	// channels), set when it starts
	chose sim.CallResult
}

// runMemo is the simulation of a distinct call, with its slices when
// they were cached.
type runMemo struct {
	cr     sim.CallResult
	evs    []sim.SliceEvent
	cached bool
}

// runCacheSlices bounds the slices kept to replay identical calls.
const runCacheSlices = 4 << 20

// replayLone lets replay run simulate a call that nothing overlaps by
// itself (jobReplay.runAlone); tests turn it off to check that it changes
// nothing.
var replayLone = true

// runKey identifies a rank's stream.
type runKey struct {
	rank   int32
	stream uint64
}

func runReplayRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	topo := fs.String("topo", "", "topology XML `FILE` (default: the embedded one)")
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	out := fs.String("out", "", "output `PREFIX` of the predicted traces")
	calibPath := fs.String("calib", "", calibFlagHelp)
	fabricPath := fs.String("fabric", "", fabricFlagHelp)
	modeName := fs.String("mode", "auto", "engine: auto, fast or accurate")
	progress := fs.Bool("progress", false, "draw a progress bar on stderr even when it is not a terminal")
	hostGaps := fs.Bool("host-gaps", true, "issue each rank's calls as long after its first as the trace recorded (the host's time between them); false runs every stream's calls back to back")
	env := envFlags{}
	fs.Var(env, "env", "NCCL_* setting `KEY=VALUE` to replay under (repeatable; wins over the trace's and the environment's)")
	fs.Usage = func() {
		fmt.Fprint(stderr, runHelp)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: replay run wants one call trace (CALLS.parquet)", errUsage)
	}
	mode, err := sim.ParseMode(*modeName)
	if err != nil {
		return fmt.Errorf("%w: --mode: %v", errUsage, err)
	}
	in := pos[0]
	calls, recMeta, err := readRunCalls(in)
	if err != nil {
		return err
	}
	recorded, envFrom, err := hwcmp.TraceEnv(in, recMeta)
	if err != nil {
		return err
	}
	settings := recordedSettings(recorded, env)
	var topoArgs []string
	if *topo != "" {
		topoArgs = []string{*topo}
	}
	res, err := searchTopologyWith(topoArgs, *nodes, func(k string) (string, bool) { v, ok := settings[k]; return v, ok })
	if err != nil {
		return err
	}
	n := res.Cluster.NRanks
	comms, err := runComms(in, calls, n, recMeta)
	if err != nil {
		return err
	}
	multi := needsJob(calls, comms, n)
	if err := checkRunCalls(in, calls, n, !multi); err != nil {
		return err
	}
	s, calib, _, bar, err := newSimulator(res, *calibPath, mode, *progress, stderr)
	if err != nil {
		return err
	}
	defer bar.done()
	if multi && *fabricPath != "" {
		return fmt.Errorf("--fabric %s: a job of several communicators does not run over a fabric file yet (each communicator's routes are its own); replay each communicator with --ranks, or drop --fabric", *fabricPath)
	}
	if err := attachFabric(s, *fabricPath); err != nil {
		return err
	}
	lookup := func(k string) (string, bool) { v, ok := settings[k]; return v, ok }
	if multi {
		if err := setupComms(comms, res, s, calib, topoArgs, *nodes, lookup); err != nil {
			return err
		}
	}
	prefix := *out
	if prefix == "" {
		prefix = strings.TrimSuffix(in, ".parquet") + ".sim"
	}
	callPath, eventPath := simTracePaths(prefix)
	meta := map[string]string{"twinccl.sim.job": "replay run " + in, "twinccl.sim.topology": res.Cluster.File}
	if len(settings) > 0 {
		js, err := json.Marshal(settings)
		if err != nil {
			return err
		}
		meta[traces.MetaNCCLEnv] = string(js)
	}
	pair, err := createTracePair(callPath, eventPath, traces.WriterOptions{Metadata: meta})
	if err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	defer pair.abort() // both files appear at commit, or neither
	cw, ew := pair.Calls, pair.Events
	if multi {
		return replayJob(in, calls, comms, res, s, *hostGaps, replayLone, pair, callPath, eventPath, settings, envFrom, bar, stdout)
	}

	// Per rank and stream, the calls in issue order.
	queues := map[runKey][]*runCall{}
	for _, c := range calls {
		for _, r := range c.rows {
			k := runKey{r.Rank, r.Stream}
			queues[k] = append(queues[k], c)
		}
	}
	keys := make([]runKey, 0, len(queues))
	for k, q := range queues {
		sort.SliceStable(q, func(i, j int) bool { return runBefore(q[i], q[j], k.rank) })
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].rank < keys[j].rank || keys[i].rank == keys[j].rank && keys[i].stream < keys[j].stream
	})
	head := map[runKey]int{}
	ready := map[runKey]float64{} // ns when the stream's last call ended
	// Each rank's first recorded enqueue: its later calls are issued as
	// long after it as they were (one host clock per rank).
	firstEnqueue := map[int32]int64{}
	for _, c := range calls {
		for _, r := range c.rows {
			if f, ok := firstEnqueue[r.Rank]; r.EnqueueNs >= 0 && (!ok || r.EnqueueNs < f) {
				firstEnqueue[r.Rank] = r.EnqueueNs
			}
		}
	}
	memo := map[sim.Call]runMemo{}
	var cachedSlices int64
	var recEnd, recStart int64 = 0, -1
	predStart, predEnd := -1.0, 0.0 // from the first call that moves data
	// the calls' kernel times on the rank that started last (the
	// shortest: it waited for no peer's launch), summed: the recording's
	// and the simulation's
	var recKernels, predKernels float64
	var evBuf []traces.EventRow
	var evErr error
	addEvent := func(c *runCall, base float64, e *sim.SliceEvent) {
		evBuf = append(evBuf, simEventRow(c.comm, c.seq, base, e))
		if len(evBuf) >= 4096 && evErr == nil {
			evErr = ew.Append(evBuf...)
			evBuf = evBuf[:0]
		}
	}
	done := 0
	for done < len(calls) {
		// The ready calls: at the head of the queue of every rank they run on.
		var next *runCall
		for _, k := range keys {
			q := queues[k]
			if head[k] >= len(q) {
				continue
			}
			c := q[head[k]]
			ok := true
			for _, r := range c.rows {
				rk := runKey{r.Rank, r.Stream}
				if queues[rk][head[rk]] != c {
					ok = false
					break
				}
			}
			if ok && (next == nil || runKeyLess(c, next)) {
				next = c
			}
		}
		if next == nil {
			return fmt.Errorf("%s: the calls cannot be ordered by stream: every rank waits for a call another rank issues later (inconsistent trace)", in)
		}
		start := 0.0
		for _, r := range next.rows {
			start = max(start, ready[runKey{r.Rank, r.Stream}])
			if f, ok := firstEnqueue[r.Rank]; ok && *hostGaps && r.EnqueueNs >= f {
				start = max(start, float64(r.EnqueueNs-f))
			}
		}
		bar.setLabel(fmt.Sprintf("call %d/%d", done+1, len(calls)))
		// Identical calls are simulated once while their slices fit the
		// cache; the slices are then shifted to each call's start.
		m, ok := memo[next.call]
		if !ok || !m.cached {
			var evs []sim.SliceEvent
			keep := cachedSlices < runCacheSlices
			c0, base := next, start
			cr, err := s.RunRecord(next.call, func(e *sim.SliceEvent) {
				if keep {
					evs = append(evs, *e)
				} else {
					addEvent(c0, base, e)
				}
			})
			bar.done()
			if err != nil {
				return fmt.Errorf("%s: communicator %#x call %d: %w", in, next.comm, next.seq, err)
			}
			m = runMemo{cr: cr}
			if keep && cachedSlices+int64(len(evs)) <= runCacheSlices {
				m.evs, m.cached = evs, true
				cachedSlices += int64(len(evs))
			} else {
				for i := range evs {
					addEvent(next, start, &evs[i])
				}
			}
			memo[next.call] = m
		}
		if m.cached {
			for i := range m.evs {
				addEvent(next, start, &m.evs[i])
			}
		}
		cr := m.cr
		if len(evBuf) > 0 && evErr == nil {
			evErr = ew.Append(evBuf...)
			evBuf = evBuf[:0]
		}
		if evErr != nil {
			return fmt.Errorf("event trace %s: %w", eventPath, evErr)
		}
		// As "replay sim" records them: the kernel (and its slices) starts
		// at the call's start, the stream is free again after the call's
		// whole time (launch cost included).
		rows := make([]traces.CallRow, 0, len(next.rows))
		recK, predK := math.Inf(1), math.Inf(1)
		for _, r := range next.rows {
			end := start + cr.RankKernelUs[r.Rank]*1e3
			predK = min(predK, cr.RankKernelUs[r.Rank]*1e3)
			if r.StartNs >= 0 && r.EndNs > r.StartNs { // a kernel ran
				recK = min(recK, float64(r.EndNs-r.StartNs))
				recEnd = max(recEnd, r.EndNs)
				if recStart < 0 || r.StartNs < recStart {
					recStart = r.StartNs
				}
			}
			algo := cr.Algo.String()
			if next.call.Coll.IsP2P() {
				algo = ""
			}
			o := r
			o.Algorithm, o.Protocol, o.Channels = algo, cr.Proto.String(), int32(cr.NChannels)
			o.EnqueueNs, o.StartNs, o.EndNs = int64(start), int64(start), int64(end)
			o.Source = traces.SourceSim
			rows = append(rows, o)
			ready[runKey{r.Rank, r.Stream}] = start + cr.TimeUs*1e3
			predEnd = max(predEnd, start+cr.TimeUs*1e3)
		}
		if !math.IsInf(recK, 1) {
			recKernels += recK
		}
		if !math.IsInf(predK, 1) {
			predKernels += predK
		}
		if next.call.Count > 0 && (predStart < 0 || start < predStart) {
			predStart = start
		}
		if err := cw.Append(rows...); err != nil {
			return fmt.Errorf("call trace %s: %w", callPath, err)
		}
		for _, r := range next.rows {
			head[runKey{r.Rank, r.Stream}]++
		}
		next.done = true
		done++
	}
	if err := pair.commit(); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	fmt.Fprintf(stdout, "# replay run: %s on %s, %d rank(s), %d call(s) (%d distinct simulated), settings %s\n",
		in, res.Cluster.File, n, len(calls), len(memo), settingsLine(settings))
	if envFrom != "" {
		fmt.Fprintf(stdout, "# settings recorded in %s, the --json file of the same run\n", envFrom)
	}
	if recStart >= 0 && recEnd > recStart {
		fmt.Fprintf(stdout, "recorded makespan  %12.2f us\n", float64(recEnd-recStart)/1e3)
	}
	fmt.Fprintf(stdout, "predicted makespan %12.2f us\n", (predEnd-max(predStart, 0))/1e3)
	if recKernels > 0 {
		fmt.Fprintf(stdout, "recorded kernels   %12.2f us (each call's kernel on the rank that started last, summed)\n", recKernels/1e3)
	}
	fmt.Fprintf(stdout, "predicted kernels  %12.2f us\n", predKernels/1e3)
	if recKernels > 0 && float64(recEnd-recStart) > 2*recKernels {
		if *hostGaps {
			fmt.Fprintf(stdout, "# the makespans are mostly the host's time between the calls, replayed as recorded: compare the kernels\n")
		} else {
			fmt.Fprintf(stdout, "# the recorded makespan is mostly time between the calls (the host, other work), which --host-gaps=false leaves out: compare the kernels\n")
		}
	}
	fmt.Fprintf(stdout, "wrote %s and %s\n", callPath, eventPath)
	return nil
}

// runBefore orders the calls of one rank's stream: by the rank's enqueue
// time, then communicator and sequence number.
func runBefore(a, b *runCall, rank int32) bool {
	ea, eb := a.rows[rankIndex(a, rank)].EnqueueNs, b.rows[rankIndex(b, rank)].EnqueueNs
	if ea != eb {
		return ea < eb
	}
	return runKeyLess(a, b)
}

// rankIndex finds the row of a rank in a call.
func rankIndex(c *runCall, rank int32) int {
	i := sort.Search(len(c.rows), func(i int) bool { return c.rows[i].Rank >= rank })
	if i < len(c.rows) && c.rows[i].Rank == rank {
		return i
	}
	return 0
}

// runKeyLess orders calls by first enqueue, communicator and sequence.
func runKeyLess(a, b *runCall) bool {
	if a.first != b.first {
		return a.first < b.first
	}
	if a.comm != b.comm {
		return a.comm < b.comm
	}
	return a.seq < b.seq
}

// readRunCalls reads a call trace and groups its rows into calls.
func readRunCalls(path string) ([]*runCall, map[string]string, error) {
	r, err := traces.OpenCallFile(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	type key struct {
		comm uint64
		seq  int64
	}
	byKey := map[key]*runCall{}
	var calls []*runCall
	err = r.Scan(traces.Filter{}, func(rows []traces.CallRow) error {
		for _, row := range rows {
			k := key{row.Comm, row.Call}
			c := byKey[k]
			if c == nil {
				c = &runCall{comm: row.Comm, seq: row.Call, first: row.EnqueueNs}
				byKey[k] = c
				calls = append(calls, c)
			}
			c.first = min(c.first, row.EnqueueNs)
			c.rows = append(c.rows, row)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if len(calls) == 0 {
		return nil, nil, fmt.Errorf("%s: no calls", path)
	}
	for _, c := range calls {
		sort.SliceStable(c.rows, func(i, j int) bool { return c.rows[i].Rank < c.rows[j].Rank })
	}
	sort.Slice(calls, func(i, j int) bool { return runKeyLess(calls[i], calls[j]) })
	for i, c := range calls {
		c.idx = i
	}
	return calls, r.Info().Metadata, nil
}

// settingsLine is NCCL_* settings as a table's settings line shows them
// (sim.Table.Settings), "none" when there are none.
func settingsLine(settings map[string]string) string {
	if line := (&sim.Table{Env: settings}).Settings(); line != "" {
		return line
	}
	return "none"
}

// checkRunCalls checks the calls against a topology of n ranks and turns
// each into a sim.Call; whole says every call must be on all n ranks (one
// communicator over the whole job), else runComms checked the ranks.
func checkRunCalls(path string, calls []*runCall, n int, whole bool) error {
	for _, c := range calls {
		where := fmt.Sprintf("%s: communicator %#x call %d", path, c.comm, c.seq)
		r0 := c.rows[0]
		for i, r := range c.rows {
			if r.Rank < 0 || int(r.Rank) >= n {
				return fmt.Errorf("%s: the trace names rank %d but the topology has %d rank(s) (ranks 0-%d; --nodes N replicates a single-host file)", where, r.Rank, n, n-1)
			}
			if int(r.NRanks) > n {
				return fmt.Errorf("%s: the communicator has %d ranks but the topology only %d (--nodes N replicates a single-host file)", where, r.NRanks, n)
			}
			if i > 0 && r.Rank == c.rows[i-1].Rank {
				return fmt.Errorf("%s: rank %d appears twice", where, r.Rank)
			}
			if r.Op != r0.Op || r.Count != r0.Count || r.Datatype != r0.Datatype || r.Algorithm != r0.Algorithm || r.Protocol != r0.Protocol {
				return fmt.Errorf("%s: ranks %d and %d disagree on the call (%s %d %s vs %s %d %s)", where, r0.Rank, r.Rank, r0.Op, r0.Count, r0.Datatype, r.Op, r.Count, r.Datatype)
			}
		}
		if whole && (int(r0.NRanks) != n || len(c.rows) != n) {
			return fmt.Errorf("%s: the call has %d of %d rank(s) but the topology %d: only communicators over all ranks are simulated", where, len(c.rows), r0.NRanks, n)
		}
		sc, err := toSimCall(where, r0)
		if err != nil {
			return err
		}
		c.call = sc
	}
	return nil
}
