package ncclapi

import (
	"fmt"
	"sync"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// The primary contexts this process's communicators use, retained once per
// GPU and never released while the process runs (the CUDA runtime of the
// application holds the same contexts). Only the GPUs that communicators
// use are touched: a process per GPU creates no context on the others.
// GPUs of one process map each other's memory (peer access) where the
// hardware allows, for communicators of several GPUs in one process
// (ncclCommInitAll).
var (
	ctxMu sync.Mutex
	ctxs  = map[int]*cuda.Context{}
)

// deviceCount is the number of visible CUDA devices.
func deviceCount() (int, error) {
	drv, err := cuda.Open()
	if err != nil {
		return 0, err
	}
	return drv.DeviceCount()
}

// contextFor retains device ordinal dev's primary context.
func contextFor(dev int) (*cuda.Context, error) {
	ctxMu.Lock()
	defer ctxMu.Unlock()
	if c, ok := ctxs[dev]; ok {
		return c, nil
	}
	drv, err := cuda.Open()
	if err != nil {
		return nil, err
	}
	n, err := drv.DeviceCount()
	if err != nil {
		return nil, err
	}
	if dev < 0 || dev >= n {
		return nil, errorf(InvalidArgument, "CUDA device %d does not exist (%d visible)", dev, n)
	}
	d, err := drv.Device(dev)
	if err != nil {
		return nil, err
	}
	c, err := d.RetainPrimaryContext()
	if err != nil {
		return nil, err
	}
	for o, oc := range ctxs {
		for _, pair := range [][2]*cuda.Context{{c, oc}, {oc, c}} {
			ok, err := pair[0].Device().CanAccessPeer(pair[1].Device())
			if err != nil {
				return nil, err
			}
			if ok {
				if err := pair[0].EnablePeerAccess(pair[1]); err != nil {
					return nil, fmt.Errorf("peer access between GPUs %d and %d: %w", dev, o, err)
				}
			}
		}
	}
	ctxs[dev] = c
	return c, nil
}
