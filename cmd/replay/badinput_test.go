package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBadInputs runs the command with bad flags, settings and files and
// checks the exit status (2: a usage error, 1: a bad input or setting) and
// the message, which names the flag, variable, key or file line and the
// value. Each of these used to be accepted and give wrong output.
func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	hw := filepath.Join("..", "..", "testdata", "hw", "h200x2")
	trace := filepath.Join(hw, "p2p-allreduce.parquet")
	// Two copies of a whole trace (both ranks): the same ranks twice.
	copies := []string{filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.parquet")}
	data, err := os.ReadFile(trace)
	require.NoError(t, err)
	for _, c := range copies {
		require.NoError(t, os.WriteFile(c, data, 0o644))
	}
	// A topology with one bad attribute.
	topo := filepath.Join("..", "..", "testdata", "xml", "h200x2-nvswitch.xml")
	xml, err := os.ReadFile(topo)
	require.NoError(t, err)
	badCount := filepath.Join(dir, "count.xml")
	require.NoError(t, os.WriteFile(badCount, []byte(strings.Replace(string(xml), `count="18"`, `count="999999999999"`, 1)), 0o644))
	countLine := 1 + strings.Count(string(xml[:strings.Index(string(xml), `count="18"`)]), "\n")
	table := filepath.Join("..", "..", "testdata", "nccl-timings", "p2p-simple.tsv")

	for _, tc := range []struct {
		args []string
		env  []string // KEY, VALUE pairs
		code int
		want string // a part of stderr
	}{
		// sim
		{[]string{"sim", "--nchannels", "1000"}, nil, 2, "replay sim: usage: --nchannels 1000: want 0 (the tuner's) to 64 (NCCL's MAXCHANNELS)\n"},
		{[]string{"sim", "--nchannels", "-1"}, nil, 2, "--nchannels -1: want 0 (the tuner's) to 64"},
		{[]string{"sim", "--op", "allreduc"}, nil, 2, `--op "allreduc": want a comma-separated list of allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv or all`},
		{[]string{"sim", "--op", ","}, nil, 2, "--op is empty"},
		{[]string{"sim", "--dtype", "float128"}, nil, 2, `--dtype: unknown datatype "float128"`},
		{[]string{"sim", "--minbytes", "-8"}, nil, 2, `--minbytes: "-8" is not a size`},
		{[]string{"sim", "--maxbytes", "1.5G"}, nil, 2, `--maxbytes: "1.5G" is not a size`},
		{[]string{"sim", "--minbytes", "1G", "--maxbytes", "1M"}, nil, 2, "sizes must satisfy 1 <= --minbytes (1073741824) <= --maxbytes (1048576)"},
		{[]string{"sim", "--minbytes", "0"}, nil, 2, "sizes must satisfy 1 <= --minbytes (0)"},
		{[]string{"sim", "--factor", "0"}, nil, 2, "--factor 0: must be at least 2"},
		{[]string{"sim", "--factor", "1"}, nil, 2, "--factor 1: must be at least 2"},
		{[]string{"sim", "--maxbytes", "99999999999G"}, nil, 2, `--maxbytes: "99999999999G" is too large`},
		{[]string{"sim", "--algo", "rings"}, nil, 2, `--algo: unknown algorithm "rings"`},
		{[]string{"sim", "--proto", "ll64"}, nil, 2, `--proto: unknown protocol "ll64"`},
		{[]string{"sim", "--mode", "quick"}, nil, 2, `--mode: unknown simulation mode "quick"`},
		{[]string{"sim", "--loop", "-1"}, nil, 2, "--loop -1: want 0 to 100 calls"},
		{[]string{"sim", "--root", "2", "--op", "broadcast", "--maxbytes", "8"}, nil, 2, "--root 2 outside 2 ranks"},
		{[]string{"sim", "--nodes", "0"}, nil, 2, "--nodes 0: must be between 1 and 4096"},
		// tune
		{[]string{"tune", "--op", "allreduce", "--bytes", "0"}, nil, 2, "replay tune: usage: --bytes 0: NCCL discards an empty collective without choosing an algorithm; give at least one element\n"},
		{[]string{"tune", "--op", "allreduce", "--bytes", "-1"}, nil, 2, `--bytes: "-1" is not a size`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "3"}, nil, 2, "3 bytes is not a whole number of 4-byte elements"},
		{[]string{"tune", "--op", "sendrecv", "--bytes", "1M"}, nil, 2, `--op "sendrecv": want one of broadcast, reduce, allgather, reducescatter, allreduce`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M", "--dtype", "float8"}, nil, 2, `--dtype "float8": want one of int8,`},
		{[]string{"tune", "--bytes", "1M"}, nil, 2, "--op and --bytes are required"},
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M", "--nodes", "-1"}, nil, 2, "--nodes -1"},
		// NCCL_* settings: NCCL 2.28.9 fails on a bad NCCL_PROTO/NCCL_ALGO
		// (parseList: ncclInvalidUsage); twinccl refuses an integer
		// setting that is not an integer (NCCL would read strtoll's prefix).
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M"}, []string{"NCCL_PROTO", "foo"}, 1, `replay tune: NCCL_PROTO="foo": unknown name "foo" (valid: LL, LL128, Simple)`},
		{[]string{"tune", "--op", "allreduce", "--bytes", "1M"}, []string{"NCCL_ALGO", "foo"}, 1, `NCCL_ALGO="foo": unknown name "foo" (valid: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)`},
		{[]string{"search"}, []string{"NCCL_NTHREADS", "lots"}, 1, `replay search: NCCL_NTHREADS="lots": not an integer`},
		{[]string{"sim", "--op", "allreduce", "--maxbytes", "8"}, []string{"NCCL_MIN_NCHANNELS", "2x"}, 1, `NCCL_MIN_NCHANNELS="2x": not an integer`},
		{[]string{"sim", "--op", "allreduce", "--maxbytes", "8"}, []string{"NCCL_BUFFSIZE", "lots"}, 1, `NCCL_BUFFSIZE="lots": not a number of bytes`},
		// topology files
		{[]string{"topo", badCount}, nil, 1, "replay topo: " + badCount + ":" + itoa(countLine) + `: <nvlink> count="999999999999": out of range (NCCL would read -727379969, wrapped to a C int); want the number of NVLinks to that peer, an integer in 1..18 (NCCL 2.28.9 detects at most 18 per GPU)`},
		// trace
		{[]string{"trace", "cat", "--rank", "-5", trace}, nil, 2, "--rank -5: want a rank, 0 or more"},
		{[]string{"trace", "cat", "--call", "0x1:-3", trace}, nil, 2, `--call "0x1:-3": want COMM:CALL`},
		{[]string{"trace", "merge", "-o", filepath.Join(dir, "m.parquet"), copies[0], copies[0]}, nil, 2, "replay trace: usage: part " + copies[0] + " is given twice\n"},
		{[]string{"trace", "merge", "-o", filepath.Join(dir, "m.parquet"), copies[0], copies[1]}, nil, 1, "parts " + copies[0] + " and " + copies[1] + " both hold rank 0 of communicator"},
		// run
		{[]string{"run", trace, "--env", "NCCL_PORTO=LL"}, nil, 2, "flag -env: NCCL_PORTO: not a setting the simulation reads; known: NCCL_ALGO,"},
		{[]string{"compare", trace, "--env", "NCCL_PORTO=LL"}, nil, 2, "flag -env: NCCL_PORTO: not a setting the simulation reads"},
		{[]string{"calibrate", "--evaluate", "--env", "NCCL_PORTO=LL"}, nil, 2, "flag -env: NCCL_PORTO: not a setting the simulation reads"},
		{[]string{"run", trace, "--env", "FOO=1"}, nil, 2, "flag -env: FOO: not a setting the simulation reads"},
		// calibrate: a table key nothing reads
		{[]string{"calibrate", "--evaluate", table + ",harnes=pytorch"}, nil, 1, `unknown key "harnes" in "harnes=pytorch"; known keys: colls, harness, maxbytes, minbytes, timing, topo (col= only for hardware recordings), and the NCCL_* settings NCCL_ALGO,`},
	} {
		for i := 0; i+1 < len(tc.env); i += 2 {
			t.Setenv(tc.env[i], tc.env[i+1])
		}
		_, stderr, code := runReplay(t, tc.args...)
		for i := 0; i+1 < len(tc.env); i += 2 {
			os.Unsetenv(tc.env[i])
		}
		require.Equal(t, tc.code, code, "%v %v: %s", tc.args, tc.env, stderr)
		require.Contains(t, stderr, tc.want, "%v %v", tc.args, tc.env)
	}
	_, err = os.Stat(filepath.Join(dir, "m.parquet"))
	require.True(t, os.IsNotExist(err), "a refused merge wrote its output")
}

// TestBadInputWarnings: settings NCCL corrects with a log line are taken
// as NCCL takes them, with a warning on stderr naming the variable and
// value.
func TestBadInputWarnings(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"NCCL_MIN_NCHANNELS", "1000"}, `level=WARN msg="NCCL_MIN_NCHANNELS=1000: User asked for a minimum of 1000 channels, limiting to 64 (NCCL 2.28.9 src/graph/connect.cc ncclMinNchannels)"`},
		{[]string{"NCCL_NET_OVERHEAD", "99999999999999999999"}, `level=WARN msg="Invalid value 99999999999999999999 for NCCL_NET_OVERHEAD, using default (beyond 64 bits: NCCL 2.28.9 ignores it, src/misc/param.cc ncclLoadParam)"`},
	} {
		t.Setenv(tc.env[0], tc.env[1])
		out, stderr, code := runReplay(t, "tune", "--op", "allreduce", "--bytes", "1M")
		os.Unsetenv(tc.env[0])
		require.Equal(t, 0, code, stderr)
		require.Contains(t, out, "choice: ")
		require.Contains(t, stderr, tc.want)
	}
}

func itoa(n int) string {
	var b []byte
	for n > 0 || len(b) == 0 {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
	}
	return string(b)
}
