package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
	"github.com/twinccl/twinccl/traces"
)

const gridHelp = `run grid: a job of several communicators on the host device, as a
training job has them: the ranks split (ncclCommSplit) into tensor-parallel
groups of TP consecutive ranks (color rank/TP, key rank) and data-parallel
groups of the ranks at the same place in every TP group (color rank%%TP, key
rank); every rank then runs each size's calls on its TP communicator and, at
the same time on a second stream, on its DP communicator. Every output is
checked against the direct computation; rank 0 prints one row per size: the
average time per call of each communicator kind on rank 0, and the wrong
elements of every rank.

Usage: run grid -np N --grid tp=TP,dp=DP [--op OP] [-b SIZE] [-e SIZE]
                [-f F] [-n ITERS] [--dtype T] [--trace OUT.parquet] [--timeout D]

N must be TP*DP. Ranks run as processes of this host (TWINCCL_HOSTID=split:K
puts every K consecutive ranks on a "host" of their own: the net transport
between them). SIZE is the buffer size as nccl-tests counts it (K, M, G
suffixes).

--trace OUT.parquet writes the job's call trace (OUT.parquet: one row per call,
rank and communicator, with the communicator's hash, the rank in it and the
stream, 1 for TP and 2 for DP; the metadata twinccl.comms gives the job rank of
every rank of every communicator) and its event trace beside it
(OUT.events.parquet); "replay run OUT.parquet --topo FILE.xml" replays it with
the communicators sharing the topology's links.

Flags:
`

// gridOpts are run grid's flags.
type gridOpts struct {
	np, tp, dp int
	coll       model.Collective
	dtype      model.Dtype
	minB, maxB int64
	factor     int64
	iters      int
	trace      string
	timeout    time.Duration
}

// parseGrid reads "tp=T,dp=D".
func parseGrid(s string) (tp, dp int, err error) {
	for _, f := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), "=")
		n, cerr := strconv.Atoi(v)
		if !ok || cerr != nil || n < 1 {
			return 0, 0, fmt.Errorf("--grid %q: want tp=T,dp=D with positive sizes", s)
		}
		switch k {
		case "tp":
			tp = n
		case "dp":
			dp = n
		default:
			return 0, 0, fmt.Errorf("--grid %q: unknown dimension %q (tp, dp)", s, k)
		}
	}
	if tp == 0 || dp == 0 {
		return 0, 0, fmt.Errorf("--grid %q: want both tp and dp", s)
	}
	return tp, dp, nil
}

func parseGridArgs(e *env, args []string) (gridOpts, error) {
	o := gridOpts{}
	fs := flag.NewFlagSet("run grid", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.IntVar(&o.np, "np", 0, "ranks to launch on this host (0: the job's environment: Slurm, Open MPI, torchrun)")
	grid := fs.String("grid", "", "the communicators: `tp=TP,dp=DP` (required)")
	op := fs.String("op", "allreduce", "collective: allreduce, allgather, reducescatter, broadcast or reduce")
	dtype := fs.String("dtype", "float32", "datatype")
	minB := fs.String("b", "8K", "smallest size")
	maxB := fs.String("e", "1M", "largest size")
	fs.Int64Var(&o.factor, "f", 4, "size multiplication factor")
	fs.IntVar(&o.iters, "n", 5, "calls per size on every communicator")
	fs.StringVar(&o.trace, "trace", "", "write the call trace to `OUT.parquet` and the event trace beside it")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "bound on the bootstrap and on any wait without progress")
	usage := func() {
		fmt.Fprint(e.stdout, strings.ReplaceAll(gridHelp, "%%", "%"))
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return o, err
		}
		return o, &usageError{err.Error() + " (see run grid -h)"}
	}
	if fs.NArg() > 0 {
		return o, &usageError{fmt.Sprintf("unexpected argument %q (see run grid -h)", fs.Arg(0))}
	}
	var err error
	if *grid == "" {
		return o, &usageError{"--grid tp=TP,dp=DP is required (see run grid -h)"}
	}
	if o.tp, o.dp, err = parseGrid(*grid); err != nil {
		return o, &usageError{err.Error()}
	}
	if o.np != 0 && o.np != o.tp*o.dp {
		return o, &usageError{fmt.Sprintf("-np %d: --grid %s needs %d ranks (tp x dp)", o.np, *grid, o.tp*o.dp)}
	}
	if o.coll, err = parseColl(*op); err != nil || o.coll.IsP2P() {
		return o, &usageError{fmt.Sprintf("--op %q: want allreduce, allgather, reducescatter, broadcast or reduce", *op)}
	}
	if o.dtype, err = model.ParseDtype(*dtype); err != nil {
		return o, &usageError{fmt.Sprintf("--dtype: %v", err)}
	}
	if o.minB, err = parseSizeArg(*minB); err != nil {
		return o, &usageError{"-b: " + err.Error()}
	}
	if o.maxB, err = parseSizeArg(*maxB); err != nil {
		return o, &usageError{"-e: " + err.Error()}
	}
	switch {
	case o.minB < 1 || o.maxB < o.minB:
		return o, &usageError{fmt.Sprintf("sizes must satisfy 1 <= -b (%d) <= -e (%d)", o.minB, o.maxB)}
	case o.maxB > 1<<30:
		return o, &usageError{fmt.Sprintf("-e %d: at most 1G on the host device", o.maxB)}
	case o.factor < 2:
		return o, &usageError{fmt.Sprintf("-f %d: must be at least 2", o.factor)}
	case o.iters < 1 || o.iters > 1000:
		return o, &usageError{fmt.Sprintf("-n %d: want 1 to 1000 calls", o.iters)}
	case o.timeout <= 0:
		return o, &usageError{fmt.Sprintf("--timeout %v: must be positive", o.timeout)}
	}
	if o.trace != "" && !strings.HasSuffix(o.trace, ".parquet") {
		return o, &usageError{fmt.Sprintf("--trace %q: want a file name ending in .parquet", o.trace)}
	}
	return o, nil
}

func runGrid(e *env, args []string) error {
	o, err := parseGridArgs(e, args)
	if err != nil {
		return err
	}
	if os.Getenv(envUID) != "" || o.np == 0 {
		return gridRank(e, o)
	}
	if err := checkHostRanks(o.np); err != nil {
		return err
	}
	if _, err := transport.HostIDFromEnv(0); err != nil {
		return &usageError{err.Error()}
	}
	return launchRanks(e, "grid", o.np, o.timeout, o.trace, false, args)
}

// gridComm is one communicator of a grid rank and what it ran.
type gridComm struct {
	name   string
	stream uint64
	c      *hostdev.Communicator
	tune   *search.Result // nil: the hand-built plan
	plan   *model.Plan
	sink   *traceSink
	rec    *callRecord
	wrong  int64
	us     float64 // time of the current size's calls
}

// gridRank is one rank of run grid.
func gridRank(e *env, o gridOpts) error {
	rank, n, id, ok, err := jobEnv()
	if err != nil {
		return err
	}
	if !ok {
		return &usageError{"no job: give -np N, or run under Slurm, Open MPI or torchrun"}
	}
	if n != o.tp*o.dp {
		return &usageError{fmt.Sprintf("a job of %d ranks: --grid needs %d (tp x dp)", n, o.tp*o.dp)}
	}
	if rank == 0 && os.Getenv(envUID) == "" {
		root, err := bootstrap.StartRoot(id.Addr, id.Magic, n, o.timeout, e.log)
		if err != nil {
			return err
		}
		defer root.Close()
	}
	host := ""
	if os.Getenv(envUID) != "" {
		host = "127.0.0.1"
	}
	r, err := hostdev.Join(hostdev.RankConfig{Boot: bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: host, Timeout: o.timeout},
		HostID: transport.HostID(rank), ForceNet: os.Getenv("TWINCCL_TRANSPORT") == "net", Log: e.log})
	if err != nil {
		return err
	}
	comms, err := gridSplit(r, o, rank)
	if err == nil {
		err = gridSweep(e, r, o, comms, rank)
	}
	if err == nil && o.trace != "" {
		err = gridTrace(o, r, comms, rank)
	}
	if err != nil {
		r.Abort()
		return err
	}
	return r.Close()
}

// gridSplit makes the rank's TP and DP communicators and their plans.
func gridSplit(r *hostdev.Rank, o gridOpts, rank int) ([]*gridComm, error) {
	var out []*gridComm
	for i, s := range []struct {
		name       string
		color, key int
	}{{"tp", rank / o.tp, rank}, {"dp", rank % o.tp, rank}} {
		c, err := r.Split(s.color, s.key)
		if err != nil {
			return nil, err
		}
		g := &gridComm{name: s.name, stream: uint64(i + 1), c: c}
		hosts := make([]string, len(c.Members))
		for k, m := range c.Members {
			hosts[k] = r.Hosts[m]
		}
		if res, err := tunedPlan(hosts); err == nil {
			g.tune, g.plan = res, res.Plan
		} else {
			g.plan = model.SyntheticPlan(len(c.Members), 2, false)
		}
		if o.trace != "" {
			g.sink = &traceSink{job: fmt.Sprintf("run grid tp=%d,dp=%d", o.tp, o.dp), comm: c.Hash, host: r.Hosts[rank]}
			g.rec = &callRecord{Events: true}
			rec := g.rec
			c.Device.Trace = func(ev hostdev.SliceEvent) { rec.Slices = append(rec.Slices, ev) }
		}
		out = append(out, g)
	}
	return out, nil
}

// program is the Program of one call of count elements on communicator g.
func (g *gridComm) program(o gridOpts, count int64) (*model.Program, error) {
	n := g.c.NRanks()
	algo, proto, nch := model.AlgoRing, model.ProtoSimple, g.plan.NChannels
	if g.tune != nil {
		ch, err := g.tune.Tuning.Choose(o.coll, count, o.dtype.Size())
		if err != nil {
			return nil, fmt.Errorf("%s communicator: tuner: %w", g.name, err)
		}
		algo, proto, nch = ch.Algo, ch.Proto, ch.NChannels
	}
	if !model.ProgramCovers(o.coll, algo, proto, n) {
		algo = model.AlgoRing
	}
	if !model.CollAllowed(o.coll, algo, proto) {
		proto = model.ProtoSimple
	}
	return model.GenerateProgram(g.plan, o.coll, algo, proto, count, o.dtype, model.RedSum,
		model.ProgOptions{NChannels: max(1, min(nch, g.plan.NChannels))})
}

// gridSweep runs every size: the connections of both communicators first
// (TP then DP, on every rank), then both communicators' calls at once.
func gridSweep(e *env, r *hostdev.Rank, o gridOpts, comms []*gridComm, rank int) error {
	es := int64(o.dtype.Size())
	if rank == 0 {
		fmt.Fprintf(e.stdout, "# run grid: %d ranks, tp=%d x dp=%d, %s %s, %d calls per size on every communicator, at once\n",
			o.tp*o.dp, o.tp, o.dp, o.coll, ntTypeName(o.dtype), o.iters)
		fmt.Fprintf(e.stdout, "#%11s %12s %12s %12s %12s %8s\n", "size(B)", "tp count", "tp time(us)", "dp count", "dp time(us)", "#wrong")
	}
	var total int64
	for size := o.minB; size <= o.maxB; size *= o.factor {
		progs := make([]*model.Program, len(comms))
		counts := make([]int64, len(comms))
		for i, g := range comms {
			param, _, _, _, _ := ntCounts(o.coll, size, es, g.c.NRanks())
			if param < 1 {
				param = 1
			}
			p, err := g.program(o, param)
			if err != nil {
				return err
			}
			if err := g.c.Connect(p); err != nil {
				return err
			}
			progs[i], counts[i] = p, param
		}
		errs := make([]error, len(comms))
		var wg sync.WaitGroup
		for i, g := range comms {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = g.run(o, progs[i], counts[i]) }()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
		wrong := comms[0].wrong + comms[1].wrong
		all, err := r.Comm.AllGather(binary.LittleEndian.AppendUint64(nil, uint64(wrong)))
		if err != nil {
			return err
		}
		sum := int64(0)
		for _, b := range all {
			sum += int64(binary.LittleEndian.Uint64(b))
		}
		total += sum
		comms[0].wrong, comms[1].wrong = 0, 0
		if rank == 0 {
			fmt.Fprintf(e.stdout, "%12d %12d %12.2f %12d %12.2f %8d\n", size, counts[0], comms[0].us, counts[1], comms[1].us, sum)
		}
		if size > math.MaxInt64/o.factor {
			break
		}
	}
	if total > 0 {
		return fmt.Errorf("%d wrong elements over the sweep (see #wrong)", total)
	}
	return nil
}

// run makes o.iters calls of p on the communicator, checking each.
func (g *gridComm) run(o gridOpts, p *model.Program, count int64) error {
	es := int64(o.dtype.Size())
	in := make([]byte, p.InCount*es)
	out := make([]byte, p.OutCount*es)
	n := g.c.NRanks()
	// Inputs depend on the communicator, so that data of another one
	// would show as wrong elements.
	fill(in, o.dtype, model.RedSum, g.c.Rank, int64(g.c.Index))
	var spent time.Duration
	for range o.iters {
		clear(out)
		enq := time.Now()
		if g.rec != nil {
			g.rec.Slices = g.rec.Slices[:0]
		}
		start := time.Now()
		if _, err := g.c.Device.Run(p, in, out); err != nil {
			return fmt.Errorf("%s communicator (job ranks %v): %w", g.name, g.c.Members, err)
		}
		end := time.Now()
		spent += end.Sub(start)
		g.wrong += checkShifted(p, out, g.c.Rank, n, o.dtype, int64(g.c.Index), es)
		if g.sink != nil {
			g.rec.Start, g.rec.End = start, end
			g.sink.add(p, g.c.Rank, count, 0, g.rec, enq.UnixNano())
			g.sink.calls[len(g.sink.calls)-1].Stream = g.stream
		}
	}
	g.us = float64(spent.Microseconds()) / float64(o.iters)
	return nil
}

// checkShifted is check on inputs whose element i is value(r, i+shift):
// it counts the wrong elements of this rank's output.
func checkShifted(p *model.Program, out []byte, rank, n int, dt model.Dtype, shift, es int64) int64 {
	want := make([]byte, len(out))
	count := p.Count
	red := func(j, i int64) {
		acc := int64(0)
		for r := 0; r < n; r++ {
			acc += value(model.RedSum, r, i+shift)
		}
		put(want, dt, j, float64(acc))
	}
	switch p.Coll {
	case model.CollAllReduce:
		for i := int64(0); i < count; i++ {
			red(i, i)
		}
	case model.CollReduce:
		if rank != p.Root {
			return 0
		}
		for i := int64(0); i < count; i++ {
			red(i, i)
		}
	case model.CollReduceScatter:
		for i := int64(0); i < count; i++ {
			red(i, int64(rank)*count+i)
		}
	case model.CollBroadcast:
		for i := int64(0); i < count; i++ {
			put(want, dt, i, float64(value(model.RedSum, p.Root, i+shift)))
		}
	case model.CollAllGather:
		for j := 0; j < n; j++ {
			for i := int64(0); i < count; i++ {
				put(want, dt, int64(j)*count+i, float64(value(model.RedSum, j, i+shift)))
			}
		}
	}
	wrong := int64(0)
	for i := int64(0); i+es <= int64(len(out)); i += es {
		if string(out[i:i+es]) != string(want[i:i+es]) {
			wrong++
		}
	}
	return wrong
}

// gridTrace writes the rank's rows of both communicators (its part, when
// the launcher merges them), with the job's communicators in the call
// trace's metadata.
func gridTrace(o gridOpts, r *hostdev.Rank, comms []*gridComm, rank int) error {
	var list []traces.CommInfo
	for _, c := range r.Communicators() {
		cm := traces.CommInfo{ID: c.Hash}
		for _, g := range c.Members {
			cm.Ranks = append(cm.Ranks, int32(g))
		}
		list = append(list, cm)
	}
	meta, err := traces.EncodeComms(list)
	if err != nil {
		return err
	}
	all := &traceSink{env: ncclEnviron(), comms: meta}
	for _, g := range comms {
		all.calls = append(all.calls, g.sink.calls...)
		all.events = append(all.events, g.sink.events...)
	}
	out := o.trace
	if dir := os.Getenv(envTraceDir); dir != "" {
		out = filepath.Join(dir, "part")
	}
	c, ev := tracePaths(out, rank) // a rank of a Slurm or torchrun job: its own part
	return all.write(c, ev)
}
