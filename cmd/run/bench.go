package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/refexec"
	"github.com/twinccl/twinccl/search"
)

// Environment of ranks started by the local launcher.
const (
	envUID    = "TWINCCL_BENCH_UID"
	envRank   = "TWINCCL_BENCH_RANK"
	envNRanks = "TWINCCL_BENCH_NRANKS"
)

// benchOpts are the flags of run bench: nccl-tests' and twinccl's shared
// ones (ntOpts) and the host device's own.
type benchOpts struct {
	ntOpts
	net      string
	baseline bool
}

// benchHelp is the help text of the bench form of run.
const benchHelp = `Usage: run [-np N] [PROGRAM] [flags]      (also: run bench ..., or a link named PROGRAM)
       run [PROGRAM] [flags]               (one rank of a Slurm, Open MPI or torchrun job)

Runs an nccl-tests sweep of one collective on the host device and prints
nccl-tests' table: ranks are processes, ranks of a host talk through
shared memory, ranks of different hosts through the net plugin of --net,
TCP sockets by default (TWINCCL_HOSTID=split:K makes every K consecutive
ranks a host of their own, to exercise the net transport on one machine).
No GPU is needed.

PROGRAM is an nccl-tests program name, which picks the collective as the
binary's name does in nccl-tests: all_reduce_perf, all_gather_perf,
reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf,
sendrecv_perf. A symbolic link to this binary named like one of them
(ln -s run all_reduce_perf) runs it the same way. --op or --coll name the
collective too (allreduce ... sendrecv). --gpu runs the same sweep on GPUs
instead (as "run gpu PROGRAM [flags]" does: see run gpu -h).

The table is nccl-tests': a header, one row per size with the out-of-place
columns (separate input and output buffers) and the in-place ones (one
buffer, the input at the rank's offset as nccl-tests places it: time,
algbw, busbw and #wrong each), and the footer "Out of bounds values" and
"Avg bus bandwidth". nccl-tests' datatype and reduction names, root -1 for
collectives without a root, #wrong N/A where not checked (-c 0, and
in-place alltoall and sendrecv, as in nccl-tests). --twinccl-columns adds
the algorithm, protocol and channel count each size ran with. A wrong
element makes the exit status 1 after the table.

Without --algo/--proto the tuner chooses them per size, as NCCL would: the
job's ranks are described to the search (package search) as PCIe GPUs
without NVLink, one CPU per host and a 10 Gb/s NIC per host, and
search.Run's plan and tuning table pick the pair; --algo and --proto
override it (the plan stays the searched one). alltoall and sendrecv run
on NCCL's p2p schedule (model.GenerateAlltoAllProgram, GenerateP2PProgram)
with NCCL's per-transfer protocol: LL up to the p2p LL threshold within a
host, else Simple; sendrecv sends SIZE from every rank to the next and
receives SIZE from the previous one, as sendrecv_perf does.

Every flag is checked before any rank starts: a bad one is one message
naming it and exit status 2. -np is bounded by 8 ranks per CPU and a
quarter of the open-files limit. A failed run exits 1 with one line
naming the rank that failed first (-v: every rank's error).

--trace OUT.parquet writes the call trace (one row per out-of-place call
per rank) to OUT.parquet and the event trace (one row per executed slice,
with start and end times) to OUT.events.parquet. Ranks launched here
write their parts to a temporary directory and the launcher merges them
into those two files; ranks of a Slurm, Open MPI or torchrun job each
write OUT.rankR.parquet and OUT.rankR.events.parquet. Files appear whole
or not at all: nothing is written when the run fails.

--net chooses the net plugin that carries the connections between ranks
of different hosts (with TWINCCL_HOSTID=split:K on one machine, or
TWINCCL_TRANSPORT=net for every pair): socket (TCP, the default) or ib
(NCCL's IB plugin: queue pairs, RDMA writes with immediate, a FIFO of
posted receive buffers). socket works as NCCL's socket plugin does by
default: one socket per connection, moved by the rank's proxy thread
itself, each message's header and payload sent with one system call
(TWINCCL_SOCKET_GATHER=0: a call each, as before 2026-11-26; NCCL joins
only payloads of up to 128 bytes); NCCL_SOCKET_NTHREADS=N and
NCCL_NSOCKS_PERTHREAD=M (or their TWINCCL_ names) give each connection N
helper threads and N×M sockets, which can carry large messages faster at
some cost in latency. ib runs
over libibverbs when it finds an RDMA device with an active port; on a
machine without one it runs over the software verbs provider (TCP
underneath: it exercises the IB plugin's protocol, not RDMA hardware) and
each rank says so in a log line.
TWINCCL_IB_PROVIDER=rdma or soft forces the provider (rdma fails when
there is no device). NCCL_IB_HCA, NCCL_IB_QPS_PER_CONNECTION,
NCCL_IB_GID_INDEX, NCCL_IB_ADDR_FAMILY, NCCL_IB_ADDR_RANGE and
NCCL_IB_ROCE_VERSION_NUM (or their TWINCCL_ names) apply as in NCCL:
without a GID index, RoCE ports use the GID of the address family
(IPv4-mapped by default) and RoCE version (2 by default), IB ports index 0
(or NCCL_IB_ROUTABLE_FLID_GID_INDEX where that GID has a routable FLID).
NCCL_IB_TC, NCCL_IB_SL (the sender's, which the receiver adopts),
NCCL_IB_TIMEOUT, NCCL_IB_RETRY_CNT, NCCL_IB_ADAPTIVE_ROUTING,
NCCL_IB_AR_THRESHOLD, NCCL_IB_ECE_ENABLE, NCCL_IB_PCI_RELAXED_ORDERING,
NCCL_IB_SPLIT_DATA_ON_QPS and NCCL_GDR_FLUSH_DISABLE reach the queue
pairs, registrations and data path as in NCCL (the software provider
records them); a value out of its verbs field's range is refused before
any rank starts.

Every connection of a job proves a per-job secret. Ranks started here get
it from the launcher; ranks of a Slurm, Open MPI or torchrun job read it
from TWINCCL_SECRET_FILE (a path every rank can read: rank 0 creates the
file, mode 0600, when it does not exist; the others wait for it) or from
TWINCCL_SECRET (64 hex digits), and refuse to start without one (see
docs/guide/security.md). Ranks exchange heartbeats: one that stops
answering for TWINCCL_HEARTBEAT_TIMEOUT (10s by default) is named by
every other rank, and the launcher kills it.

Examples:
  run -np 2 all_reduce_perf -b 8 -e 1M -f 4
  run -np 4 --op sendrecv -b 8 -e 64K -f 8
  run -g 4 all_gather_perf -b 1K -e 16M -f 2 -d half
  TWINCCL_HOSTID=split:2 run -np 4 --net ib -b 8 -e 8M -f 32
`

// benchGroups are run bench's options for registration and help.
func benchGroups(o *benchOpts) []optGroup {
	g := o.ntGroups("host")
	tw := o.twincclGroup("host")
	tw.opts = append(tw.opts,
		optSpec{[]string{"net"}, "socket|ib", "Net plugin between ranks of different hosts: socket (default) or ib (see above).", strVal{&o.net}},
		optSpec{[]string{"baseline"}, "", "Measure memcpy and raw TCP loopback bandwidth, then 64 MiB AllReduce over shm and over sockets, and print busbw/memcpy and busbw/TCP (-np ranks, 4 by default).", boolVal{&o.baseline}},
		optSpec{[]string{"gpu"}, "", "Run the sweep on GPUs instead: the same as run gpu with the other flags.", boolVal{new(bool)}},
	)
	return append(g, tw)
}

// parseBenchArgs reads and checks run bench's flags.
func parseBenchArgs(e *env, args []string) (benchOpts, error) {
	var o benchOpts
	o.defaults()
	o.net = "socket"
	o.usageHint = "run -h"
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	groups := benchGroups(&o)
	register(fs, groups)
	if err := o.parseArgs(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, benchHelp)
			printOpts(e.stdout, groups)
			return o, err
		}
		var ue *usageError
		if errors.As(err, &ue) {
			return o, err
		}
		return o, &usageError{err.Error() + " (see run -h)"}
	}
	if o.version {
		printVersion(e.stdout)
		return o, flag.ErrHelp
	}
	if err := o.validate(); err != nil {
		return o, err
	}
	switch {
	case o.iters < 1:
		return o, &usageError{fmt.Sprintf("-n %d: the host device times at least one iteration", o.iters)}
	case o.trace != "" && o.baseline:
		return o, &usageError{"--trace and --baseline do not go together"}
	}
	if err := checkNetFlag(o.net); err != nil {
		return o, err
	}
	return o, nil
}

// checkNetFlag checks --net and, for ib, the variables its plugin reads
// (run bench and run gpu alike), before any rank starts.
func checkNetFlag(name string) error {
	switch name {
	case "socket":
	case "ib":
		if _, err := ib.ParseProviderChoice(os.Getenv(ib.ProviderEnv)); err != nil {
			return &usageError{err.Error()}
		}
		if _, err := ib.OptionsFromEnv(nil); err != nil {
			return &usageError{err.Error()}
		}
	default:
		return &usageError{fmt.Sprintf("--net %q: want socket or ib", name)}
	}
	return nil
}

// runBench is `run bench` and the bare form of run: an nccl-tests sweep
// on the host device.
func runBench(e *env, args []string) error {
	o, err := parseBenchArgs(e, args)
	if err != nil {
		return err
	}
	if os.Getenv(envUID) != "" {
		return benchRank(e, o) // a rank of the local launcher
	}
	if err := checkRDMAForced(o.net); err != nil {
		return err
	}
	if o.baseline {
		if o.np > 0 {
			if err := checkHostRanks(o.np); err != nil {
				return err
			}
		}
		_, err := runBaseline(e, o)
		return err
	}
	np, err := o.ranksToLaunch()
	if err != nil {
		return err
	}
	if np == 0 {
		return benchRank(e, o) // a rank of a Slurm, Open MPI or torchrun job
	}
	if err := checkHostRanks(np); err != nil {
		return err
	}
	if err := o.checkRanks(np); err != nil {
		return err
	}
	return launchRanks(e, "bench", np, o.timeout, o.trace, o.progress, args)
}

// checkHostRanks refuses more ranks than the host device takes here.
func checkHostRanks(np int) error {
	if limit, why := hostRankLimit(); np > limit {
		return &usageError{fmt.Sprintf("-np %d: this machine takes at most %d ranks of the host device (%s)", np, limit, why)}
	}
	return nil
}

// checkRDMAForced fails once, in the launcher rather than in every rank,
// when --net ib is given with the provider forced to rdma on a machine
// without an RDMA device.
func checkRDMAForced(net string) error {
	if net != "ib" {
		return nil
	}
	if c, _ := ib.ParseProviderChoice(os.Getenv(ib.ProviderEnv)); c == ib.ProviderRDMA {
		devs, err := ib.RDMADevices(ib.HCAFromEnv())
		if err == nil && len(devs) == 0 {
			err = errors.New("libibverbs finds no RDMA device with an active port")
		}
		if err != nil {
			return fmt.Errorf("--net ib with %s=rdma: %w", ib.ProviderEnv, err)
		}
	}
	return nil
}

// netPlugin is the net plugin of --net for a rank listening on host ("":
// the address bootstrap.ListenAddr picks), its name for the table
// header, and what releases it after the rank closed.
func netPlugin(e *env, name, host string, secret auth.Secret) (transport.Plugin, string, func(), error) {
	nop := func() {}
	if name != "ib" {
		return transport.NewSocket(transport.SocketOptionsFromEnv()), "Socket", nop, nil
	}
	if host == "" {
		var err error
		if host, err = bootstrap.ListenAddr(""); err != nil {
			return nil, "", nop, err
		}
	}
	pv, note, err := ib.OpenProvider(os.Getenv(ib.ProviderEnv), host, ib.HCAFromEnv(), secret)
	if err != nil {
		return nil, "", nop, err
	}
	release := nop
	if c, ok := pv.(io.Closer); ok {
		release = func() { c.Close() }
	}
	opt, err := ib.OptionsFromEnv(pv)
	if err != nil {
		release()
		return nil, "", nop, err
	}
	e.log.Info("net plugin IB", "provider", pv.Name(), "why", note)
	return ib.New(opt), "IB/" + pv.Name(), release, nil
}

// jobEnv reads the rank, size and root address of a job started by Slurm,
// Open MPI or torchrun (TWINCCL_COMM_ID or MASTER_ADDR:MASTER_PORT is the
// root's address; rank 0 serves it). The id of such a job has no secret
// yet: jobSecret adds it. The local launcher's ranks get the whole id.
func jobEnv() (rank, n int, id bootstrap.UniqueID, ok bool, err error) {
	pairs := [][2]string{{envRank, envNRanks}, {"SLURM_PROCID", "SLURM_NTASKS"}, {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, {"RANK", "WORLD_SIZE"}}
	for _, p := range pairs {
		rs, ns := os.Getenv(p[0]), os.Getenv(p[1])
		if rs == "" || ns == "" {
			continue
		}
		if rank, err = strconv.Atoi(rs); err == nil {
			n, err = strconv.Atoi(ns)
		}
		if err != nil {
			return 0, 0, id, false, fmt.Errorf("%s/%s: %w", p[0], p[1], err)
		}
		if u := os.Getenv(envUID); u != "" {
			id, err = bootstrap.ParseUniqueID(u)
			return rank, n, id, true, err
		}
		addr := os.Getenv("TWINCCL_COMM_ID")
		if addr == "" && os.Getenv("MASTER_ADDR") != "" {
			addr = net.JoinHostPort(os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT"))
		}
		if addr == "" {
			return 0, 0, id, false, fmt.Errorf("job of %d ranks from %s: set TWINCCL_COMM_ID or MASTER_ADDR/MASTER_PORT", n, p[1])
		}
		return rank, n, bootstrap.UniqueID{Addr: addr}, true, nil
	}
	return 0, 0, id, false, nil
}

// benchRank is one rank of the sweep.
func benchRank(e *env, o benchOpts) error {
	rank, n, id, ok, err := jobEnv()
	if err != nil {
		return err
	}
	if !ok {
		return &usageError{"no job: give -np N, or run under Slurm, Open MPI or torchrun"}
	}
	if err := o.checkRanks(n); err != nil {
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
			return err
		}
		defer root.Close()
	}
	host := ""
	if ifn := os.Getenv("TWINCCL_SOCKET_IFNAME"); ifn != "" {
		if host, err = bootstrap.ListenAddr(ifn); err != nil {
			return err
		}
	} else if os.Getenv(envUID) != "" {
		host = "127.0.0.1"
	}
	plugin, netName, releaseNet, err := netPlugin(e, o.net, host, id.Secret)
	if err != nil {
		return fmt.Errorf("rank %d: --net %s: %w", rank, o.net, err)
	}
	defer releaseNet()
	r, err := hostdev.Join(hostdev.RankConfig{Boot: bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: host, Timeout: o.timeout},
		HostID: transport.HostID(rank), ForceNet: os.Getenv("TWINCCL_TRANSPORT") == "net", Net: plugin, Log: e.log})
	if err != nil {
		return err
	}
	var sink *traceSink
	if o.trace != "" {
		sink = &traceSink{job: "run " + o.programName(), comm: id.Magic, host: r.Hosts[rank]}
	}
	dev := newHostBench(r, sink != nil)
	b := &bencher{e: e, o: o, comm: r.Comm, dev: dev, sink: sink, net: netName}
	if rank == 0 {
		b.prog = newSweepProgress(e.stderr, o.progress)
	}
	runErr := b.setup(r.Hosts)
	if runErr == nil {
		runErr = b.sweep()
	}
	dev.Close()
	if runErr == nil && sink != nil {
		runErr = b.writeTrace(rank)
	}
	if runErr != nil {
		r.Abort()
		return runErr
	}
	if err := r.Close(); err != nil {
		return err
	}
	if b.wrong > 0 {
		return fmt.Errorf("%d wrong elements over the sweep (see #wrong)", b.wrong)
	}
	return b.footErr
}

// bencher is one rank's sweep over a device backend.
type bencher struct {
	e       *env
	noted   bool // hwTunerChoice's note was given
	o       benchOpts
	comm    *bootstrap.Comm
	dev     benchDevice
	sink    *traceSink
	plan    *model.Plan
	tune    *search.Result // nil: no tuner (the hand-built plan)
	net     string         // the net plugin's name
	table   *ntTable       // rank 0's
	prog    *sweepProgress // rank 0's; nil without progress
	wrong   int64          // wrong elements over the sweep, every rank's
	footErr error          // rank 0's: the footer's check (NCCL_TESTS_MIN_BW)
	hosts   []string
}

// setup makes the job's plan: the search's on the CPU topology of the
// ranks (see cpuTopology), or, when the hosts cannot be described (ranks
// of a host not consecutive), the conformance suite's hand-built plan
// with flags or defaults for the algorithm and protocol. Rank 0 then
// prints the table's header.
func (b *bencher) setup(hosts []string) error {
	n := b.comm.NRanks()
	res, err := tunedPlan(hosts)
	if err != nil {
		b.e.log.Warn("no searched plan; using a ring 0..n-1 with NCCL's trees", "err", err)
		nch := b.o.channels
		if nch == 0 {
			nch = 2
		}
		b.plan = model.SyntheticPlan(n, nch, false)
	} else {
		b.plan, b.tune = res.Plan, res
	}
	// Every rank's process and host, for the device lines.
	me := fmt.Sprintf("%d %s", os.Getpid(), shortHost())
	all, err := b.comm.AllGather([]byte(me))
	if err != nil {
		return fmt.Errorf("rank %d: %w", b.comm.Rank(), err)
	}
	if b.comm.Rank() != 0 {
		return nil
	}
	var devs []ntDevice
	local := map[string]int{}
	for r, m := range all {
		var pid int
		var h string
		fmt.Sscanf(string(m), "%d %s", &pid, &h)
		devs = append(devs, ntDevice{rank: r, pid: pid, host: h, dev: local[hosts[r]], name: "twinccl host device (CPU process)"})
		local[hosts[r]]++
	}
	src := "NCCL's tuner (search on the ranks' CPU topology)"
	switch {
	case b.tune == nil:
		src = "flags (no searched plan: ring 0..n-1)"
	case b.o.algoSet || b.o.protoSet:
		src = "the flags where given, else the tuner"
	}
	if b.o.collV.IsP2P() {
		src = "NCCL's p2p schedule, its protocol per transfer"
		if b.o.protoSet {
			src = "NCCL's p2p schedule, --proto " + b.o.proto
		}
	}
	hostCount := len(local)
	notes := []string{
		fmt.Sprintf("twinccl: host device, %d ranks (processes) on %d host(s), net %s, algorithm/protocol from %s", n, hostCount, b.net, src),
		fmt.Sprintf("twinccl: time = %s (-a %d)", averageName(b.o.average), b.o.average),
	}
	if !b.o.inPlace {
		notes = append(notes, "twinccl: --inplace=false: the in-place half did not run; its columns are N/A")
	}
	if b.o.graph > 0 {
		notes = append(notes, fmt.Sprintf("twinccl: -G %d has no effect on the host device (no CUDA graphs)", b.o.graph))
	}
	b.table = &ntTable{w: b.prog.writer(b.e.stdout), prog: b.o.programName(), columns: b.o.columns}
	b.table.header(&b.o.ntOpts, notes, devs)
	return nil
}

// sweep runs every case (type, reduction, root) over every size; rank 0
// prints the rows and the footer.
func (b *bencher) sweep() error {
	n, rank := b.comm.NRanks(), b.comm.Rank()
	cases, sizes := b.o.cases(n), b.o.sizes()
	total, done := len(cases)*len(sizes), 0
	for _, cs := range cases {
		for _, size := range sizes {
			if rank == 0 {
				b.prog.step(done, total, fmt.Sprintf("%s %s, %d B", ntTypeName(cs.dt), cs.redop, size))
			}
			if err := benchFault(rank, size); err != nil {
				return err
			}
			row, err := b.size(cs, size)
			if err != nil {
				return err
			}
			done++
			if rank == 0 {
				b.table.row(row)
			}
		}
	}
	if rank == 0 {
		b.prog.finish()
		b.footErr = b.table.footer()
	}
	return nil
}

// envBenchFault makes a rank fail for the tests: "RANK:BYTES" makes that
// rank return an error when the sweep reaches that size, "RANK:BYTES:stop"
// makes it stop itself there (SIGSTOP: a hung rank, sockets open).
const envBenchFault = "TWINCCL_BENCH_TEST_FAIL"

func benchFault(rank int, size int64) error {
	v := os.Getenv(envBenchFault)
	if v == "" {
		return nil
	}
	at := fmt.Sprintf("%d:%d", rank, size)
	if v == at {
		return fmt.Errorf("rank %d: failing at %d bytes as %s says", rank, size, envBenchFault)
	}
	if v == at+":stop" {
		_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	}
	return nil
}

// choose is the algorithm, protocol and channel count of one size of
// count elements: the tuner's choice (NCCL's per-call ncclGetAlgoInfo)
// unless flags force them; a pair the Program generator cannot build
// falls back to Ring, and a protocol the algorithm does not take to
// Simple, as run gpu does. Sends and receives (alltoall, sendrecv) take
// no algorithm: their protocol is NCCL's per-transfer choice
// (model.P2PProtocol) and their channels the plan's p2p channels.
func (b *bencher) choose(dt model.Dtype, count int64) (model.Algorithm, model.Protocol, int, error) {
	o := b.o
	n := b.comm.NRanks()
	if o.collV.IsP2P() {
		_, chMax := model.P2PChannelRange(n, b.plan.P2PChannels, b.plan.P2PChannelsPerPeer)
		proto := model.P2PProtocol(count*int64(dt.Size()), chMax, b.plan.NNodes > 1, false)
		if o.protoSet {
			proto = o.protoV
		}
		return model.AlgoRing, proto, 0, nil
	}
	algo, proto, nch := model.AlgoRing, model.ProtoSimple, b.plan.NChannels
	if b.tune != nil && (!o.algoSet || !o.protoSet) {
		ch, note, err := hwTunerChoice(b.tune.Tuning, o.collV, count, dt.Size())
		if err != nil {
			return 0, 0, 0, fmt.Errorf("rank %d: tuner: %w", b.comm.Rank(), err)
		}
		if note != "" && !b.noted && !o.algoSet {
			b.noted = true
			if b.comm.Rank() == 0 {
				fmt.Fprintf(b.e.stderr, "run: %s\n", note)
			}
		}
		algo, proto, nch = ch.Algo, ch.Proto, ch.NChannels
	}
	if o.algoSet {
		algo = o.algoV
	}
	if o.protoSet {
		proto = o.protoV
	}
	if !model.ProgramCovers(o.collV, algo, proto, n) && !o.algoSet {
		algo = model.AlgoRing
	}
	if !model.CollAllowed(o.collV, algo, proto) && !o.protoSet {
		proto = model.ProtoSimple
	}
	if o.channels > 0 {
		nch = o.channels
	}
	return algo, proto, max(1, min(nch, b.plan.NChannels)), nil
}

// program generates the Program of one call.
func (b *bencher) program(cs ntCase, count int64, inPlace bool) (*model.Program, error) {
	o := b.o
	n := b.comm.NRanks()
	algo, proto, nch, err := b.choose(cs.dt, count)
	if err != nil {
		return nil, err
	}
	switch o.collV {
	case model.CollAlltoAll:
		return model.GenerateAlltoAllProgram(b.plan, proto, count, cs.dt, model.P2POptions{})
	case model.CollSendRecv:
		return model.GenerateP2PProgram(b.plan, sendRecvTasks(n, count), proto, cs.dt, model.P2POptions{})
	}
	return model.GenerateProgram(b.plan, o.collV, algo, proto, count, cs.dt, cs.rop,
		model.ProgOptions{NChannels: nch, Root: max(cs.root, 0), InPlace: inPlace})
}

// sendRecvTasks are nccl-tests' sendrecv_perf: every rank sends count
// elements to the next rank and receives as many from the previous one.
func sendRecvTasks(n int, count int64) []model.P2PTask {
	tasks := make([]model.P2PTask, 0, 2*n)
	for r := 0; r < n; r++ {
		tasks = append(tasks,
			model.P2PTask{Rank: r, Peer: (r + 1) % n, Send: true, Count: count},
			model.P2PTask{Rank: r, Peer: (r + n - 1) % n, Send: false, Count: count})
	}
	return tasks
}

// measured is one rank's measurement of one placement of one size.
type measured struct {
	perCall time.Duration
	wrong   int64
	checked bool
	p       *model.Program
}

// size runs one size, out of place and then in place, and gathers every
// rank's times and wrong elements; it returns rank 0's row.
func (b *bencher) size(cs ntCase, size int64) (ntRow, error) {
	o := b.o
	n, rank := b.comm.NRanks(), b.comm.Rank()
	es := int64(cs.dt.Size())
	param, send, recv, _, _ := ntCounts(o.collV, size, es, n)
	row := ntRow{bytes: max(send, recv) * es, count: param, typ: ntTypeName(cs.dt), redop: cs.redop, root: cs.root}
	var ms [2]measured
	for i, inPlace := range []bool{false, true} {
		if inPlace && !o.inPlace {
			break
		}
		m, err := b.measure(cs, size, inPlace)
		if err != nil {
			return row, err
		}
		ms[i] = m
	}
	var buf [32]byte
	for i, m := range ms {
		binary.LittleEndian.PutUint64(buf[16*i:], uint64(m.perCall))
		binary.LittleEndian.PutUint64(buf[16*i+8:], uint64(m.wrong))
	}
	all, err := b.comm.AllGather(buf[:])
	if err != nil {
		return row, fmt.Errorf("rank %d: %w", rank, err)
	}
	p := ms[0].p
	row.algo, row.proto, row.nch = p.Algo.String(), p.Proto.String(), p.NChannels
	if o.collV.IsP2P() {
		row.nch = usedChannels(p)
	}
	bus := busFactor(o.collV, n)
	for i := range ms {
		if ms[i].p == nil {
			continue // not run (--inplace=false)
		}
		pl := ntPlace{ran: true, checked: ms[i].checked}
		times := make([]float64, len(all))
		for r, x := range all {
			times[r] = float64(binary.LittleEndian.Uint64(x[16*i:])) / 1e3
			if w := int64(binary.LittleEndian.Uint64(x[16*i+8:])); w > 0 {
				pl.wrong += w
				pl.badRank++
			}
		}
		pl.timeUs = rankTime(o.average, times)
		if pl.timeUs > 0 {
			pl.algbw = float64(row.bytes) / pl.timeUs / 1e3
			pl.busbw = pl.algbw * bus
		}
		if i == 0 {
			row.oop = pl
		} else {
			row.ip = pl
		}
		if pl.checked {
			b.wrong += pl.wrong
		}
	}
	return row, nil
}

// usedChannels counts the channels a Program's lanes are on.
func usedChannels(p *model.Program) int {
	used := map[int32]bool{}
	for i := range p.Lanes {
		used[p.Lanes[i].Channel] = true
	}
	return len(used)
}

// measure runs one placement of one size on this rank, as nccl-tests'
// BenchTime does: (out of place) -w warm-up calls, one untimed call, a
// barrier, -n iterations of -m calls timed, then -c checked calls.
func (b *bencher) measure(cs ntCase, size int64, inPlace bool) (measured, error) {
	o, dev := b.o, b.dev
	n, rank := b.comm.NRanks(), b.comm.Rank()
	es := int64(cs.dt.Size())
	count, _, _, sendOff, recvOff := ntCounts(o.collV, size, es, n)
	p, err := b.program(cs, count, inPlace)
	if err != nil {
		return measured{}, fmt.Errorf("rank %d: %d bytes: %w", rank, size, err)
	}
	m := measured{p: p, checked: o.check > 0 && !(inPlace && o.collV.IsP2P())}
	inB, outB := p.InCount*es, p.OutCount*es
	var layout *inPlaceLayout
	if inPlace {
		in, out := sendOff*int64(rank)*es, recvOff*int64(rank)*es
		layout = &inPlaceLayout{bytes: max(in+inB, out+outB), inOff: in, outOff: out}
	}
	if err := dev.Alloc(inB, outB, layout); err != nil {
		return m, err
	}
	input := make([]byte, inB)
	fill(input, cs.dt, cs.rop, rank, 0)
	if err := dev.SetInput(input); err != nil {
		return m, err
	}
	traced := b.sink != nil && !inPlace
	type launched struct {
		rec     *callRecord
		enqueue int64
	}
	var pending []launched
	launch := func(rec *callRecord) error {
		rec.Events = traced
		enq := time.Now().UnixNano()
		if err := dev.Launch(p, rec); err != nil {
			return err
		}
		if traced {
			pending = append(pending, launched{rec, enq})
		}
		return nil
	}
	// syncDev waits for the device; the calls it completed go to the trace.
	syncDev := func() error {
		if err := dev.Sync(); err != nil {
			return err
		}
		for _, l := range pending {
			b.sink.add(p, rank, count, cs.root, l.rec, l.enqueue)
		}
		pending = pending[:0]
		return nil
	}
	warm := 1
	if !inPlace {
		warm += o.warmup
	}
	for i := 0; i < warm; i++ {
		if err := launch(new(callRecord)); err != nil {
			return m, err
		}
	}
	if err := syncDev(); err != nil {
		return m, err
	}
	if err := b.comm.Barrier(); err != nil {
		return m, err
	}
	recs := make([]callRecord, o.iters*o.aggIters)
	var el time.Duration
	start := time.Now()
	for it := 0; it < o.iters; it++ {
		for a := 0; a < o.aggIters; a++ {
			if err := launch(&recs[it*o.aggIters+a]); err != nil {
				return m, err
			}
			if o.blocking == 1 {
				if err := b.comm.Barrier(); err != nil {
					return m, err
				}
			}
		}
		if o.blocking == 3 {
			el += time.Since(start)
			if err := b.comm.Barrier(); err != nil {
				return m, err
			}
			start = time.Now()
		}
	}
	if err := syncDev(); err != nil {
		return m, err
	}
	el += time.Since(start)
	m.perCall = el / time.Duration(len(recs))
	out := make([]byte, outB)
	for c := 0; c < o.check; c++ {
		if err := dev.ClearOutput(); err != nil {
			return m, err
		}
		if err := dev.SetInput(input); err != nil {
			return m, err
		}
		if err := launch(new(callRecord)); err != nil {
			return m, err
		}
		if err := syncDev(); err != nil {
			return m, err
		}
		if !m.checked {
			continue
		}
		if err := dev.GetOutput(out); err != nil {
			return m, err
		}
		if m.wrong = check(p, out, rank, n, max(cs.root, 0), cs.dt, cs.rop, es); m.wrong > 0 {
			break
		}
	}
	return m, nil
}

// writeTrace writes this rank's trace: its part for the local launcher,
// or its own files (tracePaths) in a job of another launcher.
func (b *bencher) writeTrace(rank int) error {
	b.sink.env = ncclEnviron()
	if dir := os.Getenv(envTraceDir); dir != "" {
		c, ev := tracePaths(filepath.Join(dir, "part"), rank)
		return b.sink.write(c, ev)
	}
	c, ev := tracePaths(b.o.trace, rank)
	return b.sink.write(c, ev)
}

// busFactor is nccl-tests' bus bandwidth factor.
func busFactor(c model.Collective, n int) float64 {
	f := float64(n)
	switch c {
	case model.CollAllReduce:
		return 2 * (f - 1) / f
	case model.CollAllGather, model.CollReduceScatter, model.CollAlltoAll:
		return (f - 1) / f
	}
	return 1
}

// value is element i of rank r's input: small integers, so that every
// reduction is exact in every type and order (products: 1 or 2).
func value(rop model.RedOp, r int, i int64) int64 {
	if rop == model.RedProd {
		return 1 + (int64(r)+i)%7/6
	}
	return (int64(r)*3 + i) % 5
}

func put(b []byte, dt model.Dtype, i int64, v float64) {
	switch dt {
	case model.DtypeInt8, model.DtypeUint8:
		b[i] = byte(int64(v))
	case model.DtypeInt32, model.DtypeUint32:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int64(v)))
	case model.DtypeInt64, model.DtypeUint64:
		binary.LittleEndian.PutUint64(b[8*i:], uint64(int64(v)))
	case model.DtypeFP16:
		binary.LittleEndian.PutUint16(b[2*i:], refexec.F32ToF16(float32(v)))
	case model.DtypeBF16:
		binary.LittleEndian.PutUint16(b[2*i:], refexec.F32ToBF16(float32(v)))
	case model.DtypeFP32:
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	case model.DtypeFP64:
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
}

func fill(b []byte, dt model.Dtype, rop model.RedOp, r int, base int64) {
	es := int64(dt.Size())
	for i := int64(0); i < int64(len(b))/es; i++ {
		put(b, dt, i, float64(value(rop, r, base+i)))
	}
}

// reduceAll is the exact reduction over ranks at input index i.
func reduceAll(rop model.RedOp, n int, i int64) int64 {
	acc := value(rop, 0, i)
	for r := 1; r < n; r++ {
		v := value(rop, r, i)
		switch rop {
		case model.RedProd:
			acc *= v
		case model.RedMax:
			acc = max(acc, v)
		case model.RedMin:
			acc = min(acc, v)
		default:
			acc += v
		}
	}
	return acc
}

// check counts the elements of this rank's output that differ from the
// direct computation.
func check(p *model.Program, out []byte, rank, n, root int, dt model.Dtype, rop model.RedOp, es int64) int64 {
	want := make([]byte, len(out))
	count := p.Count
	red := func(dst []byte, j int64, i int64) {
		put(dst, dt, j, float64(reduceAll(rop, n, i)))
	}
	switch p.Coll {
	case model.CollAllReduce:
		for i := int64(0); i < count; i++ {
			red(want, i, i)
		}
		refexec.PostOp(dt, rop, want, n)
	case model.CollReduce:
		if rank != root {
			return 0
		}
		for i := int64(0); i < count; i++ {
			red(want, i, i)
		}
		refexec.PostOp(dt, rop, want, n)
	case model.CollReduceScatter:
		for i := int64(0); i < count; i++ {
			red(want, i, int64(rank)*count+i)
		}
		refexec.PostOp(dt, rop, want, n)
	case model.CollBroadcast:
		for i := int64(0); i < count; i++ {
			put(want, dt, i, float64(value(rop, root, i)))
		}
	case model.CollAllGather:
		for j := 0; j < n; j++ {
			for i := int64(0); i < count; i++ {
				put(want, dt, int64(j)*count+i, float64(value(rop, j, i)))
			}
		}
	case model.CollSendRecv:
		from := (rank + n - 1) % n
		for i := int64(0); i < count; i++ {
			put(want, dt, i, float64(value(rop, from, i)))
		}
	case model.CollAlltoAll:
		for j := 0; j < n; j++ {
			for i := int64(0); i < count; i++ {
				put(want, dt, int64(j)*count+i, float64(value(rop, j, int64(rank)*count+i)))
			}
		}
	}
	wrong := int64(0)
	for i := int64(0); i < int64(len(out)); i += es {
		if string(out[i:i+es]) != string(want[i:i+es]) {
			wrong++
		}
	}
	return wrong
}
