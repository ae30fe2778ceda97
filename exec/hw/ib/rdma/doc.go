// Package rdma is the real verbs provider: libibverbs through cgo
// (<infiniband/verbs.h>, Debian libibverbs-dev). Without cgo it builds
// too, and New reports that the provider needs cgo. Its tests run where
// ibv_get_device_list finds a device, skip elsewhere, and fail when
// TWINCCL_REQUIRE_IB=1 and none is found.
//
// Buffers registered through it must stay alive (and, under cgo's rules,
// should not be Go-heap memory in production use) until deregistered.
package rdma
