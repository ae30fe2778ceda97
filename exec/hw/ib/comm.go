package ib

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
)

// endpoint is one side of a connection: its control socket, queue pairs,
// completion queues and registered FIFO/header memory.
type endpoint struct {
	p      *Plugin
	peer   int
	sender bool

	ctl     net.Conn
	frames  chan []byte
	stop    chan struct{} // closed by close: the reader stops delivering
	ctlErr  atomic.Pointer[error]
	readers sync.WaitGroup

	qps    []verbs.QP
	qpIdx  map[qpKey]int // QP index by local device and QPN
	cqs    []verbs.CQ    // per local device, nil where unused
	fifo   []byte        // sender: entries the receiver writes; receiver: entries it writes from
	fifoMR verbs.MR
	hdrs   []byte // sender: headers it writes from; receiver: headers landing
	hdrMR  verbs.MR
	remote *metadata
	mrs    *mrCache // data buffers' registrations

	// Connection settings: the traffic class and service level of the
	// QPs (the sender's), whether a message stripes over every QP
	// (split) or one per device (nData of them), and (sender) adaptive
	// routing.
	tc, sl int
	split  bool
	nData  int
	ar     bool

	// GPUDirect (gdrcomm.go): GPU buffers' registrations, and (receiver)
	// the flush QPs with the host bytes their reads land in.
	devRegs  map[verbs.DeviceMemory]*devReg
	flushQPs []verbs.QP
	flushMRs []verbs.MR
	flushBuf []byte

	mu     sync.Mutex
	err    error
	closed bool
	wake   atomic.Pointer[func()]
	nextID uint64
	wrs    map[uint64]*request

	// Sender.
	sendQ    []*request
	msg      uint64
	fifoNext uint64
	arrived  [fifoDepth]bool
	// Receiver.
	hdrMsg, dataMsg uint64
	posted          uint64
	slots           [fifoDepth]*request
}

// qpKey names a queue pair of an endpoint: QPNs are unique per device
// only, and a device's completion queue reports its own QPs.
type qpKey struct {
	dev int
	qpn uint32
}

func newEndpoint(p *Plugin, peer int, sender bool) *endpoint {
	return &endpoint{p: p, peer: peer, sender: sender, frames: make(chan []byte, 4), stop: make(chan struct{}), qpIdx: map[qpKey]int{}, wrs: map[uint64]*request{},
		mrs: newMRCache(p.devs)}
}

// attach starts reading control frames from c. The reader outlives the
// setup: EOF on the control socket means the peer is gone.
func (e *endpoint) attach(c net.Conn) {
	e.ctl = c
	e.readers.Add(1)
	go func() {
		defer e.readers.Done()
		defer close(e.frames)
		for {
			b, err := bootstrap.ReadFrame(c, maxCtl, time.Time{})
			if err != nil {
				err = fmt.Errorf("ib plugin: control connection with rank %d lost: %w", e.peer, err)
				e.ctlErr.Store(&err)
				if w := e.wake.Load(); w != nil {
					(*w)()
				}
				return
			}
			// Frames nobody asked for (the setup reads two) must not
			// block the reader, or close would wait for it forever.
			select {
			case e.frames <- b:
			case <-e.stop:
				return
			}
		}
	}()
}

func (e *endpoint) sendCtl(m ctlMsg) error {
	if err := bootstrap.WriteFrame(e.ctl, encodeCtl(m), time.Now().Add(e.p.comm.Timeout())); err != nil {
		return fmt.Errorf("ib plugin: control message to rank %d: %w", e.peer, err)
	}
	return nil
}

// recvCtl returns the next control message, nil while none arrived.
func (e *endpoint) recvCtl() (*ctlMsg, error) {
	select {
	case b, ok := <-e.frames:
		if !ok {
			if p := e.ctlErr.Load(); p != nil {
				return nil, *p
			}
			return nil, fmt.Errorf("ib plugin: control connection with rank %d closed", e.peer)
		}
		var m ctlMsg
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("ib plugin: bad control message from rank %d: %w", e.peer, err)
		}
		return &m, nil
	default:
		return nil, nil
	}
}

// setup creates the QPs (QPs per connection × the larger device count,
// striped over the local devices) in INIT, the completion queues and the
// registered FIFO and header memory.
func (e *endpoint) setup(peerDevs int) error {
	devs := e.p.devs
	if peerDevs < 1 || peerDevs > 1024 {
		return fmt.Errorf("ib plugin: rank %d announces %d devices", e.peer, peerDevs)
	}
	n := e.p.opt.QPsPerConn * max(len(devs), peerDevs)
	st := e.p.opt.Settings
	e.nData = max(len(devs), peerDevs)
	if e.sender {
		e.tc, e.sl, e.split = st.TC, st.SL, st.SplitDataOnQPs
		// As NCCL: adaptive routing when every local device has it.
		e.ar = true
		for _, d := range devs {
			e.ar = e.ar && st.adaptiveRouting(d.port.LinkLayer)
		}
	}
	e.cqs = make([]verbs.CQ, len(devs))
	perDev := (n + len(devs) - 1) / len(devs)
	for i := 0; i < n; i++ {
		d := i % len(devs)
		if e.cqs[d] == nil {
			// Every QP's sends and receives, and the flush reads.
			cq, err := devs[d].ctx.CreateCQ((sendDepth+qDepth)*perDev + sendDepth)
			if err != nil {
				return fmt.Errorf("ib plugin: %s: create CQ: %w", devs[d].ctx.Name(), err)
			}
			e.cqs[d] = cq
		}
		qp, err := devs[d].pd.CreateQP(verbs.QPInit{SendCQ: e.cqs[d], RecvCQ: e.cqs[d], MaxSend: sendDepth, MaxRecv: qDepth})
		if err != nil {
			return fmt.Errorf("ib plugin: %s: create QP: %w", devs[d].ctx.Name(), err)
		}
		e.qps = append(e.qps, qp)
		e.qpIdx[qpKey{d, qp.QPN()}] = i
		if err := qp.Modify(verbs.QPAttr{State: verbs.QPSInit, Port: 1, Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead}); err != nil {
			return fmt.Errorf("ib plugin: QP %d to INIT: %w", i, err)
		}
	}
	var err error
	e.fifo, e.hdrs = make([]byte, fifoDepth*entBytes), make([]byte, fifoDepth*transport.HeaderSize)
	pd := devs[0].pd
	if e.fifoMR, err = pd.RegMR(e.fifo, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return fmt.Errorf("ib plugin: register FIFO: %w", err)
	}
	if e.hdrMR, err = pd.RegMR(e.hdrs, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return fmt.Errorf("ib plugin: register headers: %w", err)
	}
	return e.setupFlush()
}

// localMeta describes this side for the peer.
func (e *endpoint) localMeta() ctlMsg {
	m := &metadata{}
	for i, qp := range e.qps {
		d := e.p.devs[i%len(e.p.devs)]
		m.QPN = append(m.QPN, qp.QPN())
		m.Dev = append(m.Dev, i%len(e.p.devs))
		m.LID = append(m.LID, d.port.LID)
		m.GID = append(m.GID, d.gid)
		m.MTU = append(m.MTU, d.port.MTU)
	}
	if e.sender {
		m.Fifo, m.RKey = e.fifoMR.Addr(), e.fifoMR.RKey()
	}
	m.TC, m.SL, m.Split = e.tc, e.sl, e.split
	if e.p.opt.Settings.ECE {
		// The sender's own options; the receiver's, reduced by the
		// sender's that connectQPs set.
		m.ECE, m.ECEOK = make([]verbs.ECE, len(e.qps)), make([]bool, len(e.qps))
		for i, qp := range e.qps {
			if q, ok := qp.(verbs.ECEQP); ok {
				if ece, ok, err := q.QueryECE(); err == nil && ok {
					m.ECE[i], m.ECEOK[i] = ece, true
				}
			}
		}
	}
	return ctlMsg{Meta: m}
}

// connectQPs moves the QPs to RTR (towards the peer's QP of the same
// index) and RTS, and posts their receives.
func (e *endpoint) connectQPs(m *ctlMsg) error {
	if err := checkMeta(m.Meta, len(e.qps)); err != nil {
		return fmt.Errorf("ib plugin: rank %d: %w", e.peer, err)
	}
	r := m.Meta
	e.remote = r
	if !e.sender {
		// The receiver takes the sender's settings, as NCCL's accept.
		e.tc, e.sl, e.split = r.TC, r.SL, r.Split
	}
	st := e.p.opt.Settings
	for i, qp := range e.qps {
		d := e.p.devs[i%len(e.p.devs)]
		mtu := min(r.MTU[i], d.port.MTU)
		if st.ECE && i < len(r.ECEOK) && r.ECEOK[i] {
			if q, ok := qp.(verbs.ECEQP); ok {
				// A device that cannot take the peer's options runs
				// without ECE, as NCCL's wrapper answers EOPNOTSUPP.
				if err := q.SetECE(r.ECE[i]); err != nil && !errors.Is(err, verbs.ErrNotSupported) {
					return fmt.Errorf("ib plugin: QP %d: set the ECE of rank %d: %w", i, e.peer, err)
				}
			}
		}
		// As NCCL: RoCE always routes by GID, InfiniBand only to a GID
		// with a routable FLID (else by LID).
		global := d.port.LinkLayer == verbs.LinkEthernet || gidFLID(r.GID[i]) != 0
		if err := qp.Modify(verbs.QPAttr{State: verbs.QPSRTR, DestQPN: r.QPN[i], DestLID: r.LID[i], DestGID: r.GID[i],
			Global: global, SGIDIndex: d.gidIndex, PathMTU: mtu, SL: e.sl, TrafficClass: e.tc}); err != nil {
			return fmt.Errorf("ib plugin: QP %d to RTR (rank %d): %w", i, e.peer, err)
		}
		if err := qp.Modify(verbs.QPAttr{State: verbs.QPSRTS, Timeout: st.Timeout, RetryCount: st.RetryCnt, RNRRetry: 7}); err != nil {
			return fmt.Errorf("ib plugin: QP %d to RTS (rank %d): %w", i, e.peer, err)
		}
		for k := 0; k < qDepth; k++ {
			if err := qp.PostRecv(verbs.RecvWR{ID: uint64(i)}); err != nil {
				return fmt.Errorf("ib plugin: QP %d: post receive: %w", i, err)
			}
		}
	}
	return nil
}

func (e *endpoint) setWake(f func()) {
	e.wake.Store(&f)
	for _, cq := range e.cqs {
		if n, ok := cq.(verbs.Notifier); ok {
			n.SetNotify(f)
		}
	}
}

// close destroys the QPs and memory and closes the control socket.
func (e *endpoint) close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	close(e.stop)
	if e.ctl != nil {
		e.ctl.Close()
	}
	e.readers.Wait()
	var errs []error
	for _, qp := range e.qps {
		errs = append(errs, qp.Close())
	}
	e.mu.Lock()
	for _, r := range e.wrs {
		r.release()
	}
	errs = append(errs, e.mrs.close(), e.closeGDR())
	e.mu.Unlock()
	for _, mr := range []verbs.MR{e.fifoMR, e.hdrMR} {
		if mr != nil {
			errs = append(errs, mr.Close())
		}
	}
	for _, cq := range e.cqs {
		if cq != nil {
			errs = append(errs, cq.Close())
		}
	}
	return errors.Join(errs...)
}

// request is a transfer of the plugin.
type request struct {
	e       *endpoint
	id      uint64
	hdr     []byte
	data    []byte
	msg     uint64
	stage   int // sender: 0 header to post, 1 data to post, 2 posted
	pending int // sender: send completions outstanding
	got     int // receiver: data chunks arrived
	need    int
	mrs     []*mrEntry // per local device, from the endpoint's cache
	done    bool
	// dev is the GPU buffer of a GPUDirect transfer (data unused): its
	// registrations and the bytes [doff, doff+dn) of it.
	dev      *devReg
	doff, dn int
}

// size is the payload's byte count.
func (r *request) size() int {
	if r.dev != nil {
		return r.dn
	}
	return len(r.data)
}

// addr is the payload's local address (a device address for GPUDirect).
func (r *request) addr() uint64 {
	if r.dev != nil {
		return r.dev.mem.Addr() + uint64(r.doff)
	}
	return addrOf(r.data)
}

// lkey is the payload's local key on local device d.
func (r *request) lkey(d int) uint32 {
	if r.dev != nil {
		return r.dev.mrs[d].LKey()
	}
	return r.mrs[d].mr.LKey()
}

// Test reports whether the request completed, progressing the endpoint.
func (r *request) Test() (bool, error) {
	e := r.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return false, err
	}
	return r.done, nil
}

// nchunks is how many stripes an n-byte payload takes: over every QP
// with NCCL_IB_SPLIT_DATA_ON_QPS, else over one QP per device.
func (e *endpoint) nchunks(n int) int {
	q := e.nData
	if e.split {
		q = len(e.qps)
	}
	return min(q, max(1, (n+stripeMin-1)/stripeMin))
}

// failLocked records the first error of the connection.
func (e *endpoint) failLocked(err error) error {
	if e.err == nil {
		e.err = err
	}
	return e.err
}

// progress polls the completion queues and advances the sends. It runs
// with e.mu held.
func (e *endpoint) progress() error {
	if e.err != nil {
		return e.err
	}
	if e.closed {
		return e.failLocked(fmt.Errorf("ib plugin: connection with rank %d closed", e.peer))
	}
	var wcs [32]verbs.WC
	for d, cq := range e.cqs {
		if cq == nil {
			continue
		}
		for {
			n, err := cq.Poll(wcs[:])
			if err != nil {
				return e.failLocked(fmt.Errorf("ib plugin: connection with rank %d: %w", e.peer, err))
			}
			for _, wc := range wcs[:n] {
				if err := e.complete(d, wc); err != nil {
					return e.failLocked(err)
				}
			}
			if n < len(wcs) {
				break
			}
		}
	}
	if e.sender {
		if err := e.postSends(); err != nil {
			return e.failLocked(err)
		}
	}
	// Frames after the setup are not expected; the socket's loss is.
	if p := e.ctlErr.Load(); p != nil {
		return e.failLocked(*p)
	}
	return nil
}

// complete handles one work completion.
func (e *endpoint) complete(dev int, wc verbs.WC) error {
	if wc.Status != verbs.WCSuccess {
		return fmt.Errorf("ib plugin: connection with rank %d: QP %#x: %s (opcode %d)", e.peer, wc.QPN, wc.Status, wc.Op)
	}
	if wc.Op != verbs.WCRecvWriteImm {
		r := e.wrs[wc.ID]
		if r == nil {
			return nil // the receiver's FIFO posts complete here
		}
		if r.pending--; r.pending == 0 && r.stage == 2 {
			e.finish(r)
		}
		return nil
	}
	qi, ok := e.qpIdx[qpKey{dev, wc.QPN}]
	if !ok {
		return fmt.Errorf("ib plugin: completion of unknown QP %#x", wc.QPN)
	}
	if err := e.qps[qi].PostRecv(verbs.RecvWR{ID: uint64(qi)}); err != nil {
		return fmt.Errorf("ib plugin: repost receive: %w", err)
	}
	kind, f := wc.Imm>>16, int(wc.Imm&0xffff)
	if f >= fifoDepth {
		return fmt.Errorf("ib plugin: rank %d wrote slot %d", e.peer, f)
	}
	switch {
	case kind == kindFifo && e.sender:
		e.arrived[f] = true
	case kind == kindHdr && !e.sender:
		r := e.slots[f]
		if r == nil || r.hdr == nil {
			return fmt.Errorf("ib plugin: rank %d wrote a header into free slot %d", e.peer, f)
		}
		copy(r.hdr, e.hdrs[f*transport.HeaderSize:(f+1)*transport.HeaderSize])
		e.slots[f] = nil
		e.finish(r)
	case kind == kindData && !e.sender:
		r := e.slots[f]
		if r == nil || r.hdr != nil {
			return fmt.Errorf("ib plugin: rank %d wrote data into free slot %d", e.peer, f)
		}
		if r.got++; r.got == r.need {
			e.slots[f] = nil
			e.finish(r)
		}
	default:
		return fmt.Errorf("ib plugin: rank %d sent immediate %#x", e.peer, wc.Imm)
	}
	return nil
}

func (e *endpoint) finish(r *request) {
	r.done = true
	delete(e.wrs, r.id)
	r.release()
}

// release lets go of the request's registrations (they stay cached).
func (r *request) release() {
	for _, m := range r.mrs {
		r.e.mrs.put(m)
	}
	r.mrs = nil
}

// register gets b registered on every local device, from the cache.
func (e *endpoint) register(r *request, b []byte, access verbs.Access) error {
	for d, dev := range e.p.devs {
		acc := access
		if dev.relaxed {
			acc |= verbs.AccessRelaxedOrdering
		}
		m, err := e.mrs.get(d, b, acc)
		if m != nil {
			r.mrs = append(r.mrs, m)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func addrOf(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// checkMeta checks a peer's queue-pair metadata for nqps queue pairs
// before any of it is used as an index.
func checkMeta(r *metadata, nqps int) error {
	if r == nil || len(r.QPN) != nqps || len(r.LID) != len(r.QPN) || len(r.GID) != len(r.QPN) || len(r.MTU) != len(r.QPN) || len(r.Dev) != len(r.QPN) {
		return fmt.Errorf("metadata for a different QP count (%d here)", nqps)
	}
	for _, d := range r.Dev {
		if d < 0 || d >= maxDevs {
			return fmt.Errorf("metadata names device %d", d)
		}
	}
	switch {
	case r.TC < 0 || r.TC > 255:
		return fmt.Errorf("metadata names traffic class %d", r.TC)
	case r.SL < 0 || r.SL > 15:
		return fmt.Errorf("metadata names service level %d", r.SL)
	case len(r.ECE) != len(r.ECEOK) || len(r.ECE) != 0 && len(r.ECE) != nqps:
		return fmt.Errorf("metadata has %d ECE options and %d flags for %d QPs", len(r.ECE), len(r.ECEOK), nqps)
	}
	return nil
}

// fifoEntry is one FIFO slot: {addr u64, size u32, kind u32, msg u64, rkey
// u32 per device of the receiver (maxDevs)}.
type fifoEntry struct {
	addr  uint64
	size  uint32
	kind  uint32
	msg   uint64
	rkeys [maxDevs]uint32
}

func encodeEntry(b []byte, f fifoEntry) {
	le := binary.LittleEndian
	le.PutUint64(b, f.addr)
	le.PutUint32(b[8:], f.size)
	le.PutUint32(b[12:], f.kind)
	le.PutUint64(b[16:], f.msg)
	for i, k := range f.rkeys {
		le.PutUint32(b[24+4*i:], k)
	}
}

func decodeEntry(b []byte) fifoEntry {
	le := binary.LittleEndian
	f := fifoEntry{addr: le.Uint64(b), size: le.Uint32(b[8:]), kind: le.Uint32(b[12:]), msg: le.Uint64(b[16:])}
	for i := range f.rkeys {
		f.rkeys[i] = le.Uint32(b[24+4*i:])
	}
	return f
}

// entry reads FIFO slot f.
func (e *endpoint) entry(f int) (addr uint64, size uint32, msg uint64, kind uint32, rkeys []uint32) {
	x := decodeEntry(e.fifo[f*entBytes : (f+1)*entBytes])
	return x.addr, x.size, x.msg, x.kind, x.rkeys[:]
}

// postSends writes what the FIFO allows, in message order.
func (e *endpoint) postSends() error {
	for len(e.sendQ) > 0 {
		r := e.sendQ[0]
		if r.stage == 0 || r.stage == 1 && r.size() > 0 {
			f := int(e.fifoNext % fifoDepth)
			if !e.arrived[f] {
				return nil
			}
			addr, size, msg, kind, rkeys := e.entry(f)
			want := uint32(kindHdr)
			if r.stage == 1 {
				want = kindData
			}
			if msg != r.msg || kind != want {
				return fmt.Errorf("ib plugin: rank %d posted entry (message %d, kind %d) for message %d kind %d", e.peer, msg, kind, r.msg, want)
			}
			e.arrived[f] = false
			e.fifoNext++
			if r.stage == 0 {
				h := e.hdrs[f*transport.HeaderSize : (f+1)*transport.HeaderSize]
				copy(h, r.hdr)
				if size != transport.HeaderSize {
					return fmt.Errorf("ib plugin: rank %d posted a %d-byte header buffer", e.peer, size)
				}
				if err := e.write(0, r, h, e.hdrMR.LKey(), addr, rkeys[e.remote.Dev[0]], kindHdr<<16|uint32(f)); err != nil {
					return err
				}
			} else {
				if int(size) != r.size() {
					return fmt.Errorf("ib plugin: rank %d posted %d bytes for a %d-byte message", e.peer, size, r.size())
				}
				if r.dev == nil {
					if err := e.register(r, r.data, 0); err != nil {
						return err
					}
				}
				k := e.nchunks(r.size())
				c := (r.size() + k - 1) / k
				for i := 0; i < k; i++ {
					lo, hi := i*c, min((i+1)*c, r.size())
					qi := int((r.msg + uint64(i)) % uint64(len(e.qps)))
					lkey := r.lkey(qi % len(e.p.devs))
					src := r.addr() + uint64(lo)
					imm := kindData<<16 | uint32(f)
					if e.ar && hi-lo > e.p.opt.Settings.ARThreshold {
						// Adaptive routing may reorder the stripe's
						// packets: the data goes as a plain write, and
						// a zero-byte write with immediate after it on
						// the same QP completes it.
						if err := e.postWrite(qi, r, verbs.OpWrite, src, hi-lo, lkey, addr+uint64(lo), rkeys[e.remote.Dev[qi]], 0); err != nil {
							return err
						}
						if err := e.postWrite(qi, r, verbs.OpWriteImm, 0, 0, 0, addr+uint64(hi), rkeys[e.remote.Dev[qi]], imm); err != nil {
							return err
						}
						continue
					}
					if err := e.postWrite(qi, r, verbs.OpWriteImm, src, hi-lo, lkey, addr+uint64(lo), rkeys[e.remote.Dev[qi]], imm); err != nil {
						return err
					}
				}
			}
		}
		r.stage++
		if r.stage == 1 && r.size() == 0 {
			r.stage = 2
		}
		if r.stage == 2 {
			e.sendQ = e.sendQ[1:]
			if r.pending == 0 {
				e.finish(r)
			}
		}
	}
	return nil
}

// write posts an RDMA write with immediate from registered memory on QP qi.
func (e *endpoint) write(qi int, r *request, b []byte, lkey uint32, raddr uint64, rkey, imm uint32) error {
	return e.postWrite(qi, r, verbs.OpWriteImm, addrOf(b), len(b), lkey, raddr, rkey, imm)
}

// postWrite posts a signaled RDMA write (with immediate for OpWriteImm) of
// the n bytes at local address src (none when n is 0) on QP qi for
// request r.
func (e *endpoint) postWrite(qi int, r *request, op verbs.Opcode, src uint64, n int, lkey uint32, raddr uint64, rkey, imm uint32) error {
	wr := verbs.SendWR{ID: r.id, Op: op, Signaled: true, Imm: imm, RemoteAddr: raddr, RKey: rkey}
	if n > 0 {
		wr.SGE = []verbs.SGE{{Addr: src, Len: uint32(n), LKey: lkey}}
	}
	if err := e.qps[qi].PostSend(wr); err != nil {
		return fmt.Errorf("ib plugin: write to rank %d: %w", e.peer, err)
	}
	r.pending++
	return nil
}

func (e *endpoint) newRequest() *request {
	e.nextID++
	r := &request{e: e, id: e.nextID}
	e.wrs[r.id] = r
	return r
}

// sendComm is the send side.
type sendComm struct{ e *endpoint }

// Isend queues hdr and data; they are written as the receiver posts
// buffers.
func (s *sendComm) Isend(hdr, data []byte) (transport.Request, error) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	if len(hdr) != transport.HeaderSize {
		return nil, fmt.Errorf("ib plugin: header of %d bytes", len(hdr))
	}
	if len(e.sendQ) >= fifoDepth {
		return nil, fmt.Errorf("ib plugin: more than %d sends in flight to rank %d", fifoDepth, e.peer)
	}
	r := e.newRequest()
	r.hdr, r.data, r.msg = hdr, data, e.msg
	e.msg++
	e.sendQ = append(e.sendQ, r)
	if err := e.postSends(); err != nil {
		return nil, e.failLocked(err)
	}
	return r, nil
}

func (s *sendComm) SetWake(f func()) { s.e.setWake(f) }
func (s *sendComm) Close() error     { return s.e.close() }

// recvComm is the receive side.
type recvComm struct{ e *endpoint }

// post writes a FIFO entry for r into the sender's FIFO.
func (e *endpoint) post(r *request, kind uint32, addr uint64, rkeys []uint32, size int) error {
	f := int(e.posted % fifoDepth)
	if e.slots[f] != nil {
		return fmt.Errorf("ib plugin: FIFO slot %d still in use (rank %d)", f, e.peer)
	}
	b := e.fifo[f*entBytes : (f+1)*entBytes]
	x := fifoEntry{addr: addr, size: uint32(size), kind: kind, msg: r.msg}
	copy(x.rkeys[:], rkeys)
	encodeEntry(b, x)
	wr := verbs.SendWR{ID: 0, Op: verbs.OpWriteImm, Signaled: true, Imm: kindFifo<<16 | uint32(f), RemoteAddr: e.remote.Fifo + uint64(f*entBytes), RKey: e.remote.RKey,
		SGE: []verbs.SGE{{Addr: addrOf(b), Len: entBytes, LKey: e.fifoMR.LKey()}}}
	if err := e.qps[0].PostSend(wr); err != nil {
		return fmt.Errorf("ib plugin: post FIFO entry to rank %d: %w", e.peer, err)
	}
	e.slots[f] = r
	e.posted++
	return nil
}

// IrecvHeader posts the header landing slot into the sender's FIFO.
func (c *recvComm) IrecvHeader(hdr []byte) (transport.Request, error) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	if len(hdr) != transport.HeaderSize {
		return nil, fmt.Errorf("ib plugin: header buffer of %d bytes", len(hdr))
	}
	r := e.newRequest()
	r.hdr, r.msg = hdr, e.hdrMsg
	e.hdrMsg++
	f := int(e.posted % fifoDepth)
	if err := e.post(r, kindHdr, e.hdrMR.Addr()+uint64(f*transport.HeaderSize), []uint32{e.hdrMR.RKey()}, transport.HeaderSize); err != nil {
		return nil, e.failLocked(err)
	}
	return r, nil
}

// Irecv registers data and posts it into the sender's FIFO; an empty
// payload completes at once.
func (c *recvComm) Irecv(data []byte) (transport.Request, error) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	r := e.newRequest()
	r.data, r.msg = data, e.dataMsg
	e.dataMsg++
	if len(data) == 0 {
		e.finish(r)
		return r, nil
	}
	if err := e.register(r, data, verbs.AccessLocalWrite|verbs.AccessRemoteWrite); err != nil {
		return nil, e.failLocked(err)
	}
	r.need = e.nchunks(len(data))
	var rkeys []uint32
	for _, m := range r.mrs {
		rkeys = append(rkeys, m.mr.RKey())
	}
	if err := e.post(r, kindData, addrOf(data), rkeys, len(data)); err != nil {
		return nil, e.failLocked(err)
	}
	return r, nil
}

func (c *recvComm) SetWake(f func()) { c.e.setWake(f) }
func (c *recvComm) Close() error     { return c.e.close() }
