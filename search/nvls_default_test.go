package search

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// TestNVLSOnByDefault: with NCCL's defaults (NCCL_NVLS_ENABLE=2), NVLS is
// on where ncclNvlsInit would find multicast: Hopper GPUs on an NVSwitch;
// A100s on an NVSwitch, NVLink bridges and PCIe machines keep the NVLS
// graph unsearched, as NCCL leaves it when the driver reports no
// multicast; NCCL_NVLS_ENABLE=0 turns it off and 1 searches without the
// multicast check.
func TestNVLSOnByDefault(t *testing.T) {
	top := func(name string) string { return filepath.Join("..", "..", "shared", "topologies", name) }
	for _, tc := range []struct {
		file      string
		env       string
		searched  bool // the NVLS graph was searched (types set)
		supported bool // NVLS channels found
	}{
		{top("oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"), "", true, true},
		{top("b200x8-nvswitch-vm-8x400g.xml"), "", true, true},
		{top("oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"), "0", false, false},
		{top("oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml"), "", false, false},
		{top("oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml"), "1", true, false}, // forced: searched, sm80 finds none
		{top("pcie-rtx4090x2-cx4-2x100g.xml"), "", false, false},
	} {
		t.Run(filepath.Base(tc.file)+"/"+tc.env, func(t *testing.T) {
			root, _, err := model.ReadTopologyFile(tc.file)
			if err != nil {
				t.Skipf("topology not available: %v", err)
			}
			lookup := func(k string) (string, bool) {
				if k == "NCCL_NVLS_ENABLE" && tc.env != "" {
					return tc.env, true
				}
				return "", false
			}
			params, err := model.ParamsFromEnv(lookup)
			require.NoError(t, err)
			opts, err := OptionsFromEnv(lookup)
			require.NoError(t, err)
			cl, err := model.LoadCluster(root, tc.file, model.LoadOptions{Params: params})
			require.NoError(t, err)
			res, err := Run(cl, opts)
			require.NoError(t, err)
			g := res.NodeGraphs[0][model.GraphNVLS]
			require.Equal(t, tc.searched, g.TypeIntra != model.PathLOC, "NVLS graph searched")
			require.Equal(t, tc.supported, res.Plan.NVLSSupport)
			require.Equal(t, tc.supported, res.Tuning.NVLS)
			if tc.supported {
				require.Equal(t, 8, g.NChannels(), "one head per GPU")
			}
		})
	}
	// one GPU: ncclNvlsInit needs two
	s := &model.System{}
	s.Nodes[model.GPU] = []*model.Node{{Type: model.GPU, GPU: model.GPUInfo{SM: 90}}}
	require.False(t, NVLSCapable(s, true))
}
