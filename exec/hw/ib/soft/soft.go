// Package soft is a software verbs provider: a pure-Go model of an RDMA
// HCA that implements exec/hw/ib/verbs so that the ib net plugin's whole
// logic (connection state machines, FIFO protocol, striping, completions,
// errors) runs in CI without RDMA hardware. It is a test vehicle, not a
// transport to deploy: it moves bytes over TCP and has none of an HCA's
// performance.
//
// Each device listens on a TCP socket (loopback by default) and has one
// port, modelled as a RoCE port: its GID table holds, as a RoCE NIC's
// does, a link-local GID and the IPv4-mapped listening address, each as a
// RoCE v1 and a RoCE v2 entry (indexes 0 to 3), and its LID is the TCP
// port. A queue pair moved to RTR with a global route (RoCE needs one) to
// a peer's IPv4-mapped GID, LID and QPN reaches that peer across
// processes; a link-local GID reaches nobody, so the requester's retries
// run out, as on a fabric where the wrong GID index was chosen.
//
// What a real HCA enforces is enforced here, at the same place: posting
// sends before RTS or receives in RESET fails at once; a local key that is
// unknown, from another protection domain, out of bounds or without local
// write access for an inbound transfer gives a local protection error
// completion; a remote key that is unknown, from another protection
// domain, out of bounds or without the remote access the operation needs
// (or a queue pair that does not grant it) gives the requester a remote
// access (or invalid request) error and moves both queue pairs to ERROR; a
// peer that vanished gives a retry-exceeded error. Queue pairs in ERROR
// flush their work requests with work-request-flushed completions. Send
// completions come in post order, receive completions in arrival order.
// RNR is modelled as infinite retry: a write with immediate waits for a
// receive to be posted.
package soft

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// Options shape a Provider.
type Options struct {
	// Devices is the number of devices (default 1).
	Devices int
	// Prefix names devices Prefix0, Prefix1... (default "soft").
	Prefix string
	// Host is the address the devices listen on (default 127.0.0.1).
	Host string
	// QPNBase, when not 0, is the first QPN of every device (by default
	// each device starts at a random one). QPNs are unique per device
	// only, as on HCAs; a shared base makes devices reuse each other's.
	QPNBase uint32
	// Secret is the job's secret, which every connection between
	// devices proves (a guessed QPN reaches nothing without it). Zero:
	// a secret of this process, so that devices of one process reach
	// each other and nobody else.
	Secret auth.Secret
}

// processSecret is the Secret of providers given none.
var processSecret = sync.OnceValue(auth.NewSecret)

// Provider is a set of software devices.
type Provider struct {
	devs []*Device
}

// New starts a provider with its devices listening.
func New(o Options) (*Provider, error) {
	if o.Devices <= 0 {
		o.Devices = 1
	}
	if o.Prefix == "" {
		o.Prefix = "soft"
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	p := &Provider{}
	if o.Secret.IsZero() {
		o.Secret = processSecret()
	}
	for i := 0; i < o.Devices; i++ {
		d, err := newDevice(fmt.Sprintf("%s%d", o.Prefix, i), o.Host, o.QPNBase, o.Secret)
		if err != nil {
			p.Close()
			return nil, err
		}
		p.devs = append(p.devs, d)
	}
	return p, nil
}

// Name is "soft".
func (p *Provider) Name() string { return "soft" }

// Refused is the number of connections the provider's devices refused
// for a wrong proof of the secret.
func (p *Provider) Refused() int {
	n := 0
	for _, d := range p.devs {
		d.mu.Lock()
		n += d.refused
		d.mu.Unlock()
	}
	return n
}

// Devices lists the device names.
func (p *Provider) Devices() ([]string, error) {
	var n []string
	for _, d := range p.devs {
		n = append(n, d.name)
	}
	return n, nil
}

// Open returns the named device.
func (p *Provider) Open(name string) (verbs.Context, error) {
	for _, d := range p.devs {
		if d.name == name {
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if closed {
				return nil, fmt.Errorf("soft verbs: device %s is closed", name)
			}
			return d, nil
		}
	}
	return nil, fmt.Errorf("soft verbs: no device %q", name)
}

// Close stops every device: its listener, queue pairs and connections go
// away at once, as with a process that dies.
func (p *Provider) Close() error {
	for _, d := range p.devs {
		d.shutdown()
	}
	return nil
}

// Device is a software HCA with one port; it is its own verbs.Context.
type Device struct {
	name   string
	ln     net.Listener
	secret auth.Secret
	gids   []verbs.GIDEntry
	lid    uint16

	mu      sync.Mutex
	closed  bool
	qps     map[uint32]*QP
	mrs     map[uint32]*MR
	nextQPN uint32
	nextKey uint32
	conns   map[net.Conn]struct{}
	refused int // connections that failed the proof
	atomic  sync.Mutex
	wg      sync.WaitGroup
}

func newDevice(name, host string, qpnBase uint32, secret auth.Secret) (*Device, error) {
	ln, err := net.Listen("tcp4", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("soft verbs: device %s: %w", name, err)
	}
	a := ln.Addr().(*net.TCPAddr)
	d := &Device{name: name, ln: ln, secret: secret, lid: uint16(a.Port), qps: map[uint32]*QP{}, mrs: map[uint32]*MR{},
		nextQPN: 0x100 + uint32(rand.IntN(0x1000)), nextKey: 1 + uint32(rand.IntN(1<<16)), conns: map[net.Conn]struct{}{}}
	if qpnBase != 0 {
		d.nextQPN = qpnBase - 1
	}
	d.gids = gidTable(a.IP, d.lid)
	d.wg.Add(1)
	go d.accept()
	return d, nil
}

// Name is the device name.
func (d *Device) Name() string { return d.name }

// Ports is 1.
func (d *Device) Ports() int { return 1 }

// gidTable is a RoCE port's GID table: the link-local GID (made from the
// LID, as a NIC makes it from its MAC) and the IPv4-mapped address ip,
// each as a RoCE v1 then a RoCE v2 entry.
func gidTable(ip net.IP, lid uint16) []verbs.GIDEntry {
	var ll, v4 [16]byte
	ll[0], ll[1] = 0xfe, 0x80
	ll[8], ll[11], ll[12] = 0x02, 0xff, 0xfe
	binary.BigEndian.PutUint16(ll[14:], lid)
	copy(v4[:], ip.To16())
	return []verbs.GIDEntry{{GID: ll, Type: verbs.GIDTypeRoCEv1}, {GID: ll, Type: verbs.GIDTypeRoCEv2},
		{GID: v4, Type: verbs.GIDTypeRoCEv1}, {GID: v4, Type: verbs.GIDTypeRoCEv2}}
}

// QueryPort describes port 1, a RoCE port.
func (d *Device) QueryPort(port int) (verbs.PortAttr, error) {
	if port != 1 {
		return verbs.PortAttr{}, fmt.Errorf("soft verbs: %s has no port %d", d.name, port)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return verbs.PortAttr{Active: !d.closed, LID: d.lid, MTU: 4096, LinkLayer: verbs.LinkEthernet, GIDTableLen: len(d.gids), Gbps: 100}, nil
}

// QueryGID reads entry index of port 1's GID table.
func (d *Device) QueryGID(port, index int) (verbs.GIDEntry, error) {
	if port != 1 {
		return verbs.GIDEntry{}, fmt.Errorf("soft verbs: %s has no port %d", d.name, port)
	}
	if index < 0 || index >= len(d.gids) {
		return verbs.GIDEntry{}, fmt.Errorf("soft verbs: %s port 1: GID index %d out of the table of %d", d.name, index, len(d.gids))
	}
	return d.gids[index], nil
}

// Close of the context is a no-op: the provider owns its devices.
func (d *Device) Close() error { return nil }

func (d *Device) shutdown() {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.closed = true
	qps := make([]*QP, 0, len(d.qps))
	for _, q := range d.qps {
		qps = append(qps, q)
	}
	for c := range d.conns {
		c.Close()
	}
	d.mu.Unlock()
	d.ln.Close()
	for _, q := range qps {
		q.Close()
	}
	d.wg.Wait()
}

// AllocPD allocates a protection domain.
func (d *Device) AllocPD() (verbs.PD, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("soft verbs: device %s is closed", d.name)
	}
	return &PD{dev: d}, nil
}

// CreateCQ creates a completion queue of depth entries.
func (d *Device) CreateCQ(depth int) (verbs.CQ, error) {
	if depth <= 0 || depth > 1<<20 {
		return nil, fmt.Errorf("soft verbs: CQ depth %d", depth)
	}
	return &CQ{depth: depth}, nil
}

// PD is a protection domain.
type PD struct {
	dev *Device
}

// MR is a memory region: host memory (buf), or device memory (dev) that
// the device stages through host copies.
type MR struct {
	pd     *PD
	buf    []byte
	dev    verbs.DeviceMemory
	addr   uint64
	n      uint64
	access verbs.Access
	key    uint32
}

// RegMR registers buf with the given access. Remote write or atomic
// access without local write is refused, as by ibv_reg_mr.
func (p *PD) RegMR(buf []byte, access verbs.Access) (verbs.MR, error) {
	if len(buf) == 0 {
		return nil, errors.New("soft verbs: register an empty buffer")
	}
	return p.register(&MR{pd: p, buf: buf, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), n: uint64(len(buf)), access: access})
}

// RegDevice registers GPU memory: the device reaches it through
// mem.ReadAt and mem.WriteAt (cuMemcpyDtoH/HtoD) at the moment a work
// request touches it, under the same keys, bounds and access rules as
// host memory.
func (p *PD) RegDevice(mem verbs.DeviceMemory, access verbs.Access) (verbs.MR, error) {
	if mem == nil || mem.Len() <= 0 {
		return nil, errors.New("soft verbs: register empty device memory")
	}
	return p.register(&MR{pd: p, dev: mem, addr: mem.Addr(), n: uint64(mem.Len()), access: access})
}

func (p *PD) register(m *MR) (verbs.MR, error) {
	access := m.access
	if access&(verbs.AccessRemoteWrite|verbs.AccessRemoteAtomic) != 0 && access&verbs.AccessLocalWrite == 0 {
		return nil, fmt.Errorf("soft verbs: access %#x: remote write or atomic needs local write", access)
	}
	d := p.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("soft verbs: device %s is closed", d.name)
	}
	// Keys are an index and a random byte, like an HCA's.
	d.nextKey++
	key := d.nextKey<<8 | uint32(rand.IntN(256))
	m.key = key
	d.mrs[key] = m
	return m, nil
}

// Addr is the region's virtual address.
func (m *MR) Addr() uint64 { return m.addr }

// Access is the access the region was registered with.
func (m *MR) Access() verbs.Access { return m.access }

// RelaxedOrdering: the soft device takes AccessRelaxedOrdering (and
// records it; its copies are ordered anyway).
func (d *Device) RelaxedOrdering() bool { return true }

// Len is its length.
func (m *MR) Len() int { return int(m.n) }

// LKey is its local key.
func (m *MR) LKey() uint32 { return m.key }

// RKey is its remote key.
func (m *MR) RKey() uint32 { return m.key }

// Close deregisters the region.
func (m *MR) Close() error {
	d := m.pd.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.mrs, m.key)
	return nil
}

// Close of a PD is a no-op.
func (p *PD) Close() error { return nil }

// span is the bytes [off, off+len(b)) of a region an operation touches:
// host memory itself, or for device memory a host copy that load fills
// from the GPU and store writes back.
type span struct {
	b   []byte
	dev verbs.DeviceMemory
	off int64
}

func (s span) load() error {
	if s.dev == nil || len(s.b) == 0 {
		return nil
	}
	_, err := s.dev.ReadAt(s.b, s.off)
	return err
}

func (s span) store() error {
	if s.dev == nil || len(s.b) == 0 {
		return nil
	}
	_, err := s.dev.WriteAt(s.b, s.off)
	return err
}

// lookup returns the span [addr, addr+n) of the region key of pd, if it
// has the access need.
func (d *Device) lookup(pd *PD, key uint32, addr uint64, n uint64, need verbs.Access) (span, bool) {
	d.mu.Lock()
	m := d.mrs[key]
	d.mu.Unlock()
	if m == nil || m.pd != pd || m.access&need != need {
		return span{}, false
	}
	if addr < m.addr || addr+n < addr || addr+n > m.addr+m.n {
		return span{}, false
	}
	off := addr - m.addr
	if m.dev != nil {
		return span{b: make([]byte, n), dev: m.dev, off: int64(off)}, true
	}
	return span{b: m.buf[off : off+n]}, true
}

// CQ is a completion queue.
type CQ struct {
	mu     sync.Mutex
	depth  int
	q      []verbs.WC
	err    error
	notify func()
}

// SetNotify registers f, called after each completion is added.
func (c *CQ) SetNotify(f func()) {
	c.mu.Lock()
	c.notify = f
	c.mu.Unlock()
}

func (c *CQ) push(wc verbs.WC) {
	c.mu.Lock()
	if len(c.q) >= c.depth {
		if c.err == nil {
			c.err = fmt.Errorf("soft verbs: completion queue overrun (depth %d)", c.depth)
		}
	} else {
		c.q = append(c.q, wc)
	}
	f := c.notify
	c.mu.Unlock()
	if f != nil {
		f()
	}
}

// Poll moves the oldest completions into wc.
func (c *CQ) Poll(wc []verbs.WC) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return 0, c.err
	}
	n := copy(wc, c.q)
	c.q = c.q[:copy(c.q, c.q[n:])]
	return n, nil
}

// Close releases the queue.
func (c *CQ) Close() error { return nil }

// QP is a reliable-connected queue pair.
type QP struct {
	dev              *Device
	pd               *PD
	qpn              uint32
	scq, rcq         *CQ
	maxSend, maxRecv int

	mu     sync.Mutex
	cond   *sync.Cond
	state  verbs.QPState
	attr   verbs.QPAttr
	sq     []verbs.SendWR
	busy   bool
	rq     []verbs.RecvWR
	out    net.Conn
	in     net.Conn
	closed bool
	wg     sync.WaitGroup
	ece    verbs.ECE
	eceSet bool
}

// softECE is the ECE the soft device advertises: a vendor id of its own
// and two option bits, which a peer's SetECE may reduce.
var softECE = verbs.ECE{VendorID: 0x50f7, Options: 0x3}

// Attr is what the queue pair's transitions recorded (port and access of
// INIT, the RTR address vector with SL and traffic class, the RTS
// timeout and retry counts): the settings a test checks the plugin
// passed.
func (q *QP) Attr() verbs.QPAttr {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.attr
}

// QueryECE answers the QP's ECE: the device's own until SetECE reduced it.
func (q *QP) QueryECE() (verbs.ECE, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.eceSet {
		return q.ece, true, nil
	}
	return softECE, true, nil
}

// SetECE sets the QP's ECE before RTR, as ibv_set_ece: the device keeps
// the options it supports of those given; another vendor's is refused.
func (q *QP) SetECE(e verbs.ECE) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.state != verbs.QPSInit && q.state != verbs.QPSReset {
		return fmt.Errorf("soft verbs: QP %#x: set ECE in %s (before RTR only)", q.qpn, q.state)
	}
	if e.VendorID != softECE.VendorID {
		return fmt.Errorf("soft verbs: QP %#x: ECE of vendor %#x", q.qpn, e.VendorID)
	}
	q.ece, q.eceSet = verbs.ECE{VendorID: e.VendorID, Options: e.Options & softECE.Options, CompMask: e.CompMask}, true
	return nil
}

// ECESet reports the ECE SetECE gave the QP, if any.
func (q *QP) ECESet() (verbs.ECE, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.ece, q.eceSet
}

// CreateQP creates a queue pair in RESET.
func (p *PD) CreateQP(init verbs.QPInit) (verbs.QP, error) {
	scq, ok1 := init.SendCQ.(*CQ)
	rcq, ok2 := init.RecvCQ.(*CQ)
	if !ok1 || !ok2 {
		return nil, errors.New("soft verbs: queue pair needs soft completion queues")
	}
	if init.MaxSend <= 0 || init.MaxRecv <= 0 || init.MaxSend > 1<<16 || init.MaxRecv > 1<<16 {
		return nil, fmt.Errorf("soft verbs: queue sizes %d/%d", init.MaxSend, init.MaxRecv)
	}
	d := p.dev
	q := &QP{dev: d, pd: p, scq: scq, rcq: rcq, maxSend: init.MaxSend, maxRecv: init.MaxRecv}
	q.cond = sync.NewCond(&q.mu)
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, fmt.Errorf("soft verbs: device %s is closed", d.name)
	}
	d.nextQPN++
	q.qpn = d.nextQPN & 0xffffff
	d.qps[q.qpn] = q
	d.mu.Unlock()
	q.wg.Add(1)
	go q.sender()
	return q, nil
}

// QPN is the queue pair number.
func (q *QP) QPN() uint32 { return q.qpn }

// State is the current state.
func (q *QP) State() verbs.QPState {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.state
}

// Modify moves the queue pair to attr.State, if verbs allows that
// transition and the attributes it needs are given.
func (q *QP) Modify(a verbs.QPAttr) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x destroyed", q.qpn)
	}
	if !verbs.ValidTransition(q.state, a.State) {
		s := q.state
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x: invalid transition %s -> %s", q.qpn, s, a.State)
	}
	var flushed []verbs.WC
	switch a.State {
	case verbs.QPSInit:
		if a.Port != 1 {
			q.mu.Unlock()
			return fmt.Errorf("soft verbs: QP %#x: no port %d", q.qpn, a.Port)
		}
		q.attr.Port, q.attr.Access = a.Port, a.Access
	case verbs.QPSRTR:
		var why string
		switch {
		case a.DestQPN == 0 || a.PathMTU <= 0:
			why = "RTR needs the destination QPN and path MTU"
		case !a.Global:
			why = "RTR on a RoCE port needs a global route (GRH)"
		case a.SGIDIndex < 0 || a.SGIDIndex >= len(q.dev.gids):
			why = fmt.Sprintf("source GID index %d out of the table of %d", a.SGIDIndex, len(q.dev.gids))
		}
		if why != "" {
			q.mu.Unlock()
			return fmt.Errorf("soft verbs: QP %#x: %s", q.qpn, why)
		}
		q.attr.DestQPN, q.attr.DestLID, q.attr.DestGID, q.attr.PathMTU = a.DestQPN, a.DestLID, a.DestGID, a.PathMTU
		q.attr.Global, q.attr.SGIDIndex = a.Global, a.SGIDIndex
		q.attr.SL, q.attr.TrafficClass = a.SL, a.TrafficClass
	case verbs.QPSRTS:
		q.attr.SQPSN, q.attr.Timeout, q.attr.RetryCount, q.attr.RNRRetry = a.SQPSN, a.Timeout, a.RetryCount, a.RNRRetry
	case verbs.QPSReset:
		q.sq, q.rq = nil, nil
		q.attr = verbs.QPAttr{}
		q.dropConns()
	case verbs.QPSErr:
		flushed = q.errorLocked()
	}
	if a.State != verbs.QPSErr {
		q.state = a.State
	}
	q.cond.Broadcast()
	q.mu.Unlock()
	q.deliver(flushed)
	return nil
}

func (q *QP) dropConns() {
	if q.out != nil {
		q.out.Close()
		q.out = nil
	}
	if q.in != nil {
		q.in.Close()
		q.in = nil
	}
}

// errorLocked moves the queue pair to ERROR and returns the flush
// completions of its queued work requests.
func (q *QP) errorLocked() []verbs.WC {
	q.state = verbs.QPSErr
	var wcs []verbs.WC
	for _, wr := range q.sq {
		wcs = append(wcs, verbs.WC{ID: wr.ID, Status: verbs.WCWRFlushErr, Op: sendOp(wr.Op), QPN: q.qpn})
	}
	for _, wr := range q.rq {
		wcs = append(wcs, verbs.WC{ID: wr.ID, Status: verbs.WCWRFlushErr, Op: verbs.WCRecvWriteImm, QPN: q.qpn | recvFlag})
	}
	q.sq, q.rq = nil, nil
	q.cond.Broadcast()
	return wcs
}

// recvFlag marks flush completions that go to the receive queue.
const recvFlag = 1 << 31

func (q *QP) deliver(wcs []verbs.WC) {
	for _, wc := range wcs {
		if wc.QPN&recvFlag != 0 {
			wc.QPN &^= recvFlag
			q.rcq.push(wc)
		} else {
			q.scq.push(wc)
		}
	}
}

func (q *QP) fail() {
	q.mu.Lock()
	wcs := q.errorLocked()
	q.mu.Unlock()
	q.deliver(wcs)
}

func sendOp(op verbs.Opcode) verbs.WCOpcode {
	switch op {
	case verbs.OpRead:
		return verbs.WCRead
	case verbs.OpAtomicFetchAdd:
		return verbs.WCFetchAdd
	}
	return verbs.WCWrite
}

// PostSend queues a send work request: refused before RTS, flushed in
// ERROR.
func (q *QP) PostSend(wr verbs.SendWR) error {
	switch wr.Op {
	case verbs.OpWrite, verbs.OpWriteImm, verbs.OpRead, verbs.OpAtomicFetchAdd:
	default:
		return fmt.Errorf("soft verbs: QP %#x: unsupported opcode %d", q.qpn, wr.Op)
	}
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x destroyed", q.qpn)
	case q.state == verbs.QPSErr:
		q.mu.Unlock()
		q.scq.push(verbs.WC{ID: wr.ID, Status: verbs.WCWRFlushErr, Op: sendOp(wr.Op), QPN: q.qpn})
		return nil
	case q.state != verbs.QPSRTS:
		s := q.state
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x: post send in state %s", q.qpn, s)
	case len(q.sq)+btoi(q.busy) >= q.maxSend:
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x: send queue full (%d)", q.qpn, q.maxSend)
	}
	wr.SGE = append([]verbs.SGE(nil), wr.SGE...)
	q.sq = append(q.sq, wr)
	q.cond.Broadcast()
	q.mu.Unlock()
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// PostRecv queues a receive work request: refused in RESET, flushed in
// ERROR.
func (q *QP) PostRecv(wr verbs.RecvWR) error {
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x destroyed", q.qpn)
	case q.state == verbs.QPSErr:
		q.mu.Unlock()
		q.rcq.push(verbs.WC{ID: wr.ID, Status: verbs.WCWRFlushErr, Op: verbs.WCRecvWriteImm, QPN: q.qpn})
		return nil
	case q.state == verbs.QPSReset:
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x: post receive in state RESET", q.qpn)
	case len(q.rq) >= q.maxRecv:
		q.mu.Unlock()
		return fmt.Errorf("soft verbs: QP %#x: receive queue full (%d)", q.qpn, q.maxRecv)
	}
	wr.SGE = append([]verbs.SGE(nil), wr.SGE...)
	q.rq = append(q.rq, wr)
	q.cond.Broadcast()
	q.mu.Unlock()
	return nil
}

// Close destroys the queue pair: its connections close and its work
// requests are dropped.
func (q *QP) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	q.dropConns()
	q.cond.Broadcast()
	q.mu.Unlock()
	d := q.dev
	d.mu.Lock()
	delete(d.qps, q.qpn)
	d.mu.Unlock()
	q.wg.Wait()
	return nil
}

// Wire format. A requester opens a connection to the responder's device
// with {magic, dest QPN, source QPN} and both prove the job's secret over
// it (exec/hw/auth); the responder serves it only for a queue pair in RTR
// or RTS whose destination is that source QPN; then each request is a 32-byte
// header {op u8, pad 3, rkey u32, raddr u64, len u32, imm u32, add u64}
// followed, for writes, by len bytes; each response is {status u8, pad 3,
// len u32} followed by len bytes (reads and atomics).
const (
	wireMagic = 0x53565242 // "BRVS"
	reqBytes  = 32
	respBytes = 8
	// maxMsg bounds one work request's length (2 GiB, as ibv's byte_len).
	maxMsg = 1 << 31
)

// sender processes the send queue in order, one request on the wire at
// a time, so that send completions come in post order.
func (q *QP) sender() {
	defer q.wg.Done()
	for {
		q.mu.Lock()
		for !q.closed && (len(q.sq) == 0 || q.state != verbs.QPSRTS) {
			q.cond.Wait()
		}
		if q.closed {
			q.mu.Unlock()
			return
		}
		wr := q.sq[0]
		q.sq = q.sq[1:]
		q.busy = true
		q.mu.Unlock()
		st, n := q.execute(wr)
		q.mu.Lock()
		q.busy = false
		q.mu.Unlock()
		if st != verbs.WCSuccess || wr.Signaled {
			q.scq.push(verbs.WC{ID: wr.ID, Status: st, Op: sendOp(wr.Op), Len: n, QPN: q.qpn})
		}
		if st != verbs.WCSuccess {
			q.fail()
		}
	}
}

// local resolves the scatter/gather list of wr.
func (q *QP) local(sges []verbs.SGE, need verbs.Access) ([]span, uint64, bool) {
	var bufs []span
	var total uint64
	for _, s := range sges {
		if s.Len == 0 {
			continue
		}
		b, ok := q.dev.lookup(q.pd, s.LKey, s.Addr, uint64(s.Len), need)
		if !ok {
			return nil, 0, false
		}
		bufs = append(bufs, b)
		total += uint64(s.Len)
	}
	return bufs, total, true
}

func (q *QP) execute(wr verbs.SendWR) (verbs.WCStatus, uint32) {
	need := verbs.Access(0)
	if wr.Op == verbs.OpRead || wr.Op == verbs.OpAtomicFetchAdd {
		need = verbs.AccessLocalWrite
	}
	bufs, total, ok := q.local(wr.SGE, need)
	if !ok || total >= maxMsg {
		return verbs.WCLocProtErr, 0
	}
	if wr.Op == verbs.OpAtomicFetchAdd && total != 8 {
		return verbs.WCLocLenErr, 0
	}
	c, err := q.conn()
	if err != nil {
		return verbs.WCRetryExcErr, 0
	}
	inbound := wr.Op == verbs.OpRead || wr.Op == verbs.OpAtomicFetchAdd
	raw := make([][]byte, len(bufs))
	for i, b := range bufs {
		if !inbound {
			// The NIC reads device memory as it sends: stage it now.
			if err := b.load(); err != nil {
				return verbs.WCLocProtErr, 0
			}
		}
		raw[i] = b.b
	}
	h := encodeReq(wireReq{op: wr.Op, rkey: wr.RKey, raddr: wr.RemoteAddr, n: total, imm: wr.Imm, add: wr.Add})
	if err := q.exchange(c, h[:], wr, raw); err != nil {
		var st wcErr
		if errors.As(err, &st) {
			return verbs.WCStatus(st), 0
		}
		return verbs.WCRetryExcErr, 0
	}
	if inbound {
		for _, b := range bufs {
			if err := b.store(); err != nil {
				return verbs.WCLocProtErr, 0
			}
		}
	}
	return verbs.WCSuccess, uint32(total)
}

// wcErr is a status the responder answered.
type wcErr verbs.WCStatus

func (e wcErr) Error() string { return verbs.WCStatus(e).String() }

func (q *QP) exchange(c net.Conn, h []byte, wr verbs.SendWR, bufs [][]byte) error {
	if _, err := c.Write(h); err != nil {
		return err
	}
	if wr.Op == verbs.OpWrite || wr.Op == verbs.OpWriteImm {
		for _, b := range bufs {
			if _, err := c.Write(b); err != nil {
				return err
			}
		}
	}
	var r [respBytes]byte
	if _, err := io.ReadFull(c, r[:]); err != nil {
		return err
	}
	if r[0] != 0 {
		return wcErr(r[0])
	}
	if wr.Op == verbs.OpRead || wr.Op == verbs.OpAtomicFetchAdd {
		for _, b := range bufs {
			if _, err := io.ReadFull(c, b); err != nil {
				return err
			}
		}
	}
	return nil
}

// conn returns the requester connection, dialling the destination of
// RTR on first use.
func (q *QP) conn() (net.Conn, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.out != nil {
		return q.out, nil
	}
	ip := net.IP(q.attr.DestGID[:]).To4()
	if ip == nil {
		// Only IPv4-mapped GIDs route in this fabric.
		return nil, fmt.Errorf("GID %v is not reachable", net.IP(q.attr.DestGID[:]))
	}
	addr := net.JoinHostPort(ip.String(), strconv.Itoa(int(q.attr.DestLID)))
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, err
	}
	var h [12]byte
	binary.LittleEndian.PutUint32(h[0:], wireMagic)
	binary.LittleEndian.PutUint32(h[4:], q.attr.DestQPN)
	binary.LittleEndian.PutUint32(h[8:], q.qpn)
	if _, err := c.Write(h[:]); err != nil {
		c.Close()
		return nil, err
	}
	if err := auth.Client(c, q.dev.secret, h[:], time.Now().Add(handshakeTimeout)); err != nil {
		c.Close()
		return nil, err
	}
	if q.closed {
		c.Close()
		return nil, errors.New("destroyed")
	}
	q.out = c
	return c, nil
}

// handshakeTimeout bounds a connection's hello and proof.
const handshakeTimeout = 5 * time.Second

func (d *Device) accept() {
	defer d.wg.Done()
	backoff := time.Duration(0)
	for {
		c, err := d.ln.Accept()
		if err != nil {
			d.mu.Lock()
			closed := d.closed
			d.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and friends pass: wait and accept again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.conns[c] = struct{}{}
		d.wg.Add(1)
		d.mu.Unlock()
		go d.serve(c)
	}
}

// serve is the responder side of one requester connection.
func (d *Device) serve(c net.Conn) {
	defer d.wg.Done()
	defer func() {
		c.Close()
		d.mu.Lock()
		delete(d.conns, c)
		d.mu.Unlock()
	}()
	var h [12]byte
	deadline := time.Now().Add(handshakeTimeout)
	_ = c.SetReadDeadline(deadline)
	if _, err := io.ReadFull(c, h[:]); err != nil || binary.LittleEndian.Uint32(h[0:]) != wireMagic {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	if err := auth.Server(c, d.secret, h[:], deadline); err != nil {
		d.mu.Lock()
		d.refused++
		d.mu.Unlock()
		return
	}
	dst, src := binary.LittleEndian.Uint32(h[4:]), binary.LittleEndian.Uint32(h[8:])
	d.mu.Lock()
	q := d.qps[dst]
	d.mu.Unlock()
	if q == nil {
		return // no such QP: the requester's retries run out
	}
	q.mu.Lock()
	if q.closed || (q.state != verbs.QPSRTR && q.state != verbs.QPSRTS) || q.attr.DestQPN != src {
		// Not this QP's peer: refused without touching the peer's
		// connection (a guessed QPN must not displace it).
		q.mu.Unlock()
		return
	}
	if q.in != nil {
		q.in.Close()
	}
	q.in = c
	q.mu.Unlock()
	for {
		var r [reqBytes]byte
		if _, err := io.ReadFull(c, r[:]); err != nil {
			return
		}
		if !q.respond(c, src, r[:]) {
			return
		}
	}
}

// wireReq is a request header (see the wire format above).
type wireReq struct {
	op    verbs.Opcode
	rkey  uint32
	raddr uint64
	n     uint64 // at most 32 bits on the wire
	imm   uint32
	add   uint64
}

func encodeReq(w wireReq) [reqBytes]byte {
	var h [reqBytes]byte
	h[0] = byte(w.op)
	binary.LittleEndian.PutUint32(h[4:], w.rkey)
	binary.LittleEndian.PutUint64(h[8:], w.raddr)
	binary.LittleEndian.PutUint32(h[16:], uint32(w.n))
	binary.LittleEndian.PutUint32(h[20:], w.imm)
	binary.LittleEndian.PutUint64(h[24:], w.add)
	return h
}

// decodeReq reads a reqBytes header; the padding is ignored.
func decodeReq(r []byte) wireReq {
	return wireReq{op: verbs.Opcode(r[0]), rkey: binary.LittleEndian.Uint32(r[4:]), raddr: binary.LittleEndian.Uint64(r[8:]),
		n: uint64(binary.LittleEndian.Uint32(r[16:])), imm: binary.LittleEndian.Uint32(r[20:]), add: binary.LittleEndian.Uint64(r[24:])}
}

// respond executes one request; false ends the connection.
func (q *QP) respond(c net.Conn, src uint32, r []byte) bool {
	w := decodeReq(r)
	op, rkey, raddr, n, imm, add := w.op, w.rkey, w.raddr, w.n, w.imm, w.add
	q.mu.Lock()
	st := verbs.WCSuccess
	var qpNeed, mrNeed verbs.Access
	switch op {
	case verbs.OpWrite, verbs.OpWriteImm:
		qpNeed, mrNeed = verbs.AccessRemoteWrite, verbs.AccessRemoteWrite
	case verbs.OpRead:
		qpNeed, mrNeed = verbs.AccessRemoteRead, verbs.AccessRemoteRead
	case verbs.OpAtomicFetchAdd:
		qpNeed, mrNeed = verbs.AccessRemoteAtomic, verbs.AccessRemoteAtomic
	default:
		st = verbs.WCRemInvReqErr
	}
	switch {
	case q.closed || (q.state != verbs.QPSRTR && q.state != verbs.QPSRTS) || q.attr.DestQPN != src:
		st = verbs.WCRetryExcErr // dropped: the requester's retries run out
	case st == verbs.WCSuccess && q.attr.Access&qpNeed != qpNeed:
		st = verbs.WCRemInvReqErr
	case op == verbs.OpAtomicFetchAdd && (n != 8 || raddr%8 != 0):
		st = verbs.WCRemInvReqErr
	}
	q.mu.Unlock()
	var sp span
	if st == verbs.WCSuccess {
		var ok bool
		if sp, ok = q.dev.lookup(q.pd, rkey, raddr, n, mrNeed); !ok {
			st = verbs.WCRemAccessErr
		} else if op != verbs.OpWrite && op != verbs.OpWriteImm && sp.load() != nil {
			st = verbs.WCRemOpErr // the device memory could not be read
		}
	}
	mem := sp.b
	isWrite := op == verbs.OpWrite || op == verbs.OpWriteImm
	if isWrite {
		var err error
		if st == verbs.WCSuccess {
			if _, err = io.ReadFull(c, mem); err == nil && sp.store() != nil {
				st = verbs.WCRemOpErr // the device memory could not be written
			}
		} else {
			_, err = io.CopyN(io.Discard, c, int64(n))
		}
		if err != nil {
			return false
		}
	}
	if st == verbs.WCSuccess && op == verbs.OpWriteImm {
		// Consume a receive (RNR: wait for one to be posted).
		q.mu.Lock()
		for !q.closed && q.state != verbs.QPSErr && len(q.rq) == 0 {
			q.cond.Wait()
		}
		if q.closed || q.state == verbs.QPSErr {
			q.mu.Unlock()
			st = verbs.WCRemOpErr
		} else {
			rwr := q.rq[0]
			q.rq = q.rq[1:]
			q.mu.Unlock()
			q.rcq.push(verbs.WC{ID: rwr.ID, Status: verbs.WCSuccess, Op: verbs.WCRecvWriteImm, Len: uint32(n), Imm: imm, HasImm: true, QPN: q.qpn})
		}
	}
	var resp [respBytes]byte
	resp[0] = byte(st)
	var payload []byte
	if st == verbs.WCSuccess {
		switch op {
		case verbs.OpRead:
			payload = mem
		case verbs.OpAtomicFetchAdd:
			q.dev.atomic.Lock()
			if sp.dev != nil && sp.load() != nil { // again, under the lock
				st = verbs.WCRemOpErr
			}
			old := binary.LittleEndian.Uint64(mem)
			binary.LittleEndian.PutUint64(mem, old+add)
			if sp.store() != nil {
				st = verbs.WCRemOpErr
			}
			q.dev.atomic.Unlock()
			payload = binary.LittleEndian.AppendUint64(nil, old)
		}
	}
	binary.LittleEndian.PutUint32(resp[4:], uint32(len(payload)))
	if _, err := c.Write(resp[:]); err != nil {
		return false
	}
	if len(payload) > 0 {
		if _, err := c.Write(payload); err != nil {
			return false
		}
	}
	if st == verbs.WCRemAccessErr || st == verbs.WCRemInvReqErr {
		q.fail() // the responder's QP goes to ERROR too
	}
	return st != verbs.WCRetryExcErr || q.State() == verbs.QPSRTR || q.State() == verbs.QPSRTS
}
