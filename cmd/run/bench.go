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
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
	"github.com/twinccl/twinccl/search"
)

// Environment of ranks started by the local launcher.
const (
	envUID    = "TWINCCL_BENCH_UID"
	envRank   = "TWINCCL_BENCH_RANK"
	envNRanks = "TWINCCL_BENCH_NRANKS"
)

// benchOpts are the flags of run bench.
type benchOpts struct {
	np                   int
	op, dtype, redop     string
	algo, proto          string
	minB, maxB           int64
	factor               int64
	iters, warmup, check int
	channels             int
	root                 int
	timeout              time.Duration
	baseline             bool
	trace                string
	net                  string

	// Parsed.
	coll   model.Collective
	dt     model.Dtype
	rop    model.RedOp
	algoV  model.Algorithm
	protoV model.Protocol
}

// parseSize reads a byte count with an optional K, M or G suffix
// (model.ParseSize); a bad one is a usage error.
func parseSize(s string) (int64, error) {
	v, err := model.ParseSize(s)
	if err != nil {
		return 0, &usageError{fmt.Sprintf("bad size: %v", err)}
	}
	return v, nil
}

// benchHelp is the help text of the bench form of run.
const benchHelp = `Usage: run -np N [flags]          (also: run bench -np N [flags])
       run [flags]                  (one rank of a Slurm, Open MPI or torchrun job)

Runs an nccl-tests-like sweep of one collective on the host device: ranks
are processes, ranks of a host talk through shared memory, ranks of
different hosts through the net plugin of --net, TCP sockets by default
(TWINCCL_HOSTID=split:K makes every K consecutive ranks a host of their
own, to exercise the net transport on one machine).
It prints one row per size: size, count, type, redop, root, time, algbw,
busbw, #wrong (with -c 1), and the algorithm and protocol used.

Without --algo/--proto the tuner chooses them per size, as NCCL would: the
job's ranks are described to the search (package search) as PCIe GPUs
without NVLink, one CPU per host and a 10 Gb/s NIC per host, and
search.Run's plan and tuning table pick the pair; --algo and --proto
override it (the plan stays the searched one).

--trace OUT.parquet writes the call trace (one row per collective call per
rank) to OUT.parquet and the event trace (one row per executed slice, with
start and end times) to OUT.events.parquet. Ranks launched with -np write
their parts to a temporary directory and the launcher merges them into
those two files; ranks of a Slurm, Open MPI or torchrun job each write
OUT.rankR.parquet and OUT.rankR.events.parquet. Files appear whole or not
at all: nothing is written when the run fails.

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

Flags:
`

// runBench is `run bench` and the bare form of run: an nccl-tests-like
// sweep on the host device.
func runBench(e *env, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var o benchOpts
	var minS, maxS string
	fs.IntVar(&o.np, "np", 0, "launch this many local ranks (else join a Slurm, Open MPI or torchrun job from the environment)")
	fs.StringVar(&o.op, "op", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast, reduce, alltoall")
	fs.StringVar(&minS, "b", "8", "smallest size in bytes (K, M, G suffixes)")
	fs.StringVar(&maxS, "e", "32M", "largest size in bytes")
	fs.Int64Var(&o.factor, "f", 2, "size multiplication factor")
	fs.IntVar(&o.iters, "n", 20, "timed iterations per size")
	fs.IntVar(&o.warmup, "w", 5, "warmup iterations per size")
	fs.IntVar(&o.check, "c", 1, "check results (1) or not (0)")
	fs.StringVar(&o.dtype, "dtype", "float", "datatype")
	fs.StringVar(&o.redop, "redop", "sum", "reduction")
	fs.StringVar(&o.algo, "algo", "", "algorithm (ring, tree); empty: the tuner's choice")
	fs.StringVar(&o.proto, "proto", "", "protocol (simple, ll, ll128); empty: the tuner's choice")
	fs.IntVar(&o.channels, "channels", 0, "channels (0: the tuner's count)")
	fs.IntVar(&o.root, "root", 0, "root of broadcast and reduce")
	fs.StringVar(&o.trace, "trace", "", "write the call trace to `OUT.parquet` and the event trace to OUT.events.parquet")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound of every wait (a lost or stuck peer ends the run)")
	fs.StringVar(&o.net, "net", "socket", "net plugin between ranks of different hosts: socket or ib (see above)")
	fs.BoolVar(&o.baseline, "baseline", false, "measure memcpy and raw TCP loopback bandwidth, then 64 MiB AllReduce over shm and over sockets, and print busbw/memcpy and busbw/TCP (-np ranks, 4 by default)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(e.stdout, benchHelp)
			fs.SetOutput(e.stdout)
			fs.PrintDefaults()
			return err
		}
		return &usageError{err.Error() + " (see run -h)"}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	var err error
	if o.minB, err = parseSize(minS); err != nil {
		return err
	}
	if o.maxB, err = parseSize(maxS); err != nil {
		return err
	}
	if o.factor < 2 {
		return &usageError{"-f must be at least 2"}
	}
	if o.minB > o.maxB {
		return &usageError{fmt.Sprintf("-b %d is larger than -e %d", o.minB, o.maxB)}
	}
	if o.iters < 1 || o.warmup < 0 || o.channels < 0 || o.np < 0 {
		return &usageError{"-n must be positive; -w, -np and --channels must not be negative"}
	}
	if o.trace != "" && o.baseline {
		return &usageError{"--trace and --baseline do not go together"}
	}
	// Names are checked here, before any rank starts.
	if err := o.parse(); err != nil {
		return err
	}
	if o.net == "ib" && os.Getenv(envUID) == "" {
		// A provider forced to rdma on a machine without a device fails
		// here, once, rather than in every rank.
		if c, _ := ib.ParseProviderChoice(os.Getenv(ib.ProviderEnv)); c == ib.ProviderRDMA {
			devs, err := ib.RDMADevices(ib.HCAFromEnv())
			if err == nil && len(devs) == 0 {
				err = errors.New("libibverbs finds no RDMA device with an active port")
			}
			if err != nil {
				return fmt.Errorf("--net ib with %s=rdma: %w", ib.ProviderEnv, err)
			}
		}
	}
	if os.Getenv(envUID) == "" && o.baseline {
		_, err := runBaseline(e, o)
		return err
	}
	if os.Getenv(envUID) == "" && o.np > 0 {
		return launchRanks(e, "bench", o.np, o.timeout, o.trace, args)
	}
	return benchRank(e, o)
}

// parse reads the names of the collective, datatype, reduction and the
// forced algorithm and protocol.
func (o *benchOpts) parse() error {
	var err error
	if o.coll, err = model.ParseCollective(o.op); err != nil {
		return &usageError{err.Error()}
	}
	if o.dt, err = model.ParseDtype(o.dtype); err != nil {
		return &usageError{err.Error()}
	}
	if o.rop, err = model.ParseRedOp(o.redop); err != nil {
		return &usageError{err.Error()}
	}
	if o.algo != "" {
		if o.algoV, err = model.ParseAlgorithm(o.algo); err != nil {
			return &usageError{err.Error()}
		}
	}
	if o.proto != "" {
		if o.protoV, err = model.ParseProtocol(o.proto); err != nil {
			return &usageError{err.Error()}
		}
	}
	switch o.net {
	case "socket":
	case "ib":
		if _, err := ib.ParseProviderChoice(os.Getenv(ib.ProviderEnv)); err != nil {
			return &usageError{err.Error()}
		}
		if _, err := ib.OptionsFromEnv(nil); err != nil {
			return &usageError{err.Error()}
		}
	default:
		return &usageError{fmt.Sprintf("--net %q: want socket or ib", o.net)}
	}
	return nil
}

// netPlugin is the net plugin of --net for a rank listening on host ("":
// the address bootstrap.ListenAddr picks), its name for the table
// header, and what releases it after the rank closed.
func netPlugin(e *env, name, host string) (transport.Plugin, string, func(), error) {
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
	pv, note, err := ib.OpenProvider(os.Getenv(ib.ProviderEnv), host, ib.HCAFromEnv())
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
// root's address; rank 0 serves it).
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
		// NCCL_COMM_ID's fixed magic (nccl-facts §10).
		return rank, n, bootstrap.UniqueID{Magic: 0x0280028002800280, Addr: addr}, true, nil
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
	if rank == 0 && os.Getenv(envUID) == "" {
		root, err := bootstrap.StartRoot(id.Addr, id.Magic, n, o.timeout, e.log)
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
	plugin, netName, releaseNet, err := netPlugin(e, o.net, host)
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
		sink = &traceSink{job: "run " + o.op, comm: id.Magic, host: r.Hosts[rank]}
	}
	dev := newHostBench(r, sink != nil)
	b := &bencher{e: e, o: o, comm: r.Comm, dev: dev, sink: sink, net: netName}
	runErr := b.setup(r.Hosts)
	for size := o.minB; size <= o.maxB && runErr == nil; size *= o.factor {
		runErr = b.size(size)
		if size == 0 {
			size = 1
		}
	}
	dev.Close()
	if runErr == nil && sink != nil {
		runErr = b.writeTrace(rank)
	}
	if runErr != nil {
		r.Abort()
		return runErr
	}
	return r.Close()
}

// bencher is one rank's sweep over a device backend.
type bencher struct {
	e    *env
	o    benchOpts
	comm *bootstrap.Comm
	dev  benchDevice
	sink *traceSink
	plan *model.Plan
	tune *search.Result // nil: no tuner (the hand-built plan)
	net  string         // the net plugin's name
}

// setup makes the job's plan: the search's on the CPU topology of the
// ranks (see cpuTopology), or, when the hosts cannot be described (ranks
// of a host not consecutive), the conformance suite's hand-built plan
// with flags or defaults for the algorithm and protocol.
func (b *bencher) setup(hosts []string) error {
	n := b.comm.NRanks()
	res, err := tunedPlan(hosts)
	if err != nil {
		b.e.log.Warn("no searched plan; using a ring 0..n-1 with NCCL's trees", "err", err)
		nch := b.o.channels
		if nch == 0 {
			nch = 2
		}
		b.plan = conformance.TestPlan(n, nch, false)
	} else {
		b.plan, b.tune = res.Plan, res
	}
	if b.comm.Rank() == 0 {
		src := "tuner"
		if b.o.algo != "" || b.o.proto != "" || b.tune == nil {
			src = "flags"
		}
		fmt.Fprintf(b.e.stdout, "# twinccl %s device: %d ranks, %s, net %s, algorithm/protocol from the %s, %d iters, %d warmup\n", b.dev.Name(), n, b.o.coll, b.net, src, b.o.iters, b.o.warmup)
		fmt.Fprintf(b.e.stdout, "#%11s %12s %8s %6s %6s %10s %9s %9s %7s %6s %6s %3s\n", "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "#wrong", "algo", "proto", "nch")
		fmt.Fprintf(b.e.stdout, "#%11s %12s %8s %6s %6s %10s %9s %9s %7s %6s %6s %3s\n", "(B)", "(elements)", "", "", "", "", "(GB/s)", "(GB/s)", "", "", "", "")
	}
	return nil
}

// choose is the algorithm, protocol and channel count of one size: the
// tuner's choice (NCCL's per-call ncclGetAlgoInfo) unless flags force
// them; a pair the Program generator cannot build falls back to Ring with
// the chosen protocol, or Simple.
func (b *bencher) choose(count int64) (model.Algorithm, model.Protocol, int, error) {
	o := b.o
	algo, proto, nch := model.AlgoRing, model.ProtoSimple, b.plan.NChannels
	if b.tune != nil && o.coll != model.CollAlltoAll && (o.algo == "" || o.proto == "") {
		ch, err := b.tune.Tuning.Choose(o.coll, count, o.dt.Size())
		if err != nil {
			return 0, 0, 0, fmt.Errorf("rank %d: tuner: %w", b.comm.Rank(), err)
		}
		algo, proto, nch = ch.Algo, ch.Proto, ch.NChannels
	}
	if o.algo != "" {
		algo = o.algoV
	}
	if o.proto != "" {
		proto = o.protoV
	}
	if !model.ProgramCovers(o.coll, algo, proto, b.comm.NRanks()) && o.algo == "" {
		algo = model.AlgoRing // as run gpu does (gpuJob.choose)
		if !model.CollAllowed(o.coll, algo, proto) && o.proto == "" {
			proto = model.ProtoSimple
		}
	}
	if o.channels > 0 {
		nch = o.channels
	}
	return algo, proto, max(1, min(nch, b.plan.NChannels)), nil
}

// size runs one row of the sweep: warmup, timed iterations, one checked
// call, then rank 0 prints the slowest rank's time.
func (b *bencher) size(size int64) error {
	o, dev := b.o, b.dev
	n, rank := b.comm.NRanks(), b.comm.Rank()
	es := int64(o.dt.Size())
	count := size / es
	perRank := o.coll == model.CollAllGather || o.coll == model.CollReduceScatter || o.coll == model.CollAlltoAll
	if perRank {
		count /= int64(n)
	}
	algo, proto, nch, err := b.choose(count)
	if err != nil {
		return err
	}
	var p *model.Program
	if o.coll == model.CollAlltoAll {
		p, err = model.GenerateAlltoAllProgram(b.plan, proto, count, o.dt, model.P2POptions{})
	} else {
		p, err = model.GenerateProgram(b.plan, o.coll, algo, proto, count, o.dt, o.rop, model.ProgOptions{NChannels: nch, Root: o.root})
	}
	if err != nil {
		return fmt.Errorf("rank %d: %d bytes: %w", rank, size, err)
	}
	in := make([]byte, p.InCount*es)
	fill(in, o.dt, o.rop, rank, 0)
	if err := dev.Alloc(p.InCount*es, p.OutCount*es); err != nil {
		return err
	}
	if err := dev.SetInput(in); err != nil {
		return err
	}
	recs := make([]callRecord, o.iters)
	type launched struct {
		rec     *callRecord
		enqueue int64
	}
	var pending []launched
	launch := func(rec *callRecord) error {
		rec.Events = b.sink != nil
		enq := time.Now().UnixNano()
		if err := dev.Launch(p, rec); err != nil {
			return err
		}
		if b.sink != nil {
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
			b.sink.add(p, rank, count, o.root, l.rec, l.enqueue)
		}
		pending = pending[:0]
		return nil
	}
	for i := 0; i < o.warmup; i++ {
		rec := new(callRecord)
		if err := launch(rec); err != nil {
			return err
		}
	}
	if err := syncDev(); err != nil {
		return err
	}
	if err := b.comm.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	for i := range recs {
		if err := launch(&recs[i]); err != nil {
			return err
		}
	}
	if err := syncDev(); err != nil {
		return err
	}
	el := time.Since(start)
	wrong := int64(0)
	if o.check != 0 {
		if err := dev.ClearOutput(); err != nil {
			return err
		}
		if err := launch(new(callRecord)); err != nil {
			return err
		}
		if err := syncDev(); err != nil {
			return err
		}
		out := make([]byte, p.OutCount*es)
		if err := dev.GetOutput(out); err != nil {
			return err
		}
		wrong = check(p, out, rank, n, o.root, o.dt, o.rop, es)
	}
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:], uint64(el))
	binary.LittleEndian.PutUint64(buf[8:], uint64(wrong))
	all, err := b.comm.AllGather(buf[:])
	if err != nil {
		return err
	}
	var maxT time.Duration
	wrong = 0
	for _, x := range all {
		maxT = max(maxT, time.Duration(binary.LittleEndian.Uint64(x)))
		wrong += int64(binary.LittleEndian.Uint64(x[8:]))
	}
	if rank == 0 {
		per := maxT.Seconds() / float64(max(1, o.iters))
		bytes := float64(count * es)
		if perRank {
			bytes *= float64(n)
		}
		algbw := bytes / per / 1e9
		fmt.Fprintf(b.e.stdout, "%12d %12d %8s %6s %6d %10.1f %9.2f %9.2f %7d %6s %6s %3d\n", int64(bytes), count, o.dt, o.rop, o.root, per*1e6, algbw, algbw*busFactor(o.coll, n), wrong, p.Algo, p.Proto, p.NChannels)
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong elements at %d bytes", wrong, size)
	}
	return nil
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
