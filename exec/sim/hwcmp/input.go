// Package hwcmp compares hardware measurements with the simulator's
// predictions: the rows of "run gpu --json" (graph-timed means of our
// CUDA executor and of NCCL side by side), hardware call traces (one
// traced run per call) and their event traces (one row per slice).
//
// Every measured call is replayed in the simulator with the algorithm,
// protocol and channel count it was recorded with, on a topology searched
// under the NCCL_* settings of the recording. The results are per-call
// comparisons, per (op, size, protocol) groups, error statistics per
// protocol and size bucket, a step-level comparison of event traces per
// channel and primitive, and a busbw-vs-size SVG plot.
package hwcmp

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/internal/stats"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
	"github.com/twinccl/twinccl/traces/gpurecord"
)

// Input kinds.
const (
	// KindJSON is the --json file of "run gpu": graph-timed means.
	KindJSON = "json"
	// KindTrace is a hardware call trace (one traced run per call).
	KindTrace = "trace"
)

// MaxJSONBytes bounds the size of a JSON input read into memory.
const MaxJSONBytes = gpurecord.MaxBytes

// MaxCalls bounds the calls of one input (a sweep has tens).
const MaxCalls = 1 << 16

// Call is one measured call (a JSON row, or a call of a call trace with
// its rows on every rank).
type Call struct {
	// Index is the row's index in the JSON file, or the call's sequence
	// number in the trace.
	Index int64
	// Comm is the communicator of a traced call (0 for JSON rows).
	Comm uint64
	Coll model.Collective
	// Bytes is the nccl-tests size (AllGather: the output; ReduceScatter:
	// the input; else the buffer).
	Bytes int64
	// Count is NCCL's count argument.
	Count int64
	Dtype model.Dtype
	RedOp model.RedOp
	Root  int
	// Algo and Proto are the recorded algorithm and protocol (-1 when the
	// input does not say).
	Algo  model.Algorithm
	Proto model.Protocol
	// NChannels are the recorded channels (0 when unknown).
	NChannels int
	// Engine names what ran an AlltoAll or SendRecv of our executor when
	// it is not a Program of the p2p schedule ("GIN": GPU-initiated
	// networking, see "replay gin"); empty otherwise.
	Engine string
	// HwUs is our executor's measured time: the median of the row's
	// repetitions (JSON rows with reps_us: one disturbed repetition does
	// not move it), else its graph-timed mean, or the traced kernel time
	// of the rank that started last (traces: the other ranks' kernels
	// include waiting for it, and the GPUs' clocks are not aligned).
	HwUs float64
	// HwBestUs is the best repetition (JSON; 0 when absent).
	HwBestUs float64
	// NCCLUs is NCCL's time as HwUs is ours (JSON with a baseline: the
	// median of nccl_reps_us, else the mean; 0 when absent), NCCLBestUs
	// its best repetition.
	NCCLUs, NCCLBestUs float64
	// Wrong and NCCLWrong count the elements of our executor's and
	// NCCL's result that run gpu's check found wrong (wrong,
	// nccl_wrong: run gpu -c 1; 0 when unchecked): a column whose
	// result was wrong timed something other than the collective, and
	// Pool leaves it out (Row.Invalid).
	Wrong, NCCLWrong int64
	// RankStartNs and RankKernelUs are, for traced calls, every rank's
	// kernel start (its own clock) and kernel time.
	RankStartNs  []int64
	RankKernelUs []float64
}

// Input is a file of measured calls.
type Input struct {
	Path string
	// Kind is KindJSON or KindTrace.
	Kind   string
	NRanks int
	// Collective and NCCLVersion come from a JSON header.
	Collective  string
	NCCLVersion string
	// NCCLEnv are the NCCL_* settings NCCL's run was made under, from a
	// JSON header (run gpu records them, with those its --algo, --proto
	// and --channels forced) or a trace's metadata (traces.MetaNCCLEnv);
	// nil when the file does not say.
	NCCLEnv map[string]string
	// EnvFrom names the file NCCLEnv came from when it is not the input
	// itself: a trace written without them takes those of the --json
	// file of the same run beside it (X.parquet, X.json).
	EnvFrom string
	// Kernel names the interpreter build of our executor's rows (run gpu
	// records it: interp.cu's digest and the options it was compiled
	// with); "" when the file does not say.
	Kernel string
	// Revision is the twinccl commit run gpu was built from
	// (twinccl_revision: "+modified" where its tree had changes), the
	// host side of our executor's build; "" when the file does not say.
	Revision string
	// GPUs describes the ranks' GPUs as the recording names them (run
	// gpu's "gpus", one per rank: "rank 0: GPU 0 NVIDIA H100 80GB HBM3
	// (sm_90, ...)"; a trace takes those of the --json file of the same
	// run beside it); nil when it does not say.
	GPUs []string
	// Hosts is the number of hosts the ranks were on (run gpu records it
	// for a run over several: TWINCCL_HOSTID=split:K on one machine, or
	// several machines; a trace takes it from the --json file beside it);
	// 0 when the file does not say.
	Hosts int
	// Host is the mean one-way latency and the mean throughput per
	// direction both ways at once of the loopback TCP probes of a JSON
	// file (net_probe: run gpu probes the host before and after a
	// split-host sweep, in the header, and since 2026-11-26's seventh
	// session before every size, in its row); zero when the file has
	// none (the throughput: when a probe lacks it).
	Host sim.HostProbe
	// Eager says the JSON rows are the means of eager loops of launches
	// (run gpu -G 0, cuda_graph false), the host issuing every call, not
	// of CUDA-graph-captured ones.
	Eager bool
	// Medians says some JSON rows carry their repetitions (reps_us,
	// nccl_reps_us), whose median is their time.
	Medians bool
	Calls   []Call
	// Empty counts the JSON rows and traced calls left out because they
	// move no element (e.g. 8 bytes of AllGather over 4 ranks of
	// float32): there is no call to simulate.
	Empty int
}

// Open reads a JSON file of "run gpu --json" or a hardware call trace
// (parquet), deciding by the file's first bytes.
func Open(path string) (*Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	head := make([]byte, 4)
	n, _ := io.ReadFull(f, head)
	f.Close()
	if n == 4 && string(head) == "PAR1" {
		return ReadTrace(path)
	}
	if n == 0 {
		return nil, fmt.Errorf("%s: empty file", path)
	}
	f, err = os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadJSON(f, path)
}

// ReadJSON reads the --json output of "run gpu" (name is used in errors).
func ReadJSON(r io.Reader, name string) (*Input, error) {
	rep, err := gpurecord.Decode(r, name)
	if err != nil {
		return nil, err
	}
	if len(rep.Rows) > MaxCalls {
		return nil, fmt.Errorf("%s: %d rows, more than %d", name, len(rep.Rows), MaxCalls)
	}
	in := &Input{Path: name, Kind: KindJSON, NRanks: rep.NRanks, Collective: rep.Collective, NCCLVersion: rep.NCCLVersion,
		Eager: rep.Graph != nil && !*rep.Graph, Revision: rep.Revision, GPUs: rep.GPUs, Hosts: rep.Hosts}
	if rep.Kernel != nil {
		in.Kernel = rep.Kernel.String()
	}
	if len(rep.NCCLEnv) > 0 {
		in.NCCLEnv = rep.NCCLEnv
	}
	var lats, bws []float64
	probe := func(p gpurecord.NetProbe) {
		lats = append(lats, p.LatencyUs)
		if p.BothWaysGBps > 0 {
			bws = append(bws, p.BothWaysGBps)
		}
	}
	for _, p := range rep.NetProbe {
		probe(p)
	}
	for _, r := range rep.Rows {
		if r.NetProbe != nil {
			probe(*r.NetProbe)
		}
	}
	in.Host = sim.HostProbe{LatencyUs: stats.Mean(lats), BothWaysGBps: stats.Mean(bws)}
	for i, r := range rep.Rows {
		where := fmt.Sprintf("%s: row %d", name, i)
		op := r.Op
		if op == "" {
			op = rep.Collective
		}
		if r.Count == 0 {
			in.Empty++
			continue
		}
		c := Call{Index: int64(i), Bytes: r.Bytes, Count: r.Count, HwUs: r.TimeUs, HwBestUs: r.BestUs,
			NCCLUs: r.NCCLTime, NCCLBestUs: r.NCCLBest, NChannels: r.NChannels, Wrong: r.Wrong, NCCLWrong: r.NCCLWrong, Root: r.Root}
		if err := c.setKind(op, r.Dtype, r.RedOp, r.Algo, r.Proto, rep.NRanks); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		for _, v := range []struct {
			name string
			v    float64
			need bool
		}{{"time_us", c.HwUs, true}, {"best_us", c.HwBestUs, false}, {"nccl_time_us", c.NCCLUs, false}, {"nccl_best_us", c.NCCLBestUs, false}} {
			if !timeOK(v.v) || v.need && v.v == 0 {
				return nil, fmt.Errorf("%s: %s %v: want a positive finite time", where, v.name, v.v)
			}
		}
		for _, reps := range []struct {
			name string
			v    []float64
			to   *float64
		}{{"reps_us", r.RepsUs, &c.HwUs}, {"nccl_reps_us", r.NCCLRepsUs, &c.NCCLUs}} {
			if len(reps.v) == 0 {
				continue
			}
			m, err := repMedian(reps.v)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", where, reps.name, err)
			}
			*reps.to, in.Medians = m, true
		}
		if err := c.check(rep.NRanks); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		in.Calls = append(in.Calls, c)
	}
	return in, nil
}

// checkNCCLEnv checks that every key of a recorded environment is an
// NCCL_* setting.
func checkNCCLEnv(env map[string]string) error {
	for k := range env {
		if !strings.HasPrefix(k, "NCCL_") {
			return fmt.Errorf("%q is not an NCCL_* setting", k)
		}
	}
	return nil
}

// TraceEnv is the NCCL_* settings a call trace at path was recorded under:
// those of its metadata (meta, traces.MetaNCCLEnv, which run gpu writes),
// else the nccl_env of the --json file of the same run beside it, whose
// name it returns as from; nil when it has neither.
func TraceEnv(path string, meta map[string]string) (env map[string]string, from string, err error) {
	if _, ok := meta[traces.MetaNCCLEnv]; ok { // the side file is not read
		return traceEnv(path, meta, nil, "", nil)
	}
	side, sideName, sideErr := sideJSON(path)
	return traceEnv(path, meta, side, sideName, sideErr)
}

// traceEnv is the NCCL_* settings of the trace at path: its metadata's
// (traces.MetaNCCLEnv), else the nccl_env of side, the --json file of the
// same run beside it (sideJSON: from names that file; sideErr, why it did
// not read, fails only a trace that needs it), else none (nil, "").
func traceEnv(path string, meta map[string]string, side *Input, sideName string, sideErr error) (env map[string]string, from string, err error) {
	if v, ok := meta[traces.MetaNCCLEnv]; ok {
		if err := json.Unmarshal([]byte(v), &env); err != nil {
			return nil, "", fmt.Errorf("%s: metadata %s: %w", path, traces.MetaNCCLEnv, err)
		}
		if err := checkNCCLEnv(env); err != nil {
			return nil, "", fmt.Errorf("%s: metadata %s: %w", path, traces.MetaNCCLEnv, err)
		}
		if len(env) == 0 {
			return nil, "", nil
		}
		return env, "", nil
	}
	if sideErr != nil {
		return nil, "", fmt.Errorf("%s: the settings of the same run: %w", path, sideErr)
	}
	if side == nil || side.NCCLEnv == nil {
		return nil, "", nil
	}
	return side.NCCLEnv, sideName, nil
}

// sideJSON reads the --json file of the same run beside the trace at path
// (X.parquet: X.json), and returns it with its name; nil and "" when there
// is no such file, and the error when it does not read.
func sideJSON(path string) (*Input, string, error) {
	side := strings.TrimSuffix(path, ".parquet") + ".json"
	if side == path {
		return nil, "", nil
	}
	f, err := os.Open(side)
	if err != nil {
		return nil, "", nil // no such file
	}
	defer f.Close()
	in, err := ReadJSON(f, side)
	return in, side, err
}

// maxReps bounds the repetitions of a JSON row.
const maxReps = 1000

// timeOK says v is a time a row can hold: finite, from 0 to 1e12 us.
func timeOK(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) && v >= 0 && v <= 1e12 }

// repMedian is the median of a row's repetitions, which must be positive
// finite times.
func repMedian(reps []float64) (float64, error) {
	if len(reps) > maxReps {
		return 0, fmt.Errorf("%d repetitions, more than %d", len(reps), maxReps)
	}
	for i, v := range reps {
		if !timeOK(v) || v == 0 {
			return 0, fmt.Errorf("repetition %d: %v: want a positive finite time", i, v)
		}
	}
	return stats.Median(reps), nil
}

// setKind parses the names of a call's collective, datatype, reduction,
// algorithm and protocol (empty algorithm or protocol: unknown).
func (c *Call) setKind(op, dtype, redop, algo, proto string, nranks int) error {
	var err error
	if c.Coll, err = model.ParseCollective(op); err != nil {
		return err
	}
	p2p := c.Coll.IsP2P()
	if int(c.Coll) >= model.NumTunedCollectives && !p2p {
		return fmt.Errorf("%s is not compared (broadcast, reduce, allgather, reducescatter, allreduce, alltoall, sendrecv)", c.Coll)
	}
	if dtype == "" {
		dtype = "fp32"
	}
	if c.Dtype, err = model.ParseDtype(dtype); err != nil {
		return err
	}
	if c.Dtype.Size() == 0 {
		return fmt.Errorf("datatype %q has no size", dtype)
	}
	c.RedOp = model.RedSum
	if redop != "" {
		if c.RedOp, err = model.ParseRedOp(redop); err != nil {
			return err
		}
	}
	c.Algo, c.Proto = -1, -1
	if p2p && strings.EqualFold(algo, "GIN") {
		// GPU-initiated networking moves the data, not the p2p
		// schedule: no algorithm or protocol of a Program.
		c.Engine = "GIN"
		return nil
	}
	if p2p && strings.EqualFold(algo, "P2P") {
		algo = "" // the p2p schedule's
	}
	if algo != "" {
		if c.Algo, err = model.ParseAlgorithm(algo); err != nil {
			return err
		}
	}
	if proto != "" {
		if c.Proto, err = model.ParseProtocol(proto); err != nil {
			return err
		}
	}
	return nil
}

// check checks the sizes of a call against each other.
func (c *Call) check(nranks int) error {
	if c.Count < 1 || c.Count > 1<<40 {
		return fmt.Errorf("count %d out of range", c.Count)
	}
	if c.NChannels < 0 || c.NChannels > model.MaxChannels {
		return fmt.Errorf("nchannels %d out of range [0, %d]", c.NChannels, model.MaxChannels)
	}
	if c.Root < 0 || c.Root >= nranks {
		return fmt.Errorf("root %d outside %d rank(s)", c.Root, nranks)
	}
	want := c.Count * int64(c.Dtype.Size())
	if c.Coll == model.CollAllGather || c.Coll == model.CollReduceScatter || c.Coll == model.CollAlltoAll {
		want *= int64(nranks) // AlltoAll: count elements to every peer
	}
	if c.Bytes == 0 {
		c.Bytes = want
	}
	if c.Bytes != want {
		return fmt.Errorf("%s of %d %s elements is %d bytes, the file says %d", c.Coll, c.Count, c.Dtype, want, c.Bytes)
	}
	return nil
}

// ReadTrace reads a hardware call trace: one row per call and rank, every
// call on all the communicator's ranks.
func ReadTrace(path string) (*Input, error) {
	r, err := traces.OpenCallFile(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	type key struct {
		comm uint64
		seq  int64
	}
	byKey := map[key][]traces.CallRow{}
	var keys []key
	err = r.Scan(traces.Filter{}, func(rows []traces.CallRow) error {
		for _, row := range rows {
			k := key{row.Comm, row.Call}
			if _, ok := byKey[k]; !ok {
				if len(keys) >= MaxCalls {
					return fmt.Errorf("more than %d calls", MaxCalls)
				}
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], row)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no calls", path)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].comm < keys[j].comm || keys[i].comm == keys[j].comm && keys[i].seq < keys[j].seq
	})
	in := &Input{Path: path, Kind: KindTrace}
	// The --json file beside the trace gives the settings its metadata
	// lacks, the GPUs (which only pick a default calibration: a file that
	// does not read leaves them unknown) and the hosts.
	side, sideName, sideErr := sideJSON(path)
	if in.NCCLEnv, in.EnvFrom, err = traceEnv(path, r.Info().Metadata, side, sideName, sideErr); err != nil {
		return nil, err
	}
	if side != nil {
		in.GPUs, in.Hosts = side.GPUs, side.Hosts
	}
	for _, k := range keys {
		rows := byKey[k]
		sort.Slice(rows, func(i, j int) bool { return rows[i].Rank < rows[j].Rank })
		where := fmt.Sprintf("%s: communicator %#x call %d", path, k.comm, k.seq)
		r0 := rows[0]
		if r0.Source != "" && r0.Source != traces.SourceHW {
			return nil, fmt.Errorf("%s: source %q: compare wants a hardware trace (source %q)", where, r0.Source, traces.SourceHW)
		}
		n := int(r0.NRanks)
		if n < 1 || n > 1<<20 {
			return nil, fmt.Errorf("%s: nranks %d", where, r0.NRanks)
		}
		if in.NRanks == 0 {
			in.NRanks = n
		} else if in.NRanks != n {
			return nil, fmt.Errorf("%s: %d ranks, earlier calls %d: compare wants one communicator size", where, n, in.NRanks)
		}
		if len(rows) != n {
			return nil, fmt.Errorf("%s: %d row(s) for %d rank(s)", where, len(rows), n)
		}
		for i, row := range rows {
			if int(row.Rank) != i {
				return nil, fmt.Errorf("%s: ranks are not 0..%d (rank %d)", where, n-1, row.Rank)
			}
			if row.Op != r0.Op || row.Count != r0.Count || row.Protocol != r0.Protocol || row.Algorithm != r0.Algorithm {
				return nil, fmt.Errorf("%s: ranks 0 and %d disagree on the call", where, row.Rank)
			}
		}
		if r0.Count == 0 {
			// A call that moves no element (run gpu's smallest sizes
			// over four ranks): nothing to simulate, as in a JSON file.
			in.Empty++
			continue
		}
		c := Call{Index: k.seq, Comm: k.comm, Count: r0.Count, NChannels: int(r0.Channels), Root: max(int(r0.Root), 0)}
		if err := c.setKind(r0.Op, r0.Datatype, r0.RedOp, r0.Algorithm, r0.Protocol, n); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if err := c.check(n); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		c.HwUs = math.Inf(1)
		for _, row := range rows {
			d := row.EndNs - row.StartNs
			if row.StartNs <= 0 || d <= 0 || d > 1e12 {
				return nil, fmt.Errorf("%s: rank %d: kernel start %d end %d: want 0 < start < end", where, row.Rank, row.StartNs, row.EndNs)
			}
			us := float64(d) / 1e3
			c.RankStartNs = append(c.RankStartNs, row.StartNs)
			c.RankKernelUs = append(c.RankKernelUs, us)
			c.HwUs = min(c.HwUs, us)
		}
		in.Calls = append(in.Calls, c)
	}
	return in, nil
}

// LastRank is the rank whose traced kernel was shortest: the one that
// started last, whose kernel did not wait for the others to launch.
func (c *Call) LastRank() int {
	best := 0
	for i, us := range c.RankKernelUs {
		if us < c.RankKernelUs[best] {
			best = i
		}
	}
	return best
}

// simCall is the simulator's call for a measured one, with the recorded
// decisions forced.
func (c *Call) simCall() sim.Call {
	return sim.Call{Coll: c.Coll, Count: c.Count, Dtype: c.Dtype, Op: c.RedOp, Root: c.Root,
		Algo: c.Algo, Proto: c.Proto, NChannels: c.NChannels}
}

// notProgram says why our executor's time of the call cannot be
// simulated when an engine other than a Program moved its data (nil
// otherwise): NCCL's column of the call still can be.
func (c *Call) notProgram() error {
	if c.Engine == "" {
		return nil
	}
	return fmt.Errorf("our %s %s is not a Program the simulator runs (\"replay gin\" simulates it); col=%s compares NCCL's", c.Engine, c.Coll, ColNCCL)
}

// errNoSim marks a call the simulator cannot run.
var errNoSim = errors.New("not simulated")

// label names a call in messages.
func (c *Call) label() string {
	return fmt.Sprintf("%s %d B %s", c.Coll, c.Bytes, strings.TrimSpace(protoName(c.Proto)))
}

// protoName is a protocol's name, "-" when unknown.
func protoName(p model.Protocol) string {
	if p < 0 {
		return "-"
	}
	return p.String()
}

// algoName is an algorithm's name, "-" when unknown.
func algoName(a model.Algorithm) string {
	if a < 0 {
		return "-"
	}
	return a.String()
}
