//go:build cgo

package cuda

/*
#include <stdlib.h>
#include "twcuda.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"unsafe"
)

// nvrtcMu serializes loading: the C side keeps one table of entry points.
var nvrtcMu sync.Mutex

// loadNVRTC opens one NVRTC library.
func loadNVRTC(path string) (nvrtcAPI, error) {
	nvrtcMu.Lock()
	defer nvrtcMu.Unlock()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var buf [512]C.char
	if C.twnOpen(cpath, &buf[0], C.int(len(buf))) != 0 {
		return nil, errors.New(C.GoString(&buf[0]))
	}
	return cgoNVRTC{}, nil
}

type cgoNVRTC struct{}

func (cgoNVRTC) version() (int, int, int) {
	var major, minor C.int
	r := C.twnVersion(&major, &minor)
	return int(major), int(minor), int(r)
}

func (cgoNVRTC) errorString(r int) string {
	if s := C.twnErrorString(C.int(r)); s != nil {
		return C.GoString(s)
	}
	return fmt.Sprintf("nvrtcResult %d", r)
}

func (cgoNVRTC) hasCUBIN() bool { return C.twnHasCUBIN() != 0 }

func (cgoNVRTC) compile(src, name string, opts []string, cubin bool) ([]byte, string, string, int) {
	for _, o := range opts {
		if strings.IndexByte(o, 0) >= 0 {
			return nil, "", "nvrtcCompileProgram", 3 // NVRTC_ERROR_INVALID_INPUT
		}
	}
	csrc := C.CString(src)
	defer C.free(unsafe.Pointer(csrc))
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	packed := C.CString(strings.Join(opts, "\x00") + "\x00")
	defer C.free(unsafe.Pointer(packed))

	var prog C.uintptr_t
	if r := C.twnCreateProgram(&prog, csrc, cname); r != 0 {
		return nil, "", "nvrtcCreateProgram", int(r)
	}
	defer C.twnDestroyProgram(prog)
	cr := C.twnCompileProgram(prog, packed, C.int(len(opts)))
	log := programLog(prog)
	if cr != 0 {
		return nil, log, "nvrtcCompileProgram", int(cr)
	}
	var n C.size_t
	var out []byte
	if cubin {
		if r := C.twnGetCUBINSize(prog, &n); r != 0 {
			return nil, log, "nvrtcGetCUBINSize", int(r)
		}
		if n == 0 {
			return nil, log, "", 0
		}
		out = make([]byte, int(n))
		if r := C.twnGetCUBIN(prog, (*C.char)(unsafe.Pointer(&out[0]))); r != 0 {
			return nil, log, "nvrtcGetCUBIN", int(r)
		}
		return out, log, "", 0
	}
	if r := C.twnGetPTXSize(prog, &n); r != 0 {
		return nil, log, "nvrtcGetPTXSize", int(r)
	}
	if n == 0 {
		return nil, log, "nvrtcGetPTXSize", 3
	}
	out = make([]byte, int(n))
	if r := C.twnGetPTX(prog, (*C.char)(unsafe.Pointer(&out[0]))); r != 0 {
		return nil, log, "nvrtcGetPTX", int(r)
	}
	return out, log, "", 0
}

func programLog(prog C.uintptr_t) string {
	var n C.size_t
	if C.twnGetProgramLogSize(prog, &n) != 0 || n <= 1 {
		return ""
	}
	buf := make([]byte, int(n))
	if C.twnGetProgramLog(prog, (*C.char)(unsafe.Pointer(&buf[0]))) != 0 {
		return ""
	}
	return strings.TrimRight(string(buf), "\x00")
}
