package profiler

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/traces"
)

func TestP2PCallRoundTrip(t *testing.T) {
	for _, c := range []struct {
		s, d int32
		k    int64
	}{{0, 1, 0}, {1, 0, 5}, {p2pRankLimit - 1, 0, p2pSequenceLimit - 1}, {7, p2pRankLimit - 1, 123456}} {
		call, err := P2PCall(c.s, c.d, c.k)
		require.NoError(t, err)
		assert.Positive(t, call)
		s, d, k, ok := SplitP2PCall(call)
		require.True(t, ok)
		assert.Equal(t, [3]int64{int64(c.s), int64(c.d), c.k}, [3]int64{int64(s), int64(d), k})
	}
	a, _ := P2PCall(0, 1, 0)
	b, _ := P2PCall(1, 0, 0)
	assert.NotEqual(t, a, b, "the two directions between two ranks are numbered apart")
	_, _, _, ok := SplitP2PCall(41)
	assert.False(t, ok, "a collective's number")
	for _, bad := range [][3]int64{{-1, 0, 0}, {0, p2pRankLimit, 0}, {0, 1, p2pSequenceLimit}, {0, 1, -1}} {
		_, err := P2PCall(int32(bad[0]), int32(bad[1]), bad[2])
		assert.Error(t, err, "%v", bad)
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadConfig([]string{EnvDir + "=" + dir, "OMPI_COMM_WORLD_RANK=3", "SLURM_PROCID=9", "NCCL_ALGO=Ring",
		"NCCL_VERSION=2.28.9", "NOEQUALS", "SLURM_JOB_ID=77"}, "node/1", 4242)
	require.NoError(t, err)
	assert.Equal(t, int32(3), c.GlobalRank, "OMPI_COMM_WORLD_RANK comes before SLURM_PROCID")
	assert.Equal(t, "OMPI_COMM_WORLD_RANK", c.RankVar)
	assert.Equal(t, map[string]string{"NCCL_ALGO": "Ring"}, c.NCCLEnv)
	assert.Equal(t, "77", c.Job)
	assert.True(t, c.Kernel)
	assert.False(t, c.Proxy)
	assert.Equal(t, DefaultMaxEvents, c.MaxEvents)
	assert.Equal(t, filepath.Join(dir, "rank00003-node_1-4242.parquet"), c.CallPath())
	assert.Equal(t, filepath.Join(dir, "rank00003-node_1-4242.events.parquet"), c.EventPath())
	assert.Equal(t, TypeColl|TypeP2p|TypeCollApi|TypeP2pApi|TypeKernelCh, c.Mask())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "the probe file is removed")

	c, err = LoadConfig([]string{EnvDir + "=" + dir, EnvProxy + "=1", EnvKernel + "=0", EnvMaxEvents + "=10"}, "h", 1)
	require.NoError(t, err)
	assert.Equal(t, int32(-1), c.GlobalRank)
	assert.Equal(t, filepath.Join(dir, "h-1.parquet"), c.CallPath())
	assert.Equal(t, TypeColl|TypeP2p|TypeCollApi|TypeP2pApi|TypeProxyOp|TypeProxyStep, c.Mask())
	assert.Equal(t, 10, c.MaxEvents)

	file := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, bad := range []struct {
		env  []string
		want string
	}{
		{nil, EnvDir + " is not set"},
		{[]string{EnvDir + "= "}, EnvDir + " is not set"},
		{[]string{EnvDir + "=" + file}, fmt.Sprintf("%s=%q: not a directory", EnvDir, file)},
		{[]string{EnvDir + "=" + filepath.Join(file, "sub")}, fmt.Sprintf("%s=%q: mkdir", EnvDir, filepath.Join(file, "sub"))},
		{[]string{EnvDir + "=" + dir, EnvMaxEvents + "=0"}, EnvMaxEvents + `="0": want a positive number`},
		{[]string{EnvDir + "=" + dir, EnvMaxEvents + "=lots"}, EnvMaxEvents + `="lots"`},
		{[]string{EnvDir + "=" + dir, EnvKernel + "=2"}, EnvKernel + `="2": want 1 or 0`},
		{[]string{EnvDir + "=" + dir, "RANK=-1"}, `RANK="-1": want the process's rank`},
		{[]string{EnvDir + "=" + dir, "SLURM_PROCID=x"}, `SLURM_PROCID="x"`},
	} {
		_, err := LoadConfig(bad.env, "h", 1)
		require.Error(t, err, "%v", bad.env)
		assert.True(t, strings.HasPrefix(err.Error(), bad.want), "%v: %v", bad.env, err)
	}
}

func TestNCCLNames(t *testing.T) {
	for nccl, want := range map[string]string{"RING": "Ring", "TREE": "Tree", "COLLNET_DIRECT": "CollNetDirect",
		"COLLNET_CHAIN": "CollNetChain", "NVLS": "NVLS", "NVLS_TREE": "NVLSTree", "PAT": "PAT", "Unknown": "", "": ""} {
		assert.Equal(t, want, algoName(nccl), nccl)
	}
	for nccl, want := range map[string]string{"LL": "LL", "LL128": "LL128", "SIMPLE": "Simple", "Unknown": ""} {
		assert.Equal(t, want, protoName(nccl), nccl)
	}
	for nccl, want := range map[string]string{"ncclFloat32": "float32", "ncclBfloat16": "bfloat16", "ncclFloat8e4m3": "float8e4m3",
		"ncclUint8": "uint8", "Unknown": "", "": ""} {
		assert.Equal(t, want, datatypeName(nccl), nccl)
		if want != "" {
			_, ok := traces.DatatypeSize(want)
			assert.True(t, ok, "traces knows %s", want)
		}
	}
	for nccl, want := range map[string]string{"AllReduce": "AllReduce", "AlltoAll": "AlltoAll", "Gather": "Gather", "SendRecv": "SendRecv"} {
		assert.Equal(t, want, opName(nccl), nccl)
	}
}

// newTestRecorder is a recorder writing to a fresh directory, its
// warnings collected.
func newTestRecorder(t *testing.T, environ ...string) (*Recorder, *[]string) {
	cfg, err := LoadConfig(append([]string{EnvDir + "=" + t.TempDir()}, environ...), "host", 1)
	require.NoError(t, err)
	var logs []string
	return New(cfg, func(level int, msg string) { logs = append(logs, fmt.Sprintf("%d %s", level, msg)) }), &logs
}

func readRows(t *testing.T, path string) ([]traces.CallRow, traces.FileInfo) {
	r, err := traces.OpenCallFile(path)
	require.NoError(t, err)
	defer r.Close()
	var rows []traces.CallRow
	require.NoError(t, r.Scan(traces.Filter{}, func(b []traces.CallRow) error { rows = append(rows, b...); return nil }))
	return rows, r.Info()
}

// The kernel's times come from its channels' GPU timestamps, moved to the
// host clock by the smallest host-minus-GPU difference of the
// communicator: here 1000 (seen at the second call's end), so the first
// call's kernel, stamped 5000..9000 on the GPU, ran 6000..10000.
func TestRecorderMovesGPUTimesByTheSmallestOffset(t *testing.T) {
	r, _ := newTestRecorder(t)
	cx := r.Init(5, 0xc0, "c", 1, 4, 2)
	kernel := func(hostStart, gpuStart, hostEnd, gpuEnd int64, call Handle) {
		k := r.Start(cx, &Event{Type: TypeKernelCh, Parent: call, PTimer: uint64(gpuStart), HostNs: hostStart})
		require.NotZero(t, k)
		r.Record(k, StateKernelChStop, 0, uint64(gpuEnd), hostEnd)
		r.Stop(k, hostEnd+1)
	}
	api := r.Start(cx, &Event{Type: TypeCollApi, Stream: 0x99, HostNs: 100})
	r.Stop(api, 150)
	c1 := r.Start(cx, &Event{Type: TypeColl, Parent: api, Func: "AllReduce", Datatype: "ncclFloat32", Algo: "RING",
		Proto: "LL", Count: 10, NChannels: 2, Root: 3, HostNs: 200})
	r.Stop(c1, 300)
	kernel(7000, 5000, 12000, 8000, c1) // offsets 2000, 4000
	kernel(7500, 5200, 13000, 9000, c1) // 2300, 4000
	c2 := r.Start(cx, &Event{Type: TypeColl, Func: "Broadcast", Datatype: "ncclInt8", Algo: "TREE", Proto: "SIMPLE",
		Count: 5, NChannels: 1, Root: 3, HostNs: 20000})
	r.Stop(c2, 20100)
	kernel(25000, 21000, 31000, 30000, c2) // 4000, 1000
	require.NoError(t, r.Finalize(cx))

	rows, _ := readRows(t, r.Config().CallPath())
	require.Len(t, rows, 2)
	assert.Equal(t, traces.CallRow{Comm: 0xc0, Call: 0, Rank: 2, NRanks: 4, Op: "AllReduce", Algorithm: "Ring", Protocol: "LL",
		Channels: 2, Count: 10, Datatype: "float32", Root: -1, Stream: 0x99, EnqueueNs: 100, StartNs: 6000, EndNs: 10000,
		Source: traces.SourceHW, Host: "host"}, rows[0])
	assert.Equal(t, traces.CallRow{Comm: 0xc0, Call: 1, Rank: 2, NRanks: 4, Op: "Broadcast", Algorithm: "Tree",
		Protocol: "Simple", Channels: 1, Count: 5, Datatype: "int8", Root: 3, EnqueueNs: 20000, StartNs: 22000,
		EndNs: 31000, Source: traces.SourceHW, Host: "host"}, rows[1])
}

// Handles NCCL passes back are checked: an unknown handle, a parent of
// the wrong kind or another process's parent is ignored, not followed.
func TestRecorderIgnoresHandlesItDidNotGive(t *testing.T) {
	r, _ := newTestRecorder(t, EnvProxy+"=1")
	cx := r.Init(5, 0xd0, "", 1, 2, 0)
	assert.Zero(t, r.Start(0, &Event{Type: TypeColl, Func: "AllReduce"}), "no context")
	assert.Zero(t, r.Start(99, &Event{Type: TypeColl, Func: "AllReduce"}), "unknown context")
	assert.Zero(t, r.Start(cx, &Event{Type: TypeGroup}), "groups are not kept")
	assert.Zero(t, r.Start(cx, &Event{Type: TypeKernelCh, Parent: 12345}), "kernel channel of an unknown call")
	api := r.Start(cx, &Event{Type: TypeCollApi, HostNs: 1})
	assert.Zero(t, r.Start(cx, &Event{Type: TypeKernelCh, Parent: api}), "kernel channel of an API event")
	assert.Zero(t, r.Start(cx, &Event{Type: TypeProxyStep, Parent: api}), "proxy step of an API event")
	call := r.Start(cx, &Event{Type: TypeColl, Func: "AllGather", Datatype: "ncclInt32", HostNs: 5})
	op := r.Start(cx, &Event{Type: TypeProxyOp, Parent: call, Foreign: true, HostNs: 6})
	require.NotZero(t, op)
	step := r.Start(cx, &Event{Type: TypeProxyStep, Parent: op, Step: 0, HostNs: 7})
	r.Stop(step, 9)
	r.Stop(op, 10)
	r.Stop(Handle(1<<40), 11)
	r.Stop(KernelFlag|Handle(1<<40), 11)
	r.Record(Handle(1<<40), StateProxyStepSendWait, 1, 0, 12)
	r.Record(KernelFlag|Handle(1<<40), StateKernelChStop, 0, 1, 12)
	r.Stop(call, 8)
	require.NoError(t, r.Finalize(cx))

	rows, info := readRows(t, r.Config().CallPath())
	require.Len(t, rows, 1)
	assert.Equal(t, int64(5), rows[0].StartNs)
	assert.Equal(t, int64(8), rows[0].EndNs, "the foreign proxy operation is not the call's")
	assert.Equal(t, "0", info.Metadata[MetaDropped])

	er, err := traces.OpenEventFile(r.Config().EventPath())
	require.NoError(t, err)
	defer er.Close()
	var evs []traces.EventRow
	require.NoError(t, er.Scan(traces.Filter{}, func(b []traces.EventRow) error { evs = append(evs, b...); return nil }))
	require.Len(t, evs, 1)
	assert.Equal(t, int64(-1), evs[0].Call, "a step of another process's operation belongs to no call of ours")
	assert.Equal(t, uint64(0xd0), evs[0].Comm)
}

// Versions 1 to 3 name the communicator and rank in each call, not at init.
func TestRecorderOldVersionsTakeTheCommunicatorFromCalls(t *testing.T) {
	r, _ := newTestRecorder(t)
	cx := r.Init(2, 0, "", 0, 0, -1)
	c := r.Start(cx, &Event{Type: TypeColl, CommHash: 0xe0, Rank: 3, Func: "ReduceScatter", Datatype: "ncclFloat16",
		Algo: "RING", Proto: "SIMPLE", Count: 8, NChannels: 4, HostNs: 10})
	op := r.Start(cx, &Event{Type: TypeProxyOp, Parent: c, HostNs: 12})
	r.Stop(c, 11)
	r.Stop(op, 40)
	p := r.Start(cx, &Event{Type: TypeP2p, CommHash: 0xe0, Rank: 3, Func: "Recv", Datatype: "ncclInt64", Peer: 1, Count: 2, HostNs: 50})
	require.NotZero(t, p)
	// An unfinished call is left out, and counted.
	r.Start(cx, &Event{Type: TypeColl, CommHash: 0xe0, Rank: 3, Func: "AllReduce", HostNs: 60})
	r.Stop(p, 55)
	require.NoError(t, r.Finalize(cx))

	rows, info := readRows(t, r.Config().CallPath())
	recv, err := P2PCall(1, 3, 0)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	assert.Equal(t, traces.CallRow{Comm: 0xe0, Call: 0, Rank: 3, Op: "ReduceScatter", Algorithm: "Ring", Protocol: "Simple",
		Channels: 4, Count: 8, Datatype: "float16", Root: -1, EnqueueNs: 10, StartNs: 10, EndNs: 40, Source: traces.SourceHW,
		Host: "host"}, rows[0], "ends with its proxy operation")
	assert.Equal(t, traces.CallRow{Comm: 0xe0, Call: recv, Rank: 3, Op: "Recv", Count: 2, Datatype: "int64", Root: 1,
		EnqueueNs: 50, StartNs: 50, EndNs: 55, Source: traces.SourceHW, Host: "host"}, rows[1])
	assert.Equal(t, "1", info.Metadata[MetaIncomplete])
	assert.Equal(t, "v2", info.Metadata[MetaAPI])
	assert.JSONEq(t, `[{"comm":"0xe0","rank":3,"nranks":0,"global_rank":-1,"finalized":true}]`, info.Metadata[MetaComms])
}

// Calls past the cap are dropped, but numbered: every rank numbers its
// calls alike whatever it dropped.
func TestRecorderCapKeepsNumbering(t *testing.T) {
	r, logs := newTestRecorder(t, EnvMaxEvents+"=2")
	cx := r.Init(5, 0xf0, "", 1, 2, 1)
	var hs []Handle
	for i := range 4 {
		hs = append(hs, r.Start(cx, &Event{Type: TypeColl, Func: "AllReduce", HostNs: int64(10 * (i + 1))}))
	}
	send := r.Start(cx, &Event{Type: TypeP2p, Func: "Send", Peer: 0, HostNs: 100})
	assert.Zero(t, send)
	for _, h := range hs {
		r.Stop(h, 1000)
	}
	require.NoError(t, r.Finalize(cx))
	assert.Equal(t, []Handle{1, 2, 0, 0}, hs)
	require.Len(t, *logs, 2, "the init note and one warning")
	assert.True(t, strings.HasPrefix((*logs)[1], "2 twinccl profiler: 2 events kept"), (*logs)[1])
	rows, info := readRows(t, r.Config().CallPath())
	require.Len(t, rows, 2)
	assert.Equal(t, []int64{0, 1}, []int64{rows[0].Call, rows[1].Call})
	assert.Equal(t, "3", info.Metadata[MetaDropped])

	// The next send to rank 0 is the second one.
	r.cfg.MaxEvents = 10
	send = r.Start(cx, &Event{Type: TypeP2p, Func: "Send", Peer: 0, HostNs: 2000})
	r.Stop(send, 2001)
	require.NoError(t, r.Flush())
	rows, _ = readRows(t, r.Config().CallPath())
	want, err := P2PCall(1, 0, 1)
	require.NoError(t, err)
	assert.Equal(t, want, rows[len(rows)-1].Call)
	// Nothing new: Flush writes nothing (the file stays as it is).
	fi, err := os.Stat(r.Config().CallPath())
	require.NoError(t, err)
	require.NoError(t, r.Flush())
	fi2, err := os.Stat(r.Config().CallPath())
	require.NoError(t, err)
	assert.Equal(t, fi.ModTime(), fi2.ModTime())
}

// A teardown of many communicators writes when there is something new and
// at the last finalize, not once per communicator.
func TestRecorderFinalizeWritesOnlyWhatChanged(t *testing.T) {
	r, _ := newTestRecorder(t)
	var cxs []Context
	for c := range 3 {
		cx := r.Init(5, uint64(0x40+c), "", 1, 1, 0)
		h := r.Start(cx, &Event{Type: TypeColl, Func: "AllReduce", HostNs: 10})
		r.Stop(h, 20)
		cxs = append(cxs, cx)
	}
	path := r.Config().CallPath()
	require.NoError(t, r.Finalize(cxs[0]))
	_, info := readRows(t, path)
	assert.Contains(t, info.Metadata[MetaComms], `"comm":"0x41","rank":0,"nranks":1,"nnodes":1,"global_rank":-1,"finalized":false`)
	require.NoError(t, os.Remove(path))
	require.NoError(t, r.Finalize(cxs[1]))
	_, err := os.Stat(path)
	assert.True(t, os.IsNotExist(err), "nothing new, not the last: no write")
	require.NoError(t, r.Finalize(cxs[2]))
	rows, info := readRows(t, path)
	assert.Len(t, rows, 3)
	assert.NotContains(t, info.Metadata[MetaComms], `"finalized":false`, "the last finalize writes every communicator finalized")
}
