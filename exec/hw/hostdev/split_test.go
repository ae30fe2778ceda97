package hostdev

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// commExecutor runs Programs on one communicator: every member's
// Communicator runs its lanes at once.
type commExecutor struct {
	name  string
	comms []*Communicator // by rank in the communicator
}

func (e commExecutor) Name() string { return e.name }

func (e commExecutor) Execute(p *model.Program, inputs [][]byte) ([][]byte, error) {
	outs := make([][]byte, len(e.comms))
	errs := make([]error, len(e.comms))
	var wg sync.WaitGroup
	for r, c := range e.comms {
		outs[r] = make([]byte, p.OutCount*int64(p.Dtype.Size()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = c.Device.Run(p, inputs[r], outs[r])
		}()
	}
	wg.Wait()
	return outs, errors.Join(errs...)
}

// splitAll splits every rank of a job with the colors and keys of f and
// returns the communicators by color, each by rank in it.
func splitAll(t *testing.T, j *LocalJob, f func(rank int) (color, key int)) map[int][]*Communicator {
	t.Helper()
	got := make([]*Communicator, len(j.Ranks))
	errs := make([]error, len(j.Ranks))
	var wg sync.WaitGroup
	for r, rk := range j.Ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			color, key := f(r)
			got[r], errs[r] = rk.Split(color, key)
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	byColor := map[int][]*Communicator{}
	for r, c := range got {
		color, _ := f(r)
		if c == nil {
			require.Equal(t, model.SplitNoColor, color, "rank %d", r)
			continue
		}
		comms := byColor[color]
		for len(comms) <= c.Rank {
			comms = append(comms, nil)
		}
		comms[c.Rank] = c
		byColor[color] = comms
	}
	for color, comms := range byColor {
		for i, c := range comms {
			require.NotNil(t, c, "color %d rank %d", color, i)
			require.Equal(t, comms[0].Hash, c.Hash)
			require.Equal(t, comms[0].Members, c.Members)
			require.Equal(t, c.Members[i], c.Device.comm.Rank())
		}
	}
	return byColor
}

// TestSplitTPxDPConcurrent: four ranks on two hosts split into two
// tensor-parallel pairs (one host each, shm) and two data-parallel pairs
// (across the hosts, the socket plugin); every rank runs its TP and its DP
// communicator's calls at the same time, with those of a duplicate of the
// TP pairs (the same ranks, other connections), several calls in a row,
// each communicator a different collective and size (so that data
// crossing from one communicator into another shows), every output
// checked.
func TestSplitTPxDPConcurrent(t *testing.T) {
	checkLeaks(t)
	j, err := NewLocalJob(4, LocalOptions{HostsOf: func(r int) string { return fmt.Sprint("host", r/2) }, Timeout: 10 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, j.Close()) }()

	tp := splitAll(t, j, func(r int) (int, int) { return r / 2, r })
	dp := splitAll(t, j, func(r int) (int, int) { return r % 2, -r }) // keys reversed: higher job rank first
	// A second split like the first (ncclCommSplit of the same colors, or
	// ncclCommDup): the same pairs of ranks, connections of their own.
	dup := splitAll(t, j, func(r int) (int, int) { return r / 2, r })
	require.Equal(t, tp[1][0].Members, dup[1][0].Members)
	require.Equal(t, []int{0, 1}, tp[0][0].Members)
	require.Equal(t, []int{2, 3}, tp[1][0].Members)
	require.Equal(t, []int{2, 0}, dp[0][0].Members)
	require.Equal(t, []int{3, 1}, dp[1][0].Members)
	require.Equal(t, []int{1, 2, 3, 4, 5, 6}, []int{tp[0][0].Index, tp[1][0].Index, dp[0][0].Index, dp[1][0].Index, dup[0][0].Index, dup[1][0].Index})
	require.NotEqual(t, tp[0][0].Hash, dup[0][0].Hash)
	for _, rk := range j.Ranks { // every rank knows every communicator, its own or not
		all := rk.Communicators()
		require.Len(t, all, 6)
		require.Equal(t, SplitComm{Index: 3, Hash: dp[0][0].Hash, Members: []int{2, 0}}, all[2])
	}

	type work struct {
		exec commExecutor
		c    conformance.Case
		p    *model.Program
	}
	var all []work
	for _, g := range []struct {
		name  string
		comms map[int][]*Communicator
		coll  model.Collective
		proto model.Protocol
	}{{"tp", tp, model.CollAllReduce, model.ProtoSimple}, {"dp", dp, model.CollAllGather, model.ProtoLL}, {"dup", dup, model.CollReduceScatter, model.ProtoSimple}} {
		for color := 0; color < 2; color++ {
			c := conformance.Case{Coll: g.coll, Algo: model.AlgoRing, Proto: g.proto, Dtype: model.DtypeFP32, Op: model.RedSum,
				NRanks: 2, NChannels: 2, Count: 40000 + 777*int64(color)}
			p, err := c.Program()
			require.NoError(t, err)
			all = append(all, work{exec: commExecutor{name: fmt.Sprintf("%s%d", g.name, color), comms: g.comms[color]}, c: c, p: p})
		}
	}
	// Connections first, one communicator after the other.
	for _, w := range all {
		var wg sync.WaitGroup
		errs := make([]error, len(w.exec.comms))
		for r, c := range w.exec.comms {
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = c.Connect(w.p) }()
		}
		wg.Wait()
		require.NoError(t, errors.Join(errs...), w.exec.name)
	}
	// Then every communicator's calls at once, three in a row each.
	errs := make([]error, len(all))
	var wg sync.WaitGroup
	for i, w := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 {
				if errs[i] = conformance.CheckProgram(w.exec, w.c, w.p); errs[i] != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

func TestSplitNoColorAndNegativeColor(t *testing.T) {
	checkLeaks(t)
	j, err := NewLocalJob(3, LocalOptions{Timeout: 5 * time.Second})
	require.NoError(t, err)
	defer func() { require.NoError(t, j.Close()) }()
	comms := splitAll(t, j, func(r int) (int, int) {
		if r == 1 {
			return model.SplitNoColor, 0
		}
		return 5, 0
	})
	require.Len(t, comms, 1)
	require.Equal(t, []int{0, 2}, comms[5][0].Members)

	// A negative color other than NCCL_SPLIT_NOCOLOR is a color (NCCL
	// checks no other value).
	comms = splitAll(t, j, func(r int) (int, int) { return -7 + r%2, -r })
	require.Equal(t, []int{2, 0}, comms[-7][0].Members)
	require.Equal(t, []int{1}, comms[-6][0].Members)
}
