package profiler_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/nccl"
	"github.com/twinccl/twinccl/exec/hw/profiler"
	"github.com/twinccl/twinccl/traces"
)

// ncclWheelDirs are the directories of NVIDIA's Python wheels that hold
// libnccl (as package nccl looks for it).
var ncclWheelDirs = []string{"nvidia/nccl/lib", "nvidia/cu13/lib"}

var (
	realOnce sync.Once
	realErr  error
)

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" {
		t.Fatalf("TWINCCL_REQUIRE_GPU=1 but "+format, args...)
	}
	t.Skipf(format, args...)
}

// TestPluginUnderNCCL runs the system's NCCL on this host's GPUs (one
// process, a rank per GPU: testdata/realnccl.c) with the plugin, and
// checks the trace. It skips, saying why, without a GPU or libnccl, and
// fails then under TWINCCL_REQUIRE_GPU=1.
func TestPluginUnderNCCL(t *testing.T) {
	plugin, _ := built(t)
	real := filepath.Join(filepath.Dir(plugin), "realnccl")
	realOnce.Do(func() {
		if os.Getenv(envTestBin) != "" {
			return // built beforehand
		}
		if out, err := exec.Command("cc", "-O2", "-Wall", "-o", real, "testdata/realnccl.c", "-ldl").CombinedOutput(); err != nil {
			realErr = &exec.Error{Name: "cc", Err: err}
			t.Logf("%s", out)
		}
	})
	require.NoError(t, realErr)
	dir := t.TempDir()
	libs := cuda.LibraryCandidates("TWINCCL_NCCL_LIB", nccl.Libraries, ncclWheelDirs)
	cmd := exec.Command(real, libs...)
	cmd.Env = append(os.Environ(), "NCCL_PROFILER_PLUGIN="+plugin, "TWINCCL_PROFILER_DIR="+dir,
		"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT", "NCCL_NVLS_ENABLE=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "realnccl: %s\n%s", stderr.String(), stdout.String())
	out := stdout.String()
	var ndev, version int
	var calls [][]string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) > 0 && (f[0] == "NOGPU" || f[0] == "NONCCL"):
			skipOrFail(t, "not supported: %s", sc.Text())
		case len(f) == 2 && f[0] == "NDEV":
			ndev, _ = strconv.Atoi(f[1])
		case len(f) == 2 && f[0] == "NCCL":
			version, _ = strconv.Atoi(f[1])
		case len(f) == 5 && f[0] == "CALL":
			calls = append(calls, f[1:])
		}
	}
	require.Contains(t, out, "DONE", "realnccl did not finish:\n%s\n%s", out, stderr.String())
	// NCCL loads the newest table it knows: v5 from 2.28, v4 in 2.27.
	loaded := "Loaded twinccl (v"
	switch {
	case version >= 22800:
		loaded += "5)"
	case version >= 22700:
		loaded += "4)"
	}
	require.Contains(t, out+stderr.String(), loaded, "NCCL %d", version)
	require.Positive(t, ndev)

	rows, info := readCalls(t, onlyFile(t, dir, "*[0-9].parquet"))
	var comms []profiler.CommMeta
	require.NoError(t, json.Unmarshal([]byte(info.Metadata[profiler.MetaComms]), &comms))
	require.Len(t, comms, ndev, "one communicator per GPU, every one finalized")
	for r, c := range comms {
		assert.Equal(t, int32(ndev), c.NRanks)
		assert.Equal(t, int32(r), c.Rank)
		assert.True(t, c.Finalized)
		assert.Equal(t, comms[0].Comm, c.Comm, "one communicator, %d ranks", ndev)
	}
	if ndev == 1 {
		assert.Empty(t, rows, "NCCL runs a single rank's collectives without a task: no events")
		return
	}
	// Every rank has every collective, numbered alike, with NCCL's choice
	// and a kernel time; sends and receives pair up.
	byCall := map[int64][]traces.CallRow{}
	for _, r := range rows {
		byCall[r.Call] = append(byCall[r.Call], r)
		assert.LessOrEqual(t, r.EnqueueNs, r.StartNs)
		assert.Less(t, r.StartNs, r.EndNs, "a kernel takes time")
		assert.Positive(t, r.Channels)
		assert.Equal(t, int32(ndev), r.NRanks)
		assert.NotZero(t, r.Stream)
		assert.Equal(t, "float32", r.Datatype)
	}
	coll := int64(0)
	p2p := 0
	for _, c := range calls {
		count, _ := strconv.ParseInt(c[1], 10, 64)
		if c[0] == "SendRecvRing" {
			p2p++
			continue
		}
		rs := byCall[coll]
		require.Len(t, rs, ndev, "call %d (%s %d) on every rank", coll, c[0], count)
		for _, r := range rs {
			assert.Equal(t, c[0], r.Op)
			assert.Equal(t, count, r.Count)
			root, _ := strconv.Atoi(c[3])
			assert.Equal(t, int32(root), r.Root)
			assert.NotEmpty(t, r.Algorithm)
			assert.NotEmpty(t, r.Protocol)
		}
		coll++
	}
	var sends, recvs int
	for call, rs := range byCall {
		if _, _, _, ok := profiler.SplitP2PCall(call); !ok {
			continue
		}
		require.Len(t, rs, 2, "a send and its receive: call %#x", call)
		assert.ElementsMatch(t, []string{"Send", "Recv"}, []string{rs[0].Op, rs[1].Op})
		sends++
		recvs++
	}
	assert.Equal(t, p2p*ndev, sends, "every rank sends once per ring")
	assert.Len(t, rows, int(coll)*ndev+sends+recvs)
}
