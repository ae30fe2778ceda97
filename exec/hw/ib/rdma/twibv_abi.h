// The subset of the libibverbs ABI that twibv.c and rdma.go use, declared
// here so that the package builds with gcc and the libc headers alone (no
// libibverbs-dev), as NCCL's ibvcore.h does for its runtime-loading mode.
//
// Every struct below has the layout of rdma-core's <infiniband/verbs.h>
// (the IBVERBS_1.1 ABI, which the entry points resolved in twibv.c
// implement), field for field and with the same names; enum values are
// verbs.h's. Structs only used through pointers are left incomplete.
// Fields are never reordered or removed there (that would break every
// binary built against an older header), and the structs declared in full
// here only ever grew at the end, so declaring the current layout is
// correct for every rdma-core release: where the library fills a struct
// it is told the size (query_port) or fills only the old prefix (the
// IBVERBS_1.1 ibv_query_port). layout_test.go checks sizes and offsets
// against numbers taken from rdma-core's verbs.h on x86_64.
//
// Types are verbs.h's, except that its big-endian __be16/__be32/__be64
// (from <linux/types.h>) are plain uint16_t/uint32_t/uint64_t here: same
// size and alignment, and those fields hold network byte order all the
// same. pthread_mutex_t and pthread_cond_t are the C library's, as in
// verbs.h (a mutex is 40 bytes on x86_64 and 48 on aarch64).
//
// This header is a replacement for <infiniband/verbs.h>, not a companion:
// a file must not include both.

#ifndef TWIBV_ABI_H
#define TWIBV_ABI_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// Objects only handled through pointers.
struct ibv_device;
struct ibv_comp_channel;
struct ibv_srq;
struct ibv_ah;
struct ibv_mw;
struct ibv_mw_bind;
struct _compat_ibv_port_attr;

// ---- Enums and flags ---------------------------------------------------

enum ibv_mtu {
	IBV_MTU_256 = 1,
	IBV_MTU_512 = 2,
	IBV_MTU_1024 = 3,
	IBV_MTU_2048 = 4,
	IBV_MTU_4096 = 5,
};

enum ibv_port_state {
	IBV_PORT_NOP = 0,
	IBV_PORT_DOWN = 1,
	IBV_PORT_INIT = 2,
	IBV_PORT_ARMED = 3,
	IBV_PORT_ACTIVE = 4,
	IBV_PORT_ACTIVE_DEFER = 5,
};

enum {
	IBV_LINK_LAYER_UNSPECIFIED = 0,
	IBV_LINK_LAYER_INFINIBAND = 1,
	IBV_LINK_LAYER_ETHERNET = 2,
};

enum ibv_atomic_cap {
	IBV_ATOMIC_NONE = 0,
	IBV_ATOMIC_HCA = 1,
	IBV_ATOMIC_GLOB = 2,
};

enum ibv_access_flags {
	IBV_ACCESS_LOCAL_WRITE = 1 << 0,
	IBV_ACCESS_REMOTE_WRITE = 1 << 1,
	IBV_ACCESS_REMOTE_READ = 1 << 2,
	IBV_ACCESS_REMOTE_ATOMIC = 1 << 3,
	IBV_ACCESS_MW_BIND = 1 << 4,
	IBV_ACCESS_ZERO_BASED = 1 << 5,
	IBV_ACCESS_ON_DEMAND = 1 << 6,
	IBV_ACCESS_HUGETLB = 1 << 7,
	IBV_ACCESS_RELAXED_ORDERING = 1 << 20, // the first optional access flag
};

enum ibv_mw_type {
	IBV_MW_TYPE_1 = 1,
	IBV_MW_TYPE_2 = 2,
};

enum ibv_qp_type {
	IBV_QPT_RC = 2,
	IBV_QPT_UC = 3,
	IBV_QPT_UD = 4,
	IBV_QPT_RAW_PACKET = 8,
	IBV_QPT_XRC_SEND = 9,
	IBV_QPT_XRC_RECV = 10,
	IBV_QPT_DRIVER = 0xff,
};

enum ibv_qp_state {
	IBV_QPS_RESET = 0,
	IBV_QPS_INIT = 1,
	IBV_QPS_RTR = 2,
	IBV_QPS_RTS = 3,
	IBV_QPS_SQD = 4,
	IBV_QPS_SQE = 5,
	IBV_QPS_ERR = 6,
	IBV_QPS_UNKNOWN = 7,
};

enum ibv_mig_state {
	IBV_MIG_MIGRATED = 0,
	IBV_MIG_REARM = 1,
	IBV_MIG_ARMED = 2,
};

enum ibv_qp_attr_mask {
	IBV_QP_STATE = 1 << 0,
	IBV_QP_CUR_STATE = 1 << 1,
	IBV_QP_EN_SQD_ASYNC_NOTIFY = 1 << 2,
	IBV_QP_ACCESS_FLAGS = 1 << 3,
	IBV_QP_PKEY_INDEX = 1 << 4,
	IBV_QP_PORT = 1 << 5,
	IBV_QP_QKEY = 1 << 6,
	IBV_QP_AV = 1 << 7,
	IBV_QP_PATH_MTU = 1 << 8,
	IBV_QP_TIMEOUT = 1 << 9,
	IBV_QP_RETRY_CNT = 1 << 10,
	IBV_QP_RNR_RETRY = 1 << 11,
	IBV_QP_RQ_PSN = 1 << 12,
	IBV_QP_MAX_QP_RD_ATOMIC = 1 << 13,
	IBV_QP_ALT_PATH = 1 << 14,
	IBV_QP_MIN_RNR_TIMER = 1 << 15,
	IBV_QP_SQ_PSN = 1 << 16,
	IBV_QP_MAX_DEST_RD_ATOMIC = 1 << 17,
	IBV_QP_PATH_MIG_STATE = 1 << 18,
	IBV_QP_CAP = 1 << 19,
	IBV_QP_DEST_QPN = 1 << 20,
	IBV_QP_RATE_LIMIT = 1 << 25,
};

enum ibv_wr_opcode {
	IBV_WR_RDMA_WRITE = 0,
	IBV_WR_RDMA_WRITE_WITH_IMM = 1,
	IBV_WR_SEND = 2,
	IBV_WR_SEND_WITH_IMM = 3,
	IBV_WR_RDMA_READ = 4,
	IBV_WR_ATOMIC_CMP_AND_SWP = 5,
	IBV_WR_ATOMIC_FETCH_AND_ADD = 6,
	IBV_WR_LOCAL_INV = 7,
	IBV_WR_BIND_MW = 8,
	IBV_WR_SEND_WITH_INV = 9,
	IBV_WR_TSO = 10,
	IBV_WR_DRIVER1 = 11,
	IBV_WR_FLUSH = 14,
	IBV_WR_ATOMIC_WRITE = 15,
};

enum ibv_send_flags {
	IBV_SEND_FENCE = 1 << 0,
	IBV_SEND_SIGNALED = 1 << 1,
	IBV_SEND_SOLICITED = 1 << 2,
	IBV_SEND_INLINE = 1 << 3,
	IBV_SEND_IP_CSUM = 1 << 4,
};

enum ibv_wc_status {
	IBV_WC_SUCCESS = 0,
	IBV_WC_LOC_LEN_ERR = 1,
	IBV_WC_LOC_QP_OP_ERR = 2,
	IBV_WC_LOC_EEC_OP_ERR = 3,
	IBV_WC_LOC_PROT_ERR = 4,
	IBV_WC_WR_FLUSH_ERR = 5,
	IBV_WC_MW_BIND_ERR = 6,
	IBV_WC_BAD_RESP_ERR = 7,
	IBV_WC_LOC_ACCESS_ERR = 8,
	IBV_WC_REM_INV_REQ_ERR = 9,
	IBV_WC_REM_ACCESS_ERR = 10,
	IBV_WC_REM_OP_ERR = 11,
	IBV_WC_RETRY_EXC_ERR = 12,
	IBV_WC_RNR_RETRY_EXC_ERR = 13,
	IBV_WC_LOC_RDD_VIOL_ERR = 14,
	IBV_WC_REM_INV_RD_REQ_ERR = 15,
	IBV_WC_REM_ABORT_ERR = 16,
	IBV_WC_INV_EECN_ERR = 17,
	IBV_WC_INV_EEC_STATE_ERR = 18,
	IBV_WC_FATAL_ERR = 19,
	IBV_WC_RESP_TIMEOUT_ERR = 20,
	IBV_WC_GENERAL_ERR = 21,
	IBV_WC_TM_ERR = 22,
	IBV_WC_TM_RNDV_INCOMPLETE = 23,
};

enum ibv_wc_opcode {
	IBV_WC_SEND = 0,
	IBV_WC_RDMA_WRITE = 1,
	IBV_WC_RDMA_READ = 2,
	IBV_WC_COMP_SWAP = 3,
	IBV_WC_FETCH_ADD = 4,
	IBV_WC_BIND_MW = 5,
	IBV_WC_LOCAL_INV = 6,
	IBV_WC_TSO = 7,
	IBV_WC_FLUSH = 8,
	IBV_WC_ATOMIC_WRITE = 9,
	// Receive completions have this bit set.
	IBV_WC_RECV = 1 << 7,
	IBV_WC_RECV_RDMA_WITH_IMM = IBV_WC_RECV + 1,
};

enum ibv_wc_flags {
	IBV_WC_GRH = 1 << 0,
	IBV_WC_WITH_IMM = 1 << 1,
	IBV_WC_IP_CSUM_OK = 1 << 2,
	IBV_WC_WITH_INV = 1 << 3,
};

// ---- Device and port attributes -----------------------------------------

union ibv_gid {
	uint8_t raw[16];
	struct {
		uint64_t subnet_prefix; // __be64
		uint64_t interface_id;  // __be64
	} global;
};

struct ibv_device_attr {
	char fw_ver[64];
	uint64_t node_guid;      // __be64
	uint64_t sys_image_guid; // __be64
	uint64_t max_mr_size;
	uint64_t page_size_cap;
	uint32_t vendor_id;
	uint32_t vendor_part_id;
	uint32_t hw_ver;
	int max_qp;
	int max_qp_wr;
	unsigned int device_cap_flags;
	int max_sge;
	int max_sge_rd;
	int max_cq;
	int max_cqe;
	int max_mr;
	int max_pd;
	int max_qp_rd_atom;
	int max_ee_rd_atom;
	int max_res_rd_atom;
	int max_qp_init_rd_atom;
	int max_ee_init_rd_atom;
	enum ibv_atomic_cap atomic_cap;
	int max_ee;
	int max_rdd;
	int max_mw;
	int max_raw_ipv6_qp;
	int max_raw_ethy_qp;
	int max_mcast_grp;
	int max_mcast_qp_attach;
	int max_total_mcast_qp_attach;
	int max_ah;
	int max_fmr;
	int max_map_per_fmr;
	int max_srq;
	int max_srq_wr;
	int max_srq_sge;
	uint16_t max_pkeys;
	uint8_t local_ca_ack_delay;
	uint8_t phys_port_cnt;
};

// The full attribute struct of the extended query_port; the IBVERBS_1.1
// ibv_query_port fills only its prefix up to flags (its own, older struct).
struct ibv_port_attr {
	enum ibv_port_state state;
	enum ibv_mtu max_mtu;
	enum ibv_mtu active_mtu;
	int gid_tbl_len;
	uint32_t port_cap_flags;
	uint32_t max_msg_sz;
	uint32_t bad_pkey_cntr;
	uint32_t qkey_viol_cntr;
	uint16_t pkey_tbl_len;
	uint16_t lid;
	uint16_t sm_lid;
	uint8_t lmc;
	uint8_t max_vl_num;
	uint8_t sm_sl;
	uint8_t subnet_timeout;
	uint8_t init_type_reply;
	uint8_t active_width;
	uint8_t active_speed;
	uint8_t phys_state;
	uint8_t link_layer;
	uint8_t flags;
	uint16_t port_cap_flags2;
	uint32_t active_speed_ex;
};

// ---- Resources ------------------------------------------------------------

struct ibv_context;

struct ibv_pd {
	struct ibv_context* context;
	uint32_t handle;
};

struct ibv_mr {
	struct ibv_context* context;
	struct ibv_pd* pd;
	void* addr;
	size_t length;
	uint32_t handle;
	uint32_t lkey;
	uint32_t rkey;
};

struct ibv_cq {
	struct ibv_context* context;
	struct ibv_comp_channel* channel;
	void* cq_context;
	uint32_t handle;
	int cqe;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t comp_events_completed;
	uint32_t async_events_completed;
};

struct ibv_qp {
	struct ibv_context* context;
	void* qp_context;
	struct ibv_pd* pd;
	struct ibv_cq* send_cq;
	struct ibv_cq* recv_cq;
	struct ibv_srq* srq;
	uint32_t handle;
	uint32_t qp_num;
	enum ibv_qp_state state;
	enum ibv_qp_type qp_type;
	pthread_mutex_t mutex;
	pthread_cond_t cond;
	uint32_t events_completed;
};

struct ibv_qp_cap {
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	uint32_t max_send_sge;
	uint32_t max_recv_sge;
	uint32_t max_inline_data;
};

struct ibv_qp_init_attr {
	void* qp_context;
	struct ibv_cq* send_cq;
	struct ibv_cq* recv_cq;
	struct ibv_srq* srq;
	struct ibv_qp_cap cap;
	enum ibv_qp_type qp_type;
	int sq_sig_all;
};

struct ibv_global_route {
	union ibv_gid dgid;
	uint32_t flow_label;
	uint8_t sgid_index;
	uint8_t hop_limit;
	uint8_t traffic_class;
};

struct ibv_ah_attr {
	struct ibv_global_route grh;
	uint16_t dlid;
	uint8_t sl;
	uint8_t src_path_bits;
	uint8_t static_rate;
	uint8_t is_global;
	uint8_t port_num;
};

struct ibv_qp_attr {
	enum ibv_qp_state qp_state;
	enum ibv_qp_state cur_qp_state;
	enum ibv_mtu path_mtu;
	enum ibv_mig_state path_mig_state;
	uint32_t qkey;
	uint32_t rq_psn;
	uint32_t sq_psn;
	uint32_t dest_qp_num;
	unsigned int qp_access_flags;
	struct ibv_qp_cap cap;
	struct ibv_ah_attr ah_attr;
	struct ibv_ah_attr alt_ah_attr;
	uint16_t pkey_index;
	uint16_t alt_pkey_index;
	uint8_t en_sqd_async_notify;
	uint8_t sq_draining;
	uint8_t max_rd_atomic;
	uint8_t max_dest_rd_atomic;
	uint8_t min_rnr_timer;
	uint8_t port_num;
	uint8_t timeout;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t alt_port_num;
	uint8_t alt_timeout;
	uint32_t rate_limit;
};

// ---- Work requests and completions ---------------------------------------

struct ibv_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

struct ibv_mw_bind_info {
	struct ibv_mr* mr;
	uint64_t addr;
	uint64_t length;
	unsigned int mw_access_flags;
};

struct ibv_send_wr {
	uint64_t wr_id;
	struct ibv_send_wr* next;
	struct ibv_sge* sg_list;
	int num_sge;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	union {
		uint32_t imm_data; // __be32, for the *_WITH_IMM opcodes
		uint32_t invalidate_rkey;
	};
	union {
		struct {
			uint64_t remote_addr;
			uint32_t rkey;
		} rdma;
		struct {
			uint64_t remote_addr;
			uint64_t compare_add;
			uint64_t swap;
			uint32_t rkey;
		} atomic;
		struct {
			struct ibv_ah* ah;
			uint32_t remote_qpn;
			uint32_t remote_qkey;
		} ud;
	} wr;
	union {
		struct {
			uint32_t remote_srqn;
		} xrc;
	} qp_type;
	union {
		struct {
			struct ibv_mw* mw;
			uint32_t rkey;
			struct ibv_mw_bind_info bind_info;
		} bind_mw;
		struct {
			void* hdr;
			uint16_t hdr_sz;
			uint16_t mss;
		} tso;
	};
};

struct ibv_recv_wr {
	uint64_t wr_id;
	struct ibv_recv_wr* next;
	struct ibv_sge* sg_list;
	int num_sge;
};

struct ibv_wc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t vendor_err;
	uint32_t byte_len;
	union {
		uint32_t imm_data; // __be32, when wc_flags has IBV_WC_WITH_IMM
		uint32_t invalidated_rkey;
	};
	uint32_t qp_num;
	uint32_t src_qp;
	unsigned int wc_flags;
	uint16_t pkey_index;
	uint16_t slid;
	uint8_t sl;
	uint8_t dlid_path_bits;
};

// ---- Context --------------------------------------------------------------

// The operations table of a context. The data-path verbs (post_send,
// post_recv, poll_cq) are inline functions in verbs.h that call through
// it; the _compat_ slots are the old entry points, unused by the library
// since the IBVERBS_1.1 functions took over, kept for the layout.
struct ibv_context_ops {
	int (*_compat_query_device)(struct ibv_context* context, struct ibv_device_attr* device_attr);
	int (*_compat_query_port)(struct ibv_context* context, uint8_t port_num, struct _compat_ibv_port_attr* port_attr);
	void* (*_compat_alloc_pd)(void);
	void* (*_compat_dealloc_pd)(void);
	void* (*_compat_reg_mr)(void);
	void* (*_compat_rereg_mr)(void);
	void* (*_compat_dereg_mr)(void);
	struct ibv_mw* (*alloc_mw)(struct ibv_pd* pd, enum ibv_mw_type type);
	int (*bind_mw)(struct ibv_qp* qp, struct ibv_mw* mw, struct ibv_mw_bind* mw_bind);
	int (*dealloc_mw)(struct ibv_mw* mw);
	void* (*_compat_create_cq)(void);
	int (*poll_cq)(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc);
	int (*req_notify_cq)(struct ibv_cq* cq, int solicited_only);
	void* (*_compat_cq_event)(void);
	void* (*_compat_resize_cq)(void);
	void* (*_compat_destroy_cq)(void);
	void* (*_compat_create_srq)(void);
	void* (*_compat_modify_srq)(void);
	void* (*_compat_query_srq)(void);
	void* (*_compat_destroy_srq)(void);
	int (*post_srq_recv)(struct ibv_srq* srq, struct ibv_recv_wr* recv_wr, struct ibv_recv_wr** bad_recv_wr);
	void* (*_compat_create_qp)(void);
	void* (*_compat_query_qp)(void);
	void* (*_compat_modify_qp)(void);
	void* (*_compat_destroy_qp)(void);
	int (*post_send)(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr);
	int (*post_recv)(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr);
	void* (*_compat_create_ah)(void);
	void* (*_compat_destroy_ah)(void);
	void* (*_compat_attach_mcast)(void);
	void* (*_compat_detach_mcast)(void);
	void* (*_compat_async_event)(void);
};

struct ibv_context {
	struct ibv_device* device;
	struct ibv_context_ops ops;
	int cmd_fd;
	int async_fd;
	int num_comp_vectors;
	pthread_mutex_t mutex;
	void* abi_compat;
};

// A context's abi_compat holds this when the context is the last member
// of a struct verbs_context (as every rdma-core provider's is).
#define TWIBV_ABI_IS_EXTENDED ((void*)UINTPTR_MAX)

// The extended context that wraps struct ibv_context. It grows at the
// top: new entry points are added before the first field, and sz says
// how many bytes before context the provider's version has. So the
// distance of a field from the end never changes, and this struct starts
// at query_port, the only entry point used, leaving out those added above
// it since (they would only move query_port further from the start, not
// from the end). The slots in between are declared with their verbs.h
// names but an opaque type: they are never called through here.
struct verbs_context {
	int (*query_port)(struct ibv_context* context, uint8_t port_num, struct ibv_port_attr* port_attr, size_t port_attr_len);
	void (*advise_mr)(void);
	void (*alloc_null_mr)(void);
	void (*read_counters)(void);
	void (*attach_counters_point_flow)(void);
	void (*create_counters)(void);
	void (*destroy_counters)(void);
	void (*reg_dm_mr)(void);
	void (*alloc_dm)(void);
	void (*free_dm)(void);
	void (*modify_flow_action_esp)(void);
	void (*destroy_flow_action)(void);
	void (*create_flow_action_esp)(void);
	void (*modify_qp_rate_limit)(void);
	void (*alloc_parent_domain)(void);
	void (*dealloc_td)(void);
	void (*alloc_td)(void);
	void (*modify_cq)(void);
	void (*post_srq_ops)(void);
	void (*destroy_rwq_ind_table)(void);
	void (*create_rwq_ind_table)(void);
	void (*destroy_wq)(void);
	void (*modify_wq)(void);
	void (*create_wq)(void);
	void (*query_rt_values)(void);
	void (*create_cq_ex)(void);
	void* priv;
	void (*query_device_ex)(void);
	void (*ibv_destroy_flow)(void);
	void (*ABI_placeholder2)(void);
	void (*ibv_create_flow)(void);
	void (*ABI_placeholder1)(void);
	void (*open_qp)(void);
	void (*create_qp_ex)(void);
	void (*get_srq_num)(void);
	void (*create_srq_ex)(void);
	void (*open_xrcd)(void);
	void (*close_xrcd)(void);
	uint64_t _ABI_placeholder3;
	size_t sz; // immediately before context
	struct ibv_context context; // last
};

// verbs_get_ctx is the extended context around ctx, NULL when ctx is not
// part of one.
static inline struct verbs_context* verbs_get_ctx(struct ibv_context* ctx) {
	if (ctx->abi_compat != TWIBV_ABI_IS_EXTENDED) {
		return NULL;
	}
	return (struct verbs_context*)((uintptr_t)ctx - offsetof(struct verbs_context, context));
}

// verbs_get_ctx_op is the extended context of ctx when its provider's
// version has the entry point op (its sz reaches back to op) and sets
// it, else NULL. The test is verbs.h's: sz counts the bytes before
// context, and sizeof - offsetof(op) is op's distance from the end.
#define verbs_get_ctx_op(ctx, op)                                                                      \
	({                                                                                             \
		struct verbs_context* __vctx = verbs_get_ctx(ctx);                                     \
		(!__vctx || (__vctx->sz < sizeof(*__vctx) - offsetof(struct verbs_context, op)) || \
		 !__vctx->op)                                                                          \
			? NULL                                                                         \
			: __vctx;                                                                      \
	})

// ---- Data path (verbs.h's inline verbs) ----------------------------------

static inline int ibv_post_send(struct ibv_qp* qp, struct ibv_send_wr* wr, struct ibv_send_wr** bad_wr) {
	return qp->context->ops.post_send(qp, wr, bad_wr);
}

static inline int ibv_post_recv(struct ibv_qp* qp, struct ibv_recv_wr* wr, struct ibv_recv_wr** bad_wr) {
	return qp->context->ops.post_recv(qp, wr, bad_wr);
}

static inline int ibv_poll_cq(struct ibv_cq* cq, int num_entries, struct ibv_wc* wc) {
	return cq->context->ops.poll_cq(cq, num_entries, wc);
}

#ifdef __cplusplus
}
#endif

#endif
