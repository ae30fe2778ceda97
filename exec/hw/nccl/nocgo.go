//go:build !cgo

package nccl

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/cuda"
)

// load fails: the libnccl binding needs cgo.
func load(path string) (ncclAPI, error) {
	return nil, fmt.Errorf("%w: cannot load %s: %w", cuda.ErrUnavailable, path, cuda.ErrNoCgo)
}
