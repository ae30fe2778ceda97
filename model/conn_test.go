package model

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnFollowsNCCL checks the transport decision on shared topologies
// against NCCL's rules worked by hand: P2P up to NCCL_P2P_LEVEL's default
// PXB (so across two CPU sockets, SYS, a PCIe machine falls to SHM), P2P
// over NVLink, SHM when P2P is disabled, NET between nodes through the
// channel's NIC with GPUDirect RDMA only where the GPU and NIC share a PCIe
// switch (an H100 node) and not through the CPU (the RTX 3090 node). With
// P2P disabled on the H100 node, the GPUs' way through the CPU is slower
// than their PCIe switches' NICs, so NCCL connects them over the network
// (ncclTopoCheckNet), each through its own channel-0 NIC.
func TestConnFollowsNCCL(t *testing.T) {
	type pair struct {
		from, to int
		want     string
	}
	for _, c := range []struct {
		file  string
		nodes int
		env   map[string]string
		pairs []pair
	}{
		{"pcie-rtx3090x8-2socket-1ib.xml", 1, nil, []pair{{0, 1, "P2P/PIX"}, {1, 0, "P2P/PIX"}, {0, 4, "SHM/SYS"}, {0, 7, "SHM/SYS"}}},
		{"pcie-rtx3090x8-2socket-1ib.xml", 2, nil, []pair{{0, 8, "NET/mlx5_0->mlx5_0"}}},
		{"pcie-rtx3090x8-2socket-1ib.xml", 1, map[string]string{"NCCL_P2P_LEVEL": "SYS"}, []pair{{0, 4, "P2P/SYS"}}},
		{"nvlink-bridge-rtxa6000x2-10gbe.xml", 2, nil, []pair{{0, 1, "P2P/NVL"}, {0, 3, "NET/eno1->eno1"}}},
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 1, nil, []pair{{0, 7, "P2P/NVL"}, {3, 0, "P2P/NVL"}}},
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 1, map[string]string{"NCCL_P2P_DISABLE": "1"}, []pair{{0, 7, "NET/mlx5_0->mlx5_17/GDR"}}},
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 2, nil, []pair{{0, 8, "NET/mlx5_0->mlx5_0/GDR"}}},
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 2, map[string]string{"NCCL_NET_GDR_LEVEL": "LOC"}, []pair{{0, 8, "NET/mlx5_0->mlx5_0"}}},
	} {
		path := "../../shared/topologies/" + c.file
		root, _, err := ReadTopologyFile(path)
		if err != nil {
			t.Skipf("no shared topologies: %v", err)
		}
		params, err := ParamsFromEnv(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
		require.NoError(t, err)
		cl, err := LoadCluster(root, path, LoadOptions{Nodes: c.nodes, Params: params})
		require.NoError(t, err)
		for _, p := range c.pairs {
			conn, err := cl.Conn(p.from, p.to, 0)
			require.NoError(t, err)
			assert.Equal(t, p.want, conn.String(), "%s x%d %v: %d->%d", c.file, c.nodes, c.env, p.from, p.to)
		}
	}
}

// TestConnRefuses: ranks outside the job are an error, not a panic.
func TestConnRefuses(t *testing.T) {
	root, _, err := ReadTopologyFile("../../shared/topologies/nvlink-bridge-rtxa6000x2-10gbe.xml")
	if err != nil {
		t.Skipf("no shared topologies: %v", err)
	}
	cl, err := LoadCluster(root, "x", LoadOptions{Params: DefaultParams()})
	require.NoError(t, err)
	for _, p := range [][2]int{{-1, 0}, {0, 2}, {5, 5}} {
		_, err := cl.Conn(p[0], p[1], 0)
		assert.ErrorContains(t, err, "rank out of range")
	}
	self, err := cl.Conn(1, 1, 3)
	require.NoError(t, err)
	assert.Equal(t, TransportP2P, self.Transport)
}
