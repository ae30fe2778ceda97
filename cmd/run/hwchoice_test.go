package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// TestHardwareRunsNCCLsNextChoice: on an 8x H100 NVSwitch host NCCL picks
// NVLS for a large AllReduce; the hardware executor, which creates no
// multicast objects, runs what NCCL picks without NVLS and says so, and
// leaves every call NCCL runs on other algorithms alone.
func TestHardwareRunsNCCLsNextChoice(t *testing.T) {
	file := filepath.Join("..", "..", "..", "shared", "topologies", "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml")
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		t.Skipf("topology not available: %v", err)
	}
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Params: params})
	require.NoError(t, err)
	res, err := search.Run(cl, search.DefaultOptions())
	require.NoError(t, err)
	big := int64(256 << 20) // fp32 elements: 1 GiB
	ncclChoice, err := res.Tuning.Choose(model.CollAllReduce, big, 4)
	require.NoError(t, err)
	require.Equal(t, model.AlgoNVLS, ncclChoice.Algo, "NCCL's choice on this host")
	ch, note, err := hwTunerChoice(res.Tuning, model.CollAllReduce, big, 4)
	require.NoError(t, err)
	require.NotEqual(t, model.AlgoNVLS, ch.Algo)
	require.NotEqual(t, model.AlgoNVLSTree, ch.Algo)
	require.Contains(t, note, "with NVLS/Simple, which needs NVLS multicast objects")
	require.Contains(t, note, "running NCCL's next choice, "+ch.Algo.String()+"/"+ch.Proto.String())
	// NCCL's next choice is the cheapest pair left in NCCL's own costs
	best := float32(-1)
	for a := model.Algorithm(0); a < model.NumAlgorithms; a++ {
		if a == model.AlgoNVLS || a == model.AlgoNVLSTree || a == model.AlgoCollNetDirect || a == model.AlgoCollNetChain {
			continue
		}
		for p := model.Protocol(0); p < model.NumProtocols; p++ {
			if v := ncclChoice.Costs[a][p]; v >= 0 && (best < 0 || v < best) {
				best = v
			}
		}
	}
	require.Equal(t, best, ch.TimeUs)
	small, note, err := hwTunerChoice(res.Tuning, model.CollAllReduce, 1024, 4)
	require.NoError(t, err)
	require.Empty(t, note)
	want, err := res.Tuning.Choose(model.CollAllReduce, 1024, 4)
	require.NoError(t, err)
	require.Equal(t, want, small)
}
