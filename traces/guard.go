package traces

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Limits on what a trace file may claim. parquet-go allocates from the sizes
// and counts a file declares (thrift list lengths, page sizes, decompressed
// sizes) before it can check them, so the reader validates every such claim
// against these bounds and against the file's real size first.
const (
	// MaxFooterBytes bounds the parquet footer (file metadata).
	MaxFooterBytes = 64 << 20
	// MaxFooterElements bounds the total number of list/set/map elements in the footer.
	MaxFooterElements = 1 << 20
	// MaxRowGroupRows bounds the rows of one row group.
	MaxRowGroupRows = 1 << 24
	// MaxPageBytes bounds the compressed and uncompressed size of one page.
	MaxPageBytes = 64 << 20
	// maxThriftDepth bounds struct/list nesting in thrift data.
	maxThriftDepth = 32
)

// errCorrupt marks structural problems in a trace file.
var errCorrupt = errors.New("corrupt or hostile parquet data")

// Thrift compact protocol type ids.
const (
	tStop   = 0
	tTrue   = 1
	tFalse  = 2
	tByte   = 3
	tI16    = 4
	tI32    = 5
	tI64    = 6
	tDouble = 7
	tBinary = 8
	tList   = 9
	tSet    = 10
	tMap    = 11
	tStruct = 12
)

// thriftSkim walks thrift compact-protocol data without allocating from the
// lengths it declares. visit, if not nil, sees every integer field of the
// outer struct (depth 0) and of the structs directly inside it (depth 1), as
// (outer field id, inner field id or 0, value).
type thriftSkim struct {
	b        []byte
	off      int
	nelems   int // list/set/map elements seen so far
	maxElems int
	visit    func(outer, inner int16, v int64)
}

func (t *thriftSkim) fail(what string) error {
	return fmt.Errorf("%w: thrift %s at byte %d", errCorrupt, what, t.off)
}

func (t *thriftSkim) byte1() (byte, error) {
	if t.off >= len(t.b) {
		return 0, t.fail("data ends early")
	}
	c := t.b[t.off]
	t.off++
	return c, nil
}

func (t *thriftSkim) uvarint() (uint64, error) {
	v, n := binary.Uvarint(t.b[t.off:])
	if n <= 0 {
		return 0, t.fail("bad varint")
	}
	t.off += n
	return v, nil
}

func (t *thriftSkim) varint() (int64, error) {
	u, err := t.uvarint()
	return int64(u>>1) ^ -int64(u&1), err
}

func (t *thriftSkim) skipBytes(n uint64) error {
	if n > uint64(len(t.b)-t.off) {
		return t.fail(fmt.Sprintf("length %d past the end", n))
	}
	t.off += int(n)
	return nil
}

// structure walks one struct; path holds the enclosing field ids.
func (t *thriftSkim) structure(depth int, outer int16) error {
	if depth > maxThriftDepth {
		return t.fail("nesting too deep")
	}
	var id int16
	for {
		h, err := t.byte1()
		if err != nil {
			return err
		}
		typ := h & 0x0f
		if typ == tStop {
			return nil
		}
		if d := h >> 4; d != 0 {
			id += int16(d)
		} else {
			v, err := t.varint()
			if err != nil {
				return err
			}
			id = int16(v)
		}
		if err := t.value(typ, depth, outer, id); err != nil {
			return err
		}
	}
}

func (t *thriftSkim) value(typ byte, depth int, outer, id int16) error {
	switch typ {
	case tTrue, tFalse:
		if t.visit != nil && depth <= 1 {
			v := int64(0)
			if typ == tTrue {
				v = 1
			}
			if depth == 0 {
				t.visit(id, 0, v)
			} else {
				t.visit(outer, id, v)
			}
		}
		return nil
	case tByte:
		_, err := t.byte1()
		return err
	case tI16, tI32, tI64:
		v, err := t.varint()
		if err == nil && t.visit != nil {
			switch depth {
			case 0:
				t.visit(id, 0, v)
			case 1:
				t.visit(outer, id, v)
			}
		}
		return err
	case tDouble:
		return t.skipBytes(8)
	case tBinary:
		n, err := t.uvarint()
		if err != nil {
			return err
		}
		return t.skipBytes(n)
	case tList, tSet:
		h, err := t.byte1()
		if err != nil {
			return err
		}
		n := uint64(h >> 4)
		et := h & 0x0f
		if n == 15 {
			if n, err = t.uvarint(); err != nil {
				return err
			}
		}
		return t.each(n, depth, func() error {
			if et == tTrue || et == tFalse {
				_, err := t.byte1() // booleans in lists take a byte each
				return err
			}
			return t.value(et, depth+1, -1, 0)
		})
	case tMap:
		n, err := t.uvarint()
		if err != nil || n == 0 {
			return err
		}
		kv, err := t.byte1()
		if err != nil {
			return err
		}
		return t.each(n, depth, func() error {
			if err := t.value(kv>>4, depth+1, -1, 0); err != nil {
				return err
			}
			return t.value(kv&0x0f, depth+1, -1, 0)
		})
	case tStruct:
		if depth == 0 {
			return t.structure(depth+1, id)
		}
		return t.structure(depth+1, -1)
	}
	return t.fail(fmt.Sprintf("unknown type %d", typ))
}

func (t *thriftSkim) each(n uint64, depth int, each func() error) error {
	// Every element takes at least one byte: a count larger than the bytes
	// left is a lie, whatever the element type.
	if n > uint64(len(t.b)-t.off) {
		return t.fail(fmt.Sprintf("list of %d elements in %d bytes", n, len(t.b)-t.off))
	}
	t.nelems += int(n)
	if t.nelems > t.maxElems {
		return t.fail(fmt.Sprintf("more than %d list elements", t.maxElems))
	}
	for i := uint64(0); i < n; i++ {
		if err := each(); err != nil {
			return err
		}
	}
	return nil
}

// checkFooter validates the thrift structure of a parquet footer before
// parquet-go decodes it.
func checkFooter(footer []byte) error {
	t := &thriftSkim{b: footer, maxElems: MaxFooterElements}
	if err := t.structure(0, 0); err != nil {
		return fmt.Errorf("file metadata: %w", err)
	}
	return nil
}

// pageHeader is what the reader checks in a parquet page header.
type pageHeader struct {
	typ          int64
	uncompressed int64
	compressed   int64
	numValues    int64
	levelBytes   int64 // data page v2: repetition + definition level bytes, never compressed
	notCompr     bool  // data page v2: is_compressed = false
	encoding     int64 // of the values
	headerLen    int
}

// parsePageHeader reads a thrift PageHeader from the start of b.
func parsePageHeader(b []byte) (pageHeader, error) {
	var h pageHeader
	h.typ = -1
	t := &thriftSkim{b: b, maxElems: 1 << 12}
	t.visit = func(outer, inner int16, v int64) {
		switch {
		case inner == 0 && outer == 1:
			h.typ = v
		case inner == 0 && outer == 2:
			h.uncompressed = v
		case inner == 0 && outer == 3:
			h.compressed = v
		case inner == 1 && (outer == 5 || outer == 7 || outer == 8):
			h.numValues = v
		case outer == 8 && (inner == 5 || inner == 6):
			if v > 0 {
				h.levelBytes += v
			}
		case outer == 8 && inner == 7:
			h.notCompr = v == 0
		case (outer == 5 || outer == 7) && inner == 2, outer == 8 && inner == 4:
			h.encoding = v
		}
	}
	if err := t.structure(0, 0); err != nil {
		return h, err
	}
	h.headerLen = t.off
	return h, nil
}

// checkZstd walks the zstd frames of a compressed page body and bounds what
// they decompress to: a frame's declared content size (the decoder stops a
// frame that outgrows it) or, without one, 128 KiB per block. The total may
// exceed limit (the page's uncompressed size) by one block at most.
func checkZstd(b []byte, limit int64) error {
	var total uint64
	for len(b) > 0 {
		if len(b) < 4 {
			return fmt.Errorf("%w: zstd frame truncated", errCorrupt)
		}
		magic := binary.LittleEndian.Uint32(b)
		if magic&0xFFFFFFF0 == 0x184D2A50 { // skippable frame
			if len(b) < 8 {
				return fmt.Errorf("%w: zstd skippable frame truncated", errCorrupt)
			}
			n := uint64(binary.LittleEndian.Uint32(b[4:]))
			if n > uint64(len(b)-8) {
				return fmt.Errorf("%w: zstd skippable frame truncated", errCorrupt)
			}
			b = b[8+n:]
			continue
		}
		if magic != 0xFD2FB528 {
			return fmt.Errorf("%w: bad zstd magic %#x", errCorrupt, magic)
		}
		if len(b) < 5 {
			return fmt.Errorf("%w: zstd frame header truncated", errCorrupt)
		}
		fhd := b[4]
		fcsFlag := fhd >> 6
		single := fhd&0x20 != 0
		checksum := fhd&0x04 != 0
		dictLen := [4]int{0, 1, 2, 4}[fhd&3]
		off := 5
		if !single {
			off++ // window descriptor
		}
		off += dictLen
		fcsLen := [4]int{0, 2, 4, 8}[fcsFlag]
		if fcsFlag == 0 && single {
			fcsLen = 1
		}
		if len(b) < off+fcsLen {
			return fmt.Errorf("%w: zstd frame header truncated", errCorrupt)
		}
		var fcs uint64
		switch fcsLen {
		case 1:
			fcs = uint64(b[off])
		case 2:
			fcs = uint64(binary.LittleEndian.Uint16(b[off:])) + 256
		case 4:
			fcs = uint64(binary.LittleEndian.Uint32(b[off:]))
		case 8:
			fcs = binary.LittleEndian.Uint64(b[off:])
		}
		off += fcsLen
		// Blocks.
		var blocks uint64
		for {
			if len(b) < off+3 {
				return fmt.Errorf("%w: zstd block truncated", errCorrupt)
			}
			bh := uint32(b[off]) | uint32(b[off+1])<<8 | uint32(b[off+2])<<16
			off += 3
			last := bh&1 != 0
			size := int(bh >> 3)
			switch (bh >> 1) & 3 {
			case 1: // RLE block: one byte
				size = 1
			case 3:
				return fmt.Errorf("%w: reserved zstd block type", errCorrupt)
			}
			if len(b) < off+size {
				return fmt.Errorf("%w: zstd block truncated", errCorrupt)
			}
			off += size
			if fcsLen == 0 {
				// No declared size: a block regenerates at most 128 KiB.
				switch (bh >> 1) & 3 {
				case 0:
					blocks += uint64(bh >> 3)
				case 1:
					blocks += uint64(min(bh>>3, zstdMaxBlock))
				default:
					blocks += zstdMaxBlock
				}
			}
			if last {
				break
			}
		}
		if fcsLen == 0 {
			fcs = blocks
		}
		total += fcs
		// The decoder stops a frame that outgrows its declared size; frames
		// without one are bounded by their blocks, within one block of slack.
		if total > uint64(limit)+zstdMaxBlock {
			return fmt.Errorf("%w: zstd data may decode to %d bytes, page header says %d", errCorrupt, total, limit)
		}
		if checksum {
			off += 4
		}
		if len(b) < off {
			return fmt.Errorf("%w: zstd checksum truncated", errCorrupt)
		}
		b = b[off:]
	}
	return nil
}

// zstdMaxBlock is the most a zstd block regenerates (Block_Maximum_Size).
const zstdMaxBlock = 128 << 10

// checkSnappy checks the decoded length a snappy block declares.
func checkSnappy(b []byte, limit int64) error {
	n, k := binary.Uvarint(b)
	if k <= 0 {
		return fmt.Errorf("%w: bad snappy length", errCorrupt)
	}
	if n > uint64(limit) {
		return fmt.Errorf("%w: snappy data claims %d bytes, page header %d", errCorrupt, n, limit)
	}
	return nil
}

// Parquet encodings a trace page may use: parquet-go writes PLAIN values and
// RLE_DICTIONARY indexes (PLAIN_DICTIONARY in older files). Other encodings
// are refused: their decoders allocate from run and block sizes in the data.
const (
	encPlain          = 0
	encPlainDict      = 2
	encRLEDictionary  = 8
	maxRLEBitWidth    = 32
	bitPackedGroupLen = 8
)

// checkRLEIndexes checks the RLE/bit-packed hybrid runs of a dictionary
// index page (bit width byte, then runs) against the page's value count:
// the runs may not describe more values than the page holds.
func checkRLEIndexes(b []byte, numValues int64) error {
	if len(b) == 0 {
		return nil
	}
	bw := int64(b[0])
	if bw > maxRLEBitWidth {
		return fmt.Errorf("%w: dictionary index bit width %d", errCorrupt, bw)
	}
	b = b[1:]
	var n int64
	limit := numValues + bitPackedGroupLen
	for len(b) > 0 {
		h, k := binary.Uvarint(b)
		if k <= 0 {
			return fmt.Errorf("%w: bad RLE run header", errCorrupt)
		}
		b = b[k:]
		if h&1 == 0 { // RLE run: count, then one value
			count := h >> 1
			if count > uint64(limit) {
				return fmt.Errorf("%w: RLE run of %d values in a page of %d", errCorrupt, count, numValues)
			}
			n += int64(count)
			w := (bw + 7) / 8
			if int64(len(b)) < w {
				return fmt.Errorf("%w: RLE run truncated", errCorrupt)
			}
			b = b[w:]
		} else { // bit-packed groups of 8 values
			groups := h >> 1
			if groups > uint64(limit) {
				return fmt.Errorf("%w: bit-packed run of %d groups in a page of %d values", errCorrupt, groups, numValues)
			}
			n += int64(groups) * bitPackedGroupLen
			size := int64(groups) * bw
			if int64(len(b)) < size {
				size = int64(len(b)) // a short last run is padded by the decoder
			}
			b = b[size:]
		}
		if n > limit {
			return fmt.Errorf("%w: RLE runs hold %d values, page %d", errCorrupt, n, numValues)
		}
	}
	return nil
}
