package ncclapi

import (
	"github.com/twinccl/twinccl/model"
)

// Rooted is NCCL 2.28's ncclGather or ncclScatter.
type Rooted int

const (
	// Gather: every rank's count elements go to the root, rank r's at
	// element r*count of the root's receive buffer.
	Gather Rooted = iota
	// Scatter: the root's block r (element r*count) goes to rank r.
	Scatter
)

func (g Rooted) String() string {
	if g == Gather {
		return "Gather"
	}
	return "Scatter"
}

// EnqueueRooted runs a Gather or Scatter as NCCL 2.28 defines them, as the
// group of sends and receives they are: each rank sends to (Gather) or
// receives from (Scatter) the root, and the root receives from (sends to)
// every rank, itself included, at that rank's block. k's Coll is ignored;
// the other fields are the call's.
func EnqueueRooted(tid int, c *Comm, g Rooted, k Call) error {
	if k.Root < 0 || k.Root >= c.NRanks {
		return errorf(InvalidArgument, "%s root %d out of range for %d ranks", g, k.Root, c.NRanks)
	}
	k.Coll = model.CollBroadcast // checks the datatype and the size of one block
	if err := k.check(c); err != nil {
		return err
	}
	if k.Count == 0 {
		return nil
	}
	if k.Root == c.Rank && ((g == Gather && k.Recv == 0) || (g == Scatter && k.Send == 0)) {
		return errorf(InvalidArgument, "%s: the root's %s is NULL", g, map[Rooted]string{Gather: "recvbuff", Scatter: "sendbuff"}[g])
	}
	if (g == Gather && k.Send == 0) || (g == Scatter && k.Recv == 0) {
		return errorf(InvalidArgument, "%s: %s is NULL", g, map[Rooted]string{Gather: "sendbuff", Scatter: "recvbuff"}[g])
	}
	block := uintptr(k.Count * uint64(k.dtype().Size()))
	mine := Call{Count: k.Count, Dtype: k.Dtype, Root: k.Root, Stream: k.Stream}
	var calls []Call
	if g == Gather {
		mine.Coll, mine.Send = model.CollSend, k.Send
	} else {
		mine.Coll, mine.Recv = model.CollRecv, k.Recv
	}
	calls = append(calls, mine)
	if c.Rank == k.Root {
		for r := 0; r < c.NRanks; r++ {
			at := Call{Count: k.Count, Dtype: k.Dtype, Root: r, Stream: k.Stream}
			if g == Gather {
				at.Coll, at.Recv = model.CollRecv, k.Recv+uintptr(r)*block
			} else {
				at.Coll, at.Send = model.CollSend, k.Send+uintptr(r)*block
			}
			calls = append(calls, at)
		}
	}
	for _, at := range calls {
		if err := at.check(c); err != nil {
			return err
		}
	}
	GroupStart(tid)
	for _, at := range calls {
		_ = Enqueue(tid, c, at) // checked above: inside a group it only records
	}
	return GroupEnd(tid)
}
