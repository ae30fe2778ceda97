package traces

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/stretchr/testify/require"
)

// scanReflect is the reference reader the column reader replaced: it reads
// rows with parquet-go's reflection-based GenericRowGroupReader.
func scanReflect[T any](f *file, filter Filter, keep func(*T) bool, fn func([]T) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: malformed parquet data: %v", f.info.Name, r)
		}
	}()
	batch := make([]T, readBatch)
	var row int64
	for i, rg := range f.pf.RowGroups() {
		g := &f.info.RowGroups[i]
		if f.info.Indexed && filter.skips(g) {
			row += g.Rows
			continue
		}
		if err := f.checkPages(i); err != nil {
			return fmt.Errorf("%s: %w", f.info.Name, err)
		}
		r := parquet.NewGenericRowGroupReader[T](rg)
		var read int64
		for read < g.Rows {
			n, rerr := r.Read(batch[:min(int64(len(batch)), g.Rows-read)])
			read += int64(n)
			out := batch[:n]
			if keep != nil {
				k := 0
				for j := range out {
					if keep(&out[j]) {
						out[k] = out[j]
						k++
					}
				}
				out = out[:k]
			}
			if len(out) > 0 {
				if err := fn(out); err != nil {
					r.Close()
					return err
				}
			}
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				r.Close()
				return fmt.Errorf("%s: row group %d, rows %d..: %w", f.info.Name, i, row+read-int64(n), rerr)
			}
			if n == 0 {
				break
			}
		}
		r.Close()
		if read != g.Rows {
			return fmt.Errorf("%s: row group %d: read %d rows, it declares %d", f.info.Name, i, read, g.Rows)
		}
		row += read
	}
	return nil
}

// bothEvents reads an event trace with the column reader and with the
// reflection path.
func bothEvents(t *testing.T, data []byte, filter Filter) (fast, slow []EventRow) {
	t.Helper()
	r, err := NewEventReader(bytes.NewReader(data), int64(len(data)), "mixed.parquet")
	require.NoError(t, err)
	require.NoError(t, r.Scan(filter, func(rows []EventRow) error { fast = append(fast, rows...); return nil }))
	var keep func(*EventRow) bool
	if filter.hasRank || filter.hasCall {
		keep = func(e *EventRow) bool {
			return (!filter.hasRank || e.Rank == filter.rank) &&
				(!filter.hasCall || (e.Comm == filter.comm && e.Call == filter.call))
		}
	}
	require.NoError(t, scanReflect(r.f, filter, keep, func(rows []EventRow) error { slow = append(slow, rows...); return nil }))
	return fast, slow
}

// bothCalls reads a call trace with the column reader and with the
// reflection path.
func bothCalls(t *testing.T, data []byte) (fast, slow []CallRow) {
	t.Helper()
	r, err := NewCallReader(bytes.NewReader(data), int64(len(data)), "mixed.parquet")
	require.NoError(t, err)
	require.NoError(t, r.Scan(Filter{}, func(rows []CallRow) error { fast = append(fast, rows...); return nil }))
	require.NoError(t, scanReflect(r.f, Filter{}, nil, func(rows []CallRow) error { slow = append(slow, rows...); return nil }))
	return fast, slow
}

// sameRows requires got to equal want, reporting the first difference.
func sameRows[T comparable](t *testing.T, want, got []T) {
	t.Helper()
	for i := range min(len(want), len(got)) {
		if want[i] != got[i] {
			t.Fatalf("row %d of %d: got\n%+v\nwant\n%+v", i, len(want), got[i], want[i])
		}
	}
	require.Equal(t, len(want), len(got), "rows")
}

// rawTrace writes rows of any struct as a trace of kind with parquet-go's
// own writer and the given options.
func rawTrace[T any](t testing.TB, kind Kind, rows []T, opts ...parquet.WriterOption) []byte {
	var buf bytes.Buffer
	opts = append(opts, parquet.KeyValueMetadata(MetaKind, string(kind)), parquet.KeyValueMetadata(MetaVersion, "1.0"))
	w := parquet.NewGenericWriter[T](&buf, opts...)
	for len(rows) > 0 {
		k := min(len(rows), 777) // several row groups with MaxRowsPerRowGroup
		_, err := w.Write(rows[:k])
		require.NoError(t, err)
		rows = rows[k:]
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// plainEvent is an event row with PLAIN strings, a dictionary-encoded int
// column, columns in another order and an extra column.
type plainEvent struct {
	Extra     string `parquet:"extra,plain"`
	DataNs    int64  `parquet:"data_ns,dict"`
	Source    string `parquet:"source,plain"`
	EndNs     int64  `parquet:"end_ns"`
	StartNs   int64  `parquet:"start_ns"`
	Bytes     int64  `parquet:"bytes,dict"`
	Step      int64  `parquet:"step"`
	Protocol  string `parquet:"protocol,plain"`
	Primitive string `parquet:"primitive,dict"`
	RecvPeer  int32  `parquet:"recv_peer"`
	SendPeer  int32  `parquet:"send_peer,dict"`
	Channel   int32  `parquet:"channel"`
	Rank      int32  `parquet:"rank"`
	Call      int64  `parquet:"call"`
	Comm      uint64 `parquet:"comm"`
}

func TestColumnReaderMatchesReflection(t *testing.T) {
	rows := testEvents(20000, 41)
	rng := rand.New(rand.NewPCG(41, 41))
	for i := range rows {
		if i%3 == 0 {
			rows[i].Comm = rng.Uint64() // negative as int64, too
		}
		if i%5 == 0 {
			rows[i].StartNs = -rows[i].StartNs
		}
		if i%7 == 0 {
			// More distinct strings than the interner keeps.
			rows[i].Primitive = fmt.Sprintf("prim-%d", i)
		}
		if i%11 == 0 {
			rows[i].Protocol = ""
		}
	}
	plain := make([]plainEvent, len(rows))
	for i, r := range rows {
		plain[i] = plainEvent{Extra: fmt.Sprint(i), DataNs: r.DataNs, Source: r.Source, EndNs: r.EndNs, StartNs: r.StartNs, Bytes: r.Bytes % 100,
			Step: r.Step, Protocol: r.Protocol, Primitive: r.Primitive, RecvPeer: r.RecvPeer, SendPeer: r.SendPeer,
			Channel: r.Channel, Rank: r.Rank, Call: r.Call, Comm: r.Comm}
	}
	plainRows := slices.Clone(rows)
	for i := range plainRows {
		plainRows[i].Bytes %= 100
	}
	files := []struct {
		name string
		data []byte
		want []EventRow
	}{
		{"zstd", writeEvents(t, rows, WriterOptions{RowGroupRows: 3000}), rows},
		{"snappy", writeEvents(t, rows, WriterOptions{RowGroupRows: 7001, Compression: CompressionSnappy, Unsorted: true}), rows},
		{"none", writeEvents(t, rows, WriterOptions{Compression: CompressionNone}), rows},
		{"pages-v2", rawTrace(t, KindEvent, rows, parquet.PageBufferSize(512), parquet.Compression(&parquet.Zstd)), rows},
		{"pages-v1", rawTrace(t, KindEvent, rows, parquet.PageBufferSize(1000), parquet.DataPageVersion(1), parquet.MaxRowsPerRowGroup(5000)), rows},
		{"plain", rawTrace(t, KindEvent, plain, parquet.PageBufferSize(2048), parquet.Compression(&parquet.Snappy)), plainRows},
		{"plain-v1", rawTrace(t, KindEvent, plain, parquet.DataPageVersion(1), parquet.MaxRowsPerRowGroup(3333)), plainRows},
	}
	for _, f := range files {
		t.Run(f.name, func(t *testing.T) {
			for _, filter := range []Filter{{}, Filter{}.Rank(3), Filter{}.Rank(5).Call(7, 100)} {
				fast, slow := bothEvents(t, f.data, filter)
				require.NotEmpty(t, fast)
				sameRows(t, slow, fast)
			}
			fast, _ := bothEvents(t, f.data, Filter{})
			sameRows(t, sortedEvents(f.want), sortedEvents(fast))
		})
	}

	calls := testCalls(5000, 42)
	for i := range calls {
		calls[i].Job = fmt.Sprintf("job-%d", i%5000) // past the interner's bound
		if i%4 == 0 {
			calls[i].Stream = 1 << 63
			calls[i].RedOp = ""
		}
	}
	for name, data := range map[string][]byte{
		"zstd":  writeCalls(t, calls, WriterOptions{RowGroupRows: 999}),
		"pages": rawTrace(t, KindCall, calls, parquet.PageBufferSize(300), parquet.DataPageVersion(1)),
	} {
		t.Run("calls-"+name, func(t *testing.T) {
			fast, slow := bothCalls(t, data)
			sameRows(t, slow, fast)
			sameRows(t, sortedCalls(calls), sortedCalls(fast))
		})
	}
}

// TestCompatFixtures reads traces written by the first release of the writer
// (testdata/compat, schema 1.0: event rows without data_ns, which read as
// 0) and by the release that added data_ns (events-1.1.parquet), and checks
// that this build writes the same bytes for the same rows.
// TWINCCL_WRITE_COMPAT=1 writes events-1.1.parquet afresh.
func TestCompatFixtures(t *testing.T) {
	edata, err := os.ReadFile(filepath.Join("testdata", "compat", "events-1.0.parquet"))
	require.NoError(t, err)
	events := testEvents(300, 31)
	old := slices.Clone(events)
	for i := range old {
		old[i].DataNs = 0
	}
	fast, slow := bothEvents(t, edata, Filter{})
	sameRows(t, slow, fast)
	sameRows(t, sortedEvents(old), sortedEvents(fast))

	path := filepath.Join("testdata", "compat", "events-1.1.parquet")
	written := writeEvents(t, events, WriterOptions{RowGroupRows: 200})
	if os.Getenv("TWINCCL_WRITE_COMPAT") == "1" {
		require.NoError(t, os.WriteFile(path, written, 0o644))
	}
	edata, err = os.ReadFile(path)
	require.NoError(t, err)
	fast, slow = bothEvents(t, edata, Filter{})
	sameRows(t, slow, fast)
	sameRows(t, sortedEvents(events), sortedEvents(fast))
	require.True(t, bytes.Equal(edata, written), "the event writer no longer writes the bytes of "+path)

	calls := testCalls(200, 32)
	cwritten := writeCalls(t, calls, WriterOptions{RowGroupRows: 128, Compression: CompressionSnappy})
	if os.Getenv("TWINCCL_WRITE_COMPAT") == "1" {
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "compat", "calls-1.1.parquet"), cwritten, 0o644))
	}
	for _, v := range []string{"1.0", "1.1"} {
		path := filepath.Join("testdata", "compat", "calls-"+v+".parquet")
		cdata, err := os.ReadFile(path)
		require.NoError(t, err)
		cfast, cslow := bothCalls(t, cdata)
		sameRows(t, cslow, cfast)
		sameRows(t, sortedCalls(calls), sortedCalls(cfast))
		if v == "1.1" { // 1.0's differ in the version they carry
			require.True(t, bytes.Equal(cdata, cwritten), "the call writer no longer writes the bytes of "+path)
		}
	}
}

// TestRadixSortOrder checks the packed-key radix sort against a stable
// comparison sort, on keys that fit a word and keys that do not.
func TestRadixSortOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	cases := []struct {
		name   string
		edit   func(i int, e *EventRow)
		packed bool
	}{
		{"narrow", func(i int, e *EventRow) {}, true},
		{"ties", func(i int, e *EventRow) { e.Call, e.Step, e.StartNs, e.Channel = 1, 2, 3, int32(i%2) }, true},
		{"negative", func(i int, e *EventRow) { e.Rank, e.StartNs = -e.Rank, -e.StartNs }, true},
		{"hash comms", func(i int, e *EventRow) { e.Comm = uint64(i%9) * 0x9e3779b97f4a7c15 }, true},
		{"extreme comms", func(i int, e *EventRow) { e.Comm = [2]uint64{0, ^uint64(0)}[i%2] }, true},
		{"extreme ranks", func(i int, e *EventRow) { e.Rank = [2]int32{-1 << 31, 1<<31 - 1}[i%3%2] }, false},
		{"many comms", func(i int, e *EventRow) { e.Comm = rng.Uint64() }, false},
		{"wide times", func(i int, e *EventRow) { e.StartNs = rng.Int64() }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rows := testEvents(6000, 8)
			for i := range rows {
				c.edit(i, &rows[i])
			}
			want := slices.Clone(rows)
			slices.SortStableFunc(want, func(a, b EventRow) int { return eventLess(&a, &b) })
			w, err := newWriter(io.Discard, KindEvent, eventSortOrder, WriterOptions{}, eventLess, eventKeys, eventInfo)
			require.NoError(t, err)
			_, _, packed := packKeys(rows, make([]uint64, len(rows)), eventKeys, &w.packer)
			require.Equal(t, c.packed, packed)
			w.buf = rows
			w.sortBuf()
			sameRows(t, want, w.buf)
		})
	}
	calls := testCalls(3000, 9)
	for i := range calls {
		calls[i].Comm = uint64(i%4) * 0x9e3779b97f4a7c15
		calls[i].Rank = int32(rng.IntN(5))
	}
	want := slices.Clone(calls)
	slices.SortStableFunc(want, func(a, b CallRow) int { return callLess(&a, &b) })
	w, err := newWriter(io.Discard, KindCall, callSortOrder, WriterOptions{}, callLess, callKeys, callInfo)
	require.NoError(t, err)
	w.buf = calls
	w.sortBuf()
	sameRows(t, want, w.buf)
}

// failingWriter fails every write after the first n bytes.
type failingWriter struct{ n int }

func (f *failingWriter) Write(b []byte) (int, error) {
	if len(b) > f.n {
		return 0, errors.New("disk full")
	}
	f.n -= len(b)
	return len(b), nil
}

func TestWriterFlushError(t *testing.T) {
	w, err := NewEventWriter(&failingWriter{n: 20 << 10}, WriterOptions{RowGroupRows: 500})
	require.NoError(t, err)
	rows := testEvents(500, 1)
	var appendErr error
	for range 200 {
		if appendErr = w.Append(rows...); appendErr != nil {
			break
		}
	}
	require.ErrorContains(t, appendErr, "disk full")
	require.ErrorContains(t, appendErr, "trace writer: row")
	require.ErrorContains(t, w.Append(rows[0]), "disk full", "the error sticks")
	require.ErrorContains(t, w.Close(), "disk full")
}
