package gpudev

import (
	"fmt"

	"github.com/twinccl/twinccl/traces"
)

// EventRows turns the stamps of the last finished traced launch into event
// trace rows of call number call on communicator comm: one row per slice,
// numbered per channel in the order the rank's lanes ran them, with the
// peers the slice sent to and received from. Times are the GPU's
// %globaltimer (nanoseconds; one clock per node).
func (l *Launch) EventRows(comm uint64, call int64) ([]traces.EventRow, error) {
	sl, err := l.Trace()
	if err != nil {
		return nil, err
	}
	if sl == nil && l.nLanes > 0 {
		return nil, fmt.Errorf("gpudev rank %d: the launch was prepared without tracing", l.d.comm.Rank())
	}
	step := map[int]int64{}
	rows := make([]traces.EventRow, 0, len(sl))
	for _, s := range sl {
		ln := &l.p.Lanes[s.Lane]
		r := traces.EventRow{Comm: comm, Call: call, Rank: int32(s.Rank), Channel: int32(s.Channel), SendPeer: -1, RecvPeer: -1,
			Primitive: s.Kind.String(), Protocol: l.p.Proto.String(), Step: step[s.Channel], Bytes: s.Bytes,
			StartNs: int64(s.Start), EndNs: int64(s.End), DataNs: int64(s.DataStart), Source: traces.SourceHW}
		if s.Kind.Sends() && len(ln.Send) > 0 {
			r.SendPeer = l.p.Conns[ln.Send[0]].To
		}
		if s.Kind.Receives() && len(ln.Recv) > 0 {
			r.RecvPeer = l.p.Conns[ln.Recv[0]].From
		}
		step[s.Channel]++
		rows = append(rows, r)
	}
	return rows, nil
}
