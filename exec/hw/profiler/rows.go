package profiler

import (
	"github.com/twinccl/twinccl/traces"
)

// snapshot is what one write of the traces holds.
type snapshot struct {
	calls      []traces.CallRow
	events     []traces.EventRow
	comms      []CommMeta
	dropped    int64
	incomplete int64
	apiLevel   int
}

// CommMeta is one communicator as the trace's metadata lists it.
type CommMeta struct {
	Comm       string `json:"comm"` // hash, "0x..." as the call rows' comm
	Name       string `json:"name,omitempty"`
	Rank       int32  `json:"rank"`
	NRanks     int32  `json:"nranks"` // 0: the ABI version does not say
	NNodes     int32  `json:"nnodes,omitempty"`
	GlobalRank int32  `json:"global_rank"` // -1: the launcher does not say
	Finalized  bool   `json:"finalized"`
}

// snapshotLocked turns the records into rows. Calls take their times from
// their kernel channels where NCCL reported them (the GPU's clock moved to
// the host's by the communicator's offset), else from the host's view of
// the kernel channels, else from the host events of the call and of its
// proxy operations. A call that never ended is left out and counted.
func (r *Recorder) snapshotLocked() snapshot {
	s := snapshot{dropped: r.dropped, apiLevel: r.apiLevel}
	// Latest end among each call's proxy operations, for calls without
	// kernel channel times.
	childEnd := map[int32]int64{}
	for i := range r.recs.n {
		p := r.recs.at(int32(i))
		if p.typ == TypeProxyOp && p.parent >= 0 && p.stop > childEnd[p.parent] {
			childEnd[p.parent] = p.stop
		}
	}
	for i := range r.recs.n {
		p := r.recs.at(int32(i))
		switch p.typ {
		case TypeColl, TypeP2p:
			row, ok := r.callRow(int32(i), p, childEnd)
			if !ok {
				s.incomplete++
				continue
			}
			s.calls = append(s.calls, row)
		case TypeProxyStep:
			if row, ok := r.stepRow(p); ok {
				s.events = append(s.events, row)
			}
		}
	}
	for _, c := range r.ctxs {
		s.comms = append(s.comms, CommMeta{Comm: hex(c.hash), Name: c.name, Rank: c.rank, NRanks: c.nRanks,
			NNodes: c.nNodes, GlobalRank: r.cfg.GlobalRank, Finalized: c.finalized})
	}
	return s
}

func (r *Recorder) callRow(i int32, p *record, childEnd map[int32]int64) (traces.CallRow, bool) {
	c := r.ctxs[p.ctx]
	row := traces.CallRow{
		Job: r.cfg.Job, Comm: p.comm, Call: p.call, Rank: p.rank, NRanks: c.nRanks,
		Op: r.names[p.op], Algorithm: r.names[p.algo], Protocol: r.names[p.proto], Channels: p.nch,
		Count: p.count, Datatype: r.names[p.dtype], RedOp: r.names[p.redop], Root: p.root, Stream: p.stream,
		EnqueueNs: p.enqueue, Source: traces.SourceHW, Host: r.cfg.Host,
	}
	if !c.hashKnown {
		row.Comm = c.hash
	}
	switch {
	case p.gpuStart != 0 && p.gpuStop >= p.gpuStart && c.hasOff:
		row.StartNs = int64(p.gpuStart) + c.minOff
		row.EndNs = int64(p.gpuStop) + c.minOff
	case p.kStart != 0 && p.kStop >= p.kStart:
		row.StartNs, row.EndNs = p.kStart, p.kStop
	default:
		end := max(p.stop, childEnd[i])
		if end == 0 {
			return row, false
		}
		row.StartNs, row.EndNs = p.start, end
	}
	return row, true
}

// stepRow is a proxy step as an event row: a network send or receive of
// one step on a channel, "proxySend" or "proxyRecv".
func (r *Recorder) stepRow(p *record) (traces.EventRow, bool) {
	op := r.recs.at(p.parent)
	if p.stop == 0 || p.stop < p.start {
		return traces.EventRow{}, false
	}
	row := traces.EventRow{Channel: op.channel, SendPeer: -1, RecvPeer: -1, Step: int64(p.step), Bytes: p.bytes,
		StartNs: p.start, EndNs: p.stop, Source: traces.SourceHW, Rank: op.rank, Comm: r.ctxs[op.ctx].hash, Call: -1}
	if op.parent >= 0 {
		call := r.recs.at(op.parent)
		row.Comm, row.Call, row.Rank, row.Protocol = call.comm, call.call, call.rank, r.names[call.proto]
	}
	if op.isSend {
		row.Primitive, row.SendPeer = "proxySend", op.peer
	} else {
		row.Primitive, row.RecvPeer = "proxyRecv", op.peer
	}
	if p.dataNs >= p.start && p.dataNs <= p.stop {
		row.DataNs = p.dataNs
	}
	return row, true
}
