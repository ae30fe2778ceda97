package ncclapi

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// topo reads a shared topology of 8 GPUs.
func topo(t *testing.T) (*model.Element, string) {
	t.Helper()
	file := "../../../../shared/topologies/oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	root, _, err := model.ParseTopologyXML(f, file)
	require.NoError(t, err)
	return root, file
}

func TestFitCluster(t *testing.T) {
	for _, tc := range []struct {
		hosts, n, nodes int
	}{
		{1, 8, 1},  // the whole host
		{1, 3, 1},  // the first GPUs of the host
		{1, 16, 2}, // copies of the host
		{2, 4, 2},  // two hosts of two ranks each
		{4, 32, 4}, // four whole hosts
	} {
		root, file := topo(t)
		cl, err := fitCluster(root, file, model.Params{}, tc.hosts, tc.n)
		require.NoError(t, err, "%d ranks on %d hosts", tc.n, tc.hosts)
		assert.Equal(t, tc.n, cl.NRanks, "%d ranks on %d hosts", tc.n, tc.hosts)
		assert.Zero(t, len(cl.Nodes)%tc.nodes, "%d ranks on %d hosts: %d nodes", tc.n, tc.hosts, len(cl.Nodes))
		assert.Equal(t, tc.nodes > 1, cl.Replicated, "%d ranks on %d hosts: copies of the host", tc.n, tc.hosts)
	}
	for _, tc := range []struct{ hosts, n int }{
		{1, 12}, // more GPUs than the host, not a multiple
		{2, 3},  // ranks not the same on every host
	} {
		root, file := topo(t)
		_, err := fitCluster(root, file, model.Params{}, tc.hosts, tc.n)
		require.Error(t, err, "%d ranks on %d hosts", tc.n, tc.hosts)
		assert.Equal(t, InvalidUsage, Code(err))
	}
}
