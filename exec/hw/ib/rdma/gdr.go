//go:build cgo

package rdma

/*
#include "twibv.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// RegDevice registers GPU memory with the HCA as NCCL does: through
// dma-buf where the library has ibv_reg_dmabuf_mr and the memory exports
// one (cuMemGetHandleForAddressRange), else by handing the device address
// to ibv_reg_mr, which succeeds only where the nvidia-peermem module
// resolves GPU addresses. The region's address is the device address.
func (p *PD) RegDevice(mem verbs.DeviceMemory, access verbs.Access) (verbs.MR, error) {
	n := mem.Len()
	if n <= 0 {
		return nil, errors.New("rdma: register empty GPU memory")
	}
	var dmaErr error
	if C.twibvHasDmabuf() != 0 {
		fd, off, err := mem.DmaBuf()
		if err == nil {
			m := C.twibvRegDmabufMR(p.p, C.uint64_t(off), C.size_t(n), C.uint64_t(mem.Addr()), C.int(fd), C.int(access))
			syscall.Close(fd) // the registration holds its own reference
			if m != nil {
				return &MR{m: m, n: n}, nil
			}
			dmaErr = fmt.Errorf("ibv_reg_dmabuf_mr of %d bytes at %#x failed", n, mem.Addr())
		} else {
			dmaErr = err
		}
	} else {
		dmaErr = fmt.Errorf("libibverbs has no ibv_reg_dmabuf_mr: %w", verbs.ErrNotSupported)
	}
	m := C.twibvRegAddrMR(p.p, C.uint64_t(mem.Addr()), C.size_t(n), C.int(access))
	if m == nil {
		return nil, fmt.Errorf("rdma: GPU memory at %#x: dma-buf: %v; ibv_reg_mr on the device address (nvidia-peermem) failed too: %w", mem.Addr(), dmaErr, verbs.ErrNotSupported)
	}
	return &MR{m: m, n: n}, nil
}

// QueryECE answers the QP's ECE options (ibv_query_ece); ok is false where
// the library or device has none.
func (q *QP) QueryECE() (verbs.ECE, bool, error) {
	var e C.struct_twibv_ece
	if C.twibvQueryECE(q.q, &e) != 0 {
		return verbs.ECE{}, false, nil
	}
	return verbs.ECE{VendorID: uint32(e.vendor_id), Options: uint32(e.options), CompMask: uint32(e.comp_mask)}, true, nil
}

// SetECE sets the QP's ECE options before RTR (ibv_set_ece).
func (q *QP) SetECE(v verbs.ECE) error {
	e := C.struct_twibv_ece{vendor_id: C.uint32_t(v.VendorID), options: C.uint32_t(v.Options), comp_mask: C.uint32_t(v.CompMask)}
	switch rc := C.twibvSetECE(q.q, &e); rc {
	case 0:
	case -1, C.int(syscall.EOPNOTSUPP):
		return fmt.Errorf("rdma: QP %#x: ibv_set_ece: %w", q.QPN(), verbs.ErrNotSupported)
	default:
		return fmt.Errorf("rdma: QP %#x: ibv_set_ece: %w", q.QPN(), syscall.Errno(rc))
	}
	return nil
}

var (
	_ verbs.DeviceRegistrar = (*PD)(nil)
	_ verbs.ECEQP           = (*QP)(nil)
)
