package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNetDevsP2P: src/graph/search.cc, ncclTopoGetNetDev without a graph
// (p2p). On two DGX H100 (one 400G NIC under each GPU's PCIe switch), rank
// 0 (GPU 0 of host 0) sending to rank 13 (GPU 5 of host 1) starts from
// its own NIC, then takes the NIC of its host's GPU 5 (NCCL_P2P_PXN_LEVEL
// 2): GPU 5 is NVLinked to GPU 0 and PIX to that NIC, so GPU 0 reaches it
// by PXN. The receiver uses its own NIC. NCCL_PXN_DISABLE=1 keeps the
// sender's own NIC unless NCCL_CROSS_NIC=0, which takes the peer's rail
// regardless.
func TestNetDevsP2P(t *testing.T) {
	devs := func(p Params, crossNicOff bool) (int, int, PathType) {
		t.Helper()
		cl, _ := loadRecorded(t, "dgx-h100-8x400g.xml", LoadOptions{Nodes: 2, Params: p})
		send, recv, err := cl.NetDevs(nil, 0, 0, 1, 13, 0, crossNicOff)
		require.NoError(t, err)
		g := cl.Nodes[0].System.GPUByRank(0)
		return send.NET.Dev, recv.NET.Dev, g.Path(send).Type
	}
	s, r, typ := devs(DefaultParams(), false)
	require.Equal(t, [2]int{5, 5}, [2]int{s, r})
	require.Equal(t, PathPXN, typ)

	p := DefaultParams()
	p.PXNDisable = true
	s, r, typ = devs(p, false)
	require.Equal(t, [2]int{0, 5}, [2]int{s, r})
	require.Equal(t, PathPIX, typ)
	s, r, _ = devs(p, true)
	require.Equal(t, [2]int{5, 5}, [2]int{s, r}, "NCCL_CROSS_NIC=0 picks the peer's rail without PXN")

	cl, _ := loadRecorded(t, "dgx-h100-8x400g.xml", LoadOptions{Nodes: 2})
	_, _, err := cl.NetDevs(nil, 0, 0, 2, 13, 0, false)
	require.ErrorContains(t, err, "outside the cluster's 2")
	_, _, err = cl.NetDevs(nil, 0, 0, 0, 13, 0, false)
	require.ErrorContains(t, err, "a rank has no GPU on its node")
}
