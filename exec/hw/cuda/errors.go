package cuda

import (
	"errors"
	"fmt"
)

// ErrUnavailable is wrapped by every error of [Open] and [OpenNVRTC] that
// means the library cannot be used on this machine (missing library, missing
// entry point, no device, build without cgo). Tests skip on it.
var ErrUnavailable = errors.New("cuda: unavailable")

// ErrNoCgo is wrapped by the errors of a build without cgo.
var ErrNoCgo = errors.New("built without cgo (CGO_ENABLED=0); the CUDA binding needs cgo")

// Result is a CUresult, the status code of a CUDA driver call. A non-zero
// Result is an error; its text comes from cuGetErrorName and
// cuGetErrorString once the driver is loaded.
type Result int

// CUresult values (cuda.h) that callers test for.
const (
	Success                          Result = 0
	ErrorInvalidValue                Result = 1
	ErrorOutOfMemory                 Result = 2
	ErrorNotInitialized              Result = 3
	ErrorDeinitialized               Result = 4
	ErrorNoDevice                    Result = 100
	ErrorInvalidDevice               Result = 101
	ErrorInvalidImage                Result = 200
	ErrorInvalidContext              Result = 201
	ErrorNoBinaryForGPU              Result = 209
	ErrorPeerAccessUnsupported       Result = 217
	ErrorInvalidPTX                  Result = 218
	ErrorUnsupportedPTXVersion       Result = 222
	ErrorInvalidSource               Result = 300
	ErrorInvalidHandle               Result = 400
	ErrorNotFound                    Result = 500
	ErrorNotReady                    Result = 600
	ErrorIllegalAddress              Result = 700
	ErrorLaunchOutOfResources        Result = 701
	ErrorLaunchTimeout               Result = 702
	ErrorPeerAccessAlreadyEnabled    Result = 704
	ErrorPeerAccessNotEnabled        Result = 705
	ErrorPrimaryContextActive        Result = 708
	ErrorContextIsDestroyed          Result = 709
	ErrorHostMemoryAlreadyRegistered Result = 712
	ErrorLaunchFailed                Result = 719
	ErrorNotPermitted                Result = 800
	ErrorNotSupported                Result = 801
	ErrorStreamCaptureUnsupported    Result = 900
	ErrorStreamCaptureInvalidated    Result = 901
	ErrorStreamCaptureWrongThread    Result = 908
	ErrorUnknown                     Result = 999
)

// resultNoCgo is what the C-less build would answer; it is never returned
// by a real driver (CUresult values are non-negative).
const resultNoCgo Result = -1

// Error implements error.
func (r Result) Error() string {
	name, text := resultText(r)
	if text != "" {
		return fmt.Sprintf("%s (%d): %s", name, int(r), text)
	}
	return fmt.Sprintf("%s (%d)", name, int(r))
}

func resultText(r Result) (name, text string) {
	if r == resultNoCgo {
		return "CUDA_ERROR_NO_CGO", ErrNoCgo.Error()
	}
	if be := loadedDriver(); be != nil {
		name, text = be.errorName(r)
	}
	if name == "" {
		name = fmt.Sprintf("CUresult %d", int(r))
	}
	return name, text
}

// Error is a failed CUDA driver call.
type Error struct {
	Call string // the driver entry point, e.g. "cuMemAlloc"
	Code Result // its CUresult
	Name string // cuGetErrorName, e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Text string // cuGetErrorString, e.g. "out of memory"
	// Detail is extra text the call produced (a JIT error log), or "".
	Detail string
}

// Error implements error.
func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, int(e.Code))
	if e.Text != "" {
		s += ": " + e.Text
	}
	if e.Detail != "" {
		s += "\n" + e.Detail
	}
	return s
}

// Unwrap returns the Result, so that errors.Is(err, cuda.ErrorNotReady)
// holds for a failed call that returned CUDA_ERROR_NOT_READY.
func (e *Error) Unwrap() error { return e.Code }

// check turns a CUresult into nil or an *Error naming the call.
func check(call string, r Result) error {
	if r == Success {
		return nil
	}
	name, text := resultText(r)
	return &Error{Call: call, Code: r, Name: name, Text: text}
}
