package sim

import (
	"bytes"
	"cmp"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"reflect"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// CalibVersion is the version of the calibration file format this package
// writes. It reads this version and version 1 (which lacks the host
// memory, SHM latency, socket proxy and harness constants: they take
// their defaults); files of another version are refused.
//
// Version history:
//   - 1: protocols, links, NET proxy latency, SHM copy cap.
//   - 2: host_load_cost and host_store_cost per protocol, host_mem_GBps,
//     shm_latency_us, net_socket (proxy copy throughput and latency),
//     harness_us, and the per-table errors of a fit over several tables.
//     Optional since (absent: their neutral defaults, so files without
//     them predict as before): remote_fence_us and remote_load_cost per
//     protocol and p2p_read, the mechanisms of twinccl's own CUDA
//     executor (calib/h200-twinccl.json). They did not take version 3,
//     which TestCalibFileErrors keeps as the first unknown version.
//     Optional since, in the same way: net_ib (RDMA costs of the ib
//     plugin's NET connections and of GIN puts between hosts: QP message
//     rate, write latency, QPs per connection, stripe size; see IBCalib)
//     and gin (GPU-initiated networking: put issue cost, local copy
//     rate; see GINCalib), with defaults from public ConnectX-7 NDR
//     figures where there are any; and net_socket.send_op_us and
//     recv_op_us (the time a network operation holds a socket proxy
//     thread), and p2p_lane_share per protocol (the copy throughput of
//     one direction of a p2p channel), and gpu_copy_GBps per protocol (the
//     copy throughput a GPU's blocks share), and host_load_us per protocol
//     (a slice's first loads from host memory), and
//     net_socket.flag_check_GBps (a socket send proxy's reading of LL lines),
//     and host_fence_us per protocol (the fence of a Simple slice stored
//     into a SHM connection's host memory), and host_round_us,
//     host_round_lines and threads (LL's rounds of loads from host memory,
//     one line per thread per round, and the executor's block size where
//     it is fixed), and first_op_us, thread_op_us, rate_threads, direct_us,
//     host_turn_us, host_start_us and p2p_slice_overhead_us (NCCL's
//     per-call costs of its primitives and block size, and of SHM), and
//     coll_us per protocol (a collective's own per-call cost), and
//     line_threads per protocol (an LL or LL128 block sized to the call,
//     as twinccl's kernel sizes them), and net_socket.recv_post_us (the
//     part of a socket receive an idle proxy does before its message), and
//     net_socket.post_fence_us (twinccl's fence before it publishes an LL
//     step to its socket proxy), and forward_us per protocol (a step
//     that receives and sends to a peer GPU), and host_cache_MiB and
//     host_cache_GBps (host memory's cache of the staged buffers) and
//     host_reduce_cost per protocol (a reduction's cost per source loaded
//     from host memory).
//
// Since the simulator predicts measured rows as the back-to-back loops
// they were timed with (Simulator.Loop, loop.go), the embedded files are
// fitted that way; a file fitted to isolated calls predicts as it was
// fitted with "--loop 0".
const CalibVersion = 2

// ProtoCalib are the costs of one protocol (LL, LL128 or Simple).
type ProtoCalib struct {
	// StartUs is paid once by every lane before its first primitive call
	// (the protocol's kernel set-up: thread count, shared memory,
	// initial flag or counter reads). Lanes start together.
	StartUs float64 `json:"start_us,omitempty"`
	// OpOverheadUs is paid once per primitive call before its first slice
	// (work loading, pointer set-up). It overlaps with waiting for data.
	OpOverheadUs float64 `json:"op_overhead_us"`
	// SliceOverheadUs is paid per slice once its data and credits are
	// there (flag or counter polling, fences, posting): it does not overlap.
	// Simple slices that carry no data (the tail of a call smaller than
	// its SlicesPerChunk slices) do not pay it: NCCL's Simple primitives
	// only wait for the step and post it for them: no copy, and no
	// system-scope fence but the one that orders a NET send's fifo entry,
	// with no stores of the slice to wait for.
	SliceOverheadUs float64 `json:"slice_overhead_us"`
	// P2PSliceOverheadUs replaces SliceOverheadUs for the slices of p2p
	// Programs (AlltoAll, SendRecv: NCCL's send/receive kernel path, not
	// the collectives' primitives loop). 0: SliceOverheadUs.
	P2PSliceOverheadUs float64 `json:"p2p_slice_overhead_us,omitempty"`
	// CopyGBps is the memory traffic one channel's thread block sustains:
	// bytes loaded plus bytes stored per second (a send loads once and
	// stores once, so it moves data at half this rate).
	CopyGBps float64 `json:"copy_GBps"`
	// ReduceCost is the extra load/store units a reduction costs per
	// additional source (arithmetic and the extra dependency).
	ReduceCost float64 `json:"reduce_cost"`
	// RemoteStoreCost is the cost, in units of a local load or store, of a
	// store that crosses a link into a peer GPU's memory (P2P write) or host
	// memory (SHM): a thread block keeps fewer such stores in flight for
	// their longer round trip. 0 reads as 1 (no difference).
	RemoteStoreCost float64 `json:"remote_store_cost,omitempty"`
	// LoadCost is the cost of a load (from the input buffer or a receive
	// buffer) in units of a local store. 0 reads as 1.
	LoadCost float64 `json:"load_cost,omitempty"`
	// RecvLoadCost is the cost, in units of a local store, of a load from
	// the lane's own receive buffer in GPU memory, which the peer stored
	// into: for a line protocol the line and its flags, read again until
	// the flags match. 0 reads as LoadCost. (Receives from host memory
	// and, in P2P read mode, from the peer's memory cost HostLoadCost
	// and RemoteLoadCost.)
	RecvLoadCost float64 `json:"recv_load_cost,omitempty"`
	// HostLoadCost is the cost of a load from host memory over PCIe (the
	// receive buffer of a SHM connection, or of a NET one staged through
	// host memory), in units of a local store: a non-posted read that a
	// thread block can keep only so many of in flight. 0 reads as
	// LoadCost.
	HostLoadCost float64 `json:"host_load_cost,omitempty"`
	// HostStoreCost is the cost of a store into host memory (SHM and
	// staged NET sends). 0 reads as RemoteStoreCost.
	HostStoreCost float64 `json:"host_store_cost,omitempty"`
	// HostReduceCost is added to ReduceCost for each source of a
	// reduction that the lane loads from host memory (SHM, NET staged
	// through host memory): the block waits out a read across PCIe
	// before it can reduce. On two H100 NCCL's Simple AllReduce over SHM
	// moves 26 GB/s each way per GPU at 96 MiB where its AllGather moves
	// 25 and a four-GPU Broadcast's forwarding GPUs 35: its receive-
	// reduce-copy-send step takes about as long as a send and a receive
	// together. 0: none.
	HostReduceCost float64 `json:"host_reduce_cost,omitempty"`
	// HostLoadUs is paid, like SliceOverheadUs, by every slice with data
	// that a lane receives from host memory (SHM, or NET staged through
	// host memory): the round trip of the first loads over PCIe, which the
	// block waits for before it can store or forward anything (LL and
	// LL128 read their flags with the data; Simple reads after the tail).
	// HostLoadCost is the rest of the slice's loads, per byte. 0: none.
	HostLoadUs float64 `json:"host_load_us,omitempty"`
	// FirstOpUs is paid, like OpOverheadUs, by the first call of each
	// primitive kind in a call of a collective, on every lane: an
	// AllGather lane pays it for its send and for its receive, a Broadcast
	// lane that forwards the chunks of a large call once. p2p Programs
	// (AlltoAll, SendRecv) do not pay it. 0: none.
	FirstOpUs float64 `json:"first_op_us,omitempty"`
	// ThreadOpUs is what FirstOpUs grows by per doubling of the block's
	// threads beyond 3 warps (96): NCCL runs small calls on fewer threads
	// (Program.Threads), and on the H200 pair its one-channel Simple
	// AllGather takes 14.3 us on 96 threads, 15.6 on 160 and 17.3 on 288
	// (NCCL_NTHREADS forcing the count at a size). 0: none.
	ThreadOpUs float64 `json:"thread_op_us,omitempty"`
	// ThreadOpMaxThreads is the block size from which ThreadOpUs grows no
	// more: on the H200 pair NCCL's one-channel Simple AllReduce of 32
	// KiB took 20.39 us on 288 threads (NCCL_NTHREADS=256) and 19.75 on
	// its own 544, its AllGather 17.32 and 17.30, where going from 160
	// to 288 threads had cost 1.9 us (testdata/hw/h200x2/threads; the
	// H100 pair's sweeps, h100x2/threads, agree). Its Broadcast and
	// Reduce, alone, kept growing (+1.3 us from 288 to 544). 0: it grows
	// with every doubling.
	ThreadOpMaxThreads float64 `json:"thread_op_max_threads,omitempty"`
	// ThreadCallUs is what every call of a collective pays, once on each
	// lane at its start, per doubling of the block's threads beyond 3
	// warps (up to ThreadOpMaxThreads), on top of ThreadOpUs per primitive
	// kind: on the H100 pair NCCL's LL128 Broadcast and Reduce (one
	// primitive kind a lane) took 1.5-1.7 us longer on 640 threads than
	// on 320 at 8 KiB, its AllGather 1.2 and its ReduceScatter (two
	// kinds) 2.1 (testdata/hw/h100x2/threads-ll128). 0: none.
	ThreadCallUs float64 `json:"thread_call_us,omitempty"`
	// RateThreads is the block size from which a block sustains CopyGBps;
	// a smaller block (NCCL's small calls: Program.Threads) copies in
	// proportion to its threads, fewer loads and stores in flight. 0: every
	// block sustains CopyGBps.
	RateThreads float64 `json:"rate_threads,omitempty"`
	// DirectUs is paid at the start of every call, before its first
	// primitive, by each lane of a collective whose primitives are NCCL's
	// direct* variants over a P2P connection (Ring AllReduce, AllGather and
	// Broadcast; not Reduce and ReduceScatter): on the H200 pair NCCL's
	// Simple Broadcast and AllGather take 1.4-1.9 us longer than Reduce and
	// ReduceScatter, whose primitives are alike but not direct, with or
	// without CUDA-graph buffer registration (NCCL_GRAPH_REGISTER=0 or 1).
	// Simple only (LL and LL128 map direct* to the plain primitives), not
	// p2p Programs. 0: none.
	DirectUs float64 `json:"direct_us,omitempty"`
	// HostStartUs is paid once per call, before its first primitive, by
	// every lane with a connection through SHM host memory, over and above
	// the per-slice costs: what a call costs whatever its number of hops
	// through host memory (on 2 GPUs one, on 4 three for an AllGather).
	// 0: none.
	HostStartUs float64 `json:"host_start_us,omitempty"`
	// HostTurnUs is paid, with HostLoadUs, by a slice a lane receives from
	// host memory when the lane's last slice with data stored into a SHM
	// connection's host memory: the turn from writing across PCIe to
	// reading across it (a read does not pass the posted writes before
	// it). On the H200 pair NCCL's Simple AllGather over SHM, whose ranks
	// each send and then receive, takes 5.4 us longer than its Broadcast,
	// whose ranks do one or the other; over P2P 3.2. 0: none.
	HostTurnUs float64 `json:"host_turn_us,omitempty"`
	// EmptySliceUs is paid by a Simple slice without data (the tail of a
	// call smaller than its SlicesPerChunk slices) on a lane with a
	// connection through SHM host memory, once its step is there: the
	// lane still polls the step's flag across PCIe and posts it. In
	// twinccl's kernel traces on the H200 pair (data stamps, 2026-11-26)
	// such a slice takes 1.0-2.3 us where it carries no bytes, and a Ring
	// AllReduce of 128-256 KiB pays it three times per channel. 0: free,
	// as every empty Simple slice is without it.
	EmptySliceUs float64 `json:"empty_slice_us,omitempty"`
	// HostRoundUs is paid, with HostLoadUs, by an LL slice received from
	// host memory for every round of loads after its first: the receiving
	// threads load one 16-byte line each (8 data bytes) and spin on its
	// flags before they load the next, so a slice of more lines than the
	// block has threads waits for a read across PCIe once per round. NCCL
	// runs small calls on fewer threads (Program.Threads: 128 on a 3 KiB
	// Broadcast, three rounds). A Simple slice pays it for every pass of
	// its worker warps' hunks after the first (NCCL's copy loop: hunks of
	// 4 KiB, then of 512 B, hunk i on worker warp i mod W, W the block's
	// warps less the one NCCL keeps to synchronise), as far as the
	// slice's copy at the lane's rate does not cover it: on two H100
	// NCCL's Broadcast over SHM at 96 threads took 12.9-13.1 us at 1, 2
	// and 4 KiB (one or two passes) and 15.6-15.8 at 3.5 and 7 KiB (four).
	// 0: no rounds (HostLoadUs once per slice).
	HostRoundUs float64 `json:"host_round_us,omitempty"`
	// HostRoundLines is the number of lines a receiving thread loads in
	// one round when the slice gives every thread that many (twinccl's
	// kernel: TW_LL_HOST_LINES, 4); fewer lines load one per round, as
	// NCCL always does. 0 reads as 1.
	HostRoundLines int `json:"host_round_lines,omitempty"`
	// Threads is the block size of the executor the calibration describes
	// when it is fixed (twinccl's kernel: TW_NTHREADS, 512 for Simple; its
	// LL and LL128 blocks go up to 640 since 2026-11-27, with LineThreads);
	// 0 takes the Program's, NCCL's per call, and 512 where the Program
	// has none.
	Threads int `json:"threads,omitempty"`
	// LineThreads says the executor sizes an LL or LL128 block to the
	// call, as twinccl's kernel does (model.LineThreadsFor): one
	// thread per LL line of the largest primitive call, a warp per four
	// LL128 lines, 64 to Threads (512 if 0). Its per-call costs that grow
	// with the block (ThreadOpUs) then follow the call's size.
	LineThreads bool `json:"line_threads,omitempty"`
	// HostFenceUs is paid, after its data, by every slice with data that a
	// lane stores into a SHM connection's host memory, before the slice
	// posts: the system-scope fence that waits for the block's posted
	// writes across PCIe to complete (NCCL's postPeer; twinccl's kernel
	// does the same). Simple only: LL and LL128 carry their flags in the
	// data and post no tail. A NET send staged through host memory fences
	// too, but its proxy's costs (NetProxyUs) already hold that. 0: none.
	HostFenceUs float64 `json:"host_fence_us,omitempty"`
	// HostPostUs is the delay, on top of SHMLatencyUs, with which a
	// receiver sees a slice of this protocol posted through a SHM
	// connection's host memory: a latency that holds no lane, so a
	// pipeline (Broadcast, Reduce, a two-rank ring, whose next call's
	// sends overlap it) does not see it, where a chain that waits for its
	// peer's answer every call does. NCCL's Simple tree AllReduce of 48 B
	// to 3 KiB over SHM, one hop up to the root and one down on two GPUs,
	// took 23.2 us on the H200 pair and 45.3 on four H200 (three hops
	// each way) where the simulation gave 20.6 and 37.9 without it: about
	// 1.2 us a hop. 0: none.
	HostPostUs float64 `json:"host_post_us,omitempty"`
	// CollUs is paid once per call, at each lane's first primitive, by
	// the calls of the collective it names ("ReduceScatter", ...) under
	// this protocol: what a kernel's function for that collective costs
	// beyond its primitives. NCCL specialises each kernel for LL and
	// reaches the other protocols' functions through a table; its LL128
	// ReduceScatter takes 1.5 us longer per call than its AllGather on
	// H100 and H200 alike, longer even than its AllReduce, which does the
	// same and more. Absent: none.
	CollUs map[string]float64 `json:"coll_us,omitempty"`
	// LinkEff multiplies every link's effective bandwidth for this
	// protocol's wire traffic on the routes from GPU to GPU (and on the
	// others too where HostLinkEff is 0) (store granularity, line format efficiency
	// beyond the flag overhead that is modelled exactly). Fitted for LL and
	// LL128 (at most MaxProtoLinkEff: NCCL's LL Broadcast of 12 MiB on two
	// H200 moves its lines faster than NCCL's NVLink rating); Simple's is
	// the links' own (links.*.eff).
	LinkEff float64 `json:"link_eff"`
	// HostLinkEff is LinkEff on the routes that do not go from GPU to GPU
	// (SHM through host memory, the network): NCCL's NVLink rating
	// understates what the line protocols move over NVLink more than its
	// PCIe rating does. 0 reads as LinkEff.
	HostLinkEff float64 `json:"host_link_eff,omitempty"`
	// ReduceFrac is the share of a tree rank's thread block given to the
	// reduce-up group when it runs reduce and broadcast lanes side by side
	// (NCCL: Simple about 1/2, LL and LL128 70%), where the protocol has
	// no RateThreads; with RateThreads each group copies at the rate of
	// the threads NCCL gives it (model.TreeSplitThreads). On two and four
	// GPUs through SHM, NCCL's Simple tree AllReduce of 24 KiB ran 10-20%
	// faster than groups sharing the block's rate let the simulation.
	ReduceFrac float64 `json:"reduce_frac"`
	// RemoteFenceUs is paid, after its data, by every slice that stores
	// into a peer GPU's memory, before the slice posts and the lane moves
	// on: a system-scope fence that waits for the block's stores over the
	// link (Simple sends in P2P write mode, NCCL's and twinccl's). It does
	// not overlap, and unlike SliceOverheadUs only the sender pays it. 0:
	// none.
	RemoteFenceUs float64 `json:"remote_fence_us,omitempty"`
	// ForwardUs is paid, after its data and before it posts, by every
	// slice with data of a step that both receives and sends to a peer
	// GPU (P2P, either mode): a ring's recvCopySend, recvReduceSend and
	// recvReduceCopySend, which must see what they received before they
	// store it on. Two ranks' rings have such steps only in AllReduce;
	// four ranks' have them in every collective (2 of 3 steps of an
	// AllGather, the middle ranks of a Broadcast's chain). 0: none.
	ForwardUs float64 `json:"forward_us,omitempty"`
	// RelayUs delays, beyond the link's latency, what a lane that
	// receives from one GPU and sends to another over P2P (a ring of
	// three or more ranks) posts while it receives: its receiver sees the
	// step RelayUs later, and the lane itself goes on at once. A
	// latency, where ForwardUs holds the lane: on four H100 NCCL's Simple
	// AllGather, ReduceScatter and AllReduce took 3.7-4.0 us more per
	// extra ring step than on two (the simulation 1.9), while its
	// Broadcast and Reduce chains, whose loops overlap the steps of
	// successive calls, took about as long per call as on two. Two ranks'
	// rings have no such lane. 0: none.
	RelayUs float64 `json:"relay_us,omitempty"`
	// RelayHoldUs is paid, like ForwardUs, after its data and before it
	// posts, by every slice with data that such a relaying lane receives
	// and sends on: a cost that holds the lane, which two ranks' rings
	// never pay (their AllReduce's step that receives and sends sends
	// back to the GPU it received from). NCCL's LL and LL128 on four H100
	// and four H200 ran 3-5% faster in the simulation than on the GPUs
	// without it, and their two-rank AllReduce did not (ForwardUs, which
	// it would pay too, stays 0 for NCCL). 0: none.
	RelayHoldUs float64 `json:"relay_hold_us,omitempty"`
	// RemoteLoadCost is the cost, in units of a local store, of a load
	// from a peer GPU's memory: the receiver's reads of the sender's
	// buffer in P2P read mode (Calib.P2PRead). 0 reads as LoadCost.
	RemoteLoadCost float64 `json:"remote_load_cost,omitempty"`
	// P2PLaneShare is the share of the block's copy throughput that each
	// of the two lanes of a p2p channel (its send and its receive, which
	// NCCL gives half the warps each) gets: above 1/2 where half the warps
	// move more than half the data (copies limited by the stores in flight
	// rather than by the warps). With n lanes on a channel each gets
	// 2·share/n, at most all of it. 0: 1/2.
	P2PLaneShare float64 `json:"p2p_lane_share,omitempty"`
	// GPUCopyGBps is the memory traffic, in CopyGBps's units (loads and
	// stores), that all of a GPU's blocks of one collective sustain
	// together: on a Program of n channels each block moves at most
	// GPUCopyGBps/n, less than CopyGBps when many channels run at once.
	// It is fitted on collectives run on 1, 4, 12 and 24 channels; p2p
	// Programs (AlltoAll, SendRecv) run without it (on two H200 NCCL's
	// AlltoAll moves more than it allows: docs/perf.md at commit 5af611c). 0: no limit.
	GPUCopyGBps float64 `json:"gpu_copy_GBps,omitempty"`
}

// blockThreads is the block size p runs with: sized to its largest
// primitive call (opBytes) where LineThreads says so (up to Threads),
// else Threads, else the Program's (NCCL's per call), else 512.
func (pc *ProtoCalib) blockThreads(p *model.Program, opBytes int64) int {
	switch {
	case pc.LineThreads && p.Proto != model.ProtoSimple:
		return model.LineThreadsFor(p.Proto, opBytes, cmp.Or(pc.Threads, 512))
	case pc.Threads > 0:
		return pc.Threads
	case p.Threads > 0:
		return p.Threads
	}
	return 512
}

// threadDoublings is how many times the block p runs on (blockThreads)
// doubles the smallest NCCL launches, 3 warps (96 threads), counted up
// to ThreadOpMaxThreads where that is set: what ThreadOpUs (each
// primitive kind's first call) and ThreadCallUs (each call) are paid per.
func (pc *ProtoCalib) threadDoublings(p *model.Program, opBytes int64) float64 {
	t := float64(pc.blockThreads(p, opBytes))
	if pc.ThreadOpMaxThreads > 0 {
		t = min(t, max(pc.ThreadOpMaxThreads, 96))
	}
	if t <= 96 {
		return 0
	}
	return math.Log2(t / 96)
}

// threadRate is the share of CopyGBps the block p runs on (blockThreads)
// sustains: all of it from RateThreads threads on, in proportion below.
func (pc *ProtoCalib) threadRate(p *model.Program, opBytes int64) float64 {
	if pc.RateThreads <= 0 {
		return 1
	}
	return min(1, float64(pc.blockThreads(p, opBytes))/pc.RateThreads)
}

// treeGroupShare is the share of its block's copy rate that one of a
// tree rank's two groups of threads sustains, its reduce-up group (up) or
// its broadcast-down group, on the block p runs on. Where the protocol's
// rate follows its threads (RateThreads: NCCL's blocks), each group has
// the threads NCCL gives it (model.TreeSplitThreads) and copies at their
// rate: a 640-thread tree block's groups of 384 and 256 threads each
// sustain a whole block's rate. Elsewhere the groups split the block's
// rate as ReduceFrac says.
func (pc *ProtoCalib) treeGroupShare(p *model.Program, opBytes int64, up bool) float64 {
	if pc.RateThreads <= 0 {
		if up {
			return pc.ReduceFrac
		}
		return 1 - pc.ReduceFrac
	}
	t := pc.blockThreads(p, opBytes)
	u, d := model.TreeSplitThreads(p.Proto, t)
	if !up {
		u = d
	}
	u = max(u, 32) // at least a warp
	return min(1, float64(u)/pc.RateThreads) / pc.threadRate(p, opBytes)
}

// p2pLaneShare is P2PLaneShare with its default.
func (pc *ProtoCalib) p2pLaneShare() float64 {
	if pc.P2PLaneShare == 0 {
		return 0.5
	}
	return pc.P2PLaneShare
}

// remoteLoadCost is RemoteLoadCost with its default.
func (pc *ProtoCalib) remoteLoadCost() float64 {
	if pc.RemoteLoadCost == 0 {
		return pc.loadCost()
	}
	return pc.RemoteLoadCost
}

// remoteStoreCost is RemoteStoreCost with its default.
func (pc *ProtoCalib) remoteStoreCost() float64 {
	if pc.RemoteStoreCost == 0 {
		return 1
	}
	return pc.RemoteStoreCost
}

// hostLoadCost is HostLoadCost with its default.
func (pc *ProtoCalib) hostLoadCost() float64 {
	if pc.HostLoadCost == 0 {
		return pc.loadCost()
	}
	return pc.HostLoadCost
}

// HarnessCostUs is the extra time per call of harness h (HarnessUs[h]);
// a harness on another machine ("NAME@MACHINE") that the calibration
// has no cost for costs what its HarnessBase does.
func (c *Calib) HarnessCostUs(h string) float64 {
	if v, ok := c.HarnessUs[h]; ok {
		return v
	}
	return c.HarnessUs[HarnessBase(h)]
}

// hostStoreCost is HostStoreCost with its default.
func (pc *ProtoCalib) hostStoreCost() float64 {
	if pc.HostStoreCost == 0 {
		return pc.remoteStoreCost()
	}
	return pc.HostStoreCost
}

// recvLoadCost is RecvLoadCost with its default.
func (pc *ProtoCalib) recvLoadCost() float64 {
	if pc.RecvLoadCost == 0 {
		return pc.loadCost()
	}
	return pc.RecvLoadCost
}

// loadCost is LoadCost with its default.
func (pc *ProtoCalib) loadCost() float64 {
	if pc.LoadCost == 0 {
		return 1
	}
	return pc.LoadCost
}

// SocketCalib are the costs of NET connections of the socket plugin
// (NCCL_NET=Socket, or no RDMA device): the proxy thread of every rank
// copies each byte through the kernel's TCP stack.
type SocketCalib struct {
	// ProxyGBps is the copy throughput of one rank's proxy thread: an
	// operation holds it for its bytes at this rate (a send over loopback
	// twice as long: the sender also runs TCP's receive path). 0: 10.
	ProxyGBps float64 `json:"proxy_GBps,omitempty"`
	// LatencyUs is the latency a socket adds to every network step
	// (system calls, loopback or NIC delivery), on top of NetProxyUs.
	LatencyUs float64 `json:"latency_us,omitempty"`
	// SendOpUs and RecvOpUs are the fixed times a network operation holds
	// a rank's proxy thread, besides its copy (ProxyGBps): every slice a
	// connection carries, empty ones too (the proxies exchange a message
	// for each), is a send operation of the sender's proxy and a receive
	// operation of the receiver's (posting the receive, completing it,
	// handing the slice to the GPU). A proxy serves its operations one at
	// a time, those of all its channels and both directions; the receiver
	// sees a slice when its proxy's operation ends. 0: none.
	SendOpUs float64 `json:"send_op_us,omitempty"`
	RecvOpUs float64 `json:"recv_op_us,omitempty"`
	// RecvPostUs is the part of RecvOpUs that a receive operation can
	// spend before its message arrives: NCCL's proxy posts the receive
	// of a step as soon as the step's buffer is free and its call's
	// operation exists, so an idle proxy waiting for the message has
	// done that part already (at most RecvOpUs; the copy and the payload
	// always come after). Latency-bound calls (a two-rank AllGather or
	// AllReduce, where each proxy idles until its peer's slice arrives)
	// gain it; a proxy that is never idle (a Broadcast's receiver bound
	// by its throughput) does not. 0: the whole operation follows the
	// message's arrival.
	RecvPostUs float64 `json:"recv_post_us,omitempty"`
	// RecvConnUs is the part of RecvOpUs, at its end, that holds the
	// operation's connection but not its proxy: the proxy serves its
	// other connections meanwhile (a polling proxy completes a receive
	// over several passes of its loop, one connection's messages in
	// order). Two channels' receives then overlap that part. On the
	// H100 pair, our executor's one-way calls of two channels and one
	// message each (24-32 KiB Broadcast and Reduce) took 15-20 us a call
	// where proxies serving whole operations one at a time made them
	// 20-24. At most RecvOpUs. 0: the whole operation holds the proxy.
	RecvConnUs float64 `json:"recv_conn_us,omitempty"`
	// PayloadOpUs is the further time a message holds each of its two
	// proxies when its payload travels apart from its header: more than
	// InlineBytes on the wire. NCCL's plugin sends a payload of up to
	// NCCL_SOCKET_INLINE bytes (128) in the header's system call and a
	// larger one in calls of its own, which the receiver reads once the
	// header told it the size; our executor always sends them apart.
	// 0: none.
	PayloadOpUs float64 `json:"payload_op_us,omitempty"`
	// PayloadSendOpUs is what such a message costs its sender's proxy on
	// top of PayloadOpUs (the payload's own send calls). NCCL's LL
	// Broadcast and Reduce, bound by the receiving proxy's throughput,
	// take no longer at 128 B than at 32 B on hardware, where a cost on
	// both proxies made them 10-28% slow in the simulation, while its
	// AllGather, bound by each call's latency, takes about 6 us more.
	// 0: none.
	PayloadSendOpUs float64 `json:"payload_send_op_us,omitempty"`
	// SimpleUs is the latency a Simple slice adds on a socket
	// connection, on top of LatencyUs: the send proxy waits for the GPU's
	// tail after its fence, and the receiving GPU for its proxy's tail
	// before it loads the data (an LL slice's lines carry their own flags
	// both ways). It is charged after the receive operation, where it
	// also delays a pipeline whose receive proxy waits for its GPU
	// (SerialCalls). 0: none.
	SimpleUs float64 `json:"simple_us,omitempty"`
	// HostLatencyUs is the one-way latency of the host's loopback TCP
	// (run netprobe; "run gpu" records it as net_probe) on the host these
	// constants describe. A recording that carries its own probe is
	// simulated with the proxies' costs scaled by (its latency /
	// HostLatencyUs)^HostExp: a host whose sockets answer slower also
	// copies and polls slower. 0: never scaled.
	HostLatencyUs float64 `json:"host_latency_us,omitempty"`
	// HostGBps is the throughput per direction of the same host's
	// loopback TCP with both directions at once (the probe's
	// both_ways_GBps). Where it is set and a recording's probe measured
	// it too, the scaling's base is the geometric mean of the two
	// ratios, (latency / HostLatencyUs * HostGBps / throughput)^(1/2):
	// the two readings of one host state, each noisy alone. Over nine
	// starts of the H100 pair both followed the simulation's bias per
	// start (a slow start read 6.1 us and 2.0 GB/s, fast ones 5.0-5.3 us
	// and 2.7-3.0 GB/s), and a fit on five starts with the mean of the
	// two predicted the slowest held-out start within 4.4% (ours, Simple,
	// median) where latency alone left 10.7%. 0: latency alone.
	HostGBps float64 `json:"host_GBps,omitempty"`
	// HostExp is the exponent of that scaling (0: none).
	HostExp float64 `json:"host_exp,omitempty"`
	// HostFixedRecv leaves the receive operation's costs (RecvOpUs,
	// RecvPostUs, RecvConnUs) out of that scaling: a receive that ends
	// when its GPU has taken the step lasts as long on any host. Our
	// small one-way calls in a loop take the same time on every host
	// (Broadcast LL of 8 B-2 KiB 8.9-9.4 us a call on starts whose probes
	// read 5.0-6.2 us), where a scaled receive, the bound on their one
	// connection, put them 8.1 us on the fastest start and 11.2 on the
	// slowest. Fitted on five H100 starts with post_fence_us taken from
	// the kernel traces, our column reached a lower loss with it (0.0610
	// against 0.0618) and NCCL's without it (0.0604 against 0.0616).
	HostFixedRecv bool `json:"host_fixed_recv,omitempty"`
	// InlineBytes is the largest payload that travels in its header's
	// system call (NCCL_SOCKET_INLINE: 128 for NCCL; 0 for our executor,
	// whose empty slices alone travel as a header).
	InlineBytes int64 `json:"inline_bytes,omitempty"`
	// SerialCalls says a receive proxy takes a connection's data of the
	// next call of a loop only once its GPU consumed all of the previous
	// call's: NCCL's proxy runs the operations of one connection in
	// order, and a receive operation ends when the GPU has released every
	// slice of it (a Broadcast's root then cannot run ahead of the
	// receiver by more than a call).
	SerialCalls bool `json:"serial_calls,omitempty"`
	// FlagCheckGBps is the rate at which a send proxy reads an LL or
	// LL128 slice's lines in host memory to check their flags before it
	// sends the slice (NCCL's proxy does so when the buffer is in host
	// memory), per wire byte, on top of ProxyGBps. 0: no such cost.
	FlagCheckGBps float64 `json:"flag_check_GBps,omitempty"`
	// PostFenceUs is paid by every LL or LL128 slice with data that a
	// lane sends through a socket connection, after its lines and before
	// the slice reaches the send proxy: twinccl's kernel publishes such a
	// step as a Simple one, with a fifo entry, a system-scope fence that
	// waits for its writes across PCIe, and the tail its proxy waits for.
	// In its kernel traces (testdata/hw/h100x2/rerun18) an LL send of 8 B
	// to 8 KiB over sockets takes 3.0-4.0 us, over SHM 1.3; in those of
	// rerun23-rerun26, 4.1-4.2 us in Broadcast and Reduce and 2.9-3.1 in
	// AllGather and AllReduce on every host (h100-twinccl.json takes 3.3,
	// which gives the first 4.0 and the second too). NCCL's LL
	// senders publish nothing (its proxy reads the flags:
	// FlagCheckGBps); a Simple slice's fence is in SimpleUs. Not scaled
	// by the host (ForHost): the fence is the GPU's and PCIe's. 0: none.
	PostFenceUs float64 `json:"post_fence_us,omitempty"`
	// DuplexCost multiplies the copy time per byte (ProxyGBps) of an LL
	// or LL128 slice on the proxy of a rank that has both sent and
	// received slices through sockets in the run: the host's TCP stack
	// then carries both directions, and each runs slower than alone. On
	// the H100 pair's loopback a probe's two directions at once move 0.7
	// times what one moves alone, and our executor's two-rank 12 MiB LL
	// AllGather (both ways) took 2.1 times as long per byte and
	// direction as its Broadcast (one way), where proxies that serve
	// both directions one operation at a time gave 1.75 (NCCL's took
	// 1.7-1.9, and its fit leaves both factors at 1). SimpleDuplexCost
	// is the same for Simple slices (ours took 1.55 times as long). Not
	// scaled by the host (ForHost): ratios. 0 or 1: none.
	DuplexCost       float64 `json:"duplex_cost,omitempty"`
	SimpleDuplexCost float64 `json:"simple_duplex_cost,omitempty"`
}

// duplexCost is the DuplexCost or SimpleDuplexCost of protocol p, with
// their default.
func (sc *SocketCalib) duplexCost(p model.Protocol) float64 {
	d := sc.DuplexCost
	if p == model.ProtoSimple {
		d = sc.SimpleDuplexCost
	}
	if d <= 0 {
		return 1
	}
	return d
}

// proxyGBps is ProxyGBps with its default.
func (sc *SocketCalib) proxyGBps() float64 {
	if sc.ProxyGBps == 0 {
		return 10
	}
	return sc.ProxyGBps
}

// HostProbe is what a recording's loopback probes (run gpu's net_probe)
// measured of its host: the mean one-way latency of a small message and
// the mean throughput per direction with both directions at once; 0:
// not measured.
type HostProbe struct {
	LatencyUs    float64
	BothWaysGBps float64
}

// hostRatio is how much slower than the calibration's reference host
// (SocketCalib.HostLatencyUs, HostGBps) the probed host is, before the
// exponent: the latency ratio, or its geometric mean with the inverse
// throughput ratio where both sides have a throughput; 0 where the
// recording or the calibration has no latency.
func (sc *SocketCalib) hostRatio(h HostProbe) float64 {
	if !(h.LatencyUs > 0) || sc.HostLatencyUs <= 0 {
		return 0
	}
	r := h.LatencyUs / sc.HostLatencyUs
	if sc.HostGBps > 0 && h.BothWaysGBps > 0 {
		r = math.Sqrt(r * sc.HostGBps / h.BothWaysGBps)
	}
	return r
}

// ForHost returns c for a recording whose host's loopback TCP measured h
// (its net_probe; zero: not probed): a copy with the socket proxies'
// costs scaled by hostRatio^HostExp (the receive operation's too unless
// HostFixedRecv), or c itself when the recording or the calibration has
// no latency or HostExp is 0.
func (c *Calib) ForHost(h HostProbe) *Calib {
	sc := c.NetSocket
	r := sc.hostRatio(h)
	if r == 0 || sc.HostExp == 0 {
		return c
	}
	f := math.Pow(r, sc.HostExp)
	cc := *c
	ns := &cc.NetSocket
	ns.ProxyGBps = sc.proxyGBps() / f
	if ns.FlagCheckGBps > 0 {
		ns.FlagCheckGBps /= f
	}
	ns.LatencyUs *= f
	ns.SendOpUs *= f
	if !sc.HostFixedRecv {
		ns.RecvOpUs *= f
		ns.RecvPostUs *= f
		ns.RecvConnUs *= f
	}
	ns.PayloadOpUs *= f
	ns.PayloadSendOpUs *= f
	ns.SimpleUs *= f
	return &cc
}

// launchUs is the launch cost of a call on nch channels (LaunchUs, and
// LaunchChannelUs for each channel beyond the first).
func (c *Calib) launchUs(nch int) float64 {
	return c.LaunchUs + c.LaunchChannelUs*float64(max(nch, 1)-1)
}

// hostMemGBps is HostMemGBps with its default.
func (c *Calib) hostMemGBps() float64 {
	if c.HostMemGBps == 0 {
		return 200
	}
	return c.HostMemGBps
}

// hostMemFor is host memory's bandwidth (GB/s) for a call whose
// connections through it cycle through footprint bytes of its buffers
// (HostCacheMiB).
func (c *Calib) hostMemFor(footprint float64) float64 {
	mem := c.hostMemGBps()
	if c.HostCacheMiB <= 0 || footprint <= 0 {
		return mem
	}
	cache := c.HostCacheGBps
	if cache <= 0 {
		cache = mem
	}
	hit := min(1, c.HostCacheMiB*(1<<20)/footprint)
	return 1 / (hit/cache + (1-hit)/mem)
}

// LinkCalib are the costs of one link type.
type LinkCalib struct {
	// Eff multiplies NCCL's bandwidth of the link (GB/s) to give its
	// achievable data rate.
	Eff float64 `json:"eff"`
	// LatencyUs is the one-way latency of one hop of this type.
	LatencyUs float64 `json:"latency_us"`
}

// Calib holds every constant of the simulator for one GPU architecture and
// its transports. The zero value is not valid; start from DefaultCalib or
// LoadCalib.
type Calib struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// Source says where the numbers come from (measurement table, fit).
	Source string `json:"source,omitempty"`
	// LaunchUs is the fixed cost of one collective call from the host's
	// point of view: kernel launch, block start-up and completion.
	LaunchUs float64 `json:"launch_us"`
	// LaunchChannelUs is what a call costs more per channel beyond the
	// first, paid with LaunchUs: its kernel's further blocks, each
	// launched and set up before the last of them can end. On the H200
	// pair NCCL's latency-bound LL calls of 8 KiB a channel take 0.3-0.9
	// us longer on 24 channels (192 KiB) than on 3 (24 KiB) in every op,
	// where the simulation gave both the same time (the 24-channel rows
	// were 4-9% fast, the one-channel ones 3-6% slow); LL128 and Simple
	// show the same on 24 channels. Fitted at 0.025 us with the protocols'
	// start costs (h200.json's source note). Our executor's kernel shows
	// none (its LL rows of 1, 3 and 24 channels on the same GPUs within
	// 0.06 us of the simulation alike), nor do its calibrations. 0: none.
	LaunchChannelUs float64 `json:"launch_channel_us,omitempty"`
	// HostCallUs is the host's time to issue one call outside a CUDA
	// graph (NCCL's enqueue and the kernel launch, one process per GPU):
	// an eager loop (Simulator.Eager, nccl-tests without -G) issues a
	// call every HostCallUs, so no call of it costs less. 0: the host
	// keeps ahead of the GPU.
	HostCallUs float64 `json:"host_call_us,omitempty"`
	// LL, LL128 and Simple are the per-protocol costs.
	LL     ProtoCalib `json:"ll"`
	LL128  ProtoCalib `json:"ll128"`
	Simple ProtoCalib `json:"simple"`
	// Links are the costs per link type: "LOC", "NVL", "C2C", "PCI",
	// "SYS", "NET".
	Links map[string]LinkCalib `json:"links"`
	// NetProxyUs is the latency the send and receive proxies add to every
	// network step together (polling, isend/irecv, completion).
	NetProxyUs float64 `json:"net_proxy_us"`
	// SHMCopyGBps bounds a SHM connection (through host memory): the
	// receiving side's copy out of host memory.
	SHMCopyGBps float64 `json:"shm_copy_GBps"`
	// NoGDRPenaltyUs is the extra latency of a network step staged through
	// host memory when GPUDirect RDMA is off.
	NoGDRPenaltyUs float64 `json:"nogdr_penalty_us"`
	// HostMemGBps is the bandwidth of a host's memory (reads plus writes)
	// available to GPU traffic staged through it: a SHM connection loads
	// it twice per byte (written by the sender's GPU, read by the
	// receiver's), a staged NET connection once on each side. 0: 200.
	HostMemGBps float64 `json:"host_mem_GBps,omitempty"`
	// HostCacheMiB is how much of the buffers that GPU traffic stages in
	// a host's memory (SHM connections, NET ones without GPUDirect RDMA)
	// the host's cache keeps: a GPU's writes into host memory land in the
	// CPU's last-level cache (DDIO), and a peer's reads that follow soon
	// find them there. A call whose connections cycle through F MiB of
	// those buffers (per connection its slots times what a slice fills
	// of them) hits the cache with fraction h = min(1, HostCacheMiB/F),
	// and host memory carries its traffic at 1/(h/HostCacheGBps +
	// (1-h)/HostMemGBps). On four H100 NCCL's Simple AllGather over SHM
	// moves 236-260 GB/s through host memory at 1.5-12 MiB (48-384 KiB
	// slices) and 194 at 96 MiB (1 MiB slices, every slot full). 0: no
	// cache (HostMemGBps for every call).
	HostCacheMiB float64 `json:"host_cache_MiB,omitempty"`
	// HostCacheGBps is host memory's bandwidth (reads plus writes) for
	// traffic that hits the cache of HostCacheMiB; 0 reads as
	// HostMemGBps.
	HostCacheGBps float64 `json:"host_cache_GBps,omitempty"`
	// SHMReadLeg splits a SHM connection's traffic where it happens: a
	// slice's stores cross the sender's way to host memory while it sends
	// (host memory once), and its loads cross host memory and the way to
	// the receiver's GPU while the receiver receives, each at the rate of
	// the lane that moves it. false: the sender's stores cross the whole
	// way and host memory twice, and the receiver's loads only cost its
	// thread block. On the H200 pair twinccl's Ring AllReduce over SHM
	// moves 512 KiB slices in 35-48 us per send, 54 per receive-reduce-
	// send and 41 per receive (event traces, 2026-11-26): PCIe's writes
	// and reads overlap in a step that does both.
	SHMReadLeg bool `json:"shm_read_leg,omitempty"`
	// SHMLatencyUs is the latency a SHM connection adds to every post (a
	// flag or counter in host memory, polled across PCIe).
	SHMLatencyUs float64 `json:"shm_latency_us,omitempty"`
	// NetSocket are the costs of NCCL's socket network plugin.
	NetSocket SocketCalib `json:"net_socket,omitempty"`
	// HarnessUs is the extra time per call of a timing harness (see
	// HarnessPyTorch) over nccl-tests', added to the simulated rows of a
	// table measured with it (Simulator.Harness); never to "replay sim".
	// A key "NAME@MACHINE" is the harness's cost on another machine than
	// the calibration's (HarnessCostUs).
	HarnessUs map[string]float64 `json:"harness_us,omitempty"`
	// NetIB are the RDMA costs of NET connections of the ib plugin and of
	// GIN puts between hosts (absent: the defaults IBCalib documents).
	NetIB IBCalib `json:"net_ib,omitzero"`
	// GIN are the costs of GPU-initiated networking (RunGin; absent: the
	// defaults GINCalib documents).
	GIN GINCalib `json:"gin,omitzero"`
	// P2PRead names the collectives (model.Collective names) whose Simple
	// steps over P2P connections run in read mode: the sender stores into
	// its own memory and the receiver loads from the peer's (twinccl's
	// executor: Broadcast and Reduce, gpudev.SimpleRead). Empty: write
	// mode everywhere, as NCCL on NVLink past Ampere.
	P2PRead []string `json:"p2p_read,omitempty"`
	// Fit records, for a fitted file, the quality of the fit.
	Fit *FitReport `json:"fit,omitempty"`
}

// p2pRead reports whether Simple P2P steps of collective c run in read
// mode.
func (c *Calib) p2pRead(coll model.Collective) bool {
	for _, n := range c.P2PRead {
		if n == coll.String() {
			return true
		}
	}
	return false
}

// FitReport is what "replay calibrate" measured about its fit.
type FitReport struct {
	// Table names the fitted tables (comma-separated).
	Table     string  `json:"table"`
	Rows      int     `json:"rows"`
	MedianErr float64 `json:"median_abs_err"`
	MaxErr    float64 `json:"max_abs_err"`
	Evals     int     `json:"evals"`
	// Loss is what the fit minimised over the fitted tables
	// (sim.FitResult.Loss), of kind LossKind (squares or abs).
	Loss     float64 `json:"loss,omitempty"`
	LossKind string  `json:"loss_kind,omitempty"`
	// Tables are the per-table errors of the fit: the fitted tables, and
	// any held-out tables that were only predicted (Fitted false).
	Tables []TableFit `json:"tables,omitempty"`
}

// TableFit is the error of one table under a calibration.
type TableFit struct {
	Table    string `json:"table"`
	Settings string `json:"settings,omitempty"`
	// Kernel is the interpreter build of the table's rows where it is a
	// recording of our executor that names one (Table.Kernel).
	Kernel    string  `json:"kernel,omitempty"`
	Fitted    bool    `json:"fitted"`
	Rows      int     `json:"rows"`
	MedianErr float64 `json:"median_abs_err"`
	MaxErr    float64 `json:"max_abs_err"`
}

// Proto returns the costs of protocol p.
func (c *Calib) Proto(p model.Protocol) *ProtoCalib {
	switch p {
	case model.ProtoLL:
		return &c.LL
	case model.ProtoLL128:
		return &c.LL128
	}
	return &c.Simple
}

// Link returns the costs of link type t (a neutral 1.0 efficiency and no
// latency for a type the file does not list).
func (c *Calib) Link(t model.LinkType) LinkCalib {
	if l, ok := c.Links[t.String()]; ok {
		return l
	}
	return LinkCalib{Eff: 1}
}

// Clone returns a deep copy.
func (c *Calib) Clone() *Calib {
	d := *c
	d.Links = make(map[string]LinkCalib, len(c.Links))
	for k, v := range c.Links {
		d.Links[k] = v
	}
	if c.HarnessUs != nil {
		d.HarnessUs = make(map[string]float64, len(c.HarnessUs))
		for k, v := range c.HarnessUs {
			d.HarnessUs[k] = v
		}
	}
	for _, pc := range []*ProtoCalib{&d.LL, &d.LL128, &d.Simple} {
		pc.CollUs = maps.Clone(pc.CollUs)
	}
	d.P2PRead = append([]string(nil), c.P2PRead...)
	if c.Fit != nil {
		f := *c.Fit
		f.Tables = append([]TableFit(nil), c.Fit.Tables...)
		d.Fit = &f
	}
	return &d
}

// Validate checks that every constant is finite and in range.
func (c *Calib) Validate() error {
	if c.Version != CalibVersion && c.Version != 1 {
		return fmt.Errorf("calibration %q: version %d, this simulator reads versions 1 and %d", c.Name, c.Version, CalibVersion)
	}
	for _, n := range c.P2PRead {
		if coll, err := model.ParseCollective(n); err != nil || coll.String() != n {
			return fmt.Errorf("calibration %q: p2p_read: %q is not a collective name (Broadcast, Reduce, ...)", c.Name, n)
		}
	}
	bad := func(name string, v float64, lo, hi float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < lo || v > hi {
			return fmt.Errorf("calibration %q: %s = %v out of range [%g, %g]", c.Name, name, v, lo, hi)
		}
		return nil
	}
	if err := bad("launch_us", c.LaunchUs, 0, 1e6); err != nil {
		return err
	}
	if err := bad("launch_channel_us", c.LaunchChannelUs, 0, 1e3); err != nil {
		return err
	}
	if err := bad("host_call_us", c.HostCallUs, 0, 1e6); err != nil {
		return err
	}
	for i, pc := range []*ProtoCalib{&c.LL, &c.LL128, &c.Simple} {
		n := strings.ToLower(model.Protocol(i).String())
		checks := []struct {
			name   string
			v      float64
			lo, hi float64
		}{
			{"start_us", pc.StartUs, 0, 1e6},
			{"op_overhead_us", pc.OpOverheadUs, 0, 1e6},
			{"slice_overhead_us", pc.SliceOverheadUs, 0, 1e6},
			{"copy_GBps", pc.CopyGBps, 1e-3, 1e6},
			{"reduce_cost", pc.ReduceCost, 0, 100},
			{"remote_store_cost", pc.RemoteStoreCost, 0, 100},
			{"load_cost", pc.LoadCost, 0, 100},
			{"recv_load_cost", pc.RecvLoadCost, 0, 100},
			{"host_load_cost", pc.HostLoadCost, 0, 1000},
			{"host_store_cost", pc.HostStoreCost, 0, 1000},
			{"host_reduce_cost", pc.HostReduceCost, 0, 1000},
			{"host_load_us", pc.HostLoadUs, 0, 1e6},
			{"host_fence_us", pc.HostFenceUs, 0, 1e6},
			{"host_post_us", pc.HostPostUs, 0, 1e6},
			{"host_round_us", pc.HostRoundUs, 0, 1e6},
			{"direct_us", pc.DirectUs, 0, 1e6},
			{"host_turn_us", pc.HostTurnUs, 0, 1e6},
			{"empty_slice_us", pc.EmptySliceUs, 0, 1e6},
			{"host_start_us", pc.HostStartUs, 0, 1e6},
			{"thread_op_us", pc.ThreadOpUs, 0, 1e6},
			{"thread_op_max_threads", pc.ThreadOpMaxThreads, 0, model.MaxProgThreads},
			{"thread_call_us", pc.ThreadCallUs, 0, 1e6},
			{"first_op_us", pc.FirstOpUs, 0, 1e6},
			{"p2p_slice_overhead_us", pc.P2PSliceOverheadUs, 0, 1e6},
			{"rate_threads", pc.RateThreads, 0, 1e5},
			{"host_round_lines", float64(pc.HostRoundLines), 0, 64},
			{"threads", float64(pc.Threads), 0, model.MaxProgThreads},
			{"link_eff", pc.LinkEff, 1e-3, 10},
			{"host_link_eff", pc.HostLinkEff, 0, 10},
			{"reduce_frac", pc.ReduceFrac, 0.05, 0.95},
			{"remote_fence_us", pc.RemoteFenceUs, 0, 1e6},
			{"forward_us", pc.ForwardUs, 0, 1e6},
			{"relay_us", pc.RelayUs, 0, 1e6},
			{"relay_hold_us", pc.RelayHoldUs, 0, 1e6},
			{"remote_load_cost", pc.RemoteLoadCost, 0, 100},
			{"p2p_lane_share", pc.P2PLaneShare, 0, 1},
			{"gpu_copy_GBps", pc.GPUCopyGBps, 0, 1e6},
		}
		for _, k := range checks {
			if err := bad(n+"."+k.name, k.v, k.lo, k.hi); err != nil {
				return err
			}
		}
		for coll, v := range pc.CollUs {
			if c, err := model.ParseCollective(coll); err != nil || c.String() != coll || c.IsP2P() {
				return fmt.Errorf("%s.coll_us: %q is not a collective's name (Broadcast, Reduce, AllGather, ReduceScatter, AllReduce)", n, coll)
			}
			if err := bad(n+".coll_us."+coll, v, 0, 1e6); err != nil {
				return err
			}
		}
	}
	for k, l := range c.Links {
		if err := bad("links."+k+".eff", l.Eff, 1e-3, 10); err != nil {
			return err
		}
		if err := bad("links."+k+".latency_us", l.LatencyUs, 0, 1e6); err != nil {
			return err
		}
	}
	for k, v := range c.HarnessUs {
		if err := bad("harness_us."+k, v, 0, 1e6); err != nil {
			return err
		}
	}
	if err := bad("net_proxy_us", c.NetProxyUs, 0, 1e6); err != nil {
		return err
	}
	if err := bad("shm_copy_GBps", c.SHMCopyGBps, 1e-3, 1e6); err != nil {
		return err
	}
	for _, k := range []struct {
		name string
		v    float64
	}{{"host_mem_GBps", c.HostMemGBps}, {"host_cache_MiB", c.HostCacheMiB}, {"host_cache_GBps", c.HostCacheGBps}, {"shm_latency_us", c.SHMLatencyUs},
		{"net_socket.proxy_GBps", c.NetSocket.ProxyGBps}, {"net_socket.latency_us", c.NetSocket.LatencyUs},
		{"net_socket.send_op_us", c.NetSocket.SendOpUs}, {"net_socket.recv_op_us", c.NetSocket.RecvOpUs},
		{"net_socket.recv_post_us", c.NetSocket.RecvPostUs}, {"net_socket.recv_conn_us", c.NetSocket.RecvConnUs},
		{"net_socket.flag_check_GBps", c.NetSocket.FlagCheckGBps}, {"net_socket.payload_op_us", c.NetSocket.PayloadOpUs},
		{"net_socket.payload_send_op_us", c.NetSocket.PayloadSendOpUs},
		{"net_socket.simple_us", c.NetSocket.SimpleUs}, {"net_socket.host_latency_us", c.NetSocket.HostLatencyUs},
		{"net_socket.post_fence_us", c.NetSocket.PostFenceUs}, {"net_socket.duplex_cost", c.NetSocket.DuplexCost},
		{"net_socket.simple_duplex_cost", c.NetSocket.SimpleDuplexCost},
		{"net_socket.host_exp", c.NetSocket.HostExp}, {"net_socket.host_GBps", c.NetSocket.HostGBps},
		{"net_socket.inline_bytes", float64(c.NetSocket.InlineBytes)}} {
		if err := bad(k.name, k.v, 0, 1e6); err != nil {
			return err
		}
	}
	if err := c.NetIB.validate(c.Name); err != nil {
		return err
	}
	if err := c.GIN.validate(c.Name); err != nil {
		return err
	}
	return bad("nogdr_penalty_us", c.NoGDRPenaltyUs, 0, 1e6)
}

//go:embed calib/*.json
var calibFiles embed.FS

// DefaultCalibName is the embedded calibration used when none is given.
const DefaultCalibName = "h200.json"

// DefaultCalib returns the embedded calibration for GPUs of compute
// capability sm. Only Hopper (sm90) has been measured; other
// architectures get it too, which the caller should report.
func DefaultCalib(sm int) (*Calib, error) {
	_ = sm
	return LoadCalib(EmbeddedPrefix + DefaultCalibName)
}

// gpuCalibs maps a GPU model, as its name contains it ("NVIDIA H100 80GB
// HBM3"), to the embedded calibration of NCCL measured on a pair of
// them: the GPUs share sm90, but not their hosts (sockets, host memory)
// nor their memory, whose constants differ.
var gpuCalibs = []struct{ model, name string }{
	{"H100", "h100.json"},
	{"H200", "h200.json"},
}

// CalibNameForGPUs is the embedded calibration (a name of
// EmbeddedCalibNames) measured on the GPUs a recording names (run gpu's
// "gpus": one description per rank, e.g. "rank 0: GPU 0 NVIDIA H100 80GB
// HBM3 (sm_90, ...)"), or "" when they name none of the measured models
// or more than one.
func CalibNameForGPUs(gpus []string) string {
	name := ""
	for _, g := range gpus {
		found := ""
		for _, m := range gpuCalibs {
			if strings.Contains(g, m.model) {
				found = m.name
				break
			}
		}
		if found == "" || name != "" && found != name {
			return ""
		}
		name = found
	}
	return name
}

// ParseCalib reads a JSON calibration file; name is used in errors.
func ParseCalib(r io.Reader, name string) (*Calib, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	c := &Calib{}
	if err := dec.Decode(c); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return c, nil
}

// With returns a copy of c with constants set: each KEY=VALUE names a
// constant by its JSON path, dotted (ll.copy_GBps, net_socket.host_exp,
// links.NVL.eff), and gives a JSON value (13.5, 8, true). A key the
// calibration format does not know, a value of the wrong type or one out
// of its bounds (Validate) is an error naming the setting; c is never
// changed. Fits use it for the starting value of a constant (replay
// calibrate --set).
func (c *Calib) With(settings []string) (*Calib, error) {
	out := c.Clone()
	if len(settings) == 0 {
		return out, nil
	}
	data, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	for _, kv := range settings {
		key, val, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("set %q: want KEY=VALUE", kv)
		}
		var v any
		if err := json.Unmarshal([]byte(val), &v); err != nil {
			return nil, fmt.Errorf("set %s: value %q is not a JSON value", key, val)
		}
		path := strings.Split(key, ".")
		m := doc
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				if m[k] != nil {
					return nil, fmt.Errorf("set %s: %s is not a group of constants", key, k)
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[path[len(path)-1]] = v
		data, err := json.Marshal(doc)
		if err != nil {
			return nil, err
		}
		got, err := ParseCalib(bytes.NewReader(data), "set "+key)
		if err != nil {
			return nil, err
		}
		// encoding/json matches names regardless of case: a key is the
		// format's only if the parsed calibration writes it back as given
		// (or leaves it out, as a zero value)
		if data, err = json.Marshal(got); err != nil {
			return nil, err
		}
		var back map[string]any
		if err := json.Unmarshal(data, &back); err != nil {
			return nil, err
		}
		if w, ok := lookupPath(back, path); ok && !reflect.DeepEqual(w, v) || !ok && v != nil && !reflect.ValueOf(v).IsZero() {
			return nil, fmt.Errorf("set %s: no such constant (names are case-sensitive)", key)
		}
		out = got // the document so far, every earlier setting included
	}
	return out, nil
}

// lookupPath is the value at a dotted path of a decoded JSON document.
func lookupPath(doc map[string]any, path []string) (any, bool) {
	var v any = doc
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// EmbeddedPrefix names a calibration built into the binary in LoadCalib's
// path ("embedded:h100.json"; EmbeddedCalibNames lists them).
const EmbeddedPrefix = "embedded:"

// EmbeddedCalibNames lists the calibrations built into the binary
// (calib/*.json), sorted.
func EmbeddedCalibNames() []string {
	entries, err := calibFiles.ReadDir("calib")
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// LoadCalib reads a JSON calibration file from disk, or, for a path
// "embedded:NAME.json", the calibration of that name built into the
// binary.
func LoadCalib(path string) (*Calib, error) {
	if name, ok := strings.CutPrefix(path, EmbeddedPrefix); ok {
		data, err := calibFiles.ReadFile("calib/" + name)
		if err != nil {
			return nil, fmt.Errorf("%s: no such embedded calibration (there are %s)", path, strings.Join(EmbeddedCalibNames(), ", "))
		}
		return ParseCalib(bytes.NewReader(data), path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseCalib(f, path)
}

// WriteJSON writes the calibration as indented JSON (map keys sorted, so
// the output is deterministic).
func (c *Calib) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(c)
}
