package ncclapi

import (
	"fmt"
	"math/bits"

	"github.com/twinccl/twinccl/model"
)

// Call is one collective or point-to-point call as the C API received it.
type Call struct {
	Coll       model.Collective // Broadcast ... AllReduce, Send, Recv, AlltoAll
	Send, Recv uintptr          // device buffers (0 where NULL)
	Count      uint64           // NCCL's count argument (elements)
	Dtype, Op  int32            // raw ncclDataType_t, ncclRedOp_t
	// Root is the root of Broadcast and Reduce, the peer of Send and Recv.
	Root   int
	Stream uintptr // the caller's cudaStream_t
}

// NCCL 2.28's datatypes beyond model's: the two fp8 formats, which twinccl
// moves as bytes but does not reduce.
const (
	dtypeFP8e4m3 = 10
	dtypeFP8e5m2 = 11
	numDtypes    = 12
)

// reduces reports whether the call combines values (and so takes a
// reduction operation).
func (k Call) reduces() bool {
	switch k.Coll {
	case model.CollAllReduce, model.CollReduce, model.CollReduceScatter:
		return true
	}
	return false
}

// rooted reports whether Root is a root rank or a peer that must exist.
func (k Call) rooted() bool {
	switch k.Coll {
	case model.CollBroadcast, model.CollReduce, model.CollSend, model.CollRecv:
		return true
	}
	return false
}

// dtype is the model datatype the call runs with: its own, or bytes for
// an fp8 call that only moves data.
func (k Call) dtype() model.Dtype {
	if k.Dtype == dtypeFP8e4m3 || k.Dtype == dtypeFP8e5m2 {
		return model.DtypeUint8
	}
	return model.Dtype(k.Dtype)
}

// CheckArgs validates what needs no communicator (datatype, operation),
// so that these errors are reported whatever the comm argument is.
func (k Call) CheckArgs() error {
	if k.Dtype < 0 || k.Dtype >= numDtypes {
		return errorf(InvalidArgument, "invalid datatype %d (ncclDataType_t is 0 to %d)", k.Dtype, numDtypes-1)
	}
	if !k.reduces() {
		return nil
	}
	if k.Op < 0 || k.Op >= int32(model.NumRedOps) {
		return errorf(InvalidArgument, "invalid reduction operation %d: the built-in ones are 0 to %d, and user-defined ones (ncclRedOpCreatePreMulSum) are not implemented", k.Op, model.NumRedOps-1)
	}
	if k.Dtype == dtypeFP8e4m3 || k.Dtype == dtypeFP8e5m2 {
		return errorf(InvalidUsage, "%s of fp8 data (ncclDataType_t %d): twinccl does not reduce fp8 values", k.Coll, k.Dtype)
	}
	return nil
}

// check validates the call against its communicator: the root or peer,
// the buffers the rank reads and writes, and the sizes.
func (k Call) check(c *Comm) error {
	if err := k.CheckArgs(); err != nil {
		return err
	}
	if k.rooted() && (k.Root < 0 || k.Root >= c.NRanks) {
		what := "root"
		if k.Coll == model.CollSend || k.Coll == model.CollRecv {
			what = "peer"
		}
		return errorf(InvalidArgument, "%s %s %d out of range for %d ranks", k.Coll, what, k.Root, c.NRanks)
	}
	inB, outB, ok := k.bytes(c.NRanks)
	if !ok {
		return errorf(InvalidArgument, "%s of %d elements of %s overflows the address space", k.Coll, k.Count, k.dtype())
	}
	if inB > 0 && k.Send == 0 && k.readsSend(c.Rank) {
		return errorf(InvalidArgument, "%s: sendbuff is NULL", k.Coll)
	}
	if outB > 0 && k.Recv == 0 && k.writesRecv(c.Rank) {
		return errorf(InvalidArgument, "%s: recvbuff is NULL", k.Coll)
	}
	return nil
}

// readsSend and writesRecv say whether rank me uses its send and receive
// buffer (a Broadcast's non-root ranks send nothing, a Reduce's non-root
// ranks receive nothing).
func (k Call) readsSend(me int) bool {
	switch k.Coll {
	case model.CollRecv:
		return false
	case model.CollBroadcast:
		return me == k.Root
	}
	return true
}

func (k Call) writesRecv(me int) bool {
	switch k.Coll {
	case model.CollSend:
		return false
	case model.CollReduce:
		return me == k.Root
	}
	return true
}

// bytes are the sizes of the rank's send and receive buffers for n
// ranks; ok is false when they overflow.
func (k Call) bytes(n int) (in, out uint64, ok bool) {
	es := uint64(k.dtype().Size())
	hi, b := bits.Mul64(k.Count, es)
	if hi != 0 || b > 1<<62 {
		return 0, 0, false
	}
	hi, nb := bits.Mul64(b, uint64(n))
	if hi != 0 || nb > 1<<62 {
		return 0, 0, false
	}
	switch k.Coll {
	case model.CollAllGather:
		return b, nb, true
	case model.CollReduceScatter:
		return nb, b, true
	case model.CollAlltoAll:
		return nb, nb, true
	case model.CollSend:
		return b, 0, true
	case model.CollRecv:
		return 0, b, true
	}
	return b, b, true
}

// inPlace reports NCCL's in-place placement for rank me: one buffer, or
// for AllGather and ReduceScatter the rank's block of the larger one.
func (k Call) inPlace(me int) bool {
	b := k.Count * uint64(k.dtype().Size())
	switch k.Coll {
	case model.CollAllGather:
		return k.Send == k.Recv+uintptr(uint64(me)*b)
	case model.CollReduceScatter:
		return k.Recv == k.Send+uintptr(uint64(me)*b)
	}
	return k.Send == k.Recv
}

func (k Call) String() string {
	return fmt.Sprintf("%s count %d %s", k.Coll, k.Count, k.dtype())
}
