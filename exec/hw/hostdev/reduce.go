package hostdev

import (
	"encoding/binary"
	"unsafe"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/refexec"
)

// littleEndian is true on hosts whose native order is the wire order, where
// elements can be read in place.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// reduceSrcs stores srcs[0] op srcs[1] op ... into dst with refexec's
// semantics (left to right). For the common sums it reads both first
// sources and writes dst in one pass instead of a copy followed by a
// read-modify-write pass.
func reduceSrcs(d model.Dtype, op model.RedOp, dst []byte, srcs [][]byte) {
	rest := srcs[1:]
	if len(srcs) >= 2 && add2(d, op, dst, srcs[0], srcs[1]) {
		rest = srcs[2:]
	} else {
		copy(dst, srcs[0])
	}
	for _, src := range rest {
		refexec.ReduceInto(d, op, dst, src)
	}
}

// add2 computes dst = a + b for sums (Avg sums; its division is the post
// op) of the types it knows; false when it does not apply.
func add2(d model.Dtype, op model.RedOp, dst, a, b []byte) bool {
	if !littleEndian || (op != model.RedSum && op != model.RedAvg) || len(a) < len(dst) || len(b) < len(dst) {
		return false
	}
	switch d {
	case model.DtypeFP32:
		addSlices(view[float32](dst), view[float32](a), view[float32](b))
	case model.DtypeFP64:
		addSlices(view[float64](dst), view[float64](a), view[float64](b))
	case model.DtypeInt32, model.DtypeUint32:
		addSlices(view[uint32](dst), view[uint32](a), view[uint32](b))
	case model.DtypeInt64, model.DtypeUint64:
		addSlices(view[uint64](dst), view[uint64](a), view[uint64](b))
	default:
		return false
	}
	return true
}

// view is b's whole elements as a slice of T (b's length is a multiple of
// the element size on every call: slices are cut at element offsets).
func view[T float32 | float64 | uint32 | uint64](b []byte) []T {
	var z T
	n := len(b) / int(unsafe.Sizeof(z))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(&b[0])), n)
}

func addSlices[T float32 | float64 | uint32 | uint64](dst, a, b []T) {
	a, b = a[:len(dst)], b[:len(dst)]
	i := 0
	for ; i+4 <= len(dst); i += 4 {
		d, x, y := dst[i:i+4:i+4], a[i:i+4:i+4], b[i:i+4:i+4]
		d[0], d[1], d[2], d[3] = x[0]+y[0], x[1]+y[1], x[2]+y[2], x[3]+y[3]
	}
	for ; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}
