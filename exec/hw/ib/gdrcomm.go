package ib

import (
	"errors"
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
)

// GPUDirect RDMA: GPU buffers registered with the NICs (verbs.DeviceRegistrar:
// dma-buf or nvidia-peermem on an HCA, CUDA copies in the software
// provider), sends that the NIC reads from GPU memory (IsendDevice),
// receives it writes into GPU memory (IrecvDevice) and the flush after
// such a receive (Iflush), as NCCL's IB plugin does them: the receiving
// end of a connection owns one flush QP per device, connected to itself,
// and a flush is an RDMA read of one byte of the received buffer into
// host memory on it: the read cannot complete before the NIC's earlier
// writes into the GPU's memory reached it.

// devReg is a GPU buffer's registration on every local device.
type devReg struct {
	mem verbs.DeviceMemory
	mrs []verbs.MR
}

// GDRSupported reports whether every device of the plugin registers GPU
// memory (its protection domain is a verbs.DeviceRegistrar), which NCCL's
// GDR support check and the flush QPs need.
func (p *Plugin) GDRSupported() bool {
	for _, d := range p.devs {
		if _, ok := d.pd.(verbs.DeviceRegistrar); !ok {
			return false
		}
	}
	return len(p.devs) > 0
}

// registerDevice registers mem on every local device once per endpoint
// (with remote read for the flush); the registrations go with the
// endpoint.
func (e *endpoint) registerDevice(mem verbs.DeviceMemory) (*devReg, error) {
	if mem == nil || mem.Len() <= 0 {
		return nil, errors.New("ib plugin: empty GPU buffer")
	}
	if r := e.devRegs[mem]; r != nil {
		return r, nil
	}
	r := &devReg{mem: mem}
	for _, d := range e.p.devs {
		dr, ok := d.pd.(verbs.DeviceRegistrar)
		if !ok {
			r.close()
			return nil, fmt.Errorf("ib plugin: %s cannot register GPU memory: %w", d.ctx.Name(), verbs.ErrNotSupported)
		}
		acc := verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead
		if d.relaxed {
			acc |= verbs.AccessRelaxedOrdering
		}
		mr, err := dr.RegDevice(mem, acc)
		if err != nil {
			r.close()
			return nil, fmt.Errorf("ib plugin: %s: register GPU memory at %#x: %w", d.ctx.Name(), mem.Addr(), err)
		}
		r.mrs = append(r.mrs, mr)
	}
	if e.devRegs == nil {
		e.devRegs = map[verbs.DeviceMemory]*devReg{}
	}
	e.devRegs[mem] = r
	return r, nil
}

func (r *devReg) close() error {
	var errs []error
	for _, m := range r.mrs {
		errs = append(errs, m.Close())
	}
	r.mrs = nil
	return errors.Join(errs...)
}

// checkRange checks [off, off+n) lies in mem.
func checkRange(mem verbs.DeviceMemory, off, n int) error {
	if mem == nil || off < 0 || n < 0 || off+n > mem.Len() {
		l := 0
		if mem != nil {
			l = mem.Len()
		}
		return fmt.Errorf("ib plugin: bytes [%d, %d) of a %d-byte GPU buffer", off, off+n, l)
	}
	return nil
}

// setupFlush creates, on a receiving end, one flush QP per device
// connected to itself and the host byte its reads land in, unless
// NCCL_GDR_FLUSH_DISABLE or a device without GPUDirect says no flush can
// happen (NCCL's flushEnabled).
func (e *endpoint) setupFlush() error {
	if e.sender || e.p.opt.Settings.GDRFlushDisable || !e.p.GDRSupported() {
		return nil
	}
	e.flushBuf = make([]byte, 4*len(e.p.devs))
	for i, d := range e.p.devs {
		mr, err := d.pd.RegMR(e.flushBuf[4*i:4*i+4], verbs.AccessLocalWrite)
		if err != nil {
			return fmt.Errorf("ib plugin: %s: register the flush buffer: %w", d.ctx.Name(), err)
		}
		e.flushMRs = append(e.flushMRs, mr)
		qp, err := d.pd.CreateQP(verbs.QPInit{SendCQ: e.cqs[i], RecvCQ: e.cqs[i], MaxSend: sendDepth, MaxRecv: 1})
		if err != nil {
			return fmt.Errorf("ib plugin: %s: create the flush QP: %w", d.ctx.Name(), err)
		}
		e.flushQPs = append(e.flushQPs, qp)
		global := d.port.LinkLayer == verbs.LinkEthernet || gidFLID(d.gid) != 0
		for _, a := range []verbs.QPAttr{
			{State: verbs.QPSInit, Port: 1, Access: verbs.AccessLocalWrite | verbs.AccessRemoteRead},
			{State: verbs.QPSRTR, DestQPN: qp.QPN(), DestLID: d.port.LID, DestGID: d.gid, Global: global, SGIDIndex: d.gidIndex, PathMTU: d.port.MTU},
			{State: verbs.QPSRTS, Timeout: e.p.opt.Settings.Timeout, RetryCount: e.p.opt.Settings.RetryCnt, RNRRetry: 7},
		} {
			if err := qp.Modify(a); err != nil {
				return fmt.Errorf("ib plugin: %s: flush QP to %v: %w", d.ctx.Name(), a.State, err)
			}
		}
	}
	return nil
}

// closeFlush releases the flush QPs, their buffer and the GPU buffers'
// registrations (with e.mu held or the endpoint closed).
func (e *endpoint) closeGDR() error {
	var errs []error
	for _, qp := range e.flushQPs {
		errs = append(errs, qp.Close())
	}
	for _, mr := range e.flushMRs {
		errs = append(errs, mr.Close())
	}
	for _, r := range e.devRegs {
		errs = append(errs, r.close())
	}
	e.flushQPs, e.flushMRs, e.devRegs = nil, nil, nil
	return errors.Join(errs...)
}

// IsendDevice queues hdr and the n bytes at off of the GPU buffer mem,
// which the NIC reads (GPUDirect RDMA send: model.Conn.SendGDR).
func (s *sendComm) IsendDevice(hdr []byte, mem verbs.DeviceMemory, off, n int) (transport.Request, error) {
	e := s.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	if len(hdr) != transport.HeaderSize {
		return nil, fmt.Errorf("ib plugin: header of %d bytes", len(hdr))
	}
	if err := checkRange(mem, off, n); err != nil {
		return nil, err
	}
	if len(e.sendQ) >= fifoDepth {
		return nil, fmt.Errorf("ib plugin: more than %d sends in flight to rank %d", fifoDepth, e.peer)
	}
	reg, err := e.registerDevice(mem)
	if err != nil {
		return nil, e.failLocked(err)
	}
	r := e.newRequest()
	r.hdr, r.dev, r.doff, r.dn, r.msg = hdr, reg, off, n, e.msg
	e.msg++
	e.sendQ = append(e.sendQ, r)
	if err := e.postSends(); err != nil {
		return nil, e.failLocked(err)
	}
	return r, nil
}

// IrecvDevice posts the n bytes at off of the GPU buffer mem into the
// sender's FIFO: the NIC writes the payload there (GPUDirect RDMA
// receive: model.Conn.RecvGDR). A Simple receive then flushes (Iflush)
// where FlushesReceive says so.
func (c *recvComm) IrecvDevice(mem verbs.DeviceMemory, off, n int) (transport.Request, error) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	if err := checkRange(mem, off, n); err != nil {
		return nil, err
	}
	r := e.newRequest()
	r.msg = e.dataMsg
	e.dataMsg++
	if n == 0 {
		e.finish(r)
		return r, nil
	}
	reg, err := e.registerDevice(mem)
	if err != nil {
		return nil, e.failLocked(err)
	}
	r.dev, r.doff, r.dn = reg, off, n
	r.need = e.nchunks(n)
	rkeys := make([]uint32, len(reg.mrs))
	for i, m := range reg.mrs {
		rkeys[i] = m.RKey()
	}
	if err := e.post(r, kindData, mem.Addr()+uint64(off), rkeys, n); err != nil {
		return nil, e.failLocked(err)
	}
	return r, nil
}

// FlushEnabled reports whether the connection has flush QPs (a receiving
// end whose devices do GPUDirect RDMA, without NCCL_GDR_FLUSH_DISABLE).
func (c *recvComm) FlushEnabled() bool {
	c.e.mu.Lock()
	defer c.e.mu.Unlock()
	return len(c.e.flushQPs) > 0
}

// Iflush makes a GPUDirect receive into mem (the bytes [off, off+n) that
// completed) visible to the GPU: an RDMA read of its first byte on every
// device's flush QP. Without flush QPs, or for an empty receive, the
// request is complete at once (NCCL returns no request).
func (c *recvComm) Iflush(mem verbs.DeviceMemory, off, n int) (transport.Request, error) {
	e := c.e
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.progress(); err != nil {
		return nil, err
	}
	if err := checkRange(mem, off, n); err != nil {
		return nil, err
	}
	r := e.newRequest()
	if len(e.flushQPs) == 0 || n == 0 {
		e.finish(r)
		return r, nil
	}
	reg := e.devRegs[mem]
	if reg == nil {
		return nil, e.failLocked(fmt.Errorf("ib plugin: flush of a GPU buffer at %#x this connection never received into", mem.Addr()))
	}
	r.stage = 2 // complete once every read completed (complete's send path)
	for d, qp := range e.flushQPs {
		wr := verbs.SendWR{ID: r.id, Op: verbs.OpRead, Signaled: true, RemoteAddr: mem.Addr() + uint64(off), RKey: reg.mrs[d].RKey(),
			SGE: []verbs.SGE{{Addr: e.flushMRs[d].Addr(), Len: 1, LKey: e.flushMRs[d].LKey()}}}
		if err := qp.PostSend(wr); err != nil {
			return nil, e.failLocked(fmt.Errorf("ib plugin: flush read (rank %d): %w", e.peer, err))
		}
		r.pending++
	}
	return r, nil
}
