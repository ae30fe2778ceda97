package cuda

import (
	"errors"
	"fmt"
)

// ErrNotSupported is wrapped by the errors of entry points this driver
// does not have (resolved at their first use, not by Open) and of
// features the device refuses: the caller takes another way (NCCL's
// nvidia-peermem registration instead of dma-buf, for one).
var ErrNotSupported = errors.New("cuda: not supported by this driver or device")

// resultNotResolved is what a lazily resolved entry point answers when the
// driver does not have it (TWC_NOT_RESOLVED; no CUresult is negative).
const resultNotResolved Result = -2

// devAttrDmaBufSupported is CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED.
const devAttrDmaBufSupported = 124

// DmaBufSupported reports whether the device can export its memory as
// dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED), as NCCL checks before
// registering GPU buffers with the NIC through ibv_reg_dmabuf_mr.
func (c *Context) DmaBufSupported() bool {
	v, err := c.Device().Attribute(devAttrDmaBufSupported)
	return err == nil && v == 1
}

// MemGetDmaBufFd exports the device memory [p, p+n) as a dma-buf file
// descriptor (cuMemGetHandleForAddressRange with
// CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD), for ibv_reg_dmabuf_mr. p and n
// must be aligned to the host page size, as the driver requires. The
// caller closes the descriptor. A driver without the entry point (before
// CUDA 11.7) or a device that refuses gives an error wrapping
// ErrNotSupported.
func (c *Context) MemGetDmaBufFd(p DevicePtr, n uint64) (int, error) {
	fd, r := c.api.memGetHandleForAddressRange(c.h, p, n)
	switch r {
	case Success:
		return fd, nil
	case resultNotResolved:
		return -1, fmt.Errorf("cuMemGetHandleForAddressRange: %w: the driver has no such entry point (CUDA 11.7 or later)", ErrNotSupported)
	case ErrorNotSupported:
		return -1, fmt.Errorf("%w: %w", ErrNotSupported, check("cuMemGetHandleForAddressRange", r))
	}
	return -1, check("cuMemGetHandleForAddressRange", r)
}
