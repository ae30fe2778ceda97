package traces

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestImportKineto reads two ranks' PyTorch profiler traces: an
// AllReduce and an AllGather on the default group, a send/receive pair
// on a second group; counts as NCCL takes them, times from the kernels,
// enqueue times from record_param_comms.
func TestImportKineto(t *testing.T) {
	dir := filepath.Join("testdata", "import")
	job, err := ImportKineto(readers(t, filepath.Join(dir, "kineto-rank1.pt.trace.json"), filepath.Join(dir, "kineto-rank0.pt.trace.json")))
	require.NoError(t, err)
	require.NoError(t, job.Check())
	require.Len(t, job.Comms, 2)
	job.Sort()
	require.Len(t, job.Calls, 6)
	def, pipe := CommID("pg", "0"), CommID("pg", "1")
	const base = 1733616000000000000
	for _, c := range job.Calls {
		switch {
		case c.Comm == def && c.Call == 0:
			require.Equal(t, "AllReduce", c.Op)
			require.Equal(t, int64(4194304), c.Count)
			require.Equal(t, "bfloat16", c.Datatype)
			require.Equal(t, "sum", c.RedOp)
			require.Equal(t, int64(base+1200000+int64(c.Rank)*3500), c.EnqueueNs)
			require.Equal(t, c.EnqueueNs+11000, c.StartNs)
			require.Equal(t, c.StartNs+812400, c.EndNs)
			require.Equal(t, uint64(20), c.Stream)
		case c.Comm == def && c.Call == 1:
			require.Equal(t, "AllGather", c.Op)
			require.Equal(t, int64(65536), c.Count, "NCCL's sendcount: In msg nelems")
		case c.Comm == pipe:
			require.Equal(t, map[int32]string{0: "Send", 1: "Recv"}[c.Rank], c.Op)
			require.Equal(t, 1-c.Rank, c.Root)
			require.Equal(t, "float32", c.Datatype)
			require.Equal(t, uint64(24), c.Stream)
		default:
			t.Fatalf("unexpected call %+v", c)
		}
	}
}

// TestImportKinetoErrors: a trace that cannot be imported names the file
// and the event.
func TestImportKinetoErrors(t *testing.T) {
	ev := `{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"args":{"Collective name":"%s","dtype":"%s","In msg nelems":8,"Out msg nelems":8,"Group size":2,"Process Group Name":"0","Process Group Ranks":"%s"}}`
	doc := func(rank, coll, dt, ranks string) string {
		return `{"distributedInfo":{"rank":` + rank + `},"traceEvents":[` + strings.NewReplacer("%s", "\x00").Replace(ev) + `]}`
	}
	fill := func(s string, vals ...string) string {
		for _, v := range vals {
			s = strings.Replace(s, "\x00", v, 1)
		}
		return s
	}
	cases := []struct{ name, doc, want string }{
		{"not json", "{", "r.json: not a Kineto JSON trace"},
		{"no rank", `{"traceEvents":[]}`, "r.json: no distributedInfo.rank"},
		{"unknown collective", fill(doc("0", "", "", ""), "gather_object", "Float", "[0, 1]"), `r.json: trace event 0 (k): collective "gather_object"`},
		{"unknown dtype", fill(doc("0", "", "", ""), "allreduce", "ComplexFloat", "[0, 1]"), `dtype "ComplexFloat" unknown`},
		{"truncated ranks", fill(doc("0", "", "", ""), "allreduce", "Float", "[0, 1, ..., 63]"), "truncated"},
		{"not a member", fill(doc("5", "", "", ""), "allreduce", "Float", "[0, 1]"), "rank 5 is not in process group"},
		{"size mismatch", fill(doc("0", "", "", ""), "allreduce", "Float", "[0, 1, 2]"), "Group size 2 but 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportKineto([]NamedReader{{Name: "r.json", R: strings.NewReader(tc.doc)}})
			require.ErrorContains(t, err, tc.want)
		})
	}
}
