// Package ncclapi is twinccl behind NCCL's C API: communicators made from
// an ncclUniqueId (bootstrap), planned on the live topology (search), whose
// collectives run as model Programs on the caller's CUDA stream (gpudev),
// or as device-to-device copies for a one-rank communicator, as NCCL runs
// those. The C entry points themselves (ncclAllReduce, ...) are in the
// c-shared main package libnccl, which turns this package's errors into
// ncclResult_t codes and ncclGetLastError's text.
package ncclapi

import (
	"errors"
	"fmt"
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// Result is an ncclResult_t.
type Result int32

// NCCL 2.28's result codes (nccl.h).
const (
	Success            Result = 0
	UnhandledCudaError Result = 1
	SystemError        Result = 2
	InternalError      Result = 3
	InvalidArgument    Result = 4
	InvalidUsage       Result = 5
	RemoteError        Result = 6
	InProgress         Result = 7
	NumResults         Result = 8
)

// resultStrings are ncclGetErrorString's texts, NCCL's wording.
var resultStrings = [NumResults]string{
	Success:            "no error",
	UnhandledCudaError: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
	SystemError:        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
	InternalError:      "internal error - please report this issue to the NCCL developers",
	InvalidArgument:    "invalid argument (run with NCCL_DEBUG=WARN for details)",
	InvalidUsage:       "invalid usage (run with NCCL_DEBUG=WARN for details)",
	RemoteError:        "remote process exited or there was a network error",
	InProgress:         "NCCL operation in progress",
}

// ErrorString is ncclGetErrorString: NCCL's text for r, "unknown result
// code" for a value outside the enum.
func ErrorString(r Result) string {
	if r >= 0 && r < NumResults {
		return resultStrings[r]
	}
	return "unknown result code"
}

// Error is a failed call: the code the C API returns and why.
type Error struct {
	Code Result
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func errorf(code Result, format string, args ...any) error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// Code is the ncclResult_t for err: an *Error's code; a CUDA failure is
// ncclUnhandledCudaError; anything else ncclSystemError (sockets, files),
// as NCCL reports its system calls' failures.
func Code(err error) Result {
	if err == nil {
		return Success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var ce *cuda.Error
	if errors.As(err, &ce) || errors.Is(err, cuda.ErrUnavailable) {
		return UnhandledCudaError
	}
	return SystemError
}

var (
	lastMu  sync.Mutex
	lastErr string
)

// SetLastError records the text ncclGetLastError returns. NCCL keeps one
// per process (its comm argument is unused), and so do we.
func SetLastError(msg string) {
	lastMu.Lock()
	lastErr = msg
	lastMu.Unlock()
}

// LastError is the text of the last failure ("" before any).
func LastError() string {
	lastMu.Lock()
	defer lastMu.Unlock()
	return lastErr
}

// Fail records err as the last error, prefixed by the C function's name,
// and returns its code; nil is ncclSuccess and leaves the last error.
func Fail(fn string, err error) Result {
	if err == nil {
		return Success
	}
	SetLastError(fn + ": " + err.Error())
	return Code(err)
}
