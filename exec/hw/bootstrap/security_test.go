package bootstrap

import (
	"bufio"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
)

// Attacks on the bootstrap (issue 51), each tried by an attacker
// goroutine or process; the job must refuse it and go on, or fail
// naming the right rank.

// barrierAll runs a barrier on every rank and fails the test on error.
func barrierAll(t *testing.T, comms []*Comm) {
	t.Helper()
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = c.Barrier() }()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// Attack 1 and 5: a process that knows the magic and every address (what
// /proc/net/unix, the logs and a fixed public magic gave away) but not
// the secret, as a client and as an impostor server.
func TestAttackWithoutSecretRefused(t *testing.T) {
	checkGoroutines(t)
	var lb logBuf
	comms := startJob(t, 3, 5*time.Second, true, slog.New(slog.NewTextHandler(&lb, nil)))
	defer closeAll(comms)
	for _, typ := range []uint32{TypeP2P, TypeWatch, TypeRing, TypeNet} {
		_, err := Dial(comms[0].Addr(0), Hello{Magic: comms[0].Magic(), Type: typ, Rank: 1, NRanks: 3}, auth.NewSecret(), time.Now().Add(2*time.Second))
		require.ErrorIs(t, err, auth.ErrDenied, "type %d", typ)
	}
	// A raw client that answers the challenge with a guess.
	c, err := net.Dial("tcp", comms[0].Addr(0))
	require.NoError(t, err)
	defer c.Close()
	hello := Hello{Magic: comms[0].Magic(), Type: TypeP2P, Rank: 1, NRanks: 3}.bytes()
	guess := make([]byte, auth.NonceSize+auth.MACSize)
	_, _ = rand.Read(guess)
	_, err = c.Write(append(hello, guess[:auth.NonceSize]...))
	require.NoError(t, err)
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Read(make([]byte, auth.NonceSize+auth.MACSize))
	require.NoError(t, err)
	_, err = c.Write(guess[auth.NonceSize:])
	require.NoError(t, err)
	_, err = c.Read(make([]byte, 1))
	require.Error(t, err)
	require.False(t, IsTimeout(err), "a wrong proof did not close the connection")
	// An impostor listening where a rank dials learns nothing and is
	// refused by the rank.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			_, _ = ReadHello(c, comms[0].Magic(), auth.NewSecret(), 3, time.Now().Add(2*time.Second))
			c.Close()
		}
	}()
	_, err = Dial(ln.Addr().String(), comms[0].hello(TypeP2P), comms[0].Secret(), time.Now().Add(2*time.Second))
	require.ErrorIs(t, err, auth.ErrDenied)
	barrierAll(t, comms)
	for _, cm := range comms {
		require.NoError(t, cm.Err())
	}
	s := lb.String()
	assert.Contains(t, s, "authentication failed")
	for _, cm := range comms {
		assert.NotContains(t, s, cm.Secret().Hex(), "the log shows the secret")
	}
	id := UniqueID{Magic: 1, Addr: "127.0.0.1:1", Secret: comms[0].Secret()}
	assert.NotContains(t, fmt.Sprint(id.Secret, id.Public()), id.Secret.Hex())
}

// Attack 2: a peer that announces a huge frame, or floods messages nobody
// receives.
func TestAttackBoundedReads(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 2, 5*time.Second, false, nil)
	defer closeAll(comms)
	dial := func() net.Conn {
		c, err := comms[1].Dial(0, TypeP2P)
		require.NoError(t, err)
		return c
	}
	// 1 GiB announced: refused before any allocation.
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	c := dial()
	_, _ = c.Write([]byte{4, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0x40})
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err := c.Read(make([]byte, 1))
	require.False(t, IsTimeout(err), "an oversized frame did not close its connection")
	c.Close()
	// 15 MiB announced (within the bound) but 10 bytes sent: the buffer
	// follows what arrives.
	c = dial()
	_, _ = c.Write([]byte{4, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0xf0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	time.Sleep(100 * time.Millisecond)
	runtime.ReadMemStats(&after)
	c.Close()
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4<<20), "a lying length prefix made the rank allocate")
	t.Logf("a 1 GiB and a lying 15 MiB length prefix: %d KiB allocated", (after.TotalAlloc-before.TotalAlloc)>>10)
	// Unreceived messages are bounded.
	for i := 0; i < MaxQueuedPerPeer+5; i++ {
		require.NoError(t, comms[1].Send(0, uint32(i), []byte("x")))
	}
	require.Eventually(t, func() bool { _, _, d := comms[0].Queued(); return d == 5 }, 3*time.Second, 10*time.Millisecond)
	msgs, bytes, _ := comms[0].Queued()
	assert.Equal(t, MaxQueuedPerPeer, msgs)
	assert.Equal(t, MaxQueuedPerPeer, bytes)
	got, err := comms[0].Recv(1, 3)
	require.NoError(t, err)
	assert.Equal(t, "x", string(got))
}

// Attack 3: forged "rank lost" reports and a second liveness connection
// for a rank that has one. The liar is named, not its victim.
func TestAttackForgedLostReport(t *testing.T) {
	checkGoroutines(t)
	comms, err := StartLocal(3, Config{Timeout: 5 * time.Second, Watch: true, HeartbeatTimeout: 2 * time.Second})
	require.NoError(t, err)
	defer closeAll(comms)
	// A second liveness connection claiming rank 2 (holding the secret:
	// an insider) is refused; rank 2 is not reported.
	c, err := comms[2].Dial(0, TypeWatch)
	require.NoError(t, err)
	_, _ = c.Write([]byte{watchReport, 1, 0, 0, 0})
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Read(make([]byte, 1))
	require.False(t, IsTimeout(err), "a second liveness connection was kept")
	c.Close()
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, comms[0].Err())
	// Rank 1 claims that rank 2, which keeps beating, is lost: rank 0
	// names rank 1.
	w := comms[1].watchOf(0)
	require.NotNil(t, w)
	require.NoError(t, w.write([]byte{watchReport, 2, 0, 0, 0}, time.Second))
	select {
	case <-comms[0].Lost():
	case <-time.After(4 * time.Second):
		t.Fatal("a false report was neither accepted nor refused")
	}
	assert.Equal(t, 1, comms[0].LostPeer())
	assert.Contains(t, comms[0].Err().Error(), "kept its heartbeat")
	require.NoError(t, comms[2].Err(), "the victim of the report")
}

// Attack 6: silent connections to the root (no magic needed) while the
// ranks bootstrap; then a flood of more than MaxPending.
func TestAttackSilentRootConnections(t *testing.T) {
	checkGoroutines(t)
	root, err := StartRoot("127.0.0.1", RandomMagic(), 3, 30*time.Second, nil)
	require.NoError(t, err)
	var silent []net.Conn
	defer func() {
		for _, c := range silent {
			c.Close()
		}
	}()
	for i := 0; i < MaxPending+8; i++ {
		c, err := net.Dial("tcp", root.ID().Addr)
		require.NoError(t, err)
		silent = append(silent, c)
	}
	start := time.Now()
	comms := make([]*Comm, 3)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = Init(Config{Rank: r, NRanks: 3, ID: root.ID(), Host: "127.0.0.1", Timeout: 30 * time.Second})
		}()
	}
	wg.Wait()
	defer closeAll(comms)
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, root.Wait())
	assert.Less(t, time.Since(start), 5*time.Second, "silent connections held up the job")
	ev, _ := root.acc.Counts()
	assert.GreaterOrEqual(t, ev, 8, "the flood was not evicted")
	t.Logf("%d silent connections, %d evicted: 3 ranks bootstrapped in %v", len(silent), ev, time.Since(start))
	barrierAll(t, comms)
}

// Attack 7: a rank's process runs out of file descriptors (EMFILE) while
// connections arrive; once descriptors are free it accepts again.
func TestAttackAcceptSurvivesEMFILE(t *testing.T) {
	checkGoroutines(t)
	comms := startJob(t, 2, 5*time.Second, false, nil)
	defer closeAll(comms)
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	var held []*os.File
	release := func() {
		for _, f := range held {
			f.Close()
		}
		held = nil
	}
	defer release()
	// Use up every descriptor, then connect: accept fails with EMFILE.
	low := lim
	low.Cur = 256
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			break
		}
		held = append(held, f)
	}
	// Free one: the attacker's socket, none left for accept.
	held[len(held)-1].Close()
	held = held[:len(held)-1]
	c, err := net.Dial("tcp", comms[0].Addr(0))
	require.NoError(t, err)
	defer c.Close()
	require.Eventually(t, func() bool { _, r := comms[0].acc.Counts(); return r > 0 }, 3*time.Second, 5*time.Millisecond,
		"accept never failed with EMFILE")
	release()
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	// The listener still serves.
	go func() { _ = comms[1].Send(0, 5, []byte("after EMFILE")) }()
	got, err := comms[0].Recv(1, 5)
	require.NoError(t, err)
	assert.Equal(t, "after EMFILE", string(got))
}

const hungChildEnv = "TWINCCL_BOOTSTRAP_TEST_HUNG"

// TestMain lets the test binary act as a rank process.
func TestMain(m *testing.M) {
	if os.Getenv(hungChildEnv) != "" {
		os.Exit(hungChild())
	}
	os.Exit(m.Run())
}

// hungChild joins as the last rank and idles until killed.
func hungChild() int {
	id, err := ParseUniqueID(os.Getenv(hungChildEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	n, _ := strconv.Atoi(os.Getenv("TEST_NRANKS"))
	hb, _ := time.ParseDuration(os.Getenv("TEST_HEARTBEAT"))
	c, err := Init(Config{Rank: n - 1, NRanks: n, ID: id, Host: "127.0.0.1", Timeout: 10 * time.Second, Watch: true, HeartbeatTimeout: hb})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("joined")
	<-c.Lost()
	return 3
}

// Attack 8: a rank's process is stopped (SIGSTOP): its sockets stay open,
// so only the missing heartbeats show it. Every survivor names it within
// the heartbeat timeout plus one period.
func TestAttackStoppedRankNamed(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	const n = 3
	hb := time.Second
	root, err := StartRoot("127.0.0.1", RandomMagic(), n, 10*time.Second, nil)
	require.NoError(t, err)
	defer root.Close()
	self, err := os.Executable()
	require.NoError(t, err)
	child := exec.Command(self, "-test.run=^$")
	child.Env = append(os.Environ(), hungChildEnv+"="+root.ID().String(), fmt.Sprint("TEST_NRANKS=", n), fmt.Sprint("TEST_HEARTBEAT=", hb))
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	comms := make([]*Comm, n-1)
	errs := make([]error, n-1)
	var wg sync.WaitGroup
	for r := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = Init(Config{Rank: r, NRanks: n, ID: root.ID(), Host: "127.0.0.1", Timeout: 10 * time.Second, Watch: true, HeartbeatTimeout: hb})
		}()
	}
	wg.Wait()
	defer closeAll(comms)
	require.NoError(t, errors.Join(errs...))
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "joined\n", line)
	time.Sleep(2 * hb) // heartbeats flow: nobody is named
	for _, c := range comms {
		require.NoError(t, c.Err())
	}
	stopped := time.Now()
	require.NoError(t, child.Process.Signal(syscall.SIGSTOP))
	defer child.Process.Signal(syscall.SIGCONT)
	bound := hb + hb/HeartbeatsPerTimeout + time.Second
	for r, c := range comms {
		select {
		case <-c.Lost():
		case <-time.After(bound - time.Since(stopped)):
			t.Fatalf("rank %d did not name the stopped rank within %v", r, bound)
		}
		assert.Equal(t, n-1, c.LostPeer(), "rank %d", r)
		assert.ErrorIs(t, c.Err(), ErrNoHeartbeat, "rank %d", r)
	}
	t.Logf("stopped rank named by every survivor after %v (heartbeat timeout %v)", time.Since(stopped), hb)
}

// A bad TWINCCL_HEARTBEAT_TIMEOUT is an error naming the variable, before
// anything listens.
func TestHeartbeatTimeoutFromEnv(t *testing.T) {
	for v, want := range map[string]time.Duration{"": DefaultHeartbeatTimeout, "3s": 3 * time.Second, "2.5": 2500 * time.Millisecond} {
		t.Setenv(EnvHeartbeatTimeout, v)
		d, err := HeartbeatTimeoutFromEnv()
		require.NoError(t, err, v)
		assert.Equal(t, want, d, v)
	}
	for _, v := range []string{"soon", "-1s", "10ms"} {
		t.Setenv(EnvHeartbeatTimeout, v)
		_, err := HeartbeatTimeoutFromEnv()
		require.ErrorContains(t, err, EnvHeartbeatTimeout, v)
		_, err = Init(Config{Rank: 0, NRanks: 1, ID: UniqueID{Addr: "127.0.0.1:1", Secret: auth.NewSecret()}, Host: "127.0.0.1"})
		require.ErrorContains(t, err, EnvHeartbeatTimeout, v)
	}
	_, err := Init(Config{Rank: 0, NRanks: 1, ID: UniqueID{Addr: "127.0.0.1:1"}, Host: "127.0.0.1"})
	require.ErrorContains(t, err, "no secret")
}
