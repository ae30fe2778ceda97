package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

const simHelp = `Usage: replay sim [--topo FILE.xml] [--nodes N] [--ranks LIST] [--op OPS] [-b|--minbytes B] [-e|--maxbytes B]
                  [-f|--factor F] [--algo A] [--proto P] [--nchannels C] [--dtype T] [--root R]
                  [--inplace] [--calib FILE.json] [--json OUT] [--trace PREFIX]
                  [--timeline OUT.json] [--profile OUT.pb.gz] [--fabric FILE.yaml]
                  [--mode auto|fast|accurate] [--fast] [--loop N] [--eager] [--progress]

Simulates collectives on a topology with the discrete-event simulator (exec/sim):
NCCL 2.28.9's search and tuner decide the algorithm, protocol and channels (unless
forced), model.GenerateProgram gives the per-rank, per-channel primitive Program,
and the simulator executes it slice by slice against the topology's links (max-min
fair sharing, NCCL's flow control, protocol costs from the calibration file).
NVLS (NVLink SHARP) is on where NCCL turns it on by default, Hopper or newer GPUs on
an NVSwitch: NVLS and NVLSTree calls run their Programs, the NVSwitch's reduction
and multicast as resources of their own. NCCL_NVLS_ENABLE=0 turns NVLS off.

It prints an nccl-tests-like table per collective: size, count, algorithm, protocol,
channels, time, algbw and busbw (nccl-tests' bus factors). SIZE is the buffer size as
nccl-tests counts it (AllGather: the total output; ReduceScatter: the total input);
sizes that do not divide evenly are rounded down as nccl-tests does.

OPS is a comma-separated list of allreduce, allgather, reducescatter, broadcast,
reduce, alltoall, sendrecv, or "all" (the default). alltoall and sendrecv run on
NCCL's p2p schedule (model.GenerateAlltoAllProgram, model.GenerateP2PProgram):
alltoall's SIZE is each rank's whole buffer (SIZE/ranks to every peer, itself
included); sendrecv sends SIZE from every rank to the next and receives SIZE from
the previous one, as nccl-tests' sendrecv_perf does. Their protocol is NCCL's
per-transfer choice (LL up to the p2p LL threshold, else Simple); --algo and
--nchannels do not apply to them.
Sizes take K, M, G suffixes (powers of 1024). Without --topo (or a FILE argument)
the embedded default topology is used (%s). Without --calib the embedded
calibration (%s, fitted on the H200 pair) is used.

` + ranksHelp + `
The time is what nccl-tests measures: --loop N (default %d) runs N calls back to
back on every rank after an aligning call, each rank starting its next call as soon
as its own previous one ended (and the launch passed), with the connections' step
counters carried over, and reports the slowest rank's time per call. A pipeline
(the hops of a Broadcast or Reduce chain, a rank running ahead of its peers by its
send credits) overlaps successive calls there, as on hardware; --loop 0 simulates
one isolated call (N+1 times cheaper). The loop is timed as a CUDA graph (nccl-tests
-G); --eager times it as nccl-tests does by default, the host issuing one call every
host_call_us of the calibration (8.1 us on the H200 pair), so that small calls cost
that much.

--json OUT writes one row per call: op, bytes, count, algo, proto, nchannels,
time_us, algbw_GBps, busbw_GBps, tuner_us, events (- for stdout).

--trace PREFIX writes the predicted traces (package traces' parquet schema, source
"sim"): PREFIX.calls.parquet (one row per call and rank) and PREFIX.events.parquet
(one row per slice of every rank and channel: primitive, peers, bytes, start, end).
The calls of the sweep run back to back in virtual time. With --ranks, the call trace's
metadata records the job rank of each rank (twinccl.comms): "replay run" replays
the trace as that communicator of the job. --timeline writes them as
a Chrome/Perfetto JSON timeline and --profile as a pprof profile of where simulated
time went (rank, channel, link, primitive); "replay trace" reads the parquet files.

--mode selects the engine. accurate runs every slice of every rank and channel.
fast runs each call reduced by the symmetries its Program has, checked on the
Program: a ring collective (AllReduce, AllGather, ReduceScatter) over identical
hosts folds onto one host (ranks at the same position of every host run alike, so
one host's lanes run, closed onto themselves, with the receiving hosts' links
mapped onto its own), also where NCCL alternates the rings of channel pairs on odd
hosts (crossNic 2); any other call folds its hosts the same way when a host
permutation maps its Program onto itself: rotating by one host (alltoall and
sendrecv over identical hosts) or mirroring the hosts with the channels of the
double binary tree's two trees exchanged (tree AllReduce: hosts in pairs); and
channels with the same calls, peers and routes (NICs included) run once, weighing
as many on the links. These agree with accurate (to the bit on the tested
topologies) at a fraction of the cost, and their event traces hold the lanes that
ran only. A broadcast or reduce chain over more than 16 identical hosts runs
accurate on copies of 4, 8 and 16 of the hosts instead, and a tree AllReduce on
three smaller copies of its tree's shape (an odd m times a power of two hosts on
2m, 4m and 8m: 32, 64, 128... hosts on 4, 8 and 16, 48, 96... on 6, 12 and 24);
not with --trace, which needs every slice. Their time is extrapolated to the real
depth of the pipeline (hosts crossed on its longest path), on which it is affine:
the "fast" field gives the time per level and an error estimate (the change of
that time between the copies, times the levels extrapolated). A call with none of
these runs accurate, and the --json row's "fast" field says why (and otherwise
what was folded, merged or extrapolated).
auto (the default) is fast for calls above %d slices (all of the loop's calls
counted), taking the approximate reductions (the extrapolation; a ring fold of a
count that splits unevenly, whose ranks move chunks of other sizes, which fast
also does and states) only where their own error estimate is within %g%% of the
time, or where an accurate run would take hours. --fast is --mode fast.
A progress bar is drawn on stderr when it is a terminal, or with --progress.

` + fabricHelp + `

Flags:
`

// simRow is one simulated call, as --json writes it.
type simRow struct {
	Op        string  `json:"op"`
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	Dtype     string  `json:"dtype"`
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	TimeUs    float64 `json:"time_us"`
	AlgBW     float64 `json:"algbw_GBps"`
	BusBW     float64 `json:"busbw_GBps"`
	TunerUs   float64 `json:"tuner_us"`
	Events    uint64  `json:"events"`
	// Folded is the number of hosts the fast mode folded onto one (absent
	// when the call ran step-accurate).
	Folded int `json:"folded,omitempty"`
	// Fast says how the fast mode ran the call (folded hosts, merged
	// channels) or why it ran step-accurate (absent in accurate mode).
	Fast string `json:"fast,omitempty"`
}

// simOps maps the --op names to collectives (nccl-tests order).
var simOps = []struct {
	name string
	coll model.Collective
}{
	{"allreduce", model.CollAllReduce}, {"allgather", model.CollAllGather}, {"reducescatter", model.CollReduceScatter},
	{"broadcast", model.CollBroadcast}, {"reduce", model.CollReduce},
	{"alltoall", model.CollAlltoAll}, {"sendrecv", model.CollSendRecv},
}

// parseSimOps reads the --op list.
func parseSimOps(s string) ([]model.Collective, []string, error) {
	var colls []model.Collective
	var names []string
	for _, f := range strings.Split(s, ",") {
		f = strings.ToLower(strings.TrimSpace(f))
		f = strings.NewReplacer("_", "", "-", "").Replace(f)
		switch f {
		case "":
			continue
		case "all":
			for _, o := range simOps {
				colls, names = append(colls, o.coll), append(names, o.name)
			}
			continue
		}
		found := false
		for _, o := range simOps {
			if o.name == f {
				colls, names, found = append(colls, o.coll), append(names, o.name), true
			}
		}
		if !found {
			return nil, nil, fmt.Errorf("%w: --op %q: want a comma-separated list of allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv or all", errUsage, f)
		}
	}
	if len(colls) == 0 {
		return nil, nil, fmt.Errorf("%w: --op is empty", errUsage)
	}
	return colls, names, nil
}

// loadCalib reads --calib or the embedded default for the cluster's GPUs.
// newSimulator builds the simulator of res with the calibration at
// calibPath (the embedded default when empty) and mode, and a progress bar
// on stderr (nil unless stderr is a terminal or force is set; its done
// method accepts nil).
func newSimulator(res *search.Result, calibPath string, mode sim.Mode, force bool, stderr io.Writer) (*sim.Simulator, *sim.Calib, string, *progressBar, error) {
	calib, calibName, err := loadCalib(calibPath, res.Cluster)
	if err != nil {
		return nil, nil, "", nil, err
	}
	s, err := sim.NewSimulator(res, calib)
	if err != nil {
		return nil, nil, "", nil, err
	}
	s.Mode = mode
	st, err := sim.SettingsFromEnv(os.LookupEnv)
	if err != nil {
		return nil, nil, "", nil, err
	}
	s.Machine.SetSettings(st)
	bar := newProgressBar(stderr, force)
	if bar != nil {
		s.Machine.Progress = bar.update
	}
	return s, calib, calibName, bar, nil
}

// calibFlagHelp is the help of every --calib flag.
const calibFlagHelp = "calibration `FILE.json`, or embedded:NAME.json for one built in: h200.json " +
	"(NCCL on two H200, the default), h100.json (NCCL on two H100), h200-twinccl.json and " +
	"h100-twinccl.json (our executor's kernels)"

func loadCalib(path string, cl *model.Cluster) (*sim.Calib, string, error) {
	if path != "" {
		c, err := sim.LoadCalib(path)
		return c, path, err
	}
	sm := 0
	if len(cl.Nodes) > 0 {
		for _, g := range cl.Nodes[0].System.Nodes[model.GPU] {
			sm = g.GPU.SM
			break
		}
	}
	c, err := sim.DefaultCalib(sm)
	if err != nil {
		return nil, "", err
	}
	if sm != 90 {
		slog.Warn("no calibration measured for this GPU architecture; using the sm90 one", "sm", sm)
	}
	return c, sim.EmbeddedPrefix + sim.DefaultCalibName, nil
}

func runSim(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	topo := fs.String("topo", "", "topology XML `FILE` (default: the embedded one)")
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	ranks := &ranksFlag{}
	fs.Var(ranks, "ranks", ranksFlagHelp)
	ops := fs.String("op", "all", "collectives to simulate (comma-separated, or all)")
	minBytes := fs.String("minbytes", "8", "smallest size")
	maxBytes := fs.String("maxbytes", "1G", "largest size")
	factor := fs.Int64("factor", 4, "size multiplication factor between rows")
	algo := fs.String("algo", "", "force the algorithm (ring, tree)")
	proto := fs.String("proto", "", "force the protocol (ll, ll128, simple)")
	nch := fs.Int("nchannels", 0, "force the channel budget (0: the tuner's)")
	dtype := fs.String("dtype", "float32", "datatype")
	root := fs.Int("root", 0, "root rank of broadcast and reduce")
	inPlace := fs.Bool("inplace", false, "run every call in place, one buffer for input and output (nccl-tests' in-place column; PyTorch's broadcast): a broadcast root and every allgather rank send without copying")
	calibPath := fs.String("calib", "", calibFlagHelp)
	fabricPath := fs.String("fabric", "", fabricFlagHelp)
	jsonOut := fs.String("json", "", "also write the rows as JSON to `OUT` (- for stdout only)")
	traceOut := fs.String("trace", "", "write predicted call and event traces to `PREFIX`.calls.parquet and PREFIX.events.parquet")
	timelineOut := fs.String("timeline", "", "write a Chrome/Perfetto timeline to `OUT.json`")
	profileOut := fs.String("profile", "", "write a pprof profile of simulated time to `OUT.pb.gz`")
	modeName := fs.String("mode", "auto", "engine: auto, fast or accurate")
	fast := fs.Bool("fast", false, "same as --mode fast")
	progress := fs.Bool("progress", false, "draw a progress bar on stderr even when it is not a terminal")
	loop := fs.Int("loop", sim.DefaultLoopCalls, "time each size as a loop of `N` calls back to back after an aligning one, as nccl-tests does (0: one isolated call)")
	eager := fs.Bool("eager", false, "time the loop as issued by the host outside a CUDA graph (nccl-tests without -G): a call every host_call_us of the calibration at most")
	// nccl-tests' short names, as run takes them.
	fs.StringVar(minBytes, "b", "8", "same as --minbytes (nccl-tests' -b)")
	fs.StringVar(maxBytes, "e", "1G", "same as --maxbytes (nccl-tests' -e)")
	fs.Int64Var(factor, "f", 4, "same as --factor (nccl-tests' -f)")
	fs.StringVar(dtype, "d", "float32", "same as --dtype (nccl-tests' -d)")
	fs.IntVar(loop, "n", sim.DefaultLoopCalls, "same as --loop (nccl-tests' -n: the calls timed per size)")
	fs.IntVar(root, "r", 0, "same as --root (nccl-tests' -r)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, simHelp, twinccl.DefaultTopology, sim.DefaultCalibName, sim.DefaultLoopCalls, sim.AutoFastSlices, 100*sim.AutoApproxTolerance)
		fs.PrintDefaults()
	}
	pos, err := parseTopologyArgs(fs, args, topo)
	if err != nil {
		return err
	}
	if err := checkLoop(*loop); err != nil {
		return err
	}
	if *eager && *loop == 0 {
		return fmt.Errorf("%w: --eager times a loop of calls: it needs --loop of 1 or more", errUsage)
	}
	mode, err := sim.ParseMode(*modeName)
	if err != nil {
		return fmt.Errorf("%w: --mode: %v", errUsage, err)
	}
	if *fast {
		if *modeName != "auto" && mode != sim.ModeFast {
			return fmt.Errorf("%w: --fast contradicts --mode %s", errUsage, *modeName)
		}
		mode = sim.ModeFast
	}
	colls, names, err := parseSimOps(*ops)
	if err != nil {
		return err
	}
	lo, hi, err := parseSweep("--minbytes", *minBytes, "--maxbytes", *maxBytes, "--factor", *factor)
	if err != nil {
		return err
	}
	if *nch < 0 || *nch > model.MaxChannels {
		// NCCL 2.28.9 never runs more than MAXCHANNELS (64) channels.
		return fmt.Errorf("%w: --nchannels %d: want 0 (the tuner's) to %d (NCCL's MAXCHANNELS)", errUsage, *nch, model.MaxChannels)
	}
	dt, err := model.ParseDtype(*dtype)
	if err != nil {
		return fmt.Errorf("%w: --dtype: %v", errUsage, err)
	}
	forceAlgo, forceProto := model.Algorithm(-1), model.Protocol(-1)
	if *algo != "" {
		if forceAlgo, err = model.ParseAlgorithm(*algo); err != nil {
			return fmt.Errorf("%w: --algo: %v", errUsage, err)
		}
	}
	if *proto != "" {
		if forceProto, err = model.ParseProtocol(*proto); err != nil {
			return fmt.Errorf("%w: --proto: %v", errUsage, err)
		}
	}
	res, err := searchTopologyRanks(pos, *nodes, ranks.ranks, nil)
	if err != nil {
		return err
	}
	n := res.Cluster.NRanks
	if *root < 0 || *root >= n {
		return fmt.Errorf("%w: --root %d outside %d ranks", errUsage, *root, n)
	}
	s, calib, calibName, bar, err := newSimulator(res, *calibPath, mode, *progress, stderr)
	if err != nil {
		return err
	}
	if err := attachFabric(s, *fabricPath); err != nil {
		return err
	}
	s.Loop = *loop
	s.Eager = *eager
	defer bar.done()
	if *jsonOut == "-" && (*timelineOut == "-" || *profileOut == "-") || *timelineOut == "-" && *profileOut == "-" {
		return fmt.Errorf("%w: only one of --json, --timeline and --profile may write to stdout", errUsage)
	}
	tr, err := newSimTracer(fmt.Sprintf("replay sim %s", res.Cluster.File), *traceOut, *timelineOut, *profileOut, n, ranks.ranks)
	if err != nil {
		return err
	}
	var rec func(*sim.SliceEvent)
	if tr != nil {
		rec = tr.slice
		defer tr.abort()
	}
	var rows []simRow
	quiet := *jsonOut == "-" || *timelineOut == "-" || *profileOut == "-"
	noted := map[string]bool{}
	if !quiet {
		fmt.Fprintf(stdout, "# replay sim: %s, %d rank(s) on %d node(s), NCCL %s rules, calibration %s (%s)\n",
			res.Cluster.File, n, res.Plan.NNodes, search.NCCLVersion, calib.Name, calibName)
		fmt.Fprintf(stdout, "#\n# %12s %12s %8s %-6s %-6s %4s %12s %12s %12s\n", "size(B)", "count", "type", "algo", "proto", "nch", "time(us)", "algbw(GB/s)", "busbw(GB/s)")
	}
	es := int64(dt.Size())
	for i, coll := range colls {
		if !quiet {
			fmt.Fprintf(stdout, "# %s\n", names[i])
		}
		for size := lo; size <= hi; size *= *factor {
			unit := es
			if coll == model.CollAllGather || coll == model.CollReduceScatter || coll == model.CollAlltoAll {
				unit = es * int64(n)
			}
			bytes := size / unit * unit
			if bytes == 0 {
				continue
			}
			count, err := sim.CountOf(coll, bytes, dt, n)
			if err != nil {
				return err
			}
			call := sim.Call{Coll: coll, Count: count, Dtype: dt, Op: model.RedSum, Root: *root,
				Algo: forceAlgo, Proto: forceProto, NChannels: *nch, InPlace: *inPlace}
			if coll.IsP2P() {
				// The p2p schedule has no algorithm or channel budget; a
				// forced LL128 does not exist for it.
				call.Algo, call.NChannels = -1, 0
				if call.Proto == model.ProtoLL128 {
					call.Proto = -1
				}
			}
			bar.setLabel(fmt.Sprintf("%s %dB", names[i], bytes))
			var cr sim.CallResult
			if tr != nil {
				// The traces show one isolated call; with --loop 0 it
				// is the row's call too.
				if cr, err = s.RunRecord(call, rec); err == nil {
					err = tr.end(call, cr)
				}
			}
			if err == nil && (tr == nil || s.Loop > 0) {
				cr, err = s.RunTimed(call, false)
			}
			bar.done()
			if err != nil {
				return err
			}
			if strings.HasPrefix(cr.Fast, "step-accurate") && !noted[names[i]] {
				// The fast mode could not aggregate the call: say so once per op.
				noted[names[i]] = true
				fmt.Fprintf(stderr, "note: %s %d B ran %s\n", names[i], bytes, cr.Fast)
			}
			algBW := float64(bytes) / (cr.TimeUs * 1e3)
			algoName := cr.Algo.String()
			if coll.IsP2P() {
				algoName = "P2P" // NCCL's p2p schedule, not an algorithm
			}
			row := simRow{Op: names[i], Bytes: bytes, Count: count, Dtype: dt.String(), Algo: algoName,
				Proto: cr.Proto.String(), NChannels: cr.NChannels, TimeUs: round3(cr.TimeUs), AlgBW: round3(algBW),
				BusBW: round3(algBW * sim.BusFactor(coll, n)), TunerUs: round3(cr.TunerUs), Events: cr.Events, Folded: cr.Folded, Fast: cr.Fast}
			rows = append(rows, row)
			if !quiet {
				fmt.Fprintf(stdout, "  %12d %12d %8s %-6s %-6s %4d %12.2f %12.2f %12.2f\n", row.Bytes, row.Count, row.Dtype,
					row.Algo, row.Proto, row.NChannels, row.TimeUs, row.AlgBW, row.BusBW)
			}
			if size > hi / *factor {
				break // the next size would overflow or exceed hi
			}
		}
	}
	if tr != nil {
		if err := tr.finish(stdout); err != nil {
			return err
		}
	}
	if *jsonOut != "" {
		return writeJSON(*jsonOut, stdout, rows)
	}
	return nil
}

// round3 rounds to 3 decimals so that JSON output stays short and stable.
func round3(v float64) float64 {
	if v < 0 {
		return -round3(-v)
	}
	return float64(int64(v*1000+0.5)) / 1000
}

// parseTopologyArgs parses fs's flags among args and returns the topology
// file the command runs on, as a one-element list (nil: the embedded
// default): the --topo value (*topoFlag, read after parsing) or the
// positional argument, not both.
func parseTopologyArgs(fs *flag.FlagSet, args []string, topoFlag *string) ([]string, error) {
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if *topoFlag != "" {
		if len(pos) > 0 {
			return nil, fmt.Errorf("%w: give the topology either with --topo or as an argument, not both", errUsage)
		}
		pos = []string{*topoFlag}
	}
	return pos, nil
}

// maxLoopFlag bounds the --loop flags: a loop of N calls costs N+1 runs.
const maxLoopFlag = 100

// checkLoop checks a --loop value.
func checkLoop(n int) error {
	if n < 0 || n > maxLoopFlag {
		return fmt.Errorf("%w: --loop %d: want 0 to %d calls", errUsage, n, maxLoopFlag)
	}
	return nil
}
