package traces

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Chakra execution trace decoding (mlcommons/chakra schema/protobuf/
// et_def.proto): a file is a sequence of messages, each preceded by its
// length as a varint, a GlobalMetadata first and then Nodes. Decoded with
// protowire, by field number, without generated code.

// Chakra node types (et_def.proto's NodeType).
const (
	chakraMetadataNode = 1
	chakraCompNode     = 4
	chakraSendNode     = 5
	chakraRecvNode     = 6
	chakraCollNode     = 7
)

// maxChakraMessage bounds one message of a Chakra file.
const maxChakraMessage = 64 << 20

// chakraNode is the part of a Chakra Node the importer reads.
type chakraNode struct {
	ID          uint64
	Name        string
	Type        int64
	CtrlDeps    []uint64
	DataDeps    []uint64
	StartMicros uint64
	DurMicros   uint64
	InputTypes  string
	InputValues string
	Attrs       map[string]chakraAttr
}

// chakraAttr is one AttributeProto: a number, a string or a list.
type chakraAttr struct {
	Num    float64 // any scalar number, bool as 0/1
	IsNum  bool
	Str    string
	IsStr  bool
	List   []float64 // a numeric or bool list
	IsList bool
}

// intAttr returns an integral attribute.
func (n *chakraNode) intAttr(name string) (int64, bool, error) {
	a, ok := n.Attrs[name]
	if !ok {
		return 0, false, nil
	}
	if !a.IsNum || a.Num != math.Trunc(a.Num) || math.Abs(a.Num) > 1<<62 {
		return 0, true, fmt.Errorf("attribute %s is not an integer", name)
	}
	return int64(a.Num), true, nil
}

// readChakraFile decodes a Chakra execution trace: its metadata version
// and its nodes in file order.
func readChakraFile(r io.Reader, name string) (version string, nodes []chakraNode, err error) {
	br := &countingReader{r: r}
	for i := 0; ; i++ {
		msg, err := readDelimited(br)
		if errors.Is(err, io.EOF) {
			if i == 0 {
				return "", nil, fmt.Errorf("%s: empty file (want a Chakra execution trace: GlobalMetadata, then Nodes)", name)
			}
			return version, nodes, nil
		}
		if err != nil {
			return "", nil, fmt.Errorf("%s: message %d at byte %d: %w", name, i, br.n, err)
		}
		if i == 0 {
			if version, err = decodeChakraMetadata(msg); err != nil {
				return "", nil, fmt.Errorf("%s: GlobalMetadata: %w", name, err)
			}
			continue
		}
		n, err := decodeChakraNode(msg)
		if err != nil {
			return "", nil, fmt.Errorf("%s: node %d (message %d): %w", name, len(nodes), i, err)
		}
		nodes = append(nodes, n)
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func (c *countingReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(c, b[:])
	return b[0], err
}

// readDelimited reads one varint-length-prefixed message; io.EOF only
// before its first byte.
func readDelimited(r *countingReader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, io.EOF // no byte of a next message
		}
		return nil, fmt.Errorf("length: %w", err)
	}
	if n > maxChakraMessage {
		return nil, fmt.Errorf("message of %d bytes, at most %d", n, maxChakraMessage)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, fmt.Errorf("message of %d bytes: %w", n, io.ErrUnexpectedEOF)
	}
	return buf, nil
}

// fields walks a message's fields, calling fn with each field's number,
// wire type and raw value (for bytes: the contents).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var (
			v   uint64
			raw []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(b)
			v = uint64(x)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

func decodeChakraMetadata(b []byte) (string, error) {
	version := ""
	err := fields(b, func(num protowire.Number, typ protowire.Type, _ uint64, raw []byte) error {
		if num == 1 && typ == protowire.BytesType {
			version = string(raw)
		}
		return nil
	})
	return version, err
}

// uint64s appends a repeated uint64 field, packed or not.
func uint64s(dst []uint64, typ protowire.Type, v uint64, raw []byte) ([]uint64, error) {
	if typ == protowire.VarintType {
		return append(dst, v), nil
	}
	if typ != protowire.BytesType {
		return dst, fmt.Errorf("wire type %d for a repeated uint64", typ)
	}
	for len(raw) > 0 {
		x, n := protowire.ConsumeVarint(raw)
		if n < 0 {
			return dst, protowire.ParseError(n)
		}
		dst = append(dst, x)
		raw = raw[n:]
	}
	return dst, nil
}

func decodeChakraNode(b []byte) (chakraNode, error) {
	n := chakraNode{Attrs: map[string]chakraAttr{}}
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		var err error
		switch num {
		case 1:
			n.ID = v
		case 2:
			n.Name = string(raw)
		case 3:
			n.Type = int64(v)
		case 4:
			n.CtrlDeps, err = uint64s(n.CtrlDeps, typ, v, raw)
		case 5:
			n.DataDeps, err = uint64s(n.DataDeps, typ, v, raw)
		case 6:
			n.StartMicros = v
		case 7:
			n.DurMicros = v
		case 8:
			err = fields(raw, func(num protowire.Number, _ protowire.Type, _ uint64, s []byte) error {
				switch num {
				case 1:
					n.InputValues = string(s)
				case 3:
					n.InputTypes = string(s)
				}
				return nil
			})
		case 10:
			var name string
			var a chakraAttr
			name, a, err = decodeChakraAttr(raw)
			if err == nil {
				if _, dup := n.Attrs[name]; !dup {
					n.Attrs[name] = a
				}
			}
		}
		return err
	})
	if err == nil && (n.Type < 0 || n.Type > 1<<20) {
		err = fmt.Errorf("node type %d", n.Type)
	}
	return n, err
}

// decodeChakraAttr reads an AttributeProto (name = 1, the value's oneof
// from 3 on: scalars at odd numbers, lists at even ones).
func decodeChakraAttr(b []byte) (string, chakraAttr, error) {
	var (
		name string
		a    chakraAttr
	)
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1:
			name = string(raw)
		case num == 2:
		case num == 29 || num == 31: // string_val, bytes_val
			a.Str, a.IsStr = string(raw), true
		case num >= 3 && num <= 28 && num%2 == 1:
			a.Num, a.IsNum = scalarValue(num, v), true
		case num >= 4 && num <= 28 && num%2 == 0:
			list, err := listValues(num-1, raw)
			if err != nil {
				return fmt.Errorf("attribute %q: %w", name, err)
			}
			a.List, a.IsList = list, true
		}
		return nil
	})
	return name, a, err
}

// scalarValue converts the raw value of scalar field num of AttributeProto.
func scalarValue(num protowire.Number, v uint64) float64 {
	switch num {
	case 3, 21: // double, fixed64 read as bits/uint below
		if num == 3 {
			return math.Float64frombits(v)
		}
		return float64(v)
	case 5: // float
		return float64(math.Float32frombits(uint32(v)))
	case 7, 23: // int32, sfixed32
		return float64(int32(v))
	case 9, 25: // int64, sfixed64
		return float64(int64(v))
	case 15: // sint32
		return float64(int32(protowire.DecodeZigZag(v & math.MaxUint32)))
	case 17: // sint64
		return float64(protowire.DecodeZigZag(v))
	case 27: // bool
		if v != 0 {
			return 1
		}
		return 0
	}
	return float64(v) // uint32, uint64, fixed32
}

// listValues reads a XxxList message (values = 1, repeated, packed or not)
// whose elements are of scalar field type num.
func listValues(num protowire.Number, b []byte) ([]float64, error) {
	var out []float64
	err := fields(b, func(f protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		if f != 1 {
			return nil
		}
		if typ != protowire.BytesType {
			out = append(out, scalarValue(num, v))
			return nil
		}
		if num == 29 || num == 31 {
			return nil // string and bytes lists are not read
		}
		for len(raw) > 0 {
			var n int
			switch num {
			case 3, 21, 25:
				v, n = protowire.ConsumeFixed64(raw)
			case 5, 19, 23:
				var x uint32
				x, n = protowire.ConsumeFixed32(raw)
				v = uint64(x)
			default:
				v, n = protowire.ConsumeVarint(raw)
			}
			if n < 0 {
				return protowire.ParseError(n)
			}
			out = append(out, scalarValue(num, v))
			raw = raw[n:]
			if len(out) > 1<<20 {
				return fmt.Errorf("list of more than %d values", 1<<20)
			}
		}
		return nil
	})
	return out, err
}
