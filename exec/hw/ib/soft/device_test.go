package soft

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// TestDeviceMemory: GPU memory (host memory standing in at a device
// address of its own) registered with RegDevice takes RDMA writes (staged
// in with WriteAt), serves RDMA reads (staged out with ReadAt) and is the
// local source of a write, under the same keys, bounds and access rules as
// host memory: a write past its end and a read it does not grant fail with
// a remote access error.
func TestDeviceMemory(t *testing.T) {
	a, b := connected(t, all)
	dev := &verbs.HostDeviceMemory{Buf: make([]byte, 256), DevAddr: 0x7e00_0000_1000}
	dmr, err := b.pd.(verbs.DeviceRegistrar).RegDevice(dev, verbs.AccessLocalWrite|verbs.AccessRemoteWrite|verbs.AccessRemoteRead)
	require.NoError(t, err)
	require.Equal(t, dev.DevAddr, dmr.Addr())
	require.Equal(t, 256, dmr.Len())

	src := bytes.Repeat([]byte("gdr!"), 25)
	smr, err := a.pd.RegMR(src, 0)
	require.NoError(t, err)
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 1, Op: verbs.OpWrite, Signaled: true, RemoteAddr: dmr.Addr() + 16, RKey: dmr.RKey(),
		SGE: []verbs.SGE{{Addr: smr.Addr(), Len: uint32(len(src)), LKey: smr.LKey()}}}))
	require.Equal(t, verbs.WCSuccess, poll(t, a.cq).Status)
	assert.Equal(t, src, dev.Buf[16:16+len(src)])
	assert.Equal(t, int64(1), dev.Writes.Load(), "one staging copy into the device")

	// A one-byte read, as NCCL's flush does.
	one := make([]byte, 1)
	omr, err := a.pd.RegMR(one, verbs.AccessLocalWrite)
	require.NoError(t, err)
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpRead, Signaled: true, RemoteAddr: dmr.Addr() + 16, RKey: dmr.RKey(),
		SGE: []verbs.SGE{{Addr: omr.Addr(), Len: 1, LKey: omr.LKey()}}}))
	require.Equal(t, verbs.WCSuccess, poll(t, a.cq).Status)
	assert.Equal(t, src[0], one[0])
	assert.Equal(t, int64(1), dev.Reads.Load())

	// Device memory as the local source of a write into host memory.
	ldev := &verbs.HostDeviceMemory{Buf: bytes.Repeat([]byte{0xab}, 64), DevAddr: 0x7e00_0010_0000}
	lmr, err := a.pd.(verbs.DeviceRegistrar).RegDevice(ldev, 0)
	require.NoError(t, err)
	dst := make([]byte, 64)
	hmr, err := b.pd.RegMR(dst, all)
	require.NoError(t, err)
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 3, Op: verbs.OpWrite, Signaled: true, RemoteAddr: hmr.Addr(), RKey: hmr.RKey(),
		SGE: []verbs.SGE{{Addr: lmr.Addr(), Len: 64, LKey: lmr.LKey()}}}))
	require.Equal(t, verbs.WCSuccess, poll(t, a.cq).Status)
	assert.Equal(t, ldev.Buf, dst)

	// Past the end: a remote access error (and the QP goes to ERROR).
	require.NoError(t, a.qp.PostSend(verbs.SendWR{ID: 4, Op: verbs.OpWrite, Signaled: true, RemoteAddr: dmr.Addr() + 250, RKey: dmr.RKey(),
		SGE: []verbs.SGE{{Addr: smr.Addr(), Len: 16, LKey: smr.LKey()}}}))
	assert.Equal(t, verbs.WCRemAccessErr, poll(t, a.cq).Status)
	assert.Equal(t, int64(1), dev.Writes.Load(), "nothing staged for a refused write")

	// A region without remote read refuses the read.
	c, d := connected(t, all)
	wdev := &verbs.HostDeviceMemory{Buf: make([]byte, 64), DevAddr: 0x7e00_0020_0000}
	wmr, err := d.pd.(verbs.DeviceRegistrar).RegDevice(wdev, verbs.AccessLocalWrite|verbs.AccessRemoteWrite)
	require.NoError(t, err)
	cm, err := c.pd.RegMR(one, verbs.AccessLocalWrite)
	require.NoError(t, err)
	require.NoError(t, c.qp.PostSend(verbs.SendWR{ID: 5, Op: verbs.OpRead, Signaled: true, RemoteAddr: wmr.Addr(), RKey: wmr.RKey(),
		SGE: []verbs.SGE{{Addr: cm.Addr(), Len: 1, LKey: cm.LKey()}}}))
	assert.Equal(t, verbs.WCRemAccessErr, poll(t, c.cq).Status)
	assert.Zero(t, wdev.Reads.Load())
}
