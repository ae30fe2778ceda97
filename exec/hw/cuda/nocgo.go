//go:build !cgo

package cuda

import "fmt"

// loadDriver fails: the driver binding needs cgo.
func loadDriver(path string, abi int) (driverAPI, error) {
	return nil, fmt.Errorf("%w: cannot load %s: %w", ErrUnavailable, path, ErrNoCgo)
}

// loadNVRTC fails: the NVRTC binding needs cgo.
func loadNVRTC(path string) (nvrtcAPI, error) {
	return nil, fmt.Errorf("%w: cannot load NVRTC %s: %w", ErrUnavailable, path, ErrNoCgo)
}
