package traces

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func collect(t *testing.T, f func(func(CallRow) error) error) ([]CallRow, error) {
	var out []CallRow
	err := f(func(c CallRow) error { out = append(out, c); return nil })
	return out, err
}

func TestImportCallsCSV(t *testing.T) {
	// nccl-tests style: size, count, type, redop, root, time (µs).
	in := "# all_reduce_perf on 2 ranks\nop,rank,size,count,type,redop,root,time,algo,proto\n" +
		"all_reduce_perf,0,1048576,262144,float,sum,-1,12.5,ring,simple\n" +
		"all_reduce,0,2048,,float32,sum,-1,3.25,RING,LL\n" +
		"broadcast,1,64,,bfloat16,,0,1,,\n"
	got, err := collect(t, func(e func(CallRow) error) error { return ImportCallsCSV(strings.NewReader(in), "tests.csv", e) })
	require.NoError(t, err)
	require.Equal(t, []CallRow{
		{Op: "AllReduce", Algorithm: "Ring", Protocol: "Simple", Count: 262144, Datatype: "float", RedOp: "sum", Root: -1, StartNs: 0, EnqueueNs: 0, EndNs: 12500, Source: SourceHW},
		{Op: "AllReduce", Algorithm: "Ring", Protocol: "LL", Count: 512, Datatype: "float32", RedOp: "sum", Root: -1, StartNs: 12500, EnqueueNs: 12500, EndNs: 15750, Source: SourceHW},
		{Op: "Broadcast", Rank: 1, Count: 32, Datatype: "bfloat16", Root: 0, EndNs: 1000, Source: SourceHW},
	}, got)

	// Full column names round-trip what the writer stores.
	rows := testCalls(5, 1)
	var b strings.Builder
	b.WriteString("job,comm,call,rank,nranks,op,algorithm,protocol,channels,count,datatype,redop,root,stream,enqueue_ns,start_ns,end_ns,source,host\n")
	for _, r := range rows {
		b.WriteString(strings.Join([]string{r.Job, u64(r.Comm), i64(r.Call), i64(int64(r.Rank)), i64(int64(r.NRanks)), r.Op, r.Algorithm, r.Protocol,
			i64(int64(r.Channels)), i64(r.Count), r.Datatype, r.RedOp, i64(int64(r.Root)), u64(r.Stream), i64(r.EnqueueNs), i64(r.StartNs), i64(r.EndNs), r.Source, r.Host}, ",") + "\n")
	}
	got, err = collect(t, func(e func(CallRow) error) error { return ImportCallsCSV(strings.NewReader(b.String()), "full.csv", e) })
	require.NoError(t, err)
	require.Equal(t, rows, got)

	for _, c := range []struct{ in, want string }{
		{"rank,count\n0,1\n", "bad.csv: header has no op"},
		{"op,rank\nall_reduce,x\n", "bad.csv:2: column rank: \"x\" is not a number"},
		{"op,rank\nall_reduce,9999999999\n", "bad.csv:2: column rank: 9999999999 out of range"},
		{"op\nwarp_shuffle\n", "bad.csv:2: unknown collective"},
		{"op,size,type\nall_reduce,8,weird\n", "bad.csv:2: bytes given but datatype \"weird\" unknown"},
		{"op,start_ns,end_ns\nall_reduce,10,5\n", "bad.csv:2: end_ns 5 before start_ns 10"},
		{"op,job\nall_reduce," + strings.Repeat("x", maxImportRecordBytes+10) + "\n", "line longer than"},
	} {
		_, err := collect(t, func(e func(CallRow) error) error { return ImportCallsCSV(strings.NewReader(c.in), "bad.csv", e) })
		require.ErrorContains(t, err, c.want)
	}
}

func u64(v uint64) string { return uitoa(v) }
func uitoa(v uint64) string {
	return string(appendU(nil, v))
}
func appendU(b []byte, v uint64) []byte {
	if v >= 10 {
		b = appendU(b, v/10)
	}
	return append(b, byte('0'+v%10))
}
func i64(v int64) string {
	if v < 0 {
		return "-" + uitoa(uint64(-v))
	}
	return uitoa(uint64(v))
}

func TestImportKernelsJSON(t *testing.T) {
	in := `{"schemaVersion":1,"distributedInfo":{"backend":"nccl","rank":3,"world_size":8},"traceEvents":[
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)","pid":0,"tid":7,"ts":1000.5,"dur":20.25,"args":{"device":0,"stream":7}},
 {"ph":"X","cat":"cpu_op","name":"aten::add","ts":1,"dur":2},
 {"ph":"X","cat":"kernel","name":"ncclKernel_AllGather_RING_LL128_Sum_bf16","ts":2000,"dur":5,"args":{"rank":5,"Group size":8}},
 {"ph":"X","cat":"kernel","name":"ncclDevKernel_Broadcast_RING_SIMPLE_Sum_int8_t","ts":3000,"dur":1},
 {"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_COLLNET_DIRECT_LL_Sum_float","ts":4000,"dur":1}
]}`
	got, err := collect(t, func(e func(CallRow) error) error { return ImportKernelsJSON(strings.NewReader(in), "prof.json", e) })
	require.NoError(t, err)
	require.Equal(t, []CallRow{
		{Op: "AllReduce", Algorithm: "Ring", Protocol: "LL", RedOp: "sum", Datatype: "float32", Rank: 3, Root: -1, Stream: 7, EnqueueNs: 1000500, StartNs: 1000500, EndNs: 1020750, Source: SourceHW},
		{Op: "AllGather", Algorithm: "Ring", Protocol: "LL128", RedOp: "sum", Datatype: "bfloat16", Rank: 5, NRanks: 8, Root: -1, EnqueueNs: 2000000, StartNs: 2000000, EndNs: 2005000, Source: SourceHW},
		{Op: "Broadcast", Algorithm: "Ring", Protocol: "Simple", RedOp: "sum", Datatype: "int8", Rank: 3, Root: -1, EnqueueNs: 3000000, StartNs: 3000000, EndNs: 3001000, Source: SourceHW},
		{Op: "AllReduce", Algorithm: "CollNetDirect", Protocol: "LL", RedOp: "sum", Datatype: "float32", Rank: 3, Root: -1, EnqueueNs: 4000000, StartNs: 4000000, EndNs: 4001000, Source: SourceHW},
	}, got)
	for _, c := range []struct{ in, want string }{
		{`"x"`, "prof.json: want a JSON object or array"},
		{`{"traceEvents":{}}`, "traceEvents is not an array"},
		{`[{"ph":"X","name":"ncclKernel_AllReduce","ts":1e300,"dur":1}]`, "bad ts/dur"},
		{`{"traceEvents":[{"ph":"X"`, "prof.json: trace event 0"},
	} {
		_, err := collect(t, func(e func(CallRow) error) error { return ImportKernelsJSON(strings.NewReader(c.in), "prof.json", e) })
		require.ErrorContains(t, err, c.want)
	}
}
