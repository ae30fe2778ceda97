// Package rdma is the real verbs provider: libibverbs through cgo. The
// library is loaded at run time (dlopen of libibverbs.so.1, entry points
// at the IBVERBS_1.1 ABI, as NCCL's runtime-loading mode does), so that a
// binary using this package runs where libibverbs is absent: New then
// fails with an error wrapping verbs.ErrNoDevice. Building it needs the
// headers (<infiniband/verbs.h>, Debian libibverbs-dev) and cgo; without
// cgo it builds too, and New reports that the provider needs cgo. Its
// tests run where ibv_get_device_list finds a device, skip elsewhere, and
// fail when TWINCCL_REQUIRE_IB=1 and none is found.
//
// Buffers registered through it must stay alive (and, under cgo's rules,
// should not be Go-heap memory in production use) until deregistered.
package rdma
