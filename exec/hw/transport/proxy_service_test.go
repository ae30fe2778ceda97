package transport

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
)

type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf[:runtime.Stack(buf, true)])
		}
	})
}

// startSets bootstraps n ranks on loopback, every rank its own host (so
// that connections go through the net transport), with a shared log.
func startSets(t *testing.T, n int, log *slog.Logger, flush FlushFunc) []*Set {
	t.Helper()
	return startSetsWith(t, n, setsOpt{log: log, flush: flush})
}

// setsOpt shapes startSetsWith: timeout bounds every operation (5 s when
// 0), net gives rank r's plugin (the socket plugin when nil).
type setsOpt struct {
	log     *slog.Logger
	flush   FlushFunc
	timeout time.Duration
	net     func(r int) Plugin
}

func startSetsWith(t *testing.T, n int, o setsOpt) []*Set {
	t.Helper()
	log, flush := o.log, o.flush
	if o.timeout == 0 {
		o.timeout = 5 * time.Second
	}
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), n, o.timeout, log)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	sets := make([]*Set, n)
	errs := make([]error, n)
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = string(rune('a' + i))
	}
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comm, err := bootstrap.Init(bootstrap.Config{Rank: r, NRanks: n, ID: root.ID(), Host: "127.0.0.1", Timeout: o.timeout, Log: log})
			if err != nil {
				errs[r] = err
				return
			}
			var plugin Plugin
			if o.net != nil {
				plugin = o.net(r)
			}
			sets[r], errs[r] = NewSet(comm, Config{HostIDs: hosts, Log: log, Flush: flush, Net: plugin})
			if errs[r] != nil {
				comm.Abort()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range sets {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.Close(); err != nil {
					t.Error(err)
				}
				s.comm.Close()
			}()
		}
		wg.Wait()
	})
	return sets
}

// connectAll runs Set.Connect on every rank at once.
func connectAll(t *testing.T, sets []*Set, keys []Key) [][]*Conn {
	t.Helper()
	out := make([][]*Conn, len(sets))
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for r, s := range sets {
		wg.Add(1)
		go func() { defer wg.Done(); out[r], errs[r] = s.Connect(keys) }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// transfer pushes steps Simple steps of data through a connection by
// hand, as the device does: the sender writes the slot, its fifo entry
// and the tail; the receiver waits for the tail and releases the head.
func transfer(t *testing.T, snd, rcv *Conn, steps int) {
	t.Helper()
	const size = 4096
	deadline := time.Now().Add(5 * time.Second)
	for st := 0; st < steps; st++ {
		abs := snd.Step + uint64(st)
		slot := int(abs % model.ProgSlots)
		for snd.Mem.Head()+model.ProgSlots < abs+1 {
			if time.Now().After(deadline) {
				t.Fatalf("no credit for step %d", abs)
			}
			runtime.Gosched()
		}
		data := snd.Mem.Slot(model.ProtoSimple, slot)[:size]
		for i := range data {
			data[i] = byte(int(abs) + i)
		}
		snd.Mem.SetFifo(slot, FifoEntry{Size: size, Wire: size, Step: int64(abs), Steps: 1, Proto: int32(model.ProtoSimple)})
		snd.Mem.SetTail(abs + 1)
		snd.Notify()
		for rcv.Mem.Tail() < abs+1 {
			if time.Now().After(deadline) {
				t.Fatalf("step %d did not arrive", abs)
			}
			runtime.Gosched()
		}
		got := rcv.Mem.Slot(model.ProtoSimple, slot)[:size]
		for i := range got {
			if got[i] != byte(int(abs)+i) {
				t.Fatalf("step %d byte %d = %d", abs, i, got[i])
			}
		}
		rcv.Mem.SetHead(abs + 1)
		rcv.Notify()
	}
	snd.Step += uint64(steps)
	rcv.Step += uint64(steps)
}

// rawClient opens a proxy connection with a correct handshake from rank
// `from` and returns it without the client's framing.
func rawClient(t *testing.T, s *Set, from int, magic uint64) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: proxySockName(s.comm.Secret(), s.comm.Magic(), s.comm.Rank()), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	h := bootstrap.Hello{Magic: magic, Type: bootstrap.TypeProxy, Rank: uint32(from), NRanks: uint32(s.comm.NRanks())}
	if err := bootstrap.WriteHello(c, h, s.comm.Secret(), time.Now().Add(time.Second)); err != nil && magic == s.comm.Magic() {
		t.Fatal(err)
	}
	return c
}

func rawReq(typ ProxyMsg, size uint32, opID uint64, payload []byte) []byte {
	b := make([]byte, proxyReqHeader, proxyReqHeader+len(payload))
	binary.LittleEndian.PutUint32(b[0:], uint32(typ))
	binary.LittleEndian.PutUint32(b[4:], size)
	binary.LittleEndian.PutUint64(b[8:], opID)
	return append(b, payload...)
}

// expectClosed waits for the service to close c (reads give EOF after
// any responses it sent first).
func expectClosed(t *testing.T, c *net.UnixConn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err != nil {
		t.Errorf("%s: connection not closed by the proxy: %v", what, err)
	}
	c.Close()
}

func TestProxyMalformedClosesOnlyThatConnection(t *testing.T) {
	checkGoroutines(t)
	var lb logBuf
	log := slog.New(slog.NewTextHandler(&lb, nil))
	sets := startSets(t, 2, log, nil)
	keys := []Key{{0, 0, 1, 0}, {0, 1, 0, 0}}
	conns := connectAll(t, sets, keys)
	transfer(t, conns[0][0], conns[1][0], 20)
	svc := sets[0].svc
	magic := sets[0].comm.Magic()

	// A connection with the wrong magic is refused.
	c := rawClient(t, sets[0], 1, magic^1)
	expectClosed(t, c, "wrong magic")

	initNet := initReq(KindNet, false, 1, Key{7, 1, 0, 0})
	cases := []struct {
		name string
		msgs [][]byte
	}{
		{"bad type", [][]byte{rawReq(99, 0, 1, nil)}},
		{"type zero", [][]byte{rawReq(0, 0, 1, nil)}},
		{"oversized", [][]byte{rawReq(ProxySetup, MaxProxyRequest+1, 1, nil)}},
		{"bad length", [][]byte{rawReq(ProxySetup, 3, 1, []byte{1, 2, 3})}},
		{"short connect", [][]byte{rawReq(ProxyConnect, 2, 1, []byte{1, 2})}},
		{"op id zero", [][]byte{rawReq(ProxySharedInit, 0, 0, nil)}},
		// An op id reused while its Connect waits for a peer that never
		// comes: the listener it owned is released with it.
		{"op id in flight", [][]byte{
			rawReq(ProxyInit, uint32(len(initNet)), 1, initNet),
			rawReq(ProxySharedInit, 0, 2, nil),
			rawReq(ProxySetup, 8, 3, binary.LittleEndian.AppendUint64(nil, 3)), // id 3: the set made 2
			rawReq(ProxyConnect, 8, 4, binary.LittleEndian.AppendUint64(nil, 3)),
			rawReq(ProxyClose, 8, 4, binary.LittleEndian.AppendUint64(nil, 3)),
		}},
	}
	for i, tc := range cases {
		c := rawClient(t, sets[0], 1, magic)
		for _, m := range tc.msgs {
			if _, err := c.Write(m); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		expectClosed(t, c, tc.name)
		deadline := time.Now().Add(3 * time.Second)
		for svc.Malformed.Load() != int64(i+1) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if got := svc.Malformed.Load(); got != int64(i+1) {
			t.Fatalf("%s: %d malformed connections counted, want %d", tc.name, got, i+1)
		}
		// Everything else goes on: the existing connections move data and
		// new ones connect through the same proxy.
		transfer(t, conns[0][0], conns[1][0], 3)
		transfer(t, conns[1][1], conns[0][1], 3)
	}
	more := connectAll(t, sets, []Key{{1, 0, 1, 0}, {1, 1, 0, 0}})
	transfer(t, more[0][0], more[1][0], 10)
	transfer(t, more[1][1], more[0][1], 10)
	svc.mu.Lock()
	left := len(svc.conns)
	svc.mu.Unlock()
	if left != 4 {
		t.Errorf("proxy holds %d connections, want the set's 4 (the bad client's were released)", left)
	}
	logs := lb.String()
	if strings.Count(logs, "malformed message") != len(cases) || !strings.Contains(logs, "unknown message type 99") ||
		!strings.Contains(logs, "still in flight") || !strings.Contains(logs, "wrong magic") {
		t.Errorf("log does not report every refused connection:\n%s", logs)
	}
}

func TestProxyResponsesQueuedByOpID(t *testing.T) {
	checkGoroutines(t)
	sets := startSets(t, 2, nil, nil)
	c0, err := DialProxy(sets[0].comm, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	c1, err := DialProxy(sets[1].comm, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	k := Key{3, 1, 0, 0}
	call := func(c *ProxyClient, typ ProxyMsg, req []byte) []byte {
		t.Helper()
		resp, err := c.Call(typ, req)
		if err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		return resp
	}
	rid := binary.LittleEndian.AppendUint64(nil, binary.LittleEndian.Uint64(call(c0, ProxyInit, initReq(KindNet, false, 1, k))))
	sid := binary.LittleEndian.AppendUint64(nil, binary.LittleEndian.Uint64(call(c1, ProxyInit, initReq(KindNet, true, 0, k))))
	if name := call(c0, ProxySharedInit, nil); string(name) != "Socket" {
		t.Errorf("shared init answered %q", name)
	}
	call(c1, ProxySharedInit, nil)
	handle := call(c0, ProxySetup, rid)
	// A: the receiver's connect, answered once the sender connected.
	a, err := c0.CallAsync(ProxyConnect, rid)
	if err != nil {
		t.Fatal(err)
	}
	// B: answered at once, before A.
	b, err := c0.CallAsync(ProxyInit, initReq(KindNet, true, 1, Key{4, 0, 1, 0}))
	if err != nil {
		t.Fatal(err)
	}
	sent := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		_, err := c1.Call(ProxyConnect, append(append([]byte(nil), sid...), handle...))
		sent <- err
	}()
	if _, _, err := c0.Wait(a); err != nil {
		t.Fatal(err)
	}
	if err := <-sent; err != nil {
		t.Fatal(err)
	}
	if c0.Queued != 1 {
		t.Errorf("%d responses queued while waiting for op %d, want 1 (op %d)", c0.Queued, a, b)
	}
	resp, _, err := c0.Wait(b)
	if err != nil || len(resp) != 8 {
		t.Fatalf("queued response of op %d: %q, %v", b, resp, err)
	}
	// Errors are answers, not broken connections.
	if _, err := c0.Call(ProxyClose, binary.LittleEndian.AppendUint64(nil, 999)); err == nil || !strings.Contains(err.Error(), "no proxy connection 999") {
		t.Errorf("close of an unknown id: %v", err)
	}
	call(c0, ProxyClose, rid)
	call(c0, ProxyClose, resp)
	call(c1, ProxyClose, sid)
	if n := sets[0].svc.Malformed.Load(); n != 0 {
		t.Errorf("%d malformed connections", n)
	}
}

func TestProgressFlushHook(t *testing.T) {
	checkGoroutines(t)
	var mu sync.Mutex
	flushed := map[uint64]int{}
	var early []string
	flush := func(c *Conn, step uint64, data []byte) error {
		mu.Lock()
		defer mu.Unlock()
		flushed[step] += len(data)
		// The flush runs before the device may see the step.
		if c.Mem.Tail() > step {
			early = append(early, c.Key.String())
		}
		return nil
	}
	sets := startSets(t, 2, nil, flush)
	conns := connectAll(t, sets, []Key{{0, 0, 1, 0}})
	transfer(t, conns[0][0], conns[1][0], 25)
	mu.Lock()
	defer mu.Unlock()
	if len(flushed) != 25 || len(early) != 0 {
		t.Errorf("flushes of %d steps (want 25), %d after the tail moved", len(flushed), len(early))
	}
	for st, n := range flushed {
		if n != 4096 {
			t.Errorf("step %d: flushed %d bytes, want 4096", st, n)
		}
	}
	cnt, ok := conns[1][0].NetCounters()
	if !ok || cnt.Flushes != 25 || cnt.Done != 25 || cnt.Received != 25 {
		t.Errorf("receiver counters %+v", cnt)
	}
	for end := time.Now().Add(time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
		if cnt, _ := conns[0][0].NetCounters(); cnt.Done == 25 {
			break
		}
	}
	if cnt, _ := conns[0][0].NetCounters(); cnt.Done != 25 || cnt.Transmitted != 25 {
		t.Errorf("sender counters %+v", cnt)
	}
}

// TestNetStepsAllocateNothing: once a net connection over the socket
// plugin runs, a step allocates nothing, in either proxy, whether the
// proxies block between steps (woken by Notify and the plugin) or poll
// (PollCounters, as with a GPU). Garbage made per message gives the
// collector work during long runs of collectives; its pauses showed on
// the GPUs as whole timed repetitions of small collectives running
// microseconds a call slower (6 allocations a step before requests were
// reused).
func TestNetStepsAllocateNothing(t *testing.T) {
	for _, polled := range []bool{false, true} {
		t.Run(fmt.Sprintf("polled=%v", polled), func(t *testing.T) {
			sets := startSets(t, 2, nil, nil)
			conns := connectAll(t, sets, []Key{{0, 0, 1, 0}})
			if polled {
				for _, s := range sets {
					s.Proxy().PollCounters()
				}
			}
			snd, rcv := conns[0][0], conns[1][0]
			transfer(t, snd, rcv, 2*model.ProgSlots) // past the first use of every slot
			runs := 400
			if polled {
				runs = 100 // slow on a 2-core machine: the proxies spin
			}
			if a := testing.AllocsPerRun(runs, func() { transfer(t, snd, rcv, 1) }); a != 0 {
				t.Errorf("%v allocations a step, want none", a)
			}
		})
	}
}

// TestNapEndsOnWake: in polled mode the idle progress loop naps instead
// of sleeping, so that a Notify (a launch) ends the nap at once rather
// than after a timer tick; a nap of a minute must end on a wake-up, and
// one without a wake-up must end with its timer.
func TestNapEndsOnWake(t *testing.T) {
	p := &progress{kick: make(chan struct{}, 1), stopCh: make(chan struct{})}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	go func() {
		time.Sleep(10 * time.Millisecond)
		p.wake()
	}()
	start := time.Now()
	if end := p.nap(timer, time.Minute); end != napWoken {
		t.Fatalf("a nap ended by %d, not by the wake-up", end)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("a wake-up ended a nap of a minute after %v", d)
	}
	if end := p.nap(timer, time.Millisecond); end != napExpired {
		t.Fatalf("a nap without a wake-up ended by %d, not by its timer", end)
	}
}
