package gpudev

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/traces"
)

// gpus returns every GPU's context, or skips the test when there is none
// (and fails it when TWINCCL_REQUIRE_GPU=1 says there must be).
func gpus(t testing.TB) []*cuda.Context {
	t.Helper()
	ctxs, err := Contexts()
	if err != nil {
		if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" {
			t.Fatalf("TWINCCL_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	return ctxs
}

type jobExecutor struct {
	ctxs []*cuda.Context
	jobs map[int]*LocalJob
	// timeout and opts are the jobs' NewLocalJobOptions arguments (0: 5 s).
	timeout time.Duration
	opts    LocalOptions
}

func (e *jobExecutor) Name() string { return "gpudev" }

func (e *jobExecutor) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	j := e.jobs[p.NRanks]
	if j == nil {
		var err error
		timeout := e.timeout
		if timeout == 0 {
			timeout = 5 * time.Second
		}
		if j, err = NewLocalJobOptions(p.NRanks, e.ctxs, timeout, nil, e.opts); err != nil {
			return nil, err
		}
		e.jobs[p.NRanks] = j
	}
	out, err := j.Execute(p, inputs)
	if err != nil {
		// A failed launch leaves the job aborted: start the next case afresh.
		j.Close()
		delete(e.jobs, p.NRanks)
	}
	return out, err
}

func (e *jobExecutor) close(t *testing.T) {
	for _, j := range e.jobs {
		if err := j.Close(); err != nil {
			t.Error(err)
		}
	}
}

// TestConformance runs the conformance suite's jobs of up to 8 ranks, every
// rank a goroutine of this process with its own stream, ranks spread over
// the GPUs (several ranks share a GPU when there are more ranks).
func TestConformance(t *testing.T) {
	ctxs := gpus(t)
	arch, err := ctxs[0].Device().Arch()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := Precompile(arch); err != nil {
		t.Fatal(err)
	}
	t.Logf("interpreters for every datatype and reduction ready in %v", time.Since(start).Round(time.Millisecond))
	e := &jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	defer e.close(t)
	var cases []conformance.Case
	for _, c := range conformance.Cases() {
		// NVLS Programs need multicast objects: Prepare refuses them
		// (TestNVLSRefused), our GPU machines must not create them.
		if c.NRanks <= 8 && c.Algo != model.AlgoNVLS && c.Algo != model.AlgoNVLSTree {
			cases = append(cases, c)
		}
	}
	t.Logf("%d conformance cases on %d GPU(s)", len(cases), len(ctxs))
	start = time.Now()
	conformance.Run(t, e, cases...)
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
}

func allReduceCase(proto model.Protocol, n int, count int64) conformance.Case {
	return conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: proto, Dtype: model.DtypeFP32, Op: model.RedSum,
		NRanks: n, NChannels: 2, Count: count}
}

// TestGraphReplay captures several launches of one Program in a CUDA graph
// and replays it with new inputs each time: the step counters live in GPU
// memory, so replays must not see the flags or tails of earlier ones.
func TestGraphReplay(t *testing.T) {
	graphReplay(t, gpus(t), model.ProtoLL, model.ProtoLL128, model.ProtoSimple)
}

// graphReplay runs replayRank on both ranks of a 2-rank job, once per
// protocol, on a 100,003-element AllReduce.
func graphReplay(t *testing.T, ctxs []*cuda.Context, protos ...model.Protocol) {
	for _, proto := range protos {
		t.Run(proto.String(), func(t *testing.T) {
			j, err := NewLocalJob(2, ctxs, 20*time.Second, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Close()
			c := allReduceCase(proto, 2, 100_003)
			p, err := c.Program()
			if err != nil {
				t.Fatal(err)
			}
			nb := uint64(p.InCount * 4)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for r := 0; r < 2; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = replayRank(j.Devices[r], p, nb, r)
				}()
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func replayRank(d *Device, p *model.Program, nb uint64, r int) error {
	ctx := d.Context()
	l, err := d.Prepare(p, false)
	if err != nil {
		return err
	}
	defer l.Release()
	in, err := ctx.MemAlloc(nb)
	if err != nil {
		return err
	}
	defer ctx.MemFree(in)
	out, err := ctx.MemAlloc(nb)
	if err != nil {
		return err
	}
	defer ctx.MemFree(out)
	s := d.Stream()
	runtime.LockOSThread() // a capture begins and ends on one OS thread
	defer runtime.UnlockOSThread()
	if err := s.BeginCapture(cuda.CaptureModeThreadLocal); err != nil {
		return err
	}
	for i := 0; i < 3; i++ {
		if err := l.Enqueue(s, in, out); err != nil {
			s.EndCapture()
			return err
		}
	}
	g, err := s.EndCapture()
	if err != nil {
		return err
	}
	defer g.Destroy()
	x, err := g.Instantiate(0)
	if err != nil {
		return err
	}
	defer x.Destroy()
	n := int(nb / 4)
	host := make([]float32, n)
	for rep := 0; rep < 4; rep++ {
		for i := range host {
			host[i] = float32((i%1000)*(r+1) + rep)
		}
		if err := ctx.MemcpyHtoD(in, cuda.AsBytes(host)); err != nil {
			return err
		}
		if err := d.comm.Barrier(); err != nil {
			return err
		}
		if err := x.Launch(s); err != nil {
			return err
		}
		if err := s.Synchronize(); err != nil {
			return err
		}
		if err := l.Check(); err != nil {
			return err
		}
		got := make([]float32, n)
		if err := ctx.MemcpyDtoH(cuda.AsBytes(got), out); err != nil {
			return err
		}
		for i := range got {
			want := float32((i%1000)*3 + 2*rep)
			if got[i] != want {
				return fmt.Errorf("rank %d replay %d: element %d = %v, want %v", r, rep, i, got[i], want)
			}
		}
	}
	return nil
}

// TestNoMemoryLeak runs 1,000 collectives (each prepared, run and
// released) and checks that the GPU's free memory comes back.
func TestNoMemoryLeak(t *testing.T) {
	ctxs := gpus(t)
	j, err := NewLocalJob(2, ctxs, 20*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	c := allReduceCase(model.ProtoLL, 2, 4096)
	p, _ := c.Program()
	inputs := conformance.Inputs(c, p)
	if _, err := j.Execute(p, inputs); err != nil { // connections set up
		t.Fatal(err)
	}
	before, _, err := ctxs[0].MemGetInfo()
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		if _, err := j.Execute(p, inputs); err != nil {
			t.Fatalf("collective %d: %v", i, err)
		}
	}
	after, _, _ := ctxs[0].MemGetInfo()
	if after+(2<<20) < before {
		t.Errorf("free GPU memory went from %d to %d bytes over 1,000 collectives", before, after)
	}
}

const childEnv = "TWINCCL_GPUDEV_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// childMain is one rank process of the multi-process tests: it joins the
// job, runs AllReduce in every protocol and checks the sums; with
// TEST_LOOP set it then loops until it fails (the killed-peer test).
func childMain() int {
	rank, _ := strconv.Atoi(os.Getenv("TEST_RANK"))
	n, _ := strconv.Atoi(os.Getenv("TEST_NRANKS"))
	id, err := bootstrap.ParseUniqueID(os.Getenv("TEST_UID"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	comm, err := bootstrap.Init(bootstrap.Config{Rank: rank, NRanks: n, ID: id, Host: "127.0.0.1", Timeout: 5 * time.Second, Watch: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctxs, err := Contexts()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	d, err := New(comm, ctxs[rank%len(ctxs)])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer d.Close()
	for _, proto := range []model.Protocol{model.ProtoLL, model.ProtoLL128, model.ProtoSimple} {
		c := allReduceCase(proto, n, 1<<20+3)
		p, _ := c.Program()
		if proto == model.ProtoLL128 && d.checkTransport(p) != nil {
			continue // refused over SHM and NET
		}
		out, err := d.RunHost(p, conformance.Inputs(c, p)[rank])
		if err != nil {
			fmt.Fprintln(os.Stderr, "ERROR:", err)
			return 3
		}
		want, _ := conformance.Expected(c, p)
		if !bytes.Equal(out, want[rank]) {
			fmt.Fprintf(os.Stderr, "ERROR: %s AllReduce: wrong result\n", proto)
			return 4
		}
	}
	if os.Getenv("TEST_OPS") != "" {
		for _, c := range processCases(n) {
			p, err := c.Program()
			if err != nil {
				fmt.Fprintln(os.Stderr, "ERROR:", c, err)
				return 6
			}
			if d.checkTransport(p) != nil {
				continue
			}
			out, err := d.RunHost(p, conformance.Inputs(c, p)[rank])
			if err != nil {
				fmt.Fprintln(os.Stderr, "ERROR:", c, err)
				return 3
			}
			if want, defined := conformance.Expected(c, p); defined[rank] && !bytes.Equal(out, want[rank]) {
				fmt.Fprintf(os.Stderr, "ERROR: %s: wrong result\n", c)
				return 4
			}
		}
	}
	fmt.Println("ok")
	if os.Getenv("TEST_LOOP") == "" {
		comm.Barrier()
		comm.Close()
		return 0
	}
	c := allReduceCase(model.ProtoSimple, n, 64<<20)
	p, _ := c.Program()
	in := conformance.Inputs(c, p)[rank]
	for i := 0; ; i++ {
		if _, err := d.RunHost(p, in); err != nil {
			fmt.Fprintln(os.Stderr, "ERROR:", err)
			comm.Abort()
			return 5
		}
		if i == 0 {
			fmt.Println("running")
		}
	}
}

// processCases are the cases rank processes run with TEST_OPS set: every
// collective, algorithm and protocol of Programs and of the p2p path
// (LL128 is skipped where the transport refuses it).
func processCases(n int) []conformance.Case {
	var out []conformance.Case
	for k, cb := range append(conformance.Combos(), conformance.P2PCombos()...) {
		out = append(out, conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
			Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: n, NChannels: 2, Count: 65_537 + int64(k)*1001, Root: k % n})
	}
	return out
}

func startChildren(t *testing.T, n int, loop bool) ([]*exec.Cmd, []*bytes.Buffer, []*bytes.Buffer, *bootstrap.Root) {
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), n, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []*exec.Cmd
	var outs, errs []*bytes.Buffer
	for r := 0; r < n; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", fmt.Sprintf("TEST_RANK=%d", r), fmt.Sprintf("TEST_NRANKS=%d", n),
			"TEST_UID="+root.ID().String())
		if loop {
			cmd.Env = append(cmd.Env, "TEST_LOOP=1")
		}
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs, errs = append(cmds, cmd), append(outs, &o), append(errs, &e)
	}
	return cmds, outs, errs, root
}

// TestProcesses runs ranks as separate processes: connection memory is
// shared through CUDA IPC handles sent over the bootstrap.
func TestProcesses(t *testing.T) {
	ctxs := gpus(t)
	n := max(2, len(ctxs))
	cmds, outs, errs, root := startChildren(t, n, false)
	defer root.Close()
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[r].String(), "ok") {
			t.Errorf("rank %d: %v\nstdout: %s\nstderr: %s", r, err, outs[r], errs[r])
		}
	}
}

// TestSHM runs connections through host memory (P2P disabled): the
// conformance cases of up to 4 ranks except LL128 (refused over SHM, as
// NCCL does), and two rank processes; no /dev/shm file may be left.
func TestSHM(t *testing.T) {
	ctxs := gpus(t)
	t.Setenv("TWINCCL_P2P_DISABLE", "1")
	e := &jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	var cases []conformance.Case
	for i, c := range conformance.Cases() {
		if c.NRanks <= 4 && c.Proto != model.ProtoLL128 && i%3 == 0 {
			cases = append(cases, c)
		}
	}
	t.Logf("%d conformance cases over SHM", len(cases))
	conformance.Run(t, e, cases...)
	e.close(t)
	checkLL128Refused(t, ctxs, "SHM")
	cmds, outs, errs, root := startChildren(t, 2, false)
	defer root.Close()
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[r].String(), "ok") {
			t.Errorf("rank %d: %v\nstdout: %s\nstderr: %s", r, err, outs[r], errs[r])
		}
	}
	left, _ := filepath.Glob(filepath.Join(shmDir, "twgpu-*"))
	if len(left) > 0 {
		t.Errorf("shared memory left behind: %v", left)
	}
}

// TestKilledPeer kills one rank process in the middle of a collective:
// the other must fail within its timeout, naming the lost rank.
func TestKilledPeer(t *testing.T) {
	ctxs := gpus(t)
	killedPeer(t, max(2, len(ctxs)))
}

// killedPeer starts n looping rank processes, kills rank 1 once it runs
// and checks that rank 0 fails within its timeout naming rank 1.
func killedPeer(t *testing.T, n int) {
	t.Helper()
	cmds, outs, errs, root := startChildren(t, n, true)
	defer root.Close()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(outs[1].String(), "running") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(outs[1].String(), "running") {
		for _, c := range cmds {
			c.Process.Kill()
		}
		t.Fatalf("rank 1 never ran: %s", errs[1])
	}
	time.Sleep(50 * time.Millisecond)
	killed := time.Now()
	cmds[1].Process.Signal(syscall.SIGKILL)
	cmds[1].Wait()
	done := make(chan error, 1)
	go func() { done <- cmds[0].Wait() }()
	select {
	case err := <-done:
		t.Logf("rank 0 exited %v after the kill: %v: %s", time.Since(killed).Round(time.Millisecond), err, strings.TrimSpace(errs[0].String()))
		if !strings.Contains(errs[0].String(), "rank 1") {
			t.Errorf("rank 0's error does not name rank 1: %s", errs[0])
		}
	case <-time.After(20 * time.Second):
		cmds[0].Process.Kill()
		t.Fatal("rank 0 still running 20 s after rank 1 was killed")
	}
	for _, c := range cmds[2:] {
		c.Wait()
	}
}

// TestDeviceTrace runs a traced launch: every slice of every lane gets
// %globaltimer stamps in order, and the traced bytes add up to what the
// Program moves through the rank's send connections.
func TestDeviceTrace(t *testing.T) {
	ctxs := gpus(t)
	j, err := NewLocalJob(2, ctxs, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	for _, proto := range []model.Protocol{model.ProtoLL, model.ProtoSimple} {
		c := allReduceCase(proto, 2, 1<<20)
		p, _ := c.Program()
		var wg sync.WaitGroup
		stamps := make([][]SliceTrace, 2)
		errs := make([]error, 2)
		for r := 0; r < 2; r++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := j.Devices[r]
				l, err := d.Prepare(p, true)
				if err != nil {
					errs[r] = err
					return
				}
				defer l.Release()
				nb := uint64(p.InCount * 4)
				buf, err := d.ctx.MemAlloc(2 * nb)
				if err != nil {
					errs[r] = err
					return
				}
				defer d.ctx.MemFree(buf)
				if errs[r] = l.Run(buf, buf.Add(nb)); errs[r] == nil {
					stamps[r], errs[r] = l.Trace()
				}
				if errs[r] == nil {
					var rows []traces.EventRow
					if rows, errs[r] = l.EventRows(7, 1); errs[r] == nil && len(rows) != len(stamps[r]) {
						errs[r] = fmt.Errorf("%d event rows for %d slices", len(rows), len(stamps[r]))
					}
				}
			}()
		}
		wg.Wait()
		for r := 0; r < 2; r++ {
			if errs[r] != nil {
				t.Fatal(errs[r])
			}
			want := 0
			sent := int64(0)
			var sl []model.ProgSlice
			for _, ln := range p.Lanes {
				if int(ln.Rank) != r {
					continue
				}
				want += countSlices(p, &ln)
				for _, op := range ln.Ops {
					if op.Kind.Sends() {
						for _, s := range p.Slices(op, sl[:0]) {
							sent += s.Elems * 4
						}
					}
				}
			}
			if len(stamps[r]) != want {
				t.Fatalf("%s rank %d: %d traced slices, want %d", proto, r, len(stamps[r]), want)
			}
			got := int64(0)
			for _, s := range stamps[r] {
				if s.Start == 0 || s.Start > s.DataStart || s.DataStart > s.End {
					t.Fatalf("%s rank %d: slice %+v stamps out of order", proto, r, s)
				}
				if s.Kind.Sends() {
					got += s.Bytes
				}
			}
			if got != sent {
				t.Errorf("%s rank %d: traced %d bytes sent, the Program sends %d", proto, r, got, sent)
			}
		}
	}
}

// checkLL128Refused runs a 2-rank LL128 AllReduce, which the transports of
// the environment (over, for the message) must refuse naming LL128, and
// returns the job's Close error.
func checkLL128Refused(t *testing.T, ctxs []*cuda.Context, over string) error {
	t.Helper()
	c := allReduceCase(model.ProtoLL128, 2, 100)
	p, _ := c.Program()
	j, err := NewLocalJob(2, ctxs, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = j.Execute(p, conformance.Inputs(c, p))
	cerr := j.Close()
	if err == nil || !strings.Contains(err.Error(), "LL128") {
		t.Errorf("LL128 over %s: got %v, want a refusal naming LL128", over, err)
	}
	return cerr
}
