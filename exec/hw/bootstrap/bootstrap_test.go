package bootstrap

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
)

// checkGoroutines fails when goroutines started during the test remain.
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

// startJob bootstraps n ranks in this process.
func startJob(t *testing.T, n int, timeout time.Duration, watch bool, log *slog.Logger) []*Comm {
	t.Helper()
	comms, err := StartLocal(n, Config{Timeout: timeout, Watch: watch, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return comms
}

func closeAll(comms []*Comm) {
	for _, c := range comms {
		if c != nil {
			c.Close()
		}
	}
}

func TestUniqueIDRoundTrip(t *testing.T) {
	u := UniqueID{Magic: 0x0280028002800280, Addr: "127.0.0.1:4242", Secret: auth.NewSecret()}
	v, err := ParseUniqueID(u.String())
	if err != nil || v != u {
		t.Fatalf("round trip %v -> %v, %v", u, v, err)
	}
	sec := "#" + u.Secret.Hex()
	for _, bad := range []string{"", "zz@1.2.3.4:5" + sec, "12" + sec, "12@nohost" + sec, "12@1.2.3.4:5", "12@1.2.3.4:5#00", "12@1.2.3.4:5#zz"} {
		if _, err := ParseUniqueID(bad); err == nil {
			t.Errorf("ParseUniqueID(%q) accepted", bad)
		}
	}
}

func TestAllGatherBarrierP2P(t *testing.T) {
	checkGoroutines(t)
	for _, n := range []int{1, 2, 3, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			comms := startJob(t, n, 10*time.Second, true, nil)
			defer closeAll(comms)
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r := 0; r < n; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs[r] = func() error {
						c := comms[r]
						mine := bytes.Repeat([]byte{byte(r)}, r+1)
						all, err := c.AllGather(mine)
						if err != nil {
							return err
						}
						for p := range all {
							if !bytes.Equal(all[p], bytes.Repeat([]byte{byte(p)}, p+1)) {
								return fmt.Errorf("rank %d: slice %d = %v", r, p, all[p])
							}
						}
						for i := 0; i < 3; i++ {
							if err := c.Barrier(); err != nil {
								return err
							}
						}
						next, prev := (r+1)%n, (r+n-1)%n
						if err := c.Send(next, 7, []byte(fmt.Sprint("hi from ", r))); err != nil {
							return err
						}
						got, err := c.Recv(prev, 7)
						if err != nil {
							return err
						}
						if string(got) != fmt.Sprint("hi from ", prev) {
							return fmt.Errorf("rank %d got %q", r, got)
						}
						return c.Barrier()
					}()
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

// logBuf collects log output safely.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *logBuf) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func TestWrongMagicRefused(t *testing.T) {
	checkGoroutines(t)
	var lb logBuf
	log := slog.New(slog.NewTextHandler(&lb, nil))
	comms := startJob(t, 2, 5*time.Second, false, log)
	defer closeAll(comms)
	// A connection with the wrong magic, or a rank out of range, is
	// refused before the proof: the dialler's handshake fails.
	for _, h := range []Hello{
		{Magic: comms[0].Magic() ^ 1, Type: TypeP2P, Rank: 1, NRanks: 2},
		{Magic: comms[0].Magic(), Type: TypeP2P, Rank: 9, NRanks: 2},
	} {
		_, err := Dial(comms[0].Addr(0), h, comms[0].Secret(), time.Now().Add(300*time.Millisecond))
		require.Error(t, err, "hello %+v accepted", h)
	}
	s := lb.String()
	assert.Contains(t, s, "wrong magic")
	assert.Contains(t, s, "rank 9 of 2")
	assert.NotContains(t, s, fmt.Sprintf("%x", comms[0].Magic()), "a refusal printed the job's magic")
	assert.NotContains(t, s, comms[0].Secret().Hex(), "a refusal printed the job's secret")
	// The job still works.
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); _ = c.Barrier() }()
	}
	wg.Wait()
}

func TestMalformedMessageDropped(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 2, 5*time.Second, false, nil)
	defer closeAll(comms)
	c, err := Dial(comms[0].Addr(0), Hello{Magic: comms[0].Magic(), Type: TypeP2P, Rank: 1, NRanks: 2}, comms[0].Secret(), time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A frame claiming 2 GiB closes only that connection.
	_, _ = c.Write([]byte{0xff, 0xff, 0xff, 0x7f})
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || IsTimeout(err) {
		t.Fatalf("malformed message did not close its connection: %v", err)
	}
	c.Close()
	go func() { _ = comms[1].Send(0, 1, []byte("ok")) }()
	got, err := comms[0].Recv(1, 1)
	if err != nil || string(got) != "ok" {
		t.Fatalf("after a malformed message: %q, %v", got, err)
	}
}

func TestRecvTimeout(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 2, 300*time.Millisecond, false, nil)
	defer closeAll(comms)
	start := time.Now()
	_, err := comms[0].Recv(1, 99)
	if err == nil || !strings.Contains(err.Error(), "rank 1") || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("want a timeout naming rank 1, got %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("timeout took %v", d)
	}
}

func TestMissingRankTimesOut(t *testing.T) {
	checkGoroutines(t)
	root, err := StartRoot("127.0.0.1", RandomMagic(), 3, 400*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := Init(Config{Rank: r, NRanks: 3, ID: root.ID(), Host: "127.0.0.1", Timeout: 400 * time.Millisecond})
			if c != nil {
				c.Close()
			}
			errs[r] = err
		}()
	}
	wg.Wait()
	if err := root.Close(); err == nil {
		t.Error("root did not report the missing rank")
	}
	for r, err := range errs {
		if err == nil {
			t.Errorf("rank %d bootstrapped without rank 2", r)
		}
	}
}

func TestLostPeer(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 4, 5*time.Second, true, nil)
	defer closeAll(comms)
	comms[2].Abort() // as if its process died: no goodbye
	for r, c := range comms {
		if r == 2 {
			continue
		}
		select {
		case <-c.Lost():
		case <-time.After(3 * time.Second):
			t.Fatalf("rank %d did not notice rank 2 was lost", r)
		}
		if c.LostPeer() != 2 || !errors.Is(c.Err(), ErrPeerLost) || !strings.Contains(c.Err().Error(), "rank 2 lost") {
			t.Errorf("rank %d: lost %d, %v", r, c.LostPeer(), c.Err())
		}
		if _, err := c.Recv(2, 1); err == nil || !strings.Contains(err.Error(), "rank 2") {
			t.Errorf("rank %d: Recv after loss: %v", r, err)
		}
	}
}

func TestCleanCloseIsNotLoss(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 3, 5*time.Second, true, nil)
	comms[0].Close()
	time.Sleep(100 * time.Millisecond)
	for _, c := range comms[1:] {
		if err := c.Err(); err != nil {
			t.Errorf("clean close reported as loss: %v", err)
		}
	}
	closeAll(comms[1:])
}

func TestListenAddr(t *testing.T) {
	a, err := ListenAddr("lo")
	if err != nil {
		t.Skip("no loopback interface:", err)
	}
	if ip := net.ParseIP(a); ip == nil || !ip.IsLoopback() {
		t.Errorf("ListenAddr(lo) = %q", a)
	}
	if _, err := ListenAddr("=nosuchif0"); err == nil {
		t.Error("ListenAddr(=nosuchif0) found an interface")
	}
	if a, err := ListenAddr(""); err != nil || net.ParseIP(a) == nil {
		t.Errorf("ListenAddr() = %q, %v", a, err)
	}
}
