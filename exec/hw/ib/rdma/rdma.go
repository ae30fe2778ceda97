//go:build cgo

package rdma

/*
#cgo LDFLAGS: -libverbs
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>

static int tw_query_port(struct ibv_context *c, int port, struct ibv_port_attr *a) { return ibv_query_port(c, port, a); }
static int tw_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr) { struct ibv_send_wr *bad; return ibv_post_send(qp, wr, &bad); }
static int tw_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr) { struct ibv_recv_wr *bad; return ibv_post_recv(qp, wr, &bad); }
static int tw_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc) { return ibv_poll_cq(cq, n, wc); }
static struct ibv_device *tw_dev(struct ibv_device **l, int i) { return l[i]; }
static void tw_set_fetch_add(struct ibv_send_wr *wr, uint64_t raddr, uint32_t rkey, uint64_t add) {
	wr->wr.atomic.remote_addr = raddr; wr->wr.atomic.rkey = rkey; wr->wr.atomic.compare_add = add;
}
static void tw_set_rdma(struct ibv_send_wr *wr, uint64_t raddr, uint32_t rkey) { wr->wr.rdma.remote_addr = raddr; wr->wr.rdma.rkey = rkey; }
static void tw_set_imm(struct ibv_send_wr *wr, uint32_t imm) { wr->imm_data = htonl(imm); }
static uint32_t tw_imm(struct ibv_wc *wc) { return ntohl(wc->imm_data); }
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// Provider is libibverbs.
type Provider struct{}

// New returns the provider.
func New() (verbs.Provider, error) { return Provider{}, nil }

// Name is "rdma".
func (Provider) Name() string { return "rdma" }

// Devices lists ibv_get_device_list's devices.
func (Provider) Devices() ([]string, error) {
	var n C.int
	l := C.ibv_get_device_list(&n)
	if l == nil {
		return nil, nil // no RDMA subsystem: no device
	}
	defer C.ibv_free_device_list(l)
	var out []string
	for i := 0; i < int(n); i++ {
		out = append(out, C.GoString(C.ibv_get_device_name(C.tw_dev(l, C.int(i)))))
	}
	return out, nil
}

// Open opens the named device.
func (Provider) Open(name string) (verbs.Context, error) {
	var n C.int
	l := C.ibv_get_device_list(&n)
	if l == nil {
		return nil, fmt.Errorf("rdma: %s: %w", name, verbs.ErrNoDevice)
	}
	defer C.ibv_free_device_list(l)
	for i := 0; i < int(n); i++ {
		d := C.tw_dev(l, C.int(i))
		if C.GoString(C.ibv_get_device_name(d)) == name {
			c := C.ibv_open_device(d)
			if c == nil {
				return nil, fmt.Errorf("rdma: open %s failed", name)
			}
			return &Context{c: c, name: name}, nil
		}
	}
	return nil, fmt.Errorf("rdma: no device %q", name)
}

// Context is an open device.
type Context struct {
	c    *C.struct_ibv_context
	name string
}

// Name is the device name.
func (c *Context) Name() string { return c.name }

// Ports reads the port count.
func (c *Context) Ports() int {
	var a C.struct_ibv_device_attr
	if C.ibv_query_device(c.c, &a) != 0 {
		return 0
	}
	return int(a.phys_port_cnt)
}

var mtuBytes = map[C.enum_ibv_mtu]int{C.IBV_MTU_256: 256, C.IBV_MTU_512: 512, C.IBV_MTU_1024: 1024, C.IBV_MTU_2048: 2048, C.IBV_MTU_4096: 4096}

// QueryPort reads a port and its GID at index 0.
func (c *Context) QueryPort(port int) (verbs.PortAttr, error) {
	var a C.struct_ibv_port_attr
	if rc := C.tw_query_port(c.c, C.int(port), &a); rc != 0 {
		return verbs.PortAttr{}, fmt.Errorf("rdma: %s port %d: ibv_query_port: errno %d", c.name, port, int(rc))
	}
	pa := verbs.PortAttr{Active: a.state == C.IBV_PORT_ACTIVE, LID: uint16(a.lid), MTU: mtuBytes[a.active_mtu], LinkLayer: verbs.LinkIB}
	if a.link_layer == C.IBV_LINK_LAYER_ETHERNET {
		pa.LinkLayer = verbs.LinkEthernet
	}
	var g C.union_ibv_gid
	if C.ibv_query_gid(c.c, C.uint8_t(port), 0, &g) == 0 {
		C.memcpy(unsafe.Pointer(&pa.GID[0]), unsafe.Pointer(&g), 16)
	}
	return pa, nil
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (verbs.PD, error) {
	p := C.ibv_alloc_pd(c.c)
	if p == nil {
		return nil, fmt.Errorf("rdma: %s: ibv_alloc_pd failed", c.name)
	}
	return &PD{p: p}, nil
}

// CreateCQ creates a completion queue.
func (c *Context) CreateCQ(depth int) (verbs.CQ, error) {
	q := C.ibv_create_cq(c.c, C.int(depth), nil, nil, 0)
	if q == nil {
		return nil, fmt.Errorf("rdma: %s: ibv_create_cq(%d) failed", c.name, depth)
	}
	return &CQ{q: q}, nil
}

// Close closes the device.
func (c *Context) Close() error { C.ibv_close_device(c.c); return nil }

// PD is a protection domain.
type PD struct{ p *C.struct_ibv_pd }

// RegMR registers buf.
func (p *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("rdma: register an empty buffer")
	}
	m := C.ibv_reg_mr(p.p, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
	if m == nil {
		return nil, fmt.Errorf("rdma: ibv_reg_mr of %d bytes failed", len(buf))
	}
	return &MR{m: m, n: len(buf)}, nil
}

// CreateQP creates an RC queue pair.
func (p *PD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	s, ok1 := init.SendCQ.(*CQ)
	r, ok2 := init.RecvCQ.(*CQ)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("rdma: queue pair needs rdma completion queues")
	}
	var a C.struct_ibv_qp_init_attr
	a.send_cq, a.recv_cq, a.qp_type = s.q, r.q, C.IBV_QPT_RC
	a.cap.max_send_wr, a.cap.max_recv_wr, a.cap.max_send_sge, a.cap.max_recv_sge = C.uint32_t(init.MaxSend), C.uint32_t(init.MaxRecv), 1, 1
	q := C.ibv_create_qp(p.p, &a)
	if q == nil {
		return nil, fmt.Errorf("rdma: ibv_create_qp failed")
	}
	return &QP{q: q}, nil
}

// Close deallocates the PD.
func (p *PD) Close() error { C.ibv_dealloc_pd(p.p); return nil }

// MR is a memory region.
type MR struct {
	m *C.struct_ibv_mr
	n int
}

func (m *MR) Addr() uint64 { return uint64(uintptr(m.m.addr)) }
func (m *MR) Len() int     { return m.n }
func (m *MR) LKey() uint32 { return uint32(m.m.lkey) }
func (m *MR) RKey() uint32 { return uint32(m.m.rkey) }
func (m *MR) Close() error { C.ibv_dereg_mr(m.m); return nil }

// CQ is a completion queue.
type CQ struct {
	q  *C.struct_ibv_cq
	mu sync.Mutex
}

// Poll polls up to len(wc) completions.
func (q *CQ) Poll(wc []verbs.WC) (int, error) {
	if len(wc) == 0 {
		return 0, nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(wc), 64)
	buf := (*[64]C.struct_ibv_wc)(C.calloc(64, C.size_t(unsafe.Sizeof(C.struct_ibv_wc{}))))
	defer C.free(unsafe.Pointer(buf))
	got := int(C.tw_poll_cq(q.q, C.int(n), &buf[0]))
	if got < 0 {
		return 0, fmt.Errorf("rdma: ibv_poll_cq failed")
	}
	for i := 0; i < got; i++ {
		w := &buf[i]
		wc[i] = verbs.WC{ID: uint64(w.wr_id), Status: verbs.WCStatus(w.status), Op: verbs.WCOpcode(w.opcode), Len: uint32(w.byte_len), QPN: uint32(w.qp_num)}
		if w.wc_flags&C.IBV_WC_WITH_IMM != 0 {
			wc[i].HasImm, wc[i].Imm = true, uint32(C.tw_imm(w))
		}
	}
	return got, nil
}

// Close destroys the queue.
func (q *CQ) Close() error { C.ibv_destroy_cq(q.q); return nil }

// QP is an RC queue pair.
type QP struct{ q *C.struct_ibv_qp }

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return uint32(q.q.qp_num) }

// State queries the state.
func (q *QP) State() verbs.QPState {
	var a C.struct_ibv_qp_attr
	var i C.struct_ibv_qp_init_attr
	if C.ibv_query_qp(q.q, &a, C.IBV_QP_STATE, &i) != 0 {
		return verbs.QPSErr
	}
	return verbs.QPState(a.qp_state)
}

var mtuEnum = map[int]C.enum_ibv_mtu{256: C.IBV_MTU_256, 512: C.IBV_MTU_512, 1024: C.IBV_MTU_1024, 2048: C.IBV_MTU_2048, 4096: C.IBV_MTU_4096}

// Modify moves the queue pair with the attributes of its target state.
func (q *QP) Modify(v verbs.QPAttr) error {
	var a C.struct_ibv_qp_attr
	a.qp_state = C.enum_ibv_qp_state(v.State)
	mask := C.int(C.IBV_QP_STATE)
	switch v.State {
	case verbs.QPSInit:
		a.pkey_index, a.port_num, a.qp_access_flags = 0, C.uint8_t(v.Port), C.uint(v.Access)
		mask |= C.IBV_QP_PKEY_INDEX | C.IBV_QP_PORT | C.IBV_QP_ACCESS_FLAGS
	case verbs.QPSRTR:
		mtu, ok := mtuEnum[v.PathMTU]
		if !ok {
			return fmt.Errorf("rdma: path MTU %d", v.PathMTU)
		}
		a.path_mtu, a.dest_qp_num, a.rq_psn, a.max_dest_rd_atomic, a.min_rnr_timer = mtu, C.uint32_t(v.DestQPN), C.uint32_t(v.RQPSN), 1, 12
		a.ah_attr.dlid, a.ah_attr.port_num = C.uint16_t(v.DestLID), 1
		if v.DestGID != ([16]byte{}) {
			a.ah_attr.is_global = 1
			C.memcpy(unsafe.Pointer(&a.ah_attr.grh.dgid), unsafe.Pointer(&v.DestGID[0]), 16)
			a.ah_attr.grh.hop_limit = 255
		}
		mask |= C.IBV_QP_AV | C.IBV_QP_PATH_MTU | C.IBV_QP_DEST_QPN | C.IBV_QP_RQ_PSN | C.IBV_QP_MAX_DEST_RD_ATOMIC | C.IBV_QP_MIN_RNR_TIMER
	case verbs.QPSRTS:
		a.sq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = C.uint32_t(v.SQPSN), C.uint8_t(v.Timeout), C.uint8_t(v.RetryCount), C.uint8_t(v.RNRRetry), 1
		mask |= C.IBV_QP_SQ_PSN | C.IBV_QP_TIMEOUT | C.IBV_QP_RETRY_CNT | C.IBV_QP_RNR_RETRY | C.IBV_QP_MAX_QP_RD_ATOMIC
	}
	if rc := C.ibv_modify_qp(q.q, &a, mask); rc != 0 {
		return fmt.Errorf("rdma: QP %#x to %v: errno %d", q.QPN(), v.State, int(rc))
	}
	return nil
}

// PostSend posts one work request (one SGE at most).
func (q *QP) PostSend(w verbs.SendWR) error {
	if len(w.SGE) > 1 {
		return fmt.Errorf("rdma: %d SGEs (one supported)", len(w.SGE))
	}
	wr := (*C.struct_ibv_send_wr)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_ibv_send_wr{}))))
	sge := (*C.struct_ibv_sge)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
	defer C.free(unsafe.Pointer(wr))
	defer C.free(unsafe.Pointer(sge))
	wr.wr_id, wr.opcode = C.uint64_t(w.ID), C.enum_ibv_wr_opcode(w.Op)
	if len(w.SGE) == 1 {
		sge.addr, sge.length, sge.lkey = C.uint64_t(w.SGE[0].Addr), C.uint32_t(w.SGE[0].Len), C.uint32_t(w.SGE[0].LKey)
		wr.sg_list, wr.num_sge = sge, 1
	}
	if w.Signaled {
		wr.send_flags = C.IBV_SEND_SIGNALED
	}
	if w.Op == verbs.OpAtomicFetchAdd {
		C.tw_set_fetch_add(wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint64_t(w.Add))
	} else {
		C.tw_set_rdma(wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey))
	}
	if w.Op == verbs.OpWriteImm {
		C.tw_set_imm(wr, C.uint32_t(w.Imm))
	}
	if rc := C.tw_post_send(q.q, wr); rc != 0 {
		return fmt.Errorf("rdma: QP %#x: ibv_post_send: errno %d", q.QPN(), int(rc))
	}
	return nil
}

// PostRecv posts a receive (SGE-less receives serve writes with immediate).
func (q *QP) PostRecv(w verbs.RecvWR) error {
	if len(w.SGE) > 1 {
		return fmt.Errorf("rdma: %d SGEs (one supported)", len(w.SGE))
	}
	wr := (*C.struct_ibv_recv_wr)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_ibv_recv_wr{}))))
	sge := (*C.struct_ibv_sge)(C.calloc(1, C.size_t(unsafe.Sizeof(C.struct_ibv_sge{}))))
	defer C.free(unsafe.Pointer(wr))
	defer C.free(unsafe.Pointer(sge))
	wr.wr_id = C.uint64_t(w.ID)
	if len(w.SGE) == 1 {
		sge.addr, sge.length, sge.lkey = C.uint64_t(w.SGE[0].Addr), C.uint32_t(w.SGE[0].Len), C.uint32_t(w.SGE[0].LKey)
		wr.sg_list, wr.num_sge = sge, 1
	}
	if rc := C.tw_post_recv(q.q, wr); rc != 0 {
		return fmt.Errorf("rdma: QP %#x: ibv_post_recv: errno %d", q.QPN(), int(rc))
	}
	return nil
}

// Close destroys the queue pair.
func (q *QP) Close() error { C.ibv_destroy_qp(q.q); return nil }
