package profiler

import (
	"github.com/twinccl/twinccl/traces"
)

// snapshot is what one write of the traces takes under the lock at once:
// how many records it covers, and what its metadata says. Rows are then
// made a batch at a time (writeBatch), so that a write never holds every
// row in memory.
type snapshot struct {
	n          int                // records covered
	childEnd   map[int32]int64    // latest end of each call's proxy operations
	unfinished map[int32]struct{} // calls without an end: left out, counted
	comms      []CommMeta
	dropped    int64
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

// snapshotLocked fixes what a write covers. Calls take their times from
// their kernel channels where NCCL reported them (the GPU's clock moved to
// the host's by the communicator's offset), else from the host's view of
// the kernel channels, else from the host events of the call and of its
// proxy operations. A call that has not ended is left out and counted.
func (r *Recorder) snapshotLocked() snapshot {
	s := snapshot{n: r.recs.n, childEnd: map[int32]int64{}, unfinished: map[int32]struct{}{},
		dropped: r.dropped, apiLevel: r.apiLevel}
	for i := range s.n {
		p := r.recs.at(int32(i))
		if p.typ == TypeProxyOp && p.parent >= 0 && p.stop > s.childEnd[p.parent] {
			s.childEnd[p.parent] = p.stop
		}
	}
	for i := range s.n {
		p := r.recs.at(int32(i))
		if p.typ == TypeColl || p.typ == TypeP2p {
			if _, ok := r.callRow(int32(i), p, s.childEnd); !ok {
				s.unfinished[int32(i)] = struct{}{}
			}
		}
	}
	for _, c := range r.ctxs {
		s.comms = append(s.comms, CommMeta{Comm: hex(c.hash), Name: c.name, Rank: c.rank, NRanks: c.nRanks,
			NNodes: c.nNodes, GlobalRank: r.cfg.GlobalRank, Finalized: c.finalized})
	}
	return s
}

// callRows appends the call rows of records lo..hi-1 of s to rows.
func (r *Recorder) callRows(s *snapshot, lo, hi int, rows []traces.CallRow) []traces.CallRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := lo; i < hi; i++ {
		p := r.recs.at(int32(i))
		if p.typ != TypeColl && p.typ != TypeP2p {
			continue
		}
		if _, skip := s.unfinished[int32(i)]; skip {
			continue
		}
		if row, ok := r.callRow(int32(i), p, s.childEnd); ok {
			rows = append(rows, row)
		}
	}
	return rows
}

// stepRows appends the proxy steps of records lo..hi-1 to rows.
func (r *Recorder) stepRows(lo, hi int, rows []traces.EventRow) []traces.EventRow {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := lo; i < hi; i++ {
		if p := r.recs.at(int32(i)); p.typ == TypeProxyStep {
			if row, ok := r.stepRow(p); ok {
				rows = append(rows, row)
			}
		}
	}
	return rows
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
