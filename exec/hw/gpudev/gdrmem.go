package gpudev

import (
	"errors"
	"fmt"
	"os"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// GPUBuffer is GPU memory as the ib plugin registers it for GPUDirect
// RDMA (verbs.DeviceMemory): an HCA through its dma-buf export
// (cuMemGetHandleForAddressRange) or nvidia-peermem, the software verbs
// provider through CUDA copies (ReadAt is cuMemcpyDtoH, WriteAt
// cuMemcpyHtoD), so that a job on one GPU without an HCA runs the
// GPUDirect path of the plugin.
type GPUBuffer struct {
	ctx *cuda.Context
	ptr cuda.DevicePtr
	n   int
}

// NewGPUBuffer describes the n bytes of ctx's memory at ptr (the caller
// keeps them allocated while a NIC has them registered).
func NewGPUBuffer(ctx *cuda.Context, ptr cuda.DevicePtr, n int) *GPUBuffer {
	return &GPUBuffer{ctx: ctx, ptr: ptr, n: n}
}

// Addr is the buffer's device address.
func (b *GPUBuffer) Addr() uint64 { return uint64(b.ptr) }

// Len is its size.
func (b *GPUBuffer) Len() int { return b.n }

// DmaBuf exports the host pages covering the buffer as a dma-buf and
// says where the buffer starts in it; an error wraps
// verbs.ErrNotSupported where the driver or device cannot.
func (b *GPUBuffer) DmaBuf() (int, uint64, error) {
	page := uint64(os.Getpagesize())
	start := uint64(b.ptr) &^ (page - 1)
	end := (uint64(b.ptr) + uint64(b.n) + page - 1) &^ (page - 1)
	fd, err := b.ctx.MemGetDmaBufFd(cuda.DevicePtr(start), end-start)
	if err != nil {
		if errors.Is(err, cuda.ErrNotSupported) {
			err = fmt.Errorf("%w: %w", verbs.ErrNotSupported, err)
		}
		return -1, 0, err
	}
	return fd, uint64(b.ptr) - start, nil
}

func (b *GPUBuffer) check(n int, off int64) error {
	if off < 0 || off+int64(n) > int64(b.n) {
		return fmt.Errorf("gpudev: bytes [%d, %d) of a %d-byte GPU buffer", off, off+int64(n), b.n)
	}
	return nil
}

// ReadAt copies the buffer's bytes at off into p (cuMemcpyDtoH).
func (b *GPUBuffer) ReadAt(p []byte, off int64) (int, error) {
	if err := b.check(len(p), off); err != nil || len(p) == 0 {
		return 0, err
	}
	if err := b.ctx.MemcpyDtoH(p, b.ptr.Add(uint64(off))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt copies p into the buffer at off (cuMemcpyHtoD).
func (b *GPUBuffer) WriteAt(p []byte, off int64) (int, error) {
	if err := b.check(len(p), off); err != nil || len(p) == 0 {
		return 0, err
	}
	if err := b.ctx.MemcpyHtoD(b.ptr.Add(uint64(off)), p); err != nil {
		return 0, err
	}
	return len(p), nil
}

var _ verbs.DeviceMemory = (*GPUBuffer)(nil)
