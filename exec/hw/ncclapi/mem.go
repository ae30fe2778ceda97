package ncclapi

import (
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// Buffers from MemAlloc, by address, with the context that owns them.
var (
	memMu  sync.Mutex
	allocs = map[uintptr]*cuda.Context{}
)

// MemAlloc is ncclMemAlloc: size bytes of device memory on device dev
// (the caller's current device). NCCL allocates through cuMem for buffer
// registration, which twinccl does not use; plain device memory serves.
func MemAlloc(dev int, size uint64) (uintptr, error) {
	if size == 0 {
		return 0, errorf(InvalidArgument, "size 0")
	}
	ctx, err := contextFor(dev)
	if err != nil {
		return 0, err
	}
	p, err := ctx.MemAlloc(size)
	if err != nil {
		return 0, err
	}
	memMu.Lock()
	allocs[uintptr(p)] = ctx
	memMu.Unlock()
	return uintptr(p), nil
}

// MemFree is ncclMemFree of a pointer MemAlloc returned.
func MemFree(p uintptr) error {
	memMu.Lock()
	ctx, ok := allocs[p]
	delete(allocs, p)
	memMu.Unlock()
	if !ok {
		return errorf(InvalidArgument, "pointer %#x was not returned by ncclMemAlloc (or was freed already)", p)
	}
	return ctx.MemFree(cuda.DevicePtr(p))
}
