package sim

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// topoFile is a topology of ../shared/topologies.
func topoFile(name string) string {
	return filepath.Join(repoRoot(), "..", "shared", "topologies", name)
}

// nvlsSearch runs the search with NVLS on (NCCL_NVLS_ENABLE=1).
func nvlsSearch(t *testing.T, file string, nodes int) *search.Result {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		t.Skipf("topology not available: %v", err)
	}
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	require.NoError(t, err)
	opts := search.DefaultOptions()
	opts.Search.NVLSEnable = true
	res, err := search.Run(cl, opts)
	require.NoError(t, err)
	return res
}

// TestNVLSResourcesCarryTheSwitchTraffic runs an NVLS AllReduce on the 8x
// H100 NVSwitch host and checks the switch's accounting: its reduction
// carries every member's whole buffer once (8 x S), its multicast every
// member's copy of the result (8 x S), each GPU's link into the switch
// its contribution plus its one multicast store (S + S/8), each link out
// of the switch the result share it reduced plus the copies it receives
// (S/8 + S); and the call takes no less than the switch's reduction at
// NCCL's nvlsEfficiency allows.
func TestNVLSResourcesCarryTheSwitchTraffic(t *testing.T) {
	res := nvlsSearch(t, topoFile("oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"), 1)
	require.True(t, res.Plan.NVLSSupport)
	s := newSim(t, res, nil)
	s.Loop = 0
	const count = 16 << 20 // fp32 elements: 64 MiB
	S := float64(count * 4)
	cr, err := s.Run(Call{Coll: model.CollAllReduce, Count: count, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: model.AlgoNVLS, Proto: -1})
	require.NoError(t, err)
	require.Equal(t, model.AlgoNVLS, cr.Algo)
	require.Equal(t, model.ProtoSimple, cr.Proto)
	bytes := cr.LinkBytesByName()
	require.InDelta(t, 8*S, bytes["h0:NVLS-reduce"], 1)
	require.InDelta(t, 8*S, bytes["h0:NVLS-multicast"], 1)
	sys := s.Machine.Cluster.Nodes[0].System
	var linkBW float64
	for _, g := range sys.Nodes[model.GPU] {
		up, down := 0.0, 0.0
		for name, b := range bytes {
			if name == "h0:"+g.Name()+"->"+sys.Nodes[model.NVS][0].Name() {
				up = b
			}
			if name == "h0:"+sys.Nodes[model.NVS][0].Name()+"->"+g.Name() {
				down = b
			}
		}
		require.InDelta(t, S+S/8, up, S*1e-6, g.Name())
		require.InDelta(t, S/8+S, down, S*1e-6, g.Name())
		for _, l := range g.Links {
			if l.Remote.Type == model.NVS {
				linkBW += float64(l.BW)
			}
		}
	}
	eff := search.NVLSEfficiency(90)
	require.InDelta(t, 0.85, eff, 1e-6)
	floorUs := 8 * S / (eff * linkBW * 1e3) // the reduction's bytes at its bandwidth
	require.Greater(t, cr.TimeUs, floorUs)
}

// TestNVLSNeedsHopperSwitch: only hosts with an NVSwitch and GPUs of
// compute capability 9.0 or more get the switch's NVLS resources, and an
// NVLS connection elsewhere is an error naming the host.
func TestNVLSNeedsHopperSwitch(t *testing.T) {
	for _, tc := range []struct {
		file string
		want bool
	}{
		{"oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", true},
		{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", false}, // sm80
		{"pcie-rtx4090x2-cx4-2x100g.xml", false},                  // no NVSwitch
	} {
		res := nvlsSearch(t, topoFile(tc.file), 1)
		s := newSim(t, res, nil)
		require.Len(t, s.Machine.nvlsRes, 1)
		require.Equal(t, tc.want, s.Machine.nvlsRes[0].reduce >= 0, tc.file)
		require.Equal(t, tc.want, res.Plan.NVLSSupport, tc.file)
		if !tc.want {
			_, err := s.Machine.connRoute(model.ProgConn{From: 0, To: 1, Kind: model.ConnNVLSReduce})
			require.ErrorContains(t, err, "host 0 has no NVSwitch with NVLS")
		}
	}
}

// TestNVLSTreeCrossesTheNetworkOnce runs NVLSTree across two DGX H100
// and checks where the bytes go: each host's switch reduces and
// multicasts every member's whole buffer (8 x S each), and the tree
// between the two hosts' heads carries the reduced buffer once each way
// (S up to the root host, S back), through the NICs, as NCCL's NVLS tree
// moves it; the links report the NVLS resources as kind NVLS.
func TestNVLSTreeCrossesTheNetworkOnce(t *testing.T) {
	res := nvlsSearch(t, filepath.Join(repoRoot(), "testdata", "xml", "dgx-h100-8x400g.xml"), 2)
	require.True(t, res.Plan.NVLSSupport)
	s := newSim(t, res, nil)
	s.Loop = 0
	const count = 4 << 20 // fp32 elements: 16 MiB
	S := float64(count * 4)
	cr, err := s.Run(Call{Coll: model.CollAllReduce, Count: count, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: model.AlgoNVLSTree, Proto: -1})
	require.NoError(t, err)
	require.Equal(t, model.AlgoNVLSTree, cr.Algo)
	var netOut, nvls float64
	for _, l := range cr.Links {
		switch {
		case l.Type == "NVLS":
			nvls += l.Bytes
		case l.Type == model.LinkNET.String() && strings.HasPrefix(l.Name, "h0:NET"):
			netOut += l.Bytes // links out of host 0's NET nodes
		}
	}
	bytes := cr.LinkBytesByName()
	for h := 0; h < 2; h++ {
		require.InDelta(t, 8*S, bytes[fmt.Sprintf("h%d:NVLS-reduce", h)], 1, "host %d", h)
		require.InDelta(t, 8*S, bytes[fmt.Sprintf("h%d:NVLS-multicast", h)], 1, "host %d", h)
	}
	require.InDelta(t, 32*S, nvls, 4)
	// host 0's NET nodes carry one direction of its traffic: the tree of
	// half the channels has host 0 as root, half host 1, so S/2 of the
	// reduced buffer goes up and S/2 of the result comes down each way
	require.InDelta(t, S, netOut, S*1e-6)
}

// TestNVLSRunsStepAccurateInFastMode: the fast mode does not fold NVLS
// (its folding maps point-to-point routes), says so, and gives the
// step-accurate time.
func TestNVLSRunsStepAccurateInFastMode(t *testing.T) {
	res := nvlsSearch(t, topoFile("oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"), 1)
	call := Call{Coll: model.CollAllReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: model.AlgoNVLS, Proto: -1}
	acc := newSim(t, res, nil)
	acc.Mode = ModeAccurate
	want, err := acc.Run(call)
	require.NoError(t, err)
	fast := newSim(t, res, nil)
	fast.Mode = ModeFast
	got, err := fast.Run(call)
	require.NoError(t, err)
	require.Equal(t, want.TimeUs, got.TimeUs)
	require.Contains(t, got.Fast, "step-accurate: NVLS")
	ok, why, err := fast.Fold(call)
	require.NoError(t, err)
	require.False(t, ok)
	require.Contains(t, why, "NVLS")
}

// TestForcedNVLSErrors: forcing NVLS where NCCL would not run it fails
// with the reason.
func TestForcedNVLSErrors(t *testing.T) {
	a100 := newSim(t, nvlsSearch(t, topoFile("oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml"), 1), nil)
	_, err := a100.Run(Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoNVLS, Proto: -1})
	require.ErrorContains(t, err, "NVLS needs NVSwitches and compute capability 9.0")
	h100 := newSim(t, nvlsSearch(t, topoFile("oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"), 1), nil)
	_, err = h100.Run(Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeInt8, Algo: model.AlgoNVLS, Proto: -1})
	require.ErrorContains(t, err, "cannot reduce int8 with sum")
	_, err = h100.Run(Call{Coll: model.CollBroadcast, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoNVLS, Proto: -1})
	require.ErrorContains(t, err, "has no Program")
	// unforced, an int8 AllReduce is not NVLS: the tuner knows ncclNvlsSupported
	cr, err := h100.Run(Call{Coll: model.CollAllReduce, Count: 256 << 20, Dtype: model.DtypeInt8, Algo: -1, Proto: -1})
	require.NoError(t, err)
	require.NotEqual(t, model.AlgoNVLS, cr.Algo)
}
