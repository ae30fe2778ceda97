package refexec

import (
	"encoding/binary"
	"math"

	"github.com/twinccl/twinccl/model"
)

var le = binary.LittleEndian

// reduceInto computes dst[i] = dst[i] op src[i] for every element of d.
// Avg reduces as a sum; its division is the post op.
func reduceInto(d model.Dtype, op model.RedOp, dst, src []byte) {
	switch d {
	case model.DtypeInt8:
		for i := range dst {
			dst[i] = byte(redInt(op, int64(int8(dst[i])), int64(int8(src[i]))))
		}
	case model.DtypeUint8:
		for i := range dst {
			dst[i] = byte(redUint(op, uint64(dst[i]), uint64(src[i])))
		}
	case model.DtypeInt32:
		for i := 0; i+4 <= len(dst); i += 4 {
			le.PutUint32(dst[i:], uint32(redInt(op, int64(int32(le.Uint32(dst[i:]))), int64(int32(le.Uint32(src[i:]))))))
		}
	case model.DtypeUint32:
		for i := 0; i+4 <= len(dst); i += 4 {
			le.PutUint32(dst[i:], uint32(redUint(op, uint64(le.Uint32(dst[i:])), uint64(le.Uint32(src[i:])))))
		}
	case model.DtypeInt64:
		for i := 0; i+8 <= len(dst); i += 8 {
			le.PutUint64(dst[i:], uint64(redInt(op, int64(le.Uint64(dst[i:])), int64(le.Uint64(src[i:])))))
		}
	case model.DtypeUint64:
		for i := 0; i+8 <= len(dst); i += 8 {
			le.PutUint64(dst[i:], redUint(op, le.Uint64(dst[i:]), le.Uint64(src[i:])))
		}
	case model.DtypeFP32:
		if op == model.RedSum || op == model.RedAvg {
			for i := 0; i+4 <= len(dst); i += 4 {
				v := math.Float32frombits(le.Uint32(dst[i:])) + math.Float32frombits(le.Uint32(src[i:]))
				le.PutUint32(dst[i:], math.Float32bits(v))
			}
			return
		}
		for i := 0; i+4 <= len(dst); i += 4 {
			v := redF32(op, math.Float32frombits(le.Uint32(dst[i:])), math.Float32frombits(le.Uint32(src[i:])))
			le.PutUint32(dst[i:], math.Float32bits(v))
		}
	case model.DtypeFP64:
		for i := 0; i+8 <= len(dst); i += 8 {
			a, b := math.Float64frombits(le.Uint64(dst[i:])), math.Float64frombits(le.Uint64(src[i:]))
			var v float64
			switch op {
			case model.RedProd:
				v = a * b
			case model.RedMax:
				v = math.Max(a, b)
			case model.RedMin:
				v = math.Min(a, b)
			default:
				v = a + b
			}
			le.PutUint64(dst[i:], math.Float64bits(v))
		}
	case model.DtypeFP16:
		for i := 0; i+2 <= len(dst); i += 2 {
			v := redF32(op, F16ToF32(le.Uint16(dst[i:])), F16ToF32(le.Uint16(src[i:])))
			le.PutUint16(dst[i:], F32ToF16(v))
		}
	case model.DtypeBF16:
		for i := 0; i+2 <= len(dst); i += 2 {
			v := redF32(op, BF16ToF32(le.Uint16(dst[i:])), BF16ToF32(le.Uint16(src[i:])))
			le.PutUint16(dst[i:], F32ToBF16(v))
		}
	}
}

func redInt(op model.RedOp, a, b int64) int64 {
	switch op {
	case model.RedProd:
		return a * b
	case model.RedMax:
		return max(a, b)
	case model.RedMin:
		return min(a, b)
	}
	return a + b
}

func redUint(op model.RedOp, a, b uint64) uint64 {
	switch op {
	case model.RedProd:
		return a * b
	case model.RedMax:
		return max(a, b)
	case model.RedMin:
		return min(a, b)
	}
	return a + b
}

func redF32(op model.RedOp, a, b float32) float32 {
	switch op {
	case model.RedProd:
		return a * b
	case model.RedMax:
		if a > b || b != b {
			return a
		}
		return b
	case model.RedMin:
		if a < b || b != b {
			return a
		}
		return b
	}
	return a + b
}

// PostOp applies the reduction's post operation to buf in place: for avg,
// a division by nRanks in the element type (truncating for integers, as C
// does); nothing for the other reductions. Exported so that other
// executors and the conformance suite compute averages the same way.
func PostOp(d model.Dtype, op model.RedOp, buf []byte, nRanks int) {
	if op != model.RedAvg || nRanks <= 1 {
		return
	}
	n := int64(nRanks)
	switch d {
	case model.DtypeInt8:
		for i := range buf {
			buf[i] = byte(int64(int8(buf[i])) / n)
		}
	case model.DtypeUint8:
		for i := range buf {
			buf[i] = byte(uint64(buf[i]) / uint64(n))
		}
	case model.DtypeInt32:
		for i := 0; i+4 <= len(buf); i += 4 {
			le.PutUint32(buf[i:], uint32(int64(int32(le.Uint32(buf[i:])))/n))
		}
	case model.DtypeUint32:
		for i := 0; i+4 <= len(buf); i += 4 {
			le.PutUint32(buf[i:], le.Uint32(buf[i:])/uint32(n))
		}
	case model.DtypeInt64:
		for i := 0; i+8 <= len(buf); i += 8 {
			le.PutUint64(buf[i:], uint64(int64(le.Uint64(buf[i:]))/n))
		}
	case model.DtypeUint64:
		for i := 0; i+8 <= len(buf); i += 8 {
			le.PutUint64(buf[i:], le.Uint64(buf[i:])/uint64(n))
		}
	case model.DtypeFP32:
		for i := 0; i+4 <= len(buf); i += 4 {
			le.PutUint32(buf[i:], math.Float32bits(math.Float32frombits(le.Uint32(buf[i:]))/float32(n)))
		}
	case model.DtypeFP64:
		for i := 0; i+8 <= len(buf); i += 8 {
			le.PutUint64(buf[i:], math.Float64bits(math.Float64frombits(le.Uint64(buf[i:]))/float64(n)))
		}
	case model.DtypeFP16:
		for i := 0; i+2 <= len(buf); i += 2 {
			le.PutUint16(buf[i:], F32ToF16(F16ToF32(le.Uint16(buf[i:]))/float32(n)))
		}
	case model.DtypeBF16:
		for i := 0; i+2 <= len(buf); i += 2 {
			le.PutUint16(buf[i:], F32ToBF16(BF16ToF32(le.Uint16(buf[i:]))/float32(n)))
		}
	}
}

// F16ToF32 converts an IEEE binary16 value to float32 (exactly).
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	case exp == 0:
		if man == 0 {
			return math.Float32frombits(sign)
		}
		v := float32(man) / 1024 / 16384 // man * 2^-24
		if sign != 0 {
			return -v
		}
		return v
	}
	return math.Float32frombits(sign | (exp+112)<<23 | man<<13)
}

// F32ToF16 converts float32 to binary16, rounding to nearest even.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rem := m & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++
	}
	return sign | uint16(r)
}

// BF16ToF32 converts a bfloat16 value to float32 (exactly).
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts float32 to bfloat16, rounding to nearest even.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}
