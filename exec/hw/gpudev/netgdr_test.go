package gpudev

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/model"
)

// TestNetGDRFor: on every recorded topology at two nodes, the executor's
// GPUDirect decision for each cross-node connection of rank 0 is the
// simulator's (model.Conn), and a receiving GDR end flushes exactly as
// the GPU generation says (below sm 90 always); NCCL_NET_GDR_LEVEL=LOC
// turns GPUDirect off on the H100 machine.
func TestNetGDRFor(t *testing.T) {
	files, _ := filepath.Glob("../../../../shared/topologies/*.xml")
	if len(files) == 0 {
		t.Skip("no shared topologies beside the checkout")
	}
	gdrEnds := 0
	for _, f := range files {
		root, _, err := model.ReadTopologyFile(f)
		if errors.Is(err, model.ErrUnsupportedTopology) {
			continue // RCCL's format
		}
		require.NoError(t, err)
		cl, err := model.LoadCluster(root, f, model.LoadOptions{Params: model.DefaultParams()})
		require.NoError(t, err, f)
		if len(cl.Nodes) < 2 { // a single-host file: two of that host
			cl, err = model.LoadCluster(root, f, model.LoadOptions{Nodes: 2, Params: model.DefaultParams()})
			require.NoError(t, err, f)
		}
		for to := 0; to < cl.NRanks; to++ {
			if cl.NodeOfRank(to) == cl.NodeOfRank(0) {
				continue
			}
			c, err := cl.Conn(0, to, 0)
			require.NoError(t, err)
			g, err := NetGDRFor(cl, 0, to, 0)
			require.NoError(t, err, "%s 0->%d", filepath.Base(f), to)
			assert.Equal(t, c.SendGDR, g.Send, "%s 0->%d", filepath.Base(f), to)
			assert.Equal(t, c.RecvGDR, g.Recv, "%s 0->%d", filepath.Base(f), to)
			if g.Recv {
				gdrEnds++
				if sm := cl.Nodes[cl.NodeOfRank(to)].System.GPUByRank(to).GPU.SM; sm < 90 {
					assert.Equal(t, ib.FlushAlways, g.Flush, "%s 0->%d (sm %d)", filepath.Base(f), to, sm)
				}
			} else {
				assert.Equal(t, ib.FlushNone, g.Flush)
			}
		}
	}
	require.NotZero(t, gdrEnds, "no topology has a GPUDirect end")
	t.Logf("%d receiving GPUDirect ends over %d topologies", gdrEnds, len(files))

	h100 := "../../../../shared/topologies/oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"
	if _, err := os.Stat(h100); err == nil {
		root, _, err := model.ReadTopologyFile(h100)
		require.NoError(t, err)
		for _, c := range []struct {
			env  map[string]string
			want NetGDR
		}{
			{nil, NetGDR{Send: true, Recv: true, Flush: ib.FlushNone}},
			{map[string]string{"NCCL_NET_GDR_LEVEL": "LOC"}, NetGDR{}},
		} {
			params, err := model.ParamsFromEnv(func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
			require.NoError(t, err)
			cl, err := model.LoadCluster(root, h100, model.LoadOptions{Nodes: 2, Params: params})
			require.NoError(t, err)
			g, err := NetGDRFor(cl, 0, 8, 0)
			require.NoError(t, err)
			assert.Equal(t, c.want, g, "%v", c.env)
		}
		cl, err := model.LoadCluster(root, h100, model.LoadOptions{Nodes: 1, Params: model.DefaultParams()})
		require.NoError(t, err)
		_, err = NetGDRFor(cl, 0, 1, 0)
		require.ErrorContains(t, err, "not NET")
	}
}
