package traces

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"
)

// The column reader: rows are filled column by column from the decoded
// pages' typed values (Page.Data), without parquet-go's reflection-based row
// reconstruction. Dictionary-encoded columns are expanded from their
// indexes; strings are interned, so a batch shares one string per distinct
// value instead of allocating one per row.

// field is how a column fills a field of T: exactly one of i32, i64 and str
// is set, by the column's physical type. Each setter fills len(rows) rows
// from v, which is at least as long.
type field[T any] struct {
	name string
	i32  func(rows []T, v []int32)
	i64  func(rows []T, v []int64)
	str  func(rows []T, v []string)
}

// absentColumn is the leaf of a field whose column (one a minor version
// added) an older file lacks: the rows keep the field's zero value.
const absentColumn = -1

var eventFields = []field[EventRow]{
	{name: "comm", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Comm = uint64(v[i])
		}
	}},
	{name: "call", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Call = v[i]
		}
	}},
	{name: "rank", i32: func(r []EventRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].Rank = v[i]
		}
	}},
	{name: "channel", i32: func(r []EventRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].Channel = v[i]
		}
	}},
	{name: "send_peer", i32: func(r []EventRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].SendPeer = v[i]
		}
	}},
	{name: "recv_peer", i32: func(r []EventRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].RecvPeer = v[i]
		}
	}},
	{name: "primitive", str: func(r []EventRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Primitive = v[i]
		}
	}},
	{name: "protocol", str: func(r []EventRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Protocol = v[i]
		}
	}},
	{name: "step", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Step = v[i]
		}
	}},
	{name: "bytes", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Bytes = v[i]
		}
	}},
	{name: "start_ns", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].StartNs = v[i]
		}
	}},
	{name: "end_ns", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].EndNs = v[i]
		}
	}},
	{name: "source", str: func(r []EventRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Source = v[i]
		}
	}},
	{name: "data_ns", i64: func(r []EventRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].DataNs = v[i]
		}
	}},
}

var callFields = []field[CallRow]{
	{name: "job", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Job = v[i]
		}
	}},
	{name: "comm", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Comm = uint64(v[i])
		}
	}},
	{name: "call", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Call = v[i]
		}
	}},
	{name: "rank", i32: func(r []CallRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].Rank = v[i]
		}
	}},
	{name: "nranks", i32: func(r []CallRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].NRanks = v[i]
		}
	}},
	{name: "op", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Op = v[i]
		}
	}},
	{name: "algorithm", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Algorithm = v[i]
		}
	}},
	{name: "protocol", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Protocol = v[i]
		}
	}},
	{name: "channels", i32: func(r []CallRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].Channels = v[i]
		}
	}},
	{name: "count", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Count = v[i]
		}
	}},
	{name: "datatype", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Datatype = v[i]
		}
	}},
	{name: "redop", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].RedOp = v[i]
		}
	}},
	{name: "root", i32: func(r []CallRow, v []int32) {
		v = v[:len(r)]
		for i := range r {
			r[i].Root = v[i]
		}
	}},
	{name: "stream", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].Stream = uint64(v[i])
		}
	}},
	{name: "enqueue_ns", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].EnqueueNs = v[i]
		}
	}},
	{name: "start_ns", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].StartNs = v[i]
		}
	}},
	{name: "end_ns", i64: func(r []CallRow, v []int64) {
		v = v[:len(r)]
		for i := range r {
			r[i].EndNs = v[i]
		}
	}},
	{name: "source", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Source = v[i]
		}
	}},
	{name: "host", str: func(r []CallRow, v []string) {
		v = v[:len(r)]
		for i := range r {
			r[i].Host = v[i]
		}
	}},
}

// Bounds on the strings a column reader keeps for reuse: distinct strings
// interned (and their length), dictionary entries converted ahead of use.
// Past them, strings are converted as rows need them, so a hostile page of
// millions of tiny values costs no more than its rows.
const (
	maxInterned    = 1 << 12
	maxInternLen   = 256
	maxDictStrings = 1 << 12
)

// interner returns one string per distinct short byte sequence, up to
// maxInterned of them; past that it allocates.
type interner map[string]string

func (m interner) get(b []byte) string {
	if len(b) > maxInternLen {
		return string(b)
	}
	if s, ok := m[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(m) < maxInterned {
		m[s] = s
	}
	return s
}

// byteArrays are n byte-array values: value i is b[offs[i]:offs[i+1]].
type byteArrays struct {
	b    []byte
	offs []uint32
}

func (v byteArrays) len() int { return max(len(v.offs)-1, 0) }

func (v byteArrays) at(i int32) []byte { return v.b[v.offs[i]:v.offs[i+1]] }

// check requires the offsets to be ordered and within the bytes.
func (v byteArrays) check() error {
	prev := uint32(0)
	for _, o := range v.offs {
		if o < prev || o > uint32(len(v.b)) {
			return fmt.Errorf("byte array offset %d out of order or past %d bytes", o, len(v.b))
		}
		prev = o
	}
	return nil
}

// column streams the values of one column chunk, one page at a time.
type column struct {
	pages parquet.Pages
	page  parquet.Page
	off   int // values of page consumed
	n     int // values in page

	// The current page's values, of kind: plain ones or, if indexed,
	// dictionary indexes (idx).
	kind    encoding.Kind
	indexed bool
	i32     []int32
	i64     []int64
	bytes   byteArrays
	idx     []int32

	// The dictionary the indexes refer to (dict), as typed values; dictStr
	// holds the strings of its first entries.
	dict      parquet.Dictionary
	dictKind  encoding.Kind
	dictLen   int
	dictI32   []int32
	dictI64   []int64
	dictBytes byteArrays
	dictStr   []string

	// Scratch for one batch of expanded values.
	bufI32 []int32
	bufI64 []int64
	bufStr []string
}

// release returns the current page to parquet-go's pool.
func (c *column) release() {
	if c.page != nil {
		parquet.Release(c.page)
		c.page = nil
	}
	c.off, c.n = 0, 0
	c.i32, c.i64, c.bytes, c.idx = nil, nil, byteArrays{}, nil
}

func (c *column) close() {
	c.release()
	if c.pages != nil {
		c.pages.Close()
		c.pages = nil
	}
	c.dict, c.dictI32, c.dictI64, c.dictBytes, c.dictStr = nil, nil, nil, byteArrays{}, nil
}

// next loads the next page.
func (c *column) next(in interner) error {
	c.release()
	p, err := c.pages.ReadPage()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return io.ErrUnexpectedEOF
		}
		return err
	}
	c.page = p
	data := p.Data()
	c.indexed = p.Dictionary() != nil
	if c.indexed {
		if d := p.Dictionary(); d != c.dict {
			if err := c.loadDict(d, in); err != nil {
				return err
			}
		}
		if data.Kind() != encoding.Int32 {
			return fmt.Errorf("dictionary-encoded page holds %s indexes", data.Kind())
		}
		c.kind, c.idx = c.dictKind, data.Int32()
		for _, x := range c.idx {
			if uint32(x) >= uint32(c.dictLen) {
				return fmt.Errorf("dictionary index %d out of range (%d values)", x, c.dictLen)
			}
		}
		c.n = len(c.idx)
	} else {
		c.kind = data.Kind()
		switch c.kind {
		case encoding.Int32:
			c.i32 = data.Int32()
			c.n = len(c.i32)
		case encoding.Int64:
			c.i64 = data.Int64()
			c.n = len(c.i64)
		case encoding.ByteArray:
			c.bytes.b, c.bytes.offs = data.ByteArray()
			if err := c.bytes.check(); err != nil {
				return err
			}
			c.n = c.bytes.len()
		default:
			return fmt.Errorf("page of %s values", c.kind)
		}
	}
	if int64(c.n) != p.NumValues() {
		return fmt.Errorf("page holds %d values, its header says %d", c.n, p.NumValues())
	}
	return nil
}

// loadDict takes the typed values of dictionary d.
func (c *column) loadDict(d parquet.Dictionary, in interner) error {
	c.dict = d
	c.dictI32, c.dictI64, c.dictBytes, c.dictStr = nil, nil, byteArrays{}, c.dictStr[:0]
	data := d.Page().Data()
	c.dictKind = data.Kind()
	switch c.dictKind {
	case encoding.Int32:
		c.dictI32 = data.Int32()
		c.dictLen = len(c.dictI32)
	case encoding.Int64:
		c.dictI64 = data.Int64()
		c.dictLen = len(c.dictI64)
	case encoding.ByteArray:
		c.dictBytes.b, c.dictBytes.offs = data.ByteArray()
		if err := c.dictBytes.check(); err != nil {
			return fmt.Errorf("dictionary: %w", err)
		}
		c.dictLen = c.dictBytes.len()
		for i := range min(c.dictLen, maxDictStrings) {
			c.dictStr = append(c.dictStr, in.get(c.dictBytes.at(int32(i))))
		}
	default:
		return fmt.Errorf("dictionary of %s values", c.dictKind)
	}
	return nil
}

// fill sets field f of rows from the column's next len(rows) values.
func fill[T any](c *column, f *field[T], rows []T, in interner) error {
	for len(rows) > 0 {
		if c.off == c.n {
			if err := c.next(in); err != nil {
				return err
			}
			continue
		}
		k := min(len(rows), c.n-c.off)
		a, b := c.off, c.off+k
		switch {
		case f.i32 != nil && c.kind == encoding.Int32:
			v := c.i32
			if c.indexed {
				c.bufI32 = gather(c.bufI32, c.dictI32, c.idx[a:b])
				v, a, b = c.bufI32, 0, k
			}
			f.i32(rows[:k], v[a:b])
		case f.i64 != nil && c.kind == encoding.Int64:
			v := c.i64
			if c.indexed {
				c.bufI64 = gather(c.bufI64, c.dictI64, c.idx[a:b])
				v, a, b = c.bufI64, 0, k
			}
			f.i64(rows[:k], v[a:b])
		case f.str != nil && c.kind == encoding.ByteArray:
			s := c.bufStr[:0]
			if c.indexed {
				for _, x := range c.idx[a:b] {
					if int(x) < len(c.dictStr) {
						s = append(s, c.dictStr[x])
					} else {
						s = append(s, in.get(c.dictBytes.at(x)))
					}
				}
			} else {
				for i := a; i < b; i++ {
					s = append(s, in.get(c.bytes.at(int32(i))))
				}
			}
			c.bufStr = s
			f.str(rows[:k], s)
		default:
			return fmt.Errorf("%s values in a column of another type", c.kind)
		}
		c.off += k
		rows = rows[k:]
	}
	return nil
}

// gather sets buf to dict[idx[i]] for every i; the indexes are checked.
func gather[V any](buf, dict []V, idx []int32) []V {
	buf = buf[:0]
	for _, x := range idx {
		buf = append(buf, dict[x])
	}
	return buf
}

// scanColumns reads the rows of every row group the filter may match, in
// batches, column by column. specs are the kind's columns (schema.go): a
// field whose column a minor version added (columnSpec.since) stays zero
// in the files of an older one.
func scanColumns[T any](f *file, specs []columnSpec, fields []field[T], filter Filter, keep func(*T) bool, fn func([]T) error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: malformed parquet data: %v", f.info.Name, r)
		}
	}()
	schema := f.pf.Schema()
	leaves := make([]int, len(fields))
	for j := range fields {
		leaf, ok := schema.Lookup(fields[j].name)
		switch {
		case !ok && slices.ContainsFunc(specs, func(c columnSpec) bool { return c.name == fields[j].name && c.since }):
			leaves[j] = absentColumn // an older minor version: the field stays zero
			continue
		case !ok:
			return fmt.Errorf("%s: column %q missing", f.info.Name, fields[j].name)
		}
		leaves[j] = leaf.ColumnIndex
	}
	batch := make([]T, readBatch)
	cols := make([]column, len(fields))
	defer func() {
		for j := range cols {
			cols[j].close()
		}
	}()
	in := interner{}
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
		chunks := rg.ColumnChunks()
		for j := range cols {
			cols[j].close()
			if leaves[j] == absentColumn {
				continue
			}
			if leaves[j] < 0 || leaves[j] >= len(chunks) {
				return fmt.Errorf("%s: row group %d has no column %q", f.info.Name, i, fields[j].name)
			}
			cols[j].pages = chunks[leaves[j]].Pages()
		}
		for read := int64(0); read < g.Rows; {
			out := batch[:min(int64(len(batch)), g.Rows-read)]
			for j := range cols {
				if leaves[j] == absentColumn {
					continue
				}
				if err := fill(&cols[j], &fields[j], out, in); err != nil {
					if errors.Is(err, io.ErrUnexpectedEOF) {
						err = fmt.Errorf("pages end before the row group's %d rows", g.Rows)
					}
					return fmt.Errorf("%s: row group %d column %s, rows %d..%d: %w",
						f.info.Name, i, fields[j].name, row+read, row+read+int64(len(out)), err)
				}
			}
			read += int64(len(out))
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
					return err
				}
			}
		}
		for j := range cols {
			cols[j].close()
		}
		row += g.Rows
	}
	return nil
}
