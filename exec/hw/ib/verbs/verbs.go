// Package verbs is the small Go form of the InfiniBand verbs API that the
// ib net plugin is written against: devices and ports, protection
// domains, memory regions, completion queues and reliable-connected queue
// pairs with RDMA write (with immediate) and read. Two providers
// implement it: exec/hw/ib/soft, a pure-Go software HCA used as a test
// vehicle, and exec/hw/ib/rdma, libibverbs through cgo. Constants carry
// the numeric values of <infiniband/verbs.h>.
package verbs

import (
	"errors"
	"fmt"
)

// Access is a memory region's or queue pair's access flags (ibv_access_flags).
type Access uint32

// Access flags.
const (
	AccessLocalWrite   Access = 1
	AccessRemoteWrite  Access = 2
	AccessRemoteRead   Access = 4
	AccessRemoteAtomic Access = 8
	// AccessRelaxedOrdering is IBV_ACCESS_RELAXED_ORDERING (an optional
	// flag: the HCA may reorder its PCIe writes into the region;
	// NCCL_IB_PCI_RELAXED_ORDERING). Providers that do not implement
	// RelaxedOrderer ignore it.
	AccessRelaxedOrdering Access = 1 << 20
)

// QPState is a queue pair's state (ibv_qp_state).
type QPState int

// Queue pair states.
const (
	QPSReset QPState = 0
	QPSInit  QPState = 1
	QPSRTR   QPState = 2
	QPSRTS   QPState = 3
	QPSErr   QPState = 6
)

func (s QPState) String() string {
	switch s {
	case QPSReset:
		return "RESET"
	case QPSInit:
		return "INIT"
	case QPSRTR:
		return "RTR"
	case QPSRTS:
		return "RTS"
	case QPSErr:
		return "ERROR"
	}
	return fmt.Sprintf("QPState(%d)", int(s))
}

// ValidTransition reports whether verbs allows modifying a queue pair from
// state from to state to (the RC subset: RESET→INIT, INIT→INIT, INIT→RTR,
// RTR→RTS, RTS→RTS, and any state to RESET or ERROR).
func ValidTransition(from, to QPState) bool {
	switch to {
	case QPSReset, QPSErr:
		return true
	case QPSInit:
		return from == QPSReset || from == QPSInit
	case QPSRTR:
		return from == QPSInit
	case QPSRTS:
		return from == QPSRTR || from == QPSRTS
	}
	return false
}

// Opcode is a send work request's operation (ibv_wr_opcode).
type Opcode int

// Send opcodes.
const (
	OpWrite          Opcode = 0
	OpWriteImm       Opcode = 1
	OpRead           Opcode = 4
	OpAtomicFetchAdd Opcode = 6
)

// WCOpcode is a completion's operation (ibv_wc_opcode).
type WCOpcode int

// Completion opcodes.
const (
	WCSend         WCOpcode = 0
	WCWrite        WCOpcode = 1
	WCRead         WCOpcode = 2
	WCFetchAdd     WCOpcode = 4
	WCRecvWriteImm WCOpcode = 129
)

// WCStatus is a completion's status (ibv_wc_status).
type WCStatus int

// Completion statuses.
const (
	WCSuccess        WCStatus = 0
	WCLocLenErr      WCStatus = 1
	WCLocQPOpErr     WCStatus = 2
	WCLocProtErr     WCStatus = 4
	WCWRFlushErr     WCStatus = 5
	WCRemInvReqErr   WCStatus = 9
	WCRemAccessErr   WCStatus = 10
	WCRemOpErr       WCStatus = 11
	WCRetryExcErr    WCStatus = 12
	WCRNRRetryExcErr WCStatus = 13
)

var wcNames = map[WCStatus]string{
	WCSuccess: "success", WCLocLenErr: "local length error", WCLocQPOpErr: "local QP operation error",
	WCLocProtErr: "local protection error", WCWRFlushErr: "work request flushed", WCRemInvReqErr: "remote invalid request error",
	WCRemAccessErr: "remote access error", WCRemOpErr: "remote operation error", WCRetryExcErr: "transport retry counter exceeded",
	WCRNRRetryExcErr: "RNR retry counter exceeded",
}

func (s WCStatus) String() string {
	if n, ok := wcNames[s]; ok {
		return n
	}
	return fmt.Sprintf("status %d", int(s))
}

// LinkLayer is a port's link layer.
type LinkLayer int

// Link layers.
const (
	LinkIB       LinkLayer = 1
	LinkEthernet LinkLayer = 2
)

// PortAttr describes one port of a device.
type PortAttr struct {
	Active    bool
	LID       uint16
	MTU       int // active MTU in bytes
	LinkLayer LinkLayer
	// GIDTableLen is the number of entries of the port's GID table
	// (Context.QueryGID reads them).
	GIDTableLen int
	// Gbps is the port's speed (width × lane rate).
	Gbps float64
}

// GIDType is the kind of a GID table entry (ibv_gid_type, and what
// /sys/class/infiniband/<dev>/ports/<port>/gid_attrs/types/<index> says).
type GIDType int

// GID types.
const (
	// GIDTypeUnknown: the provider could not tell (NCCL treats the
	// entry's RoCE version as unknown).
	GIDTypeUnknown GIDType = -1
	GIDTypeIB      GIDType = 0 // "IB/RoCE v1" on an InfiniBand port
	GIDTypeRoCEv1  GIDType = 1
	GIDTypeRoCEv2  GIDType = 2
)

func (t GIDType) String() string {
	switch t {
	case GIDTypeIB:
		return "IB"
	case GIDTypeRoCEv1:
		return "RoCE v1"
	case GIDTypeRoCEv2:
		return "RoCE v2"
	}
	return "unknown"
}

// GIDEntry is one entry of a port's GID table.
type GIDEntry struct {
	GID  [16]byte
	Type GIDType
}

// SGE is a scatter/gather element: Len bytes at virtual address Addr of
// the memory region whose local key is LKey.
type SGE struct {
	Addr uint64
	Len  uint32
	LKey uint32
}

// SendWR is a send work request.
type SendWR struct {
	ID       uint64
	Op       Opcode
	SGE      []SGE
	Signaled bool
	Imm      uint32
	// RemoteAddr and RKey name the remote memory of RDMA and atomic ops.
	RemoteAddr uint64
	RKey       uint32
	// Add is the operand of a fetch-and-add.
	Add uint64
}

// RecvWR is a receive work request (RDMA write with immediate consumes one).
type RecvWR struct {
	ID  uint64
	SGE []SGE
}

// WC is a work completion.
type WC struct {
	ID     uint64
	Status WCStatus
	Op     WCOpcode
	Len    uint32
	Imm    uint32
	HasImm bool
	QPN    uint32
}

// QPAttr holds the attributes of a queue pair transition; which fields
// matter depends on the target state (as with ibv_modify_qp's mask).
type QPAttr struct {
	State QPState
	// INIT: port and the remote access the QP grants.
	Port   int
	Access Access
	// RTR: the remote queue pair and its address.
	DestQPN uint32
	DestLID uint16
	DestGID [16]byte
	// Global routes by GID (a GRH: is_global in ibv_ah_attr), from the
	// local GID at SGIDIndex; RoCE ports always need it.
	Global    bool
	SGIDIndex int
	PathMTU   int
	RQPSN     uint32
	// SL is the service level of the address vector, TrafficClass the
	// GRH's traffic class (global routes only): NCCL_IB_SL, NCCL_IB_TC.
	SL           int
	TrafficClass int
	// RTS.
	SQPSN      uint32
	Timeout    int
	RetryCount int
	RNRRetry   int
}

// QPInit creates a queue pair.
type QPInit struct {
	SendCQ, RecvCQ CQ
	MaxSend        int
	MaxRecv        int
}

// Provider opens devices.
type Provider interface {
	// Name names the provider ("soft", "rdma").
	Name() string
	// Devices lists the device names.
	Devices() ([]string, error)
	// Open opens a device.
	Open(name string) (Context, error)
}

// Context is an open device.
type Context interface {
	Name() string
	// Ports is the number of ports (numbered from 1).
	Ports() int
	QueryPort(port int) (PortAttr, error)
	// QueryGID reads entry index (0 ≤ index < GIDTableLen) of a port's
	// GID table.
	QueryGID(port, index int) (GIDEntry, error)
	AllocPD() (PD, error)
	CreateCQ(depth int) (CQ, error)
	Close() error
}

// PD is a protection domain: memory regions and queue pairs of one PD
// only see each other.
type PD interface {
	// RegMR registers buf; buf must stay alive until the region is closed.
	RegMR(buf []byte, access Access) (MR, error)
	CreateQP(init QPInit) (QP, error)
	Close() error
}

// MR is a registered memory region.
type MR interface {
	Addr() uint64
	Len() int
	LKey() uint32
	RKey() uint32
	Close() error
}

// CQ is a completion queue.
type CQ interface {
	// Poll moves up to len(wc) completions into wc, oldest first.
	Poll(wc []WC) (int, error)
	Close() error
}

// Notifier is implemented by completion queues that can call a function
// whenever a completion is added (the soft provider's do).
type Notifier interface {
	SetNotify(func())
}

// QP is a reliable-connected queue pair.
type QP interface {
	QPN() uint32
	State() QPState
	Modify(attr QPAttr) error
	PostSend(wr SendWR) error
	PostRecv(wr RecvWR) error
	Close() error
}

// ECE is a queue pair's Enhanced Connection Establishment options
// (struct ibv_ece).
type ECE struct {
	VendorID, Options, CompMask uint32
}

// ECEQP is implemented by queue pairs whose provider supports ECE
// (ibv_query_ece, ibv_set_ece). QueryECE answers ok=false where the
// device does not.
type ECEQP interface {
	QueryECE() (e ECE, ok bool, err error)
	SetECE(e ECE) error
}

// RelaxedOrderer is implemented by devices (Context) that can register
// memory with AccessRelaxedOrdering.
type RelaxedOrderer interface {
	RelaxedOrdering() bool
}

// DeviceMemory is GPU memory that a NIC registers for GPUDirect RDMA.
type DeviceMemory interface {
	// Addr is the memory's device virtual address: the region's address,
	// which work requests and FIFO entries name.
	Addr() uint64
	Len() int
	// DmaBuf exports the memory as a dma-buf: a descriptor the caller
	// closes and Addr's offset in it (ibv_reg_dmabuf_mr), or an error
	// wrapping ErrNotSupported.
	DmaBuf() (fd int, offset uint64, err error)
	// ReadAt and WriteAt copy between the memory at off and host memory
	// (cuMemcpyDtoH, cuMemcpyHtoD): how a provider without a path into
	// the GPU (the software one) reaches it.
	ReadAt(p []byte, off int64) (int, error)
	WriteAt(p []byte, off int64) (int, error)
}

// DeviceRegistrar is implemented by protection domains that register
// DeviceMemory (GPUDirect RDMA); access is as for RegMR.
type DeviceRegistrar interface {
	RegDevice(mem DeviceMemory, access Access) (MR, error)
}

// ErrNotSupported is wrapped by errors of operations a provider or device
// does not support.
var ErrNotSupported = errors.New("verbs: not supported")

// ErrNoDevice is returned when a provider has no device.
var ErrNoDevice = errors.New("verbs: no device")
