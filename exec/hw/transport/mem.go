// Package transport holds the connections of the hardware runtime: the
// memory layout every connection shares (NCCL's ncclSendMem/ncclRecvMem
// counters, a connFifo and one slot buffer per protocol), the shm
// transport (host shared memory between processes of one host) and the
// net transport over a plugin interface with a TCP socket implementation
// and its proxy goroutines. Setup runs NCCL's sequence per connection:
// choose a transport (shm, then net), setup on both sides, exchange
// connect info through the bootstrap, connect.
package transport

import (
	"sync/atomic"
	"unsafe"

	"github.com/twinccl/twinccl/model"
)

// Layout of a connection's memory. Counters sit on their own cache lines.
const (
	offHead = 0   // u64, released steps (written by the receiver)
	offTail = 64  // u64, posted steps (written by the sender)
	offFifo = 128 // [model.ProgSlots]FifoEntry
	// HeaderBytes is the size of the counters page.
	HeaderBytes = 4096
)

// FifoEntry is one connFifo record: what the sender put in a slot.
type FifoEntry struct {
	Size  int64 // data bytes; -1 when empty
	Wire  int64 // bytes on the wire (LL/LL128 lines included)
	Step  int64 // absolute step of the slot's slice
	Steps int32 // steps the slice spans
	Proto int32
}

// fifoBytes is the size of one FifoEntry in memory.
const fifoBytes = 32

// SlotStride is the distance between two slots of protocol p: the default
// step size, so that every Program whose StepBytes is at most that fits.
func SlotStride(p model.Protocol) int { return model.ProtoStepBytes(p) }

// BufOffset is the offset of protocol p's slot buffer.
func BufOffset(p model.Protocol) int {
	switch p {
	case model.ProtoLL:
		return HeaderBytes
	case model.ProtoLL128:
		return HeaderBytes + model.BuffSizeLL
	default:
		return HeaderBytes + model.BuffSizeLL + model.BuffSizeLL128
	}
}

// MemBytes is the size of a connection's memory.
const MemBytes = HeaderBytes + model.BuffSizeLL + model.BuffSizeLL128 + model.BuffSizeSimple

// Mem is a view of a connection's memory, shared between the processes of
// an shm connection or private to one side of a net connection.
type Mem []byte

func (m Mem) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&m[off])) }

// Head is the receiver's released-step counter.
func (m Mem) Head() uint64 { return atomic.LoadUint64(m.u64(offHead)) }

// SetHead stores the released-step counter.
func (m Mem) SetHead(v uint64) { atomic.StoreUint64(m.u64(offHead), v) }

// Tail is the sender's posted-step counter.
func (m Mem) Tail() uint64 { return atomic.LoadUint64(m.u64(offTail)) }

// SetTail stores the posted-step counter (after the data and the fifo
// entry: atomic stores order the plain stores before them).
func (m Mem) SetTail(v uint64) { atomic.StoreUint64(m.u64(offTail), v) }

// Fifo reads connFifo entry i.
func (m Mem) Fifo(i int) FifoEntry {
	o := offFifo + i*fifoBytes
	return FifoEntry{
		Size:  int64(atomic.LoadUint64(m.u64(o))),
		Wire:  int64(atomic.LoadUint64(m.u64(o + 8))),
		Step:  int64(atomic.LoadUint64(m.u64(o + 16))),
		Steps: int32(atomic.LoadUint64(m.u64(o+24)) & 0xffffffff),
		Proto: int32(atomic.LoadUint64(m.u64(o+24)) >> 32),
	}
}

// SetFifo writes connFifo entry i.
func (m Mem) SetFifo(i int, e FifoEntry) {
	o := offFifo + i*fifoBytes
	atomic.StoreUint64(m.u64(o), uint64(e.Size))
	atomic.StoreUint64(m.u64(o+8), uint64(e.Wire))
	atomic.StoreUint64(m.u64(o+16), uint64(e.Step))
	atomic.StoreUint64(m.u64(o+24), uint64(uint32(e.Steps))|uint64(uint32(e.Proto))<<32)
}

// Slot is the memory of slot i of protocol p, from its start to the end
// of the protocol buffer (a Simple slice spanning several steps runs on).
func (m Mem) Slot(p model.Protocol, i int) []byte {
	o := BufOffset(p) + i*SlotStride(p)
	return m[o : BufOffset(p)+model.ProtoBuffSize(p)]
}

// Init marks every fifo entry empty.
func (m Mem) Init() {
	for i := 0; i < model.ProgSlots; i++ {
		m.SetFifo(i, FifoEntry{Size: -1, Step: -1})
	}
}
