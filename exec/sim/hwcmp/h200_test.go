package hwcmp

import (
	"path/filepath"
	"testing"
)

// h200Bounds are the tolerances on testdata/hw/h200x2 (recorded
// 2026-11-26 on nvidia-h200-x2, the machine issue 10 judges: the tuner's
// choices, proto/ with every protocol forced, heldout/ at other sizes and
// threads/ under NCCL_NTHREADS, NCCL forced to the same protocol through
// nccl_env) under the embedded calibration (NCCL's; fitted on these files
// for its stages 6-11, testdata/hw/fit-nccl.sh: proto/ and threads/ up to
// 96 KiB, never heldout/), one per transport, protocol and column: medians
// 3 points and maxima 5 points above what it reaches (measured median and
// max in the comments, in percent). Against NCCL, held out: P2P LL
// 3.2/13.9, LL128 2.5/9.4 (5.2/11.7 before each collective's own
// per-call cost, coll_us, and LL128's copy rate fitted on 16-64 MiB
// calls too), Simple 2.3/10.3 (6.5/30.4 before NCCL's block
// size per call, its direct primitives and each primitive kind's first
// call were modelled), SHM LL 5.0/13.7 (9.2/25.2 before LL's rounds of
// loads from host memory), Simple 3.8/15.0 (5.2/27.4). Sockets between
// split hosts (recorded again with the current kernel on a later start of
// the machine) are 7.5 (LL) and 8.8 (Simple) percent off median; on the
// first recording (8pack/, an earlier start) 20-22, no better than NCCL
// agrees with itself: its own socket times moved 5-21 percent (median)
// between starts of the machine, P2P and SHM 0.4-1.8 (docs/perf.md). threads/*-large
// (256 KiB-64 MiB on blocks NCCL itself never gives such calls) are held
// out and far: the model does not follow a small block's copy rate there.
// Our executor's column is only bounded coarsely here (our kernels are
// not NCCL's): h200OursBounds bound it under its own calibration.
// Its socket pools (net-*) were all set again, to the median plus 3
// points and the maximum plus 5, when the eighth session refitted the
// socket constants with payload_send_op_us.
var h200Bounds = []poolBound{
	{"p2p-*", ColNCCL, BucketAll, 0.07, 0.16}, // 3.3, 10.4
	{"shm-*", ColNCCL, BucketAll, 0.05, 0.21}, // 1.9, 15.4
	// unprobed (recorded before net_probe): 12.9% median before the
	// socket proxies ran a connection's calls in order (serial_calls)
	{"net-*", ColNCCL, BucketAll, 0.20, 0.48},                // 16.1, 42.9
	{"proto/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.13},       // 2.4, 8.7 (fitted: ll.recv_load_cost, twenty-third session: 2.4, 10.1 before; ll.link_eff, nineteenth; launch_channel_us, twenty-first: 3.3, 10.8 before)
	{"proto/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.13},    // 2.7, 7.5
	{"proto/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.21},   // 2.2, 15.6
	{"proto/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.11},       // 1.5, 5.2
	{"proto/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.12},   // 2.3, 7.8 (twentieth session: tree groups at their threads' rate, host_post_us, Simple's SHM constants refitted; 2.8, 11.7 in the nineteenth)
	{"proto/net-*-ll", ColNCCL, BucketAll, 0.20, 0.36},       // 16.1, 30.7
	{"proto/net-*-simple", ColNCCL, BucketAll, 0.17, 0.35},   // 13.9, 29.9
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.13},     // 2.4, 9.2 (2.5, 10.5 before ll.recv_load_cost; 3.2, 13.6 before launch_channel_us; 3.3, 14.3 before ll.link_eff)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.12},  // 2.8, 6.8 (2.5, 7.6 before ll128.thread_call_us; 2.5, 9.4 before launch_channel_us)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.05, 0.12}, // 2.6, 8.2 (2.3, 10.3 before simple.thread_op_max_threads)
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.16},     // 2.4, 10.6
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.16}, // 2.7, 12.1 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.8, 13.6 in the nineteenth)
	{"heldout/net-*-ll", ColNCCL, BucketAll, 0.17, 0.48},     // 13.6, 42.8
	{"heldout/net-*-simple", ColNCCL, BucketAll, 0.11, 0.31}, // 7.7, 25.8
	{"p2p-*", ColOurs, BucketAll, 0.24, 0.48},                // 20.8, 42.1
	{"shm-*", ColOurs, BucketAll, 0.11, 0.27},                // 7.5, 21.4
	{"net-*", ColOurs, BucketAll, 0.17, 0.67},                // 14.0, 61.2
	// Simple under NCCL_NTHREADS (threads/): 2-96 KiB (fitted, stages 8
	// and 9 of h200.json) and 256 KiB-64 MiB on 96-288 threads (held out)
	{"threads/p2p-*-nt*[0-9t]", ColNCCL, BucketAll, 0.06, 0.20}, // 2.8, 14.8
	{"threads/shm-*-nt*[0-9t]", ColNCCL, BucketAll, 0.07, 0.20}, // 2.8, 11.8 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.5, 14.9 before)
	{"threads/p2p-*-large", ColNCCL, BucketAll, 0.11, 0.61},     // 7.4, 55.9: a small block's copy rate on large calls
	{"threads/shm-*-large", ColNCCL, BucketAll, 0.21, 0.68},     // 18.4, 63.1
	// the sockets' first recordings (the 8-pack kernel, an earlier start of the machine)
	{"8pack/net-*", ColNCCL, BucketAll, 0.11, 0.25},                // 7.7, 19.6
	{"8pack/proto/net-*-ll", ColNCCL, BucketAll, 0.10, 0.36},       // 6.3, 30.4
	{"8pack/proto/net-*-simple", ColNCCL, BucketAll, 0.09, 0.30},   // 5.1, 24.4
	{"8pack/heldout/net-*-ll", ColNCCL, BucketAll, 0.12, 0.23},     // 8.6, 17.8
	{"8pack/heldout/net-*-simple", ColNCCL, BucketAll, 0.11, 0.23}, // 7.8, 17.2
	// heldout/ of P2P and SHM recorded again on a later start of the machine, the same kernel
	{"rerun2/heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.14},     // 2.1, 11.0 (2.9, 12.2 before ll.recv_load_cost; 3.8, 12.2 before launch_channel_us; 3.6, 14.4 before ll.link_eff)
	{"rerun2/heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.12},  // 2.3, 8.3 (2.6, 7.9 before ll128.thread_call_us; 2.9, 9.4 before launch_channel_us)
	{"rerun2/heldout/p2p-*-simple", ColNCCL, BucketAll, 0.05, 0.12}, // 2.5, 8.3 (2.7, 11.5 before simple.thread_op_max_threads)
	{"rerun2/heldout/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.14},     // 1.9, 8.8
	{"rerun2/heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.15}, // 2.8, 10.0 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.6, 11.5 in the nineteenth)
	// heldout/ recorded again on another start of the machine (the 8-pack kernel: see below)
	{"rerun/heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.13},     // 2.1, 9.0 (2.3, 11.9 before ll.recv_load_cost; 3.8, 13.1 before launch_channel_us; 3.7, 14.1 before ll.link_eff)
	{"rerun/heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.12},  // 2.7, 6.9 (2.9, 7.7 before ll128.thread_call_us; 2.9, 8.6 before launch_channel_us)
	{"rerun/heldout/p2p-*-simple", ColNCCL, BucketAll, 0.05, 0.12}, // 2.3, 8.3 (2.4, 11.8 before simple.thread_op_max_threads)
	{"rerun/heldout/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.17},     // 2.4, 11.7
	{"rerun/heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.15}, // 2.6, 10.2 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.5, 11.7 in the nineteenth)
	{"rerun/heldout/net-*-ll", ColNCCL, BucketAll, 0.16, 0.41},     // 12.4, 35.4
	{"rerun/heldout/net-*-simple", ColNCCL, BucketAll, 0.10, 0.25}, // 6.5, 19.8
	// a fourth start (rerun3/, 2026-11-26, third session): the sockets
	// again, with run gpu's loopback probe, and LL128 from 16 to 64 MiB
	// (fitted: stage 12 of h200.json)
	{"rerun3/heldout/net-*-ll", ColNCCL, BucketAll, 0.14, 0.32},     // 10.5, 26.3
	{"rerun3/heldout/net-*-simple", ColNCCL, BucketAll, 0.12, 0.23}, // 9.0, 17.6
	{"rerun3/proto/net-*-ll", ColNCCL, BucketAll, 0.10, 0.30},       // 6.5, 24.9 (4.0 before serial_calls)
	{"rerun3/proto/net-*-simple", ColNCCL, BucketAll, 0.10, 0.21},   // 6.2, 15.8
	{"rerun3/ll128-large/p2p-*", ColNCCL, BucketAll, 0.08, 0.16},    // 4.1, 10.1
	// a fifth start (rerun4/, 2026-11-26, fourth session): SHM and sockets
	// (the tuner's choices, proto/ and heldout/), never fitted for NCCL.
	// Its sockets were slower than the fourth start's (12 MiB AllGather LL
	// 6178 us against 5278; the probe's 8-byte latency 4.0-5.8 us against
	// 3.5-4.4): the simulation is 10-30% fast there
	{"rerun4/shm-*", ColNCCL, BucketAll, 0.06, 0.19},                // 2.6, 13.2
	{"rerun4/net-*", ColNCCL, BucketAll, 0.08, 0.24},                // 4.4, 18.7
	{"rerun4/proto/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.18},       // 2.5, 12.4
	{"rerun4/proto/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.12},   // 2.1, 7.7 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 2.4, 12.5 in the nineteenth)
	{"rerun4/proto/net-*-ll", ColNCCL, BucketAll, 0.09, 0.30},       // 5.5, 24.1
	{"rerun4/proto/net-*-simple", ColNCCL, BucketAll, 0.13, 0.29},   // 9.7, 23.2
	{"rerun4/heldout/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.15},     // 2.1, 10.0
	{"rerun4/heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.15}, // 3.3, 10.0 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.7, 11.8 in the nineteenth)
	{"rerun4/heldout/net-*-ll", ColNCCL, BucketAll, 0.11, 0.26},     // 7.3, 20.1
	{"rerun4/heldout/net-*-simple", ColNCCL, BucketAll, 0.10, 0.20}, // 6.7, 14.5
	// a sixth start (rerun5/, 2026-11-26, fifth session), never fitted for
	// NCCL: as rerun4/, and diag/ (AllReduce Simple over SHM forced to 1,
	// 2 and 4 channels, AllGather to 4): NCCL's calibration only saw its
	// tuner's channel counts, and its one- and two-channel AllReduce from
	// 256 KiB are 23-43% slow
	{"rerun5/shm-*", ColNCCL, BucketAll, 0.06, 0.20},                // 2.8, 14.6
	{"rerun5/net-*", ColNCCL, BucketAll, 0.09, 0.33},                // 5.7, 27.7
	{"rerun5/proto/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.14},       // 1.4, 8.7
	{"rerun5/proto/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.12},   // 2.3, 7.9 (twentieth session: tree groups at their threads' rate, host_post_us, Simple's SHM constants refitted; 3.1, 11.5 in the nineteenth)
	{"rerun5/proto/net-*-ll", ColNCCL, BucketAll, 0.08, 0.28},       // 4.4, 22.3
	{"rerun5/proto/net-*-simple", ColNCCL, BucketAll, 0.08, 0.28},   // 4.9, 22.3
	{"rerun5/heldout/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.15},     // 1.1, 9.7
	{"rerun5/heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.15}, // 2.3, 10.6 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.2, 12.1 in the nineteenth)
	{"rerun5/heldout/net-*-ll", ColNCCL, BucketAll, 0.13, 0.24},     // 9.4, 18.9
	{"rerun5/heldout/net-*-simple", ColNCCL, BucketAll, 0.13, 0.40}, // 9.6, 34.1
	{"rerun5/diag/shm-*", ColNCCL, BucketAll, 0.17, 0.49},           // 7.0, 39.6 (twentieth session: tree groups at their threads' rate, host_post_us, Simple's SHM constants refitted; 13.1, 43.1 before)
	// rerun6/ (a seventh start, 2026-11-26, seventh session, recorded after
	// every change of the session): the sockets, never fitted
	{"rerun6/net-*", ColNCCL, BucketAll, 0.07, 0.29},                // 3.9, 23.1
	{"rerun6/proto/net-*-ll", ColNCCL, BucketAll, 0.09, 0.23},       // 5.1, 17.8
	{"rerun6/proto/net-*-simple", ColNCCL, BucketAll, 0.11, 0.24},   // 7.8, 19.0
	{"rerun6/heldout/net-*-ll", ColNCCL, BucketAll, 0.06, 0.17},     // 2.7, 11.2
	{"rerun6/heldout/net-*-simple", ColNCCL, BucketAll, 0.09, 0.21}, // 5.6, 15.8
	// rerun7/ and rerun8/ (2026-11-27, fifteenth session: nvidia-h200-x4,
	// two of its GPUs; the sockets, and rerun7/'s heldout/ of P2P and SHM):
	// the embedded socket constants were refitted with rerun7/ (rerun8/
	// held out), nothing else of NCCL's on either
	{"rerun7/net-*", ColNCCL, BucketAll, 0.07, 0.17},                // 3.1, 11.7
	{"rerun7/proto/net-*-ll", ColNCCL, BucketAll, 0.07, 0.20},       // 3.1, 14.6
	{"rerun7/proto/net-*-simple", ColNCCL, BucketAll, 0.07, 0.24},   // 3.1, 18.9
	{"rerun7/heldout/net-*-ll", ColNCCL, BucketAll, 0.12, 0.22},     // 8.4, 16.2
	{"rerun7/heldout/net-*-simple", ColNCCL, BucketAll, 0.11, 0.21}, // 7.2, 15.8
	{"rerun7/heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.13},     // 2.5, 8.9 (2.5, 12.6 before ll.recv_load_cost; 4.4, 13.0 before launch_channel_us; 4.0, 14.8 before ll.link_eff; 3.8, 18.5 before the LL refit)
	{"rerun7/heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.12},  // 2.3, 6.5 (2.8, 7.5 before ll128.thread_call_us; 2.8, 9.1 before launch_channel_us)
	{"rerun7/heldout/p2p-*-simple", ColNCCL, BucketAll, 0.05, 0.12}, // 2.4, 8.5 (2.4, 11.4 before simple.thread_op_max_threads)
	{"rerun7/heldout/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.14},     // 2.5, 8.9
	{"rerun7/heldout/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.15}, // 2.9, 10.7 (twentieth session: tree groups at their threads' rate, host_post_us and Simple's SHM constants refitted, then host_round_us; 3.9, 12.2 in the nineteenth)
	{"rerun8/net-*", ColNCCL, BucketAll, 0.08, 0.23},                // 4.4, 18.0
	{"rerun8/proto/net-*-ll", ColNCCL, BucketAll, 0.10, 0.22},       // 6.3, 16.3
	{"rerun8/proto/net-*-simple", ColNCCL, BucketAll, 0.11, 0.28},   // 7.4, 22.1
	{"rerun8/heldout/net-*-ll", ColNCCL, BucketAll, 0.07, 0.16},     // 3.7, 10.4
	{"rerun8/heldout/net-*-simple", ColNCCL, BucketAll, 0.07, 0.18}, // 3.4, 12.8
}

// h200CurrentBuildBounds are tolerances on our executor's column of
// rerun7/ and rerun8/, the first H200 recordings of the current build
// (2026-11-27), under the embedded calib/h200-twinccl.json. Its Simple
// constants (per call, per slice, P2P, forward_us) were fitted on
// rerun7/heldout's Simple rows with the four GPUs' of
// ../h200x4/2026-11-27, and its socket constants on rerun8/
// (testdata/hw/fit-sockets.sh): rerun7/'s sockets and LL and LL128 rows
// are held out (their LL and LL128 constants come from the H100 pair).
var h200CurrentBuildBounds = []poolBound{
	{"rerun7/net-*", ColOurs, BucketAll, 0.07, 0.30},                // 3.5, 24.4
	{"rerun7/proto/net-*-ll", ColOurs, BucketAll, 0.07, 0.20},       // 3.4, 15.0
	{"rerun7/proto/net-*-simple", ColOurs, BucketAll, 0.07, 0.21},   // 3.5, 15.2 (3.9 before the SHM refit)
	{"rerun7/heldout/net-*-ll", ColOurs, BucketAll, 0.08, 0.21},     // 4.5, 15.6
	{"rerun7/heldout/net-*-simple", ColOurs, BucketAll, 0.06, 0.21}, // 2.7, 15.8 (4.6, 16.2 before the SHM refit)
	{"rerun7/heldout/p2p-*-ll", ColOurs, BucketAll, 0.06, 0.14},     // 2.4, 8.6
	{"rerun7/heldout/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.17},  // 3.1, 11.4
	{"rerun7/heldout/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.17}, // 3.0, 11.2
	{"rerun7/heldout/shm-*-ll", ColOurs, BucketAll, 0.07, 0.17},     // 3.3, 11.4
	{"rerun7/heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.13}, // 2.9, 7.5 (2.5, 14.9 before the SHM refit on two and four GPUs)
	{"rerun8/net-*", ColOurs, BucketAll, 0.06, 0.31},                // 2.9, 25.4
	{"rerun8/proto/net-*-ll", ColOurs, BucketAll, 0.07, 0.23},       // 3.4, 18.0
	{"rerun8/proto/net-*-simple", ColOurs, BucketAll, 0.07, 0.22},   // 3.6, 16.1 (6.1 before the SHM refit)
	{"rerun8/heldout/net-*-ll", ColOurs, BucketAll, 0.11, 0.21},     // 8.0, 16.0
	{"rerun8/heldout/net-*-simple", ColOurs, BucketAll, 0.08, 0.21}, // 4.2, 15.2 (4.9 before the SHM refit)
}

// h200OursBounds are tolerances on our executor's column simulated with
// testdata/hw/h200-twinccl-early-own.json (earlyOwnCalib: the kernel these
// files were recorded with), fitted on proto/ (and the tuner's choices
// from 16 MiB) by stages 1-7 of testdata/hw/fit-ours.sh, as h200Bounds.
// Held out (heldout/): P2P 2.5-4.0 percent median and at most 13.6 (LL 5.8/11.5 and LL128
// 6.5/13.7 before their blocks were sized to the call, line_threads; the
// P2P and SHM files are the kernel with 4 Simple packs in flight,
// TW_UNROLL, whose LL and LL128 steps are steadier than the 8-pack
// kernel's), SHM 2.9-5.4 (LL 3.5 with the fixed block, whose per-call
// constants it shares with P2P; its maxima: 27.0 percent for Broadcast
// LL, 21.9 for the AllReduce ring at 192 KiB; the SHM Simple maximum was
// 32.2 before simple.host_turn_us, the turn from a lane's send into host
// memory to its receive from it), sockets 10.4-11.8 (recorded again with
// the current kernel; our socket times moved 15-27 percent median between
// starts of the machine). rerun/heldout is the 8-pack kernel
// too: its P2P is 6-27 percent slower than the 4-pack kernel the
// calibration describes, and its pools bound that. threads/ (NCCL_NTHREADS
// forced on NCCL; our block size is fixed, so for our column these are
// more held-out sizes) is within 3.4 (P2P) and 3.3 (SHM) percent median.
var h200OursBounds = []poolBound{
	{"p2p-*", ColOurs, BucketAll, 0.08, 0.20},                // 4.1, 14.7
	{"shm-*", ColOurs, BucketAll, 0.07, 0.22},                // 4.2, 16.0
	{"net-*", ColOurs, BucketAll, 0.17, 0.50},                // 13.6, 45.0
	{"proto/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.14},       // 4.7, 8.2
	{"proto/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.18},    // 3.6, 12.8
	{"proto/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.14},   // 2.8, 8.9
	{"proto/shm-*-ll", ColOurs, BucketAll, 0.09, 0.25},       // 5.1, 20.4
	{"proto/shm-*-simple", ColOurs, BucketAll, 0.06, 0.15},   // 2.3, 9.2
	{"proto/net-*-ll", ColOurs, BucketAll, 0.15, 0.30},       // 11.8, 24.3
	{"proto/net-*-simple", ColOurs, BucketAll, 0.23, 0.38},   // 19.3, 32.1
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.07, 0.14},     // 4.0, 8.4
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.18},  // 3.7, 13.6
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.16}, // 2.5, 10.5
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.07, 0.32},     // 5.4, 27.0
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.25}, // 2.9, 21.9
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.15, 0.39},     // 11.7, 33.6
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.14, 0.40}, // 10.4, 34.6
	{"threads/p2p-*", ColOurs, BucketAll, 0.07, 0.17},        // 3.4, 11.8: our block size is fixed
	{"threads/shm-*", ColOurs, BucketAll, 0.06, 0.23},        // 3.0, 20.0
	// the sockets' first recordings: the 8-pack kernel, which this calibration does not describe
	{"8pack/*net-*", ColOurs, BucketAll, 0.22, 0.43},  // 18.9, 37.1
	{"8pack/*/net-*", ColOurs, BucketAll, 0.29, 0.51}, // 25.6, 45.3
	// heldout/ of P2P and SHM recorded again on a later start of the machine, the same kernel
	{"rerun2/heldout/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.15},     // 4.2, 9.3
	{"rerun2/heldout/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.19},  // 3.8, 13.9
	{"rerun2/heldout/p2p-*-simple", ColOurs, BucketAll, 0.07, 0.14}, // 3.7, 9.0
	{"rerun2/heldout/shm-*-ll", ColOurs, BucketAll, 0.08, 0.30},     // 4.8, 24.6
	{"rerun2/heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.24}, // 2.4, 21.1
	// heldout/ recorded again on another start of the machine (the 8-pack kernel: see below)
	{"rerun/heldout/p2p-*-ll", ColOurs, BucketAll, 0.17, 0.33},     // 13.8, 28.6
	{"rerun/heldout/p2p-*-ll128", ColOurs, BucketAll, 0.24, 0.48},  // 21.0, 45.6
	{"rerun/heldout/p2p-*-simple", ColOurs, BucketAll, 0.14, 0.23}, // 10.2, 17.8
	{"rerun/heldout/shm-*-ll", ColOurs, BucketAll, 0.13, 0.30},     // 9.4, 24.2
	{"rerun/heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.29}, // 3.6, 26.3
	{"rerun/heldout/net-*-ll", ColOurs, BucketAll, 0.20, 0.64},     // 17.2, 59.2
	{"rerun/heldout/net-*-simple", ColOurs, BucketAll, 0.21, 0.46}, // 18.0, 40.3
	// a fourth start (rerun3/): sockets, and LL128 from 16 to 64 MiB (held out)
	{"rerun3/heldout/net-*-ll", ColOurs, BucketAll, 0.17, 0.45},     // 13.4, 39.3
	{"rerun3/heldout/net-*-simple", ColOurs, BucketAll, 0.16, 0.34}, // 12.3, 28.7
	{"rerun3/proto/net-*-ll", ColOurs, BucketAll, 0.16, 0.47},       // 12.1, 41.6
	{"rerun3/proto/net-*-simple", ColOurs, BucketAll, 0.15, 0.50},   // 11.7, 44.3
	{"rerun3/ll128-large/p2p-*", ColOurs, BucketAll, 0.10, 0.18},    // 7.0, 12.7
}

// h200NoLeaderBounds are tolerances on rerun4/, a fifth start of the
// machine recorded with the kernel whose host-memory receives load a
// line's own data only once the line arrived, under
// testdata/hw/h200-twinccl-no-leader.json (noLeaderCalib: the embedded
// calibration before the credit leader, fitted on rerun4/proto/shm-*-ll,
// stage 8 of fit-ours.sh, with the tuner's choices of rerun4/ up to 128
// KiB), as h200Bounds; SHM Simple's host constants (stage 9) were fitted on
// rerun4/ and the first start's proto/ together. Held out
// (rerun4/heldout): SHM LL 3.3 percent median (6.0 under the calibration
// of the kernel before, 5.4 on that kernel's own heldout/), its maximum
// 23.9 at the 1.5 MiB ReduceScatter: our kernel runs AllGather and
// ReduceScatter of 1.5 MiB 11-15% faster per byte than those of 12 MiB,
// where the simulation keeps one pace (at 12 MiB a sender waits 15-30 us
// for its credits at every turn of the slot ring). SHM Simple 2.5 (3.3
// before stage 9). The sockets on this start were slower than on the
// start the calibration was fitted on (see h200Bounds).
var h200NoLeaderBounds = []poolBound{
	{"rerun4/shm-*", ColOurs, BucketAll, 0.06, 0.17},                // 3.0, 11.6
	{"rerun4/net-*", ColOurs, BucketAll, 0.16, 0.37},                // 12.3, 31.4
	{"rerun4/proto/shm-*-ll", ColOurs, BucketAll, 0.07, 0.23},       // 3.3, 17.4
	{"rerun4/proto/shm-*-simple", ColOurs, BucketAll, 0.05, 0.17},   // 1.6, 11.7
	{"rerun4/proto/net-*-ll", ColOurs, BucketAll, 0.28, 0.45},       // 24.5, 40.0
	{"rerun4/proto/net-*-simple", ColOurs, BucketAll, 0.22, 0.32},   // 18.2, 26.4
	{"rerun4/heldout/shm-*-ll", ColOurs, BucketAll, 0.07, 0.29},     // 3.3, 23.9
	{"rerun4/heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.27}, // 2.5, 21.6
	{"rerun4/heldout/net-*-ll", ColOurs, BucketAll, 0.33, 0.53},     // 29.7, 47.1
	{"rerun4/heldout/net-*-simple", ColOurs, BucketAll, 0.23, 0.35}, // 19.8, 29.4
	// SHM Simple of the starts before (the kernel's Simple path did not
	// change): heldout/ (fitted stage 9's held-out side) and rerun2/heldout/
	// (no stage used it)
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.05, 0.26},        // 2.0, 20.9
	{"rerun2/heldout/shm-*-simple", ColOurs, BucketAll, 0.05, 0.26}, // 1.9, 20.1
}

// h200CurrentBounds are tolerances on rerun5/, a sixth start of the
// machine recorded with the kernel whose LL senders into host memory have
// one thread poll the credits (TW_LL_CREDIT_LEADER=1), under the embedded
// calib/h200-twinccl.json (fit-ours.sh with LATE=rerun5: stage 8 fitted
// LL's host constants on rerun5/proto/shm-*-ll and the tuner's choices up
// to 128 KiB, stage 9 SHM Simple's on rerun5/proto/ and the first start's
// proto/ together, with the SHM model that puts the receiver's loads on
// its own way back from host memory and charges empty Simple slices), as
// h200Bounds; diag/ is a Ring AllReduce Simple sweep over SHM at 1, 2 and
// 4 channels (16 KiB to 1 MiB, traced) that no stage used, and an
// AllGather at 4: its maximum is the one-channel AllReduce of 1 MiB, 27%
// fast (one block's loads from host memory run at 13-18 GB/s, where four
// share PCIe's 50: fitting one channel's rows as well cost the 4-channel
// pools 3-5 points of their maxima). SHM Simple of the earlier starts too
// (the kernel's Simple path is the same). Held out: rerun5/heldout SHM LL
// 2.6 percent median, 11.9 max; Simple 2.0 and 12.2.
var h200CurrentBounds = []poolBound{
	{"rerun5/shm-*", ColOurs, BucketAll, 0.06, 0.16},                // 3.0, 11.0
	{"rerun5/proto/shm-*-ll", ColOurs, BucketAll, 0.06, 0.17},       // 2.3, 11.3
	{"rerun5/proto/shm-*-simple", ColOurs, BucketAll, 0.05, 0.11},   // 2.0, 5.1
	{"rerun5/heldout/shm-*-ll", ColOurs, BucketAll, 0.06, 0.17},     // 2.6, 11.9
	{"rerun5/heldout/shm-*-simple", ColOurs, BucketAll, 0.05, 0.18}, // 2.0, 12.2
	{"rerun5/diag/shm-*", ColOurs, BucketAll, 0.07, 0.33},           // 3.3, 27.5
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.05, 0.23},        // 1.5, 17.4
	{"rerun2/heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.18}, // 2.8, 12.1
	{"rerun4/heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.19}, // 2.5, 13.8
}

// h200GatherBounds are tolerances on our executor's socket rows of
// rerun6/, the plugin that gathers header and payload into one call
// before its proxy stopped allocating per message and napping through
// wake-ups, never fitted, under that build's calibration
// (testdata/hw/h200-twinccl-gather.json: its socket constants came from
// the H100 pair's rerun4/).
var h200GatherBounds = []poolBound{
	{"rerun6/net-*", ColOurs, BucketAll, 0.10, 0.60},                // 6.6, 54.3
	{"rerun6/proto/net-*-ll", ColOurs, BucketAll, 0.20, 0.74},       // 16.2, 68.5
	{"rerun6/proto/net-*-simple", ColOurs, BucketAll, 0.10, 0.52},   // 7.0, 46.2
	{"rerun6/heldout/net-*-ll", ColOurs, BucketAll, 0.17, 0.50},     // 13.1, 45.0
	{"rerun6/heldout/net-*-simple", ColOurs, BucketAll, 0.11, 0.38}, // 7.3, 32.5
}

// h200NoGatherBounds are tolerances on our executor's socket rows of the
// recordings made before its socket plugin sent header and payload with
// one system call (seventh session), simulated with the calibration of
// that build (testdata/hw/h200-twinccl-no-gather.json, h200-twinccl.json
// before the refit on the H100 pair's rerun4/).
var h200NoGatherBounds = []poolBound{
	{"rerun5/net-*", ColOurs, BucketAll, 0.15, 0.33},                // 11.4, 27.9
	{"rerun5/proto/net-*-ll", ColOurs, BucketAll, 0.14, 0.25},       // 10.4, 19.9
	{"rerun5/proto/net-*-simple", ColOurs, BucketAll, 0.13, 0.39},   // 9.6, 33.4
	{"rerun5/heldout/net-*-ll", ColOurs, BucketAll, 0.17, 0.37},     // 13.6, 31.9
	{"rerun5/heldout/net-*-simple", ColOurs, BucketAll, 0.17, 0.33}, // 13.6, 27.4
}

// h200FromH100Bounds: testdata/hw/h100-twinccl-8pack.json, our executor's calibration
// fitted on the H100 pair with an older kernel (steps rounded to the slot
// ring between calls, a forced protocol on the tuner's channels, 8 Simple
// packs in flight), against the H200 pair's held-out recordings: P2P LL
// within 6.5 percent median, the rest 12-24: what a calibration of another
// build of the kernel is worth.
var h200FromH100Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.10, 0.31},     // 6.5, 25.9
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.20, 0.93},  // 16.9, 87.2
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.17, 0.30}, // 13.3, 24.5
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.15, 0.64},     // 11.7, 58.1
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.21, 0.63}, // 17.2, 57.2
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.39, 1.48},     // 35.8, 142.6
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.60, 1.03}, // 56.8, 97.1
}

// TestRegressionH200x2 predicts every recording of testdata/hw/h200x2,
// rerun/heldout (heldout/ recorded again, the same build, on another start
// of the machine: what a held-back re-recording sees) included (the first
// recordings, h200FirstDir, have TestRegressionH200x2First),
// and fails, with a table of the offending rows, when a pool's median or
// a row leaves its tolerance.
func TestRegressionH200x2(t *testing.T) {
	checkMachine(t, hwDir(), 401, []string{"rerun/heldout/", "rerun2/heldout/", "threads/", "8pack/", "8pack/proto/", "8pack/heldout/", "rerun3/heldout/", "rerun3/proto/", "rerun3/ll128-large/",
		"rerun4/", "rerun4/proto/", "rerun4/heldout/", "rerun5/", "rerun5/proto/", "rerun5/heldout/", "rerun5/diag/",
		"rerun6/", "rerun6/proto/", "rerun6/heldout/", "rerun7/", "rerun7/proto/", "rerun7/heldout/", "rerun8/", "rerun8/proto/", "rerun8/heldout/"}, []calibBounds{
		{"", h200Bounds}, {earlyOwnCalib(), h200OursBounds}, {eightPackCalib(), h200FromH100Bounds}, {noLeaderCalib(), h200NoLeaderBounds},
		{twincclCalib(), h200CurrentBounds}, {gatherH200Calib(), h200GatherBounds}, {noGatherH200Calib(), h200NoGatherBounds},
		{calibFile("h200-twinccl.json"), h200CurrentBuildBounds},
	})
}

// h200x4HeldoutBounds are tolerances on testdata/hw/h200x4/2026-11-26:
// heldout/ of P2P and SHM recorded on four H200 (record.sh with NP=4, the
// current executor), as h200Bounds: no calibration was fitted on them
// but h200.json's Simple relay_us (sixteenth session; 2026-11-27/ held
// out). NCCL's column under the embedded calibration; our executor's under
// h200-twinccl-early-own.json (fitted on two GPUs, the kernel these files
// were recorded with). A 4-GPU SHM LL AllGather runs three hops through
// host memory where two GPUs run one: per-hop costs fitted on two GPUs
// alone made it 16% slow, a per-call one (ll.host_start_us) 4%. NCCL's
// Broadcast and Reduce LL over SHM on four GPUs are far at their largest
// sizes (up to 90%: 4.4-15 ms for 12 MiB, from one repetition to the
// next) under every calibration. NCCL's SHM Simple was 60% off at most
// until h200.json's SHM constants were fitted on two and four GPUs at
// once (2026-11-27/, eighteenth session); our executor's small SHM calls
// stay 35% slower under the early calibration.
var h200x4HeldoutBounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.20},     // 2.6, 15.7 (fitted with ll.recv_load_cost: 2.6, 14.7 before; 3.0, 14.9 before ll.link_eff; 4.4, 17.3 before relay_hold_us, fitted on these files)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.17},  // 3.6, 12.7 (ll128.thread_call_us, fitted on these files; 3.9, 15.7 before; 5.0, 18.1 before that)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.18}, // 3.7, 13.2 (3.8, 15.2 before simple.thread_op_max_threads, fitted on these files; 6.6, 22.5 before relay_us, fitted on these files)
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.95},     // 1.9, 89.1 (4.7, 90.1 before the SHM refit on two and four GPUs)
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.26}, // 3.5, 17.0 (6.0, 21.0 before the tree groups ran at their threads' rate, host_post_us and host_round_us, twentieth session; 7.7, 60.3 before the SHM refit)
}

// h200x4HeldoutOursBounds bound our executor's column of the same files.
var h200x4HeldoutOursBounds = []poolBound{
	{"heldout/p2p-*", ColOurs, BucketAll, 0.11, 0.26}, // 7.4, 20.1
	{"heldout/shm-*", ColOurs, BucketAll, 0.34, 1.18}, // 30.8, 112.7: the 4-GPU host's memory is not the 2-GPU host's
}

// TestRegressionH200x4Heldout predicts the 4-GPU held-out recordings.
func TestRegressionH200x4Heldout(t *testing.T) {
	checkMachine(t, filepath.Join(x4Dir(), "2026-11-26"), 25, nil, []calibBounds{
		{"", h200x4HeldoutBounds}, {earlyOwnCalib(), h200x4HeldoutOursBounds},
	})
}

// x4CurrentBounds are tolerances on testdata/hw/h200x4/2026-11-27:
// heldout/ of P2P and SHM recorded on four H200 with the current executor
// (record.sh with NP=4, the same machine and session as
// h200x2/rerun7/), as h200Bounds: NCCL's column under the embedded
// calibration (fitted on two GPUs; its Simple relay_us on the 2026-11-26
// files, which holds these out), ours under calib/h200-twinccl.json,
// whose forward_us was fitted on these files' P2P rows, its Simple
// constants on those with two GPUs', and its SHM Simple constants and
// host_mem_GBps on these files' SHM Simple rows with two GPUs' (sixteenth
// session: 30.5% median before, when two GPUs' per-call costs stood in
// for the per-step costs four GPUs pay three times); every other constant
// on two GPUs. Our SHM LL stays 10% off.
var x4CurrentBounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.16},     // 2.7, 10.2 (2.4, 9.9 before ll.recv_load_cost; 2.7, 10.4 before ll.link_eff; 3.7, 11.4 before relay_hold_us)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.06, 0.17},  // 3.4, 12.7 (3.8, 16.4 before ll128.thread_call_us; 5.1, 14.8 before that)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.18}, // 3.6, 13.8 (3.2, 15.8 before simple.thread_op_max_threads; 5.7, 23.0 before relay_us)
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.05, 0.15},     // 1.9, 9.8 (4.2, 18.7 before the SHM refit on two and four GPUs, fitted on these files)
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.25}, // 4.2, 16.0 (6.0, 20.1 before the tree groups ran at their threads' rate, host_post_us and host_round_us, twentieth session; 7.3, 61.0 before the SHM refit)
}

// x4CurrentOursBounds bound our executor's column of the same files.
var x4CurrentOursBounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.19},     // 4.3, 13.1 (6.2, 18.4 before forward_us)
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.08, 0.25},  // 4.1, 19.3 (5.8, 18.8 before forward_us)
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.15}, // 3.0, 9.8 (3.3, 12.9 before the H200's Simple refit)
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.08, 0.30},     // 5.2, 25.1 (10.5, 24.1 before host memory's cache)
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.06, 0.19}, // 3.4, 13.6 (4.8, 33.2 before host memory's cache; 30.5, 77.2 before the sixteenth session's SHM refit; fitted on these files)
}

// TestRegressionH200x4Current predicts the 4-GPU held-out recordings of
// the current executor.
func TestRegressionH200x4Current(t *testing.T) {
	checkMachine(t, filepath.Join(x4Dir(), "2026-11-27"), 25, nil, []calibBounds{
		{"", x4CurrentBounds}, {calibFile("h200-twinccl.json"), x4CurrentOursBounds},
	})
}

// h100x4Bounds are tolerances on testdata/hw/h100x4/2026-11-27: heldout/
// of P2P recorded on four H100 (nvidia-h100-x4, record.sh with NP=4, the
// current executor): NCCL's column under calib/h100.json (fitted on the
// H100 pair alone), ours under calib/h100-twinccl.json, whose forward_us
// (a step that receives and sends to a peer GPU, which two ranks' rings
// have only in AllReduce) was fitted on these files, every other constant
// on the pair. NCCL's column under h100.json keeps forward_us at 0, since
// NCCL's two-rank AllReduce does not pay what its four-rank steps do
// (docs/perf.md, fifteenth session); its Simple relay_us (a relaying
// lane's posts seen late, which no two-rank ring has) was fitted on these
// files, and its LL and LL128 relay_hold_us (a relaying lane's slice
// holds it; relay_us made them worse).
var h100x4Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.15},     // 2.1, 9.1 (4.2, 12.1 before relay_hold_us, fitted on these files)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.21},  // 5.2, 15.0 (4.1, 15.7 before ll128.thread_call_us; 5.4, 16.2 before that)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.19}, // 3.0, 14.4 (2.9, 18.5 before simple.thread_op_max_threads; 8.3, 28.6 before relay_us, fitted on these files)
}

// h100x4OursBounds bound our executor's column of the same files.
var h100x4OursBounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.20},     // 4.9, 14.1 (7.3, 17.9 before forward_us)
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.25},  // 3.8, 19.7 (5.1, 18.6 before forward_us)
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.05, 0.17}, // 1.5, 11.3 (11.3, 18.5 before forward_us)
}

// h100x4RerunBounds are tolerances on testdata/hw/h100x4/rerun: the same
// recordings on a second start (another machine of the kind), which no
// fit saw: forward_us held out.
var h100x4RerunBounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.15},     // 3.2, 9.2 (4.5, 12.2 before relay_hold_us)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.21},  // 5.1, 14.6 (ll128.thread_call_us, fitted on these files; 4.6, 15.3 before; 5.7, 15.8 before that)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.19}, // 3.1, 14.2 (2.9, 18.0 before simple.thread_op_max_threads, fitted on these files; 8.4, 28.2 before relay_us)
}

// h100x4RerunOursBounds bound our executor's column of the same files.
var h100x4RerunOursBounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.07, 0.19},     // 3.9, 13.5 (7.7, 17.8 before forward_us)
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.08, 0.25},  // 4.5, 19.8 (6.7, 19.1 before forward_us)
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.05, 0.17}, // 1.7, 11.2 (11.6, 20.8 before forward_us)
}

// h100x4Rerun2Bounds are tolerances on testdata/hw/h100x4/rerun2: the
// same recordings on a third start (sixteenth session), recorded after
// relay_us was fitted: no fit saw it.
var h100x4Rerun2Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.15},     // 2.5, 9.4 (4.3, 12.4 before relay_hold_us)
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.21},  // 5.2, 14.7 (4.9, 15.3 before ll128.thread_call_us; 5.9, 15.9 before that)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.07, 0.19}, // 3.2, 14.3 (3.1, 18.4 before simple.thread_op_max_threads; 8.1, 28.5 without relay_us)
}

// h100x4Rerun2OursBounds bound our executor's column of the same files.
var h100x4Rerun2OursBounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.20},     // 4.9, 14.3
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.08, 0.25},  // 4.3, 19.3
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.05, 0.16}, // 1.9, 10.9
}

// h100x4Rerun3Bounds are tolerances on testdata/hw/h100x4/rerun3: the
// held-out sizes on a tenth start (twenty-second session), recorded after
// simple.thread_op_max_threads and ll128.thread_call_us were fitted: no
// fit saw them.
var h100x4Rerun3Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.05, 0.14},     // 1.9, 9.0
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.20},  // 5.2, 15.0 (4.6, 15.6 before ll128.thread_call_us)
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.19}, // 3.2, 13.8 (3.4, 18.9 before simple.thread_op_max_threads)
}

// h100x4Rerun3OursBounds bound our executor's column of the same files.
var h100x4Rerun3OursBounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.08, 0.20},     // 4.8, 14.4
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.07, 0.25},  // 4.4, 19.9
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.05, 0.16}, // 1.7, 11.1
}

// h100x4SHMBounds are tolerances on testdata/hw/h100x4/shm: heldout/ of
// SHM (NCCL_P2P_DISABLE=1) on a fifth start (sixteenth session). The SHM
// Simple constants of h100-twinccl.json and h100.json were fitted on these
// files with two GPUs' (testdata/hw/fit-shm-gpus.sh, eighteenth session).
// NCCL's column was 14.9% median and 125% max before: h100.json, fitted
// on two GPUs alone, capped host memory at 114 GB/s where four GPUs' rings
// move 190-260; with host memory's cache (a call whose buffers' footprint
// fits it moves host memory faster) and a joint fit it is within 6.4%.
var h100x4SHMBounds = []poolBound{
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.07, 0.32},     // 3.9, 26.6 (3.5, 70.7 before the SHM refit on two and four GPUs)
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.26}, // 4.9, 12.4 (twentieth session, tree groups at their threads' rate, host_post_us, SHM Simple refitted, host_round_us; 6.4, 20.7 before; 14.9, 124.9 before the SHM refit on two and four GPUs; fitted on these files)
}

// h100x4SHMOursBounds bound our executor's column of the same files.
var h100x4SHMOursBounds = []poolBound{
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.10, 0.35},     // 6.6, 29.3 (10.4, 24.4 before host memory's cache)
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.21}, // 4.3, 15.8 (6.5, 29.6 before host memory's cache; 21.0, 69.8 before the sixteenth session's SHM refit)
}

// h100x4SHM2Bounds are tolerances on testdata/hw/h100x4/shm2: the same
// SHM recordings on a sixth start, recorded after every fit of the
// session: no fit saw them.
var h100x4SHM2Bounds = []poolBound{
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.07, 0.33},     // 3.9, 27.8 (3.9, 71.3 before the SHM refit on two and four GPUs)
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.24}, // 3.6, 13.0 (twentieth session; 6.1, 18.9 before; 15.5, 126.9 before the SHM refit on two and four GPUs)
}

// h100x4SHM2OursBounds bound our executor's column of the same files.
var h100x4SHM2OursBounds = []poolBound{
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.09, 0.31},     // 6.2, 26.2 (10.5, 25.6 before host memory's cache)
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.21}, // 3.9, 16.1 (6.7, 33.4 before host memory's cache; 19.6, 74.7 before the sixteenth session's SHM refit)
}

// h100x4SHM3Bounds are tolerances on testdata/hw/h100x4/shm3: the same
// SHM recordings on a seventh start (eighteenth session), recorded after
// the SHM refit on two and four GPUs: no fit saw them.
var h100x4SHM3Bounds = []poolBound{
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.07, 0.33},     // 3.6, 27.5
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.24}, // 3.9, 12.8 (twentieth session; 5.6, 18.6 before; 15.2, 125.5 under the calibration before the SHM refit)
}

// h100x4SHM3OursBounds bound our executor's column of the same files.
var h100x4SHM3OursBounds = []poolBound{
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.09, 0.27},     // 6.2, 21.8 (10.6, 21.2 before)
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.23}, // 3.4, 17.8 (5.1, 26.6 before)
}

// h100x4TunerBounds are tolerances on testdata/hw/h100x4/tuner: the
// tuner's choices of every collective (8 B-256 MiB) on a third start,
// which no fit saw, both columns.
var h100x4TunerBounds = []poolBound{
	{"p2p-*", ColNCCL, BucketAll, 0.07, 0.18}, // 3.1, 12.6 (4.9, 15.5 before relay_us and relay_hold_us)
}

// h100x4TunerOursBounds bound our executor's column of the same files.
var h100x4TunerOursBounds = []poolBound{
	{"p2p-*", ColOurs, BucketAll, 0.08, 0.26}, // 5.0, 20.8
}

// h100x4SHMTunerBounds are tolerances on testdata/hw/h100x4/shm-tuner: the
// tuner's choices of every collective over SHM (NCCL_P2P_DISABLE=1, 8 B-64
// MiB) on an eighth machine (eighteenth session), recorded after the SHM
// refit on two and four GPUs: no fit saw them.
var h100x4SHMTunerBounds = []poolBound{
	{"shm-*", ColNCCL, BucketSmall, 0.06, 0.20}, // 3.0, 14.2 (2.8, 65.6 under the calibration before)
	{"shm-*", ColNCCL, BucketLarge, 0.09, 0.23}, // 5.7, 17.2 (61.5, 125.8 before)
}

// h100x4SHMTunerOursBounds bound our executor's column of the same files.
var h100x4SHMTunerOursBounds = []poolBound{
	{"shm-*", ColOurs, BucketSmall, 0.10, 0.25}, // 6.9, 19.5 (6.0, 19.5 before)
	{"shm-*", ColOurs, BucketLarge, 0.09, 0.25}, // 6.1, 19.9 (12.9, 23.3 before)
}

// h100x4SocketBounds are tolerances on testdata/hw/h100x4/sockets: the
// split-host socket groups (proto:net, heldout:net) on a machine of four
// H100 and 64 CPUs (twenty-second session), which no fit saw.
var h100x4SocketBounds = []poolBound{
	{"proto/net-*-ll", ColNCCL, BucketAll, 0.08, 0.18},       // 5.7, 12.8
	{"proto/net-*-simple", ColNCCL, BucketAll, 0.06, 0.18},   // 3.0, 12.2
	{"heldout/net-*-ll", ColNCCL, BucketAll, 0.06, 0.17},     // 3.0, 11.9
	{"heldout/net-*-simple", ColNCCL, BucketAll, 0.06, 0.16}, // 2.6, 10.8
}

// h100x4SocketOursBounds bound our executor's column of the same files.
var h100x4SocketOursBounds = []poolBound{
	{"proto/net-*-ll", ColOurs, BucketAll, 0.07, 0.23},       // 3.8, 17.9
	{"proto/net-*-simple", ColOurs, BucketAll, 0.08, 0.22},   // 5.7, 16.7
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.07, 0.18},     // 4.5, 12.6
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.06, 0.18}, // 2.0, 12.5
}

// TestRegressionH100x4 predicts the four-H100 recordings: the held-out
// sizes of three starts, the tuner's choices of a fourth, SHM's held-out
// sizes on a fifth, a sixth and a seventh, its tuner's choices on an
// eighth, the split-host sockets on a ninth and the held-out sizes again
// on a tenth.
func TestRegressionH100x4(t *testing.T) {
	for _, start := range []struct {
		dir        string
		minFiles   int
		nccl, ours []poolBound
	}{
		{"2026-11-27", 15, h100x4Bounds, h100x4OursBounds},
		{"rerun", 15, h100x4RerunBounds, h100x4RerunOursBounds},
		{"rerun2", 15, h100x4Rerun2Bounds, h100x4Rerun2OursBounds},
		{"rerun3", 15, h100x4Rerun3Bounds, h100x4Rerun3OursBounds},
		{"shm", 10, h100x4SHMBounds, h100x4SHMOursBounds},
		{"shm2", 10, h100x4SHM2Bounds, h100x4SHM2OursBounds},
		{"shm3", 10, h100x4SHM3Bounds, h100x4SHM3OursBounds},
		{"tuner", 5, h100x4TunerBounds, h100x4TunerOursBounds},
		{"shm-tuner", 5, h100x4SHMTunerBounds, h100x4SHMTunerOursBounds},
		{"sockets", 12, h100x4SocketBounds, h100x4SocketOursBounds},
	} {
		checkMachine(t, filepath.Join(hwDir(), "..", "h100x4", start.dir), start.minFiles, nil, []calibBounds{
			{calibFile("h100.json"), start.nccl}, {calibFile("h100-twinccl.json"), start.ours},
		})
	}
}
