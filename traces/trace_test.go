package traces

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"
	"github.com/stretchr/testify/require"
)

var (
	ops    = []string{"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv"}
	prims  = []string{"send", "recv", "recvReduceSend", "recvReduceCopySend", "recvCopySend", "copySend", "directRecv"}
	protos = []string{"LL", "LL128", "Simple"}
)

func testCalls(n int, seed uint64) []CallRow {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]CallRow, n)
	for i := range out {
		start := int64(i)*1000 + rng.Int64N(500)
		out[i] = CallRow{
			Job: "job-" + fmt.Sprint(rng.IntN(3)), Comm: 0xa62b7a58480480ae + uint64(rng.IntN(2)), Call: int64(i / 8),
			Rank: int32(i % 8), NRanks: 8, Op: ops[rng.IntN(len(ops))], Algorithm: "Ring", Protocol: protos[rng.IntN(3)],
			Channels: int32(1 + rng.IntN(24)), Count: rng.Int64N(1 << 30), Datatype: "float32", RedOp: "sum",
			Root: int32(rng.IntN(9) - 1), Stream: rng.Uint64(), EnqueueNs: start - 100, StartNs: start,
			EndNs: start + rng.Int64N(1e6), Source: SourceHW, Host: "vm",
		}
	}
	return out
}

func testEvents(n int, seed uint64) []EventRow {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]EventRow, n)
	for i := range out {
		start := int64(i) * 100
		out[i] = EventRow{
			Comm: 7, Call: int64(i / 64), Rank: int32(rng.IntN(16)), Channel: int32(rng.IntN(4)),
			SendPeer: int32(rng.IntN(17) - 1), RecvPeer: int32(rng.IntN(17) - 1), Primitive: prims[rng.IntN(len(prims))],
			Protocol: protos[rng.IntN(3)], Step: int64(i % 64), Bytes: rng.Int64N(1 << 20), StartNs: start,
			EndNs: start + rng.Int64N(5000), Source: SourceSim,
		}
		out[i].DataNs = start + (out[i].EndNs-start)/3
	}
	return out
}

func writeEvents(t testing.TB, rows []EventRow, opt WriterOptions) []byte {
	var buf bytes.Buffer
	w, err := NewEventWriter(&buf, opt)
	require.NoError(t, err)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func writeCalls(t testing.TB, rows []CallRow, opt WriterOptions) []byte {
	var buf bytes.Buffer
	w, err := NewCallWriter(&buf, opt)
	require.NoError(t, err)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func readAllEvents(t testing.TB, data []byte, f Filter) ([]EventRow, error) {
	r, err := NewEventReader(bytes.NewReader(data), int64(len(data)), "test.parquet")
	if err != nil {
		return nil, err
	}
	var out []EventRow
	err = r.Scan(f, func(rows []EventRow) error { out = append(out, rows...); return nil })
	return out, err
}

func readAllCalls(t testing.TB, data []byte, f Filter) ([]CallRow, error) {
	r, err := NewCallReader(bytes.NewReader(data), int64(len(data)), "test.parquet")
	if err != nil {
		return nil, err
	}
	var out []CallRow
	err = r.Scan(f, func(rows []CallRow) error { out = append(out, rows...); return nil })
	return out, err
}

func sortedEvents(rows []EventRow) []EventRow {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b EventRow) int {
		if c := eventLess(&a, &b); c != 0 {
			return c
		}
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return rows
}

func sortedCalls(rows []CallRow) []CallRow {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b CallRow) int {
		if c := callLess(&a, &b); c != 0 {
			return c
		}
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	return rows
}

func TestCallRoundTrip(t *testing.T) {
	for _, comp := range []string{"", CompressionSnappy, CompressionNone} {
		for _, unsorted := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s-unsorted=%v", comp, unsorted), func(t *testing.T) {
				rows := testCalls(1000, 1)
				data := writeCalls(t, rows, WriterOptions{RowGroupRows: 128, Compression: comp, Unsorted: unsorted,
					Metadata: map[string]string{"job.cmd": "all_reduce_perf -b 8"}})
				got, err := readAllCalls(t, data, Filter{})
				require.NoError(t, err)
				if unsorted {
					require.Equal(t, rows, got)
				} else {
					require.Equal(t, sortedCalls(rows), sortedCalls(got))
				}
				r, err := NewCallReader(bytes.NewReader(data), int64(len(data)), "x")
				require.NoError(t, err)
				info := r.Info()
				require.Equal(t, KindCall, info.Kind)
				require.Equal(t, CurrentVersion, info.Version)
				require.EqualValues(t, 1000, info.Rows)
				require.Len(t, info.RowGroups, 8)
				require.True(t, info.Indexed)
				require.Equal(t, "all_reduce_perf -b 8", info.Metadata["job.cmd"])
				if !unsorted {
					require.Equal(t, callSortOrder, info.SortOrder)
				}
			})
		}
	}
}

func TestEventRoundTripConcurrent(t *testing.T) {
	rows := testEvents(20000, 3)
	var buf bytes.Buffer
	w, err := NewEventWriter(&buf, WriterOptions{RowGroupRows: 1500})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const writers = 8
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < len(rows); i += writers * 10 {
				end := min(i+10, len(rows))
				_ = end
			}
			// each goroutine appends its own strided slice, in small batches
			var mine []EventRow
			for i := g; i < len(rows); i += writers {
				mine = append(mine, rows[i])
				if len(mine) == 7 {
					require.NoError(t, w.Append(mine...))
					mine = mine[:0]
				}
			}
			require.NoError(t, w.Append(mine...))
		}()
	}
	wg.Wait()
	require.NoError(t, w.Close())
	require.Error(t, w.Append(rows[0]), "append after close")
	got, err := readAllEvents(t, buf.Bytes(), Filter{})
	require.NoError(t, err)
	require.Equal(t, sortedEvents(rows), sortedEvents(got))
}

func TestFilters(t *testing.T) {
	rows := testEvents(5000, 4)
	slices.SortFunc(rows, func(a, b EventRow) int { return eventLess(&a, &b) }) // one rank per few row groups: the index can skip
	data := writeEvents(t, rows, WriterOptions{RowGroupRows: 200})
	for _, rank := range []int32{0, 7, 15, 99} {
		got, err := readAllEvents(t, data, Filter{}.Rank(rank))
		require.NoError(t, err)
		var want []EventRow
		for _, r := range rows {
			if r.Rank == rank {
				want = append(want, r)
			}
		}
		require.Equal(t, sortedEvents(want), sortedEvents(got), "rank %d", rank)
	}
	got, err := readAllEvents(t, data, Filter{}.Rank(3).Call(7, 10))
	require.NoError(t, err)
	var want []EventRow
	for _, r := range rows {
		if r.Rank == 3 && r.Call == 10 && r.Comm == 7 {
			want = append(want, r)
		}
	}
	require.NotEmpty(t, want)
	require.Equal(t, sortedEvents(want), sortedEvents(got))

	calls := testCalls(800, 5)
	cdata := writeCalls(t, calls, WriterOptions{RowGroupRows: 64})
	gotc, err := readAllCalls(t, cdata, Filter{}.Call(calls[17].Comm, calls[17].Call))
	require.NoError(t, err)
	var wantc []CallRow
	for _, c := range calls {
		if c.Comm == calls[17].Comm && c.Call == calls[17].Call {
			wantc = append(wantc, c)
		}
	}
	require.Equal(t, sortedCalls(wantc), sortedCalls(gotc))
}

func TestEmptyTrace(t *testing.T) {
	data := writeEvents(t, nil, WriterOptions{})
	got, err := readAllEvents(t, data, Filter{})
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestCreateAndOpenFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "e.parquet")
	w, err := CreateEventFile(path, WriterOptions{})
	require.NoError(t, err)
	rows := testEvents(10, 1)
	require.NoError(t, w.Append(rows...))
	require.NoError(t, w.Close())
	k, err := ReadKind(path)
	require.NoError(t, err)
	require.Equal(t, KindEvent, k)
	r, err := OpenEventFile(path)
	require.NoError(t, err)
	defer r.Close()
	_, err = OpenCallFile(path)
	require.ErrorContains(t, err, `is a "event" trace, want a "call" trace`)
}

// rawParquet writes rows of any struct with the given metadata.
func rawParquet[T any](t testing.TB, rows []T, kv ...string) []byte {
	var buf bytes.Buffer
	var opts []parquet.WriterOption
	for i := 0; i+1 < len(kv); i += 2 {
		opts = append(opts, parquet.KeyValueMetadata(kv[i], kv[i+1]))
	}
	w := parquet.NewGenericWriter[T](&buf, opts...)
	_, err := w.Write(rows)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// eventV10 is an event row of schema 1.0 (no data_ns).
type eventV10 struct {
	Comm      uint64 `parquet:"comm"`
	Call      int64  `parquet:"call"`
	Rank      int32  `parquet:"rank"`
	Channel   int32  `parquet:"channel"`
	SendPeer  int32  `parquet:"send_peer"`
	RecvPeer  int32  `parquet:"recv_peer"`
	Primitive string `parquet:"primitive"`
	Protocol  string `parquet:"protocol"`
	Step      int64  `parquet:"step"`
	Bytes     int64  `parquet:"bytes"`
	StartNs   int64  `parquet:"start_ns"`
	EndNs     int64  `parquet:"end_ns"`
	Source    string `parquet:"source"`
}

func v10(e EventRow) eventV10 {
	return eventV10{e.Comm, e.Call, e.Rank, e.Channel, e.SendPeer, e.RecvPeer, e.Primitive, e.Protocol, e.Step, e.Bytes, e.StartNs, e.EndNs, e.Source}
}

// eventWith is an event row whose data_ns column has type D.
type eventWith[D any] struct {
	eventV10
	DataNs D `parquet:"data_ns"` // a pointer makes it optional
}

func TestVersionAndSchemaErrors(t *testing.T) {
	ev := testEvents(10, 1)
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"newer major", rawParquet(t, ev, MetaKind, "event", MetaVersion, "2.0"), "trace schema version 2.0 is not supported: this build reads 1.x"},
		{"older major", rawParquet(t, ev, MetaKind, "event", MetaVersion, "0.3"), "trace schema version 0.3 is not supported"},
		{"bad version", rawParquet(t, ev, MetaKind, "event", MetaVersion, "one"), `schema version "one"`},
		{"no version", rawParquet(t, ev, MetaKind, "event"), `schema version ""`},
		{"not ours", rawParquet(t, ev), `not a twinccl trace (no "twinccl.trace.kind" metadata key)`},
		{"wrong kind", rawParquet(t, testCalls(3, 1), MetaKind, "call", MetaVersion, "1.0"), `is a "call" trace, want a "event" trace`},
		{"missing column", rawParquet(t, []struct{ Rank int32 }{{1}}, MetaKind, "event", MetaVersion, "1.0"), `column "comm" missing`},
		{"wrong type", rawParquet(t, []struct {
			Comm string `parquet:"comm"`
		}{{"x"}}, MetaKind, "event", MetaVersion, "1.0"), `column "comm" has type BYTE_ARRAY, want INT64`},
		{"optional column", rawParquet(t, []struct {
			Comm *int64 `parquet:"comm,optional"`
		}{{nil}}, MetaKind, "event", MetaVersion, "1.0"), `column "comm": want a required INT64 leaf`},
		{"data_ns of another type", rawParquet(t, []eventWith[string]{{eventV10: v10(ev[0]), DataNs: "x"}}, MetaKind, "event", MetaVersion, "1.1"),
			`column "data_ns" has type BYTE_ARRAY, want INT64`},
		{"optional data_ns", rawParquet(t, []eventWith[*int64]{{eventV10: v10(ev[0])}}, MetaKind, "event", MetaVersion, "1.1"),
			`column "data_ns": want a required INT64 leaf`},
		{"empty", nil, "too small for a parquet file"},
		{"garbage", bytes.Repeat([]byte("x"), 100), "not a parquet file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAllEvents(t, c.data, Filter{})
			require.ErrorContains(t, err, c.want)
			require.ErrorContains(t, err, "test.parquet")
		})
	}
	// A newer minor version with an extra column is read.
	type eventV11 struct {
		EventRow
		Extra int64 `parquet:"extra"`
	}
	data := rawParquet(t, []eventV11{{EventRow: ev[0], Extra: 5}}, MetaKind, "event", MetaVersion, "1.7")
	got, err := readAllEvents(t, data, Filter{})
	require.NoError(t, err)
	require.Equal(t, ev[:1], got)
}

// footer splits a parquet file into data, decoded metadata.
func footer(t testing.TB, data []byte) ([]byte, *format.FileMetaData) {
	n := int(binary.LittleEndian.Uint32(data[len(data)-8:]))
	var md format.FileMetaData
	require.NoError(t, thrift.Unmarshal(new(thrift.CompactProtocol), data[len(data)-8-n:len(data)-8], &md))
	return data[:len(data)-8-n], &md
}

func withFooter(t testing.TB, body []byte, md *format.FileMetaData) []byte {
	b, err := thrift.Marshal(new(thrift.CompactProtocol), md)
	require.NoError(t, err)
	out := append(slices.Clone(body), b...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(b)))
	return append(out, "PAR1"...)
}

// rawFooter replaces the footer bytes as they are.
func rawFooter(body, foot []byte) []byte {
	out := append(slices.Clone(body), foot...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(foot)))
	return append(out, "PAR1"...)
}

// boundedAlloc fails the test if f allocates more than limit bytes.
func boundedAlloc(t *testing.T, limit uint64, f func()) {
	t.Helper()
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	if d := b.TotalAlloc - a.TotalAlloc; d > limit {
		t.Fatalf("allocated %d bytes, limit %d", d, limit)
	}
}

func TestHostileFiles(t *testing.T) {
	rows := testEvents(3000, 9)
	good := writeEvents(t, rows, WriterOptions{RowGroupRows: 1000})
	body, md := footer(t, good)

	mutate := func(f func(md *format.FileMetaData)) []byte {
		_, m := footer(t, good)
		f(m)
		return withFooter(t, body, m)
	}
	const billion = 1_000_000_000
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"billion rows claimed", mutate(func(m *format.FileMetaData) {
			m.NumRows = billion
			m.RowGroups[0].NumRows = billion
		}), "row group 0 claims 1000000000 rows"},
		{"footer total lies", mutate(func(m *format.FileMetaData) { m.NumRows = billion }), "row groups hold 3000 rows, footer claims 1000000000"},
		{"values lie", mutate(func(m *format.FileMetaData) { m.RowGroups[1].Columns[2].MetaData.NumValues = billion }), "row group 1 column [rank]: 1000000000 values for 1000 rows"},
		{"chunk past end", mutate(func(m *format.FileMetaData) { m.RowGroups[2].Columns[0].MetaData.TotalCompressedSize = 1 << 50 }), "lies outside the file"},
		{"negative chunk", mutate(func(m *format.FileMetaData) { m.RowGroups[0].Columns[3].MetaData.DataPageOffset = -5 }), "lies outside the file"},
		{"gzip codec", mutate(func(m *format.FileMetaData) { m.RowGroups[0].Columns[0].MetaData.Codec = format.Gzip }), "codec GZIP not supported"},
		{"index lies", mutate(func(m *format.FileMetaData) {
			for i := range m.KeyValueMetadata {
				if m.KeyValueMetadata[i].Key == MetaIndex {
					m.KeyValueMetadata[i].Value = `[{"rows":1}]`
				}
			}
		}), "row-group index has 1 entries for 3 row groups"},
		{"footer size absurd", func() []byte {
			b := slices.Clone(good)
			binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
			return b
		}(), "footer claims 4294967280 bytes but the file has"},
		// A footer whose first list (the schema) claims 2^31 elements in a few bytes.
		{"huge list claim", rawFooter(body, []byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00}), "list of 2147483647 elements"},
		{"deep nesting", rawFooter(body, bytes.Repeat([]byte{0x1c}, 200)), "nesting too deep"},
	}
	_ = md
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			boundedAlloc(t, 64<<20, func() {
				_, err := readAllEvents(t, c.data, Filter{})
				require.ErrorContains(t, err, c.want)
			})
		})
	}

	// Page headers that lie: splice a re-encoded first page header.
	t.Run("page sizes", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			edit func(h *format.PageHeader)
			want string
		}{
			{"uncompressed 2GiB", func(h *format.PageHeader) { h.UncompressedPageSize = 1<<31 - 1 }, "uncompressed (limit"},
			{"compressed past chunk", func(h *format.PageHeader) { h.CompressedPageSize = 1<<31 - 1 }, "left in the chunk"},
			{"billion values", func(h *format.PageHeader) {
				if h.DataPageHeaderV2.Valid {
					h.DataPageHeaderV2.V.NumValues = billion
				}
				if h.DataPageHeader.Valid {
					h.DataPageHeader.V.NumValues = billion
				}
				if h.DictionaryPageHeader.Valid {
					h.DictionaryPageHeader.V.NumValues = billion
				}
			}, "claims 1000000000 values"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				data := splicePageHeader(t, good, tc.edit)
				boundedAlloc(t, 64<<20, func() {
					_, err := readAllEvents(t, data, Filter{})
					require.ErrorContains(t, err, tc.want)
				})
			})
		}
	})
}

// splicePageHeader re-encodes the first page header of the first column
// chunk after edit, shifting every offset behind it.
func splicePageHeader(t testing.TB, good []byte, edit func(*format.PageHeader)) []byte {
	body, md := footer(t, good)
	start := chunkStart(&md.RowGroups[0].Columns[0].MetaData)
	h, err := parsePageHeader(body[start:])
	require.NoError(t, err)
	var ph format.PageHeader
	require.NoError(t, thrift.Unmarshal(new(thrift.CompactProtocol), body[start:start+int64(h.headerLen)], &ph))
	edit(&ph)
	nb, err := thrift.Marshal(new(thrift.CompactProtocol), &ph)
	require.NoError(t, err)
	delta := int64(len(nb) - h.headerLen)
	out := append(slices.Clone(body[:start]), nb...)
	out = append(out, body[start+int64(h.headerLen):]...)
	shift := func(p *int64) {
		if *p > start {
			*p += delta
		}
	}
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		shift(&rg.FileOffset)
		for j := range rg.Columns {
			c := &rg.Columns[j]
			shift(&c.FileOffset)
			shift(&c.MetaData.DataPageOffset)
			shift(&c.MetaData.DictionaryPageOffset)
			shift(&c.MetaData.IndexPageOffset)
			if i == 0 && j == 0 {
				c.MetaData.TotalCompressedSize += delta
			}
		}
	}
	return withFooter(t, out, md)
}

func TestTruncatedAndCorrupted(t *testing.T) {
	good := writeEvents(t, testEvents(2000, 11), WriterOptions{RowGroupRows: 500})
	boundedAlloc(t, 256<<20, func() {
		for cut := 0; cut < len(good); cut += 1 + len(good)/97 {
			_, err := readAllEvents(t, good[:cut], Filter{})
			require.Error(t, err, "cut at %d of %d", cut, len(good))
		}
	})
	// Random byte flips: an error or a clean read, never a panic or a blow-up.
	rng := rand.New(rand.NewPCG(5, 5))
	boundedAlloc(t, 1<<30, func() {
		for i := 0; i < 300; i++ {
			b := slices.Clone(good)
			for k := 0; k < 1+rng.IntN(4); k++ {
				b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
			}
			_, _ = readAllEvents(t, b, Filter{})
		}
	})
}

func FuzzOpenEventTrace(f *testing.F) {
	f.Add(writeEvents(f, testEvents(50, 1), WriterOptions{RowGroupRows: 20}))
	f.Add(writeEvents(f, testEvents(50, 1), WriterOptions{RowGroupRows: 20, Compression: CompressionSnappy}))
	f.Fuzz(func(t *testing.T, data []byte) {
		fast, err := readAllEvents(t, data, Filter{})
		if err != nil {
			return
		}
		// Where the reflection-based reader also reads the file, the column
		// reader must return the same rows.
		r, err := NewEventReader(bytes.NewReader(data), int64(len(data)), "fuzz.parquet")
		require.NoError(t, err)
		var slow []EventRow
		if scanReflect(r.f, Filter{}, nil, func(rows []EventRow) error { slow = append(slow, rows...); return nil }) == nil {
			sameRows(t, slow, fast)
		}
	})
}

// TestMergeKeepsMetadata: merged parts keep the rows of every part and
// the first part's own metadata (the ranks' parts of one run: rank 0's
// NCCL settings), never the reserved keys of a part.
func TestMergeKeepsMetadata(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for r, env := range []string{`{"NCCL_NET":"Socket","NCCL_HOSTID":"host0"}`, `{"NCCL_NET":"Socket","NCCL_HOSTID":"host1"}`} {
		p := filepath.Join(dir, fmt.Sprintf("part%d.parquet", r))
		rows := testCalls(20, 1)
		for i := range rows {
			rows[i].Rank, rows[i].Call = int32(r), int64(i)
		}
		require.NoError(t, os.WriteFile(p, writeCalls(t, rows, WriterOptions{Metadata: map[string]string{MetaNCCLEnv: env}}), 0o644))
		paths = append(paths, p)
	}
	var buf bytes.Buffer
	require.NoError(t, MergeCallFiles(&buf, paths))
	r, err := NewCallReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "merged")
	require.NoError(t, err)
	info := r.Info()
	require.EqualValues(t, 40, info.Rows)
	require.Equal(t, `{"NCCL_NET":"Socket","NCCL_HOSTID":"host0"}`, info.Metadata[MetaNCCLEnv])
	require.Equal(t, CurrentVersion, info.Version)
}
