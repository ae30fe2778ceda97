package search

import (
	"fmt"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// This file is NCCL 2.28.9's per-call choice (src/enqueue.cc:
// updateCollCostTable, topoGetAlgoInfo; src/graph/tuning.cc:
// ncclTopoGetAlgoTime): the predicted time of every algorithm and
// protocol, the cheapest one, and the channels and threads it runs with.

// CostIgnore is the cost of a combination the choice does not consider:
// NCCL_ALGO_PROTO_IGNORE for algorithms skipped outright, and the time
// ncclTopoGetAlgoTime reports for a zero bandwidth. Any negative cost is
// ignored by the choice.
const CostIgnore float32 = -1

// tuneMaxWorkBatchColls is NCCL_MAX_DEV_WORK_BATCH_COLLS: collectives per
// 1 KiB work batch (128-byte work structs); non-ring latencies are paid
// once per batch of pipelined operations.
const tuneMaxWorkBatchColls = 8

// tuneMaxDirectArity and tuneMaxNVLSArity are NCCL_MAX_DIRECT_ARITY and
// NCCL_MAX_NVLS_ARITY.
const (
	tuneMaxDirectArity = 7
	tuneMaxNVLSArity   = 32
)

// Call describes one collective call for Tuning.ChooseCall.
type Call struct {
	Coll model.Collective
	// Count is NCCL's count argument: elements per rank for AllGather
	// (send) and ReduceScatter (receive), elements of the buffer otherwise.
	Count    int64
	TypeSize int // bytes per element
	// FP8 marks an fp8 (e4m3/e5m2) datatype: deep Ring reductions lose
	// precision, so NCCL makes Ring 1024× more expensive beyond 8 ranks.
	FP8 bool
	// ScaledReduce marks ncclAvg or a pre-multiplied sum (device op
	// PreMulSum or SumPostDiv), which PAT ReduceScatter does not support.
	ScaledReduce bool
	// NVLSUnsupported and CollNetUnsupported mark an (op, type) NVLS or
	// the CollNet plugin cannot reduce (ncclNvlsSupported,
	// collNetSupportMatrix); they are ignored for collectives that do not
	// reduce through them (NVLS: AllGather; CollNet: AllGather, Broadcast).
	NVLSUnsupported, CollNetUnsupported bool
	// NumPipeOps is the number of operations aggregated into the call (0
	// counts as 1); latencies are paid per operation (Ring) or per batch
	// of 8 (other algorithms).
	NumPipeOps int
}

// Choice is the outcome of the per-call tuning.
type Choice struct {
	Algo  model.Algorithm
	Proto model.Protocol
	// NChannels is the channel budget (nMaxChannels) and NThreads the
	// threads per block (nWarps*32) for the chosen pair.
	NChannels, NThreads int
	// TimeUs is the predicted time of the chosen pair in µs.
	TimeUs float32
	// NBytes is the size the model charges: count*typeSize, times nRanks
	// for AllGather and ReduceScatter.
	NBytes int64
	// Costs is the predicted time of every pair (µs); negative for pairs
	// that were not considered (see CostIgnore).
	Costs [model.NumAlgorithms][model.NumProtocols]float32
}

// Choose picks the algorithm, protocol, channels and threads NCCL uses for
// one call of coll on count elements of typeSize bytes (a plain call: no
// fp8, sum-like op, one operation). See ChooseCall.
func (t *Tuning) Choose(coll model.Collective, count int64, typeSize int) (Choice, error) {
	return t.ChooseCall(Call{Coll: coll, Count: count, TypeSize: typeSize})
}

// ChooseCall is NCCL's ncclGetAlgoInfo without a tuner plugin: it fills
// the cost table, takes the smallest non-negative time (scanning
// algorithms, then protocols, with a strict "<": ties go to the lower
// algorithm, then the lower protocol) and sizes channels and threads for
// the pair (topoGetAlgoInfo). With one rank only Ring/Simple is costed (0).
func (t *Tuning) ChooseCall(c Call) (Choice, error) {
	var ch Choice
	if c.Coll < 0 || int(c.Coll) >= nColl {
		return ch, fmt.Errorf("choose: %s is not a tuned collective", c.Coll)
	}
	if c.Count < 0 || c.TypeSize <= 0 {
		return ch, fmt.Errorf("choose %s: count %d and type size %d must be non-negative and positive", c.Coll, c.Count, c.TypeSize)
	}
	pipeOps := max(c.NumPipeOps, 1)
	nBytes := c.Count * int64(c.TypeSize)
	if c.Coll == model.CollAllGather || c.Coll == model.CollReduceScatter {
		nBytes *= int64(t.NRanks)
	}
	ch.NBytes = nBytes
	ch.Costs = t.costTable(c, nBytes, pipeOps)

	minTime := float32(3600000000.0)
	algo, proto := -1, -1
	for a := 0; a < nAlgo; a++ {
		for p := 0; p < nProto; p++ {
			if v := ch.Costs[a][p]; v >= 0 && v < minTime {
				algo, proto, minTime = a, p, v
			}
		}
	}
	if algo < 0 {
		var env []string
		if t.AlgoEnv != "" {
			env = append(env, fmt.Sprintf("NCCL_ALGO was set to %q", t.AlgoEnv))
		}
		if t.ProtoEnv != "" {
			env = append(env, fmt.Sprintf("NCCL_PROTO was set to %q", t.ProtoEnv))
		}
		msg := fmt.Sprintf("choose %s: no algorithm/protocol available", c.Coll)
		if len(env) > 0 {
			msg += " (" + strings.Join(env, ", ") + ")"
		}
		return ch, fmt.Errorf("%s", msg)
	}
	ch.Algo, ch.Proto, ch.TimeUs = model.Algorithm(algo), model.Protocol(proto), minTime
	ch.NChannels, ch.NThreads = t.channelsAndThreads(ch.Algo, ch.Proto, nBytes)
	return ch, nil
}

// costTable is updateCollCostTable: CostIgnore for skipped algorithms,
// AlgoTime for the others.
func (t *Tuning) costTable(c Call, nBytes int64, pipeOps int) [nAlgo][nProto]float32 {
	var table [nAlgo][nProto]float32
	for a := range table {
		for p := range table[a] {
			table[a][p] = CostIgnore
		}
	}
	if t.NRanks == 1 {
		table[model.AlgoRing][model.ProtoSimple] = 0
		return table
	}
	collNet := t.CollNet
	if c.CollNetUnsupported && (c.Coll == model.CollAllReduce || c.Coll == model.CollReduce || c.Coll == model.CollReduceScatter) {
		collNet = false
	}
	// AllGather needs no NVLS reduction, so the (op, type) does not matter.
	nvls := t.NVLS && (!c.NVLSUnsupported || c.Coll == model.CollAllGather)
	for ai := 0; ai < nAlgo; ai++ {
		a := model.Algorithm(ai)
		if (a == model.AlgoCollNetDirect || a == model.AlgoCollNetChain) && !collNet {
			continue
		}
		// CollNet Direct and Chain handle at most 8 local GPUs.
		if (a == model.AlgoCollNetDirect || a == model.AlgoCollNetChain) && t.MaxLocalRanks > tuneMaxDirectArity+1 {
			continue
		}
		if (a == model.AlgoNVLS || a == model.AlgoNVLSTree) && (!nvls || (c.Coll != model.CollAllReduce && t.LocalRanks > tuneMaxNVLSArity)) {
			continue
		}
		if a == model.AlgoNVLS && !collNet && t.NNodes > 1 {
			continue
		}
		if a == model.AlgoPAT && c.Coll == model.CollReduceScatter && c.ScaledReduce {
			continue
		}
		for p := 0; p < nProto; p++ {
			table[a][p] = t.AlgoTime(c.Coll, a, model.Protocol(p), nBytes, pipeOps)
			if c.FP8 && a == model.AlgoRing && t.NRanks > 8 {
				table[a][p] = float32(float64(table[a][p]) * 1024.0)
			}
		}
	}
	return table
}

// AlgoTime is ncclTopoGetAlgoTime: the predicted µs of nBytes of coll with
// algorithm a and protocol p, for numPipeOps aggregated operations, or -1
// when the pair has no bandwidth. Tree AllReduce bandwidth gets NCCL's
// size-dependent correction (NCCL 2.28.9 applies none to NVLS Tree), and
// multi-node Ring/Simple AllReduce latency its plateau factor (1.4, or 1.9
// below sm80) once each rank's share per channel reaches 64 bytes.
func (t *Tuning) AlgoTime(coll model.Collective, a model.Algorithm, p model.Protocol, nBytes int64, numPipeOps int) float32 {
	bw := t.Bandwidth[coll][a][p]
	lat := t.Latency[coll][a][p]
	if bw == 0 {
		return -1
	}
	logSize := tuneLog2i(int64(uint64(nBytes) >> 6))
	if a == model.AlgoTree && coll == model.CollAllReduce && logSize >= 0 && logSize < 23 {
		bw *= tuneTreeCorrection[p][logSize]
	}
	if a == model.AlgoRing && p == model.ProtoSimple && t.NNodes > 1 && coll == model.CollAllReduce {
		if div := int64(int32(t.NChannels * t.NRanks)); div != 0 && uint64(nBytes)/uint64(div) >= 64 {
			f := 1.4
			if t.MinCompCap < 80 {
				f = 1.9
			}
			lat = float32(float64(lat) * f)
		}
	}
	latCount := numPipeOps
	if a != model.AlgoRing {
		latCount = (numPipeOps + tuneMaxWorkBatchColls - 1) / tuneMaxWorkBatchColls
	}
	return float32(lat*float32(latCount)) + float32(uint64(nBytes))/float32(1000*bw)
}

// tuneBelow reports nBytes < product of factors, with NCCL's int
// arithmetic (32-bit, wrapping) and the comparison done in size_t.
func tuneBelow(nBytes int64, factors ...int) bool {
	prod := int32(1)
	for _, f := range factors {
		prod *= int32(f)
	}
	return uint64(nBytes) < uint64(int64(prod))
}

// channelsAndThreads is the second half of topoGetAlgoInfo: the channel
// budget and the threads per block of the chosen pair for nBytes.
func (t *Tuning) channelsAndThreads(a model.Algorithm, p model.Protocol, nBytes int64) (nc, nt int) {
	nc = t.NChannels
	nt = t.MaxThreads[a][p]
	threshold := int(int32(t.ThreadThresholds[a][p]))
	switch a {
	case model.AlgoCollNetDirect:
		// Step down through 16, 8, 4, 2, 1 channels, halving the threshold
		// at 1.5× each step.
		flag := true
		for ncSwitch := 16; ncSwitch >= 1 && flag; ncSwitch /= 2 {
			for {
				flag = tuneBelow(nBytes, nc, nt, t.CollNetHeads, threshold)
				if !flag || nc <= ncSwitch {
					break
				}
				if nc == ncSwitch+ncSwitch/2 {
					threshold /= 2
				}
				nc--
			}
		}
	case model.AlgoNVLS, model.AlgoNVLSTree:
		nc = t.NVLSChannels
		if t.NNodes > 1 && a == model.AlgoNVLS {
			nc = min(t.NVLSChannels, t.NChannels)
		}
	default:
		for tuneBelow(nBytes, nc, nt, threshold) && nc >= 2 {
			nc--
		}
	}
	return nc, t.Threads(a, p, nBytes, nc)
}

// Threads is the thread count per block (nWarps*32) NCCL gives a call of
// nBytes (the tuner's size: AllGather and ReduceScatter count every
// rank's part) with algorithm a and protocol p on nc channels: the
// protocol's maximum, halved while each thread would carry less than its
// threshold, plus the Simple sync warps, at least three warps (the end of
// topoGetAlgoInfo). Channels forced by NCCL_MIN/MAX_NCHANNELS enter as nc.
func (t *Tuning) Threads(a model.Algorithm, p model.Protocol, nBytes int64, nc int) int {
	nt := t.MaxThreads[a][p]
	threshold := int(int32(t.ThreadThresholds[a][p]))
	if a != model.AlgoNVLS && a != model.AlgoNVLSTree && a != model.AlgoCollNetDirect {
		for tuneBelow(nBytes, nc, nt, threshold) && nt%128 == 0 {
			nt /= 2
		}
	}
	if p == model.ProtoSimple {
		switch a {
		case model.AlgoRing:
			nt += tuneWarpSize // sync warp
		case model.AlgoTree:
			nt += 4 * tuneWarpSize // split up/down thread groups
		}
	}
	if nt/tuneWarpSize < 3 {
		nt = 3 * tuneWarpSize
	}
	if a == model.AlgoTree || a == model.AlgoPAT {
		nt = tuneMaxNThreads
	}
	return nt / tuneWarpSize * tuneWarpSize
}
