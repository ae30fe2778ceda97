//go:build !cgo

package rdma

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// New fails: the real provider needs cgo (and, at run time, libibverbs.so.1).
func New() (verbs.Provider, error) {
	return nil, fmt.Errorf("rdma: the libibverbs provider needs a cgo build (CGO_ENABLED=1 and a C compiler; no libibverbs headers): %w", verbs.ErrNoDevice)
}
