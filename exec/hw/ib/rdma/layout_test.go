//go:build cgo

package rdma

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// The reference numbers below come from rdma-core's own header,
// libibverbs/verbs.h (github.com/linux-rdma/rdma-core at commit 691953d8,
// after v64.0), on x86_64 (gcc 12, glibc 2.36): a C program that includes
// that verbs.h and then twibv_layout.h (whose table is then computed from
// rdma-core's declarations instead of twibv_abi.h's) and prints each entry
// as "%s %lld %lld\n" of name, value and size, built with -I at a folder
// holding rdma-core's libibverbs/verbs.h, libibverbs/verbs_api.h and
// kernel-headers/rdma/ib_user_ioctl_verbs.h in a subfolder infiniband/.
// twibv_abi.h gives the same 379 lines. The sizes and offsets of the
// structs the data path reads, and the verbs_context distances, are the
// same in rdma-core v28.0, v35.0, v44.0 and v50.0. They hold on x86_64
// only (aarch64's pthread_mutex_t is 48 bytes, not 40, which moves the
// tails of ibv_cq, ibv_qp and ibv_context); the constants hold everywhere.

// refLayoutAMD64 is "name value size" per line: a struct's size (twice),
// or a field's offset and size; for verbs_context the value is the
// field's distance from the end of the struct (twibv_abi.h's starts
// later than rdma-core's: see there).
const refLayoutAMD64 = `
sizeof(union ibv_gid) 16 16
ibv_gid.raw 0 16
ibv_gid.global.subnet_prefix 0 8
ibv_gid.global.interface_id 8 8
sizeof(struct ibv_device_attr) 232 232
ibv_device_attr.fw_ver 0 64
ibv_device_attr.node_guid 64 8
ibv_device_attr.sys_image_guid 72 8
ibv_device_attr.max_mr_size 80 8
ibv_device_attr.page_size_cap 88 8
ibv_device_attr.vendor_id 96 4
ibv_device_attr.max_qp 108 4
ibv_device_attr.device_cap_flags 116 4
ibv_device_attr.atomic_cap 164 4
ibv_device_attr.max_srq_sge 220 4
ibv_device_attr.max_pkeys 224 2
ibv_device_attr.local_ca_ack_delay 226 1
ibv_device_attr.phys_port_cnt 227 1
sizeof(struct ibv_port_attr) 56 56
ibv_port_attr.state 0 4
ibv_port_attr.max_mtu 4 4
ibv_port_attr.active_mtu 8 4
ibv_port_attr.gid_tbl_len 12 4
ibv_port_attr.port_cap_flags 16 4
ibv_port_attr.max_msg_sz 20 4
ibv_port_attr.qkey_viol_cntr 28 4
ibv_port_attr.pkey_tbl_len 32 2
ibv_port_attr.lid 34 2
ibv_port_attr.sm_lid 36 2
ibv_port_attr.lmc 38 1
ibv_port_attr.init_type_reply 42 1
ibv_port_attr.active_width 43 1
ibv_port_attr.active_speed 44 1
ibv_port_attr.phys_state 45 1
ibv_port_attr.link_layer 46 1
ibv_port_attr.flags 47 1
ibv_port_attr.port_cap_flags2 48 2
ibv_port_attr.active_speed_ex 52 4
sizeof(struct ibv_pd) 16 16
ibv_pd.context 0 8
ibv_pd.handle 8 4
sizeof(struct ibv_mr) 48 48
ibv_mr.context 0 8
ibv_mr.pd 8 8
ibv_mr.addr 16 8
ibv_mr.length 24 8
ibv_mr.handle 32 4
ibv_mr.lkey 36 4
ibv_mr.rkey 40 4
sizeof(struct ibv_cq) 128 128
ibv_cq.context 0 8
ibv_cq.channel 8 8
ibv_cq.cq_context 16 8
ibv_cq.handle 24 4
ibv_cq.cqe 28 4
ibv_cq.mutex 32 40
ibv_cq.cond 72 48
ibv_cq.comp_events_completed 120 4
ibv_cq.async_events_completed 124 4
sizeof(struct ibv_qp) 160 160
ibv_qp.context 0 8
ibv_qp.qp_context 8 8
ibv_qp.pd 16 8
ibv_qp.send_cq 24 8
ibv_qp.recv_cq 32 8
ibv_qp.srq 40 8
ibv_qp.handle 48 4
ibv_qp.qp_num 52 4
ibv_qp.state 56 4
ibv_qp.qp_type 60 4
ibv_qp.mutex 64 40
ibv_qp.cond 104 48
ibv_qp.events_completed 152 4
sizeof(struct ibv_qp_cap) 20 20
ibv_qp_cap.max_send_wr 0 4
ibv_qp_cap.max_recv_wr 4 4
ibv_qp_cap.max_send_sge 8 4
ibv_qp_cap.max_recv_sge 12 4
ibv_qp_cap.max_inline_data 16 4
sizeof(struct ibv_qp_init_attr) 64 64
ibv_qp_init_attr.qp_context 0 8
ibv_qp_init_attr.send_cq 8 8
ibv_qp_init_attr.recv_cq 16 8
ibv_qp_init_attr.srq 24 8
ibv_qp_init_attr.cap 32 20
ibv_qp_init_attr.qp_type 52 4
ibv_qp_init_attr.sq_sig_all 56 4
sizeof(struct ibv_global_route) 24 24
ibv_global_route.dgid 0 16
ibv_global_route.flow_label 16 4
ibv_global_route.sgid_index 20 1
ibv_global_route.hop_limit 21 1
ibv_global_route.traffic_class 22 1
sizeof(struct ibv_ah_attr) 32 32
ibv_ah_attr.grh 0 24
ibv_ah_attr.dlid 24 2
ibv_ah_attr.sl 26 1
ibv_ah_attr.src_path_bits 27 1
ibv_ah_attr.static_rate 28 1
ibv_ah_attr.is_global 29 1
ibv_ah_attr.port_num 30 1
sizeof(struct ibv_qp_attr) 144 144
ibv_qp_attr.qp_state 0 4
ibv_qp_attr.cur_qp_state 4 4
ibv_qp_attr.path_mtu 8 4
ibv_qp_attr.path_mig_state 12 4
ibv_qp_attr.qkey 16 4
ibv_qp_attr.rq_psn 20 4
ibv_qp_attr.sq_psn 24 4
ibv_qp_attr.dest_qp_num 28 4
ibv_qp_attr.qp_access_flags 32 4
ibv_qp_attr.cap 36 20
ibv_qp_attr.ah_attr 56 32
ibv_qp_attr.ah_attr.grh.dgid 56 16
ibv_qp_attr.ah_attr.grh.sgid_index 76 1
ibv_qp_attr.ah_attr.grh.hop_limit 77 1
ibv_qp_attr.ah_attr.dlid 80 2
ibv_qp_attr.ah_attr.is_global 85 1
ibv_qp_attr.ah_attr.port_num 86 1
ibv_qp_attr.alt_ah_attr 88 32
ibv_qp_attr.pkey_index 120 2
ibv_qp_attr.alt_pkey_index 122 2
ibv_qp_attr.en_sqd_async_notify 124 1
ibv_qp_attr.sq_draining 125 1
ibv_qp_attr.max_rd_atomic 126 1
ibv_qp_attr.max_dest_rd_atomic 127 1
ibv_qp_attr.min_rnr_timer 128 1
ibv_qp_attr.port_num 129 1
ibv_qp_attr.timeout 130 1
ibv_qp_attr.retry_cnt 131 1
ibv_qp_attr.rnr_retry 132 1
ibv_qp_attr.alt_port_num 133 1
ibv_qp_attr.alt_timeout 134 1
ibv_qp_attr.rate_limit 136 4
sizeof(struct ibv_sge) 16 16
ibv_sge.addr 0 8
ibv_sge.length 8 4
ibv_sge.lkey 12 4
sizeof(struct ibv_mw_bind_info) 32 32
ibv_mw_bind_info.mr 0 8
ibv_mw_bind_info.addr 8 8
ibv_mw_bind_info.length 16 8
ibv_mw_bind_info.mw_access_flags 24 4
sizeof(struct ibv_send_wr) 128 128
ibv_send_wr.wr_id 0 8
ibv_send_wr.next 8 8
ibv_send_wr.sg_list 16 8
ibv_send_wr.num_sge 24 4
ibv_send_wr.opcode 28 4
ibv_send_wr.send_flags 32 4
ibv_send_wr.imm_data 36 4
ibv_send_wr.invalidate_rkey 36 4
ibv_send_wr.wr 40 32
ibv_send_wr.wr.rdma.remote_addr 40 8
ibv_send_wr.wr.rdma.rkey 48 4
ibv_send_wr.wr.atomic.remote_addr 40 8
ibv_send_wr.wr.atomic.compare_add 48 8
ibv_send_wr.wr.atomic.swap 56 8
ibv_send_wr.wr.atomic.rkey 64 4
ibv_send_wr.wr.ud.ah 40 8
ibv_send_wr.wr.ud.remote_qpn 48 4
ibv_send_wr.wr.ud.remote_qkey 52 4
ibv_send_wr.qp_type.xrc.remote_srqn 72 4
ibv_send_wr.bind_mw.mw 80 8
ibv_send_wr.bind_mw.rkey 88 4
ibv_send_wr.bind_mw.bind_info 96 32
ibv_send_wr.tso.hdr 80 8
ibv_send_wr.tso.hdr_sz 88 2
ibv_send_wr.tso.mss 90 2
sizeof(struct ibv_recv_wr) 32 32
ibv_recv_wr.wr_id 0 8
ibv_recv_wr.next 8 8
ibv_recv_wr.sg_list 16 8
ibv_recv_wr.num_sge 24 4
sizeof(struct ibv_wc) 48 48
ibv_wc.wr_id 0 8
ibv_wc.status 8 4
ibv_wc.opcode 12 4
ibv_wc.vendor_err 16 4
ibv_wc.byte_len 20 4
ibv_wc.imm_data 24 4
ibv_wc.invalidated_rkey 24 4
ibv_wc.qp_num 28 4
ibv_wc.src_qp 32 4
ibv_wc.wc_flags 36 4
ibv_wc.pkey_index 40 2
ibv_wc.slid 42 2
ibv_wc.sl 44 1
ibv_wc.dlid_path_bits 45 1
sizeof(struct ibv_context_ops) 256 256
ibv_context_ops._compat_query_device 0 8
ibv_context_ops.alloc_mw 56 8
ibv_context_ops.bind_mw 64 8
ibv_context_ops.dealloc_mw 72 8
ibv_context_ops.poll_cq 88 8
ibv_context_ops.req_notify_cq 96 8
ibv_context_ops.post_srq_recv 160 8
ibv_context_ops.post_send 200 8
ibv_context_ops.post_recv 208 8
ibv_context_ops._compat_async_event 248 8
sizeof(struct ibv_context) 328 328
ibv_context.device 0 8
ibv_context.ops 8 256
ibv_context.ops.poll_cq 96 8
ibv_context.ops.post_send 208 8
ibv_context.ops.post_recv 216 8
ibv_context.cmd_fd 264 4
ibv_context.async_fd 268 4
ibv_context.num_comp_vectors 272 4
ibv_context.mutex 280 40
ibv_context.abi_compat 320 8
verbs_context.end-query_port 648 8
verbs_context.end-advise_mr 640 8
verbs_context.end-alloc_null_mr 632 8
verbs_context.end-read_counters 624 8
verbs_context.end-attach_counters_point_flow 616 8
verbs_context.end-create_counters 608 8
verbs_context.end-destroy_counters 600 8
verbs_context.end-reg_dm_mr 592 8
verbs_context.end-alloc_dm 584 8
verbs_context.end-free_dm 576 8
verbs_context.end-modify_flow_action_esp 568 8
verbs_context.end-destroy_flow_action 560 8
verbs_context.end-create_flow_action_esp 552 8
verbs_context.end-modify_qp_rate_limit 544 8
verbs_context.end-alloc_parent_domain 536 8
verbs_context.end-dealloc_td 528 8
verbs_context.end-alloc_td 520 8
verbs_context.end-modify_cq 512 8
verbs_context.end-post_srq_ops 504 8
verbs_context.end-destroy_rwq_ind_table 496 8
verbs_context.end-create_rwq_ind_table 488 8
verbs_context.end-destroy_wq 480 8
verbs_context.end-modify_wq 472 8
verbs_context.end-create_wq 464 8
verbs_context.end-query_rt_values 456 8
verbs_context.end-create_cq_ex 448 8
verbs_context.end-priv 440 8
verbs_context.end-query_device_ex 432 8
verbs_context.end-ibv_destroy_flow 424 8
verbs_context.end-ABI_placeholder2 416 8
verbs_context.end-ibv_create_flow 408 8
verbs_context.end-ABI_placeholder1 400 8
verbs_context.end-open_qp 392 8
verbs_context.end-create_qp_ex 384 8
verbs_context.end-get_srq_num 376 8
verbs_context.end-create_srq_ex 368 8
verbs_context.end-open_xrcd 360 8
verbs_context.end-close_xrcd 352 8
verbs_context.end-_ABI_placeholder3 344 8
verbs_context.end-sz 336 8
verbs_context.end-context 328 328
`

// refConstants is "name value" per line: enum values, the same on every
// architecture.
const refConstants = `
IBV_MTU_256 1
IBV_MTU_512 2
IBV_MTU_1024 3
IBV_MTU_2048 4
IBV_MTU_4096 5
IBV_PORT_NOP 0
IBV_PORT_DOWN 1
IBV_PORT_INIT 2
IBV_PORT_ARMED 3
IBV_PORT_ACTIVE 4
IBV_PORT_ACTIVE_DEFER 5
IBV_LINK_LAYER_UNSPECIFIED 0
IBV_LINK_LAYER_INFINIBAND 1
IBV_LINK_LAYER_ETHERNET 2
IBV_ATOMIC_NONE 0
IBV_ATOMIC_HCA 1
IBV_ATOMIC_GLOB 2
IBV_ACCESS_LOCAL_WRITE 1
IBV_ACCESS_REMOTE_WRITE 2
IBV_ACCESS_REMOTE_READ 4
IBV_ACCESS_REMOTE_ATOMIC 8
IBV_ACCESS_MW_BIND 16
IBV_ACCESS_ZERO_BASED 32
IBV_ACCESS_ON_DEMAND 64
IBV_ACCESS_HUGETLB 128
IBV_ACCESS_RELAXED_ORDERING 1048576
IBV_MW_TYPE_1 1
IBV_MW_TYPE_2 2
IBV_QPT_RC 2
IBV_QPT_UC 3
IBV_QPT_UD 4
IBV_QPT_RAW_PACKET 8
IBV_QPT_XRC_SEND 9
IBV_QPT_XRC_RECV 10
IBV_QPT_DRIVER 255
IBV_QPS_RESET 0
IBV_QPS_INIT 1
IBV_QPS_RTR 2
IBV_QPS_RTS 3
IBV_QPS_SQD 4
IBV_QPS_SQE 5
IBV_QPS_ERR 6
IBV_QPS_UNKNOWN 7
IBV_MIG_MIGRATED 0
IBV_MIG_REARM 1
IBV_MIG_ARMED 2
IBV_QP_STATE 1
IBV_QP_CUR_STATE 2
IBV_QP_EN_SQD_ASYNC_NOTIFY 4
IBV_QP_ACCESS_FLAGS 8
IBV_QP_PKEY_INDEX 16
IBV_QP_PORT 32
IBV_QP_QKEY 64
IBV_QP_AV 128
IBV_QP_PATH_MTU 256
IBV_QP_TIMEOUT 512
IBV_QP_RETRY_CNT 1024
IBV_QP_RNR_RETRY 2048
IBV_QP_RQ_PSN 4096
IBV_QP_MAX_QP_RD_ATOMIC 8192
IBV_QP_ALT_PATH 16384
IBV_QP_MIN_RNR_TIMER 32768
IBV_QP_SQ_PSN 65536
IBV_QP_MAX_DEST_RD_ATOMIC 131072
IBV_QP_PATH_MIG_STATE 262144
IBV_QP_CAP 524288
IBV_QP_DEST_QPN 1048576
IBV_QP_RATE_LIMIT 33554432
IBV_WR_RDMA_WRITE 0
IBV_WR_RDMA_WRITE_WITH_IMM 1
IBV_WR_SEND 2
IBV_WR_SEND_WITH_IMM 3
IBV_WR_RDMA_READ 4
IBV_WR_ATOMIC_CMP_AND_SWP 5
IBV_WR_ATOMIC_FETCH_AND_ADD 6
IBV_WR_LOCAL_INV 7
IBV_WR_BIND_MW 8
IBV_WR_SEND_WITH_INV 9
IBV_WR_TSO 10
IBV_WR_DRIVER1 11
IBV_WR_FLUSH 14
IBV_WR_ATOMIC_WRITE 15
IBV_SEND_FENCE 1
IBV_SEND_SIGNALED 2
IBV_SEND_SOLICITED 4
IBV_SEND_INLINE 8
IBV_SEND_IP_CSUM 16
IBV_WC_SUCCESS 0
IBV_WC_LOC_LEN_ERR 1
IBV_WC_LOC_QP_OP_ERR 2
IBV_WC_LOC_EEC_OP_ERR 3
IBV_WC_LOC_PROT_ERR 4
IBV_WC_WR_FLUSH_ERR 5
IBV_WC_MW_BIND_ERR 6
IBV_WC_BAD_RESP_ERR 7
IBV_WC_LOC_ACCESS_ERR 8
IBV_WC_REM_INV_REQ_ERR 9
IBV_WC_REM_ACCESS_ERR 10
IBV_WC_REM_OP_ERR 11
IBV_WC_RETRY_EXC_ERR 12
IBV_WC_RNR_RETRY_EXC_ERR 13
IBV_WC_LOC_RDD_VIOL_ERR 14
IBV_WC_REM_INV_RD_REQ_ERR 15
IBV_WC_REM_ABORT_ERR 16
IBV_WC_INV_EECN_ERR 17
IBV_WC_INV_EEC_STATE_ERR 18
IBV_WC_FATAL_ERR 19
IBV_WC_RESP_TIMEOUT_ERR 20
IBV_WC_GENERAL_ERR 21
IBV_WC_TM_ERR 22
IBV_WC_TM_RNDV_INCOMPLETE 23
IBV_WC_SEND 0
IBV_WC_RDMA_WRITE 1
IBV_WC_RDMA_READ 2
IBV_WC_COMP_SWAP 3
IBV_WC_FETCH_ADD 4
IBV_WC_BIND_MW 5
IBV_WC_LOCAL_INV 6
IBV_WC_TSO 7
IBV_WC_FLUSH 8
IBV_WC_ATOMIC_WRITE 9
IBV_WC_RECV 128
IBV_WC_RECV_RDMA_WITH_IMM 129
IBV_WC_GRH 1
IBV_WC_WITH_IMM 2
IBV_WC_IP_CSUM_OK 4
IBV_WC_WITH_INV 8
`

type layoutRef struct{ value, size int64 }

// parseRef reads "name value [size]" lines; the name may have spaces
// ("sizeof(struct ibv_wc)").
func parseRef(t *testing.T, s string, withSize bool) map[string]layoutRef {
	t.Helper()
	m := map[string]layoutRef{}
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		cols := 1
		if withSize {
			cols = 2
		}
		rest, nums := line, []int64{}
		for range cols {
			i := strings.LastIndexByte(rest, ' ')
			require.Positive(t, i, "reference line %q", line)
			v, err := strconv.ParseInt(rest[i+1:], 10, 64)
			require.NoError(t, err, "reference line %q", line)
			nums, rest = append([]int64{v}, nums...), rest[:i]
		}
		require.NotContains(t, m, rest, "duplicate reference %q", rest)
		r := layoutRef{value: nums[0]}
		if withSize {
			r.size = nums[1]
		}
		m[rest] = r
	}
	return m
}

// checkTable compares each reference entry with abiLayout and requires
// that the entries keep selects all have a reference.
func checkTable(t *testing.T, ref map[string]layoutRef, keep func(string) bool) {
	t.Helper()
	got := abiLayout()
	for name, want := range ref {
		e, ok := got[name]
		if !assert.True(t, ok, "twibv_layout.h has no %s", name) {
			continue
		}
		assert.Equal(t, want.value, e.value, "%s: twibv_abi.h gives %d, rdma-core's verbs.h %d", name, e.value, want.value)
		assert.Equal(t, want.size, e.size, "size of %s: twibv_abi.h gives %d, rdma-core's verbs.h %d", name, e.size, want.size)
	}
	for name := range got {
		if keep(name) {
			assert.Contains(t, ref, name, "%s has no reference number", name)
		}
	}
}

func isConst(name string) bool { return strings.HasPrefix(name, "IBV_") }

// TestABILayout checks the sizes, offsets and field sizes of
// twibv_abi.h's structs against rdma-core's verbs.h on x86_64: a field
// missing, added, moved or resized shows up.
func TestABILayout(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the reference layout numbers are x86_64's, not %s's", runtime.GOARCH)
	}
	ref := parseRef(t, refLayoutAMD64, true)
	require.Len(t, ref, 252)
	checkTable(t, ref, func(n string) bool { return !isConst(n) })
}

// TestABIConstants checks twibv_abi.h's enum values against verbs.h's.
func TestABIConstants(t *testing.T) {
	ref := parseRef(t, refConstants, false)
	require.Len(t, ref, 127)
	checkTable(t, ref, isConst)
}

// TestVerbsValues checks that the verbs package's constants, which
// rdma.go converts to and from the C ones by value, are verbs.h's.
func TestVerbsValues(t *testing.T) {
	c := abiLayout()
	for name, v := range map[string]int64{
		"IBV_ACCESS_LOCAL_WRITE":      int64(verbs.AccessLocalWrite),
		"IBV_ACCESS_REMOTE_WRITE":     int64(verbs.AccessRemoteWrite),
		"IBV_ACCESS_REMOTE_READ":      int64(verbs.AccessRemoteRead),
		"IBV_ACCESS_REMOTE_ATOMIC":    int64(verbs.AccessRemoteAtomic),
		"IBV_QPS_RESET":               int64(verbs.QPSReset),
		"IBV_QPS_INIT":                int64(verbs.QPSInit),
		"IBV_QPS_RTR":                 int64(verbs.QPSRTR),
		"IBV_QPS_RTS":                 int64(verbs.QPSRTS),
		"IBV_QPS_ERR":                 int64(verbs.QPSErr),
		"IBV_WR_RDMA_WRITE":           int64(verbs.OpWrite),
		"IBV_WR_RDMA_WRITE_WITH_IMM":  int64(verbs.OpWriteImm),
		"IBV_WR_RDMA_READ":            int64(verbs.OpRead),
		"IBV_WR_ATOMIC_FETCH_AND_ADD": int64(verbs.OpAtomicFetchAdd),
		"IBV_WC_SEND":                 int64(verbs.WCSend),
		"IBV_WC_RDMA_WRITE":           int64(verbs.WCWrite),
		"IBV_WC_RDMA_READ":            int64(verbs.WCRead),
		"IBV_WC_FETCH_ADD":            int64(verbs.WCFetchAdd),
		"IBV_WC_RECV_RDMA_WITH_IMM":   int64(verbs.WCRecvWriteImm),
		"IBV_WC_SUCCESS":              int64(verbs.WCSuccess),
		"IBV_WC_LOC_LEN_ERR":          int64(verbs.WCLocLenErr),
		"IBV_WC_LOC_QP_OP_ERR":        int64(verbs.WCLocQPOpErr),
		"IBV_WC_LOC_PROT_ERR":         int64(verbs.WCLocProtErr),
		"IBV_WC_WR_FLUSH_ERR":         int64(verbs.WCWRFlushErr),
		"IBV_WC_REM_INV_REQ_ERR":      int64(verbs.WCRemInvReqErr),
		"IBV_WC_REM_ACCESS_ERR":       int64(verbs.WCRemAccessErr),
		"IBV_WC_REM_OP_ERR":           int64(verbs.WCRemOpErr),
		"IBV_WC_RETRY_EXC_ERR":        int64(verbs.WCRetryExcErr),
		"IBV_WC_RNR_RETRY_EXC_ERR":    int64(verbs.WCRNRRetryExcErr),
	} {
		if assert.Contains(t, c, name) {
			assert.Equal(t, c[name].value, v, "the verbs package's value for %s", name)
		}
	}
}
