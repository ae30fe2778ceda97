package gpudev

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// TestNVLSRefused: an NVLS Program needs multicast objects, which the GPU
// interpreter does not create; every rank refuses it before launching
// anything, with an error wrapping model.ErrNeedsMulticast, and the job
// still runs a ring Program afterwards. Skips without a GPU.
func TestNVLSRefused(t *testing.T) {
	ctxs := gpus(t)
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoNVLS, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 2, NChannels: 2, Count: 4099}
	p, err := c.Program()
	require.NoError(t, err)
	j, err := NewLocalJob(2, ctxs, 5*time.Second, nil)
	require.NoError(t, err)
	defer j.Close()
	_, err = j.Execute(p, conformance.Inputs(c, p))
	require.ErrorIs(t, err, model.ErrNeedsMulticast)
	ring := c
	ring.Algo = model.AlgoRing
	e := &jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	defer e.close(t)
	require.NoError(t, conformance.Check(e, ring))
}
