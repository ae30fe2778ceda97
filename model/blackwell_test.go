package model

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// Blackwell (sm100, sm103) and Grace (C2C) rules of NCCL 2.28.9's topology
// and path code. Every expected value below is worked out by hand from
// NCCL's formulas, cited at each test; none was taken from this package's
// output.

// loadShared loads a public topology of ../shared/topologies.
func loadShared(t *testing.T, name string, p Params) *Cluster {
	t.Helper()
	f := filepath.Join(sharedDir(t), "topologies", name)
	root, _, err := ReadTopologyFile(f)
	require.NoError(t, err)
	cl, err := LoadCluster(root, f, LoadOptions{Params: p})
	require.NoError(t, err)
	return cl
}

const (
	gb300XML = "oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml"
	b200XML  = "b200x8-nvswitch-vm-8x400g.xml"
	gb200XML = "gb200-nvl72-tray-4gpu-4x400g.xml"
)

// TestNVLink5Bandwidth: src/graph/topo.h, ncclTopoNVLinkBw, gives every
// compute capability from 100 up SM100_NVLINK_BW = 40.1 GB/s per link;
// ncclTopoAddNvLinks multiplies it by the link count. An HGX B200 (sm100)
// and a GB300 (sm103) GPU each have 18 links to the NVSwitch fabric:
// 18 * 40.1 = 721.8 GB/s, computed in float as NCCL does.
func TestNVLink5Bandwidth(t *testing.T) {
	for _, sm := range []int{100, 103, 120} {
		require.Equal(t, float32(40.1), NVLinkBW(sm), "sm%d", sm)
	}
	require.Equal(t, float32(20.6), NVLinkBW(90), "Hopper stays at SM90_NVLINK_BW")
	want := float32(18) * float32(40.1)
	for _, f := range []string{b200XML, gb300XML} {
		s := loadShared(t, f, DefaultParams()).Nodes[0].System
		g := s.Nodes[GPU][0]
		nvs := s.Nodes[NVS][0]
		require.Equal(t, PathNVL, g.Path(nvs).Type, f)
		require.Equal(t, want, g.Path(nvs).BW, f)
		require.Equal(t, want, g.Path(s.Nodes[GPU][1]).BW, "%s: GPU to GPU through the NVSwitch", f)
		require.Equal(t, want, s.MaxBW, "%s: maxBw is the best GPU-to-GPU bandwidth", f)
	}
}

// TestC2CLinkAndPathType: src/graph/topo.cc, ncclTopoAddC2c, connects a
// GPU and its CPU both ways with LINK_C2C at bw*count/1000 GB/s, and
// src/graph/paths.cc, ncclTopoSetPaths, types a one-hop C2C path PATH_C2C.
// GB300: <c2c bw="44712" count="5"/> gives 223.56 GB/s. The other Grace of
// the same host is across the CPU interconnect: SYS at ARM_BW = 6 GB/s
// (topo.cc, ncclTopoGetInterCpuBw).
func TestC2CLinkAndPathType(t *testing.T) {
	s := loadShared(t, gb300XML, DefaultParams()).Nodes[0].System
	checkPaths(t, s, []pathWant{
		{"GPU/0-806000", "CPU/0-0", 1, float32(44712*5) / 1000, PathC2C},
		{"CPU/0-0", "GPU/0-806000", 1, float32(44712*5) / 1000, PathC2C},
		{"GPU/0-806000", "CPU/0-1", 2, 6, PathSYS},
	})
}

// TestP2CAppliesToEveryNICBehindTheCPU: src/graph/paths.cc,
// ncclTopoComputePaths ("update the GPU -> NIC path in the case of C2C +
// PHB"), in 2.28.9 loops over every NET: when mergePathType(GPU->CPU,
// NET->CPU) is P2C (C2C on one side, PHB on the other) both GPU->NET and
// NET->GPU become min(P2C, type). On GB300 rdma_vf_rail0 (NET/0-0) sits
// under its own ConnectX-8 switch, whose only way to GPU 0 is up through
// the Grace root port (x1 Gen4: 1*120/80 = 1.5 GB/s) then C2C: PHB, so
// NET->GPU is P2C (2.29 keeps PHB: it applies the rule to the closest NICs
// only). GPU->NET is then replaced by PXN through GPU 1 (below).
func TestP2CAppliesToEveryNICBehindTheCPU(t *testing.T) {
	s := loadShared(t, gb300XML, DefaultParams()).Nodes[0].System
	checkPaths(t, s, []pathWant{
		// GPU 0's own NIC, under the same ConnectX-8 switch: two switches
		// (0008:04, 0008:01) at 64 GT/s x16 = 96 GB/s: PXB.
		{"GPU/0-806000", "NET/0-1", 4, 96, PathPXB},
		{"NET/0-0", "GPU/0-806000", 4, 1.5, PathP2C},
		// The other Grace's NICs: across SYS, no P2C.
		{"NET/0-3", "GPU/0-806000", 5, 1.5, PathSYS},
	})
}

// TestPXNOnGrace: src/graph/paths.cc, ncclTopoComputePaths, PXN block: a
// GPU reaches NIC n through the NIC's local GPU p when p->n <= P2C
// (NCCL_PXN_C2C=1), p->g <= NVL, same host, and p->n is faster or g->n is
// worse than PXN. 2.28.9 asks nothing about GPUDirect there. The path is
// g->NVS->p followed by p->n (addInterStep with a GPU: type PXN, bw the
// minimum).
func TestPXNOnGrace(t *testing.T) {
	s := loadShared(t, gb300XML, DefaultParams()).Nodes[0].System
	checkPaths(t, s, []pathWant{
		// NET/0-0's local GPU is GPU 1 (PXB 96): 2 NVLink hops + 4 = 6.
		{"GPU/0-806000", "NET/0-0", 6, 96, PathPXN},
		// Across Grace: GPU 0 -> NVS -> GPU 2 -> its NIC (PXB 96).
		{"GPU/0-806000", "NET/0-3", 6, 96, PathPXN},
	})

	// GB200 tray: each Grace has two GPUs and two ConnectX-7 on its own
	// root ports (Gen5 x16: 16*240/80 = 48 GB/s). GPU -> Grace NIC is C2C
	// then PCIe: count 3 (GPU-CPU, CPU-NIC, NIC-NET), bw 48, P2C. The
	// second NIC of the same Grace stays P2C: its local GPU (GPU 1) is no
	// faster (48) and P2C is not worse than PXN. The other Grace's NICs are
	// SYS at 6 GB/s and become PXN through their local GPU: 2 + 3 hops.
	cl, _ := loadRecorded(t, gb200XML, LoadOptions{})
	g := cl.Nodes[0].System
	checkPaths(t, g, []pathWant{
		{"GPU/0-1000", "CPU/0-0", 1, float32(44712*5) / 1000, PathC2C},
		{"GPU/0-1000", "NET/0-0", 3, 48, PathP2C},
		{"NET/0-0", "GPU/0-1000", 3, 48, PathP2C},
		{"GPU/0-1000", "NET/0-1", 3, 48, PathP2C},
		{"GPU/0-1000", "NET/0-2", 5, 48, PathPXN},
		{"NET/0-2", "GPU/0-1000", 4, 6, PathSYS},
	})
	// NCCL_PXN_C2C=0: a P2C NIC may not serve as a PXN relay (pxnType PXB),
	// so the far NICs stay SYS.
	p := DefaultParams()
	p.PXNC2C = false
	cl, _ = loadRecorded(t, gb200XML, LoadOptions{Params: p})
	checkPaths(t, cl.Nodes[0].System, []pathWant{{"GPU/0-1000", "NET/0-2", 4, 6, PathSYS}})
}

// TestGDRAcrossC2C: src/graph/paths.cc, ncclTopoCheckGdr (2.28.9): the
// level is PXB unless NCCL_NET_GDR_LEVEL says otherwise; with
// NCCL_NET_GDR_C2C=1 a P2C distance is compared as C2C; a PXN distance is
// the relay GPU's; the mode is PCI when the GPU's path to its CPU is C2C
// and the distance is not C2C, Default otherwise.
func TestGDRAcrossC2C(t *testing.T) {
	gdr := func(s *System, gpu, net string) GDRMode {
		t.Helper()
		m, err := s.CheckGDR(node(t, s, gpu), node(t, s, net), false)
		require.NoError(t, err)
		return m
	}
	cl, _ := loadRecorded(t, gb200XML, LoadOptions{})
	s := cl.Nodes[0].System
	require.Equal(t, GDRDefault, gdr(s, "GPU/0-1000", "NET/0-0"), "P2C counts as C2C: within PXB, no PCIe mapping")
	require.Equal(t, GDRDefault, gdr(s, "GPU/0-1000", "NET/0-2"), "PXN: the relay's P2C distance")

	gb300 := loadShared(t, gb300XML, DefaultParams()).Nodes[0].System
	require.Equal(t, GDRPCI, gdr(gb300, "GPU/0-806000", "NET/0-1"), "PXB NIC on a C2C GPU: PCIe mapping")
	require.Equal(t, GDRPCI, gdr(gb300, "GPU/0-806000", "NET/0-0"), "PXN through GPU 1, whose NIC is PXB")

	// NCCL_NET_GDR_LEVEL=PIX: 2.28.9 still enables P2C (compared as C2C,
	// 3 <= 4); 2.29 would compare P2C (6) and refuse.
	p := DefaultParams()
	p.GDRLevel = PathPIX
	cl, _ = loadRecorded(t, gb200XML, LoadOptions{Params: p})
	require.Equal(t, GDRDefault, gdr(cl.Nodes[0].System, "GPU/0-1000", "NET/0-0"))

	// NCCL_NET_GDR_C2C=0: P2C (6) > PXB (5), no GPUDirect; ComputePaths
	// then routes GPU<->NIC through the GPU's CPU (addInterStep): C2C then
	// PHB merge to P2C again, 1 + 2 hops, bw min(223.56, 48).
	p = DefaultParams()
	p.NetGDRC2C = false
	cl, _ = loadRecorded(t, gb200XML, LoadOptions{Params: p})
	s = cl.Nodes[0].System
	require.Equal(t, GDRDisabled, gdr(s, "GPU/0-1000", "NET/0-0"))
	checkPaths(t, s, []pathWant{
		{"GPU/0-1000", "NET/0-0", 3, 48, PathP2C},
		{"NET/0-0", "GPU/0-1000", 3, 48, PathP2C},
	})
	gp := node(t, s, "GPU/0-1000").Path(node(t, s, "NET/0-0"))
	require.Equal(t, LinkC2C, gp.Links[0].Type, "the staged path leaves the GPU over C2C")
}

// TestMNNVLCliqueP2P: src/graph/paths.cc, ncclTopoCheckP2p: GPUs of
// different hosts may use P2P only through MNNVL (same fabric clique); the
// fused GB300 trays put all 8 GPUs in one NVLink domain, so a GPU of host 0
// and one of host 1 are NVL (one NVSwitch hop, 721.8 GB/s) and P2P.
func TestMNNVLCliqueP2P(t *testing.T) {
	cl := loadShared(t, gb300XML, DefaultParams())
	require.True(t, cl.MNNVL)
	s := cl.Nodes[0].System
	a, b := s.GPUByRank(0), s.GPUByRank(7)
	require.NotEqual(t, SystemIDOf(a.ID), SystemIDOf(b.ID))
	p2p, read, inter := s.CheckP2P(a, b)
	require.True(t, p2p)
	require.False(t, read, "P2P read is for sm80 pairs only")
	require.Nil(t, inter)
	require.Equal(t, float32(18)*float32(40.1), a.Path(b).BW)
	// Without the NVLink fabric (the B200 VM's single host) nothing
	// changes for GPUs of one host.
	s = loadShared(t, b200XML, DefaultParams()).Nodes[0].System
	p2p, _, _ = s.CheckP2P(s.GPUByRank(0), s.GPUByRank(7))
	require.True(t, p2p)
}

// TestMNNVLEnable: src/init.cc, MNNVL is used when NCCL_MNNVL_ENABLE is 1,
// or 2 (the default) with the fabric reporting one clique, and never with
// 0 or with P2P disabled. A fused GB300 dump splits into two 4-GPU hosts
// joined by the network under 0; under 1 the --nodes copies of a GB200
// tray become one NVLink domain whose GPUs of different trays are one
// NVSwitch hop apart (NVL, 18*40.1 GB/s) and may use P2P.
func TestMNNVLEnable(t *testing.T) {
	p := DefaultParams()
	p.MNNVLEnable = 0
	cl := loadShared(t, gb300XML, p)
	require.False(t, cl.MNNVL)
	require.Len(t, cl.Nodes, 2)
	for _, n := range cl.Nodes {
		require.Len(t, n.System.Nodes[GPU], 4)
		require.True(t, n.System.Inter, "hosts talk through the network")
	}

	p = DefaultParams()
	p.MNNVLEnable = 1
	cl, _ = loadRecorded(t, gb200XML, LoadOptions{Nodes: 3, Params: p})
	require.True(t, cl.MNNVL)
	require.Equal(t, 12, cl.NRanks)
	require.Len(t, cl.Nodes, 3)
	for k, n := range cl.Nodes {
		s := n.System
		require.Len(t, s.Nodes[GPU], 12)
		require.Equal(t, []int{4 * k, 4*k + 1, 4*k + 2, 4*k + 3}, n.Ranks)
		a, b := s.GPUByRank(0), s.GPUByRank(11)
		require.Equal(t, PathNVL, a.Path(b).Type)
		require.Equal(t, float32(18)*float32(40.1), a.Path(b).BW)
		p2p, _, _ := s.CheckP2P(a, b)
		require.True(t, p2p)
	}
	// Without NCCL_MNNVL_ENABLE=1 the copies are separate hosts.
	cl, _ = loadRecorded(t, gb200XML, LoadOptions{Nodes: 3})
	require.False(t, cl.MNNVL)
	require.Len(t, cl.Nodes[0].System.Nodes[GPU], 4)

	// GPUs without NVSwitch links have no fabric to share.
	root, _, err := ReadTopologyFile(filepath.Join("..", "testdata", "xml", "edge-grace-c2c.xml"))
	require.NoError(t, err)
	_, err = LoadCluster(root, "edge-grace-c2c.xml", LoadOptions{Nodes: 2, Params: p})
	require.ErrorContains(t, err, "edge-grace-c2c.xml: NCCL_MNNVL_ENABLE=1 joins the --nodes copies")

	for _, v := range []string{"3", "-1", "x"} {
		_, err := ParamsFromEnv(func(k string) (string, bool) { return v, k == "NCCL_MNNVL_ENABLE" })
		require.ErrorContains(t, err, "NCCL_MNNVL_ENABLE", v)
	}
	got, err := ParamsFromEnv(func(k string) (string, bool) { return "0", k == "NCCL_MNNVL_ENABLE" })
	require.NoError(t, err)
	require.Zero(t, got.MNNVLEnable)
}

// TestMNNVLCliques: TWINCCL_MNNVL_HOSTS cuts the NCCL_MNNVL_ENABLE=1
// copies into NVLink domains of that many hosts, each node seeing the
// fused system of its own domain only, the domains joined by the network.
func TestMNNVLCliques(t *testing.T) {
	p := DefaultParams()
	p.MNNVLEnable, p.MNNVLHosts = 1, 2
	cl, _ := loadRecorded(t, gb200XML, LoadOptions{Nodes: 4, Params: p})
	require.True(t, cl.MNNVL)
	require.Equal(t, 2, cl.CliqueHosts)
	for k, n := range cl.Nodes {
		s := n.System
		// topo.cc ncclTopoAddNet: NETs with one guid (asic) and port share
		// bandwidth; the copies' NICs are distinct cards.
		asics := map[uint64]bool{}
		for _, net := range s.Nodes[NET] {
			require.False(t, asics[net.NET.Asic], "node %d: %s shares a GUID", k, net.Name())
			asics[net.NET.Asic] = true
		}
		require.Len(t, s.Nodes[GPU], 8, "node %d", k)
		first := 8 * (k / 2)
		require.NotNil(t, s.GPUByRank(first))
		require.NotNil(t, s.GPUByRank(first+7))
		require.Nil(t, s.GPUByRank((first+8)%16), "the other domain is not in node %d's system", k)
		require.True(t, s.Inter, "domains talk through the network")
	}
	for _, tc := range []struct {
		hosts, nodes int
		want         string
	}{
		{1, 4, "TWINCCL_MNNVL_HOSTS=1 leaves each host alone"},
		{2, 5, "--nodes 5 is not a whole number of NVLink domains of TWINCCL_MNNVL_HOSTS=2 hosts"},
	} {
		p.MNNVLHosts = tc.hosts
		root, _, err := ReadTopologyFile(filepath.Join("..", "testdata", "xml", gb200XML))
		require.NoError(t, err)
		_, err = LoadCluster(root, gb200XML, LoadOptions{Nodes: tc.nodes, Params: p})
		require.ErrorContains(t, err, tc.want)
	}
	_, err := ParamsFromEnv(func(k string) (string, bool) { return "-3", k == "TWINCCL_MNNVL_HOSTS" })
	require.ErrorContains(t, err, "TWINCCL_MNNVL_HOSTS=-3")
}
