//go:build !cgo

package rdma

import (
	"errors"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// New fails: the real provider needs cgo and libibverbs.
func New() (verbs.Provider, error) {
	return nil, errors.New("rdma: the libibverbs provider needs a cgo build (CGO_ENABLED=1 with libibverbs-dev)")
}
