//go:build cgo

package rdma

/*
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "twibv.h"
*/
import "C"

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// libNames are the names dlopen tries, in order.
var libNames = []string{"libibverbs.so.1", "libibverbs.so"}

var (
	loadMu  sync.Mutex
	loaded  bool
	loadErr error
)

// load opens libibverbs once.
func load() error {
	loadMu.Lock()
	defer loadMu.Unlock()
	if loaded {
		return nil
	}
	var buf [512]C.char
	var broken string
	for _, n := range libNames {
		cn := C.CString(n)
		rc := C.twibvOpen(cn, &buf[0], C.int(len(buf)))
		C.free(unsafe.Pointer(cn))
		switch rc {
		case 0:
			loaded, loadErr = true, nil
			return nil
		case 2:
			// The library is there but lacks an entry point: do not try
			// another name.
			loadErr = &loadError{fmt.Sprintf("rdma: %s", C.GoString(&buf[0]))}
			return loadErr
		}
		// dlerror names the file it could not find: n itself when the
		// library is absent, a dependency when it is there but broken.
		if msg := C.GoString(&buf[0]); broken == "" && !dlNotFound(msg, n) {
			broken = msg
		}
	}
	if broken != "" {
		loadErr = &loadError{"rdma: libibverbs cannot be loaded: " + broken}
	} else {
		loadErr = &loadError{fmt.Sprintf("rdma: libibverbs not found (no %s on the library path)", strings.Join(libNames, " or "))}
	}
	return loadErr
}

// dlNotFound tells whether dlerror's msg says that dlopen of name found
// no such file (glibc: "name: cannot open shared object file: No such
// file or directory").
func dlNotFound(msg, name string) bool {
	return strings.Contains(msg, name+":") && strings.Contains(msg, "No such file")
}

// loadError is why libibverbs cannot be used, on one line; it wraps
// verbs.ErrNoDevice (no device can be used without the library) without
// saying so in its text.
type loadError struct{ msg string }

func (e *loadError) Error() string { return e.msg }
func (e *loadError) Unwrap() error { return verbs.ErrNoDevice }

// Provider is libibverbs.
type Provider struct{}

// New loads libibverbs and returns the provider; without the library it
// fails with a one-line error ("rdma: libibverbs not found (...)") that
// wraps verbs.ErrNoDevice.
func New() (verbs.Provider, error) {
	if err := load(); err != nil {
		return nil, err
	}
	return Provider{}, nil
}

// Name is "rdma".
func (Provider) Name() string { return "rdma" }

// Devices lists ibv_get_device_list's devices.
func (Provider) Devices() ([]string, error) {
	var n C.int
	l := C.twibvGetDeviceList(&n)
	if l == nil {
		return nil, nil // no RDMA subsystem: no device
	}
	defer C.twibvFreeDeviceList(l)
	var out []string
	for i := 0; i < int(n); i++ {
		out = append(out, C.GoString(C.twibvDeviceName(l, C.int(i))))
	}
	return out, nil
}

// Open opens the named device.
func (Provider) Open(name string) (verbs.Context, error) {
	var n C.int
	l := C.twibvGetDeviceList(&n)
	if l == nil {
		return nil, fmt.Errorf("rdma: %s: %w", name, verbs.ErrNoDevice)
	}
	defer C.twibvFreeDeviceList(l)
	for i := 0; i < int(n); i++ {
		if C.GoString(C.twibvDeviceName(l, C.int(i))) == name {
			c := C.twibvOpenDevice(l, C.int(i))
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
	if C.twibvQueryDevice(c.c, &a) != 0 {
		return 0
	}
	return int(a.phys_port_cnt)
}

var mtuBytes = map[C.enum_ibv_mtu]int{C.IBV_MTU_256: 256, C.IBV_MTU_512: 512, C.IBV_MTU_1024: 1024, C.IBV_MTU_2048: 2048, C.IBV_MTU_4096: 4096}

// QueryPort reads a port.
func (c *Context) QueryPort(port int) (verbs.PortAttr, error) {
	var a C.struct_ibv_port_attr
	if rc := C.twibvQueryPort(c.c, C.int(port), &a); rc != 0 {
		return verbs.PortAttr{}, fmt.Errorf("rdma: %s port %d: ibv_query_port: errno %d", c.name, port, int(rc))
	}
	pa := verbs.PortAttr{Active: a.state == C.IBV_PORT_ACTIVE, LID: uint16(a.lid), MTU: mtuBytes[a.active_mtu], LinkLayer: verbs.LinkIB,
		GIDTableLen: int(a.gid_tbl_len), Gbps: portGbps(int(a.active_width), int(a.active_speed))}
	if a.link_layer == C.IBV_LINK_LAYER_ETHERNET {
		pa.LinkLayer = verbs.LinkEthernet
	}
	return pa, nil
}

// QueryGID reads a GID table entry; its type comes from sysfs, as NCCL
// reads it.
func (c *Context) QueryGID(port, index int) (verbs.GIDEntry, error) {
	var e verbs.GIDEntry
	if rc := C.twibvQueryGID(c.c, C.int(port), C.int(index), (*C.uint8_t)(unsafe.Pointer(&e.GID[0]))); rc != 0 {
		return e, fmt.Errorf("rdma: %s port %d: ibv_query_gid(%d): errno %d", c.name, port, index, int(rc))
	}
	e.Type = GIDTypeFromSysfs(SysfsRoot, c.name, port, index)
	return e, nil
}

// AllocPD allocates a protection domain.
func (c *Context) AllocPD() (verbs.PD, error) {
	p := C.twibvAllocPD(c.c)
	if p == nil {
		return nil, fmt.Errorf("rdma: %s: ibv_alloc_pd failed", c.name)
	}
	return &PD{p: p}, nil
}

// CreateCQ creates a completion queue.
func (c *Context) CreateCQ(depth int) (verbs.CQ, error) {
	q := C.twibvCreateCQ(c.c, C.int(depth))
	if q == nil {
		return nil, fmt.Errorf("rdma: %s: ibv_create_cq(%d) failed", c.name, depth)
	}
	return &CQ{q: q}, nil
}

// Close closes the device.
func (c *Context) Close() error { C.twibvCloseDevice(c.c); return nil }

// PD is a protection domain.
type PD struct{ p *C.struct_ibv_pd }

// RegMR registers buf.
func (p *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, fmt.Errorf("rdma: register an empty buffer")
	}
	m := C.twibvRegMR(p.p, unsafe.Pointer(&buf[0]), C.size_t(len(buf)), C.int(access))
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
	q := C.twibvCreateQP(p.p, &a)
	if q == nil {
		return nil, fmt.Errorf("rdma: ibv_create_qp failed")
	}
	return &QP{q: q}, nil
}

// Close deallocates the PD.
func (p *PD) Close() error { C.twibvDeallocPD(p.p); return nil }

// MR is a memory region.
type MR struct {
	m *C.struct_ibv_mr
	n int
}

// Addr is the region's address.
func (m *MR) Addr() uint64 { return uint64(uintptr(m.m.addr)) }

// Len is its length.
func (m *MR) Len() int { return m.n }

// LKey is its local key.
func (m *MR) LKey() uint32 { return uint32(m.m.lkey) }

// RKey is its remote key.
func (m *MR) RKey() uint32 { return uint32(m.m.rkey) }

// Close deregisters it.
func (m *MR) Close() error { C.twibvDeregMR(m.m); return nil }

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
	got := int(C.twibvPollCQ(q.q, C.int(n), &buf[0]))
	if got < 0 {
		return 0, fmt.Errorf("rdma: ibv_poll_cq failed")
	}
	for i := 0; i < got; i++ {
		w := &buf[i]
		wc[i] = verbs.WC{ID: uint64(w.wr_id), Status: verbs.WCStatus(w.status), Op: verbs.WCOpcode(w.opcode), Len: uint32(w.byte_len), QPN: uint32(w.qp_num)}
		if w.wc_flags&C.IBV_WC_WITH_IMM != 0 {
			wc[i].HasImm, wc[i].Imm = true, uint32(C.twibvImm(w))
		}
	}
	return got, nil
}

// Close destroys the queue.
func (q *CQ) Close() error { C.twibvDestroyCQ(q.q); return nil }

// QP is an RC queue pair.
type QP struct{ q *C.struct_ibv_qp }

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return uint32(q.q.qp_num) }

// State queries the state.
func (q *QP) State() verbs.QPState {
	var s C.int
	if C.twibvQueryQPState(q.q, &s) != 0 {
		return verbs.QPSErr
	}
	return verbs.QPState(s)
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
		if v.Global {
			a.ah_attr.is_global = 1
			C.twibvSetDGID(&a, (*C.uint8_t)(unsafe.Pointer(&v.DestGID[0])))
			a.ah_attr.grh.sgid_index = C.uint8_t(v.SGIDIndex)
			a.ah_attr.grh.hop_limit = 255
			a.ah_attr.grh.traffic_class = C.uint8_t(v.TrafficClass)
		}
		a.ah_attr.sl = C.uint8_t(v.SL)
		mask |= C.IBV_QP_AV | C.IBV_QP_PATH_MTU | C.IBV_QP_DEST_QPN | C.IBV_QP_RQ_PSN | C.IBV_QP_MAX_DEST_RD_ATOMIC | C.IBV_QP_MIN_RNR_TIMER
	case verbs.QPSRTS:
		a.sq_psn, a.timeout, a.retry_cnt, a.rnr_retry, a.max_rd_atomic = C.uint32_t(v.SQPSN), C.uint8_t(v.Timeout), C.uint8_t(v.RetryCount), C.uint8_t(v.RNRRetry), 1
		mask |= C.IBV_QP_SQ_PSN | C.IBV_QP_TIMEOUT | C.IBV_QP_RETRY_CNT | C.IBV_QP_RNR_RETRY | C.IBV_QP_MAX_QP_RD_ATOMIC
	}
	if rc := C.twibvModifyQP(q.q, &a, mask); rc != 0 {
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
		C.twibvSetFetchAdd(wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey), C.uint64_t(w.Add))
	} else {
		C.twibvSetRDMA(wr, C.uint64_t(w.RemoteAddr), C.uint32_t(w.RKey))
	}
	if w.Op == verbs.OpWriteImm {
		C.twibvSetImm(wr, C.uint32_t(w.Imm))
	}
	if rc := C.twibvPostSend(q.q, wr); rc != 0 {
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
	if rc := C.twibvPostRecv(q.q, wr); rc != 0 {
		return fmt.Errorf("rdma: QP %#x: ibv_post_recv: errno %d", q.QPN(), int(rc))
	}
	return nil
}

// Close destroys the queue pair.
func (q *QP) Close() error { C.twibvDestroyQP(q.q); return nil }

// portGbps is a port's speed from ibv_port_attr's active_width and
// active_speed codes (0 when a code is unknown).
func portGbps(width, speed int) float64 {
	widths := map[int]float64{1: 1, 2: 4, 4: 8, 8: 12, 16: 2}
	speeds := map[int]float64{1: 2.5, 2: 5, 4: 10, 8: 10, 16: 14, 32: 25, 64: 50, 128: 100, 256: 200}
	return widths[width] * speeds[speed]
}
