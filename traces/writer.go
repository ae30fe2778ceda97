package traces

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// DefaultRowGroupRows is the default number of rows per row group: the
// writer holds one row group in memory, the reader decodes one page at a time.
const DefaultRowGroupRows = 128 << 10

// Compression names accepted by WriterOptions.
const (
	CompressionZstd   = "zstd"
	CompressionSnappy = "snappy"
	CompressionNone   = "none"
)

// WriterOptions configure a trace writer. The zero value is usable.
type WriterOptions struct {
	// RowGroupRows is the number of rows buffered, sorted and written as one
	// row group (DefaultRowGroupRows if 0). Memory use is proportional to it.
	RowGroupRows int
	// Compression is CompressionZstd (default), CompressionSnappy or CompressionNone.
	Compression string
	// Unsorted keeps rows in arrival order inside row groups instead of
	// sorting them by rank (see the package's sort order keys).
	Unsorted bool
	// Metadata is extra key-value metadata stored in the footer (keys
	// starting with "twinccl.trace." are reserved).
	Metadata map[string]string
}

// RowGroupInfo is the index entry of one row group: its row count and the
// ranges of ranks and call numbers it holds. Readers use it to skip row
// groups during per-rank and per-call lookups.
type RowGroupInfo struct {
	Rows    int64    `json:"rows"`
	Rank    [2]int32 `json:"rank"`    // min, max
	Call    [2]int64 `json:"call"`    // min, max
	StartNs [2]int64 `json:"startNs"` // min, max of start_ns
}

func (o WriterOptions) codec() (compress.Codec, error) {
	switch o.Compression {
	case "", CompressionZstd:
		return &zstd.Codec{Level: zstd.SpeedFastest}, nil
	case CompressionSnappy:
		return &snappy.Codec{}, nil
	case CompressionNone:
		return &parquet.Uncompressed, nil
	}
	return nil, fmt.Errorf("unknown compression %q (want zstd, snappy or none)", o.Compression)
}

// writer is the generic streaming writer behind CallWriter and EventWriter.
type writer[T any] struct {
	mu      sync.Mutex
	pw      *parquet.GenericWriter[T]
	buf     []T
	groups  []RowGroupInfo
	rows    int64
	sorted  bool
	less    func(a, b *T) int
	info    func(rows []T) RowGroupInfo
	err     error
	closed  bool
	closer  io.Closer // the file CreateXxxFile opened, closed by Close
	maxRows int
}

func newWriter[T any](w io.Writer, kind Kind, sortOrder string, opt WriterOptions,
	less func(a, b *T) int, info func([]T) RowGroupInfo) (*writer[T], error) {
	codec, err := opt.codec()
	if err != nil {
		return nil, err
	}
	n := opt.RowGroupRows
	if n <= 0 {
		n = DefaultRowGroupRows
	}
	if n > MaxRowGroupRows {
		return nil, fmt.Errorf("row group of %d rows: at most %d", n, MaxRowGroupRows)
	}
	options := []parquet.WriterOption{
		parquet.Compression(codec),
		parquet.CreatedBy("twinccl", CurrentVersion.String(), ""),
		parquet.KeyValueMetadata(MetaKind, string(kind)),
		parquet.KeyValueMetadata(MetaVersion, CurrentVersion.String()),
		parquet.MaxRowsPerRowGroup(int64(n)),
	}
	if !opt.Unsorted {
		options = append(options, parquet.KeyValueMetadata(MetaSort, sortOrder))
	}
	keys := make([]string, 0, len(opt.Metadata))
	for k := range opt.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(k) >= len("twinccl.trace.") && k[:len("twinccl.trace.")] == "twinccl.trace." {
			return nil, fmt.Errorf("metadata key %q is reserved", k)
		}
		options = append(options, parquet.KeyValueMetadata(k, opt.Metadata[k]))
	}
	return &writer[T]{
		pw:      parquet.NewGenericWriter[T](w, options...),
		buf:     make([]T, 0, min(n, 1<<12)),
		sorted:  !opt.Unsorted,
		less:    less,
		info:    info,
		maxRows: n,
	}, nil
}

func (w *writer[T]) append(rows []T) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return errors.New("trace writer: append after Close")
	}
	if w.err != nil {
		return w.err
	}
	for len(rows) > 0 {
		k := min(len(rows), w.maxRows-len(w.buf))
		w.buf = append(w.buf, rows[:k]...)
		rows = rows[k:]
		if len(w.buf) == w.maxRows {
			if err := w.flushLocked(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushLocked sorts and writes the buffered rows as one row group.
func (w *writer[T]) flushLocked() error {
	if len(w.buf) == 0 {
		return nil
	}
	if w.sorted && !w.isSorted() {
		w.sortBuf()
	}
	if _, err := w.pw.Write(w.buf); err != nil {
		w.err = fmt.Errorf("trace writer: row %d: %w", w.rows, err)
		return w.err
	}
	if err := w.pw.Flush(); err != nil {
		w.err = fmt.Errorf("trace writer: row group %d: %w", len(w.groups), err)
		return w.err
	}
	w.groups = append(w.groups, w.info(w.buf))
	w.rows += int64(len(w.buf))
	clear(w.buf) // drop string references
	w.buf = w.buf[:0]
	return nil
}

func (w *writer[T]) isSorted() bool {
	for i := 1; i < len(w.buf); i++ {
		if w.less(&w.buf[i], &w.buf[i-1]) < 0 {
			return false
		}
	}
	return true
}

// sortBuf sorts the buffered rows stably by sorting a permutation (cheap
// swaps) and then applying it in place, one cycle at a time.
func (w *writer[T]) sortBuf() {
	buf := w.buf
	perm := make([]int32, len(buf))
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortFunc(perm, func(a, b int32) int {
		if c := w.less(&buf[a], &buf[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	for i := range perm {
		if perm[i] < 0 {
			continue
		}
		// Position i receives row perm[i]; follow the cycle.
		tmp := buf[i]
		j := i
		for {
			k := int(perm[j])
			perm[j] = -1
			if k == i {
				buf[j] = tmp
				break
			}
			buf[j] = buf[k]
			j = k
		}
	}
}

func (w *writer[T]) close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	err := w.err
	if err == nil {
		err = w.flushLocked()
	}
	if err == nil {
		idx, jerr := json.Marshal(w.groups)
		if jerr != nil {
			err = jerr
		} else {
			w.pw.SetKeyValueMetadata(MetaIndex, string(idx))
			if cerr := w.pw.Close(); cerr != nil {
				err = fmt.Errorf("trace writer: footer: %w", cerr)
			}
		}
	}
	w.buf = nil
	if w.closer != nil {
		if cerr := w.closer.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}
	return err
}

func callInfo(rows []CallRow) RowGroupInfo {
	g := RowGroupInfo{Rows: int64(len(rows)), Rank: [2]int32{rows[0].Rank, rows[0].Rank},
		Call: [2]int64{rows[0].Call, rows[0].Call}, StartNs: [2]int64{rows[0].StartNs, rows[0].StartNs}}
	for i := range rows {
		r := &rows[i]
		g.Rank = [2]int32{min(g.Rank[0], r.Rank), max(g.Rank[1], r.Rank)}
		g.Call = [2]int64{min(g.Call[0], r.Call), max(g.Call[1], r.Call)}
		g.StartNs = [2]int64{min(g.StartNs[0], r.StartNs), max(g.StartNs[1], r.StartNs)}
	}
	return g
}

func eventInfo(rows []EventRow) RowGroupInfo {
	g := RowGroupInfo{Rows: int64(len(rows)), Rank: [2]int32{rows[0].Rank, rows[0].Rank},
		Call: [2]int64{rows[0].Call, rows[0].Call}, StartNs: [2]int64{rows[0].StartNs, rows[0].StartNs}}
	for i := range rows {
		r := &rows[i]
		g.Rank = [2]int32{min(g.Rank[0], r.Rank), max(g.Rank[1], r.Rank)}
		g.Call = [2]int64{min(g.Call[0], r.Call), max(g.Call[1], r.Call)}
		g.StartNs = [2]int64{min(g.StartNs[0], r.StartNs), max(g.StartNs[1], r.StartNs)}
	}
	return g
}

// CallWriter streams call rows to a parquet file. It is safe for concurrent
// use: Append may be called from several goroutines. Memory is bounded by one
// row group. Close must be called to write the footer.
type CallWriter struct{ w *writer[CallRow] }

// NewCallWriter returns a writer of a call trace to w. Close does not close w.
func NewCallWriter(w io.Writer, opt WriterOptions) (*CallWriter, error) {
	cw, err := newWriter(w, KindCall, callSortOrder, opt, callLess, callInfo)
	if err != nil {
		return nil, err
	}
	return &CallWriter{cw}, nil
}

// CreateCallFile creates (truncates) path and returns a writer of a call
// trace to it; Close closes the file.
func CreateCallFile(path string, opt WriterOptions) (*CallWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewCallWriter(f, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.w.closer = f
	return w, nil
}

// Append adds rows to the trace; it copies them.
func (w *CallWriter) Append(rows ...CallRow) error { return w.w.append(rows) }

// Close flushes the last row group and writes the footer (schema version,
// sort order and row-group index).
func (w *CallWriter) Close() error { return w.w.close() }

// EventWriter streams event rows to a parquet file. It is safe for
// concurrent use: Append may be called from several goroutines. Memory is
// bounded by one row group. Close must be called to write the footer.
type EventWriter struct{ w *writer[EventRow] }

// NewEventWriter returns a writer of an event trace to w. Close does not close w.
func NewEventWriter(w io.Writer, opt WriterOptions) (*EventWriter, error) {
	ew, err := newWriter(w, KindEvent, eventSortOrder, opt, eventLess, eventInfo)
	if err != nil {
		return nil, err
	}
	return &EventWriter{ew}, nil
}

// CreateEventFile creates (truncates) path and returns a writer of an event
// trace to it; Close closes the file.
func CreateEventFile(path string, opt WriterOptions) (*EventWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := NewEventWriter(f, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.w.closer = f
	return w, nil
}

// Append adds rows to the trace; it copies them.
func (w *EventWriter) Append(rows ...EventRow) error { return w.w.append(rows) }

// Close flushes the last row group and writes the footer (schema version,
// sort order and row-group index).
func (w *EventWriter) Close() error { return w.w.close() }
