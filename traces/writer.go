package traces

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/compress/snappy"
	"github.com/parquet-go/parquet-go/compress/zstd"
)

// DefaultRowGroupRows is the default number of rows per row group: the
// writer holds two row groups in memory (one filling, one being encoded),
// the reader decodes one page per column at a time.
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
	// row group (DefaultRowGroupRows if 0). Memory use is proportional to it:
	// the writer buffers up to two row groups.
	RowGroupRows int
	// Compression is CompressionZstd (default), CompressionSnappy or CompressionNone.
	Compression string
	// Unsorted keeps rows in arrival order inside row groups instead of
	// sorting them by rank (see the package's sort order keys).
	Unsorted bool
	// Metadata is extra key-value metadata stored in the footer (keys
	// starting with "twinccl.trace." are reserved: metaReserved).
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
//
// Appending goroutines fill, sort and index one row group while a
// background goroutine (the flusher, started with the first full row group)
// encodes the previous one: at most two row groups are buffered.
type writer[T any] struct {
	mu       sync.Mutex
	pw       *parquet.GenericWriter[T] // used by the flusher once started, until done
	buf      []T
	nbufs    int // row-group buffers allocated: buf and those with the flusher
	groups   []RowGroupInfo
	rows     int64
	sorted   bool
	less     func(a, b *T) int
	sortKeys func([]T, []sortKey) // the sort keys less compares, for the radix sort
	info     func(rows []T) RowGroupInfo
	err      error
	closed   bool
	closer   io.Closer // the file CreateXxxFile opened, closed by Close
	name     string    // its path, for errors
	maxRows  int

	// Sort scratch, kept between row groups.
	keys, tmp []uint64
	packer    keyPacker

	// The flusher: it receives row groups on work, returns their buffers on
	// free, records its first error in flushErr and closes done on exit.
	work     chan rowGroup[T]
	free     chan []T
	done     chan struct{}
	errMu    sync.Mutex
	flushErr error
}

// rowGroup is a sorted row group handed to the flusher.
type rowGroup[T any] struct {
	rows  []T
	first int64 // file row number of rows[0]
	index int   // row group number
}

func newWriter[T any](w io.Writer, kind Kind, sortOrder string, opt WriterOptions,
	less func(a, b *T) int, sortKeys func([]T, []sortKey), info func([]T) RowGroupInfo) (*writer[T], error) {
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
		if strings.HasPrefix(k, metaReserved) {
			return nil, fmt.Errorf("metadata key %q is reserved", k)
		}
		options = append(options, parquet.KeyValueMetadata(k, opt.Metadata[k]))
	}
	return &writer[T]{
		pw:       parquet.NewGenericWriter[T](w, options...),
		buf:      make([]T, 0, min(n, 1<<12)),
		nbufs:    1,
		sorted:   !opt.Unsorted,
		less:     less,
		sortKeys: sortKeys,
		info:     info,
		maxRows:  n,
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
		if len(w.buf)+k > cap(w.buf) {
			// Grow to a full row group at once: no garbage from doubling.
			w.buf = slices.Grow(w.buf, w.maxRows-len(w.buf))
		}
		w.buf = append(w.buf, rows[:k]...)
		rows = rows[k:]
		if len(w.buf) == w.maxRows {
			if err := w.flushLocked(false); err != nil {
				return err
			}
		}
	}
	return nil
}

// flushLocked sorts and indexes the buffered rows and hands them to the
// flusher as one row group. Unless last, it then takes a free buffer for the
// next rows, waiting for the flusher when two row groups are buffered.
func (w *writer[T]) flushLocked(last bool) error {
	if err := w.asyncErr(); err != nil {
		w.err = err
		return err
	}
	if len(w.buf) == 0 {
		return nil
	}
	if w.sorted {
		w.sortBuf()
	}
	w.groups = append(w.groups, w.info(w.buf))
	if w.work == nil {
		w.work = make(chan rowGroup[T])
		w.free = make(chan []T, 2)
		w.done = make(chan struct{})
		go w.flusher(w.work)
	}
	w.work <- rowGroup[T]{rows: w.buf, first: w.rows, index: len(w.groups) - 1}
	w.rows += int64(len(w.buf))
	w.buf = nil
	if last {
		return nil
	}
	select {
	case w.buf = <-w.free:
	default:
		if w.nbufs < 2 {
			w.nbufs++
			w.buf = make([]T, 0, w.maxRows)
		} else {
			w.buf = <-w.free
		}
	}
	return nil
}

// flusher writes the row groups it receives until work is closed. After an
// error it only returns buffers.
func (w *writer[T]) flusher(work <-chan rowGroup[T]) {
	defer close(w.done)
	for g := range work {
		if w.asyncErr() == nil {
			var err error
			if _, werr := w.pw.Write(g.rows); werr != nil {
				err = fmt.Errorf("trace writer%s: row %d: %w", w.where(), g.first, werr)
			} else if ferr := w.pw.Flush(); ferr != nil {
				err = fmt.Errorf("trace writer%s: row group %d (rows %d..%d): %w",
					w.where(), g.index, g.first, g.first+int64(len(g.rows)), ferr)
			}
			if err != nil {
				w.errMu.Lock()
				w.flushErr = err
				w.errMu.Unlock()
			}
		}
		clear(g.rows) // drop string references
		w.free <- g.rows[:0]
	}
}

// where names the file in errors, if the writer created it.
func (w *writer[T]) where() string {
	if w.name == "" {
		return ""
	}
	return " " + w.name
}

// asyncErr returns the flusher's error, if any.
func (w *writer[T]) asyncErr() error {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.flushErr
}

func (w *writer[T]) isSorted() bool {
	for i := 1; i < len(w.buf); i++ {
		if w.less(&w.buf[i], &w.buf[i-1]) < 0 {
			return false
		}
	}
	return true
}

// sortBuf sorts the buffered rows stably: by radix-sorting packed keys
// (see packKeys) or, where the keys do not fit in a word, by comparing rows.
func (w *writer[T]) sortBuf() {
	n := len(w.buf)
	if cap(w.keys) < n {
		w.keys = make([]uint64, n, w.maxRows)
		w.tmp = make([]uint64, n, w.maxRows)
	}
	keys := w.keys[:n]
	idxBits, keyBits, ok := packKeys(w.buf, keys, w.sortKeys, &w.packer)
	if !ok {
		if !w.isSorted() {
			w.sortBufCompare()
		}
		return
	}
	sorted := radixSort(keys, w.tmp[:n], idxBits, keyBits)
	mask := uint64(1)<<idxBits - 1
	for i := range sorted {
		sorted[i] &= mask
	}
	permute(w.buf, sorted)
}

// permDone marks the positions permute has filled.
const permDone = ^uint64(0)

// permute moves row perm[i] to position i for every i, in place, one cycle at
// a time; it overwrites perm.
func permute[T any](buf []T, perm []uint64) {
	for i := range perm {
		if perm[i] == permDone || perm[i] == uint64(i) {
			continue
		}
		// Position i receives row perm[i]; follow the cycle.
		tmp := buf[i]
		j := i
		for {
			k := int(perm[j])
			perm[j] = permDone
			if k == i {
				buf[j] = tmp
				break
			}
			buf[j] = buf[k]
			j = k
		}
	}
}

// sortBufCompare sorts the buffered rows stably by sorting a permutation
// with w.less and then applying it.
func (w *writer[T]) sortBufCompare() {
	buf := w.buf
	perm := make([]uint64, len(buf))
	for i := range perm {
		perm[i] = uint64(i)
	}
	slices.SortFunc(perm, func(a, b uint64) int {
		if c := w.less(&buf[a], &buf[b]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	permute(buf, perm)
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
		err = w.flushLocked(true)
	}
	if w.work != nil {
		close(w.work)
		<-w.done
		if err == nil {
			err = w.asyncErr()
		}
	}
	if err == nil {
		idx, jerr := json.Marshal(w.groups)
		if jerr != nil {
			err = jerr
		} else {
			w.pw.SetKeyValueMetadata(MetaIndex, string(idx))
			if cerr := w.pw.Close(); cerr != nil {
				err = fmt.Errorf("trace writer%s: footer: %w", w.where(), cerr)
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
// use: Append may be called from several goroutines. Full row groups are
// encoded by a background goroutine while the next one fills, so memory is
// bounded by two row groups, and an error writing one is returned by a later
// Append or by Close. Close must be called to write the footer (and to stop
// the background goroutine).
type CallWriter struct{ w *writer[CallRow] }

// NewCallWriter returns a writer of a call trace to w. Close does not close w.
func NewCallWriter(w io.Writer, opt WriterOptions) (*CallWriter, error) {
	cw, err := newCallWriter(w, opt)
	if err != nil {
		return nil, err
	}
	return &CallWriter{cw}, nil
}

func newCallWriter(w io.Writer, opt WriterOptions) (*writer[CallRow], error) {
	return newWriter(w, KindCall, callSortOrder, opt, callLess, callKeys, callInfo)
}

// CreateCallFile creates (truncates) path and returns a writer of a call
// trace to it; Close closes the file.
func CreateCallFile(path string, opt WriterOptions) (*CallWriter, error) {
	w, err := createWriterFile(path, opt, newCallWriter)
	if err != nil {
		return nil, err
	}
	return &CallWriter{w}, nil
}

// Append adds rows to the trace; it copies them.
func (w *CallWriter) Append(rows ...CallRow) error { return w.w.append(rows) }

// Close flushes the last row group and writes the footer (schema version,
// sort order and row-group index).
func (w *CallWriter) Close() error { return w.w.close() }

// EventWriter streams event rows to a parquet file. It is safe for
// concurrent use: Append may be called from several goroutines. Full row
// groups are encoded by a background goroutine while the next one fills, so
// memory is bounded by two row groups, and an error writing one is returned
// by a later Append or by Close. Close must be called to write the footer
// (and to stop the background goroutine).
type EventWriter struct{ w *writer[EventRow] }

// NewEventWriter returns a writer of an event trace to w. Close does not close w.
func NewEventWriter(w io.Writer, opt WriterOptions) (*EventWriter, error) {
	ew, err := newEventWriter(w, opt)
	if err != nil {
		return nil, err
	}
	return &EventWriter{ew}, nil
}

func newEventWriter(w io.Writer, opt WriterOptions) (*writer[EventRow], error) {
	return newWriter(w, KindEvent, eventSortOrder, opt, eventLess, eventKeys, eventInfo)
}

// CreateEventFile creates (truncates) path and returns a writer of an event
// trace to it; Close closes the file.
func CreateEventFile(path string, opt WriterOptions) (*EventWriter, error) {
	w, err := createWriterFile(path, opt, newEventWriter)
	if err != nil {
		return nil, err
	}
	return &EventWriter{w}, nil
}

// createWriterFile creates (truncates) path and a writer to it made by
// open; the writer's Close closes the file and its errors name it.
func createWriterFile[T any](path string, opt WriterOptions, open func(io.Writer, WriterOptions) (*writer[T], error)) (*writer[T], error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	w, err := open(f, opt)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.closer, w.name = f, path
	return w, nil
}

// Append adds rows to the trace; it copies them.
func (w *EventWriter) Append(rows ...EventRow) error { return w.w.append(rows) }

// Close flushes the last row group and writes the footer (schema version,
// sort order and row-group index).
func (w *EventWriter) Close() error { return w.w.close() }
