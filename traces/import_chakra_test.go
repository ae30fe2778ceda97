package traces

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// etNode is a Chakra node for the encoder below.
type etNode struct {
	id, typ       uint64
	name          string
	dataDeps      []uint64
	dur, start    uint64
	inputTypes    string
	ints          map[string]int64 // int64_val attributes
	strs          map[string]string
	unpackedDeps  bool
	uint64CommLen bool // comm_size as uint64_val
}

// encodeET writes a Chakra execution trace as Chakra's encodeMessage does:
// each message preceded by its varint length.
func encodeET(version string, nodes ...etNode) []byte {
	var out []byte
	msg := protowire.AppendTag(nil, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, version)
	out = protowire.AppendBytes(out, msg)
	for _, n := range nodes {
		var b []byte
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, n.id)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, n.name)
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, n.typ)
		if n.unpackedDeps {
			for _, d := range n.dataDeps {
				b = protowire.AppendTag(b, 5, protowire.VarintType)
				b = protowire.AppendVarint(b, d)
			}
		} else if len(n.dataDeps) > 0 {
			var packed []byte
			for _, d := range n.dataDeps {
				packed = protowire.AppendVarint(packed, d)
			}
			b = protowire.AppendTag(b, 5, protowire.BytesType)
			b = protowire.AppendBytes(b, packed)
		}
		if n.start > 0 {
			b = protowire.AppendTag(b, 6, protowire.VarintType)
			b = protowire.AppendVarint(b, n.start)
		}
		b = protowire.AppendTag(b, 7, protowire.VarintType)
		b = protowire.AppendVarint(b, n.dur)
		if n.inputTypes != "" {
			io := protowire.AppendTag(nil, 3, protowire.BytesType)
			io = protowire.AppendString(io, n.inputTypes)
			b = protowire.AppendTag(b, 8, protowire.BytesType)
			b = protowire.AppendBytes(b, io)
		}
		for _, k := range sortedKeys(n.ints) {
			a := protowire.AppendTag(nil, 1, protowire.BytesType)
			a = protowire.AppendString(a, k)
			if k == "comm_size" && n.uint64CommLen {
				a = protowire.AppendTag(a, 13, protowire.VarintType)
			} else {
				a = protowire.AppendTag(a, 9, protowire.VarintType)
			}
			a = protowire.AppendVarint(a, uint64(n.ints[k]))
			b = protowire.AppendTag(b, 10, protowire.BytesType)
			b = protowire.AppendBytes(b, a)
		}
		for _, k := range sortedKeys(n.strs) {
			a := protowire.AppendTag(nil, 1, protowire.BytesType)
			a = protowire.AppendString(a, k)
			a = protowire.AppendTag(a, 29, protowire.BytesType)
			a = protowire.AppendString(a, n.strs[k])
			b = protowire.AppendTag(b, 10, protowire.BytesType)
			b = protowire.AppendBytes(b, a)
		}
		out = protowire.AppendBytes(out, b)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range mapsKeys(m) {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func readers(t *testing.T, paths ...string) []NamedReader {
	t.Helper()
	var out []NamedReader
	for _, p := range paths {
		data, err := os.ReadFile(p)
		require.NoError(t, err)
		out = append(out, NamedReader{Name: p, R: bytes.NewReader(data)})
	}
	return out
}

// TestImportChakraPublished imports ASTRA-sim's own microbenchmark traces
// (testdata/import/SOURCES.md): one 1 MiB collective on 4 NPUs.
func TestImportChakraPublished(t *testing.T) {
	for _, tc := range []struct {
		dir, op string
		count   int64
	}{
		{"chakra-allreduce-4npus", "AllReduce", 1 << 20 / 2}, // bfloat16 by default
		{"chakra-allgather-4npus", "AllGather", 1 << 20 / 2}, // a rank's input, NCCL's sendcount
	} {
		paths, err := filepath.Glob(filepath.Join("testdata", "import", tc.dir, "*.et"))
		require.NoError(t, err)
		require.Len(t, paths, 4)
		job, err := ImportChakra(readers(t, paths...), ChakraOptions{})
		require.NoError(t, err)
		require.NoError(t, job.Check())
		require.Len(t, job.Comms, 1)
		require.Equal(t, []int32{0, 1, 2, 3}, job.Comms[0].Ranks)
		require.Len(t, job.Calls, 4)
		for _, c := range job.Calls {
			require.Equal(t, tc.op, c.Op)
			require.Equal(t, tc.count, c.Count)
			require.Equal(t, "bfloat16", c.Datatype)
			require.EqualValues(t, 4, c.NRanks)
			require.Zero(t, c.Call)
			require.Empty(t, c.Deps)
		}
		// The element type given: the same bytes in float32 elements.
		job, err = ImportChakra(readers(t, paths...), ChakraOptions{Datatype: "float32"})
		require.NoError(t, err)
		require.Equal(t, tc.count/2, job.Calls[0].Count)
	}
}

// TestImportChakraGraph: process groups, compute nodes between
// collectives (dependencies with their gaps), send/receive pairs, the
// dependency order rather than the file order, and times laid out along
// the dependencies.
func TestImportChakraGraph(t *testing.T) {
	mk := func(rank int32) []byte {
		tp := map[string]string{"pg_name": "tp"}
		nodes := []etNode{
			// File order puts the gather before what it depends on.
			{id: 9, typ: chakraCollNode, name: "ag", dataDeps: []uint64{4}, dur: 3, inputTypes: "['Tensor(c10::BFloat16)']",
				ints: map[string]int64{"comm_type": 2, "comm_size": 4096}, strs: tp},
			{id: 1, typ: chakraCollNode, name: "ar", dur: 7, ints: map[string]int64{"comm_type": 0, "comm_size": 1 << 20}, uint64CommLen: true},
			{id: 2, typ: chakraCompNode, name: "gemm", dataDeps: []uint64{1}, dur: 5},
			{id: 3, typ: chakraCompNode, name: "gelu", dataDeps: []uint64{1}, dur: 2, unpackedDeps: true},
			{id: 4, typ: chakraCompNode, name: "add", dataDeps: []uint64{2, 3}, dur: 1},
		}
		if rank == 0 {
			nodes = append(nodes, etNode{id: 10, typ: chakraSendNode, name: "send", dataDeps: []uint64{9}, dur: 1,
				ints: map[string]int64{"comm_size": 64, "comm_dst": 1}, inputTypes: "Tensor(float)"})
		} else {
			nodes = append(nodes, etNode{id: 10, typ: chakraRecvNode, name: "recv", dataDeps: []uint64{9}, dur: 1,
				ints: map[string]int64{"comm_size": 64, "comm_src": 0}, inputTypes: "Tensor(float)"})
		}
		return encodeET("0.0.4", nodes...)
	}
	files := []NamedReader{{Name: "job.1.et", R: bytes.NewReader(mk(1))}, {Name: "job.0.et", R: bytes.NewReader(mk(0))}}
	job, err := ImportChakra(files, ChakraOptions{})
	require.NoError(t, err)
	require.NoError(t, job.Check())
	world, tp := CommID("pg", ""), CommID("pg", "tp")
	require.Len(t, job.Comms, 2)
	job.Sort()
	require.Equal(t, []int32{0, 1}, pick(job.Comms, world).Ranks)
	require.Equal(t, []int32{0, 1}, pick(job.Comms, tp).Ranks)
	for r := int32(0); r < 2; r++ {
		var ar, ag, p2p *CallRow
		for i := range job.Calls {
			c := &job.Calls[i]
			if c.Rank != r {
				continue
			}
			switch c.Op {
			case "AllReduce":
				ar = c
			case "AllGather":
				ag = c
			default:
				p2p = c
			}
		}
		require.NotNil(t, ar)
		require.NotNil(t, ag)
		require.NotNil(t, p2p)
		require.Equal(t, int64(1<<20/2), ar.Count)
		require.Equal(t, "", ar.Deps)
		require.Equal(t, int64(0), ar.StartNs)
		require.Equal(t, int64(7000), ar.EndNs)
		// The longest compute chain from the AllReduce: gemm (5) then add (1).
		require.Equal(t, FormatDeps([]Dep{{Comm: world, Call: 0, GapNs: 6000}}), ag.Deps)
		require.Equal(t, int64(7000+6000), ag.StartNs)
		require.Equal(t, tp, ag.Comm)
		require.Equal(t, int64(2048), ag.Count)
		require.Equal(t, "bfloat16", ag.Datatype)
		// The send/recv: peer is the other rank, float32 from its inputs.
		require.Equal(t, int64(16), p2p.Count)
		require.Equal(t, 1-r, p2p.Root)
		require.Equal(t, map[int32]string{0: "Send", 1: "Recv"}[r], p2p.Op)
		require.Equal(t, FormatDeps([]Dep{{Comm: tp, Call: 0}}), p2p.Deps)
		require.Equal(t, int64(1), p2p.Call) // after the gather on the default group
	}
}

func pick(comms []CommInfo, id uint64) CommInfo {
	for _, c := range comms {
		if c.ID == id {
			return c
		}
	}
	return CommInfo{}
}

// TestImportChakraErrors: each bad input names the file and, where there
// is one, the node.
func TestImportChakraErrors(t *testing.T) {
	good := encodeET("0.0.4", etNode{id: 1, typ: chakraCollNode, name: "ar", ints: map[string]int64{"comm_type": 0, "comm_size": 64}})
	cases := []struct {
		name, file string
		data       []byte
		opt        ChakraOptions
		want       string
	}{
		{"no rank in the name", "trace.et", good, ChakraOptions{}, "trace.et: cannot tell the rank"},
		{"truncated", "t.0.et", good[:len(good)-3], ChakraOptions{}, "t.0.et: message 1 at byte"},
		{"empty", "t.0.et", nil, ChakraOptions{}, "t.0.et: empty file"},
		{"barrier", "t.0.et", encodeET("0.0.4", etNode{id: 5, typ: chakraCollNode, name: "b", ints: map[string]int64{"comm_type": 9, "comm_size": 4}}), ChakraOptions{}, `t.0.et: node 5 ("b"): comm_type BARRIER is not supported`},
		{"odd size", "t.0.et", encodeET("0.0.4", etNode{id: 5, typ: chakraCollNode, name: "x", ints: map[string]int64{"comm_type": 0, "comm_size": 3}}), ChakraOptions{}, `node 5 ("x"): comm_size 3 is not a whole number of bfloat16`},
		{"no size", "t.0.et", encodeET("0.0.4", etNode{id: 5, typ: chakraCollNode, name: "x", ints: map[string]int64{"comm_type": 0}}), ChakraOptions{}, `node 5 ("x"): no comm_size`},
		{"cycle", "t.0.et", encodeET("0.0.4", etNode{id: 1, typ: chakraCompNode, name: "a", dataDeps: []uint64{2}}, etNode{id: 2, typ: chakraCompNode, name: "b", dataDeps: []uint64{1}}), ChakraOptions{}, "t.0.et: node 1 (\"a\") is on a dependency cycle"},
		{"duplicate id", "t.0.et", encodeET("0.0.4", etNode{id: 1, typ: chakraCompNode}, etNode{id: 1, typ: chakraCompNode}), ChakraOptions{}, "t.0.et: nodes 0 and 1 both have id 1"},
		{"peer outside", "t.0.et", encodeET("0.0.4", etNode{id: 3, typ: chakraSendNode, name: "s", ints: map[string]int64{"comm_size": 8, "comm_dst": 7}}), ChakraOptions{}, `node 3 ("s"): comm_dst 7 is not a rank`},
		{"bad group", "t.0.et", encodeET("0.0.4", etNode{id: 3, typ: chakraCollNode, name: "g", ints: map[string]int64{"comm_type": 0, "comm_size": 8}, strs: map[string]string{"pg_name": "5"}}), ChakraOptions{CommGroups: map[string][]int32{"5": {1, 2}}}, `rank 0 has nodes of process group "5"`},
		{"bad type", "t.0.et", good, ChakraOptions{Datatype: "float7"}, `datatype "float7" unknown`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ImportChakra([]NamedReader{{Name: tc.file, R: bytes.NewReader(tc.data)}}, tc.opt)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
