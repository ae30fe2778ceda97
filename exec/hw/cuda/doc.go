// Package cuda is twinccl's binding of the CUDA driver API and of NVRTC.
//
// Nothing CUDA is needed to build it: libcuda.so.1 is opened with dlopen at
// run time ([Open]), cuGetProcAddress_v2 is looked up with dlsym, and every
// other entry point is resolved through it at a fixed ABI version
// ([ABIVersion], CUDA 12.0), so that a newer driver keeps giving us the
// CUDA 12.0 semantics of each call (cuMemAlloc resolves to cuMemAlloc_v2,
// cuIpcOpenMemHandle to cuIpcOpenMemHandle_v2, and so on). NVRTC is opened
// the same way ([OpenNVRTC]) and compiled images are cached on disk
// ([Compile]). Built with CGO_ENABLED=0, [Open] and [OpenNVRTC] report
// [ErrNoCgo].
//
// # Contexts and threads
//
// The binding works with each device's primary context
// ([Device.RetainPrimaryContext]), the context the CUDA runtime (and so
// libnccl) uses too. A CUDA context is current per OS thread and goroutines
// move between threads, so every wrapper that needs a context makes its
// [Context] current (cuCtxSetCurrent, a thread-local store in the driver)
// immediately before its call, in the same C call. Any goroutine may
// therefore call any method. Code that calls into other CUDA libraries
// relying on the current context (libnccl, a CUDA graph captured in
// thread-local mode, NCCL's thread-local group state) must stay on one OS
// thread: [Context.LockThread] locks the calling goroutine to its thread and
// makes the context current there; the executor does this for the whole
// life of a rank's goroutine.
//
// # Memory
//
// Device memory is a [DevicePtr], a 64-bit device address that must never be
// dereferenced on the host. Host memory that the GPU reads or writes
// asynchronously is C memory ([Context.MemHostAlloc]) or memory registered
// with [Context.MemHostRegister] that the Go garbage collector does not own
// (e.g. from mmap); Go slices are only passed to the synchronous copies,
// which are done with them when they return.
//
// # Errors
//
// A failing driver call returns an [*Error] carrying the call's name and
// its CUresult ([Result]) with the driver's name and description of the
// code; errors.Is(err, cuda.ErrorNotReady) and the like work on it.
package cuda
