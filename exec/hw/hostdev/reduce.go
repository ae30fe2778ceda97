package hostdev

import (
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"sync"
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
//
// dst may be one of the sources (an in-place call: the user's input is its
// output): a later source that dst overlaps would be overwritten by the
// copy of the first before it is read, so two sources are swapped (every
// reduction is commutative, exactly so in IEEE arithmetic, and refexec
// reduces two at a time) and more go through a scratch buffer.
func reduceSrcs(d model.Dtype, op model.RedOp, dst []byte, srcs [][]byte) {
	for k := 1; k < len(srcs); k++ {
		if !overlaps(dst, srcs[k]) {
			continue
		}
		if len(srcs) == 2 && !overlaps(dst, srcs[0]) {
			srcs = [][]byte{srcs[1], srcs[0]}
			break
		}
		tmp := make([]byte, len(dst))
		reduceSrcs(d, op, tmp, srcs)
		copy(dst, tmp)
		return
	}
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

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(&a[0])), uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
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

// ParallelMin is the smallest slice (bytes) whose reduction is split
// across workers; below it the goroutine hand-off costs more than it
// saves.
const ParallelMin = 256 << 10

// parallelChunk is the part of a split slice one worker takes at a time:
// small enough to stay in cache between the reduction and the copies
// that follow it, large enough to amortize the hand-off.
const parallelChunk = 64 << 10

// workers splits slices over goroutines; a zero value is ready.
type workers struct {
	wg sync.WaitGroup
}

// workerCount is d.Workers, TWINCCL_REDUCE_THREADS or GOMAXPROCS.
func (d *Device) workerCount() int {
	if d.Workers > 0 {
		return d.Workers
	}
	if v, err := strconv.Atoi(os.Getenv("TWINCCL_REDUCE_THREADS")); err == nil && v > 0 {
		d.Workers = min(v, 64)
		return d.Workers
	}
	d.Workers = max(1, runtime.GOMAXPROCS(0))
	return d.Workers
}

// combine stores the reduction of srcs into dsts[0], applies the post op
// and copies the result into dsts[1:]. Large slices are cut into chunks
// (on element boundaries) that several goroutines process at once, each
// chunk reduced and then copied while it is still in cache.
func (d *Device) combine(dt model.Dtype, op model.RedOp, dsts, srcs [][]byte, post bool, nranks int) {
	n := len(dsts[0])
	k := d.workerCount()
	part := func(lo, hi int) {
		dst := dsts[0][lo:hi]
		var ss [8][]byte
		sub := ss[:0]
		for _, s := range srcs {
			sub = append(sub, s[lo:hi])
		}
		reduceSrcs(dt, op, dst, sub)
		if post {
			refexec.PostOp(dt, op, dst, nranks)
		}
		for _, o := range dsts[1:] {
			copy(o[lo:hi], dst)
		}
	}
	es := dt.Size()
	chunk := max(es, parallelChunk/es*es)
	if k <= 1 || n < ParallelMin {
		if len(dsts) == 1 && !post {
			part(0, n)
			return
		}
		// One goroutine: still chunked, so that the copies read the
		// result from cache.
		for lo := 0; lo < n; lo += chunk {
			part(lo, min(lo+chunk, n))
		}
		return
	}
	nchunks := (n + chunk - 1) / chunk
	k = min(k, nchunks)
	// Chunks are dealt round-robin: worker w takes chunks w, w+k, ...
	run := func(w int) {
		for c := w; c < nchunks; c += k {
			lo := c * chunk
			part(lo, min(lo+chunk, n))
		}
	}
	d.work.wg.Add(k - 1)
	for w := 1; w < k; w++ {
		go func() {
			defer d.work.wg.Done()
			run(w)
		}()
	}
	run(0)
	d.work.wg.Wait()
}
