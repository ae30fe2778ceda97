//go:build cgo

// libibverbs trampolines. See twibv.h.

#define _GNU_SOURCE
#include "twibv.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

// The entry points, at the IBVERBS_1.1 ABI (the 1.0 symbols of the same
// names are the old compatibility versions).
static struct {
	struct ibv_device** (*getDeviceList)(int*);
	void (*freeDeviceList)(struct ibv_device**);
	const char* (*getDeviceName)(struct ibv_device*);
	struct ibv_context* (*openDevice)(struct ibv_device*);
	int (*closeDevice)(struct ibv_context*);
	int (*queryDevice)(struct ibv_context*, struct ibv_device_attr*);
	// The exported ibv_query_port takes the old, shorter attribute struct
	// and lets the provider fill the full one: it is given the full one.
	int (*queryPort)(struct ibv_context*, uint8_t, struct ibv_port_attr*);
	int (*queryGID)(struct ibv_context*, uint8_t, int, union ibv_gid*);
	struct ibv_pd* (*allocPD)(struct ibv_context*);
	int (*deallocPD)(struct ibv_pd*);
	struct ibv_mr* (*regMR)(struct ibv_pd*, void*, size_t, int);
	int (*deregMR)(struct ibv_mr*);
	struct ibv_cq* (*createCQ)(struct ibv_context*, int, void*, struct ibv_comp_channel*, int);
	int (*destroyCQ)(struct ibv_cq*);
	struct ibv_qp* (*createQP)(struct ibv_pd*, struct ibv_qp_init_attr*);
	int (*destroyQP)(struct ibv_qp*);
	int (*modifyQP)(struct ibv_qp*, struct ibv_qp_attr*, int);
	int (*queryQP)(struct ibv_qp*, struct ibv_qp_attr*, int, struct ibv_qp_init_attr*);
	// Optional (NULL where this libibverbs predates them): dma-buf
	// registration (IBVERBS_1.12) and ECE (IBVERBS_1.10).
	struct ibv_mr* (*regDmabufMR)(struct ibv_pd*, uint64_t, size_t, uint64_t, int, int);
	int (*queryECE)(struct ibv_qp*, struct twibv_ece*);
	int (*setECE)(struct ibv_qp*, struct twibv_ece*);
} tw;

static void* handle;

static void* sym(const char* name) {
	void* p = dlvsym(handle, name, "IBVERBS_1.1");
	return p ? p : dlsym(handle, name);
}

int twibvOpen(const char* path, char* err, int errlen) {
	if (handle == NULL) {
		handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
		if (handle == NULL) {
			snprintf(err, errlen, "%s", dlerror());
			return 1;
		}
	}
#define LOAD(field, name)                                        \
	if ((*(void**)&tw.field = sym(name)) == NULL) {              \
		snprintf(err, errlen, "%s has no %s", path, name);       \
		return 2;                                                \
	}
	LOAD(getDeviceList, "ibv_get_device_list");
	LOAD(freeDeviceList, "ibv_free_device_list");
	LOAD(getDeviceName, "ibv_get_device_name");
	LOAD(openDevice, "ibv_open_device");
	LOAD(closeDevice, "ibv_close_device");
	LOAD(queryDevice, "ibv_query_device");
	LOAD(queryPort, "ibv_query_port");
	LOAD(queryGID, "ibv_query_gid");
	LOAD(allocPD, "ibv_alloc_pd");
	LOAD(deallocPD, "ibv_dealloc_pd");
	LOAD(regMR, "ibv_reg_mr");
	LOAD(deregMR, "ibv_dereg_mr");
	LOAD(createCQ, "ibv_create_cq");
	LOAD(destroyCQ, "ibv_destroy_cq");
	LOAD(createQP, "ibv_create_qp");
	LOAD(destroyQP, "ibv_destroy_qp");
	LOAD(modifyQP, "ibv_modify_qp");
	LOAD(queryQP, "ibv_query_qp");
#undef LOAD
	*(void**)&tw.regDmabufMR = dlsym(handle, "ibv_reg_dmabuf_mr");
	*(void**)&tw.queryECE = dlsym(handle, "ibv_query_ece");
	*(void**)&tw.setECE = dlsym(handle, "ibv_set_ece");
	return 0;
}

struct ibv_device** twibvGetDeviceList(int* n) { return tw.getDeviceList(n); }
void twibvFreeDeviceList(struct ibv_device** l) { tw.freeDeviceList(l); }
const char* twibvDeviceName(struct ibv_device** l, int i) { return tw.getDeviceName(l[i]); }
struct ibv_context* twibvOpenDevice(struct ibv_device** l, int i) { return tw.openDevice(l[i]); }
int twibvCloseDevice(struct ibv_context* c) { return tw.closeDevice(c); }
int twibvQueryDevice(struct ibv_context* c, struct ibv_device_attr* a) { return tw.queryDevice(c, a); }

int twibvQueryPort(struct ibv_context* c, int port, struct ibv_port_attr* a) {
	memset(a, 0, sizeof(*a));
	// What verbs.h's inline ibv_query_port does: the extended context's
	// entry point when the provider has one.
	struct verbs_context* v = verbs_get_ctx_op(c, query_port);
	if (v != NULL) {
		return v->query_port(c, (uint8_t)port, a, sizeof(*a));
	}
	return tw.queryPort(c, (uint8_t)port, a);
}

int twibvQueryGID(struct ibv_context* c, int port, int index, uint8_t gid[16]) {
	union ibv_gid g;
	int rc = tw.queryGID(c, (uint8_t)port, index, &g);
	if (rc == 0) {
		memcpy(gid, g.raw, 16);
	}
	return rc;
}

struct ibv_pd* twibvAllocPD(struct ibv_context* c) { return tw.allocPD(c); }
int twibvDeallocPD(struct ibv_pd* p) { return tw.deallocPD(p); }
struct ibv_mr* twibvRegMR(struct ibv_pd* p, void* addr, size_t len, int access) { return tw.regMR(p, addr, len, access); }
int twibvDeregMR(struct ibv_mr* m) { return tw.deregMR(m); }

int twibvHasDmabuf(void) { return tw.regDmabufMR != NULL; }
struct ibv_mr* twibvRegDmabufMR(struct ibv_pd* p, uint64_t offset, size_t len, uint64_t iova, int fd, int access) {
	if (tw.regDmabufMR == NULL) return NULL;
	return tw.regDmabufMR(p, offset, len, iova, fd, access);
}
struct ibv_mr* twibvRegAddrMR(struct ibv_pd* p, uint64_t addr, size_t len, int access) { return tw.regMR(p, (void*)(uintptr_t)addr, len, access); }
int twibvQueryECE(struct ibv_qp* q, struct twibv_ece* e) { return tw.queryECE ? tw.queryECE(q, e) : -1; }
int twibvSetECE(struct ibv_qp* q, struct twibv_ece* e) { return tw.setECE ? tw.setECE(q, e) : -1; }
struct ibv_cq* twibvCreateCQ(struct ibv_context* c, int depth) { return tw.createCQ(c, depth, NULL, NULL, 0); }
int twibvDestroyCQ(struct ibv_cq* q) { return tw.destroyCQ(q); }
struct ibv_qp* twibvCreateQP(struct ibv_pd* p, struct ibv_qp_init_attr* a) { return tw.createQP(p, a); }
int twibvDestroyQP(struct ibv_qp* q) { return tw.destroyQP(q); }
int twibvModifyQP(struct ibv_qp* q, struct ibv_qp_attr* a, int mask) { return tw.modifyQP(q, a, mask); }

int twibvQueryQPState(struct ibv_qp* q, int* state) {
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr i;
	int rc = tw.queryQP(q, &a, IBV_QP_STATE, &i);
	if (rc == 0) {
		*state = a.qp_state;
	}
	return rc;
}

int twibvPostSend(struct ibv_qp* qp, struct ibv_send_wr* wr) {
	struct ibv_send_wr* bad;
	return ibv_post_send(qp, wr, &bad);
}

int twibvPostRecv(struct ibv_qp* qp, struct ibv_recv_wr* wr) {
	struct ibv_recv_wr* bad;
	return ibv_post_recv(qp, wr, &bad);
}

int twibvPollCQ(struct ibv_cq* cq, int n, struct ibv_wc* wc) { return ibv_poll_cq(cq, n, wc); }

void twibvSetFetchAdd(struct ibv_send_wr* wr, uint64_t raddr, uint32_t rkey, uint64_t add) {
	wr->wr.atomic.remote_addr = raddr;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.compare_add = add;
}

void twibvSetRDMA(struct ibv_send_wr* wr, uint64_t raddr, uint32_t rkey) {
	wr->wr.rdma.remote_addr = raddr;
	wr->wr.rdma.rkey = rkey;
}

void twibvSetImm(struct ibv_send_wr* wr, uint32_t imm) { wr->imm_data = htonl(imm); }
uint32_t twibvImm(struct ibv_wc* wc) { return ntohl(wc->imm_data); }
void twibvSetDGID(struct ibv_qp_attr* a, const uint8_t gid[16]) { memcpy(a->ah_attr.grh.dgid.raw, gid, 16); }
