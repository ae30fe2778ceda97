//go:build cgo

package hw

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>

// A minimal binding of the CUDA driver API, loaded with dlopen so that
// nothing CUDA is needed at build time. Only entry points that exist under
// these exact names since CUDA 4 are used.
typedef int (*twcCuInit_t)(unsigned int);
typedef int (*twcCuDeviceGetCount_t)(int*);
typedef int (*twcCuDeviceGet_t)(int*, int);
typedef int (*twcCuDeviceGetAttribute_t)(int*, int, int);
typedef int (*twcCuDeviceGetPCIBusId_t)(char*, int, int);

static void* twcCudaLib;
static twcCuInit_t twcCuInit;
static twcCuDeviceGetCount_t twcCuDeviceGetCount;
static twcCuDeviceGet_t twcCuDeviceGet;
static twcCuDeviceGetAttribute_t twcCuDeviceGetAttribute;
static twcCuDeviceGetPCIBusId_t twcCuDeviceGetPCIBusId;

// twcCudaOpen returns 0 on success, 1 when the library cannot be loaded and
// 2 when an entry point is missing.
static int twcCudaOpen(void) {
	twcCudaLib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (twcCudaLib == NULL) return 1;
	twcCuInit = (twcCuInit_t)dlsym(twcCudaLib, "cuInit");
	twcCuDeviceGetCount = (twcCuDeviceGetCount_t)dlsym(twcCudaLib, "cuDeviceGetCount");
	twcCuDeviceGet = (twcCuDeviceGet_t)dlsym(twcCudaLib, "cuDeviceGet");
	twcCuDeviceGetAttribute = (twcCuDeviceGetAttribute_t)dlsym(twcCudaLib, "cuDeviceGetAttribute");
	twcCuDeviceGetPCIBusId = (twcCuDeviceGetPCIBusId_t)dlsym(twcCudaLib, "cuDeviceGetPCIBusId");
	if (!twcCuInit || !twcCuDeviceGetCount || !twcCuDeviceGet || !twcCuDeviceGetAttribute || !twcCuDeviceGetPCIBusId) return 2;
	return 0;
}

static const char* twcDlerror(void) { return dlerror(); }
static int twcCallInit(void) { return twcCuInit(0); }
static int twcCallCount(int* n) { return twcCuDeviceGetCount(n); }
static int twcCallGet(int* d, int i) { return twcCuDeviceGet(d, i); }
static int twcCallAttr(int* v, int attr, int dev) { return twcCuDeviceGetAttribute(v, attr, dev); }
static int twcCallBusId(char* buf, int len, int dev) { return twcCuDeviceGetPCIBusId(buf, len, dev); }
*/
import "C"

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
)

// CUDA device attributes (cuda.h, CUdevice_attribute).
const (
	cuAttrGPUDirectRDMASupported = 116
	cuAttrDMABufSupported        = 124
)

// CUDADriver answers CUDA device attribute queries through libcuda.so.1,
// loaded with dlopen. It implements CUDA.
type CUDADriver struct {
	attrs map[string]CUDAAttributes // by bus id
}

var _ CUDA = (*CUDADriver)(nil)

var (
	cudaOnce sync.Once
	cudaDrv  *CUDADriver
	cudaErr  error
)

// OpenCUDA loads the CUDA driver, initialises it and reads the attributes of
// every CUDA device. The result is cached for the process.
func OpenCUDA() (*CUDADriver, error) {
	cudaOnce.Do(func() { cudaDrv, cudaErr = openCUDA() })
	return cudaDrv, cudaErr
}

func openCUDA() (*CUDADriver, error) {
	switch C.twcCudaOpen() {
	case 0:
	case 1:
		msg := "unknown error"
		if e := C.twcDlerror(); e != nil {
			msg = C.GoString(e)
		}
		return nil, fmt.Errorf("load libcuda.so.1: %s", msg)
	default:
		return nil, errors.New("libcuda.so.1 lacks cuInit, cuDeviceGet, cuDeviceGetCount, cuDeviceGetAttribute or cuDeviceGetPCIBusId")
	}
	if r := C.twcCallInit(); r != 0 {
		return nil, fmt.Errorf("cuInit: CUDA error %d", int(r))
	}
	var n C.int
	if r := C.twcCallCount(&n); r != 0 {
		return nil, fmt.Errorf("cuDeviceGetCount: CUDA error %d", int(r))
	}
	drv := &CUDADriver{attrs: map[string]CUDAAttributes{}}
	buf := make([]byte, 64)
	for i := 0; i < int(n); i++ {
		var dev C.int
		if r := C.twcCallGet(&dev, C.int(i)); r != 0 {
			return nil, fmt.Errorf("cuDeviceGet(%d): CUDA error %d", i, int(r))
		}
		if r := C.twcCallBusId((*C.char)(unsafe.Pointer(&buf[0])), C.int(len(buf)), dev); r != 0 {
			return nil, fmt.Errorf("cuDeviceGetPCIBusId(%d): CUDA error %d", i, int(r))
		}
		busID, err := parseBusID(cString(string(buf)))
		if err != nil {
			return nil, fmt.Errorf("CUDA device %d: %w", i, err)
		}
		var gdr, dmabuf C.int
		if r := C.twcCallAttr(&gdr, cuAttrGPUDirectRDMASupported, dev); r != 0 {
			return nil, fmt.Errorf("cuDeviceGetAttribute(GPU_DIRECT_RDMA_SUPPORTED, %d): CUDA error %d", i, int(r))
		}
		if r := C.twcCallAttr(&dmabuf, cuAttrDMABufSupported, dev); r != 0 {
			dmabuf = 0 // older drivers do not know the attribute
		}
		drv.attrs[busID] = CUDAAttributes{GPUDirectRDMA: gdr != 0, DMABuf: dmabuf != 0}
	}
	return drv, nil
}

// DeviceAttributes implements CUDA.
func (c *CUDADriver) DeviceAttributes(busID string) (CUDAAttributes, error) {
	a, ok := c.attrs[busID]
	if !ok {
		return CUDAAttributes{}, fmt.Errorf("GPU %s is not visible to CUDA (CUDA_VISIBLE_DEVICES?)", busID)
	}
	return a, nil
}
