package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// Attacks on a job of the launcher and of external launchers (issue 51).

// envTestLauncher makes the test binary act as run (a launcher process
// the test can signal).
const envTestLauncher = "TWINCCL_TEST_LAUNCHER"

func init() {
	if os.Getenv(envTestLauncher) != "" && os.Getenv(envUID) == "" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// rankPids waits for n rank marks and returns the ranks' pids.
func rankPids(t *testing.T, dir string, n int) []int {
	t.Helper()
	var pids []int
	require.Eventually(t, func() bool {
		pids = pids[:0]
		for r := 0; r < n; r++ {
			b, err := os.ReadFile(filepath.Join(dir, "rank"+strconv.Itoa(r)))
			if err != nil || len(b) == 0 {
				return false
			}
			p, _ := strconv.Atoi(string(b))
			pids = append(pids, p)
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "ranks did not start")
	return pids
}

// Attack 8: a rank stops (SIGSTOP) in the middle of a sweep. Every other
// rank names it within the heartbeat timeout, the launcher kills it and
// reports it (before: survivors blamed an innocent rank; the launcher
// waited 70 s).
func TestAttackStoppedRankInLauncher(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Setenv(envBenchFault, "1:64:stop")
	t.Setenv(bootstrap.EnvHeartbeatTimeout, "1s")
	start := time.Now()
	code, _, errOut := runArgs("-np", "3", "-b", "8", "-e", "512", "-f", "8", "-n", "1", "-w", "0")
	took := time.Since(start)
	assert.Equal(t, 1, code)
	assert.Regexp(t, `run bench: rank 1 was lost: no heartbeat for 1s .*\(ranks (0, 2|2, 0) named it\); the launcher killed it\n$`, errOut)
	assert.Less(t, took, 15*time.Second)
	t.Logf("%v: %s", took, errOut)
}

// Attack 8: the launcher is interrupted (SIGTERM), then killed outright
// (SIGKILL): its ranks never outlive it, and its trace parts go with it.
func TestAttackLauncherSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			marks := filepath.Join(dir, "marks")
			require.NoError(t, os.Mkdir(marks, 0o755))
			c := exec.Command(self, "-np", "2", "-b", "1M", "-e", "1M", "-n", "1000000", "-w", "0", "--trace", filepath.Join(dir, "out.parquet"))
			c.Env = append(os.Environ(), envTestLauncher+"=1", envRankMark+"="+marks)
			var stderr bytes.Buffer
			c.Stderr = &stderr
			require.NoError(t, c.Start())
			defer c.Process.Kill()
			pids := rankPids(t, marks, 2)
			time.Sleep(300 * time.Millisecond) // into the sweep
			require.NoError(t, c.Process.Signal(sig))
			exited := make(chan error, 1)
			go func() { exited <- c.Wait() }()
			select {
			case <-exited:
			case <-time.After(killGrace + 5*time.Second):
				t.Fatalf("the launcher did not exit after %v", sig)
			}
			require.Eventually(t, func() bool { return !alive(pids[0]) && !alive(pids[1]) }, 3*time.Second, 10*time.Millisecond,
				"ranks outlived the launcher (%v)", sig)
			if sig != syscall.SIGKILL {
				parts, _ := filepath.Glob(filepath.Join(dir, ".twinccl-trace-*"))
				assert.Empty(t, parts, "trace parts left")
				assert.Contains(t, stderr.String(), "interrupted by "+sig.String())
			}
		})
	}
}

// Attack 5: ranks of an external launcher (torchrun's variables) with a
// secret file: they run; a process that knows the address and the old
// fixed public magic is refused by the root; without a secret ranks
// refuse to start.
func TestAttackExternalLauncherSecret(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	secretPath := filepath.Join(dir, "job.secret")
	ln, err := bootstrap.StartRoot("127.0.0.1", 1, 1, time.Second, nil) // a free port
	require.NoError(t, err)
	addr := ln.ID().Addr
	ln.Close()
	host, port, _ := strings.Cut(addr, ":")
	env := func(r int) []string {
		return append(os.Environ(), envTestLauncher+"=1", "RANK="+strconv.Itoa(r), "WORLD_SIZE=2", "MASTER_ADDR="+host, "MASTER_PORT="+port,
			envSecretFile+"="+secretPath, "TWINCCL_SOCKET_IFNAME=lo")
	}
	var cmds []*exec.Cmd
	var outs [2]*os.File
	for r := 0; r < 2; r++ {
		c := exec.Command(self, "-b", "8", "-e", "1K", "-f", "4", "-n", "1", "-w", "0")
		c.Env = env(r)
		outs[r], err = os.Create(filepath.Join(dir, "rank"+strconv.Itoa(r)+".out"))
		require.NoError(t, err)
		c.Stdout, c.Stderr = outs[r], outs[r]
		require.NoError(t, c.Start())
		defer c.Process.Kill()
		cmds = append(cmds, c)
	}
	// The attacker: the fixed magic NCCL_COMM_ID used, no secret, as
	// soon as the root listens.
	attacks := 0
	require.Eventually(t, func() bool {
		_, err := bootstrap.Dial(addr, bootstrap.Hello{Magic: 0x0280028002800280, Type: bootstrap.TypeRoot, Rank: 1, NRanks: 2}, auth.NewSecret(), time.Now().Add(100*time.Millisecond))
		require.Error(t, err)
		b, _ := os.ReadFile(outs[0].Name())
		attacks++
		return strings.Contains(string(b), "bootstrap root: refused connection")
	}, 10*time.Second, 5*time.Millisecond)
	for r, c := range cmds {
		b, _ := os.ReadFile(outs[r].Name())
		require.NoError(t, c.Wait(), "rank %d:\n%s", r, b)
	}
	b, _ := os.ReadFile(outs[0].Name())
	assert.Contains(t, string(b), "Avg bus bandwidth")
	assert.Contains(t, string(b), "not this job (wrong magic)")
	t.Logf("%d attempts by the attacker, every one refused; the job ran", attacks)
	st, err := os.Stat(secretPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	// Without a secret: a clear error, no start.
	c := exec.Command(self, "-b", "8", "-e", "8")
	c.Env = append(os.Environ(), envTestLauncher+"=1", "RANK=0", "WORLD_SIZE=2", "MASTER_ADDR="+host, "MASTER_PORT="+port)
	out, err := c.CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "no job secret: set TWINCCL_SECRET_FILE")
	// A secret file others can read is refused.
	loose := filepath.Join(dir, "loose.secret")
	require.NoError(t, os.WriteFile(loose, []byte(auth.NewSecret().Hex()), 0o644))
	_, err = jobSecret(bootstrap.UniqueID{Addr: addr}, 1, time.Second)
	require.ErrorIs(t, err, errNoSecret)
	t.Setenv(envSecretFile, loose)
	_, err = jobSecret(bootstrap.UniqueID{Addr: addr}, 1, time.Second)
	require.ErrorContains(t, err, "mode 0644")
}

// TWINCCL_SECRET: 64 hex digits, the magic derived from it; anything else
// is an error naming the variable and not repeating the value.
func TestJobSecretFromEnv(t *testing.T) {
	s := auth.NewSecret()
	t.Setenv(envSecret, s.Hex())
	id, err := jobSecret(bootstrap.UniqueID{Addr: "127.0.0.1:1"}, 3, time.Second)
	require.NoError(t, err)
	assert.Equal(t, s, id.Secret)
	assert.Equal(t, magicOf(s), id.Magic)
	assert.NotEqual(t, magicOf(s), magicOf(auth.NewSecret()))
	t.Setenv(envSecret, "deadbeef")
	_, err = jobSecret(bootstrap.UniqueID{}, 0, time.Second)
	require.ErrorContains(t, err, envSecret)
	assert.NotContains(t, err.Error(), "deadbeef")
	// A file rank 0 never creates: the others give up after the timeout.
	t.Setenv(envSecret, "")
	t.Setenv(envSecretFile, filepath.Join(t.TempDir(), "never"))
	_, err = jobSecret(bootstrap.UniqueID{}, 1, 100*time.Millisecond)
	require.ErrorContains(t, err, "rank 0 did not create it")
}
