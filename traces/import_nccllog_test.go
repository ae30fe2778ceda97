package traces

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportNCCLLog reads the 4-rank logs (two hosts, a world
// communicator and, in the split log, ncclCommSplit's tensor-parallel
// pairs): every call line a row, on the right communicator, rank and
// process, with NCCL's datatype, reduction, root and peer numbers named.
func TestImportNCCLLog(t *testing.T) {
	job, err := ImportNCCLLog(readers(t, filepath.Join("testdata", "import", "nccl-log-world-4ranks.log")))
	require.NoError(t, err)
	require.NoError(t, job.Check())
	require.Len(t, job.Comms, 1)
	require.Equal(t, uint64(0x9f2c6e1b5d7a3e41), job.Comms[0].ID)
	require.Equal(t, []int32{0, 1, 2, 3}, job.Comms[0].Ranks)
	require.Len(t, job.Calls, 5*4)
	job.Sort()
	want := []struct {
		op, dt, redop string
		count         int64
		root          int32
	}{
		{"AllReduce", "bfloat16", "sum", 262144, -1},
		{"AllGather", "bfloat16", "", 65536, -1},
		{"ReduceScatter", "float32", "sum", 16384, -1},
		{"Broadcast", "float32", "", 1024, 2},
		{"AllReduce", "float32", "avg", 8, -1},
	}
	for i, c := range job.Calls {
		w := want[i/4]
		require.Equal(t, int64(i/4), c.Call)
		require.Equal(t, int32(i%4), c.Rank)
		require.Equal(t, w.op, c.Op, "row %d", i)
		require.Equal(t, w.dt, c.Datatype, "row %d", i)
		require.Equal(t, w.redop, c.RedOp, "row %d", i)
		require.Equal(t, w.count, c.Count, "row %d", i)
		require.Equal(t, w.root, c.Root, "row %d", i)
		require.Equal(t, []string{"node0", "node0", "node1", "node1"}[c.Rank], c.Host)
		require.NotZero(t, c.Stream)
	}

	job, err = ImportNCCLLog(readers(t, filepath.Join("testdata", "import", "nccl-log-split-4ranks.log")))
	require.NoError(t, err)
	require.NoError(t, job.Check())
	require.Len(t, job.Comms, 3)
	var pairs [][]int32
	for _, c := range job.Comms {
		if c.ID != 0x9f2c6e1b5d7a3e41 {
			pairs = append(pairs, c.Ranks)
		}
	}
	require.ElementsMatch(t, [][]int32{{0, 1}, {2, 3}}, pairs, "split by node: global ranks 0,1 and 2,3")
	tp := map[uint64]int{}
	for _, c := range job.Calls {
		if c.NRanks == 2 {
			tp[c.Comm]++
			require.Contains(t, []string{"AllGather", "AllReduce"}, c.Op)
		}
	}
	require.Len(t, tp, 2)
	for _, n := range tp {
		require.Equal(t, 4, n, "two calls on each rank of each pair")
	}
}

// TestImportNCCLLogErrors: what cannot be imported names the file and line.
func TestImportNCCLLogErrors(t *testing.T) {
	init0 := "h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x10 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 commId 0xabc - Init START\n"
	init1 := "h:2:2 [1] NCCL INFO ncclCommInitRankConfig comm 0x20 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 2 commId 0xabc - Init START\n"
	call := func(pid int, comm string) string {
		return "h:" + string(rune('0'+pid)) + ":1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 comm " + comm + " [nranks=2] stream 0x5\n"
	}
	cases := []struct{ name, log, want string }{
		{"no calls", init0, "no call lines"},
		{"no init", call(1, "0x10"), "x.log:1: comm 0x10 has no init line"},
		{"missing rank", init0 + call(1, "0x10"), "communicator 0xabc: no log of its rank 1"},
		{"bad datatype", init0 + init1 + strings.Replace(call(1, "0x10"), "datatype 7", "datatype 42", 1), "x.log:3: call line: datatype \"42\""},
		{"bad collective", init0 + init1 + strings.Replace(call(1, "0x10"), "AllReduce:", "Gather:", 1), "x.log:3: call line: unknown collective \"Gather\""},
		{"truncated", init0 + init1 + "h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff\n", "x.log:3: unreadable call line"},
		{"nranks differ", init0 + init1 + strings.Replace(call(1, "0x10"), "[nranks=2]", "[nranks=3]", 1), "x.log:3: [nranks=3] but comm 0x10 was initialised with 2 ranks"},
		{"same rank twice", init0 + strings.Replace(init1, "rank 1", "rank 0", 1) + call(1, "0x10"), "processes h:1 and h:2 both have global rank 0"},
		{"orphan split", "h:1:1 [0] NCCL INFO ncclCommSplit comm 0x30 rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 parent 0x99 splitCount 1 color 0 key 0 - Init START\n" + init0 + call(1, "0x10"), "parent of comm 0x30"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportNCCLLog([]NamedReader{{Name: "x.log", R: strings.NewReader(tc.log)}})
			require.ErrorContains(t, err, tc.want)
		})
	}
}
