package cuda

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// KernelArgs are kernel arguments packed for cuLaunchKernel: the bytes of
// every argument value, each in a slot of its own aligned to 8 bytes and
// zero-padded to at least 8 bytes, and the offset of each slot. The bytes
// are copied into C memory at launch, where the driver reads them through
// the array of pointers it expects, so packed arguments can be reused for
// any number of launches and no Go pointer ever reaches C.
type KernelArgs struct {
	blob []byte
	offs []uint32
}

// NewKernelArgs packs kernel arguments. Each value must have the type of the
// kernel's parameter: DevicePtr or uintptr or uint64 or int64 for 8-byte
// integers and pointers, uint32/int32, uint16/int16, uint8/int8/bool,
// float32, float64, or []byte holding the exact bytes of a parameter passed
// by value (a struct). A plain int is refused: its size on the device is
// ambiguous.
func NewKernelArgs(args ...any) (KernelArgs, error) {
	var ka KernelArgs
	ka.offs = make([]uint32, 0, len(args))
	for i, a := range args {
		var b [8]byte
		var raw []byte
		switch v := a.(type) {
		case DevicePtr:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
		case uintptr:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
		case uint64:
			binary.LittleEndian.PutUint64(b[:], v)
		case int64:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
		case uint32:
			binary.LittleEndian.PutUint32(b[:], v)
		case int32:
			binary.LittleEndian.PutUint32(b[:], uint32(v))
		case uint16:
			binary.LittleEndian.PutUint16(b[:], v)
		case int16:
			binary.LittleEndian.PutUint16(b[:], uint16(v))
		case uint8:
			b[0] = v
		case int8:
			b[0] = byte(v)
		case bool:
			if v {
				b[0] = 1
			}
		case float32:
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		case float64:
			binary.LittleEndian.PutUint64(b[:], math.Float64bits(v))
		case []byte:
			if len(v) == 0 {
				return KernelArgs{}, fmt.Errorf("kernel argument %d: empty []byte", i)
			}
			raw = v
		case int:
			return KernelArgs{}, fmt.Errorf("kernel argument %d: plain int %d has no fixed device size; use int32 or int64", i, v)
		default:
			return KernelArgs{}, fmt.Errorf("kernel argument %d: unsupported type %T", i, a)
		}
		off := (len(ka.blob) + 7) &^ 7
		if raw == nil {
			raw = b[:]
		}
		n := (len(raw) + 7) &^ 7
		if n < 8 {
			n = 8
		}
		if off+n > math.MaxUint32 {
			return KernelArgs{}, fmt.Errorf("kernel arguments too large")
		}
		ka.blob = append(ka.blob, make([]byte, off-len(ka.blob))...)
		ka.blob = append(ka.blob, raw...)
		ka.blob = append(ka.blob, make([]byte, off+n-len(ka.blob))...)
		ka.offs = append(ka.offs, uint32(off))
	}
	return ka, nil
}

// Len returns the number of packed arguments.
func (ka KernelArgs) Len() int { return len(ka.offs) }

// Number is a fixed-size numeric element type that may be viewed as bytes.
type Number interface {
	~int8 | ~uint8 | ~int16 | ~uint16 | ~int32 | ~uint32 | ~int64 | ~uint64 | ~float32 | ~float64
}

// AsBytes views a slice of numbers as its bytes (no copy), e.g. to copy a
// []float32 to the device with [Context.MemcpyHtoD].
func AsBytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var zero T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(zero)))
}
