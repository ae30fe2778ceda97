// Package tuner answers NCCL's tuner-plugin questions (which algorithm,
// protocol and channel count for this collective of this size?) with the
// pair twinccl's calibrated simulator predicts fastest on this machine.
// The answers are precomputed at init, per collective and power-of-two
// size, with exec/sim's fast mode, so that a call costs a lookup. The C
// plugin itself (ncclTunerPlugin_v5 and _v4) is the c-shared main
// package plugin.
package tuner

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"sync"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// MinLog and MaxLog bound the sizes the table covers: 2^MinLog to
// 2^MaxLog bytes; a call outside takes the nearest end.
const (
	MinLog = 3
	MaxLog = 32
)

// Mode picks the source of the answers.
type Mode int

const (
	// ModeSim answers with the simulator's fastest pair (the default).
	ModeSim Mode = iota
	// ModeNCCL answers with NCCL 2.28.9's own cost model as twinccl
	// reproduces it (replay tune's choice): a check of the plumbing,
	// since NCCL then decides as it would without the plugin.
	ModeNCCL
)

// pairTime is one candidate's prediction: its time in µs (negative when
// not predicted) and the channels it ran on.
type pairTime struct {
	us        float64
	nChannels int
}

// Table is the precomputed answers of one communicator shape.
type Table struct {
	NRanks, NNodes int
	Mode           Mode
	// t[coll][log2 size - MinLog][algo][proto]
	t [model.NumTunedCollectives][MaxLog - MinLog + 1][model.NumAlgorithms][model.NumProtocols]pairTime
}

// Answer is the plugin's reply for one call.
type Answer struct {
	Algo      model.Algorithm
	Proto     model.Protocol
	NChannels int
	TimeUs    float64
}

// Build predicts every candidate pair of every tuned collective at every
// power-of-two size on the search result res. The candidates are the
// pairs NCCL's rules allow for the call (its cost table has a time for
// them) that twinccl has Programs for (Ring, Tree, PAT on two ranks).
// The simulations run on every CPU at once, each worker on a Machine of
// its own; every result goes to its own cell, so the table does not
// depend on the order they finish in.
func Build(res *search.Result, calib *sim.Calib, mode Mode) (*Table, error) {
	n := res.Cluster.NRanks
	tb := &Table{NRanks: n, NNodes: res.Plan.NNodes, Mode: mode}
	type job struct {
		c     model.Collective
		k     int
		dt    model.Dtype
		count int64
		a     model.Algorithm
		p     model.Protocol
	}
	var jobs []job
	for c := model.Collective(0); c < model.NumTunedCollectives; c++ {
		for k := MinLog; k <= MaxLog; k++ {
			cell := &tb.t[c][k-MinLog]
			for a := range cell {
				for p := range cell[a] {
					cell[a][p].us = -1
				}
			}
			dt, count, ok := callShape(c, int64(1)<<k, n)
			if !ok {
				continue
			}
			ch, err := res.Tuning.ChooseCall(search.Call{Coll: c, Count: count, TypeSize: dt.Size()})
			if err != nil {
				return nil, fmt.Errorf("tuner: %s of 2^%d bytes: %w", c, k, err)
			}
			for a := model.Algorithm(0); a < model.NumAlgorithms; a++ {
				for p := model.Protocol(0); p < model.NumProtocols; p++ {
					switch {
					case ch.Costs[a][p] < 0:
					case mode == ModeNCCL:
						cell[a][p] = pairTime{us: float64(ch.Costs[a][p])}
						if a == ch.Algo && p == ch.Proto {
							cell[a][p].nChannels = ch.NChannels
						}
					case model.ProgramCovers(c, a, p, n):
						jobs = append(jobs, job{c, k, dt, count, a, p})
					}
				}
			}
		}
	}
	if len(jobs) == 0 {
		return tb, nil
	}
	base, err := sim.NewSimulator(res, calib)
	if err != nil {
		return nil, err
	}
	base.Mode = sim.ModeFast
	workers := min(runtime.GOMAXPROCS(0), len(jobs))
	next := make(chan int)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		s := base
		if w > 0 {
			if s, err = base.WithCalib(calib); err != nil {
				return nil, err
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				cr, err := s.Run(sim.Call{Coll: j.c, Count: j.count, Dtype: j.dt, Op: model.RedSum, Algo: j.a, Proto: j.p})
				if err != nil {
					if errs[w] == nil {
						errs[w] = fmt.Errorf("tuner: simulate %s of 2^%d bytes with %s/%s: %w", j.c, j.k, j.a, j.p, err)
					}
					continue
				}
				tb.t[j.c][j.k-MinLog][j.a][j.p] = pairTime{us: cr.TimeUs, nChannels: cr.NChannels}
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, e := range errs {
		if e != nil {
			return nil, e
		}
	}
	return tb, nil
}

// callShape is the datatype and NCCL count of a call of size bytes: fp32
// where the size splits into whole fp32 elements per rank (what training
// jobs reduce), else bytes; not ok when the size does not split over the
// ranks at all.
func callShape(c model.Collective, size int64, n int) (model.Dtype, int64, bool) {
	for _, dt := range []model.Dtype{model.DtypeFP32, model.DtypeUint8} {
		if count, err := sim.CountOf(c, size, dt, n); err == nil && count > 0 {
			return dt, count, true
		}
	}
	return 0, 0, false
}

// Choose is the answer for a call of coll on nBytes: the fastest predicted
// pair among those allowed (NCCL's cost table has a time for them) at the
// power-of-two size nearest nBytes (on a log scale) that the table has.
// ok is false when the table has no allowed pair for the call: NCCL then
// keeps its own choice.
func (tb *Table) Choose(coll model.Collective, nBytes uint64, allowed func(model.Algorithm, model.Protocol) bool) (Answer, bool) {
	if coll < 0 || coll >= model.NumTunedCollectives {
		return Answer{}, false
	}
	for _, k := range nearestLogs(nBytes) {
		cell := &tb.t[coll][k-MinLog]
		best, found := Answer{TimeUs: math.Inf(1)}, false
		for a := model.Algorithm(0); a < model.NumAlgorithms; a++ {
			for p := model.Protocol(0); p < model.NumProtocols; p++ {
				pt := cell[a][p]
				if pt.us < 0 || !allowed(a, p) {
					continue
				}
				if pt.us < best.TimeUs { // strict: ties go to the lower algorithm, then protocol, as NCCL's scan
					best, found = Answer{Algo: a, Proto: p, NChannels: pt.nChannels, TimeUs: pt.us}, true
				}
			}
		}
		if found {
			return best, true
		}
	}
	return Answer{}, false
}

// nearestLogs lists the table's sizes by distance from nBytes on a log
// scale: the rounded log2 first, then outwards.
func nearestLogs(nBytes uint64) []int {
	k := MinLog
	if nBytes > 0 {
		k = bits.Len64(nBytes) - 1
		if k < 63 && nBytes-(1<<k) > (uint64(1)<<k)/2 {
			k++ // nearer the next power of two (by bytes, within the octave)
		}
	}
	k = min(max(k, MinLog), MaxLog)
	out := []int{k}
	for d := 1; d <= MaxLog-MinLog; d++ {
		if k-d >= MinLog {
			out = append(out, k-d)
		}
		if k+d <= MaxLog {
			out = append(out, k+d)
		}
	}
	return out
}
