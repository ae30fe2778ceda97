package transport

import (
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// Attacks on the proxy service and the socket transport (issue 51).

// Attack 1: the proxy's socket name, which /proc/net/unix lists for every
// local user, shows neither the job's magic nor its secret.
func TestAttackProxyNameShowsNoSecret(t *testing.T) {
	checkGoroutines(t)
	sets := startSets(t, 2, nil, nil)
	listing, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Skip("not supported: no /proc/net/unix:", err)
	}
	for _, s := range sets {
		name := proxySockName(s.comm.Secret(), s.comm.Magic(), s.comm.Rank())
		require.Contains(t, string(listing), name[1:], "the proxy's socket is not where the test looks")
		assert.NotContains(t, string(listing), fmt.Sprintf("%016x", s.comm.Magic()))
		assert.NotContains(t, string(listing), fmt.Sprintf("%x", s.comm.Magic()&0xffffffff))
		assert.NotContains(t, string(listing), s.comm.Secret().Hex())
	}
}

// Attack 1 and 3: a local client without the secret, and a job member
// (rank 1) that tries to stop rank 0's proxy; the proxy refuses both and
// goes on moving data.
func TestAttackProxyWrongSecretAndStop(t *testing.T) {
	checkGoroutines(t)
	var lb logBuf
	sets := startSets(t, 2, slog.New(slog.NewTextHandler(&lb, nil)), nil)
	keys := []Key{{0, 0, 1, 0}, {0, 1, 0, 0}}
	conns := connectAll(t, sets, keys)
	name := proxySockName(sets[0].comm.Secret(), sets[0].comm.Magic(), 0)
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: name, Net: "unix"})
	require.NoError(t, err)
	h := bootstrap.Hello{Magic: sets[0].comm.Magic(), Type: bootstrap.TypeProxy, Rank: 0, NRanks: 2}
	require.ErrorIs(t, bootstrap.WriteHello(c, h, auth.NewSecret(), time.Now().Add(time.Second)), auth.ErrDenied)
	c.Close()
	// Rank 1 (it holds the secret) asks rank 0's proxy to stop.
	cl, err := DialProxy(sets[1].comm, 0)
	require.NoError(t, err)
	_, err = cl.Call(ProxyStop, nil)
	require.ErrorContains(t, err, "stop refused")
	cl.Close()
	transfer(t, conns[0][0], conns[1][0], 20)
	assert.Contains(t, lb.String(), "proxy: refused connection")
}

const stopChildEnv = "TWINCCL_TRANSPORT_TEST_STOP"

func TestMain(m *testing.M) {
	if v := os.Getenv(stopChildEnv); v != "" {
		os.Exit(stopChild(v))
	}
	os.Exit(m.Run())
}

// stopChild is another process of this user that holds the job's secret
// and claims to be rank 0 to ask rank 0's proxy to stop. It prints the
// response's status.
func stopChild(v string) int {
	var secretHex string
	var magic uint64
	if _, err := fmt.Sscanf(v, "%s %x", &secretHex, &magic); err != nil {
		fmt.Println(err)
		return 2
	}
	secret, err := auth.ParseSecret(secretHex)
	if err != nil {
		fmt.Println(err)
		return 2
	}
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: proxySockName(secret, magic, 0), Net: "unix"})
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer c.Close()
	h := bootstrap.Hello{Magic: magic, Type: bootstrap.TypeProxy, Rank: 0, NRanks: 2}
	if err := bootstrap.WriteHello(c, h, secret, time.Now().Add(2*time.Second)); err != nil {
		fmt.Println(err)
		return 2
	}
	if _, err := c.Write(rawReq(ProxyStop, 0, 1, nil)); err != nil {
		fmt.Println(err)
		return 2
	}
	var resp [proxyRespHeader]byte
	_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(c, resp[:]); err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Printf("status %d\n", binary.LittleEndian.Uint32(resp[8:]))
	return 0
}

// Attack 3: another process of the user, even with the secret and rank
// 0's identity, cannot stop rank 0's proxy: only rank 0's own process can.
func TestAttackProxyStopFromAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("subprocess")
	}
	checkGoroutines(t)
	sets := startSets(t, 2, nil, nil)
	keys := []Key{{0, 0, 1, 0}, {0, 1, 0, 0}}
	conns := connectAll(t, sets, keys)
	self, err := os.Executable()
	require.NoError(t, err)
	c := exec.Command(self, "-test.run=^$")
	c.Env = append(os.Environ(), fmt.Sprintf("%s=%s %x", stopChildEnv, sets[0].comm.Secret().Hex(), sets[0].comm.Magic()))
	out, err := c.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "status 1\n", string(out), "the stop was not refused")
	transfer(t, conns[0][0], conns[1][0], 20)
}

// Attack 1: another local user who learnt the socket's name and even the
// secret is refused by the kernel's word on its uid (SO_PEERCRED).
func TestAttackProxyOtherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not supported: acting as another uid needs root")
	}
	checkGoroutines(t)
	var lb logBuf
	sets := startSets(t, 2, slog.New(slog.NewTextHandler(&lb, nil)), nil)
	comm := sets[1].comm
	name := proxySockName(comm.Secret(), comm.Magic(), 0)
	errc := make(chan error, 1)
	go func() {
		// This thread becomes uid 65534 and dies with the goroutine
		// (it is never unlocked).
		runtime.LockOSThread()
		if _, _, e := syscall.RawSyscall(syscall.SYS_SETRESUID, ^uintptr(0), 65534, ^uintptr(0)); e != 0 {
			errc <- fmt.Errorf("setresuid: %w", e)
			return
		}
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: name, Net: "unix"})
		if err != nil {
			errc <- err
			return
		}
		defer c.Close()
		h := bootstrap.Hello{Magic: comm.Magic(), Type: bootstrap.TypeProxy, Rank: 1, NRanks: 2}
		if err := bootstrap.WriteHello(c, h, comm.Secret(), time.Now().Add(2*time.Second)); err != nil {
			errc <- err
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = io.ReadFull(c, make([]byte, 1))
		errc <- err
	}()
	err := <-errc
	require.Error(t, err, "a client of another uid was served")
	assert.Contains(t, lb.String(), "uid 65534")
}

// Attack 2: the socket transport's data handshake (key, index) from a
// job member that sends garbage is refused; a client that connects and
// stays silent costs only until the handshake deadline.
func TestAttackSocketGarbage(t *testing.T) {
	checkGoroutines(t)
	sets := startSets(t, 2, nil, nil)
	keys := []Key{{0, 0, 1, 0}, {0, 1, 0, 0}}
	conns := connectAll(t, sets, keys)
	for _, payload := range [][]byte{{1, 2, 3}, binary.LittleEndian.AppendUint64(nil, 12345), make([]byte, 12)} {
		c, err := sets[1].comm.Dial(0, bootstrap.TypeNet)
		require.NoError(t, err)
		_, _ = c.Write(payload)
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		b, _ := io.ReadAll(c)
		assert.NotContains(t, string(b), string([]byte{sockAck}), "garbage %v acknowledged", payload)
		c.Close()
	}
	transfer(t, conns[0][0], conns[1][0], 10)
}
