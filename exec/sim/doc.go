// Package sim is twinccl's discrete-event simulator: it executes protocol
// Programs (model.Program) in virtual time against the topology of a
// model.Cluster and the channel Plan that search produced.
//
// # Engine
//
// Virtual time is an integer number of picoseconds. Events sit in a queue
// ordered by (time, sequence number) (one FIFO bucket per distinct time);
// the engine runs them on the calling goroutine, with no goroutines and no map lookups in the hot path,
// so that the same inputs give the same output byte for byte.
//
// # Resources
//
// Every directed link of every host's System (NVLink ports to GPUs and
// NVSwitches, PCIe switch and root-port links, CPU interconnects, NIC links)
// is a resource with a bandwidth (NCCL's value times a calibrated
// efficiency) and a latency; every NET port adds a transmit and a receive
// resource for the network between hosts (a non-blocking fabric). A
// transfer is a flow over the resources of its route; concurrent flows
// share resources max-min fairly (progressive filling), recomputed for the
// affected connected component whenever a flow starts or ends. A flow may
// also carry a private rate cap: the copy throughput of the thread block
// (channel) that moves it.
//
// # Actors
//
// Each lane of the Program (one rank, one channel, one thread group) is an
// actor that runs its primitive calls slice by slice with NCCL's flow
// control: a slice waits for its receive data (Simple: the tail counter of
// the whole slice; LL and LL128: the first flag line, the data then streams
// through) and for send credits (head + NCCL_STEPS), pays a per-slice
// synchronisation cost, moves its bytes (LL lines carry 8 of 16 bytes,
// LL128 lines 120 of 128) at the lower of its fair share of the route and
// the block's copy throughput divided by the cost of the loads and stores
// the primitive performs per byte (a reduction reads two sources; a load
// and a store into a peer GPU's memory have their own calibrated costs,
// relative to a local store), and posts its
// counters, which become visible to the peer after the route latency.
// Network connections add the proxy's latency. SHM connections go
// through host memory: the sender's GPU stores into it and the receiver's
// loads from it (calibrated host load and store costs per protocol), over
// both GPUs' PCIe links and a host memory resource crossed twice per byte.
// NET connections staged through host memory (no GPUDirect RDMA) cross the
// host memory on each side; with the socket plugin every slice (empty
// ones too) is an operation of the sender's proxy thread and then of the
// receiver's, each a fixed cost plus its bytes at the proxy's copy rate
// (over loopback, NCCL_SOCKET_IFNAME=lo, the sender copies twice and no
// NIC is crossed); a proxy serves the operations of all its channels and
// both directions one at a time, and the receiver sees a slice when its
// proxy is done with it.
// P2P and SHM disabled together split a host into one node per GPU, as
// NCCL's trimming does; PAT calls run as PAT's one hop on two ranks and as
// rings on more. All constants come from a
// versioned calibration (Calib), fitted to measurements by
// "replay calibrate", which fits several tables at once, each under the
// NCCL_* settings and timing harness it was recorded with (Table,
// FitTables), and predicts held-out tables (PredictTables).
//
// # RDMA and GPU-initiated networking
//
// NET connections through RDMA NICs (NCCL's ib plugin) pay the costs of
// Calib.NetIB (ib.go): every message is striped over the connection's
// QPs and takes at least one work-request time per QP, the NIC-to-NIC
// latency is the RDMA write latency, and the credit that returns to the
// sender stands for the receiver's FIFO post, one write latency away.
// Machine.RunGin (gin.go) simulates GIN programs: puts with remote
// signals and local counters, waits, flushes and barriers, with the
// device API's ordering rules; GinAlltoAllProgram is NCCL's all-to-all
// example ("replay gin").
//
// # Modes
//
// The step-accurate mode runs every slice of every lane. The fast mode
// (ModeFast, and ModeAuto for large calls) runs a call reduced by the
// symmetries its Program has, which are checked, not assumed: a ring
// collective over identical hosts folds onto one host (Machine.fold),
// with NCCL's cross-NIC alternation of channel pairs on odd hosts where
// the rings have it; any other call folds its hosts when a host
// permutation with a channel permutation maps its Program, routes
// included, onto itself (hostSym: the rotation by one host for AlltoAll
// and SendRecv, the mirror of NCCL's double binary tree, which exchanges
// its two trees' channels, for tree AllReduce), and runs each class of
// identical channels (same calls, peers and resources) once, weighing as
// many on every resource (Machine.aggregate). These are automorphisms of
// the simulated system, whose max-min fair sharing is then symmetric, so
// the two modes agree (exactly, on every call of the tests' grids).
// Pipelines that no symmetry folds at scale (a tree AllReduce or a
// Broadcast/Reduce chain over many identical hosts) run step-accurate on
// three smaller copies of the cluster of the same shape, and their time
// is extrapolated in the pipeline's depth, on which it is affine
// (fast_depth.go; Result.Fast states the error estimate). A call with
// none of these runs step-accurate, and Result.Fast says why.
//
// # Timing loops
//
// Measured tables time a collective as a loop of calls back to back on
// every rank's stream. Simulator.RunTimed (Compare, replay sim, replay
// compare and calibrate) runs the Program that way (Machine.LoopCalls,
// loop.go): after an aligning call, each rank starts its next call when
// its own previous call ended and the launch passed, the connections
// keep their step counters, and the result is the slowest rank's time per
// call. Pipelines between ranks (Broadcast and Reduce chains) then overlap
// successive calls as they do on hardware.
//
// # Outputs
//
// Run returns the predicted time and per-connection and per-link traffic;
// RunRecord also reports every slice (rank, channel, primitive, peers,
// bytes, start and end), which cmd/replay turns into parquet traces, a
// Chrome timeline and a pprof profile. AlltoAll and SendRecv run on NCCL's
// p2p schedule (model.GenerateAlltoAllProgram, model.GenerateP2PProgram).
package sim
