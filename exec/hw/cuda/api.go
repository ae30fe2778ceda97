package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// ABIVersion is the CUDA version (1000*major + 10*minor) at which every
// driver entry point is resolved through cuGetProcAddress_v2.
const ABIVersion = 12000

// LibraryName is the CUDA driver library that [Open] loads.
const LibraryName = "libcuda.so.1"

// driverAPI is the C side of the binding: one method per driver call, handles
// as uintptr, status as Result. The cgo build implements it (cgo.go); the
// build without cgo has none and [Open] fails.
type driverAPI interface {
	init() Result
	errorName(r Result) (name, text string)
	driverVersion() (int, Result)
	deviceCount() (int, Result)
	deviceGet(ordinal int) (int32, Result)
	deviceName(dev int32) (string, Result)
	devicePCIBusID(dev int32) (string, Result)
	deviceAttribute(dev int32, attr int) (int, Result)
	deviceTotalMem(dev int32) (uint64, Result)
	deviceCanAccessPeer(dev, peer int32) (bool, Result)
	primaryCtxRetain(dev int32) (uintptr, Result)
	primaryCtxRelease(dev int32) Result
	ctxSetCurrent(ctx uintptr) Result
	ctxSynchronize(ctx uintptr) Result
	ctxEnablePeerAccess(ctx, peer uintptr) Result
	memGetInfo(ctx uintptr) (free, total uint64, r Result)
	memAlloc(ctx uintptr, n uint64) (DevicePtr, Result)
	memFree(ctx uintptr, p DevicePtr) Result
	memHostAlloc(ctx uintptr, n uint64, flags uint32) (unsafe.Pointer, Result)
	memHostGetDevicePointer(ctx uintptr, p unsafe.Pointer) (DevicePtr, Result)
	memFreeHost(ctx uintptr, p unsafe.Pointer) Result
	memHostRegister(ctx uintptr, p unsafe.Pointer, n uint64, flags uint32) Result
	memHostUnregister(ctx uintptr, p unsafe.Pointer) Result
	memcpyHtoD(ctx uintptr, dst DevicePtr, src unsafe.Pointer, n uint64, s uintptr, async bool) Result
	memcpyDtoH(ctx uintptr, dst unsafe.Pointer, src DevicePtr, n uint64, s uintptr, async bool) Result
	memcpyDtoD(ctx uintptr, dst, src DevicePtr, n uint64, s uintptr, async bool) Result
	memsetD8(ctx uintptr, d DevicePtr, v uint8, n uint64, s uintptr, async bool) Result
	memsetD32(ctx uintptr, d DevicePtr, v uint32, n uint64, s uintptr, async bool) Result
	streamCreate(ctx uintptr, flags uint32) (uintptr, Result)
	streamDestroy(ctx, s uintptr) Result
	streamSynchronize(ctx, s uintptr) Result
	streamQuery(ctx, s uintptr) Result
	streamWaitEvent(ctx, s, e uintptr) Result
	eventCreate(ctx uintptr, flags uint32) (uintptr, Result)
	eventDestroy(ctx, e uintptr) Result
	eventRecord(ctx, e, s uintptr) Result
	eventSynchronize(ctx, e uintptr) Result
	eventQuery(ctx, e uintptr) Result
	eventElapsedTime(ctx, start, end uintptr) (float32, Result)
	moduleLoadData(ctx uintptr, image []byte) (uintptr, string, Result)
	moduleUnload(ctx, m uintptr) Result
	moduleGetFunction(ctx, m uintptr, name string) (uintptr, Result)
	moduleGetGlobal(ctx, m uintptr, name string) (DevicePtr, uint64, Result)
	funcSetAttribute(ctx, f uintptr, attr, v int) Result
	funcGetAttribute(ctx, f uintptr, attr int) (int, Result)
	launchKernel(ctx, f uintptr, grid, block Dim3, shmem uint32, s uintptr, args *KernelArgs) Result
	ipcGetMemHandle(ctx uintptr, p DevicePtr) (IpcMemHandle, Result)
	ipcOpenMemHandle(ctx uintptr, h *IpcMemHandle, flags uint32) (DevicePtr, Result)
	ipcCloseMemHandle(ctx uintptr, p DevicePtr) Result
	ipcGetEventHandle(ctx, e uintptr) (IpcEventHandle, Result)
	ipcOpenEventHandle(ctx uintptr, h *IpcEventHandle) (uintptr, Result)
	streamBeginCapture(ctx, s uintptr, mode int) Result
	streamEndCapture(ctx, s uintptr) (uintptr, Result)
	graphInstantiate(ctx, g uintptr, flags uint64) (uintptr, Result)
	graphLaunch(ctx, ge, s uintptr) Result
	graphExecDestroy(ctx, ge uintptr) Result
	graphDestroy(ctx, g uintptr) Result
	// memGetHandleForAddressRange is resolved at its first call;
	// resultNotResolved where the driver lacks it.
	memGetHandleForAddressRange(ctx uintptr, p DevicePtr, n uint64) (int, Result)
}

// Driver is the loaded CUDA driver.
type Driver struct {
	api     driverAPI
	version int
}

var (
	openOnce   sync.Once
	openDriver *Driver
	openErr    error
	loaded     atomic.Pointer[Driver] // set as soon as the entry points are resolved
)

func loadedDriver() driverAPI {
	if d := loaded.Load(); d != nil {
		return d.api
	}
	return nil
}

// Open loads libcuda.so.1, resolves its entry points at [ABIVersion] and
// calls cuInit(0). The result is shared by the whole process. Errors that
// mean CUDA cannot be used here (no library, a driver older than CUDA 12, no
// device, a build without cgo) wrap [ErrUnavailable].
func Open() (*Driver, error) {
	openOnce.Do(func() {
		api, err := loadDriver(LibraryName, ABIVersion)
		if err != nil {
			openErr = err
			return
		}
		d := &Driver{api: api}
		loaded.Store(d)
		if err := check("cuInit", api.init()); err != nil {
			openErr = fmt.Errorf("%w: %w", ErrUnavailable, err)
			return
		}
		v, r := api.driverVersion()
		if err := check("cuDriverGetVersion", r); err != nil {
			openErr = err
			return
		}
		d.version = v
		openDriver = d
	})
	return openDriver, openErr
}

// Version returns the driver's CUDA version, 1000*major + 10*minor
// (cuDriverGetVersion; 13000 for CUDA 13.0).
func (d *Driver) Version() int { return d.version }

// DeviceCount returns the number of visible CUDA devices.
func (d *Driver) DeviceCount() (int, error) {
	n, r := d.api.deviceCount()
	return n, check("cuDeviceGetCount", r)
}

// Device returns the device of the given ordinal (0 <= ordinal <
// DeviceCount).
func (d *Driver) Device(ordinal int) (Device, error) {
	h, r := d.api.deviceGet(ordinal)
	if err := check("cuDeviceGet", r); err != nil {
		return Device{}, fmt.Errorf("device %d: %w", ordinal, err)
	}
	return Device{api: d.api, ordinal: ordinal, h: h}, nil
}

// Device is a CUDA device (CUdevice).
type Device struct {
	api     driverAPI
	ordinal int
	h       int32
}

// DeviceAttribute is a CUdevice_attribute.
type DeviceAttribute int

// Device attributes (cuda.h, CUdevice_attribute; the comment is the
// CU_DEVICE_ATTRIBUTE_ suffix).
const (
	AttrMaxThreadsPerBlock                DeviceAttribute = 1   // MAX_THREADS_PER_BLOCK
	AttrMaxSharedMemoryPerBlock           DeviceAttribute = 8   // MAX_SHARED_MEMORY_PER_BLOCK
	AttrWarpSize                          DeviceAttribute = 10  // WARP_SIZE
	AttrMaxRegistersPerBlock              DeviceAttribute = 12  // MAX_REGISTERS_PER_BLOCK
	AttrClockRate                         DeviceAttribute = 13  // CLOCK_RATE
	AttrMultiprocessorCount               DeviceAttribute = 16  // MULTIPROCESSOR_COUNT
	AttrIntegrated                        DeviceAttribute = 18  // INTEGRATED
	AttrCanMapHostMemory                  DeviceAttribute = 19  // CAN_MAP_HOST_MEMORY
	AttrComputeMode                       DeviceAttribute = 20  // COMPUTE_MODE
	AttrConcurrentKernels                 DeviceAttribute = 31  // CONCURRENT_KERNELS
	AttrECCEnabled                        DeviceAttribute = 32  // ECC_ENABLED
	AttrPCIBusID                          DeviceAttribute = 33  // PCI_BUS_ID
	AttrPCIDeviceID                       DeviceAttribute = 34  // PCI_DEVICE_ID
	AttrMemoryClockRate                   DeviceAttribute = 36  // MEMORY_CLOCK_RATE
	AttrGlobalMemoryBusWidth              DeviceAttribute = 37  // GLOBAL_MEMORY_BUS_WIDTH
	AttrL2CacheSize                       DeviceAttribute = 38  // L2_CACHE_SIZE
	AttrMaxThreadsPerMultiprocessor       DeviceAttribute = 39  // MAX_THREADS_PER_MULTIPROCESSOR
	AttrAsyncEngineCount                  DeviceAttribute = 40  // ASYNC_ENGINE_COUNT
	AttrUnifiedAddressing                 DeviceAttribute = 41  // UNIFIED_ADDRESSING
	AttrPCIDomainID                       DeviceAttribute = 50  // PCI_DOMAIN_ID
	AttrComputeCapabilityMajor            DeviceAttribute = 75  // COMPUTE_CAPABILITY_MAJOR
	AttrComputeCapabilityMinor            DeviceAttribute = 76  // COMPUTE_CAPABILITY_MINOR
	AttrMaxSharedMemoryPerMultiprocessor  DeviceAttribute = 81  // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
	AttrManagedMemory                     DeviceAttribute = 83  // MANAGED_MEMORY
	AttrMultiGPUBoard                     DeviceAttribute = 84  // MULTI_GPU_BOARD
	AttrMultiGPUBoardGroupID              DeviceAttribute = 85  // MULTI_GPU_BOARD_GROUP_ID
	AttrHostNativeAtomicSupported         DeviceAttribute = 86  // HOST_NATIVE_ATOMIC_SUPPORTED
	AttrPageableMemoryAccess              DeviceAttribute = 88  // PAGEABLE_MEMORY_ACCESS
	AttrConcurrentManagedAccess           DeviceAttribute = 89  // CONCURRENT_MANAGED_ACCESS
	AttrCanUseHostPointerForRegisteredMem DeviceAttribute = 91  // CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM
	AttrCooperativeLaunch                 DeviceAttribute = 95  // COOPERATIVE_LAUNCH
	AttrMaxSharedMemoryPerBlockOptin      DeviceAttribute = 97  // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
	AttrCanFlushRemoteWrites              DeviceAttribute = 98  // CAN_FLUSH_REMOTE_WRITES
	AttrHostRegisterSupported             DeviceAttribute = 99  // HOST_REGISTER_SUPPORTED
	AttrVirtualMemoryManagementSupported  DeviceAttribute = 102 // VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	AttrHandleTypePosixFDSupported        DeviceAttribute = 103 // HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
	AttrMaxBlocksPerMultiprocessor        DeviceAttribute = 106 // MAX_BLOCKS_PER_MULTIPROCESSOR
	AttrGPUDirectRDMAWithCUDAVMMSupported DeviceAttribute = 110 // GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED
	AttrMemoryPoolsSupported              DeviceAttribute = 115 // MEMORY_POOLS_SUPPORTED
	AttrGPUDirectRDMASupported            DeviceAttribute = 116 // GPU_DIRECT_RDMA_SUPPORTED
	AttrGPUDirectRDMAFlushWritesOptions   DeviceAttribute = 117 // GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS
	AttrGPUDirectRDMAWritesOrdering       DeviceAttribute = 118 // GPU_DIRECT_RDMA_WRITES_ORDERING
	AttrClusterLaunch                     DeviceAttribute = 120 // CLUSTER_LAUNCH
	AttrDMABufSupported                   DeviceAttribute = 124 // DMA_BUF_SUPPORTED
	AttrIpcEventSupported                 DeviceAttribute = 125 // IPC_EVENT_SUPPORTED
	AttrHandleTypeFabricSupported         DeviceAttribute = 128 // HANDLE_TYPE_FABRIC_SUPPORTED
	AttrNUMAConfig                        DeviceAttribute = 130 // NUMA_CONFIG
	AttrNUMAID                            DeviceAttribute = 131 // NUMA_ID
	AttrMulticastSupported                DeviceAttribute = 132 // MULTICAST_SUPPORTED
	AttrHostNUMAID                        DeviceAttribute = 134 // HOST_NUMA_ID
)

// Ordinal returns the device's ordinal.
func (dev Device) Ordinal() int { return dev.ordinal }

// Name returns the device's product name (cuDeviceGetName).
func (dev Device) Name() (string, error) {
	s, r := dev.api.deviceName(dev.h)
	return s, check("cuDeviceGetName", r)
}

// PCIBusID returns the device's PCI address as the driver writes it,
// "0000:19:00.0" (cuDeviceGetPCIBusId).
func (dev Device) PCIBusID() (string, error) {
	s, r := dev.api.devicePCIBusID(dev.h)
	return s, check("cuDeviceGetPCIBusId", r)
}

// Attribute returns a device attribute (cuDeviceGetAttribute).
func (dev Device) Attribute(a DeviceAttribute) (int, error) {
	v, r := dev.api.deviceAttribute(dev.h, int(a))
	if err := check("cuDeviceGetAttribute", r); err != nil {
		return 0, fmt.Errorf("device %d attribute %d: %w", dev.ordinal, int(a), err)
	}
	return v, nil
}

// ComputeCapability returns the device's compute capability, e.g. 9, 0.
func (dev Device) ComputeCapability() (major, minor int, err error) {
	if major, err = dev.Attribute(AttrComputeCapabilityMajor); err != nil {
		return 0, 0, err
	}
	if minor, err = dev.Attribute(AttrComputeCapabilityMinor); err != nil {
		return 0, 0, err
	}
	return major, minor, nil
}

// Arch returns the compute capability as 10*major + minor (90 for sm_90),
// the form [Compile] takes.
func (dev Device) Arch() (int, error) {
	major, minor, err := dev.ComputeCapability()
	return 10*major + minor, err
}

// SMCount returns the number of streaming multiprocessors.
func (dev Device) SMCount() (int, error) { return dev.Attribute(AttrMultiprocessorCount) }

// TotalMem returns the device's memory size in bytes (cuDeviceTotalMem).
func (dev Device) TotalMem() (uint64, error) {
	n, r := dev.api.deviceTotalMem(dev.h)
	return n, check("cuDeviceTotalMem", r)
}

// CanAccessPeer reports whether dev can map peer's memory
// (cuDeviceCanAccessPeer).
func (dev Device) CanAccessPeer(peer Device) (bool, error) {
	ok, r := dev.api.deviceCanAccessPeer(dev.h, peer.h)
	return ok, check("cuDeviceCanAccessPeer", r)
}

// RetainPrimaryContext retains the device's primary context
// (cuDevicePrimaryCtxRetain), the context the CUDA runtime uses. Every
// retained Context must be released once with [Context.Release].
func (dev Device) RetainPrimaryContext() (*Context, error) {
	h, r := dev.api.primaryCtxRetain(dev.h)
	if err := check("cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, fmt.Errorf("device %d: %w", dev.ordinal, err)
	}
	return &Context{api: dev.api, h: h, dev: dev}, nil
}

// Context is a retained primary context. Its methods may be called from any
// goroutine: each makes the context current on its OS thread first.
type Context struct {
	api      driverAPI
	h        uintptr
	dev      Device
	released atomic.Bool
}

// Device returns the context's device.
func (c *Context) Device() Device { return c.dev }

// Handle returns the CUcontext, for other CUDA libraries.
func (c *Context) Handle() uintptr { return c.h }

// Release releases the primary context (cuDevicePrimaryCtxRelease). When
// the last reference goes, the driver destroys the context and everything
// allocated in it. Releasing twice is an error.
func (c *Context) Release() error {
	if !c.released.CompareAndSwap(false, true) {
		return errors.New("cuda: context released twice")
	}
	return check("cuDevicePrimaryCtxRelease", c.api.primaryCtxRelease(c.dev.h))
}

// SetCurrent makes c the current context of the calling OS thread
// (cuCtxSetCurrent). On its own this is only useful on a locked thread; see
// [Context.LockThread].
func (c *Context) SetCurrent() error { return check("cuCtxSetCurrent", c.api.ctxSetCurrent(c.h)) }

// LockThread locks the calling goroutine to its OS thread
// (runtime.LockOSThread) and makes c current there, for code that calls
// other CUDA libraries (libnccl, the CUDA runtime) or captures CUDA graphs in
// thread-local mode. The returned function unlocks the thread; it does not
// unset the context. The executor instead locks a rank's goroutine for its
// whole life and calls SetCurrent once.
func (c *Context) LockThread() (unlock func(), err error) {
	runtime.LockOSThread()
	if err := c.SetCurrent(); err != nil {
		runtime.UnlockOSThread()
		return nil, err
	}
	return runtime.UnlockOSThread, nil
}

// Synchronize waits for all work in the context (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	return check("cuCtxSynchronize", c.api.ctxSynchronize(c.h))
}

// EnablePeerAccess lets kernels and copies of c access memory of peer's
// context (cuCtxEnablePeerAccess). Access that is already enabled is not an
// error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	r := c.api.ctxEnablePeerAccess(c.h, peer.h)
	if r == ErrorPeerAccessAlreadyEnabled {
		return nil
	}
	return check("cuCtxEnablePeerAccess", r)
}

// MemGetInfo returns the free and total memory of the context's device
// (cuMemGetInfo).
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	f, t, r := c.api.memGetInfo(c.h)
	return f, t, check("cuMemGetInfo", r)
}

// DevicePtr is a device address (CUdeviceptr). It is not a host pointer.
type DevicePtr uint64

// Add returns p+off.
func (p DevicePtr) Add(off uint64) DevicePtr { return p + DevicePtr(off) }

// MemAlloc allocates n bytes of device memory (cuMemAlloc).
func (c *Context) MemAlloc(n uint64) (DevicePtr, error) {
	if n == 0 {
		return 0, errors.New("cuda: MemAlloc of 0 bytes")
	}
	p, r := c.api.memAlloc(c.h, n)
	if err := check("cuMemAlloc", r); err != nil {
		return 0, fmt.Errorf("allocate %d bytes on device %d: %w", n, c.dev.ordinal, err)
	}
	return p, nil
}

// MemFree frees device memory from [Context.MemAlloc] (cuMemFree).
func (c *Context) MemFree(p DevicePtr) error { return check("cuMemFree", c.api.memFree(c.h, p)) }

// Host allocation and registration flags (CU_MEMHOSTALLOC_*,
// CU_MEMHOSTREGISTER_*).
const (
	hostPortable  = 0x1
	hostDeviceMap = 0x2
)

// HostMem is page-locked host memory mapped into the device address space:
// C memory from [Context.MemHostAlloc] or memory registered with
// [Context.MemHostRegister].
type HostMem struct {
	ctx        *Context
	ptr        unsafe.Pointer
	size       int
	dptr       DevicePtr
	registered bool
	freed      atomic.Bool
}

// MemHostAlloc allocates size bytes of pinned host memory, portable to all
// contexts and mapped into the device address space
// (cuMemHostAlloc(PORTABLE|DEVICEMAP), cuMemHostGetDevicePointer). The
// memory is zeroed.
func (c *Context) MemHostAlloc(size int) (*HostMem, error) {
	if size <= 0 {
		return nil, fmt.Errorf("cuda: MemHostAlloc of %d bytes", size)
	}
	p, r := c.api.memHostAlloc(c.h, uint64(size), hostPortable|hostDeviceMap)
	if err := check("cuMemHostAlloc", r); err != nil {
		return nil, fmt.Errorf("allocate %d bytes of pinned host memory: %w", size, err)
	}
	d, r := c.api.memHostGetDevicePointer(c.h, p)
	if err := check("cuMemHostGetDevicePointer", r); err != nil {
		c.api.memFreeHost(c.h, p)
		return nil, err
	}
	h := &HostMem{ctx: c, ptr: p, size: size, dptr: d}
	clear(h.Bytes())
	return h, nil
}

// MemHostRegister page-locks size bytes at p and maps them into the device
// address space (cuMemHostRegister(PORTABLE|DEVICEMAP)). p must not be Go
// memory (the device keeps using it); use memory from mmap or C. Free
// unregisters it.
func (c *Context) MemHostRegister(p unsafe.Pointer, size int) (*HostMem, error) {
	if p == nil || size <= 0 {
		return nil, fmt.Errorf("cuda: MemHostRegister of %d bytes at %p", size, p)
	}
	if err := check("cuMemHostRegister", c.api.memHostRegister(c.h, p, uint64(size), hostPortable|hostDeviceMap)); err != nil {
		return nil, err
	}
	d, r := c.api.memHostGetDevicePointer(c.h, p)
	if err := check("cuMemHostGetDevicePointer", r); err != nil {
		c.api.memHostUnregister(c.h, p)
		return nil, err
	}
	return &HostMem{ctx: c, ptr: p, size: size, dptr: d, registered: true}, nil
}

// Ptr returns the host address of the memory.
func (h *HostMem) Ptr() unsafe.Pointer { return h.ptr }

// Size returns the size in bytes.
func (h *HostMem) Size() int { return h.size }

// DevicePtr returns the device address of the memory.
func (h *HostMem) DevicePtr() DevicePtr { return h.dptr }

// Bytes returns the memory as a byte slice. It must not be used after Free.
func (h *HostMem) Bytes() []byte { return unsafe.Slice((*byte)(h.ptr), h.size) }

// Free frees the allocation (cuMemFreeHost) or unregisters the registered
// memory (cuMemHostUnregister). Freeing twice is an error.
func (h *HostMem) Free() error {
	if !h.freed.CompareAndSwap(false, true) {
		return errors.New("cuda: host memory freed twice")
	}
	if h.registered {
		return check("cuMemHostUnregister", h.ctx.api.memHostUnregister(h.ctx.h, h.ptr))
	}
	return check("cuMemFreeHost", h.ctx.api.memFreeHost(h.ctx.h, h.ptr))
}

func streamHandle(s *Stream) uintptr {
	if s == nil {
		return 0
	}
	return s.h
}

// MemcpyHtoD copies src to device memory at dst and returns when src may be
// reused (cuMemcpyHtoD).
func (c *Context) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD", c.api.memcpyHtoD(c.h, dst, unsafe.Pointer(&src[0]), uint64(len(src)), 0, false))
}

// MemcpyDtoH copies len(dst) bytes of device memory at src to dst
// (cuMemcpyDtoH).
func (c *Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoH", c.api.memcpyDtoH(c.h, unsafe.Pointer(&dst[0]), src, uint64(len(dst)), 0, false))
}

// MemcpyDtoD copies n bytes between device addresses, also across devices
// (cuMemcpyDtoD).
func (c *Context) MemcpyDtoD(dst, src DevicePtr, n uint64) error {
	return check("cuMemcpyDtoD", c.api.memcpyDtoD(c.h, dst, src, n, 0, false))
}

// MemcpyHtoDAsync enqueues a copy of n bytes from host memory at src to dst
// on stream s (nil: the legacy default stream) (cuMemcpyHtoDAsync). src must
// stay valid until the copy completes, so it must not be Go memory: use
// [HostMem.Ptr].
func (c *Context) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n uint64, s *Stream) error {
	return check("cuMemcpyHtoDAsync", c.api.memcpyHtoD(c.h, dst, src, n, streamHandle(s), true))
}

// MemcpyDtoHAsync enqueues a copy of n bytes from src to host memory at dst
// on stream s (cuMemcpyDtoHAsync). dst must not be Go memory.
func (c *Context) MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n uint64, s *Stream) error {
	return check("cuMemcpyDtoHAsync", c.api.memcpyDtoH(c.h, dst, src, n, streamHandle(s), true))
}

// MemcpyDtoDAsync enqueues a device-to-device copy on stream s
// (cuMemcpyDtoDAsync).
func (c *Context) MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s *Stream) error {
	return check("cuMemcpyDtoDAsync", c.api.memcpyDtoD(c.h, dst, src, n, streamHandle(s), true))
}

// MemsetD8 sets n bytes at d to v (cuMemsetD8).
func (c *Context) MemsetD8(d DevicePtr, v byte, n uint64) error {
	return check("cuMemsetD8", c.api.memsetD8(c.h, d, v, n, 0, false))
}

// MemsetD8Async enqueues MemsetD8 on stream s (cuMemsetD8Async).
func (c *Context) MemsetD8Async(d DevicePtr, v byte, n uint64, s *Stream) error {
	return check("cuMemsetD8Async", c.api.memsetD8(c.h, d, v, n, streamHandle(s), true))
}

// MemsetD32 sets n 32-bit words at d (4-byte aligned) to v (cuMemsetD32).
func (c *Context) MemsetD32(d DevicePtr, v uint32, n uint64) error {
	return check("cuMemsetD32", c.api.memsetD32(c.h, d, v, n, 0, false))
}

// MemsetD32Async enqueues MemsetD32 on stream s (cuMemsetD32Async).
func (c *Context) MemsetD32Async(d DevicePtr, v uint32, n uint64, s *Stream) error {
	return check("cuMemsetD32Async", c.api.memsetD32(c.h, d, v, n, streamHandle(s), true))
}

// Stream is a CUDA stream (CUstream). A nil *Stream passed to a method
// means the legacy default stream.
type Stream struct {
	ctx *Context
	h   uintptr
}

// StreamFlags are cuStreamCreate flags.
type StreamFlags uint32

// Stream flags (CU_STREAM_*).
const (
	StreamDefault     StreamFlags = 0
	StreamNonBlocking StreamFlags = 1 // no implicit synchronization with the legacy default stream
)

// NewStream creates a stream (cuStreamCreate).
func (c *Context) NewStream(flags StreamFlags) (*Stream, error) {
	h, r := c.api.streamCreate(c.h, uint32(flags))
	if err := check("cuStreamCreate", r); err != nil {
		return nil, err
	}
	return &Stream{ctx: c, h: h}, nil
}

// Handle returns the CUstream, for other CUDA libraries (libnccl).
func (s *Stream) Handle() uintptr { return streamHandle(s) }

// Context returns the stream's context.
func (s *Stream) Context() *Context { return s.ctx }

// Destroy destroys the stream (cuStreamDestroy).
func (s *Stream) Destroy() error {
	return check("cuStreamDestroy", s.ctx.api.streamDestroy(s.ctx.h, s.h))
}

// Synchronize waits for all work on the stream (cuStreamSynchronize).
func (s *Stream) Synchronize() error {
	return check("cuStreamSynchronize", s.ctx.api.streamSynchronize(s.ctx.h, s.h))
}

// Query reports whether all work on the stream is done (cuStreamQuery).
func (s *Stream) Query() (bool, error) {
	r := s.ctx.api.streamQuery(s.ctx.h, s.h)
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("cuStreamQuery", r)
}

// WaitEvent makes later work on the stream wait for e (cuStreamWaitEvent).
func (s *Stream) WaitEvent(e *Event) error {
	return check("cuStreamWaitEvent", s.ctx.api.streamWaitEvent(s.ctx.h, s.h, e.h))
}

// EventFlags are cuEventCreate flags.
type EventFlags uint32

// Event flags (CU_EVENT_*).
const (
	EventDefault       EventFlags = 0
	EventBlockingSync  EventFlags = 1 // Synchronize blocks instead of spinning
	EventDisableTiming EventFlags = 2 // cheaper; no ElapsedTime
	EventInterprocess  EventFlags = 4 // may be shared with IpcHandle (needs EventDisableTiming)
)

// Event is a CUDA event (CUevent).
type Event struct {
	ctx *Context
	h   uintptr
}

// NewEvent creates an event (cuEventCreate).
func (c *Context) NewEvent(flags EventFlags) (*Event, error) {
	h, r := c.api.eventCreate(c.h, uint32(flags))
	if err := check("cuEventCreate", r); err != nil {
		return nil, err
	}
	return &Event{ctx: c, h: h}, nil
}

// Destroy destroys the event (cuEventDestroy).
func (e *Event) Destroy() error {
	return check("cuEventDestroy", e.ctx.api.eventDestroy(e.ctx.h, e.h))
}

// Record records the event on stream s (cuEventRecord).
func (e *Event) Record(s *Stream) error {
	return check("cuEventRecord", e.ctx.api.eventRecord(e.ctx.h, e.h, streamHandle(s)))
}

// Synchronize waits for the event (cuEventSynchronize).
func (e *Event) Synchronize() error {
	return check("cuEventSynchronize", e.ctx.api.eventSynchronize(e.ctx.h, e.h))
}

// Query reports whether the work before the event's record is done
// (cuEventQuery).
func (e *Event) Query() (bool, error) {
	r := e.ctx.api.eventQuery(e.ctx.h, e.h)
	if r == ErrorNotReady {
		return false, nil
	}
	return r == Success, check("cuEventQuery", r)
}

// ElapsedTime returns the time between two recorded, completed events
// (cuEventElapsedTime; resolution about 0.5 µs). Neither may have been
// created with EventDisableTiming.
func ElapsedTime(start, end *Event) (time.Duration, error) {
	ms, r := start.ctx.api.eventElapsedTime(start.ctx.h, start.h, end.h)
	if err := check("cuEventElapsedTime", r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// Module is a loaded module (CUmodule).
type Module struct {
	ctx *Context
	h   uintptr
}

// LoadModule loads a cubin, fatbin or PTX image (cuModuleLoadDataEx). PTX
// needs no trailing NUL; one is added. A JIT error log, if any, is in the
// error.
func (c *Context) LoadModule(image []byte) (*Module, error) {
	if len(image) == 0 {
		return nil, errors.New("cuda: empty module image")
	}
	img := image
	if image[len(image)-1] != 0 && !isELF(image) {
		img = make([]byte, len(image)+1)
		copy(img, image)
	}
	h, log, r := c.api.moduleLoadData(c.h, img)
	if err := check("cuModuleLoadData", r); err != nil {
		if e, ok := err.(*Error); ok {
			e.Detail = log
		}
		return nil, err
	}
	return &Module{ctx: c, h: h}, nil
}

func isELF(b []byte) bool {
	return len(b) >= 4 && b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F'
}

// Unload unloads the module (cuModuleUnload).
func (m *Module) Unload() error { return check("cuModuleUnload", m.ctx.api.moduleUnload(m.ctx.h, m.h)) }

// Function returns a kernel of the module by its (extern "C") name
// (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
	h, r := m.ctx.api.moduleGetFunction(m.ctx.h, m.h, name)
	if err := check("cuModuleGetFunction", r); err != nil {
		return nil, fmt.Errorf("kernel %q: %w", name, err)
	}
	return &Function{ctx: m.ctx, h: h, name: name}, nil
}

// Global returns the address and size of a __device__ or __constant__
// variable of the module (cuModuleGetGlobal).
func (m *Module) Global(name string) (DevicePtr, uint64, error) {
	p, n, r := m.ctx.api.moduleGetGlobal(m.ctx.h, m.h, name)
	if err := check("cuModuleGetGlobal", r); err != nil {
		return 0, 0, fmt.Errorf("global %q: %w", name, err)
	}
	return p, n, nil
}

// Function is a kernel (CUfunction).
type Function struct {
	ctx  *Context
	h    uintptr
	name string
}

// FuncAttribute is a CUfunction_attribute.
type FuncAttribute int

// Function attributes (CU_FUNC_ATTRIBUTE_*).
const (
	FuncMaxThreadsPerBlock      FuncAttribute = 0
	FuncSharedSizeBytes         FuncAttribute = 1
	FuncConstSizeBytes          FuncAttribute = 2
	FuncLocalSizeBytes          FuncAttribute = 3
	FuncNumRegs                 FuncAttribute = 4
	FuncPTXVersion              FuncAttribute = 5
	FuncBinaryVersion           FuncAttribute = 6
	FuncCacheModeCA             FuncAttribute = 7
	FuncMaxDynamicSharedSize    FuncAttribute = 8
	FuncPreferredSharedCarveout FuncAttribute = 9
)

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Attribute returns a function attribute (cuFuncGetAttribute).
func (f *Function) Attribute(a FuncAttribute) (int, error) {
	v, r := f.ctx.api.funcGetAttribute(f.ctx.h, f.h, int(a))
	return v, check("cuFuncGetAttribute", r)
}

// SetAttribute sets a function attribute (cuFuncSetAttribute).
func (f *Function) SetAttribute(a FuncAttribute, v int) error {
	return check("cuFuncSetAttribute", f.ctx.api.funcSetAttribute(f.ctx.h, f.h, int(a), v))
}

// SetMaxDynamicSharedMem allows launches with up to bytes of dynamic shared
// memory (above the default 48 KiB, up to
// AttrMaxSharedMemoryPerBlockOptin).
func (f *Function) SetMaxDynamicSharedMem(bytes int) error {
	return f.SetAttribute(FuncMaxDynamicSharedSize, bytes)
}

// Dim3 is a grid or block size; zero components count as 1.
type Dim3 struct{ X, Y, Z uint32 }

func (d Dim3) norm() Dim3 {
	if d.X == 0 {
		d.X = 1
	}
	if d.Y == 0 {
		d.Y = 1
	}
	if d.Z == 0 {
		d.Z = 1
	}
	return d
}

// Launch packs args with [NewKernelArgs] and launches the kernel on stream s
// (nil: the legacy default stream) (cuLaunchKernel).
func (f *Function) Launch(grid, block Dim3, sharedMem uint32, s *Stream, args ...any) error {
	ka, err := NewKernelArgs(args...)
	if err != nil {
		return fmt.Errorf("launch %s: %w", f.name, err)
	}
	return f.LaunchArgs(grid, block, sharedMem, s, ka)
}

// LaunchArgs launches the kernel with arguments packed beforehand
// (cuLaunchKernel).
func (f *Function) LaunchArgs(grid, block Dim3, sharedMem uint32, s *Stream, args KernelArgs) error {
	r := f.ctx.api.launchKernel(f.ctx.h, f.h, grid.norm(), block.norm(), sharedMem, streamHandle(s), &args)
	if err := check("cuLaunchKernel", r); err != nil {
		return fmt.Errorf("launch %s: %w", f.name, err)
	}
	return nil
}

// IpcMemHandle is a CUipcMemHandle: 64 opaque bytes naming a device
// allocation, to be sent to another process.
type IpcMemHandle [64]byte

// IpcEventHandle is a CUipcEventHandle.
type IpcEventHandle [64]byte

// IPC open flags (CUipcMem_flags).
const ipcLazyEnablePeerAccess = 1

// IpcGetMemHandle returns the IPC handle of the allocation that contains p,
// which must come from [Context.MemAlloc] (cuIpcGetMemHandle).
func (c *Context) IpcGetMemHandle(p DevicePtr) (IpcMemHandle, error) {
	h, r := c.api.ipcGetMemHandle(c.h, p)
	return h, check("cuIpcGetMemHandle", r)
}

// IpcOpenMemHandle maps another process's allocation into this context,
// enabling peer access as needed (cuIpcOpenMemHandle with
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS). A process cannot open its own
// handles. Close the mapping with [Context.IpcCloseMemHandle].
func (c *Context) IpcOpenMemHandle(h IpcMemHandle) (DevicePtr, error) {
	p, r := c.api.ipcOpenMemHandle(c.h, &h, ipcLazyEnablePeerAccess)
	return p, check("cuIpcOpenMemHandle", r)
}

// IpcCloseMemHandle unmaps memory from [Context.IpcOpenMemHandle]
// (cuIpcCloseMemHandle).
func (c *Context) IpcCloseMemHandle(p DevicePtr) error {
	return check("cuIpcCloseMemHandle", c.api.ipcCloseMemHandle(c.h, p))
}

// IpcHandle returns the IPC handle of an event created with
// EventInterprocess|EventDisableTiming (cuIpcGetEventHandle).
func (e *Event) IpcHandle() (IpcEventHandle, error) {
	h, r := e.ctx.api.ipcGetEventHandle(e.ctx.h, e.h)
	return h, check("cuIpcGetEventHandle", r)
}

// IpcOpenEventHandle opens another process's event (cuIpcOpenEventHandle).
// Destroy it with [Event.Destroy].
func (c *Context) IpcOpenEventHandle(h IpcEventHandle) (*Event, error) {
	e, r := c.api.ipcOpenEventHandle(c.h, &h)
	if err := check("cuIpcOpenEventHandle", r); err != nil {
		return nil, err
	}
	return &Event{ctx: c, h: e}, nil
}

// CaptureMode is a CUstreamCaptureMode.
type CaptureMode int

// Stream capture modes.
const (
	// CaptureModeGlobal forbids unsafe calls (allocations, synchronous
	// copies, ...) on every thread while the capture runs.
	CaptureModeGlobal CaptureMode = 0
	// CaptureModeThreadLocal forbids them only on the capturing thread; the
	// capture must begin and end on the same OS thread (lock it).
	CaptureModeThreadLocal CaptureMode = 1
	// CaptureModeRelaxed forbids nothing.
	CaptureModeRelaxed CaptureMode = 2
)

// BeginCapture starts capturing the work enqueued on s into a graph
// (cuStreamBeginCapture). In global and thread-local mode, EndCapture must
// be called from the same OS thread: lock it ([Context.LockThread]).
func (s *Stream) BeginCapture(mode CaptureMode) error {
	return check("cuStreamBeginCapture", s.ctx.api.streamBeginCapture(s.ctx.h, s.h, int(mode)))
}

// EndCapture ends the capture and returns the graph (cuStreamEndCapture).
func (s *Stream) EndCapture() (*Graph, error) {
	g, r := s.ctx.api.streamEndCapture(s.ctx.h, s.h)
	if err := check("cuStreamEndCapture", r); err != nil {
		return nil, err
	}
	return &Graph{ctx: s.ctx, h: g}, nil
}

// Graph is a CUDA graph (CUgraph).
type Graph struct {
	ctx *Context
	h   uintptr
}

// GraphInstantiateFlags are cuGraphInstantiateWithFlags flags.
type GraphInstantiateFlags uint64

// Graph instantiation flags (CUDA_GRAPH_INSTANTIATE_FLAG_*).
const (
	GraphInstantiateAutoFreeOnLaunch GraphInstantiateFlags = 1
	GraphInstantiateUpload           GraphInstantiateFlags = 2
	GraphInstantiateDeviceLaunch     GraphInstantiateFlags = 4
	GraphInstantiateUseNodePriority  GraphInstantiateFlags = 8
)

// Instantiate makes an executable graph (cuGraphInstantiateWithFlags).
func (g *Graph) Instantiate(flags GraphInstantiateFlags) (*GraphExec, error) {
	h, r := g.ctx.api.graphInstantiate(g.ctx.h, g.h, uint64(flags))
	if err := check("cuGraphInstantiateWithFlags", r); err != nil {
		return nil, err
	}
	return &GraphExec{ctx: g.ctx, h: h}, nil
}

// Destroy destroys the graph (cuGraphDestroy); executable graphs made from
// it stay valid.
func (g *Graph) Destroy() error { return check("cuGraphDestroy", g.ctx.api.graphDestroy(g.ctx.h, g.h)) }

// GraphExec is an executable graph (CUgraphExec).
type GraphExec struct {
	ctx *Context
	h   uintptr
}

// Launch enqueues the graph on stream s (cuGraphLaunch).
func (x *GraphExec) Launch(s *Stream) error {
	return check("cuGraphLaunch", x.ctx.api.graphLaunch(x.ctx.h, x.h, streamHandle(s)))
}

// Destroy destroys the executable graph (cuGraphExecDestroy).
func (x *GraphExec) Destroy() error {
	return check("cuGraphExecDestroy", x.ctx.api.graphExecDestroy(x.ctx.h, x.h))
}
