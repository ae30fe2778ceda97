package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gin"
	"github.com/twinccl/twinccl/exec/hw/gpudev"
	"github.com/twinccl/twinccl/exec/hw/nccl"
	"github.com/twinccl/twinccl/exec/hw/netprobe"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/internal/stats"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
	"github.com/twinccl/twinccl/traces/gpurecord"
)

// gpuReps is the number of timed repetitions per size and pass
// (nccl-tests and shared/baselines/h200x2-nvswitch use 5); a row's time
// is their mean.
const gpuReps = 5

// maxPasses bounds --passes.
const maxPasses = 100

// netPasses is the passes of a sweep whose ranks are on several hosts
// when --passes does not say: on the H100 pair's split-host sockets the
// five repetitions of one pass spread 15-30%, and NCCL's rows timed by
// three passes were simulated within 3.8/17.1% (LL, median/max) where
// single passes of the same start gave 4.3-6.9/17-33%.
const netPasses = 3

// sweepPasses is the number of passes of a sweep asked for passes
// (--passes; 0: the default) over ranks on hosts hosts: netPasses for a
// default sweep over several hosts, one for one on a single host.
func sweepPasses(passes, hosts int) int {
	switch {
	case passes > 0:
		return passes
	case hosts > 1:
		return netPasses
	}
	return 1
}

// netRetries is the retries of a sweep whose ranks are on several hosts
// when --retries does not say. Replayed on rerun26/ of the H100 pair
// (six passes recorded: its fourth and fifth taken as the retries of the
// rows the first three left disturbed), two retries left 7 of 67 of our
// LL rows disturbed instead of 16, 10 of 68 Simple ones instead of 17
// (NCCL's: 20 and 14 instead of 23 and 22), and the simulation's median
// |err| over every row fell from 6.0/6.1% to 4.5/5.8% (LL/Simple; NCCL's
// from 12.3/9.6% to 10.3/8.7%).
const netRetries = 2

// sweepRetries is the number of retries of a sweep asked for retries
// (--retries; negative: the default) over ranks on hosts hosts:
// netRetries for a default sweep over several hosts, none on one.
func sweepRetries(retries, hosts int) int {
	switch {
	case retries >= 0:
		return retries
	case hosts > 1:
		return netRetries
	}
	return 0
}

// disturbedRows are the indexes of the rows whose repetitions disagree
// in either column (stats.DisturbedReps: their median more than
// stats.DisturbedRatio above their best, as replay compare marks them).
// Every rank holds the same repetitions (gatherRow), so every rank finds
// the same rows.
func disturbedRows(rows []gpuRow) []int {
	var out []int
	for i, r := range rows {
		if stats.DisturbedReps(r.RepsUs) || stats.DisturbedReps(r.NCCLRepsUs) {
			out = append(out, i)
		}
	}
	return out
}

// gpuOpts are the flags of run gpu: nt holds nccl-tests' and twinccl's
// shared options, the other fields what the sweep reads (the collective,
// type, reduction and root of the case running now among them).
type gpuOpts struct {
	nt                 ntOpts
	np                 int
	op                 string
	algo, proto        string
	channels           int
	minB, maxB, factor int64
	stepB              int64
	iters, warmup      int
	passes, retries    int
	graph, check       int
	root               int
	topo               string
	baseline           string
	jsonOut            string
	trace              string
	cpuProfile         string
	net                string
	timeout            time.Duration

	// Parsed.
	coll      model.Collective
	dt        model.Dtype
	rop       model.RedOp
	algoSet   bool
	algoV     model.Algorithm
	protoSet  bool
	protoV    model.Protocol
	itersAuto bool
}

// gpuGroups are run gpu's options for registration and help.
func gpuGroups(o *gpuOpts) []optGroup {
	g := o.nt.ntGroups("gpu")
	tw := o.nt.twincclGroup("gpu")
	tw.opts = append(tw.opts,
		optSpec{[]string{"passes"}, "N", "Sweep the sizes N times, timing every size anew in each pass: a row holds the repetitions of every pass, so that a host disturbance lasting through one size's repetitions moves at most one pass of them (0: 3 when the ranks are on several hosts, else 1).", intVal{&o.passes}},
		optSpec{[]string{"retries"}, "N", "After the passes, time the sizes whose repetitions still disagree (median over 1.25x the best, either column) again, up to N more times each, the rows keeping every repetition (-1: 2 when the ranks are on several hosts, else 0).", intVal{&o.retries}},
		optSpec{[]string{"topo"}, "FILE", "Topology XML to plan on (default: live discovery, else the embedded H200 pair).", strVal{&o.topo}},
		optSpec{[]string{"baseline"}, "nccl", "Run the same sweep through the system's libnccl and print both side by side (NCCL's columns, see --twinccl-columns).", strVal{&o.baseline}},
		optSpec{[]string{"json"}, "FILE", "Also write the rows as JSON to FILE (atomically): every repetition, the in-place half under in_place, NCCL's columns.", strVal{&o.jsonOut}},
		optSpec{[]string{"net"}, "socket|ib", "Net plugin of the net transport's connections: socket (default) or ib (the ib plugin over an RDMA device, else its software verbs provider; see run bench -h).", strVal{&o.net}},
		optSpec{[]string{"cpuprofile"}, "PREFIX", "Write each rank's CPU profile (its proxy threads included) to PREFIX.rankR.prof, for go tool pprof.", strVal{&o.cpuProfile}},
		optSpec{[]string{"gpu"}, "", "Accepted for symmetry with run --gpu (run gpu runs on GPUs anyway).", boolVal{new(bool)}},
	)
	return append(g, tw)
}

func gpuUsage(w io.Writer, groups []optGroup) {
	fmt.Fprintf(w, `Usage: run gpu [-np N] [PROGRAM] [flags]
       run --gpu [-np N] [PROGRAM] [flags], or a link named PROGRAM with --gpu

An nccl-tests sweep on GPUs, one process per GPU, printing nccl-tests'
table (the same format as run on the host device: see run -h). PROGRAM is
an nccl-tests program name (all_reduce_perf, all_gather_perf,
reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf,
sendrecv_perf); --op or --coll name the collective too. With -np N (or,
without it, t x g ranks) it starts the rank processes on this host (this
binary again), rank r on GPU r mod (visible GPUs): at most 8 ranks share
a GPU. Otherwise it is one rank of a job started by Slurm, Open MPI or
torchrun (rank and size from their variables, the root's address from
TWINCCL_COMM_ID or MASTER_ADDR and MASTER_PORT; rank 0 serves it; the
job's secret from TWINCCL_SECRET_FILE, a 0600 file rank 0 creates, or
TWINCCL_SECRET: see docs/guide/security.md). Every flag is checked before
any rank starts (exit status 2 and one message).

Every rank plans on the topology (--topo FILE, else this machine's as NVML
discovers it, else the embedded H200 pair with a warning), takes the
algorithm, protocol and channels NCCL's tuner would choose for each size
(unless --algo, --proto or --channels say otherwise), generates the Program
and runs it with the CUDA interpreter kernel. sendrecv runs on NCCL's p2p
schedule (model.GenerateP2PProgram, NCCL's per-transfer protocol).

Each size runs out of place and then in place (one buffer: the input at
the rank's offset of an allgather's output, the output at the rank's
offset of a reducescatter's input, as nccl-tests places them). alltoall's
GIN kernel runs out of place only: its in-place columns say N/A.

Ranks talk as NCCL's would: P2P (NVLink or PCIe, CUDA IPC) on one host,
SHM through host memory with NCCL_P2P_DISABLE=1, and the net transport
between hosts (TWINCCL_HOSTID=split:K makes every K ranks a host of their
own on one machine), or between every pair with NCCL_SHM_DISABLE=1 as
well: the kernel stages slices in host memory and the rank's proxy sends
them over TCP sockets, one socket per connection moved by the proxy
itself unless NCCL_SOCKET_NTHREADS asks for helper threads (see "run
bench -h"). --net ib carries them over the ib plugin instead: an RDMA
device through libibverbs where one exists, else the software verbs
provider (TCP, a test vehicle; TWINCCL_IB_PROVIDER picks), from the same
host staging buffers.

Timing follows nccl-tests and shared/baselines/h200x2-nvswitch: after the
warm-up, -G N (N >= 1) captures a loop of ITERS calls in a CUDA graph and
times 5 launches of it with CUDA events on the rank's stream (a barrier
before each); -G 0 times 5 eager loops of ITERS launches. A row's time is
the mean per call over the repetitions, each repetition's ranks combined
as -a says (the average by default, as nccl-tests; --json records each
repetition's slowest rank, reps_us, nccl_reps_us, whatever -a says).
busbw uses nccl-tests' factors (AllReduce 2(n-1)/n, AllGather,
ReduceScatter and AlltoAll (n-1)/n, the others 1).
--passes N sweeps the sizes N times and gives each row the 5N repetitions
of every pass (a line per pass says how far it got; the table follows the
last): a busy spell of a shared host, which can hold one size's five
back-to-back repetitions 1.5-2.5x slow over sockets, then moves only one
pass of them, and the median that "replay compare" takes stays put. By
default a sweep whose ranks are on several hosts (TWINCCL_HOSTID=split:K,
or several machines) runs 3 passes, and any other 1. --retries N then times
the sizes whose repetitions still disagree (their median more than 1.25x
their best, in either column: what "replay compare" marks disturbed) again,
after all the others, up to N more times each (a line per retry says how
many), each row keeping every repetition; by default 2 when the ranks are
on several hosts, else none.

--cpuprofile PREFIX profiles every rank process while it runs (the host's
side: the proxy's progress loop and its system calls, the bootstrap,
launches) into PREFIX.rankR.prof: "go tool pprof -top bin/run
PREFIX.rank1.prof" shows where a rank's CPU time went.

--op alltoall runs GPU-initiated networking's all-to-all example instead
of a Program: one kernel per rank reads a signal, meets the others at a GIN
barrier, puts its slice for every rank (itself included) into that rank's
receive buffer with a signal add, waits for all slices to arrive and
flushes; the puts are executed by a proxy thread per rank over P2P (CUDA
IPC), so the kernel only posts descriptors (exec/hw/gin). A size is a
rank's whole send buffer (size/n bytes per peer), as in nccl-tests; the
baseline is NCCL's grouped ncclSend/ncclRecv. The nch column
(--twinccl-columns) is the number of puts per slice.

--baseline nccl runs every size through the system's libnccl as well (the
unique id goes from rank 0 over the bootstrap), timed the same way, and adds
NCCL's time and busbw and the ratio ours/NCCL (busbw; above 1 we are faster)
for each placement after nccl-tests' columns (it turns --twinccl-columns
on; --twinccl-columns=false leaves NCCL's numbers to --json only).
--algo, --proto and --channels force NCCL the same way through NCCL_ALGO,
NCCL_PROTO and NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS (a contradicting value
already in the environment is an error), and --json records the NCCL_*
settings NCCL ran under as nccl_env, which "replay compare" applies. Set
NCCL_NVLS_ENABLE=0 where NVLink SHARP must stay off. TWINCCL_NCCL_LIB names
the library. NCCL_BUFFSIZE reaches NCCL only: our Programs keep NCCL's
default 4 MiB Simple buffer.

--trace OUT.parquet runs every size once more, untimed, out of place, with
the kernel stamping each slice (the GPU clock, ns), and writes one call row
per rank and size to OUT.parquet and one event row per slice to
OUT.events.parquet (the local launcher merges the ranks' parts; under
another launcher every rank writes OUT.rankR.parquet and
OUT.rankR.events.parquet, which "replay trace merge" joins). A call's start
and end are its first and last slice stamps, its enqueue time the host
clock.

Examples:
  run gpu -np 2 all_reduce_perf -b 8 -e 1G -f 4
  run gpu -np 2 --op allgather -b 8 -e 256M -f 4 --baseline nccl --json out.json
  ln -s run all_reduce_perf; ./all_reduce_perf --gpu -g 2 -b 8 -e 128M -f 2
`)
	printOpts(w, groups)
}

// maxRanksPerGPU bounds the ranks that share one GPU (each is a process
// with its own CUDA context, buffers and spinning kernels).
const maxRanksPerGPU = 8

// parseGPUArgs reads and checks the flags of run gpu.
func parseGPUArgs(e *env, args []string) (gpuOpts, error) {
	var o gpuOpts
	o.net = "socket"
	o.nt.defaults()
	o.nt.iters = 20
	o.retries = -1
	o.nt.usageHint = "run gpu -h"
	fs := flag.NewFlagSet("gpu", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	groups := gpuGroups(&o)
	register(fs, groups)
	if err := o.nt.parseArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			gpuUsage(e.stdout, groups)
			return o, err
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return o, err
		}
		return o, &usageError{err.Error() + " (see run gpu -h)"}
	}
	if o.nt.version {
		printVersion(e.stdout)
		return o, flag.ErrHelp
	}
	nt := &o.nt
	if err := nt.validate(); err != nil {
		return o, err
	}
	bad := func(format string, a ...any) (gpuOpts, error) { return o, &usageError{fmt.Sprintf(format, a...)} }
	switch {
	case o.passes < 0 || o.passes > maxPasses:
		return bad("--passes must be from 1 to %d (0: the default)", maxPasses)
	case o.retries < -1 || o.retries > maxPasses:
		return bad("--retries must be from 0 to %d (-1: the default)", maxPasses)
	case o.baseline != "" && o.baseline != "nccl":
		return bad("--baseline %q: the only baseline is nccl", o.baseline)
	}
	if err := checkNetFlag(o.net); err != nil {
		return o, err
	}
	if o.topo != "" {
		if _, err := os.Stat(o.topo); err != nil {
			return bad("--topo %s: %v", o.topo, errors.Unwrap(err))
		}
	}
	switch nt.collV {
	case model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast, model.CollReduce, model.CollSendRecv:
	case model.CollAlltoAll:
		if nt.algo != "" || nt.proto != "" || nt.channels != 0 || nt.trace != "" {
			return bad("--op alltoall runs the GIN all-to-all kernel: --algo, --proto, --channels and --trace do not apply")
		}
	default:
		return bad("--op %s: run gpu runs allreduce, allgather, reducescatter, broadcast, reduce, alltoall and sendrecv", nt.collV)
	}
	if o.baseline == "nccl" && !nt.set("twinccl-columns") {
		nt.columns = true
	}
	o.np, o.op = nt.np, strings.ToLower(nt.collV.String())
	o.algo, o.proto, o.channels = nt.algo, nt.proto, nt.channels
	o.minB, o.maxB, o.factor, o.stepB = nt.minB, nt.maxB, nt.factor, nt.stepB
	o.iters, o.warmup, o.check = nt.iters*nt.aggIters, nt.warmup, nt.check
	o.itersAuto = nt.iters == 0
	if nt.graph > 0 {
		o.graph = 1
	}
	o.root, o.trace, o.timeout = max(nt.root, 0), nt.trace, nt.timeout
	o.coll, o.dt, o.rop = nt.collV, nt.dtypes[0], nt.rops[0]
	o.algoSet, o.algoV, o.protoSet, o.protoV = nt.algoSet, nt.algoV, nt.protoSet, nt.protoV
	return o, nil
}

// runGPU is `run gpu`: an nccl-tests sweep on GPUs.
func runGPU(e *env, args []string) error {
	o, err := parseGPUArgs(e, args)
	if err != nil {
		return err
	}
	if os.Getenv(envUID) != "" {
		return gpuRank(e, o) // a rank of the local launcher
	}
	if err := checkRDMAForced(o.net); err != nil {
		return err
	}
	np, err := o.nt.ranksToLaunch()
	if err != nil {
		return err
	}
	if np == 0 {
		return gpuRank(e, o) // a rank of a Slurm, Open MPI or torchrun job
	}
	if err := o.nt.checkRanks(np); err != nil {
		return err
	}
	return gpuLaunch(e, o, np, args)
}

// cudaDeviceCount is the number of visible CUDA devices, or an error
// saying there is none.
func cudaDeviceCount() (int, error) {
	drv, err := cuda.Open()
	if err != nil {
		return 0, fmt.Errorf("no CUDA device: %w", err)
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return 0, fmt.Errorf("no CUDA device: %w", err)
	}
	if n == 0 {
		return 0, errors.New("no CUDA device (the driver sees none; check CUDA_VISIBLE_DEVICES)")
	}
	return n, nil
}

// gpuLaunch starts np copies of this binary as the ranks of a job on
// this host and waits for them: at most maxRanksPerGPU per visible GPU
// (ranks beyond the GPU count share GPUs round-robin) and no more than
// the host takes (hostRankLimit). Rank 0's stdout is the table; every
// rank's stderr comes through prefixed with its rank. When a rank fails,
// the others get twice the heartbeat timeout plus 2 s to notice and exit
// before they are killed (launchRanks).
func gpuLaunch(e *env, o gpuOpts, np int, args []string) (err error) {
	gpus, err := cudaDeviceCount()
	if err != nil {
		return err
	}
	if np > maxRanksPerGPU*gpus {
		return &usageError{fmt.Sprintf("-np %d: %d visible GPU(s) take at most %d ranks (%d per GPU; ranks beyond the GPU count share GPUs round-robin)", np, gpus, maxRanksPerGPU*gpus, maxRanksPerGPU)}
	}
	if err := checkHostRanks(np); err != nil {
		return err
	}
	return launchRanks(e, "gpu", np, o.timeout, o.trace, o.nt.progress, args)
}

// envLocalRank is the local rank the launcher gives each rank process.
const envLocalRank = "TWINCCL_BENCH_LOCAL_RANK"

// localRank is the rank's index among the ranks of its host: the
// launcher's, Slurm's, Open MPI's or torchrun's, else the global rank.
func localRank(rank int) int {
	for _, v := range []string{envLocalRank, "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK", "LOCAL_RANK"} {
		if s := os.Getenv(v); s != "" {
			if r, err := strconv.Atoi(s); err == nil && r >= 0 {
				return r
			}
		}
	}
	return rank
}

// gpuRow is one size of the sweep: the recorded row (gpurecord.Row, which
// --json writes) and what the table needs beside it.
type gpuRow struct {
	gpurecord.Row
	// inPlace is the same size run in place (Row.InPlace, once recorded);
	// nil where it did not run.
	inPlace *gpuRow
	// The table's time: each repetition's ranks combined as -a says
	// (tableReps, NCCL's tableNCCL), and the ranks with wrong elements.
	tableReps, tableNCCL []float64
	badRanks             int
}

// record is the row as --json writes it, with its in-place half.
func (r *gpuRow) record() gpurecord.Row {
	out := r.Row
	out.InPlace = nil
	if r.inPlace != nil {
		ip := r.inPlace.record()
		out.InPlace = &ip
	}
	return out
}

// gpuJob is one rank's state for the sweep.
type gpuJob struct {
	e       *env
	noted   bool // hwTunerChoice's note was given
	o       gpuOpts
	rank, n int
	// hosts is the number of hosts the ranks are on (plan: TWINCCL_HOSTID,
	// or the machines of the job)
	hosts    int
	comm     *bootstrap.Comm
	ctx      *cuda.Context
	dev      *gpudev.Device
	res      *search.Result
	in, out  cuda.DevicePtr
	bufBytes uint64
	hostIn   []byte
	hostOut  []byte
	// NCCL baseline (nil without --baseline).
	lib     *nccl.Lib
	nc      *nccl.Comm
	ncs     *cuda.Stream
	t0, t1  *cuda.Event
	stopDog chan struct{}
	sink    *traceSink     // nil without --trace
	pass    int            // the sweep's pass (--passes), from 0
	table   *ntTable       // rank 0's
	prog    *sweepProgress // rank 0's; nil without progress
	gin     *gin.Comm      // --op alltoall only
	// releaseNet lets go of --net's verbs provider once the device
	// (which closes the plugin) is closed; nil until there is one.
	releaseNet func()
}

// gpuRank is one rank of the sweep.
func gpuRank(e *env, o gpuOpts) (err error) {
	rank, n, id, ok, err := jobEnv()
	if err != nil {
		return err
	}
	if !ok {
		return &usageError{"no job: give -np N, or run under Slurm, Open MPI or torchrun"}
	}
	if err := o.nt.checkRanks(n); err != nil {
		return err
	}
	if os.Getenv(envUID) == "" {
		if id, err = jobSecret(id, rank, o.timeout); err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	}
	if rank == 0 && os.Getenv(envUID) == "" {
		root, err := bootstrap.StartRootSecret(id.Addr, id.Magic, id.Secret, n, o.timeout, e.log)
		if err != nil {
			return fmt.Errorf("rank 0: bootstrap root: %w", err)
		}
		defer root.Close()
	}
	if o.cpuProfile != "" {
		stop, err := startCPUProfile(o.cpuProfile, rank)
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, stop()) }()
	}
	j := &gpuJob{e: e, o: o, rank: rank, n: n, stopDog: make(chan struct{})}
	if o.trace != "" {
		hn, _ := os.Hostname()
		j.sink = &traceSink{job: "run gpu " + o.nt.programName(), comm: id.Magic, host: hn}
	}
	host := ""
	if ifn := os.Getenv("TWINCCL_SOCKET_IFNAME"); ifn != "" {
		if host, err = bootstrap.ListenAddr(ifn); err != nil {
			return fmt.Errorf("rank %d: %w", rank, err)
		}
	} else if os.Getenv(envUID) != "" {
		host = "127.0.0.1"
	}
	j.comm, err = bootstrap.Init(bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: host, Timeout: o.timeout, Log: e.log, Watch: true})
	if err != nil {
		return err
	}
	go j.watchdog()
	defer close(j.stopDog)
	defer func() {
		if j.releaseNet != nil {
			// After the device and the barrier: no peer still talks
			// to this rank's verbs provider.
			defer j.releaseNet()
		}
		if err != nil {
			j.release(true)
			j.comm.Abort()
			return
		}
		err = j.release(false)
		if berr := j.comm.Barrier(); berr != nil && err == nil {
			err = berr
		}
		j.comm.Close()
	}()
	// After the bootstrap, so that a rank without a GPU makes the others
	// fail at once (a lost peer) rather than at the bootstrap's timeout.
	ctxs, err := gpudev.Contexts()
	if err != nil {
		return fmt.Errorf("rank %d: no CUDA device: %w", rank, err)
	}
	j.ctx = ctxs[localRank(rank)%len(ctxs)]
	plugin, netName, releaseNet, err := netPlugin(e, o.net, host, id.Secret)
	if err != nil {
		return fmt.Errorf("rank %d: --net %s: %w", rank, o.net, err)
	}
	// The device closes the plugin; the provider goes after it (release).
	j.releaseNet = releaseNet
	e.log.Debug("net plugin", "rank", rank, "net", netName)
	if j.dev, err = gpudev.NewWithOptions(j.comm, j.ctx, gpudev.Options{Net: plugin}); err != nil {
		plugin.Close()
		return err
	}
	j.dev.Timeout = o.timeout
	return j.sweep()
}

// watchdog ends the process when a peer was lost and this rank is still
// running a timeout later: our kernels abort on their own, but a kernel of
// libnccl waiting for the lost peer would spin forever.
func (j *gpuJob) watchdog() {
	select {
	case <-j.comm.Lost():
	case <-j.stopDog:
		return
	}
	select {
	case <-time.After(j.o.timeout):
		msg := fmt.Sprintf("rank %d: rank %d was lost and this rank is still blocked %v later; exiting", j.rank, j.comm.LostPeer(), j.o.timeout)
		if os.Getenv(envUID) != "" {
			fmt.Fprintf(j.e.stderr, "%serror 1 1 %s\n", ctlPrefix, msg)
		} else {
			fmt.Fprintf(j.e.stderr, "run gpu: %s\n", msg)
		}
		os.Exit(1)
	case <-j.stopDog:
	}
}

// release frees the rank's GPU buffers, NCCL communicator and device;
// after a failure (abort) the communicator is aborted, not destroyed,
// since a peer may be gone.
func (j *gpuJob) release(abort bool) error {
	var errs []error
	if j.gin != nil {
		errs = append(errs, j.gin.Close())
		j.gin = nil
	}
	if j.nc != nil {
		if abort {
			errs = append(errs, j.nc.Abort())
		} else {
			errs = append(errs, j.nc.Destroy())
		}
		j.nc = nil
	}
	for _, ev := range []*cuda.Event{j.t0, j.t1} {
		if ev != nil {
			errs = append(errs, ev.Destroy())
		}
	}
	j.t0, j.t1 = nil, nil
	if j.ncs != nil {
		errs = append(errs, j.ncs.Destroy())
		j.ncs = nil
	}
	for _, p := range []*cuda.DevicePtr{&j.in, &j.out} {
		if *p != 0 {
			errs = append(errs, j.ctx.MemFree(*p))
			*p = 0
		}
	}
	if j.dev != nil {
		errs = append(errs, j.dev.Close())
		j.dev = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("rank %d: release: %w", j.rank, err)
	}
	return nil
}

// loadTopology is rank 0's topology XML and its name: --topo, else live
// discovery, else the embedded default.
func (j *gpuJob) loadTopology() (string, []byte, error) {
	if j.o.topo != "" {
		b, err := os.ReadFile(j.o.topo)
		if err != nil {
			return "", nil, fmt.Errorf("--topo: %w", err)
		}
		return j.o.topo, b, nil
	}
	root, err := discoverTopology(j.e.log)
	if err == nil {
		var buf bytes.Buffer
		if err = model.WriteXML(&buf, root); err == nil {
			return "live", buf.Bytes(), nil
		}
	}
	fmt.Fprintf(j.e.stderr, "run gpu: warning: live topology discovery failed (%v); planning on the embedded %s\n", oneLine(err.Error()), twinccl.DefaultTopology)
	b, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		return "", nil, err
	}
	return "embedded:" + twinccl.DefaultTopology, b, nil
}

// plan loads the topology on rank 0, hands it to every rank (so that all
// plan on the same one) and runs the search.
func (j *gpuJob) plan() (string, error) {
	var msg []byte
	if j.rank == 0 {
		name, xml, err := j.loadTopology()
		if err != nil {
			// Peers learn of it from the empty message.
			j.comm.AllGather(nil)
			return "", err
		}
		msg = append([]byte(name+"\n"), xml...)
	}
	all, err := j.comm.AllGather(msg)
	if err != nil {
		return "", fmt.Errorf("rank %d: topology from rank 0: %w", j.rank, err)
	}
	name, xml, ok := bytes.Cut(all[0], []byte("\n"))
	if !ok {
		return "", fmt.Errorf("rank %d: rank 0 could not load a topology", j.rank)
	}
	file := string(name)
	root, warns, err := model.ParseTopologyXML(bytes.NewReader(xml), file)
	if err != nil {
		return "", err
	}
	if j.rank == 0 {
		for i, w := range warns {
			if i == 3 {
				break
			}
			j.e.log.Warn(w.Msg, "file", w.File, "line", w.Line)
		}
	}
	// NCCL_P2P_DISABLE, NCCL_SHM_DISABLE, NCCL_P2P_LEVEL ... shape the
	// paths (and so the plan) as they do NCCL's.
	params, err := model.ParamsFromEnv(nil)
	if err != nil {
		return "", err
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Params: params})
	if err != nil {
		return "", err
	}
	// Ranks on different hosts (several machines, or TWINCCL_HOSTID=split:K
	// on one) are planned as that many nodes of the topology, as the
	// device connects them: over the net transport.
	hosts, err := j.hostCount()
	if err != nil {
		return "", err
	}
	j.hosts = hosts
	local := cl.NRanks
	if hosts > 1 {
		if j.n%hosts != 0 {
			return "", fmt.Errorf("%d ranks on %d hosts: want the same number of ranks on every host", j.n, hosts)
		}
		if per := j.n / hosts; per < local {
			model.KeepRanks(root, per)
		}
		cl, err = model.LoadCluster(root, file, model.LoadOptions{Nodes: hosts, Params: params})
		if err == nil && cl.NRanks != j.n {
			err = fmt.Errorf("%s: planned %d ranks for %d hosts of %d ranks", file, cl.NRanks, hosts, j.n/hosts)
		}
		if err != nil {
			return "", fmt.Errorf("%w (give --topo FILE describing one host)", err)
		}
	} else if local != j.n {
		switch {
		case j.n > local && j.n%local == 0:
			// A job over several hosts like this one.
			cl, err = model.LoadCluster(root, file, model.LoadOptions{Nodes: j.n / local, Params: params})
		case j.n < local:
			model.KeepRanks(root, j.n)
			cl, err = model.LoadCluster(root, file, model.LoadOptions{Params: params})
		default:
			err = fmt.Errorf("%s has %d GPUs, which does not fit a job of %d ranks", file, local, j.n)
		}
		if err == nil && cl.NRanks != j.n {
			err = fmt.Errorf("%s: planned %d ranks for a job of %d", file, cl.NRanks, j.n)
		}
		if err != nil {
			return "", fmt.Errorf("%w (give --topo FILE with one ranked GPU per rank)", err)
		}
	}
	opts, err := searchOptions(j.o)
	if err != nil {
		return "", err
	}
	if j.res, err = search.Run(cl, opts); err != nil {
		return "", err
	}
	// Our connections take the transports the plan (and the simulator)
	// gives them.
	if j.dev != nil {
		if err := j.dev.SetCluster(cl); err != nil {
			return "", fmt.Errorf("rank %d: %w", j.rank, err)
		}
	}
	return file, nil
}

// searchOptions are the search's and tuner's settings: the environment's
// NCCL_* variables under the ones the flags force on NCCL too
// (ncclForcedEnv), so that our tuner decides as NCCL's does under them: a
// call forced to Simple gets Simple's channel count for its size, not the
// one of the protocol the tuner would have picked.
func searchOptions(o gpuOpts) (search.Options, error) {
	forced := ncclForcedEnv(o)
	return search.OptionsFromEnv(func(k string) (string, bool) {
		if v, ok := forced[k]; ok {
			return v, true
		}
		return os.LookupEnv(k)
	})
}

// hostCount is the number of distinct hosts of the job's ranks
// (transport.HostID, as the device decides transports).
func (j *gpuJob) hostCount() (int, error) {
	all, err := j.comm.AllGather([]byte(transport.HostID(j.rank)))
	if err != nil {
		return 0, fmt.Errorf("rank %d: host ids: %w", j.rank, err)
	}
	seen := map[string]bool{}
	for _, h := range all {
		seen[string(h)] = true
	}
	return len(seen), nil
}

// choose is the algorithm, protocol and channels of one size: the tuner's,
// with the flags' overrides.
func (j *gpuJob) choose(count int64) (model.Algorithm, model.Protocol, int, error) {
	if j.o.coll.IsP2P() {
		// Sends and receives: NCCL's per-transfer protocol on the plan's
		// p2p channels, as replay sim runs them.
		plan := j.res.Plan
		_, chMax := model.P2PChannelRange(j.n, plan.P2PChannels, plan.P2PChannelsPerPeer)
		proto := model.P2PProtocol(count*int64(j.o.dt.Size()), chMax, plan.NNodes > 1, false)
		if j.o.protoSet {
			proto = j.o.protoV
		}
		return model.AlgoRing, proto, 0, nil
	}
	ch, note, err := hwTunerChoice(j.res.Tuning, j.o.coll, count, j.o.dt.Size())
	if err != nil {
		return 0, 0, 0, err
	}
	if note != "" && !j.noted && !j.o.algoSet {
		j.noted = true
		if j.rank == 0 {
			fmt.Fprintf(j.e.stderr, "run gpu: %s\n", note)
		}
	}
	algo, proto, nch := ch.Algo, ch.Proto, ch.NChannels
	if j.o.algoSet {
		algo = j.o.algoV
	}
	if j.o.protoSet {
		proto = j.o.protoV
	}
	if !model.ProgramCovers(j.o.coll, algo, proto, j.n) && !j.o.algoSet {
		// PAT on more than two ranks: ring.
		algo = model.AlgoRing
	}
	if !model.CollAllowed(j.o.coll, algo, proto) && !j.o.protoSet {
		proto = model.ProtoSimple
	}
	if !model.CollAllowed(j.o.coll, algo, proto) {
		return 0, 0, 0, &usageError{fmt.Sprintf("%s does not run with algorithm %s and protocol %s", j.o.coll, algo, proto)}
	}
	if j.o.channels > 0 {
		nch = j.o.channels
	}
	return algo, proto, nch, nil
}

// sizes lists the sweep's sizes (ntOpts.sizes).
func (o gpuOpts) sizes() []int64 {
	nt := ntOpts{minB: o.minB, maxB: o.maxB, factor: o.factor, stepB: o.stepB}
	return nt.sizes()
}

// itersFor is the number of calls per timed loop at size bytes.
func (o gpuOpts) itersFor(size int64) int {
	if !o.itersAuto {
		return o.iters
	}
	if size >= 64<<20 {
		return 10
	}
	return 50
}

// sweep runs every size on this rank; rank 0 prints the table.
func (j *gpuJob) sweep() error {
	topo, err := j.plan()
	if err != nil {
		return err
	}
	j.o.passes = sweepPasses(j.o.passes, j.hosts)
	j.o.retries = sweepRetries(j.o.retries, j.hosts)
	// Buffers for the largest size of any type (nccl-tests' sizes never
	// need more than the size in either buffer), reused by every size,
	// by the in-place calls (the output buffer) and by NCCL.
	j.bufBytes = (uint64(j.o.maxB) + 16*uint64(j.n) + 63) &^ 63
	if j.in, err = j.ctx.MemAlloc(j.bufBytes); err != nil {
		return fmt.Errorf("rank %d: input buffer of %d bytes: %w", j.rank, j.bufBytes, err)
	}
	if j.out, err = j.ctx.MemAlloc(j.bufBytes); err != nil {
		return fmt.Errorf("rank %d: output buffer of %d bytes: %w", j.rank, j.bufBytes, err)
	}
	if err := j.ctx.MemsetD8(j.in, 0, j.bufBytes); err != nil {
		return fmt.Errorf("rank %d: clear input: %w", j.rank, err)
	}
	if j.t0, err = j.ctx.NewEvent(cuda.EventDefault); err == nil {
		j.t1, err = j.ctx.NewEvent(cuda.EventDefault)
	}
	if err != nil {
		return fmt.Errorf("rank %d: events: %w", j.rank, err)
	}
	if j.o.coll == model.CollAlltoAll {
		if err := j.initGIN(); err != nil {
			return err
		}
	}
	if j.o.baseline == "nccl" {
		if err := j.initNCCL(); err != nil {
			return err
		}
	}
	gpus, devs, err := j.describeGPUs()
	if err != nil {
		return err
	}
	kernel := kernels.Current()
	graph := j.o.graph == 1
	rep := gpurecord.Report{NRanks: j.n, Collective: j.o.coll.String(), Graph: &graph, Repetitions: gpuReps * j.o.passes, Topology: topo, GPUs: gpus,
		Kernel: &kernel, Revision: buildRevision()}
	if j.hosts > 1 {
		rep.Hosts = j.hosts
	}
	if j.lib != nil {
		rep.NCCLVersion = j.lib.VersionString()
		rep.NCCLEnv = ncclEnviron()
	}
	if j.rank == 0 {
		j.prog = newSweepProgress(j.e.stderr, j.o.nt.progress)
		j.table = &ntTable{w: j.prog.writer(j.e.stdout), prog: j.o.nt.programName(), columns: j.o.nt.columns, baseline: j.lib != nil}
		j.table.header(&j.o.nt, j.notes(rep), devs)
	}
	out := j.e.stdout
	if j.table != nil {
		out = j.table.w
	}
	// probe measures rank 0's host's loopback sockets in a run over
	// several hosts (nil otherwise): before and after the sweep, and
	// before every size, since the host's sockets drift during a run.
	probe := func() (*netprobe.Result, error) {
		if j.hosts < 2 || j.rank != 0 {
			return nil, nil
		}
		r, err := netprobe.Loopback(netprobe.Options{})
		if err != nil {
			return nil, fmt.Errorf("rank 0: %w", err)
		}
		return &r, nil
	}
	sweepProbe := func() error {
		r, err := probe()
		if r != nil {
			rep.NetProbe = append(rep.NetProbe, gpurecord.NetProbe(*r))
			fmt.Fprintf(out, "# loopback probe: %s\n", r)
		}
		return err
	}
	if err := sweepProbe(); err != nil {
		return err
	}
	sizes := j.o.sizes()
	cases := j.o.nt.cases(j.n)
	steps, step := len(cases)*len(sizes)*j.o.passes, 0
	var wrong int64
	for _, cs := range cases {
		j.o.dt, j.o.rop, j.o.root = cs.dt, cs.rop, max(cs.root, 0)
		rows := make([]gpuRow, len(sizes))
		for j.pass = 0; j.pass < j.o.passes; j.pass++ {
			started := time.Now()
			for i, size := range sizes {
				j.prog.step(step, steps, fmt.Sprintf("%s %s, %d B", ntTypeName(cs.dt), cs.redop, size))
				step++
				// Probe the host before a size in the first pass only: the
				// row keeps that probe.
				var rowProbe *netprobe.Result
				if j.pass == 0 {
					if rowProbe, err = probe(); err != nil {
						return err
					}
				}
				row, err := j.runSize(size)
				if err != nil {
					return err
				}
				if j.pass == 0 {
					if rowProbe != nil {
						p := gpurecord.NetProbe(*rowProbe)
						row.NetProbe = &p
					}
					rows[i] = row // gatherRow derived its times
				} else {
					rows[i].addPass(row)
					rows[i].derive(busFactor(j.o.coll, j.n), j.nc != nil)
				}
				if j.rank == 0 && j.o.passes == 1 && j.o.retries == 0 {
					j.table.row(j.tableRow(rows[i], cs))
				}
			}
			if j.rank == 0 && j.o.passes > 1 {
				fmt.Fprintf(out, "# pass %d of %d: %d sizes in %.1f s\n", j.pass+1, j.o.passes, len(sizes), time.Since(started).Seconds())
			}
		}
		// Sizes whose repetitions still disagree are timed again, after the
		// others: a busy spell of the host often outlasts one size's
		// repetitions, and a later pass may find it calm.
		for retry := 1; retry <= j.o.retries; retry++ {
			redo := disturbedRows(rows)
			if len(redo) == 0 {
				break
			}
			started := time.Now()
			for _, i := range redo {
				row, err := j.runSize(sizes[i])
				if err != nil {
					return err
				}
				rows[i].addPass(row)
				rows[i].derive(busFactor(j.o.coll, j.n), j.nc != nil)
			}
			if j.rank == 0 {
				fmt.Fprintf(out, "# retry %d of %d: %d disturbed size(s) timed again in %.1f s\n", retry, j.o.retries, len(redo), time.Since(started).Seconds())
			}
		}
		for _, row := range rows {
			wrong += row.Wrong
			if row.inPlace != nil {
				wrong += row.inPlace.Wrong
			}
			if j.rank == 0 && (j.o.passes > 1 || j.o.retries > 0) {
				j.table.row(j.tableRow(row, cs))
			}
		}
		if j.rank == 0 {
			for i := range rows {
				rep.Rows = append(rep.Rows, rows[i].record())
			}
		}
	}
	if err := sweepProbe(); err != nil {
		return err
	}
	var footErr error
	if j.rank == 0 {
		j.prog.finish()
		footErr = j.table.footer()
	}
	if j.rank == 0 && j.o.jsonOut != "" {
		if err := writeGPUJSON(j.o.jsonOut, &rep); err != nil {
			return err
		}
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong elements over the sweep (see #wrong)", wrong)
	}
	if footErr != nil {
		return footErr
	}
	if j.sink != nil {
		dir, base := os.Getenv(envTraceDir), j.o.trace
		if dir != "" {
			base = filepath.Join(dir, "part")
		}
		c, ev := tracePaths(base, j.rank)
		j.sink.env = ncclEnviron()
		return j.sink.write(c, ev)
	}
	return nil
}

// tableRow is a row of the sweep as nccl-tests' table shows it: times
// combined over the ranks as -a says.
func (j *gpuJob) tableRow(r gpuRow, cs ntCase) ntRow {
	bus := busFactor(j.o.coll, j.n)
	place := func(g *gpuRow) ntPlace {
		if g == nil {
			return ntPlace{}
		}
		p := ntPlace{ran: true, checked: g.Checked, wrong: g.Wrong, badRank: g.badRanks}
		p.timeUs, _ = meanBest(g.tableReps)
		if p.timeUs > 0 {
			p.algbw = float64(g.Bytes) / p.timeUs / 1e3
			p.busbw = p.algbw * bus
		}
		if j.nc != nil && len(g.tableNCCL) > 0 {
			p.ncclRan = true
			p.ncclUs, _ = meanBest(g.tableNCCL)
			if p.ncclUs > 0 {
				p.ncclBus = float64(g.Bytes) / p.ncclUs / 1e3 * bus
			}
			if p.timeUs > 0 {
				p.ratio = p.ncclUs / p.timeUs
			}
		}
		return p
	}
	return ntRow{bytes: r.Bytes, count: r.Count, typ: ntTypeName(cs.dt), redop: cs.redop, root: cs.root,
		oop: place(&r), ip: place(r.inPlace), algo: r.Algo, proto: r.Proto, nch: r.NChannels}
}

// transports names the transports of rank 0's connections to its peers
// as the plan decides them (model.Cluster.Conn on channel 0), with the
// peers of each: "P2P/NVL (ranks 1-7), NET/mlx5_0->mlx5_0/GDR (ranks
// 8-15)"; "" for one rank. Our executor's connections follow the same
// decision (gpudev.Device.SetCluster).
func (j *gpuJob) transports() string {
	if j.res == nil || j.res.Cluster == nil || j.n < 2 {
		return ""
	}
	var order []string
	peers := map[string][]int{}
	// NICs as the simulator takes them: the plan's graphs, NCCL_CROSS_NIC.
	planner := j.res.Cluster.PlannerFor(j.res.Plan, j.res.Options.Search.CrossNic == 0)
	for r := 1; r < j.n; r++ {
		c, err := planner.Conn(0, r, 0)
		if err != nil {
			return ""
		}
		k := c.String()
		if _, ok := peers[k]; !ok {
			order = append(order, k)
		}
		peers[k] = append(peers[k], r)
	}
	parts := make([]string, len(order))
	for i, k := range order {
		rs := peers[k]
		who := fmt.Sprintf("rank %d", rs[0])
		if len(rs) > 1 {
			who = fmt.Sprintf("%d ranks from %d to %d", len(rs), rs[0], rs[len(rs)-1])
		}
		parts[i] = fmt.Sprintf("%s (%s)", k, who)
	}
	return strings.Join(parts, ", ")
}

// notes are the header's twinccl lines of run gpu.
func (j *gpuJob) notes(rep gpurecord.Report) []string {
	mode := "CUDA-graph-captured loops"
	if j.o.graph == 0 {
		mode = "eager loops"
	}
	iters := fmt.Sprintf("%d calls per loop", j.o.iters)
	if j.o.itersAuto {
		iters = "50 calls per loop, 10 from 64 MiB"
	}
	reps := fmt.Sprintf("%d repetitions (mean)", gpuReps)
	if j.o.passes > 1 {
		reps = fmt.Sprintf("%d passes of %d repetitions (mean of all)", j.o.passes, gpuReps)
	}
	if j.o.retries > 0 {
		reps += fmt.Sprintf(", up to %d retries of disturbed sizes", j.o.retries)
	}
	notes := []string{
		fmt.Sprintf("twinccl gpu: %d ranks, %s, %s (%s), %s, %d warm-up calls; time = %s (-a %d)",
			j.n, j.o.coll, mode, iters, reps, j.o.warmup, averageName(j.o.nt.average), j.o.nt.average),
		fmt.Sprintf("twinccl topology: %s; algorithm/protocol/channels: %s", rep.Topology, j.choiceSource()),
	}
	if rep.Kernel != nil {
		notes = append(notes, fmt.Sprintf("twinccl kernel: %s", rep.Kernel))
	}
	if t := j.transports(); t != "" {
		notes = append(notes, "twinccl transports (the plan's, as replay simulates them): "+t)
	}
	if j.o.nt.blocking != 0 {
		notes = append(notes, fmt.Sprintf("twinccl: -z %d has no effect on run gpu (loops are timed with CUDA events)", j.o.nt.blocking))
	}
	switch {
	case !j.o.nt.inPlace:
		notes = append(notes, "twinccl: --inplace=false: the in-place half did not run; its columns are N/A")
	case j.o.coll == model.CollAlltoAll:
		notes = append(notes, "twinccl: alltoall runs the GIN kernel out of place only; its in-place columns are N/A")
	}
	if j.lib != nil {
		notes = append(notes, fmt.Sprintf("twinccl baseline: NCCL %s (%s), same buffers and timing; ratio = our busbw / NCCL's", j.lib.VersionString(), j.lib.Path()))
	}
	return notes
}

// describeGPUs gathers every rank's GPU: as "rank r: host GPU d name
// (sm_X, bus)" for --json, and as nccl-tests' device lines.
func (j *gpuJob) describeGPUs() ([]string, []ntDevice, error) {
	dev := j.ctx.Device()
	name, _ := dev.Name()
	arch, _ := dev.Arch()
	bus, _ := dev.PCIBusID()
	h, _ := os.Hostname()
	me := fmt.Sprintf("%d\x00%s\x00%d\x00%s\x00%s\x00%d\x00%s", j.rank, h, dev.Ordinal(), name, bus, arch, strconv.Itoa(os.Getpid()))
	all, err := j.comm.AllGather([]byte(me))
	if err != nil {
		return nil, nil, fmt.Errorf("rank %d: gather GPU names: %w", j.rank, err)
	}
	out := make([]string, len(all))
	devs := make([]ntDevice, len(all))
	for i, b := range all {
		f := strings.Split(string(b), "\x00")
		if len(f) != 7 {
			return nil, nil, fmt.Errorf("rank %d: a GPU description of %d fields from rank %d", j.rank, len(f), i)
		}
		out[i] = fmt.Sprintf("rank %s: %s GPU %s %s (sm_%s, %s)", f[0], f[1], f[2], f[3], f[5], f[4])
		ord, _ := strconv.Atoi(f[2])
		pid, _ := strconv.Atoi(f[6])
		host, _, _ := strings.Cut(f[1], ".")
		devs[i] = ntDevice{rank: i, pid: pid, host: host, dev: ord, bus: pciBus(f[4]), name: f[3]}
	}
	return out, devs, nil
}

// ncclForcedEnv are the NCCL_* settings that make NCCL run what --algo,
// --proto and --channels make our executor run: NCCL_ALGO, NCCL_PROTO,
// and NCCL_MIN_NCHANNELS = NCCL_MAX_NCHANNELS. NCCL applies them at
// communicator creation, so its tuner may still give a small call fewer
// channels than --channels does ours.
func ncclForcedEnv(o gpuOpts) map[string]string {
	env := map[string]string{}
	if o.algoSet {
		env["NCCL_ALGO"] = o.algoV.String()
	}
	if o.protoSet {
		env["NCCL_PROTO"] = o.protoV.String()
	}
	if o.channels > 0 {
		env["NCCL_MIN_NCHANNELS"] = strconv.Itoa(o.channels)
		env["NCCL_MAX_NCHANNELS"] = strconv.Itoa(o.channels)
	}
	return env
}

// forceNCCLEnv puts ncclForcedEnv into this process's environment before
// NCCL reads it. A setting already there that says otherwise is an error:
// NCCL and our executor would run different things under one flag.
func forceNCCLEnv(o gpuOpts) error {
	env := ncclForcedEnv(o)
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := env[k]
		if old, ok := os.LookupEnv(k); ok && old != v {
			return fmt.Errorf("%s=%s in the environment contradicts the %s the flags force (%s=%s)", k, old, strings.ToLower(strings.TrimPrefix(k, "NCCL_")), k, v)
		}
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("set %s: %w", k, err)
		}
	}
	return nil
}

// ncclEnviron is the NCCL_* part of the environment, or nil. NCCL_VERSION
// is left out: NVIDIA's container images set it to name the installed
// library; NCCL does not read it.
func ncclEnviron() map[string]string {
	var env map[string]string
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "NCCL_") && k != "NCCL_VERSION" {
			if env == nil {
				env = map[string]string{}
			}
			env[k] = v
		}
	}
	return env
}

// initNCCL loads libnccl on every rank, sends rank 0's unique id over the
// bootstrap and creates the communicator. Every rank learns whether all
// could load the library, so that none waits for the others in vain.
func (j *gpuJob) initNCCL() error {
	if err := forceNCCLEnv(j.o); err != nil {
		return fmt.Errorf("--baseline nccl: %w", err)
	}
	lib, lerr := nccl.Open()
	var msg []byte
	var id nccl.UniqueID
	if lerr == nil && j.rank == 0 {
		id, lerr = lib.GetUniqueID()
	}
	if lerr != nil {
		msg = append([]byte{1}, oneLine(lerr.Error())...)
	} else {
		msg = append([]byte{0}, id[:]...)
	}
	all, err := j.comm.AllGather(msg)
	if err != nil {
		return fmt.Errorf("rank %d: NCCL unique id: %w", j.rank, err)
	}
	for r, m := range all {
		if len(m) == 0 || m[0] != 0 {
			return fmt.Errorf("--baseline nccl: rank %d: %s", r, m[min(1, len(m)):])
		}
	}
	if len(all[0]) != 1+len(id) {
		return fmt.Errorf("rank %d: NCCL unique id of %d bytes from rank 0", j.rank, len(all[0])-1)
	}
	copy(id[:], all[0][1:])
	j.lib = lib
	if j.ncs, err = j.ctx.NewStream(cuda.StreamNonBlocking); err != nil {
		return fmt.Errorf("rank %d: NCCL stream: %w", j.rank, err)
	}
	if j.nc, err = lib.CommInitRank(j.ctx, j.n, id, j.rank); err != nil {
		return fmt.Errorf("--baseline nccl: %w", err)
	}
	return nil
}

func (j *gpuJob) choiceSource() string {
	var parts []string
	if j.o.algoSet {
		parts = append(parts, "--algo "+j.o.algo)
	}
	if j.o.protoSet {
		parts = append(parts, "--proto "+j.o.proto)
	}
	if j.o.channels > 0 {
		parts = append(parts, fmt.Sprintf("--channels %d", j.o.channels))
	}
	if len(parts) == 3 {
		return strings.Join(parts, ", ")
	}
	s := "NCCL's tuner (search)"
	if len(parts) > 0 {
		s += ", " + strings.Join(parts, ", ")
	}
	return s
}

// writeGPUJSON writes the report atomically (temporary file and rename).
func writeGPUJSON(path string, rep *gpurecord.Report) error {
	return atomicfile.Write(path, func(w io.Writer) error { return gpurecord.Encode(w, rep) })
}

// timing is one rank's measurement of one size: the time per call of
// each repetition, and wrong elements.
type timing struct {
	reps  [gpuReps]time.Duration
	wrong int64
}

// repsUs is the repetitions of a gathered row in microseconds (nil when
// none ran: a zero repetition means the size was not timed).
func repsUs(reps []int64) []float64 {
	out := make([]float64, len(reps))
	for i, d := range reps {
		if d <= 0 {
			return nil
		}
		out[i] = float64(d) / 1e3
	}
	return out
}

// meanBest is a row's mean and best time per call over its repetitions
// (0, 0 for none).
func meanBest(reps []float64) (mean, best float64) {
	for i, r := range reps {
		mean += r / float64(len(reps))
		if i == 0 || r < best {
			best = r
		}
	}
	return mean, best
}

// runSize runs one size out of place and then in place (alltoall's GIN
// kernel: out of place only); every rank's results go to every rank,
// which builds the row.
func (j *gpuJob) runSize(size int64) (gpuRow, error) {
	row, err := j.runPlace(size, false)
	if err != nil || j.o.coll == model.CollAlltoAll || !j.o.nt.inPlace {
		return row, err
	}
	ip, err := j.runPlace(size, true)
	if err != nil {
		return row, err
	}
	row.inPlace = &ip
	return row, nil
}

// runPlace runs one placement of one size: ours (check, then timing),
// then NCCL's. In place, the output buffer is the one buffer: the input
// sits at the rank's offset of an AllGather's output, the output at the
// rank's offset of a ReduceScatter's input (nccl-tests' layout), and
// alltoall and sendrecv are not checked (nccl-tests does not either).
func (j *gpuJob) runPlace(size int64, inPlace bool) (gpuRow, error) {
	o := j.o
	es := int64(o.dt.Size())
	count, send, recv, sendOff, recvOff := ntCounts(o.coll, size, es, j.n)
	row := gpuRow{Row: gpurecord.Row{Op: o.coll.String(), Count: count, Dtype: o.dt.String(), RedOp: o.rop.String(), Bytes: max(send, recv) * es,
		Checked: o.check > 0 && !(inPlace && o.coll.IsP2P())}}
	if rooted(o.coll) {
		row.Root = o.root
	}
	var ours, theirs timing
	if o.coll == model.CollAlltoAll {
		var chunks int
		var err error
		if ours, theirs, chunks, err = j.runAllToAll(size, count); err != nil {
			return row, err
		}
		row.Algo, row.Proto, row.NChannels = "GIN", "P2P", chunks
		return j.gatherRow(row, ours, theirs, size)
	}
	algo, proto, nch, err := j.choose(count)
	if err != nil {
		return row, fmt.Errorf("%d bytes: %w", size, err)
	}
	var p *model.Program
	if o.coll == model.CollSendRecv {
		p, err = model.GenerateP2PProgram(j.res.Plan, sendRecvTasks(j.n, count), proto, o.dt, model.P2POptions{})
	} else {
		p, err = model.GenerateProgram(j.res.Plan, o.coll, algo, proto, count, o.dt, o.rop, model.ProgOptions{NChannels: nch, Root: o.root, InPlace: inPlace})
	}
	if err != nil {
		return row, fmt.Errorf("rank %d: %d bytes: %w", j.rank, size, err)
	}
	row.Algo, row.Proto, row.NChannels = algo.String(), proto.String(), p.NChannels
	if o.coll.IsP2P() {
		row.NChannels = usedChannels(p)
	}
	inB, outB := uint64(p.InCount*es), uint64(p.OutCount*es)
	in, out := j.in, j.out
	need := max(inB, outB)
	if inPlace {
		inOff, outOff := uint64(sendOff*int64(j.rank)*es), uint64(recvOff*int64(j.rank)*es)
		in, out = j.out.Add(inOff), j.out.Add(outOff)
		need = max(inOff+inB, outOff+outB)
	}
	if need > j.bufBytes {
		return row, fmt.Errorf("rank %d: %d bytes: the Program needs %d/%d bytes of buffers, %d allocated", j.rank, size, inB, outB, j.bufBytes)
	}
	if ours, err = j.runOurs(p, size, in, out, inB, outB, inPlace, row.Checked); err != nil {
		return row, err
	}
	if j.nc != nil {
		j.faultPoint(size, "nccl")
		if theirs, err = j.runNCCL(p, size, in, out, inB, outB, row.Checked); err != nil {
			return row, err
		}
	}
	return j.gatherRow(row, ours, theirs, size)
}

// gatherRow completes row with every rank's timings: each repetition's
// slowest rank (and the ranks combined as -a says, for the table), their
// mean and best, the sum of the wrong elements and the ranks with some,
// bandwidths and the ratio.
func (j *gpuJob) gatherRow(row gpuRow, ours, theirs timing, size int64) (gpuRow, error) {
	o := j.o
	// Gather the repetitions and wrong elements of ours and NCCL's:
	// v[0:gpuReps] and v[gpuReps] ours, then NCCL's the same way.
	const per = gpuReps + 1
	var b [2 * per * 8]byte
	for k, t := range []timing{ours, theirs} {
		for i, d := range t.reps {
			binary.LittleEndian.PutUint64(b[8*(k*per+i):], uint64(d))
		}
		binary.LittleEndian.PutUint64(b[8*(k*per+gpuReps):], uint64(t.wrong))
	}
	all, err := j.comm.AllGather(b[:])
	if err != nil {
		return row, fmt.Errorf("rank %d: gather the times of %d bytes: %w", j.rank, size, err)
	}
	var v [2 * per]int64
	ranks := make([][2 * per]int64, len(all))
	for r, x := range all {
		if len(x) != len(b) {
			return row, fmt.Errorf("rank %d: a result of %d bytes from a peer", j.rank, len(x))
		}
		for i := range v {
			y := int64(binary.LittleEndian.Uint64(x[8*i:]))
			ranks[r][i] = y
			if i%per == gpuReps {
				v[i] += y
			} else {
				v[i] = max(v[i], y) // each repetition's slowest rank
			}
		}
		if ranks[r][gpuReps] > 0 {
			row.badRanks++
		}
	}
	// table is the repetitions of ours (k 0) or NCCL's (k 1), each's ranks
	// combined as -a says (nil when none ran).
	table := func(k int) []float64 {
		out := make([]float64, gpuReps)
		ts := make([]float64, len(ranks))
		for i := range out {
			for r := range ranks {
				ts[r] = float64(ranks[r][k*per+i]) / 1e3
			}
			if out[i] = rankTime(o.nt.average, ts); out[i] <= 0 {
				return nil
			}
		}
		return out
	}
	row.RepsUs = repsUs(v[:gpuReps])
	row.tableReps = table(0)
	row.Wrong = v[gpuReps]
	if j.nc != nil {
		row.NCCLRepsUs = repsUs(v[per : per+gpuReps])
		row.tableNCCL = table(1)
		row.NCCLWrong = v[per+gpuReps]
		if row.NCCLWrong > 0 && j.rank == 0 {
			fmt.Fprintf(j.e.stderr, "run gpu: warning: NCCL's result has %d wrong elements at %d bytes\n", row.NCCLWrong, row.Bytes)
		}
	}
	row.derive(busFactor(o.coll, j.n), j.nc != nil)
	return row, nil
}

// addPass adds the repetitions and wrong elements of another pass's row
// of the same size (--passes), its in-place half's to the in-place half;
// derive then recomputes the times.
func (r *gpuRow) addPass(next gpuRow) {
	r.RepsUs = append(r.RepsUs, next.RepsUs...)
	r.NCCLRepsUs = append(r.NCCLRepsUs, next.NCCLRepsUs...)
	r.tableReps = append(r.tableReps, next.tableReps...)
	r.tableNCCL = append(r.tableNCCL, next.tableNCCL...)
	r.Wrong += next.Wrong
	r.NCCLWrong += next.NCCLWrong
	r.badRanks += next.badRanks
	if r.inPlace != nil && next.inPlace != nil {
		r.inPlace.addPass(*next.inPlace)
	}
}

// derive sets a row's mean and best time, bandwidths (bus: nccl-tests'
// factor of the collective) and, with NCCL's column (baseline), the ratio
// from its repetitions, and its in-place half's.
func (r *gpuRow) derive(bus float64, baseline bool) {
	if r.inPlace != nil {
		r.inPlace.derive(bus, baseline)
	}
	r.TimeUs, r.BestUs = meanBest(r.RepsUs)
	r.AlgBW, r.BusBW = 0, 0
	if r.TimeUs > 0 {
		r.AlgBW = float64(r.Bytes) / r.TimeUs / 1e3
		r.BusBW = r.AlgBW * bus
	}
	if !baseline {
		return
	}
	r.NCCLTime, r.NCCLBest = meanBest(r.NCCLRepsUs)
	r.NCCLAlgBW, r.NCCLBusBW, r.Ratio = 0, 0, 0
	if r.NCCLTime > 0 {
		r.NCCLAlgBW = float64(r.Bytes) / r.NCCLTime / 1e3
		r.NCCLBusBW = r.NCCLAlgBW * bus
	}
	if r.TimeUs > 0 {
		r.Ratio = r.NCCLTime / r.TimeUs
	}
}

// fillInput poisons the output buffer (outB bytes at out) and writes this
// rank's check pattern (computing it first when compute is set) into the
// input (inB bytes at in), in that order: in place the input lies inside
// the output.
func (j *gpuJob) fillInput(in, out cuda.DevicePtr, inB, outB uint64, compute bool) error {
	if uint64(len(j.hostIn)) < inB {
		j.hostIn = make([]byte, inB)
		compute = true
	}
	if compute {
		fill(j.hostIn[:inB], j.o.dt, j.o.rop, j.rank, 0)
	}
	if outB > 0 {
		if err := j.ctx.MemsetD8(out, 0xa5, outB); err != nil {
			return fmt.Errorf("rank %d: clear the output: %w", j.rank, err)
		}
	}
	if inB > 0 {
		if err := j.ctx.MemcpyHtoD(in, j.hostIn[:inB]); err != nil {
			return fmt.Errorf("rank %d: copy the input: %w", j.rank, err)
		}
	}
	// The memset and a pageable copy may still run on the device when
	// they return, on the legacy stream, which our non-blocking streams do
	// not wait for: a one-rank call's device copy (no kernel launch delay)
	// was seen to finish before the memset did, which then overwrote part
	// of its output (H100, AllGather 2 MiB, 6,400 elements).
	if err := j.ctx.Synchronize(); err != nil {
		return fmt.Errorf("rank %d: prepare the buffers: %w", j.rank, err)
	}
	return nil
}

// countWrong copies the output back and counts elements that differ from
// the exact result.
func (j *gpuJob) countWrong(p *model.Program, out cuda.DevicePtr, outB uint64) (int64, error) {
	if uint64(len(j.hostOut)) < outB {
		j.hostOut = make([]byte, outB)
	}
	host := j.hostOut[:outB]
	if outB > 0 {
		if err := j.ctx.MemcpyDtoH(host, out); err != nil {
			return 0, fmt.Errorf("rank %d: copy the output back: %w", j.rank, err)
		}
	}
	return check(p, host, j.rank, j.n, j.o.root, j.o.dt, j.o.rop, int64(j.o.dt.Size())), nil
}

// runOurs checks (-c N: up to N times, until one finds a wrong element)
// and times the Program on this rank, over in and out.
func (j *gpuJob) runOurs(p *model.Program, size int64, in, out cuda.DevicePtr, inB, outB uint64, inPlace, checked bool) (timing, error) {
	var t timing
	l, err := j.dev.Prepare(p, false)
	if err != nil {
		return t, fmt.Errorf("%d bytes: %w", size, err)
	}
	defer l.Release()
	j.faultPoint(size, "ours")
	s := j.dev.Stream()
	for c := 0; c < j.o.check && t.wrong == 0; c++ {
		if err := j.fillInput(in, out, inB, outB, c == 0); err != nil {
			return t, err
		}
		if err := l.Run(in, out); err != nil {
			return t, fmt.Errorf("%d bytes: %w", size, err)
		}
		if checked {
			if t.wrong, err = j.countWrong(p, out, outB); err != nil {
				return t, err
			}
		}
	}
	enqueue := func() error { return l.Enqueue(s, in, out) }
	status := func() error { return l.Check() }
	t.reps, err = j.timeLoop(s, j.o.itersFor(size), enqueue, status, l.Notify)
	if err != nil {
		return t, fmt.Errorf("%d bytes: %w", size, err)
	}
	if j.sink != nil && j.pass == 0 && !inPlace {
		if err := j.traceOnce(p, size); err != nil {
			return t, err
		}
	}
	return t, nil
}

// traceOnce runs p once more with per-slice stamps and adds its call and
// event rows to the trace.
func (j *gpuJob) traceOnce(p *model.Program, size int64) error {
	l, err := j.dev.Prepare(p, true)
	if err != nil {
		return fmt.Errorf("%d bytes: %w", size, err)
	}
	defer l.Release()
	if err := j.comm.Barrier(); err != nil {
		return fmt.Errorf("rank %d: %w", j.rank, err)
	}
	enqueue := time.Now().UnixNano()
	if err := l.Run(j.in, j.out); err != nil {
		return fmt.Errorf("%d bytes (traced): %w", size, err)
	}
	call := j.sink.next
	j.sink.next++
	events, err := l.EventRows(j.sink.comm, call)
	if err != nil {
		return err
	}
	var start, end int64
	for i, ev := range events {
		if i == 0 || ev.StartNs < start {
			start = ev.StartNs
		}
		end = max(end, ev.EndNs)
	}
	j.sink.calls = append(j.sink.calls, j.sink.callRow(p, j.rank, p.Count, j.o.root, call, enqueue, start, end))
	j.sink.events = append(j.sink.events, events...)
	return nil
}

// runNCCL checks (with -c 1 or more, once) and times the same collective
// through libnccl, over in and out (one buffer in place, as nccl-tests
// calls NCCL).
func (j *gpuJob) runNCCL(p *model.Program, size int64, in, out cuda.DevicePtr, inB, outB uint64, checked bool) (timing, error) {
	var t timing
	count := uint64(p.Count)
	dt, op := nccl.DataType(j.o.dt), nccl.RedOp(j.o.rop)
	s := j.ncs
	enqueue := func() error {
		switch j.o.coll {
		case model.CollAllReduce:
			return j.nc.AllReduce(in, out, count, dt, op, s)
		case model.CollAllGather:
			return j.nc.AllGather(in, out, count, dt, s)
		case model.CollReduceScatter:
			return j.nc.ReduceScatter(in, out, count, dt, op, s)
		case model.CollBroadcast:
			return j.nc.Broadcast(in, out, count, dt, j.o.root, s)
		case model.CollReduce:
			return j.nc.Reduce(in, out, count, dt, op, j.o.root, s)
		case model.CollSendRecv:
			return j.lib.Group(func() error {
				if err := j.nc.Send(in, count, dt, (j.rank+1)%j.n, s); err != nil {
					return err
				}
				return j.nc.Recv(out, count, dt, (j.rank+j.n-1)%j.n, s)
			})
		}
		return fmt.Errorf("nccl: %s is not supported", j.o.coll)
	}
	status := func() error { return j.nc.AsyncError() }
	if j.o.check > 0 {
		if err := j.fillInput(in, out, inB, outB, false); err != nil {
			return t, err
		}
		if err := enqueue(); err != nil {
			return t, fmt.Errorf("NCCL, %d bytes: %w", size, err)
		}
		if err := s.Synchronize(); err != nil {
			return t, fmt.Errorf("NCCL, %d bytes: %w", size, err)
		}
		if checked {
			var err error
			if t.wrong, err = j.countWrong(p, out, outB); err != nil {
				return t, err
			}
		}
	}
	var err error
	t.reps, err = j.timeLoop(s, j.o.itersFor(size), enqueue, status, nil)
	if err != nil {
		return t, fmt.Errorf("NCCL, %d bytes: %w", size, err)
	}
	return t, nil
}

// timeLoop times gpuReps loops of iters calls made by enqueue on s, as
// nccl-tests does: after -w eager warm-up calls, either one CUDA graph
// capturing the loop launched once untimed and then gpuReps times
// (-G 1), or gpuReps eager loops (-G 0). Every repetition starts after a
// barrier and one untimed aligning call, and is timed with events on s.
// status reports a failed call; launched, when not nil, is called after
// each graph launch (a launch that Enqueue did not make: see
// gpudev.Launch.Notify).
func (j *gpuJob) timeLoop(s *cuda.Stream, iters int, enqueue, status func() error, launched func()) (reps [gpuReps]time.Duration, err error) {
	wait := func(what string) error {
		if err := s.Synchronize(); err != nil {
			return fmt.Errorf("rank %d: %s: %w", j.rank, what, err)
		}
		if err := status(); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	for i := 0; i < j.o.warmup; i++ {
		if err := enqueue(); err != nil {
			return reps, err
		}
	}
	if err := wait("warm-up"); err != nil {
		return reps, err
	}
	iters = max(iters, 1)
	var gx *cuda.GraphExec
	launchGraph := func() error {
		if err := gx.Launch(s); err != nil {
			return fmt.Errorf("rank %d: graph launch: %w", j.rank, err)
		}
		if launched != nil {
			launched()
		}
		return nil
	}
	if j.o.graph == 1 {
		if gx, err = j.capture(s, iters, enqueue); err != nil {
			return reps, err
		}
		defer gx.Destroy()
		if err := launchGraph(); err != nil {
			return reps, err
		}
		if err := wait("graph warm-up"); err != nil {
			return reps, err
		}
	}
	for rep := range reps {
		if err := j.comm.Barrier(); err != nil {
			return reps, fmt.Errorf("rank %d: barrier: %w", j.rank, err)
		}
		// One untimed call lines the GPUs up: the host barrier leaves the
		// ranks tens of microseconds apart, which the first timed call
		// would otherwise absorb.
		if err := enqueue(); err != nil {
			return reps, err
		}
		if err := j.t0.Record(s); err != nil {
			return reps, err
		}
		if gx != nil {
			if err := launchGraph(); err != nil {
				return reps, err
			}
		} else {
			for i := 0; i < iters; i++ {
				if err := enqueue(); err != nil {
					return reps, err
				}
			}
		}
		if err := j.t1.Record(s); err != nil {
			return reps, err
		}
		if err := wait(fmt.Sprintf("repetition %d", rep)); err != nil {
			return reps, err
		}
		el, err := cuda.ElapsedTime(j.t0, j.t1)
		if err != nil {
			return reps, fmt.Errorf("rank %d: %w", j.rank, err)
		}
		reps[rep] = el / time.Duration(iters)
	}
	return reps, nil
}

// capture records iters calls of enqueue on s into an executable CUDA
// graph. A capture must begin and end on one OS thread.
func (j *gpuJob) capture(s *cuda.Stream, iters int, enqueue func() error) (*cuda.GraphExec, error) {
	unlock, err := j.ctx.LockThread()
	if err != nil {
		return nil, fmt.Errorf("rank %d: %w", j.rank, err)
	}
	defer unlock()
	if err := s.BeginCapture(cuda.CaptureModeThreadLocal); err != nil {
		return nil, fmt.Errorf("rank %d: begin graph capture: %w", j.rank, err)
	}
	for i := 0; i < iters; i++ {
		if err := enqueue(); err != nil {
			if g, gerr := s.EndCapture(); gerr == nil {
				g.Destroy()
			}
			return nil, fmt.Errorf("rank %d: capture: %w", j.rank, err)
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return nil, fmt.Errorf("rank %d: end graph capture: %w", j.rank, err)
	}
	defer g.Destroy()
	x, err := g.Instantiate(0)
	if err != nil {
		return nil, fmt.Errorf("rank %d: instantiate graph: %w", j.rank, err)
	}
	return x, nil
}

// envFault makes a rank die for the lost-peer tests: "RANK:BYTES:PHASE"
// makes that rank exit at once, without goodbyes, at that size: with
// PHASE ours after preparing our launch (the peers are then waiting in
// our kernel), with PHASE nccl before NCCL's calls (the peers then wait
// in NCCL's kernel, which only the watchdog ends).
const envFault = "TWINCCL_GPU_TEST_EXIT"

func (j *gpuJob) faultPoint(size int64, phase string) {
	if os.Getenv(envFault) == fmt.Sprintf("%d:%d:%s", j.rank, size, phase) {
		fmt.Fprintf(j.e.stderr, "run gpu: rank %d: exiting at %d bytes (%s) as %s says\n", j.rank, size, phase, envFault)
		os.Exit(7)
	}
}
