package refexec

import (
	"encoding/binary"
	"math"
	"runtime"
	"sync"

	"github.com/twinccl/twinccl/model"
)

var le = binary.LittleEndian

// parallelMin is the slice size from which kernel splits its work across
// GOMAXPROCS goroutines; parallelAlign keeps every share a whole number
// of elements and of LL/LL128 data words.
const (
	parallelMin   = 256 << 10
	parallelAlign = 64
)

// kernel stores the combination of srcs (the first source, or all of them
// reduced with the Program's operation) into dsts[0], applies the post op
// when post is set, and copies the result into the other destinations.
// Large slices are split into disjoint element ranges run side by side;
// every element is computed the same way whatever the split, so results
// do not depend on it.
func (x *runner) kernel(dsts, srcs [][]byte, post bool) {
	d, op, nRanks := x.p.Dtype, x.p.Op, x.p.NRanks
	run := func(lo, hi int) {
		dst := dsts[0][lo:hi]
		if len(srcs) == 1 {
			copy(dst, srcs[0][lo:hi])
		} else {
			reduce3(d, op, dst, srcs[0][lo:hi], srcs[1][lo:hi])
			for _, s := range srcs[2:] {
				ReduceInto(d, op, dst, s[lo:hi])
			}
		}
		if post {
			PostOp(d, op, dst, nRanks)
		}
		for _, o := range dsts[1:] {
			copy(o[lo:hi], dst)
		}
	}
	nb := len(dsts[0])
	workers := runtime.GOMAXPROCS(0)
	if nb < parallelMin || workers < 2 {
		run(0, nb)
		return
	}
	share := (nb/workers + parallelAlign - 1) / parallelAlign * parallelAlign
	var wg sync.WaitGroup
	for lo := share; lo < nb; lo += share {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			run(lo, hi)
		}(lo, min(lo+share, nb))
	}
	run(0, min(share, nb))
	wg.Wait()
}

// reduce3 computes dst[i] = a[i] op b[i]; dst must not overlap b.
func reduce3(d model.Dtype, op model.RedOp, dst, a, b []byte) {
	if d == model.DtypeFP32 && (op == model.RedSum || op == model.RedAvg) {
		addF32(dst, a, b)
		return
	}
	copy(dst, a)
	ReduceInto(d, op, dst, b)
}

// addF32 is dst = a + b over float32 elements, four at a time.
func addF32(dst, a, b []byte) {
	n := len(dst) &^ 15
	a, b = a[:len(dst)], b[:len(dst)]
	for i := 0; i < n; i += 16 {
		o := dst[i : i+16 : i+16]
		x := a[i : i+16 : i+16]
		y := b[i : i+16 : i+16]
		le.PutUint32(o[0:], math.Float32bits(math.Float32frombits(le.Uint32(x[0:]))+math.Float32frombits(le.Uint32(y[0:]))))
		le.PutUint32(o[4:], math.Float32bits(math.Float32frombits(le.Uint32(x[4:]))+math.Float32frombits(le.Uint32(y[4:]))))
		le.PutUint32(o[8:], math.Float32bits(math.Float32frombits(le.Uint32(x[8:]))+math.Float32frombits(le.Uint32(y[8:]))))
		le.PutUint32(o[12:], math.Float32bits(math.Float32frombits(le.Uint32(x[12:]))+math.Float32frombits(le.Uint32(y[12:]))))
	}
	for i := n; i+4 <= len(dst); i += 4 {
		le.PutUint32(dst[i:], math.Float32bits(math.Float32frombits(le.Uint32(a[i:]))+math.Float32frombits(le.Uint32(b[i:]))))
	}
}

// ReduceInto computes dst[i] = dst[i] op src[i] for every element of d,
// little-endian, as every executor must.
// Avg reduces as a sum; its division is the post op.
func ReduceInto(d model.Dtype, op model.RedOp, dst, src []byte) {
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
			addF32(dst, dst, src)
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
