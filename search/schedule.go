package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// minTrafficPerChannel is the least traffic NCCL gives a channel when it
// spreads a collective over channels (scheduleCollTasksToPlan). Later
// sources show 32 KiB; 16 KiB is what reproduces every channel range NCCL
// 2.28.9 logged on our H200 pair (testdata of TestSplitChannelsMatchesNCCLLog).
const minTrafficPerChannel = 16 << 10

// ChannelSplit is how NCCL spreads one collective over its channels: a
// contiguous range of channels, the first holding CountLo elements, the
// middle ones CountMid each and the last CountHi (ncclDevWorkColl's cbd).
type ChannelSplit struct {
	ChannelLo, ChannelHi       int
	CountLo, CountMid, CountHi int64
	NMidChannels               int
}

// NChannels is the number of channels the collective runs on.
func (s ChannelSplit) NChannels() int { return s.ChannelHi - s.ChannelLo + 1 }

// trafficPerByte is ncclFuncTrafficPerByte: how often each byte crosses a
// link.
func trafficPerByte(coll model.Collective, nRanks int) int64 {
	switch coll {
	case model.CollAllReduce:
		return 2
	case model.CollAllGather, model.CollReduceScatter:
		return int64(nRanks)
	}
	return 1
}

// SplitChannels is NCCL 2.28.9's scheduleCollTasksToPlan for a plan that
// holds a single collective (no CollNet): count elements of elemSize bytes
// (NCCL's count argument) of coll, run with proto on at most maxChannels
// channels (Choice.NChannels) of a communicator with commChannels channels.
// AllGather and Broadcast are moved as bytes, as NCCL does.
func SplitChannels(coll model.Collective, proto model.Protocol, count int64, elemSize, nRanks, maxChannels, commChannels int) (ChannelSplit, error) {
	var s ChannelSplit
	if count < 0 || elemSize <= 0 || nRanks <= 0 || maxChannels <= 0 || commChannels <= 0 {
		return s, fmt.Errorf("split channels: count %d, element size %d, ranks %d, channels %d/%d out of range",
			count, elemSize, nRanks, maxChannels, commChannels)
	}
	if count == 0 { // NCCL returns before scheduling an empty call
		return s, nil
	}
	if coll == model.CollAllGather || coll == model.CollBroadcast {
		count *= int64(elemSize)
		elemSize = 1
	}
	es := int64(elemSize)
	tpb := trafficPerByte(coll, nRanks)
	if proto == model.ProtoLL {
		tpb *= 4 // LL lines carry half data, and NCCL counts LL traffic 4x
	}
	traffic := max(int64(minTrafficPerChannel), count*es*tpb)
	nCh := int64(min(maxChannels, commChannels))
	perChannel := divUp(traffic/nCh, 16) * 16
	cellSize := divUp(divUp(minTrafficPerChannel, tpb), 16) * 16
	perCell := cellSize / es
	cells := divUp(count*es, cellSize)
	trafficPerCell := cellSize * tpb
	cellsPerChannel := min(cells, divUp(perChannel, trafficPerCell))
	cellsLo := cells
	if commChannels != 1 {
		cellsLo = min(cells, divUp(perChannel, trafficPerCell))
	}
	nMid := int64(0)
	cellsHi := int64(0)
	if cellsPerChannel > 0 {
		nMid = (cells - cellsLo) / cellsPerChannel
		cellsHi = (cells - cellsLo) % cellsPerChannel
	}
	n := nMid
	if cellsLo != 0 {
		n++
	}
	if cellsHi != 0 {
		n++
	}
	if int64(commChannels) < n { // more than the communicator has
		nMid = int64(commChannels) - 2
		cellsPerChannel = (cells - cellsLo) / (nMid + 1)
		cellsHi = cellsPerChannel + (cells-cellsLo)%(nMid+1)
	}
	if cellsHi == 0 && nMid != 0 {
		cellsHi = cellsPerChannel
		nMid--
	}
	lo := 0
	if cellsLo == 0 { // the first channel got nothing: start one later
		lo = 1
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
	excess := cells*perCell - count
	if s.CountHi != 0 {
		s.CountHi -= excess
	} else {
		s.CountLo -= excess
	}
	n = nMid
	if s.CountLo != 0 {
		n++
	}
	if cellsHi != 0 {
		n++
	}
	n = max(n, 1)
	s.ChannelLo, s.ChannelHi, s.NMidChannels = lo, lo+int(n)-1, int(nMid)
	return s, nil
}

func divUp(a, b int64) int64 { return (a + b - 1) / b }
