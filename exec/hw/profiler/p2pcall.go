package profiler

import "fmt"

// Point-to-point calls are numbered so that a send and the receive it
// matches carry the same call number on their communicator: the k-th send
// from rank s to rank d and the k-th receive of d from s are both call
//
//	P2PCallFlag | s<<P2PSenderShift | d<<P2PReceiverShift | k
//
// (NCCL matches sends and receives between two ranks in order). The flag
// keeps them apart from the collectives, which are numbered 0, 1, 2, ...
// in the order they were launched on the communicator, the same on every
// rank.
const (
	P2PCallFlag       = int64(1) << 62
	P2PSenderShift    = 42
	P2PReceiverShift  = 22
	p2pRankLimit      = 1 << 20 // ranks of 20 bits
	p2pSequenceLimit  = 1 << 22 // k of 22 bits
	p2pSequenceFields = p2pSequenceLimit - 1
)

// P2PCall is the call number of the k-th point-to-point transfer from
// sender to receiver.
func P2PCall(sender, receiver int32, k int64) (int64, error) {
	if sender < 0 || sender >= p2pRankLimit || receiver < 0 || receiver >= p2pRankLimit {
		return 0, fmt.Errorf("point-to-point call %d -> %d: ranks must be below %d", sender, receiver, p2pRankLimit)
	}
	if k < 0 || k >= p2pSequenceLimit {
		return 0, fmt.Errorf("point-to-point call %d -> %d: more than %d transfers between the two ranks", sender, receiver, p2pSequenceLimit)
	}
	return P2PCallFlag | int64(sender)<<P2PSenderShift | int64(receiver)<<P2PReceiverShift | k, nil
}

// SplitP2PCall returns the sender, receiver and sequence number of a
// call number P2PCall made, and false for a collective's call number.
func SplitP2PCall(call int64) (sender, receiver int32, k int64, ok bool) {
	if call&P2PCallFlag == 0 || call < 0 {
		return 0, 0, 0, false
	}
	return int32(call>>P2PSenderShift) & (p2pRankLimit - 1), int32(call>>P2PReceiverShift) & (p2pRankLimit - 1),
		call & p2pSequenceFields, true
}
