package ib_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// TestNeedFlush: NCCL's flush rule (nccl-facts §3.5).
func TestNeedFlush(t *testing.T) {
	for _, c := range []struct {
		sm          int
		net, cpu    model.PathType
		force       bool
		want        ib.FlushMode
		description string
	}{
		{80, model.PathPIX, model.PathPHB, false, ib.FlushAlways, "A100: always"},
		{70, model.PathSYS, model.PathPHB, false, ib.FlushAlways, "V100: always"},
		{90, model.PathPIX, model.PathPHB, false, ib.FlushNone, "H100 on x86: the GPU orders the writes"},
		{90, model.PathPXB, model.PathC2C, false, ib.FlushC2C, "Grace Hopper, NIC behind a PCIe switch"},
		{100, model.PathPHB, model.PathC2C, false, ib.FlushNone, "C2C, NIC beyond the switch"},
		{90, model.PathPIX, model.PathPHB, true, ib.FlushAlways, "NCCL_NET_FORCE_FLUSH"},
	} {
		assert.Equal(t, c.want, ib.NeedFlush(c.sm, c.net, c.cpu, c.force), c.description)
	}
	s := ib.DefaultSettings()
	assert.True(t, ib.FlushesReceive(true, model.ProtoSimple, ib.FlushAlways, s))
	assert.False(t, ib.FlushesReceive(false, model.ProtoSimple, ib.FlushAlways, s), "staged through host memory")
	assert.False(t, ib.FlushesReceive(true, model.ProtoLL, ib.FlushAlways, s), "LL carries its flags")
	assert.False(t, ib.FlushesReceive(true, model.ProtoSimple, ib.FlushNone, s))
	s.GDRFlushDisable = true
	assert.False(t, ib.FlushesReceive(true, model.ProtoSimple, ib.FlushC2C, s), "NCCL_GDR_FLUSH_DISABLE")
}

// TestNeedFlushTopologies: on recorded machines the rule follows the GPU
// generation and the CPU link: every GPU-NIC pair of the A100 machine
// flushes, none of the H100 machine does, and on the GB300 trays (GPUs
// reach their Grace CPU over C2C) exactly the NICs within a PCIe switch
// of the GPU flush.
func TestNeedFlushTopologies(t *testing.T) {
	t.Setenv("NCCL_NET_FORCE_FLUSH", "")
	for _, c := range []struct {
		file  string
		check func(t *testing.T, sys *model.System, g, n *model.Node, m ib.FlushMode)
	}{
		{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", func(t *testing.T, _ *model.System, _, _ *model.Node, m ib.FlushMode) {
			assert.Equal(t, ib.FlushAlways, m)
		}},
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", func(t *testing.T, _ *model.System, _, _ *model.Node, m ib.FlushMode) {
			assert.Equal(t, ib.FlushNone, m)
		}},
		{"oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml", func(t *testing.T, sys *model.System, g, n *model.Node, m ib.FlushMode) {
			cpu := sys.LocalCPU(g)
			require.NotNil(t, cpu)
			require.Equal(t, model.PathC2C, g.Path(cpu).Type, "GB300 GPUs reach their CPU over C2C")
			want := ib.FlushNone
			if g.Path(n).Type <= model.PathPXB {
				want = ib.FlushC2C
			}
			assert.Equal(t, want, m)
		}},
	} {
		path := "../../../../shared/topologies/" + c.file
		root, _, err := model.ReadTopologyFile(path)
		if err != nil {
			t.Skipf("no shared topologies: %v", err)
		}
		cl, err := model.LoadCluster(root, path, model.LoadOptions{Params: model.DefaultParams()})
		require.NoError(t, err)
		sys := cl.Nodes[0].System
		pairs, flushC2C := 0, 0
		for _, g := range sys.Nodes[model.GPU] {
			for _, n := range sys.Nodes[model.NET] {
				m, err := ib.NeedFlushFor(sys, g, n)
				require.NoError(t, err)
				c.check(t, sys, g, n, m)
				pairs++
				if m == ib.FlushC2C {
					flushC2C++
				}
			}
		}
		require.NotZero(t, pairs, c.file)
		t.Logf("%s: %d GPU-NIC pairs, %d flush for C2C", c.file, pairs, flushC2C)
	}
	t.Setenv("NCCL_NET_FORCE_FLUSH", "yes")
	_, err := ib.NeedFlushFor(nil, nil, nil)
	require.ErrorContains(t, err, `NCCL_NET_FORCE_FLUSH="yes"`)
}

// gdrPair is a connection whose ends register GPU memory (host memory
// standing in), the receiver's posts logged.
func gdrPair(t *testing.T, devs int, rcv *ib.Settings) (transport.SendComm, transport.RecvComm, *postLog) {
	t.Helper()
	log := &postLog{}
	p := newPairWith(t, pairOpt{devs: [2]int{devs, devs}, qps: 1, settings: [2]*ib.Settings{nil, rcv},
		wrap: func(r int, sp *soft.Provider) verbs.Provider {
			if r == 1 {
				log.Provider = sp
				return log
			}
			return sp
		}})
	sc, rc := p.connect(t)
	t.Cleanup(func() { sc.Close(); rc.Close() })
	return sc, rc, log
}

type deviceSend interface {
	IsendDevice(hdr []byte, mem verbs.DeviceMemory, off, n int) (transport.Request, error)
}

type deviceRecv interface {
	IrecvDevice(mem verbs.DeviceMemory, off, n int) (transport.Request, error)
	Iflush(mem verbs.DeviceMemory, off, n int) (transport.Request, error)
	FlushEnabled() bool
}

// gdrMessage sends n bytes at soff of src to doff of dst, GPU memory at
// both ends.
func gdrMessage(t *testing.T, sc transport.SendComm, rc transport.RecvComm, src, dst *verbs.HostDeviceMemory, soff, doff, n int) {
	t.Helper()
	hdr := bytes.Repeat([]byte{3}, transport.HeaderSize)
	sr, err := sc.(deviceSend).IsendDevice(hdr, src, soff, n)
	require.NoError(t, err)
	got := make([]byte, transport.HeaderSize)
	hr, err := rc.IrecvHeader(got)
	require.NoError(t, err)
	require.NoError(t, wait(t, hr, 5*time.Second, sr))
	dr, err := rc.(deviceRecv).IrecvDevice(dst, doff, n)
	require.NoError(t, err)
	require.NoError(t, wait(t, dr, 5*time.Second, sr))
	require.NoError(t, wait(t, sr, 5*time.Second))
	require.Equal(t, hdr, got)
	require.Equal(t, src.Buf[soff:soff+n], dst.Buf[doff:doff+n])
}

// TestGDRFlush: a message from GPU memory into GPU memory (host memory
// standing in at device addresses of their own: the soft provider stages
// through the copies), then the flush: one RDMA read of one byte of the
// received bytes per receiving device, on a QP that is not a data QP
// (the flush QP, connected to itself), landing in host memory. With
// NCCL_GDR_FLUSH_DISABLE=1 there is no flush QP and a flush completes
// without a read.
func TestGDRFlush(t *testing.T) {
	for _, devs := range []int{1, 2} {
		sc, rc, log := gdrPair(t, devs, nil)
		require.True(t, rc.(deviceRecv).FlushEnabled())
		src := &verbs.HostDeviceMemory{Buf: make([]byte, 200<<10), DevAddr: 0x7f10_0000_0000}
		for i := range src.Buf {
			src.Buf[i] = byte(i*13 + 1)
		}
		dst := &verbs.HostDeviceMemory{Buf: make([]byte, 256<<10), DevAddr: 0x7f20_0000_0000}
		gdrMessage(t, sc, rc, src, dst, 4096, 8192, 150<<10)
		assert.NotZero(t, src.Reads.Load(), "the sender's NIC read GPU memory")
		assert.NotZero(t, dst.Writes.Load(), "the receiver's NIC wrote GPU memory")
		require.Empty(t, log.reads, "no read before the flush")

		readsBefore := dst.Reads.Load()
		fr, err := rc.(deviceRecv).Iflush(dst, 8192, 150<<10)
		require.NoError(t, err)
		require.NoError(t, wait(t, fr, 5*time.Second))
		require.Len(t, log.reads, devs, "one flush read per device")
		data := map[uint32]bool{}
		for _, qp := range ib.QPs(rc) {
			data[qp.QPN()] = true
		}
		for _, wr := range log.reads {
			assert.Equal(t, dst.DevAddr+8192, wr.RemoteAddr, "reads the received bytes")
			require.Len(t, wr.SGE, 1)
			assert.Equal(t, uint32(1), wr.SGE[0].Len)
		}
		assert.Equal(t, readsBefore+int64(devs), dst.Reads.Load(), "the read went to the GPU memory")
		for _, p := range log.posts {
			if p.op == verbs.OpRead {
				assert.False(t, data[p.qp], "flush read on data QP %#x", p.qp)
			}
		}

		_, err = rc.(deviceRecv).Iflush(&verbs.HostDeviceMemory{Buf: make([]byte, 8), DevAddr: 0x1000}, 0, 8)
		require.ErrorContains(t, err, "never received into")
	}

	off := ib.DefaultSettings()
	off.GDRFlushDisable = true
	sc, rc, log := gdrPair(t, 1, &off)
	require.False(t, rc.(deviceRecv).FlushEnabled())
	src := &verbs.HostDeviceMemory{Buf: bytes.Repeat([]byte{9}, 4096), DevAddr: 0x7f30_0000_0000}
	dst := &verbs.HostDeviceMemory{Buf: make([]byte, 4096), DevAddr: 0x7f40_0000_0000}
	gdrMessage(t, sc, rc, src, dst, 0, 0, 4096)
	fr, err := rc.(deviceRecv).Iflush(dst, 0, 4096)
	require.NoError(t, err)
	done, err := fr.Test()
	require.NoError(t, err)
	assert.True(t, done, "a flush without flush QPs is complete at once")
	assert.Empty(t, log.reads)
}

// TestGDRBounds: GPU buffer ranges are checked before anything is
// registered or posted.
func TestGDRBounds(t *testing.T) {
	sc, rc, _ := gdrPair(t, 1, nil)
	mem := &verbs.HostDeviceMemory{Buf: make([]byte, 100), DevAddr: 0x7f50_0000_0000}
	_, err := sc.(deviceSend).IsendDevice(make([]byte, transport.HeaderSize), mem, 90, 20)
	require.ErrorContains(t, err, "bytes [90, 110) of a 100-byte GPU buffer")
	_, err = rc.(deviceRecv).IrecvDevice(mem, -1, 10)
	require.ErrorContains(t, err, "GPU buffer")
	_, err = rc.(deviceRecv).Iflush(mem, 0, 101)
	require.ErrorContains(t, err, "GPU buffer")
}
