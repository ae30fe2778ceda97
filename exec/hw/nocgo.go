//go:build !cgo

package hw

import (
	"errors"
	"fmt"
)

// NVMLLibrary is the live NVML library. This build has no cgo, so it can
// never be opened.
type NVMLLibrary struct{}

// OpenNVML always fails in a build without cgo.
func OpenNVML() (*NVMLLibrary, error) {
	return nil, fmt.Errorf("%w: twinccl was built without cgo (CGO_ENABLED=0)", ErrNoNVML)
}

// Close does nothing.
func (l *NVMLLibrary) Close() error { return nil }

// DeviceCount implements NVML; it always fails without cgo.
func (l *NVMLLibrary) DeviceCount() (int, error) { return 0, ErrNoNVML }

// Device implements NVML; it always fails without cgo.
func (l *NVMLLibrary) Device(int) (NVMLDevice, error) { return nil, ErrNoNVML }

// CUDADriver answers CUDA attribute queries. This build has no cgo, so it
// can never be opened.
type CUDADriver struct{}

// OpenCUDA always fails in a build without cgo.
func OpenCUDA() (*CUDADriver, error) {
	return nil, errors.New("CUDA driver unavailable: twinccl was built without cgo (CGO_ENABLED=0)")
}

// DeviceAttributes implements CUDA; it always fails without cgo.
func (c *CUDADriver) DeviceAttributes(string) (CUDAAttributes, error) {
	return CUDAAttributes{}, errors.New("CUDA driver unavailable: built without cgo")
}
