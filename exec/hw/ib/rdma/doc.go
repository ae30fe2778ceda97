// Package rdma is the real verbs provider: libibverbs through cgo. The
// library is loaded at run time (dlopen of libibverbs.so.1, entry points
// at the IBVERBS_1.1 ABI, as NCCL's runtime-loading mode does), and the
// part of its ABI that the package uses is declared in twibv_abi.h (with
// the layout of rdma-core's verbs.h, checked by layout_test.go), as NCCL's
// ibvcore.h does: building needs cgo and a C compiler with the C library's
// headers, not libibverbs or its headers (libibverbs-dev). A binary using
// this package runs where libibverbs is absent: New then fails with a
// one-line error saying that libibverbs was not found, which wraps
// verbs.ErrNoDevice (so that the ib plugin's automatic choice falls back
// to the software provider). Without cgo it builds too, and New reports
// that the provider needs cgo. Its device tests run where
// ibv_get_device_list finds a device, skip elsewhere, and fail when
// TWINCCL_REQUIRE_IB=1 and none is found.
//
// Buffers registered through it must stay alive (and, under cgo's rules,
// should not be Go-heap memory in production use) until deregistered.
package rdma
