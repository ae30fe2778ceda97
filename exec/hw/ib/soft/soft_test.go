package soft

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

type side struct {
	pd verbs.PD
	cq verbs.CQ
	qp verbs.QP
}

func addr(b []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&b[0]))) }

// connected returns two queue pairs in RTS, each on its own provider (as
// two processes would be), granting access, addressed by the IPv4-mapped
// RoCE v2 GID (index 3).
func connected(t *testing.T, access verbs.Access) (a, b side) {
	t.Helper()
	return connectedVia(t, access, 3)
}

// connectedVia is connected with the GID index gi on both sides.
func connectedVia(t *testing.T, access verbs.Access, gi int) (a, b side) {
	t.Helper()
	var s [2]side
	var ctxs [2]verbs.Context
	for i := range s {
		p, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close() })
		ctxs[i], _ = p.Open("soft0")
		s[i].pd, _ = ctxs[i].AllocPD()
		s[i].cq, _ = ctxs[i].CreateCQ(64)
		if s[i].qp, err = s[i].pd.CreateQP(verbs.QPInit{SendCQ: s[i].cq, RecvCQ: s[i].cq, MaxSend: 16, MaxRecv: 16}); err != nil {
			t.Fatal(err)
		}
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSInit, Port: 1, Access: access}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s {
		pa, _ := ctxs[1-i].QueryPort(1)
		g, err := ctxs[1-i].QueryGID(1, gi)
		if err != nil {
			t.Fatal(err)
		}
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSRTR, DestQPN: s[1-i].qp.QPN(), DestGID: g.GID, DestLID: pa.LID, Global: true, SGIDIndex: gi, PathMTU: 4096}); err != nil {
			t.Fatal(err)
		}
		if err := s[i].qp.Modify(verbs.QPAttr{State: verbs.QPSRTS}); err != nil {
			t.Fatal(err)
		}
	}
	return s[0], s[1]
}

func poll(t *testing.T, cq verbs.CQ) verbs.WC {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var wc [1]verbs.WC
	for time.Now().Before(deadline) {
		n, err := cq.Poll(wc[:])
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return wc[0]
		}
		time.Sleep(50 * time.Microsecond)
	}
	t.Fatal("no completion")
	return verbs.WC{}
}

const all = verbs.AccessLocalWrite | verbs.AccessRemoteWrite | verbs.AccessRemoteRead | verbs.AccessRemoteAtomic

func TestStateMachine(t *testing.T) {
	p, _ := New(Options{})
	defer p.Close()
	ctx, _ := p.Open("soft0")
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(8)
	qp, _ := pd.CreateQP(verbs.QPInit{SendCQ: cq, RecvCQ: cq, MaxSend: 4, MaxRecv: 4})
	if err := qp.PostRecv(verbs.RecvWR{}); err == nil {
		t.Error("post receive in RESET accepted")
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSRTR, DestQPN: 1, PathMTU: 4096}); err == nil {
		t.Error("RESET -> RTR accepted")
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSInit, Port: 1}); err != nil {
		t.Fatal(err)
	}
	if err := qp.PostSend(verbs.SendWR{Op: verbs.OpWrite}); err == nil || !strings.Contains(err.Error(), "INIT") {
		t.Errorf("post send in INIT: %v", err)
	}
	if err := qp.PostRecv(verbs.RecvWR{ID: 7}); err != nil {
		t.Errorf("post receive in INIT: %v", err)
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSRTS}); err == nil {
		t.Error("INIT -> RTS accepted")
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSRTR}); err == nil {
		t.Error("RTR without destination accepted")
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSErr}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, cq); wc.ID != 7 || wc.Status != verbs.WCWRFlushErr {
		t.Errorf("receive in ERROR: %+v", wc)
	}
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSReset}); err != nil || qp.State() != verbs.QPSReset {
		t.Errorf("ERROR -> RESET: %v", err)
	}
}

func TestWriteReadAtomic(t *testing.T) {
	a, b := connected(t, all)
	src, dst := []byte("hello, rdma world"), make([]byte, 64)
	smr, _ := a.pd.RegMR(src, 0)
	dmr, _ := b.pd.RegMR(dst, all)
	b.qp.PostRecv(verbs.RecvWR{ID: 5})
	if err := a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpWriteImm, Signaled: true, Imm: 42, RemoteAddr: dmr.Addr() + 8, RKey: dmr.RKey(),
		SGE: []verbs.SGE{{Addr: smr.Addr(), Len: uint32(len(src)), LKey: smr.LKey()}}}); err != nil {
		t.Fatal(err)
	}
	if wc := poll(t, a.cq); wc.ID != 1 || wc.Status != verbs.WCSuccess || wc.Op != verbs.WCWrite {
		t.Fatalf("send completion %+v", wc)
	}
	if wc := poll(t, b.cq); wc.ID != 5 || !wc.HasImm || wc.Imm != 42 || wc.Len != uint32(len(src)) || wc.Op != verbs.WCRecvWriteImm {
		t.Fatalf("receive completion %+v", wc)
	}
	if string(dst[8:8+len(src)]) != string(src) {
		t.Fatalf("written %q", dst)
	}
	// Read it back, then fetch-add.
	back := make([]byte, len(src))
	bmr, _ := a.pd.RegMR(back, verbs.AccessLocalWrite)
	a.qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpRead, Signaled: true, RemoteAddr: dmr.Addr() + 8, RKey: dmr.RKey(), SGE: []verbs.SGE{{Addr: bmr.Addr(), Len: uint32(len(back)), LKey: bmr.LKey()}}})
	if wc := poll(t, a.cq); wc.Status != verbs.WCSuccess || string(back) != string(src) {
		t.Fatalf("read %+v %q", wc, back)
	}
	binary.LittleEndian.PutUint64(dst[40:], 10)
	old := make([]byte, 8)
	omr, _ := a.pd.RegMR(old, verbs.AccessLocalWrite)
	a.qp.PostSend(verbs.SendWR{ID: 3, Op: verbs.OpAtomicFetchAdd, Signaled: true, Add: 5, RemoteAddr: dmr.Addr() + 40, RKey: dmr.RKey(), SGE: []verbs.SGE{{Addr: omr.Addr(), Len: 8, LKey: omr.LKey()}}})
	if wc := poll(t, a.cq); wc.Status != verbs.WCSuccess || binary.LittleEndian.Uint64(old) != 10 || binary.LittleEndian.Uint64(dst[40:]) != 15 {
		t.Fatalf("fetch-add %+v", wc)
	}
	// Unsignaled successes give no completion; order is kept.
	for i := 0; i < 3; i++ {
		a.qp.PostSend(verbs.SendWR{ID: uint64(10 + i), Op: verbs.OpWrite, Signaled: i != 1, RemoteAddr: dmr.Addr(), RKey: dmr.RKey(), SGE: []verbs.SGE{{Addr: smr.Addr(), Len: 4, LKey: smr.LKey()}}})
	}
	if w1, w2 := poll(t, a.cq), poll(t, a.cq); w1.ID != 10 || w2.ID != 12 {
		t.Fatalf("order %d %d", w1.ID, w2.ID)
	}
}

// TestRemoteErrors: each violation fails the requester with the status
// an HCA gives, moves the QP to ERROR, and flushes what follows.
func TestRemoteErrors(t *testing.T) {
	cases := []struct {
		name   string
		access verbs.Access // QP access
		mr     verbs.Access
		op     verbs.Opcode
		rkey   func(verbs.MR) uint32
		off    uint64
		n      uint32
		want   verbs.WCStatus
	}{
		{"invalid rkey", all, all, verbs.OpWrite, func(m verbs.MR) uint32 { return m.RKey() ^ 0x5500 }, 0, 8, verbs.WCRemAccessErr},
		{"out of bounds", all, all, verbs.OpWrite, verbs.MR.RKey, 60, 8, verbs.WCRemAccessErr},
		{"no remote write on MR", all, verbs.AccessLocalWrite | verbs.AccessRemoteRead, verbs.OpWrite, verbs.MR.RKey, 0, 8, verbs.WCRemAccessErr},
		{"no remote read on MR", all, verbs.AccessLocalWrite | verbs.AccessRemoteWrite, verbs.OpRead, verbs.MR.RKey, 0, 8, verbs.WCRemAccessErr},
		{"no remote write on QP", verbs.AccessLocalWrite, all, verbs.OpWrite, verbs.MR.RKey, 0, 8, verbs.WCRemInvReqErr},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a, b := connected(t, c.access)
			local := make([]byte, 64)
			lmr, _ := a.pd.RegMR(local, verbs.AccessLocalWrite)
			remote := make([]byte, 64)
			rmr, err := b.pd.RegMR(remote, c.mr)
			if err != nil {
				t.Fatal(err)
			}
			wr := verbs.SendWR{ID: 1, Op: c.op, Signaled: true, RemoteAddr: rmr.Addr() + c.off, RKey: c.rkey(rmr), SGE: []verbs.SGE{{Addr: lmr.Addr(), Len: c.n, LKey: lmr.LKey()}}}
			a.qp.PostSend(wr)
			wr.ID = 2
			a.qp.PostSend(wr)
			if wc := poll(t, a.cq); wc.ID != 1 || wc.Status != c.want {
				t.Fatalf("got %+v (%v), want %v", wc, wc.Status, c.want)
			}
			if wc := poll(t, a.cq); wc.ID != 2 || wc.Status != verbs.WCWRFlushErr {
				t.Fatalf("second: %+v", wc)
			}
			if a.qp.State() != verbs.QPSErr {
				t.Errorf("requester in %v", a.qp.State())
			}
			for i := 0; i < 100 && b.qp.State() != verbs.QPSErr; i++ {
				time.Sleep(time.Millisecond)
			}
			if b.qp.State() != verbs.QPSErr {
				t.Errorf("responder in %v", b.qp.State())
			}
			if remote[0] != 0 {
				t.Error("rejected write landed")
			}
		})
	}
}

func TestLocalErrors(t *testing.T) {
	a, b := connected(t, all)
	remote := make([]byte, 64)
	rmr, _ := b.pd.RegMR(remote, all)
	ro := make([]byte, 64)
	romr, _ := a.pd.RegMR(ro, 0) // no local write
	// A read into memory without local write: local protection error.
	a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpRead, Signaled: true, RemoteAddr: rmr.Addr(), RKey: rmr.RKey(), SGE: []verbs.SGE{{Addr: romr.Addr(), Len: 8, LKey: romr.LKey()}}})
	if wc := poll(t, a.cq); wc.Status != verbs.WCLocProtErr {
		t.Fatalf("read into read-only memory: %+v", wc)
	}
	// A key of another protection domain is refused too.
	a2, _ := connected(t, all)
	other := make([]byte, 8)
	omr, _ := b.pd.RegMR(other, all)
	a2.qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpWrite, Signaled: true, RemoteAddr: rmr.Addr(), RKey: rmr.RKey(), SGE: []verbs.SGE{{Addr: addr(other), Len: 8, LKey: omr.LKey()}}})
	if wc := poll(t, a2.cq); wc.Status != verbs.WCLocProtErr {
		t.Fatalf("lkey of another PD: %+v", wc)
	}
	if _, err := a.pd.RegMR(make([]byte, 8), verbs.AccessRemoteWrite); err == nil {
		t.Error("remote write without local write registered")
	}
}

// TestPeerGone: a write to a dead peer fails with retry exceeded.
func TestPeerGone(t *testing.T) {
	a, b := connected(t, all)
	b.qp.Close()
	buf := make([]byte, 8)
	mr, _ := a.pd.RegMR(buf, 0)
	a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpWrite, Signaled: true, RemoteAddr: 1, RKey: 1, SGE: []verbs.SGE{{Addr: mr.Addr(), Len: 8, LKey: mr.LKey()}}})
	if wc := poll(t, a.cq); wc.Status != verbs.WCRetryExcErr {
		t.Fatalf("%+v", wc)
	}
}

// TestGIDTable: the port is a RoCE port with a RoCE NIC's table
// (link-local and IPv4-mapped, v1 and v2); RTR needs a global route from
// an existing source GID; a QP addressed by the link-local GID reaches
// nobody (retries run out), by the IPv4-mapped one it works.
func TestGIDTable(t *testing.T) {
	p, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, _ := p.Open("soft0")
	pa, err := ctx.QueryPort(1)
	if err != nil || pa.LinkLayer != verbs.LinkEthernet || pa.GIDTableLen != 4 {
		t.Fatalf("port %+v, %v", pa, err)
	}
	want := []struct {
		prefix string
		typ    verbs.GIDType
	}{{"fe80::", verbs.GIDTypeRoCEv1}, {"fe80::", verbs.GIDTypeRoCEv2}, {"127.0.0.1", verbs.GIDTypeRoCEv1}, {"127.0.0.1", verbs.GIDTypeRoCEv2}}
	for i, w := range want {
		g, err := ctx.QueryGID(1, i)
		if err != nil || !strings.HasPrefix(net.IP(g.GID[:]).String(), w.prefix) || g.Type != w.typ {
			t.Errorf("GID %d: %v %v, %v; want %s... %v", i, net.IP(g.GID[:]), g.Type, err, w.prefix, w.typ)
		}
	}
	if _, err := ctx.QueryGID(1, 4); err == nil {
		t.Error("GID index 4 of a 4-entry table answered")
	}
	pd, _ := ctx.AllocPD()
	cq, _ := ctx.CreateCQ(8)
	qp, _ := pd.CreateQP(verbs.QPInit{SendCQ: cq, RecvCQ: cq, MaxSend: 4, MaxRecv: 4})
	if err := qp.Modify(verbs.QPAttr{State: verbs.QPSInit, Port: 1}); err != nil {
		t.Fatal(err)
	}
	g, _ := ctx.QueryGID(1, 3)
	for _, a := range []verbs.QPAttr{
		{State: verbs.QPSRTR, DestQPN: 1, DestGID: g.GID, PathMTU: 4096, SGIDIndex: 3},
		{State: verbs.QPSRTR, DestQPN: 1, DestGID: g.GID, PathMTU: 4096, Global: true, SGIDIndex: 4},
	} {
		if err := qp.Modify(a); err == nil {
			t.Errorf("RTR with %+v accepted", a)
		}
	}

	a, _ := connectedVia(t, all, 0)
	buf := make([]byte, 8)
	mr, _ := a.pd.RegMR(buf, 0)
	a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpWrite, Signaled: true, RemoteAddr: 1, RKey: 1, SGE: []verbs.SGE{{Addr: mr.Addr(), Len: 8, LKey: mr.LKey()}}})
	if wc := poll(t, a.cq); wc.Status != verbs.WCRetryExcErr {
		t.Fatalf("write to a link-local GID: %+v", wc)
	}
}
