package traces

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// readBatch is the number of rows a reader decodes and hands over at a time.
const readBatch = 8192

// FileInfo describes a trace file: what its footer says, after validation.
type FileInfo struct {
	Name        string
	Size        int64
	Kind        Kind
	Version     Version
	Rows        int64
	CreatedBy   string
	Compression string         // codec of the first column chunk ("ZSTD", "SNAPPY", ...)
	SortOrder   string         // sort order inside row groups, "" if unsorted
	RowGroups   []RowGroupInfo // from the row-group index; Rank/Call ranges are zero without one
	Indexed     bool           // the file carries a row-group index
	Metadata    map[string]string
}

// Filter selects rows during a scan. The zero value selects every row.
type Filter struct {
	rank    int32
	hasRank bool
	comm    uint64
	call    int64
	hasCall bool
}

// Rank returns f restricted to one rank.
func (f Filter) Rank(rank int32) Filter { f.rank, f.hasRank = rank, true; return f }

// Call returns f restricted to one call (communicator and sequence number).
func (f Filter) Call(comm uint64, call int64) Filter {
	f.comm, f.call, f.hasCall = comm, call, true
	return f
}

// skips reports whether the row group described by g cannot hold a match.
func (f Filter) skips(g *RowGroupInfo) bool {
	if f.hasRank && (f.rank < g.Rank[0] || f.rank > g.Rank[1]) {
		return true
	}
	if f.hasCall && (f.call < g.Call[0] || f.call > g.Call[1]) {
		return true
	}
	return false
}

// file is the validated parquet file behind CallReader and EventReader.
type file struct {
	info     FileInfo
	ra       io.ReaderAt
	pf       *parquet.File
	closer   io.Closer
	checked  []bool
	dataEnd  int64  // first byte of the footer
	pageBuf  []byte // reused while checking page bodies
	plainBuf []byte // decompressed page bodies
	zstd     *zstd.Decoder
}

// openTrace validates the file in ra and opens it with parquet-go.
func openTrace(ra io.ReaderAt, size int64, name string, want Kind, cols []columnSpec) (f *file, err error) {
	defer func() {
		if r := recover(); r != nil { // parquet-go panics on some malformed input
			f, err = nil, fmt.Errorf("%s: malformed parquet file: %v", name, r)
		}
	}()
	if size < 12 {
		return nil, fmt.Errorf("%s: %d bytes is too small for a parquet file (truncated?)", name, size)
	}
	var tail [8]byte
	if _, err := ra.ReadAt(tail[:], size-8); err != nil {
		return nil, fmt.Errorf("%s: reading the footer: %w", name, err)
	}
	var head [4]byte
	if _, err := ra.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("%s: reading the header: %w", name, err)
	}
	if string(head[:]) != "PAR1" {
		return nil, fmt.Errorf("%s: not a parquet file (no PAR1 magic at the start)", name)
	}
	if string(tail[4:]) != "PAR1" {
		return nil, fmt.Errorf("%s: no parquet footer (PAR1 magic missing at the end): the file is truncated or not parquet", name)
	}
	footerLen := int64(binary.LittleEndian.Uint32(tail[:4]))
	if footerLen > size-12 {
		return nil, fmt.Errorf("%s: footer claims %d bytes but the file has %d: truncated or corrupt", name, footerLen, size)
	}
	if footerLen > MaxFooterBytes {
		return nil, fmt.Errorf("%s: footer of %d bytes exceeds the limit of %d", name, footerLen, MaxFooterBytes)
	}
	footer := make([]byte, footerLen)
	if _, err := ra.ReadAt(footer, size-8-footerLen); err != nil {
		return nil, fmt.Errorf("%s: reading the footer: %w", name, err)
	}
	if err := checkFooter(footer); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	pf, err := parquet.OpenFile(ra, size, parquet.SkipPageIndex(true), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f = &file{ra: ra, pf: pf, dataEnd: size - 8 - footerLen}
	f.info = FileInfo{Name: name, Size: size, Metadata: map[string]string{}}
	md := pf.Metadata()
	f.info.CreatedBy = md.CreatedBy
	for _, kv := range md.KeyValueMetadata {
		f.info.Metadata[kv.Key] = kv.Value
	}
	kind, ok := f.info.Metadata[MetaKind]
	if !ok {
		return nil, fmt.Errorf("%s: not a twinccl trace (no %q metadata key)", name, MetaKind)
	}
	f.info.Kind = Kind(kind)
	if f.info.Kind != want {
		return nil, fmt.Errorf("%s: is a %q trace, want a %q trace", name, kind, want)
	}
	if f.info.Version, err = checkVersion(f.info.Metadata[MetaVersion]); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.info.SortOrder = f.info.Metadata[MetaSort]
	if err := checkColumns(pf.Schema(), cols); err != nil {
		return nil, fmt.Errorf("%s: %s trace schema: %w", name, want, err)
	}
	if err := f.checkRowGroups(md); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	f.checked = make([]bool, len(md.RowGroups))
	return f, nil
}

// checkColumns requires every column of cols, flat and required, with its
// physical type; those a minor version added may be missing. Extra columns
// (from newer minor versions) are allowed.
func checkColumns(s *parquet.Schema, cols []columnSpec) error {
	fields := s.Fields()
	for _, c := range cols {
		i := slices.IndexFunc(fields, func(f parquet.Field) bool { return f.Name() == c.name })
		if i < 0 && c.since {
			continue // a file of an older minor version
		}
		if i < 0 {
			return fmt.Errorf("column %q missing", c.name)
		}
		f := fields[i]
		if !f.Leaf() || f.Optional() || f.Repeated() {
			return fmt.Errorf("column %q: want a required %s leaf", c.name, c.kind)
		}
		if k := f.Type().Kind().String(); k != c.kind {
			return fmt.Errorf("column %q has type %s, want %s", c.name, k, c.kind)
		}
	}
	return nil
}

// checkRowGroups checks the row counts, column chunk extents and codecs
// against the file, and loads the row-group index.
func (f *file) checkRowGroups(md *format.FileMetaData) error {
	if md.NumRows < 0 {
		return fmt.Errorf("negative row count %d", md.NumRows)
	}
	var sum int64
	for i := range md.RowGroups {
		rg := &md.RowGroups[i]
		if rg.NumRows < 0 || rg.NumRows > MaxRowGroupRows {
			return fmt.Errorf("row group %d claims %d rows (limit %d per row group)", i, rg.NumRows, MaxRowGroupRows)
		}
		sum += rg.NumRows
		for j := range rg.Columns {
			cc := &rg.Columns[j]
			m := &cc.MetaData
			col := fmt.Sprint(m.PathInSchema)
			switch m.Codec {
			case format.Uncompressed, format.Snappy, format.Zstd:
			default:
				return fmt.Errorf("row group %d column %s: codec %s not supported (twinccl traces use zstd, snappy or none)", i, col, m.Codec)
			}
			if m.NumValues != rg.NumRows {
				return fmt.Errorf("row group %d column %s: %d values for %d rows", i, col, m.NumValues, rg.NumRows)
			}
			start := chunkStart(m)
			if start < 4 || m.TotalCompressedSize < 0 || start > f.dataEnd || m.TotalCompressedSize > f.dataEnd-start {
				return fmt.Errorf("row group %d column %s: chunk at %d+%d lies outside the file's %d data bytes (truncated?)",
					i, col, start, m.TotalCompressedSize, f.dataEnd)
			}
		}
	}
	if sum != md.NumRows {
		return fmt.Errorf("row groups hold %d rows, footer claims %d", sum, md.NumRows)
	}
	f.info.Rows = sum
	if s, ok := f.info.Metadata[MetaIndex]; ok {
		var idx []RowGroupInfo
		if err := json.Unmarshal([]byte(s), &idx); err != nil {
			return fmt.Errorf("row-group index: %w", err)
		}
		if len(idx) != len(md.RowGroups) {
			return fmt.Errorf("row-group index has %d entries for %d row groups", len(idx), len(md.RowGroups))
		}
		for i := range idx {
			if idx[i].Rows != md.RowGroups[i].NumRows {
				return fmt.Errorf("row-group index: row group %d has %d rows, index says %d", i, md.RowGroups[i].NumRows, idx[i].Rows)
			}
		}
		f.info.RowGroups, f.info.Indexed = idx, true
	} else {
		f.info.RowGroups = make([]RowGroupInfo, len(md.RowGroups))
		for i := range md.RowGroups {
			f.info.RowGroups[i].Rows = md.RowGroups[i].NumRows
		}
	}
	if len(md.RowGroups) > 0 && len(md.RowGroups[0].Columns) > 0 {
		f.info.Compression = md.RowGroups[0].Columns[0].MetaData.Codec.String()
	}
	delete(f.info.Metadata, MetaIndex) // shown as RowGroups
	return nil
}

func chunkStart(m *format.ColumnMetaData) int64 {
	if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < m.DataPageOffset {
		return m.DictionaryPageOffset
	}
	return m.DataPageOffset
}

// checkPages walks the page headers of every column chunk of row group i and
// checks their sizes and value counts before parquet-go trusts them.
func (f *file) checkPages(i int) error {
	if f.checked[i] {
		return nil
	}
	rg := &f.pf.Metadata().RowGroups[i]
	var hdr [1 << 10]byte
	for j := range rg.Columns {
		m := &rg.Columns[j].MetaData
		col := fmt.Sprint(m.PathInSchema)
		off, end := chunkStart(m), chunkStart(m)+m.TotalCompressedSize
		var values int64
		for off < end {
			n := min(int64(len(hdr)), end-off)
			if _, err := f.ra.ReadAt(hdr[:n], off); err != nil && !errors.Is(err, io.EOF) {
				return fmt.Errorf("row group %d column %s: page header at %d: %w", i, col, off, err)
			}
			h, err := parsePageHeader(hdr[:n])
			if err != nil {
				return fmt.Errorf("row group %d column %s: page header at %d: %w", i, col, off, err)
			}
			body := off + int64(h.headerLen)
			switch {
			case h.compressed < 0 || h.compressed > end-body:
				return fmt.Errorf("row group %d column %s: page at %d claims %d bytes, %d left in the chunk", i, col, off, h.compressed, end-body)
			case h.uncompressed < 0 || h.uncompressed > MaxPageBytes || h.compressed > MaxPageBytes:
				return fmt.Errorf("row group %d column %s: page at %d claims %d bytes uncompressed (limit %d)", i, col, off, h.uncompressed, MaxPageBytes)
			case h.numValues < 0 || h.numValues > rg.NumRows:
				return fmt.Errorf("row group %d column %s: page at %d claims %d values in a row group of %d rows", i, col, off, h.numValues, rg.NumRows)
			case h.levelBytes > h.compressed:
				return fmt.Errorf("row group %d column %s: page at %d: level bytes exceed the page", i, col, off)
			}
			data := h.typ == 0 || h.typ == 3 // DATA_PAGE, DATA_PAGE_V2
			if data {
				values += h.numValues
			}
			switch h.encoding {
			case encPlain, encPlainDict, encRLEDictionary:
			default:
				return fmt.Errorf("row group %d column %s: page at %d: encoding %s not supported in traces",
					i, col, off, format.Encoding(h.encoding))
			}
			if err := f.checkBody(m.Codec, body+h.levelBytes, h.compressed-h.levelBytes, h.uncompressed-h.levelBytes,
				!h.notCompr, data && h.encoding != encPlain, h.numValues); err != nil {
				return fmt.Errorf("row group %d column %s: page at %d: %w", i, col, off, err)
			}
			off = body + h.compressed
		}
		if values != rg.NumRows {
			return fmt.Errorf("row group %d column %s: pages hold %d values, row group %d rows", i, col, values, rg.NumRows)
		}
	}
	f.checked[i] = true
	return nil
}

// checkBody checks a page body: the decompressed size its codec claims
// and, for dictionary index pages, the RLE runs (decompressed here first,
// within MaxPageBytes).
func (f *file) checkBody(codec format.CompressionCodec, off, n, limit int64, compressed, rle bool, numValues int64) error {
	if n <= 0 || (!rle && (codec == format.Uncompressed || !compressed)) {
		return nil
	}
	if int64(cap(f.pageBuf)) < n {
		f.pageBuf = make([]byte, n)
	}
	b := f.pageBuf[:n]
	if _, err := f.ra.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if compressed {
		var err error
		switch codec {
		case format.Zstd:
			if err = checkZstd(b, limit); err == nil && rle {
				b, err = f.unzstd(b, limit)
			}
		case format.Snappy:
			if err = checkSnappy(b, limit); err == nil && rle {
				f.plainBuf, err = snappy.Decode(f.plainBuf[:cap(f.plainBuf)], b)
				b = f.plainBuf
			}
		}
		if err != nil {
			return err
		}
	}
	if rle {
		return checkRLEIndexes(b, numValues)
	}
	return nil
}

func (f *file) unzstd(b []byte, limit int64) ([]byte, error) {
	if f.zstd == nil {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxPageBytes+zstdMaxBlock))
		if err != nil {
			return nil, err
		}
		f.zstd = d
	}
	out, err := f.zstd.DecodeAll(b, f.plainBuf[:0])
	if err != nil {
		return nil, fmt.Errorf("%w: zstd: %v", errCorrupt, err)
	}
	f.plainBuf = out
	if int64(len(out)) > limit+zstdMaxBlock {
		return nil, fmt.Errorf("%w: page decompresses to %d bytes, header says %d", errCorrupt, len(out), limit)
	}
	return out, nil
}

func (f *file) close() error {
	if f.zstd != nil {
		f.zstd.Close()
	}
	if f.closer != nil {
		return f.closer.Close()
	}
	return nil
}

// openPath opens a file for openTrace.
func openPath(path string, want Kind, cols []columnSpec) (*file, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := openTrace(fh, st.Size(), path, want, cols)
	if err != nil {
		fh.Close()
		return nil, err
	}
	f.closer = fh
	return f, nil
}

// CallReader reads a call trace, streaming: memory is bounded by one page
// per column and one batch of rows, whatever the file's size.
type CallReader struct{ f *file }

// OpenCallFile opens and validates a call trace file.
func OpenCallFile(path string) (*CallReader, error) {
	f, err := openPath(path, KindCall, callColumns)
	if err != nil {
		return nil, err
	}
	return &CallReader{f}, nil
}

// NewCallReader validates the call trace of size bytes in ra; name is used in errors.
func NewCallReader(ra io.ReaderAt, size int64, name string) (*CallReader, error) {
	f, err := openTrace(ra, size, name, KindCall, callColumns)
	if err != nil {
		return nil, err
	}
	return &CallReader{f}, nil
}

// Info describes the file.
func (r *CallReader) Info() FileInfo { return r.f.info }

// Scan calls fn with successive batches of the rows filter selects, in file
// order. The batch is reused: fn must copy what it keeps.
func (r *CallReader) Scan(filter Filter, fn func([]CallRow) error) error {
	var keep func(*CallRow) bool
	if filter.hasRank || filter.hasCall {
		keep = func(c *CallRow) bool {
			return (!filter.hasRank || c.Rank == filter.rank) &&
				(!filter.hasCall || (c.Comm == filter.comm && c.Call == filter.call))
		}
	}
	return scanColumns(r.f, callColumns, callFields, filter, keep, fn)
}

// Close closes the file if the reader opened it.
func (r *CallReader) Close() error { return r.f.close() }

// EventReader reads an event trace, streaming: memory is bounded by one page
// per column and one batch of rows, whatever the file's size.
type EventReader struct{ f *file }

// OpenEventFile opens and validates an event trace file.
func OpenEventFile(path string) (*EventReader, error) {
	f, err := openPath(path, KindEvent, eventColumns)
	if err != nil {
		return nil, err
	}
	return &EventReader{f}, nil
}

// NewEventReader validates the event trace of size bytes in ra; name is used in errors.
func NewEventReader(ra io.ReaderAt, size int64, name string) (*EventReader, error) {
	f, err := openTrace(ra, size, name, KindEvent, eventColumns)
	if err != nil {
		return nil, err
	}
	return &EventReader{f}, nil
}

// Info describes the file.
func (r *EventReader) Info() FileInfo { return r.f.info }

// Scan calls fn with successive batches of the rows filter selects, in file
// order. The batch is reused: fn must copy what it keeps.
func (r *EventReader) Scan(filter Filter, fn func([]EventRow) error) error {
	var keep func(*EventRow) bool
	if filter.hasRank || filter.hasCall {
		keep = func(e *EventRow) bool {
			return (!filter.hasRank || e.Rank == filter.rank) &&
				(!filter.hasCall || (e.Comm == filter.comm && e.Call == filter.call))
		}
	}
	return scanColumns(r.f, eventColumns, eventFields, filter, keep, fn)
}

// Close closes the file if the reader opened it.
func (r *EventReader) Close() error { return r.f.close() }

// ReadKind reports the kind of trace in a file (from its metadata), so that
// a tool can pick the right reader. It validates only the footer.
func ReadKind(path string) (Kind, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	st, err := fh.Stat()
	if err != nil {
		return "", err
	}
	// Open as either kind; the error for the wrong kind names the right one.
	_, err = openTrace(fh, st.Size(), path, KindCall, callColumns)
	if err == nil {
		return KindCall, nil
	}
	_, err2 := openTrace(fh, st.Size(), path, KindEvent, eventColumns)
	if err2 == nil {
		return KindEvent, nil
	}
	if !strings.Contains(err2.Error(), "trace, want a") {
		return "", err2 // an event trace with another problem
	}
	return "", err
}
