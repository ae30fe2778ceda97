package ib_test

import (
	"bytes"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
)

// countProvider wraps a provider and counts the memory registrations made
// through it, and their deregistrations; it remembers every region (and
// the protection domain it belongs to).
type countProvider struct {
	verbs.Provider
	mu     sync.Mutex
	regs   int
	deregs int
	mrs    []*countMR
}

type countCtx struct {
	verbs.Context
	p *countProvider
}

type countPD struct {
	verbs.PD
	p *countProvider
}

type countMR struct {
	verbs.MR
	p      *countProvider
	pd     *countPD
	closed bool
}

func (p *countProvider) Open(name string) (verbs.Context, error) {
	c, err := p.Provider.Open(name)
	if err != nil {
		return nil, err
	}
	return &countCtx{Context: c, p: p}, nil
}

func (c *countCtx) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	if err != nil {
		return nil, err
	}
	return &countPD{PD: pd, p: c.p}, nil
}

func (d *countPD) RegMR(b []byte, a verbs.Access) (verbs.MR, error) {
	m, err := d.PD.RegMR(b, a)
	if err != nil {
		return nil, err
	}
	cm := &countMR{MR: m, p: d.p, pd: d}
	d.p.mu.Lock()
	d.p.regs++
	d.p.mrs = append(d.p.mrs, cm)
	d.p.mu.Unlock()
	return cm, nil
}

func (m *countMR) Close() error {
	m.p.mu.Lock()
	if !m.closed {
		m.closed = true
		m.p.deregs++
	}
	m.p.mu.Unlock()
	return m.MR.Close()
}

func (p *countProvider) counts() (regs, deregs int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.regs, p.deregs
}

// region is the registration of exactly b, if any.
func (p *countProvider) region(b []byte) *countMR {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, m := range p.mrs {
		if m.Addr() == uint64(uintptr(unsafe.Pointer(&b[0]))) && m.Len() == len(b) {
			return m
		}
	}
	return nil
}

// message sends hdr and data over sc and receives them into buf over rc.
func message(t *testing.T, sc transport.SendComm, rc transport.RecvComm, data, buf []byte) {
	t.Helper()
	hdr := bytes.Repeat([]byte{7}, transport.HeaderSize)
	sr, err := sc.Isend(hdr, data)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, transport.HeaderSize)
	hr, err := rc.IrecvHeader(got)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, hr, 5*time.Second, sr); err != nil {
		t.Fatal(err)
	}
	clear(buf)
	dr, err := rc.Irecv(buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, dr, 5*time.Second, sr); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, sr, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, data) || !bytes.Equal(got, hdr) {
		t.Fatalf("message of %d bytes corrupted", len(data))
	}
}

// TestMRCacheRegistersOnce: ten sends of the same buffer into the same
// buffer register each once per device (and a part of it not again); a
// new buffer registers anew; closing the connection deregisters every
// region it registered.
func TestMRCacheRegistersOnce(t *testing.T) {
	var cps [2]*countProvider
	devs := [2]int{1, 2}
	p := newPairWith(t, pairOpt{devs: devs, qps: 2, wrap: func(r int, sp *soft.Provider) verbs.Provider {
		cps[r] = &countProvider{Provider: sp}
		return cps[r]
	}})
	sc, rc := p.connect(t)
	data, buf := make([]byte, 200<<10), make([]byte, 200<<10)
	for i := range data {
		data[i] = byte(i * 13)
	}
	message(t, sc, rc, data, buf)
	s1, _ := cps[0].counts()
	r1, _ := cps[1].counts()
	for i := 0; i < 9; i++ {
		message(t, sc, rc, data, buf)
	}
	message(t, sc, rc, data[:1000], buf[100:1100])
	s2, _ := cps[0].counts()
	r2, _ := cps[1].counts()
	t.Logf("registrations after one message: sender %d, receiver %d; after eleven: %d, %d", s1, r1, s2, r2)
	if s2 != s1 || r2 != r1 {
		t.Errorf("repeated sends of one buffer registered again: sender %d -> %d, receiver %d -> %d", s1, s2, r1, r2)
	}
	data2, buf2 := bytes.Repeat([]byte{3}, 5000), make([]byte, 5000)
	message(t, sc, rc, data2, buf2)
	s3, _ := cps[0].counts()
	r3, _ := cps[1].counts()
	if s3 != s2+devs[0] || r3 != r2+devs[1] {
		t.Errorf("a new buffer: sender %d -> %d, receiver %d -> %d registrations; want one more per device", s2, s3, r2, r3)
	}
	if m := cps[1].region(buf); m == nil || m.closed {
		t.Fatalf("the receive buffer's region: %v", m)
	}
	sc.Close()
	rc.Close()
	for r, cp := range cps {
		if regs, deregs := cp.counts(); regs != deregs {
			t.Errorf("rank %d: %d registrations, %d deregistrations after close", r, regs, deregs)
		}
	}
}

// TestMRCacheStaleKeyRejected: the rkey of a cached receive buffer works
// while the connection is open (a write with it lands) and is refused
// once the connection closed (its region was deregistered).
func TestMRCacheStaleKeyRejected(t *testing.T) {
	var cps [2]*countProvider
	p := newPairWith(t, pairOpt{devs: [2]int{1, 1}, qps: 1, wrap: func(r int, sp *soft.Provider) verbs.Provider {
		cps[r] = &countProvider{Provider: sp}
		return cps[r]
	}})
	sc, rc := p.connect(t)
	data, buf := bytes.Repeat([]byte{9}, 4096), make([]byte, 4096)
	message(t, sc, rc, data, buf)
	m := cps[1].region(buf)
	if m == nil {
		t.Fatal("no region of the receive buffer")
	}
	// A QP of the test on rank 0's device, and one in the protection
	// domain of the region on rank 1's device.
	req := rawQPs(t, cps[0], "r0_0", cps[1], "r1_0", m.pd)
	src := []byte("stale?!!")
	write := func() verbs.WC {
		t.Helper()
		smr, err := req.pd.RegMR(src, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer smr.Close()
		if err := req.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpWrite, Signaled: true, RemoteAddr: m.Addr(), RKey: m.RKey(),
			SGE: []verbs.SGE{{Addr: smr.Addr(), Len: uint32(len(src)), LKey: smr.LKey()}}}); err != nil {
			t.Fatal(err)
		}
		return pollOne(t, req.cq)
	}
	if wc := write(); wc.Status != verbs.WCSuccess || string(buf[:len(src)]) != string(src) {
		t.Fatalf("write with the live key: %+v, buffer %q", wc, buf[:len(src)])
	}
	sc.Close()
	rc.Close()
	if !m.closed {
		t.Fatal("the region was not deregistered when its connection closed")
	}
	clear(buf)
	if wc := write(); wc.Status != verbs.WCRemAccessErr {
		t.Errorf("write with the stale key: %+v (%v), want a remote access error", wc, wc.Status)
	}
	if buf[0] != 0 {
		t.Error("the write with the stale key landed")
	}
}

type rawQP struct {
	pd verbs.PD
	cq verbs.CQ
	qp verbs.QP
}

// rawQPs connects a QP on device an of provider a to one on device bn of
// b in protection domain bpd, by the IPv4-mapped RoCE v2 GID (index 3 of
// the soft devices), and returns the first.
func rawQPs(t *testing.T, a verbs.Provider, an string, b verbs.Provider, bn string, bpd verbs.PD) rawQP {
	t.Helper()
	var s [2]rawQP
	var ctxs [2]verbs.Context
	for i, pv := range []verbs.Provider{a, b} {
		var err error
		if ctxs[i], err = pv.Open([]string{an, bn}[i]); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if s[i].pd, err = ctxs[i].AllocPD(); err != nil {
				t.Fatal(err)
			}
		} else {
			s[i].pd = bpd
		}
		if s[i].cq, err = ctxs[i].CreateCQ(16); err != nil {
			t.Fatal(err)
		}
		if s[i].qp, err = s[i].pd.CreateQP(verbs.QPInit{SendCQ: s[i].cq, RecvCQ: s[i].cq, MaxSend: 4, MaxRecv: 4}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s[i].qp.Close() })
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSInit, Port: 1, Access: verbs.AccessLocalWrite | verbs.AccessRemoteWrite}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s {
		pa, _ := ctxs[1-i].QueryPort(1)
		g, err := ctxs[1-i].QueryGID(1, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSRTR, DestQPN: s[1-i].qp.QPN(), DestLID: pa.LID, DestGID: g.GID, Global: true, SGIDIndex: 3, PathMTU: 4096}); err != nil {
			t.Fatal(err)
		}
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSRTS}); err != nil {
			t.Fatal(err)
		}
	}
	return s[0]
}

func pollOne(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	var wc [1]verbs.WC
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Microsecond) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
	}
	t.Fatal("no completion")
	return verbs.WC{}
}

// RelaxedOrdering forwards the wrapped device's answer (an optional
// interface the embedding alone would hide).
func (c *countCtx) RelaxedOrdering() bool {
	ro, ok := c.Context.(verbs.RelaxedOrderer)
	return ok && ro.RelaxedOrdering()
}
