package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// loadRecorded loads a topology from the repository's testdata/xml.
func loadRecorded(t testing.TB, name string, opts LoadOptions) (*Cluster, []Warning) {
	t.Helper()
	path := filepath.Join("..", "testdata", "xml", name)
	root, warns, err := ReadTopologyFile(path)
	require.NoError(t, err)
	if opts.Params == (Params{}) {
		opts.Params = DefaultParams()
	}
	cl, err := LoadCluster(root, path, opts)
	require.NoError(t, err)
	return cl, warns
}

// node finds a node by its printed name.
func node(t testing.TB, s *System, name string) *Node {
	t.Helper()
	for ty := range s.Nodes {
		for _, n := range s.Nodes[ty] {
			if n.Name() == name {
				return n
			}
		}
	}
	t.Fatalf("no node %s in %s", name, s)
	return nil
}

type pathWant struct {
	from, to string
	count    int
	bw       float32
	typ      PathType
}

func checkPaths(t *testing.T, s *System, want []pathWant) {
	t.Helper()
	for _, w := range want {
		p := node(t, s, w.from).Path(node(t, s, w.to))
		require.Equal(t, w.typ, p.Type, "%s -> %s type", w.from, w.to)
		require.Equal(t, w.count, p.Count(), "%s -> %s hops", w.from, w.to)
		require.Equal(t, w.bw, p.BW, "%s -> %s bw", w.from, w.to)
	}
}

func TestEdgeBroadcomGen5Flattening(t *testing.T) {
	cl, _ := loadRecorded(t, "edge-bcm-gen5-two-level.xml", LoadOptions{})
	s := cl.Nodes[0].System
	// The two level-1 switches are merged into the level-0 one.
	require.Len(t, s.Nodes[PCI], 1)
	require.Equal(t, uint64(0x1000c0301000ffff), s.Nodes[PCI][0].Device)
	checkPaths(t, s, []pathWant{
		{"GPU/0-12000", "GPU/0-15000", 2, 48, PathPIX}, // PXB (3 switches) before flattening
		{"GPU/0-12000", "NET/0-0", 3, 48, PathPIX},
		{"NET/0-0", "GPU/0-15000", 3, 48, PathPIX},
		{"GPU/0-15000", "CPU/0-0", 2, 48, PathPHB},
	})
	require.Equal(t, CPUModelIntelSRP, s.Nodes[CPU][0].CPU.Model)
}

func TestEdgePower9NVLinkToCPU(t *testing.T) {
	cl, _ := loadRecorded(t, "edge-power9-nvlink-cpu.xml", LoadOptions{})
	s := cl.Nodes[0].System
	checkPaths(t, s, []pathWant{
		{"GPU/0-404000", "CPU/0-0", 1, 60, PathNVL}, // 3 links x 20 GB/s (sm70) to the CPU
		{"GPU/0-404000", "GPU/0-405000", 1, 60, PathNVL},
		{"GPU/0-3503000", "CPU/0-8", 1, 120, PathNVL},
		{"GPU/0-404000", "GPU/0-3503000", 3, 32, PathSYS}, // NVL, P9 SMP bus, NVL
	})
	for _, l := range s.Nodes[CPU][0].Links {
		if l.Type == LinkSYS {
			require.Equal(t, float32(32), l.BW, "POWER9 inter-CPU bandwidth")
		}
	}
}

func TestEdgeGraceC2CIsP2C(t *testing.T) {
	cl, _ := loadRecorded(t, "edge-grace-c2c.xml", LoadOptions{})
	s := cl.Nodes[0].System
	checkPaths(t, s, []pathWant{
		{"GPU/0-901000", "CPU/0-0", 1, 447.12, PathC2C}, // 44712 MB/s x 10 links
		{"GPU/0-901000", "NET/0-0", 4, 48, PathP2C},
		{"NET/0-0", "GPU/0-901000", 4, 48, PathP2C},
	})
	g, n := s.Nodes[GPU][0], s.Nodes[NET][0]
	mode, err := s.CheckGDR(g, n, false)
	require.NoError(t, err)
	require.Equal(t, GDRDefault, mode, "P2C is within the default GDR level")
	// A single GPU without other ranks: search bounds are LOC_BW.
	require.Equal(t, float32(LocBW), s.MaxBW)
}

func TestEdgeParserQuirks(t *testing.T) {
	cl, warns := loadRecorded(t, "edge-parser-quirks.xml", LoadOptions{})
	var msgs []string
	for _, w := range warns {
		msgs = append(msgs, w.String())
	}
	require.Len(t, warns, 3, "warnings: %v", msgs)
	require.Contains(t, msgs[0], "edge-parser-quirks.xml:13: ignoring element <xgmi> inside <gpu>")
	s := cl.Nodes[0].System
	require.Len(t, s.Nodes[GPU], 2, "the GPU without a rank is skipped")
	require.Len(t, s.Nodes[NET], 1, "the net without dev is ignored")
	require.Equal(t, float32(1.25), s.Nodes[NET][0].NET.BW, "speed -1 means 10 Gb/s")
	checkPaths(t, s, []pathWant{
		// link_width="0" counts as x16: 16 * 120 / 80 = 24 GB/s.
		{"GPU/0-21000", "CPU/0-0", 2, 24, PathPHB},
		// "16.0 GT/s" without "PCIe" falls back to the Gen3 rate: 12 GB/s.
		{"GPU/0-31000", "CPU/0-0", 2, 12, PathPHB},
		// Through the pcilink between the two switches, not the CPU.
		{"GPU/0-21000", "GPU/0-31000", 3, 24, PathPXB},
		{"GPU/0-21000", "NVS/0-0", 1, 240, PathNVL},
		{"GPU/0-21000", "NET/0-0", 4, 1.25, PathPHB},
	})
}

// TestPathInvariants checks, for every recorded and public topology, that
// every path is a walk along existing links from its source to its
// destination whose bandwidth is the narrowest link.
func TestPathInvariants(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "xml", "*.xml"))
	if d, err := os.Stat(filepath.Join("..", "..", "shared", "topologies")); err == nil && d.IsDir() {
		more, _ := filepath.Glob(filepath.Join("..", "..", "shared", "topologies", "*.xml"))
		files = append(files, more...)
	}
	require.NotEmpty(t, files)
	for _, f := range files {
		root, _, err := ReadTopologyFile(f)
		if err != nil {
			require.ErrorIs(t, err, ErrUnsupportedTopology, f)
			continue
		}
		for _, nodes := range []int{1, 2} {
			if len(hostHashes(root)) > 1 && nodes > 1 {
				continue
			}
			cl, err := LoadCluster(root, f, LoadOptions{Nodes: nodes, Params: DefaultParams()})
			require.NoError(t, err, f)
			for _, cn := range cl.Nodes {
				require.NoError(t, CheckPathInvariants(cn.System), "%s node %d", filepath.Base(f), cn.Index)
			}
		}
	}
}

func TestLoadClusterErrors(t *testing.T) {
	cases := []struct {
		name, xml, want string
		nodes           int
	}{
		{"duplicate rank", `<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">` +
			`<pci busid="0000:01:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="0" sm="80" rank="0" gdr="0"/></pci>` +
			`<pci busid="0000:02:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="1" sm="80" rank="0" gdr="0"/></pci>` +
			`</cpu></system>`, "both have rank 0", 1},
		{"missing sm", `<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD">` +
			`<pci busid="0000:01:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="0" rank="0" gdr="0"/></pci>` +
			`</cpu></system>`, "t.xml:1: <gpu> lacks required attribute sm", 1},
		{"no gpu", `<system version="1"><cpu numaid="0" arch="x86_64" vendor="AuthenticAMD"/></system>`, "no <gpu> element with a rank", 1},
		{"nvlink of rankless gpu", `<system version="1"><cpu numaid="0" arch="arm64">` +
			`<pci busid="0000:01:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="0" sm="80" rank="0" gdr="0"/></pci>` +
			`<pci busid="0000:02:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="1" sm="80" gdr="0"><nvlink target="0000:01:00.0" count="1" tclass="0x030200"/></gpu></pci>` +
			`</cpu></system>`, "not in the system", 1},
		{"too many nodes", `<system version="1"><cpu numaid="0" arch="arm64">` +
			`<pci busid="0000:01:00.0" class="0x030200" link_speed="" link_width="16"><gpu dev="0" sm="80" rank="0" gdr="0"/></pci>` +
			`</cpu></system>`, "out of range", MaxClusterNodes + 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root, _, err := ParseTopologyXML(strings.NewReader(c.xml), "t.xml")
			require.NoError(t, err)
			_, err = LoadCluster(root, "t.xml", LoadOptions{Nodes: c.nodes, Params: DefaultParams()})
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestNodesReplication checks --nodes: ranks node-major, every node's
// system identical up to ranks, inter set.
func TestNodesReplication(t *testing.T) {
	cl, _ := loadRecorded(t, "h200x2-nvswitch.xml", LoadOptions{Nodes: 3})
	require.Equal(t, 6, cl.NRanks)
	require.Len(t, cl.Nodes, 3)
	for k, n := range cl.Nodes {
		require.Equal(t, []int{2 * k, 2*k + 1}, n.Ranks)
		require.True(t, n.System.Inter)
		require.Equal(t, float32(1.25), n.System.MaxBW, "inter-node: maxBw is the best NET bandwidth")
	}
}

// TestMultiHostMNNVL loads a fused dump of two GB300 trays: both hosts share
// the NVLink fabric, so every node sees all 8 GPUs with NVLink paths across
// hosts.
func TestMultiHostMNNVL(t *testing.T) {
	f := filepath.Join(sharedDir(t), "topologies", "oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml")
	root, _, err := ReadTopologyFile(f)
	require.NoError(t, err)
	cl, err := LoadCluster(root, f, LoadOptions{Params: DefaultParams()})
	require.NoError(t, err)
	require.True(t, cl.MNNVL)
	require.Equal(t, 8, cl.NRanks)
	require.Len(t, cl.Nodes, 2)
	for k, n := range cl.Nodes {
		s := n.System
		require.Equal(t, k, s.SystemID)
		require.Len(t, s.Nodes[GPU], 8)
		require.False(t, s.Inter)
		a, b := s.Nodes[GPU][0], s.Nodes[GPU][len(s.Nodes[GPU])-1]
		require.NotEqual(t, SystemIDOf(a.ID), SystemIDOf(b.ID))
		require.Equal(t, PathNVL, a.Path(b).Type)
	}
	_, err = LoadCluster(root, f, LoadOptions{Nodes: 2, Params: DefaultParams()})
	require.ErrorContains(t, err, "describes 2 hosts")
}

func TestParamsFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) (string, bool) {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
	}
	p, err := ParamsFromEnv(env())
	require.NoError(t, err)
	require.Equal(t, DefaultParams(), p)
	p, err = ParamsFromEnv(env("NCCL_P2P_LEVEL", "NVL", "NCCL_NET_GDR_LEVEL", "3"))
	require.NoError(t, err)
	require.Equal(t, PathNVL, p.P2PLevel)
	require.Equal(t, PathPHB, p.GDRLevel, "legacy level 3 is PHB")
	p, err = ParamsFromEnv(env("NCCL_P2P_DISABLE", "1", "NCCL_P2P_LEVEL", "SYS"))
	require.NoError(t, err)
	require.Equal(t, PathLOC, p.P2PLevel, "NCCL_P2P_DISABLE wins")
	_, err = ParamsFromEnv(env("NCCL_P2P_LEVEL", "FAST"))
	require.ErrorContains(t, err, "NCCL_P2P_LEVEL")
	_, err = ParamsFromEnv(env("NCCL_PXN_DISABLE", "yes"))
	require.ErrorContains(t, err, "NCCL_PXN_DISABLE")
}

// TestP2PDisableReroutesThroughCPU checks NCCL_P2P_DISABLE=1 on the H200
// box: GPU-GPU paths go through the CPU (PHB), as NCCL does.
func TestP2PDisableReroutesThroughCPU(t *testing.T) {
	p := DefaultParams()
	p.P2PLevel = PathLOC
	cl, _ := loadRecorded(t, "h200x2-nvswitch.xml", LoadOptions{Params: p})
	s := cl.Nodes[0].System
	checkPaths(t, s, []pathWant{{"GPU/0-60", "GPU/0-70", 2, 48, PathPHB}})
}
