package hostdev

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// shmSegments lists twinccl's segments in /dev/shm.
func shmSegments(t *testing.T) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join("/dev/shm", transport.ShmPrefix+"*"))
	return m
}

// checkLeaks fails on goroutines or shm segments left by the test.
func checkLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	segs := len(shmSegments(t))
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
		if s := shmSegments(t); len(s) > segs {
			t.Errorf("shm segments leaked: %v", s)
		}
	})
}

// jobExecutor runs conformance cases on cached local jobs (one per rank
// count), so connections are reused across Programs as in a real job.
type jobExecutor struct {
	name string
	opt  LocalOptions
	jobs map[int]*LocalJob
	t    *testing.T
}

func (e *jobExecutor) Name() string { return e.name }

func (e *jobExecutor) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	j := e.jobs[p.NRanks]
	if j == nil {
		var err error
		if j, err = NewLocalJob(p.NRanks, e.opt); err != nil {
			return nil, err
		}
		e.jobs[p.NRanks] = j
	}
	start := time.Now()
	out, err := j.Execute(p, inputs)
	if d := time.Since(start); d > time.Second && e.t != nil {
		e.t.Logf("slow: %s %s %s n%d c%d count %d: %v", p.Coll, p.Algo, p.Proto, p.NRanks, p.NChannels, p.Count, d)
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

func TestConformanceSHM(t *testing.T) {
	checkLeaks(t)
	e := &jobExecutor{name: "hostdev-shm", jobs: map[int]*LocalJob{}, t: t, opt: LocalOptions{Timeout: 5 * time.Second}}
	defer e.close(t)
	conformance.Run(t, e, testCases(t, 1)...)
}

// testCases is the conformance subset the host device runs by default:
// jobs up to 8 ranks (every rank is a goroutine of this process), every
// every keep-th case. TWINCCL_CONFORMANCE=full runs everything.
func testCases(t *testing.T, keep int) []conformance.Case {
	all := conformance.Cases()
	if os.Getenv("TWINCCL_CONFORMANCE") == "full" {
		return all
	}
	if testing.Short() {
		keep *= 4
	}
	var out []conformance.Case
	for i, c := range all {
		if c.NRanks <= 8 && i%keep == 0 {
			out = append(out, c)
		}
	}
	t.Logf("%d of %d conformance cases", len(out), len(all))
	return out
}

func TestConformanceNet(t *testing.T) {
	checkLeaks(t)
	// Every rank its own host: every connection goes through the socket
	// plugin and the proxy.
	e := &jobExecutor{name: "hostdev-net", jobs: map[int]*LocalJob{}, opt: LocalOptions{HostsOf: func(r int) string { return fmt.Sprint("host", r) }}}
	defer e.close(t)
	conformance.Run(t, e, testCases(t, 12)...)
}

func TestMultiSocket(t *testing.T) {
	checkLeaks(t)
	t.Setenv("TWINCCL_SOCKET_NTHREADS", "2")
	t.Setenv("TWINCCL_NSOCKS_PERTHREAD", "2")
	e := &jobExecutor{name: "hostdev-net4", jobs: map[int]*LocalJob{}, opt: LocalOptions{ForceNet: true}}
	defer e.close(t)
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: 3 << 20}
	if err := conformance.Check(e, c); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutNamesPeer(t *testing.T) {
	checkLeaks(t)
	j, err := NewLocalJob(3, LocalOptions{Timeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range j.Ranks {
			r.Abort()
		}
	}()
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 1, Count: 1 << 16}
	p, err := c.Program()
	if err != nil {
		t.Fatal(err)
	}
	in := conformance.Inputs(c, p)
	// Rank 1 never runs: rank 2 (its successor) must time out naming it.
	errc := make(chan error, 2)
	for _, r := range []int{0, 2} {
		go func() {
			_, err := j.Ranks[r].Device.Run(p, in[r], make([]byte, p.OutCount*4))
			errc <- err
		}()
	}
	for i := 0; i < 2; i++ {
		select {
		case err := <-errc:
			if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "from rank 1") {
				t.Errorf("want a timeout naming rank 1, got %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("run did not time out")
		}
	}
}

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	os.Exit(m.Run())
}

// TestNetLLByFlags runs LL and LL128 over the net transport: the proxy
// stores received lines and the device consumes them by their flags, so
// the receivers' tail counters never move; every received message was
// flushed first.
func TestNetLLByFlags(t *testing.T) {
	checkLeaks(t)
	var flushes atomic.Int64
	flush := func(c *transport.Conn, step uint64, data []byte) error {
		flushes.Add(1)
		return nil
	}
	e := &jobExecutor{name: "hostdev-net-ll", jobs: map[int]*LocalJob{}, opt: LocalOptions{ForceNet: true, Flush: flush}}
	defer e.close(t)
	for _, proto := range []model.Protocol{model.ProtoLL, model.ProtoLL128} {
		c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: proto, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: 100_003}
		if err := conformance.Check(e, c); err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
	}
	j := e.jobs[3]
	var received, flushed uint64
	for r, rk := range j.Ranks {
		c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: 100_003}
		p, err := c.Program()
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range transport.ProgramKeys(p) {
			if k.To != r {
				continue
			}
			conn := rk.Set.Get(k)
			cnt, ok := conn.NetCounters()
			if !ok {
				t.Fatalf("%v is not a net connection", k)
			}
			if tail := conn.Mem.Tail(); tail != 0 {
				t.Errorf("%v: tail moved to %d on an LL-only connection", k, tail)
			}
			if cnt.Done == 0 || cnt.Done != cnt.Received {
				t.Errorf("%v: counters %+v", k, cnt)
			}
			received += cnt.Done
			flushed += cnt.Flushes
		}
	}
	if flushed == 0 || int64(flushed) != flushes.Load() {
		t.Errorf("%d flushes counted by the proxies, %d by the hook (%d steps received)", flushed, flushes.Load(), received)
	}
}
