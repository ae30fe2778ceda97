//go:build cgo

// This file is the only one that imports go-nvml. go-nvml links every NVML
// symbol unresolved and relies on lazy binding: link binaries with
// -ldflags=-extldflags=-Wl,-z,lazy, and never call an NVML function after a
// failed Init or one whose symbol the driver lacks (the process would die
// with "symbol lookup error").

package hw

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLLibrary is the live NVML library, initialised. It implements NVML.
type NVMLLibrary struct {
	mu     sync.Mutex
	closed bool
	// Which optional entry points the installed driver has.
	hasFieldValues, hasNvLinkCap, hasNvLinkState, hasRemotePci, hasCC bool
}

var _ NVML = (*NVMLLibrary)(nil)

// OpenNVML loads libnvidia-ml and initialises it. On failure it returns an
// error wrapping ErrNoNVML, and no other NVML function has been (or may be)
// called.
func OpenNVML() (*NVMLLibrary, error) {
	if ret := nvml.Init(); ret != nvml.SUCCESS {
		hint := ""
		switch ret {
		case nvml.ERROR_LIBRARY_NOT_FOUND, nvml.ERROR_DRIVER_NOT_LOADED:
			hint = " (no NVIDIA driver on this machine)"
		case nvml.ERROR_NO_PERMISSION:
			hint = " (no permission to use the NVIDIA driver)"
		case nvml.ERROR_LIB_RM_VERSION_MISMATCH:
			hint = " (libnvidia-ml and the kernel driver differ in version)"
		}
		return nil, fmt.Errorf("%w: nvmlInit: %s%s", ErrNoNVML, ret.Error(), hint)
	}
	l := &NVMLLibrary{}
	ext := nvml.Extensions()
	has := func(names ...string) bool {
		for _, n := range names {
			if ext.LookupSymbol(n) == nil {
				return true
			}
		}
		return false
	}
	if !has("nvmlDeviceGetCount_v2", "nvmlDeviceGetCount") ||
		!has("nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex") ||
		!has("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo") {
		nvml.Shutdown()
		return nil, fmt.Errorf("%w: libnvidia-ml lacks device enumeration entry points", ErrNoNVML)
	}
	l.hasFieldValues = has("nvmlDeviceGetFieldValues")
	l.hasNvLinkCap = has("nvmlDeviceGetNvLinkCapability")
	l.hasNvLinkState = has("nvmlDeviceGetNvLinkState")
	l.hasRemotePci = has("nvmlDeviceGetNvLinkRemotePciInfo_v2", "nvmlDeviceGetNvLinkRemotePciInfo")
	l.hasCC = has("nvmlDeviceGetCudaComputeCapability")
	return l, nil
}

// Close shuts NVML down. It is safe to call more than once.
func (l *NVMLLibrary) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	if ret := nvml.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlShutdown: %w", nvmlErr(ret))
	}
	return nil
}

// nvmlErr converts a non-success NVML return code.
func nvmlErr(ret nvml.Return) error {
	if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_FUNCTION_NOT_FOUND {
		return fmt.Errorf("%s: %w", ret.Error(), ErrNotSupported)
	}
	return errors.New(ret.Error())
}

func (l *NVMLLibrary) check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return errors.New("NVML library is closed")
	}
	return nil
}

// DeviceCount implements NVML.
func (l *NVMLLibrary) DeviceCount() (int, error) {
	if err := l.check(); err != nil {
		return 0, err
	}
	n, ret := nvml.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return 0, fmt.Errorf("nvmlDeviceGetCount: %w", nvmlErr(ret))
	}
	return n, nil
}

// Device implements NVML.
func (l *NVMLLibrary) Device(index int) (NVMLDevice, error) {
	if err := l.check(); err != nil {
		return nil, err
	}
	h, ret := nvml.DeviceGetHandleByIndex(index)
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlDeviceGetHandleByIndex(%d): %w", index, nvmlErr(ret))
	}
	return &nvmlDevice{lib: l, h: h}, nil
}

type nvmlDevice struct {
	lib *NVMLLibrary
	h   nvml.Device
}

func int8String(b []int8) string {
	if len(b) == 0 {
		return ""
	}
	return cString(string(unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))))
}

func pciInfo(p nvml.PciInfo) PCIInfo {
	return PCIInfo{BusID: int8String(p.BusId[:]), BusIDLegacy: int8String(p.BusIdLegacy[:])}
}

func (d *nvmlDevice) PCIInfo() (PCIInfo, error) {
	p, ret := d.h.GetPciInfo()
	if ret != nvml.SUCCESS {
		return PCIInfo{}, fmt.Errorf("nvmlDeviceGetPciInfo: %w", nvmlErr(ret))
	}
	return pciInfo(p), nil
}

func (d *nvmlDevice) ComputeCapability() (int, int, error) {
	if !d.lib.hasCC {
		return 0, 0, fmt.Errorf("nvmlDeviceGetCudaComputeCapability: %w", ErrNotSupported)
	}
	major, minor, ret := d.h.GetCudaComputeCapability()
	if ret != nvml.SUCCESS {
		return 0, 0, fmt.Errorf("nvmlDeviceGetCudaComputeCapability: %w", nvmlErr(ret))
	}
	return major, minor, nil
}

func (d *nvmlDevice) NvLinkP2PSupported(link int) (bool, error) {
	if !d.lib.hasNvLinkCap {
		return false, fmt.Errorf("nvmlDeviceGetNvLinkCapability: %w", ErrNotSupported)
	}
	v, ret := d.h.GetNvLinkCapability(link, nvml.NVLINK_CAP_P2P_SUPPORTED)
	if ret != nvml.SUCCESS {
		return false, fmt.Errorf("nvmlDeviceGetNvLinkCapability(link %d): %w", link, nvmlErr(ret))
	}
	return v != 0, nil
}

func (d *nvmlDevice) NvLinkActive(link int) (bool, error) {
	if !d.lib.hasNvLinkState {
		return false, fmt.Errorf("nvmlDeviceGetNvLinkState: %w", ErrNotSupported)
	}
	st, ret := d.h.GetNvLinkState(link)
	if ret != nvml.SUCCESS {
		return false, fmt.Errorf("nvmlDeviceGetNvLinkState(link %d): %w", link, nvmlErr(ret))
	}
	return st == nvml.FEATURE_ENABLED, nil
}

func (d *nvmlDevice) NvLinkRemotePCIInfo(link int) (PCIInfo, error) {
	if !d.lib.hasRemotePci {
		return PCIInfo{}, fmt.Errorf("nvmlDeviceGetNvLinkRemotePciInfo: %w", ErrNotSupported)
	}
	p, ret := d.h.GetNvLinkRemotePciInfo(link)
	if ret != nvml.SUCCESS {
		return PCIInfo{}, fmt.Errorf("nvmlDeviceGetNvLinkRemotePciInfo(link %d): %w", link, nvmlErr(ret))
	}
	return pciInfo(p), nil
}

func (d *nvmlDevice) FieldValues(values []FieldValue) error {
	if !d.lib.hasFieldValues {
		return fmt.Errorf("nvmlDeviceGetFieldValues: %w", ErrNotSupported)
	}
	if len(values) == 0 {
		return nil
	}
	fv := make([]nvml.FieldValue, len(values))
	for i, v := range values {
		fv[i].FieldId = v.ID
		fv[i].ScopeId = v.Scope
	}
	if ret := d.h.GetFieldValues(fv); ret != nvml.SUCCESS {
		return fmt.Errorf("nvmlDeviceGetFieldValues: %w", nvmlErr(ret))
	}
	for i := range values {
		var raw uint64
		for k := 7; k >= 0; k-- {
			raw = raw<<8 | uint64(fv[i].Value[k])
		}
		values[i].Value = raw
		values[i].Err = nil
		if r := nvml.Return(fv[i].NvmlReturn); r != nvml.SUCCESS {
			values[i].Err = nvmlErr(r)
		}
	}
	return nil
}
