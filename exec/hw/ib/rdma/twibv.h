// libibverbs loaded at run time (dlopen), as NCCL's ibvsymbols.cc does in
// its runtime-loading mode: the binary does not depend on libibverbs and
// runs where it is absent. The data-path calls (post send/receive, poll)
// are verbs.h's inline functions, which dispatch through the context's
// ops table and need no symbol. The types come from twibv_abi.h, this
// package's own declaration of the libibverbs ABI, so that building needs
// no libibverbs headers either.

#ifndef TWIBV_H
#define TWIBV_H

#include <stddef.h>
#include <stdint.h>
#include "twibv_abi.h"

// twibvOpen loads the library at path and resolves the entry points: 0 on
// success, 1 when dlopen fails, 2 when an entry point is missing; err
// then holds the reason. It may be called again after a failure.
int twibvOpen(const char* path, char* err, int errlen);

struct ibv_device** twibvGetDeviceList(int* n);
void twibvFreeDeviceList(struct ibv_device** l);
const char* twibvDeviceName(struct ibv_device** l, int i);
struct ibv_context* twibvOpenDevice(struct ibv_device** l, int i);
int twibvCloseDevice(struct ibv_context* c);
int twibvQueryDevice(struct ibv_context* c, struct ibv_device_attr* a);
int twibvQueryPort(struct ibv_context* c, int port, struct ibv_port_attr* a);
int twibvQueryGID(struct ibv_context* c, int port, int index, uint8_t gid[16]);
struct ibv_pd* twibvAllocPD(struct ibv_context* c);
int twibvDeallocPD(struct ibv_pd* p);
struct ibv_mr* twibvRegMR(struct ibv_pd* p, void* addr, size_t len, int access);
int twibvDeregMR(struct ibv_mr* m);
struct ibv_cq* twibvCreateCQ(struct ibv_context* c, int depth);
int twibvDestroyCQ(struct ibv_cq* q);
struct ibv_qp* twibvCreateQP(struct ibv_pd* p, struct ibv_qp_init_attr* a);
int twibvDestroyQP(struct ibv_qp* q);
int twibvModifyQP(struct ibv_qp* q, struct ibv_qp_attr* a, int mask);
int twibvQueryQPState(struct ibv_qp* q, int* state);

// struct ibv_ece.
struct twibv_ece {
	uint32_t vendor_id;
	uint32_t options;
	uint32_t comp_mask;
};

// GPUDirect registrations: dma-buf (NULL without ibv_reg_dmabuf_mr;
// twibvHasDmabuf tells), and ibv_reg_mr on a device address, which
// nvidia-peermem resolves. ECE: -1 without the entry point.
int twibvHasDmabuf(void);
struct ibv_mr* twibvRegDmabufMR(struct ibv_pd* p, uint64_t offset, size_t len, uint64_t iova, int fd, int access);
struct ibv_mr* twibvRegAddrMR(struct ibv_pd* p, uint64_t addr, size_t len, int access);
int twibvQueryECE(struct ibv_qp* q, struct twibv_ece* e);
int twibvSetECE(struct ibv_qp* q, struct twibv_ece* e);

// Data path (inline verbs).
int twibvPostSend(struct ibv_qp* qp, struct ibv_send_wr* wr);
int twibvPostRecv(struct ibv_qp* qp, struct ibv_recv_wr* wr);
int twibvPollCQ(struct ibv_cq* cq, int n, struct ibv_wc* wc);

// Union members Go cannot name.
void twibvSetFetchAdd(struct ibv_send_wr* wr, uint64_t raddr, uint32_t rkey, uint64_t add);
void twibvSetRDMA(struct ibv_send_wr* wr, uint64_t raddr, uint32_t rkey);
void twibvSetImm(struct ibv_send_wr* wr, uint32_t imm);
uint32_t twibvImm(struct ibv_wc* wc);
void twibvSetDGID(struct ibv_qp_attr* a, const uint8_t gid[16]);

#endif
