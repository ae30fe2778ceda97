package transport

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// What a device other than the host device needs to drive net
// connections itself (the GPU device: its kernel reads and writes a net
// connection's memory, registered with CUDA and mapped into the GPU,
// exactly where the progress loop looks).

// Offsets in a connection's memory (Mem), for devices that address it
// directly: the released-step counter (head, written by the receiving
// device and, on the send side, by the proxy), the posted-step counter
// (tail, written by the sending device and, on the receive side, by the
// proxy), and the connFifo of model.ProgSlots entries of FifoEntryBytes
// each. An entry is {Size i64, Wire i64, Step i64, Steps u32, Proto u32}
// in little-endian order; a sender writes it before it moves the tail
// past the step. Slot i of protocol p starts at BufOffset(p) +
// i*SlotStride(p).
const (
	MemHeadOffset  = offHead
	MemTailOffset  = offTail
	MemFifoOffset  = offFifo
	FifoEntryBytes = fifoBytes
)

// PolledIdle is how long the progress loop of a proxy in polled mode (see
// PollCounters) keeps polling after its connections last moved or it was
// last woken, before it blocks until the next Notify (or at most
// progressSleep).
const PolledIdle = time.Second

// PollCounters tells the proxy's progress loop that a device moves the
// counters of its connections without calling Conn.Notify (a GPU kernel
// storing to host memory): once idle, the loop then keeps polling for
// PolledIdle (spinning, yielding the core, then sleeping briefly, as
// Backoff does) before it blocks. A device should still Notify its
// connections when it starts work on them (a launch), which ends a block
// at once.
func (s *ProxyService) PollCounters() {
	s.prog.polled.Store(true)
	s.prog.wake()
}

// HostID is the host identity of rank under the environment: ranks with
// the same one are on one host (shm or P2P between them), others talk
// through the net transport. It is TWINCCL_HOSTID, or the host name;
// TWINCCL_HOSTID=split:K puts every K consecutive ranks on a "host" of
// their own, so that one machine exercises the net transport.
func HostID(rank int) string {
	h, _ := os.Hostname()
	v := os.Getenv("TWINCCL_HOSTID")
	if k, ok := strings.CutPrefix(v, "split:"); ok {
		if per, err := strconv.Atoi(k); err == nil && per > 0 {
			return fmt.Sprintf("%s/%d", h, rank/per)
		}
	}
	if v != "" {
		return v
	}
	return h
}
