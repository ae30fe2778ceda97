package transport

import (
	"fmt"
	"log/slog"
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
//
// A split: value whose K is not a positive integer is taken as a literal
// id (every rank on that one "host") after a warning naming the variable
// and value; HostIDFromEnv returns it as an error instead, which is what
// a command should call before it starts ranks.
func HostID(rank int) string {
	id, err := HostIDFromEnv(rank)
	if err != nil {
		slog.Warn(err.Error() + "; taking the whole value as the host id")
		return os.Getenv(envHostID)
	}
	return id
}

// envHostID is the variable HostID reads.
const envHostID = "TWINCCL_HOSTID"

// HostIDFromEnv is HostID, with a TWINCCL_HOSTID of the form split:K
// whose K is not a positive integer (split:abc, split:0, split:) an error
// naming the variable and its value.
func HostIDFromEnv(rank int) (string, error) {
	return ParseHostID(os.Getenv(envHostID), rank)
}

// ParseHostID is the host identity of rank under TWINCCL_HOSTID=v (see
// HostID): v itself, the host name when v is empty, or for split:K the
// host name and rank/K.
func ParseHostID(v string, rank int) (string, error) {
	h, _ := os.Hostname()
	if k, ok := strings.CutPrefix(v, "split:"); ok {
		per, err := strconv.Atoi(k)
		if err != nil || per <= 0 {
			return "", fmt.Errorf("%s=%q: split:K wants K, the ranks per host, as a positive integer", envHostID, v)
		}
		return fmt.Sprintf("%s/%d", h, rank/per), nil
	}
	if v != "" {
		return v, nil
	}
	return h, nil
}
