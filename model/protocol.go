package model

import (
	"fmt"
	"strings"
)

// Protocol constants of NCCL 2.28.9 (nccl-facts §7). Every connection has
// ProgSlots slots per protocol buffer; a slot holds one step.
const (
	// ProgSlots is NCCL_STEPS: the slots of a connection buffer and the
	// number of steps a sender may run ahead of its receiver.
	ProgSlots = 8

	// BuffSizeSimple is NCCL_BUFFSIZE, the Simple buffer of a connection.
	BuffSizeSimple = 4 << 20
	// BuffSizeLL is NCCL_LL_BUFFSIZE: 8 lines x 512 threads x 8 steps x 16 B.
	BuffSizeLL = 8 * 512 * ProgSlots * LLLineBytes
	// BuffSizeLL128 is NCCL_LL128_BUFFSIZE: 120 x 640 x 8 steps x 8 B.
	BuffSizeLL128 = 120 * 640 * ProgSlots * 8

	// LLLineBytes is the wire size of an LL line: {data1, flag1, data2, flag2}.
	LLLineBytes = 16
	// LLLineData is the user data an LL line carries.
	LLLineData = 8
	// LL128LineBytes is the wire size of an LL128 line (16 x u64).
	LL128LineBytes = 128
	// LL128LineData is the user data an LL128 line carries (15 x u64; word
	// 15 is the flag).
	LL128LineData = 120

	// MinTrafficPerChannel is the least traffic a collective task is counted
	// as when it is spread over channels (scheduleCollTasksToPlan). Later
	// NCCL sources show 32 KiB; 16 KiB is what reproduces every channel
	// range NCCL 2.28.9 logged on our H200 pair (search's
	// TestChoiceMatchesNCCLLog and TestDecisionsMatchNCCLUnderSettings).
	MinTrafficPerChannel = 16 << 10

	// P2PChunkSizeNVL is NCCL_P2P_NVL_CHUNKSIZE (single node, all NVLink).
	P2PChunkSizeNVL = 512 << 10
	// P2PChunkSizeDefault is NCCL_P2P_NET_CHUNKSIZE / NCCL_P2P_PCI_CHUNKSIZE.
	P2PChunkSizeDefault = 128 << 10
	// P2PLLThreshold is NCCL_P2P_LL_THRESHOLD, per channel.
	P2PLLThreshold = 16384
	// P2PPartAlign is the alignment of a p2p transfer's per-channel parts.
	P2PPartAlign = 4 << 10
)

// ProtoBuffSize is the default connection buffer of a protocol.
func ProtoBuffSize(p Protocol) int {
	switch p {
	case ProtoLL:
		return BuffSizeLL
	case ProtoLL128:
		return BuffSizeLL128
	default:
		return BuffSizeSimple
	}
}

// MinBuffSizeSimple and MaxBuffSizeSimple bound the NCCL_BUFFSIZE a
// Program may be generated for: a step must hold at least one Simple
// grain (512 B) per slot, and a slot stays below 1 GiB.
const (
	MinBuffSizeSimple = ProgSlots * 4096
	MaxBuffSizeSimple = ProgSlots << 27
)

// CheckBuffSizeSimple checks an NCCL_BUFFSIZE value for the Simple
// buffer: a multiple of ProgSlots times the Simple grain (so that every
// step holds whole grains) within [MinBuffSizeSimple, MaxBuffSizeSimple].
func CheckBuffSizeSimple(n int64) error {
	if n < MinBuffSizeSimple || n > MaxBuffSizeSimple || n%(ProgSlots*512) != 0 {
		return fmt.Errorf("NCCL_BUFFSIZE=%d: want a multiple of %d between %d and %d", n, ProgSlots*512, MinBuffSizeSimple, MaxBuffSizeSimple)
	}
	return nil
}

// ProtoStepBytes is the wire size of one step (one slot): buffSize/NCCL_STEPS.
func ProtoStepBytes(p Protocol) int { return ProtoBuffSize(p) / ProgSlots }

// ProtoStepData is the user data one step can carry: the whole slot for
// Simple, half of it for LL, 15/16 of it for LL128.
func ProtoStepData(p Protocol) int {
	s := ProtoStepBytes(p)
	switch p {
	case ProtoLL:
		return s / LLLineBytes * LLLineData
	case ProtoLL128:
		return s / LL128LineBytes * LL128LineData
	default:
		return s
	}
}

// ProtoGrainSize is ncclProtoGrainSize: chunk sizes are multiples of it.
// For LL128 it is what one warp moves per round: 16 lines of 120 data bytes.
func ProtoGrainSize(p Protocol) int {
	switch p {
	case ProtoLL:
		return 16
	case ProtoLL128:
		return 1920
	default:
		return 512
	}
}

// ChunkSteps and SliceSteps of a collective on an algorithm and protocol:
// only ring with Simple uses more than one step per chunk (nccl-facts §7.1).
func ChunkSliceSteps(c Collective, a Algorithm, p Protocol) (chunkSteps, sliceSteps int) {
	if a != AlgoRing || p != ProtoSimple {
		return 1, 1
	}
	switch c {
	case CollAllReduce, CollAllGather, CollReduceScatter:
		return ProgSlots / 2, ProgSlots / 4
	}
	return 1, 1
}

// Dtype is a reduction datatype, numbered as ncclDataType_t.
type Dtype int

// Datatypes.
const (
	DtypeInt8 Dtype = iota
	DtypeUint8
	DtypeInt32
	DtypeUint32
	DtypeInt64
	DtypeUint64
	DtypeFP16
	DtypeFP32
	DtypeFP64
	DtypeBF16
	NumDtypes = 10
)

var dtypeNames = [NumDtypes]string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "fp16", "fp32", "fp64", "bf16"}

func (d Dtype) String() string {
	if d >= 0 && int(d) < NumDtypes {
		return dtypeNames[d]
	}
	return fmt.Sprintf("Dtype(%d)", int(d))
}

// Size is the element size in bytes (0 for an unknown type).
func (d Dtype) Size() int {
	switch d {
	case DtypeInt8, DtypeUint8:
		return 1
	case DtypeFP16, DtypeBF16:
		return 2
	case DtypeInt32, DtypeUint32, DtypeFP32:
		return 4
	case DtypeInt64, DtypeUint64, DtypeFP64:
		return 8
	}
	return 0
}

// ParseDtype reads a datatype name ("fp32", "float32", "half", "bf16", ...).
func ParseDtype(s string) (Dtype, error) {
	alias := map[string]string{"float": "fp32", "float32": "fp32", "half": "fp16", "float16": "fp16",
		"double": "fp64", "float64": "fp64", "bfloat16": "bf16", "char": "int8", "int": "int32", "uint": "uint32"}
	k := strings.ToLower(strings.TrimSpace(s))
	if a, ok := alias[k]; ok {
		k = a
	}
	if i := lookupName(dtypeNames[:], k); i >= 0 {
		return Dtype(i), nil
	}
	return 0, fmt.Errorf("unknown datatype %q (want one of %s)", s, strings.Join(dtypeNames[:], ", "))
}

// RedOp is a reduction operation, numbered as ncclRedOp_t.
type RedOp int

// Reduction operations.
const (
	RedSum RedOp = iota
	RedProd
	RedMax
	RedMin
	RedAvg
	NumRedOps = 5
)

var redOpNames = [NumRedOps]string{"sum", "prod", "max", "min", "avg"}

func (o RedOp) String() string {
	if o >= 0 && int(o) < NumRedOps {
		return redOpNames[o]
	}
	return fmt.Sprintf("RedOp(%d)", int(o))
}

// ParseRedOp reads a reduction name, case-insensitively.
func ParseRedOp(s string) (RedOp, error) {
	if i := lookupName(redOpNames[:], s); i >= 0 {
		return RedOp(i), nil
	}
	return 0, fmt.Errorf("unknown reduction %q (want one of %s)", s, strings.Join(redOpNames[:], ", "))
}

// ProgramCovers reports whether a Program of collective c with algorithm
// a and protocol p can be generated on nRanks ranks: CollAllowed, and
// PAT on two ranks only.
func ProgramCovers(c Collective, a Algorithm, p Protocol, nRanks int) bool {
	return CollAllowed(c, a, p) && (a != AlgoPAT || nRanks == 2)
}

// CollAllowed reports whether NCCL runs collective c with algorithm a and
// protocol p, among the combinations Programs cover: ring for every
// collective, tree for AllReduce, each with LL, LL128 and Simple; PAT
// for AllGather and ReduceScatter with Simple (on two ranks only, see
// NewProgGen); NVLS (Simple) for AllReduce, AllGather and ReduceScatter
// and NVLSTree (Simple) for AllReduce; and the p2p path (SendRecv,
// AlltoAll: NCCL's ring function) with LL and Simple.
func CollAllowed(c Collective, a Algorithm, p Protocol) bool {
	if p < 0 || p >= NumProtocols {
		return false
	}
	if a == AlgoNVLS || a == AlgoNVLSTree {
		// NVLS kernels exist for Simple only; NVLS_TREE for AllReduce only.
		return p == ProtoSimple && (c == CollAllReduce || (a == AlgoNVLS && (c == CollAllGather || c == CollReduceScatter)))
	}
	switch c {
	case CollSendRecv, CollAlltoAll:
		return a == AlgoRing && (p == ProtoSimple || p == ProtoLL)
	case CollAllReduce:
		return a == AlgoRing || a == AlgoTree
	case CollAllGather, CollReduceScatter:
		return a == AlgoRing || (a == AlgoPAT && p == ProtoSimple)
	case CollBroadcast, CollReduce:
		return a == AlgoRing
	}
	return false
}

// progTrafficPerByte is ncclFuncTrafficPerByte.
func progTrafficPerByte(c Collective, nRanks int) int64 {
	switch c {
	case CollAllReduce:
		return 2
	case CollAllGather, CollReduceScatter:
		return int64(nRanks)
	}
	return 1
}

// progMaxSendRecvCount is ncclFuncMaxSendRecvCount for one element.
func progMaxSendRecvCount(c Collective, nRanks int) int64 {
	if c == CollAllGather || c == CollReduceScatter {
		return int64(nRanks)
	}
	return 1
}

func progDivUp(a, b int64) int64   { return (a + b - 1) / b }
func progAlignUp(a, b int64) int64 { return progDivUp(a, b) * b }

// progLog2i is floor(log2(n)) for n >= 1, 0 otherwise.
func progLog2i(n int) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// CollChunkBytes is calcCollChunking's chunk size for a channel part of
// nBytes (global bytes: count x elemSize x nRanks for AllGather and
// ReduceScatter) on one channel; nNodes and nRanks feed the Tree+LL128
// reduction.
func CollChunkBytes(c Collective, a Algorithm, p Protocol, nBytes int64, nNodes, nRanks int) int64 {
	return collChunkBytes(c, a, p, nBytes, nNodes, nRanks, ProtoStepBytes(p))
}

// collChunkBytes is CollChunkBytes with steps of stepBytes.
func collChunkBytes(c Collective, a Algorithm, p Protocol, nBytes int64, nNodes, nRanks, stepBytes int) int64 {
	chunkSteps, _ := ChunkSliceSteps(c, a, p)
	chunk := int64(stepBytes * chunkSteps)
	switch p {
	case ProtoLL:
		chunk /= 2
	case ProtoLL128:
		chunk = chunk / 16 * 15
	}
	if a == AlgoTree && p == ProtoLL128 {
		if nNodes < 1 {
			nNodes = 1
		}
		ppn := float64(nRanks) / float64(nNodes)
		s := 1 + float64(progLog2i(nNodes)) + 0.1*ppn
		const nCh = 1
		for float64(nBytes/(nCh*chunk)) < s*64/ppn && chunk > 131072 {
			chunk /= 2
		}
		for float64(nBytes/(nCh*chunk)) < s*16/ppn && chunk > 32768 {
			chunk /= 2
		}
	}
	g := int64(ProtoGrainSize(p))
	return chunk / g * g
}

// CollPart is the share of a collective one channel works on
// (ncclCollCbdPart): Count elements from Offset, in chunks of ChunkCount.
type CollPart struct {
	Channel    int
	Offset     int64
	Count      int64
	ChunkCount int64
}

// ChannelSplit is how NCCL spreads one collective over its channels: a
// contiguous range of channels, the first holding CountLo elements, the
// NMidChannels middle ones CountMid each and the last CountHi
// (ncclDevWorkColl's cbd). AllGather and Broadcast are counted in bytes, as
// NCCL moves them.
type ChannelSplit struct {
	ChannelLo, ChannelHi       int
	CountLo, CountMid, CountHi int64
	NMidChannels               int
}

// NChannels is the number of channels the collective runs on.
func (s ChannelSplit) NChannels() int { return s.ChannelHi - s.ChannelLo + 1 }

// SplitChannels is NCCL 2.28.9's scheduleCollTasksToPlan for a plan that
// holds a single collective (no CollNet): count elements of elemSize bytes
// (NCCL's count argument) of c, run with protocol p on at most maxChannels
// channels (the tuner's choice) of a communicator with commChannels
// channels. Traffic is cut into cells of MinTrafficPerChannel (LL traffic
// counts four times) dealt to channels in a low, middle and high share.
func SplitChannels(c Collective, p Protocol, count int64, elemSize, nRanks, maxChannels, commChannels int) (ChannelSplit, error) {
	var s ChannelSplit
	if count < 0 || elemSize <= 0 || nRanks <= 0 || maxChannels <= 0 || commChannels <= 0 {
		return s, fmt.Errorf("split channels: count %d, element size %d, ranks %d, channels %d/%d out of range",
			count, elemSize, nRanks, maxChannels, commChannels)
	}
	if count == 0 { // NCCL returns before scheduling an empty call
		return s, nil
	}
	if c == CollAllGather || c == CollBroadcast {
		count *= int64(elemSize)
		elemSize = 1
	}
	es := int64(elemSize)
	tpb := progTrafficPerByte(c, nRanks)
	if p == ProtoLL {
		tpb *= 4
	}
	traffic := max(MinTrafficPerChannel, count*es*tpb)
	perChannel := progAlignUp(traffic/int64(min(maxChannels, commChannels)), 16)
	cellSize := progAlignUp(progDivUp(MinTrafficPerChannel, tpb), 16)
	perCell := cellSize / es
	cells := progDivUp(count*es, cellSize)
	trafficPerCell := cellSize * tpb
	cellsPerChannel := min(cells, progDivUp(perChannel, trafficPerCell))
	cellsLo := cells // on the last channel everything goes low
	if commChannels != 1 {
		cellsLo = min(cells, progDivUp(perChannel, trafficPerCell))
	}
	nMid := (cells - cellsLo) / cellsPerChannel
	cellsHi := (cells - cellsLo) % cellsPerChannel
	if n := int64(progB2i(cellsLo != 0)+progB2i(cellsHi != 0)) + nMid; int64(commChannels) < n {
		nMid = int64(commChannels) - 2 // more than the communicator has
		cellsPerChannel = (cells - cellsLo) / (nMid + 1)
		cellsHi = cellsPerChannel + (cells-cellsLo)%(nMid+1)
	}
	if cellsHi == 0 && nMid != 0 {
		cellsHi = cellsPerChannel
		nMid--
	}
	if cellsLo == 0 { // the first channel got nothing: start one later
		s.ChannelLo = 1
		if nMid == 0 {
			cellsLo, cellsHi = cellsHi, 0
		} else {
			cellsLo = cellsPerChannel
			nMid--
		}
	}
	s.CountLo = cellsLo * perCell
	if nMid != 0 {
		s.CountMid = cellsPerChannel * perCell
	}
	s.CountHi = cellsHi * perCell
	if excess := cells*perCell - count; s.CountHi != 0 {
		s.CountHi -= excess
	} else {
		s.CountLo -= excess
	}
	n := progB2i(s.CountLo != 0) + int(nMid) + progB2i(cellsHi != 0)
	s.ChannelHi, s.NMidChannels = s.ChannelLo+max(n, 1)-1, int(nMid)
	return s, nil
}

// CollParts spreads count elements of collective c over the channels of a
// plan with nChannels channels as NCCL does (SplitChannels, the whole
// channel budget), with one chunk size per share from CollChunkBytes.
func CollParts(c Collective, a Algorithm, p Protocol, d Dtype, count int64, nChannels, nNodes, nRanks int) []CollPart {
	return collParts(c, a, p, d, count, nChannels, nNodes, nRanks, ProtoStepBytes(p))
}

// collParts is CollParts with steps of stepBytes.
func collParts(c Collective, a Algorithm, p Protocol, d Dtype, count int64, nChannels, nNodes, nRanks, stepBytes int) []CollPart {
	return collPartsChunked(c, p, d, count, nChannels, nRanks, func(nBytes int64) int64 {
		return collChunkBytes(c, a, p, nBytes, nNodes, nRanks, stepBytes)
	})
}

// collPartsChunked spreads count elements over nChannels channels as
// SplitChannels does, each share chunked by chunkBytes (calcCollChunking
// on one channel, given the share's global bytes).
func collPartsChunked(c Collective, p Protocol, d Dtype, count int64, nChannels, nRanks int, chunkBytes func(nBytes int64) int64) []CollPart {
	if count <= 0 || nChannels <= 0 {
		return nil
	}
	elem := int64(d.Size())
	sp, err := SplitChannels(c, p, count, d.Size(), nRanks, nChannels, nChannels)
	if err != nil {
		return nil
	}
	if c == CollAllGather || c == CollBroadcast { // split in bytes: back to elements
		sp.CountLo, sp.CountMid, sp.CountHi = sp.CountLo/elem, sp.CountMid/elem, sp.CountHi/elem
	}
	g := int64(ProtoGrainSize(p))
	chunkCount := func(n int64) int64 {
		bytes := chunkBytes(n * elem * progMaxSendRecvCount(c, nRanks))
		return bytes / g * (g / elem)
	}
	var parts []CollPart
	off := int64(0)
	if sp.CountLo != 0 {
		parts = append(parts, CollPart{Channel: sp.ChannelLo, Offset: 0, Count: sp.CountLo, ChunkCount: chunkCount(sp.CountLo)})
		off = sp.CountLo
	}
	if sp.NMidChannels > 0 {
		cc := chunkCount(sp.CountMid)
		for i := 0; i < sp.NMidChannels; i++ {
			parts = append(parts, CollPart{Channel: sp.ChannelLo + len(parts), Offset: off, Count: sp.CountMid, ChunkCount: cc})
			off += sp.CountMid
		}
	}
	if sp.CountHi != 0 {
		parts = append(parts, CollPart{Channel: sp.ChannelLo + len(parts), Offset: off, Count: sp.CountHi, ChunkCount: chunkCount(sp.CountHi)})
	}
	return parts
}

func progB2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
