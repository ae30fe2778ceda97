package hwcmp

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
)

// TestNCCLAlltoAll: the GIN AlltoAll recordings (gin/a2a.json of the
// H200 and the H100 pair) read as 14 AlltoAll calls up to 512 MiB of our
// GIN engine; our column, which ran on GPU-initiated networking and not
// a p2p Program, is refused with a pointer to replay gin; NCCL's column
// simulates as AlltoAll at the tuner's p2p choice, every row. How close
// it comes is TestAccuracy's (the H100 pair's recording; the H200 pair's
// records no NCCL settings).
func TestNCCLAlltoAll(t *testing.T) {
	for _, m := range []struct{ dir, topo string }{
		{hwDir(), ""},
		{h100Dir(), filepath.Join(h100Dir(), "topo.xml")},
	} {
		in, err := Open(filepath.Join(m.dir, "gin", "a2a.json"))
		require.NoError(t, err)
		require.Len(t, in.Calls, 14, m.dir)
		last := in.Calls[13]
		assert.True(t, last.Bytes == 512<<20 && last.Count == 64<<20 && last.Engine == "GIN",
			"%s: last call %+v: want AlltoAll of 512 MiB (64 Mi elements per peer) of our GIN engine", m.dir, last)
		_, err = Table(in, ColOurs, nil)
		if assert.Error(t, err) {
			assert.Contains(t, err.Error(), "replay gin", "our GIN column")
		}
		tb, err := Table(in, ColNCCL, map[string]string{"NCCL_NVLS_ENABLE": "0"})
		require.NoError(t, err)
		c, err := sim.DefaultCalib(90)
		require.NoError(t, err)
		ft := embeddedFitTable(t, tb)
		if m.topo != "" {
			ft = fitTableOn(t, tb, m.topo)
		}
		rows, err := ft.Compare(c)
		require.NoError(t, err)
		require.Len(t, rows, len(tb.Rows))
		for _, r := range rows {
			assert.Equal(t, model.CollAlltoAll, r.Coll, "%s: row %d B", filepath.Base(m.dir), r.Bytes)
			assert.Greater(t, r.SimUs, 0.0, "%s: row %d B", filepath.Base(m.dir), r.Bytes)
		}
	}
}

// fitTableOn searches the topology file under the table's settings and
// makes the table ready to simulate.
func fitTableOn(t testing.TB, tb *sim.Table, file string) sim.FitTable {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	require.NoError(t, err)
	res, err := sim.SearchTable(root, file, 1, tb)
	require.NoError(t, err)
	return sim.NewFitTable(tb, res)
}
