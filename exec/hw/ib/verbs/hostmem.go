package verbs

import (
	"fmt"
	"sync/atomic"
)

// HostDeviceMemory is host memory standing in for GPU memory at a device
// address of its own (Addr, unrelated to where Buf lives), so that CI
// without a GPU exercises GPUDirect registrations: a provider must reach
// it through ReadAt and WriteAt, as it would reach GPU memory through
// CUDA copies; one that dereferenced the address would fault or miss.
// Reads and Writes count those copies.
type HostDeviceMemory struct {
	Buf           []byte
	DevAddr       uint64
	Reads, Writes atomic.Int64
}

// Addr is the stand-in device address.
func (m *HostDeviceMemory) Addr() uint64 { return m.DevAddr }

// Len is the memory's size.
func (m *HostDeviceMemory) Len() int { return len(m.Buf) }

// DmaBuf is not supported: host memory has no dma-buf export.
func (m *HostDeviceMemory) DmaBuf() (int, uint64, error) {
	return -1, 0, fmt.Errorf("host memory standing in for GPU memory: %w", ErrNotSupported)
}

// ReadAt copies the memory at off into p (the stand-in for cuMemcpyDtoH).
func (m *HostDeviceMemory) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.Buf)) {
		return 0, fmt.Errorf("device memory: read [%d, %d) of %d bytes", off, off+int64(len(p)), len(m.Buf))
	}
	m.Reads.Add(1)
	return copy(p, m.Buf[off:]), nil
}

// WriteAt copies p into the memory at off (the stand-in for cuMemcpyHtoD).
func (m *HostDeviceMemory) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.Buf)) {
		return 0, fmt.Errorf("device memory: write [%d, %d) of %d bytes", off, off+int64(len(p)), len(m.Buf))
	}
	m.Writes.Add(1)
	return copy(m.Buf[off:], p), nil
}
