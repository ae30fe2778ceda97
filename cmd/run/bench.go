package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
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
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mul := int64(1)
	switch {
	case strings.HasSuffix(s, "K"), strings.HasSuffix(s, "k"):
		mul, s = 1<<10, s[:len(s)-1]
	case strings.HasSuffix(s, "M"):
		mul, s = 1<<20, s[:len(s)-1]
	case strings.HasSuffix(s, "G"):
		mul, s = 1<<30, s[:len(s)-1]
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, &usageError{fmt.Sprintf("bad size %q", s)}
	}
	return v * mul, nil
}

// runBench is `run bench`: an nccl-tests-like sweep on the host device.
func runBench(e *env, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(e.stderr)
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
	fs.StringVar(&o.algo, "algo", "ring", "algorithm (ring, tree)")
	fs.StringVar(&o.proto, "proto", "simple", "protocol (simple, ll, ll128)")
	fs.IntVar(&o.channels, "channels", 2, "channels")
	fs.IntVar(&o.root, "root", 0, "root of broadcast and reduce")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "bound of every wait (a lost or stuck peer ends the run)")
	fs.BoolVar(&o.baseline, "baseline", false, "measure memcpy and raw TCP loopback bandwidth, then 64 MiB AllReduce over shm and over sockets, and print busbw/memcpy and busbw/TCP (-np ranks, 4 by default)")
	if err := fs.Parse(args); err != nil {
		return err
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
	if os.Getenv(envUID) == "" && o.baseline {
		_, err := runBaseline(e, o)
		return err
	}
	if os.Getenv(envUID) == "" && o.np > 0 {
		return launch(e, o, args)
	}
	return benchRank(e, o)
}

// launch starts np copies of this binary as ranks on this host and waits:
// rank 0's output is the table; a failing rank ends the job. extraEnv is
// added to the ranks' environment.
func launch(e *env, o benchOpts, args []string, extraEnv ...string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), o.np, o.timeout, e.log)
	if err != nil {
		return err
	}
	defer root.Close()
	cmds := make([]*exec.Cmd, o.np)
	var wg sync.WaitGroup
	var mu sync.Mutex
	for r := range cmds {
		c := exec.Command(self, append([]string{"bench"}, args...)...)
		c.Env = append(os.Environ(), envUID+"="+root.ID().String(), fmt.Sprint(envRank, "=", r), fmt.Sprint(envNRanks, "=", o.np))
		c.Env = append(c.Env, extraEnv...)
		if r == 0 {
			c.Stdout = e.stdout
		}
		pr, pw := io.Pipe()
		c.Stderr = pw
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				mu.Lock()
				fmt.Fprintf(e.stderr, "[rank %d] %s\n", r, sc.Text())
				mu.Unlock()
			}
		}()
		if err := c.Start(); err != nil {
			return err
		}
		cmds[r] = c
		defer pw.Close()
	}
	errc := make(chan error, o.np)
	for r, c := range cmds {
		go func() {
			err := c.Wait()
			if err != nil {
				err = fmt.Errorf("rank %d: %w", r, err)
			}
			errc <- err
		}()
	}
	var errs []error
	for range cmds {
		if err := <-errc; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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

// hostID is the rank's host identity: TWINCCL_HOSTID, or the host name.
// TWINCCL_HOSTID=split:K puts every K consecutive ranks on a "host" of
// their own, so that one machine exercises the net transport.
func hostID(rank int) string {
	h, _ := os.Hostname()
	v := os.Getenv("TWINCCL_HOSTID")
	if k, ok := strings.CutPrefix(v, "split:"); ok {
		if per, err := strconv.Atoi(k); err == nil && per > 0 {
			return fmt.Sprintf("%s/%d", h, rank/per)
		}
	}
	if v != "" {
		return v
	}
	return h
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
	coll, err := model.ParseCollective(o.op)
	if err != nil {
		return &usageError{err.Error()}
	}
	dt, err := model.ParseDtype(o.dtype)
	if err != nil {
		return &usageError{err.Error()}
	}
	rop, err := model.ParseRedOp(o.redop)
	if err != nil {
		return &usageError{err.Error()}
	}
	algo, err := model.ParseAlgorithm(o.algo)
	if err != nil {
		return &usageError{err.Error()}
	}
	proto, err := model.ParseProtocol(o.proto)
	if err != nil {
		return &usageError{err.Error()}
	}
	host := ""
	if ifn := os.Getenv("TWINCCL_SOCKET_IFNAME"); ifn != "" {
		if host, err = bootstrap.ListenAddr(ifn); err != nil {
			return err
		}
	} else if os.Getenv(envUID) != "" {
		host = "127.0.0.1"
	}
	r, err := hostdev.Join(hostdev.RankConfig{Boot: bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: host, Timeout: o.timeout},
		HostID: hostID(rank), ForceNet: os.Getenv("TWINCCL_TRANSPORT") == "net", Log: e.log})
	if err != nil {
		return err
	}
	// The local job's topology: the hand-built plan of the conformance
	// suite (ring 0..n-1 on every channel, NCCL's double binary trees),
	// since a host-memory job has no GPUs for search.Run to order.
	plan := conformance.TestPlan(n, o.channels, false)
	es := int64(dt.Size())
	if rank == 0 {
		fmt.Fprintf(e.stdout, "# twinccl host device: %d ranks, %s %s %s, %d channels, %d iters, %d warmup\n", n, coll, algo, proto, o.channels, o.iters, o.warmup)
		fmt.Fprintf(e.stdout, "#%11s %12s %8s %6s %6s %10s %9s %9s %7s\n", "size", "count", "type", "redop", "root", "time(us)", "algbw", "busbw", "#wrong")
		fmt.Fprintf(e.stdout, "#%11s %12s %8s %6s %6s %10s %9s %9s %7s\n", "(B)", "(elements)", "", "", "", "", "(GB/s)", "(GB/s)", "")
	}
	var runErr error
	for size := o.minB; size <= o.maxB && runErr == nil; size *= o.factor {
		runErr = benchSize(e, o, r, plan, coll, algo, proto, dt, rop, size, es)
		if size == 0 {
			size = 1
		}
	}
	if runErr != nil {
		r.Abort()
		return runErr
	}
	return r.Close()
}

func benchSize(e *env, o benchOpts, r *hostdev.Rank, plan *model.Plan, coll model.Collective, algo model.Algorithm, proto model.Protocol,
	dt model.Dtype, rop model.RedOp, size, es int64) error {
	n := r.Comm.NRanks()
	rank := r.Comm.Rank()
	count := size / es
	perRank := coll == model.CollAllGather || coll == model.CollReduceScatter || coll == model.CollAlltoAll
	if perRank {
		count /= int64(n)
	}
	var p *model.Program
	var err error
	if coll == model.CollAlltoAll {
		p, err = model.GenerateAlltoAllProgram(plan, proto, count, dt, model.P2POptions{})
	} else {
		p, err = model.GenerateProgram(plan, coll, algo, proto, count, dt, rop, model.ProgOptions{NChannels: o.channels, Root: o.root})
	}
	if err != nil {
		return fmt.Errorf("rank %d: %w", rank, err)
	}
	in := make([]byte, p.InCount*es)
	out := make([]byte, p.OutCount*es)
	fill(in, dt, rop, rank, 0)
	for i := 0; i < o.warmup; i++ {
		if _, err := r.Device.Run(p, in, out); err != nil {
			return err
		}
	}
	if err := r.Comm.Barrier(); err != nil {
		return err
	}
	start := time.Now()
	for i := 0; i < o.iters; i++ {
		if _, err := r.Device.Run(p, in, out); err != nil {
			return err
		}
	}
	el := time.Since(start)
	wrong := int64(0)
	if o.check != 0 {
		clear(out)
		if _, err := r.Device.Run(p, in, out); err != nil {
			return err
		}
		wrong = check(p, out, rank, n, o.root, dt, rop, es)
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:], uint64(el))
	binary.LittleEndian.PutUint64(b[8:], uint64(wrong))
	all, err := r.Comm.AllGather(b[:])
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
		fmt.Fprintf(e.stdout, "%12d %12d %8s %6s %6d %10.1f %9.2f %9.2f %7d\n", int64(bytes), count, dt, rop, o.root, per*1e6, algbw, algbw*busFactor(coll, n), wrong)
	}
	if wrong > 0 {
		return fmt.Errorf("%d wrong elements at %d bytes", wrong, size)
	}
	return nil
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
