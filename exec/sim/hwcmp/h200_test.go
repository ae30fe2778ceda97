package hwcmp

import "testing"

// h200Bounds are the tolerances on testdata/hw/h200x2 (recorded
// 2026-11-26 on nvidia-h200-x2, the machine issue 10 judges: the tuner's
// choices, proto/ with every protocol forced and heldout/ at other sizes,
// NCCL forced to the same protocol through nccl_env) under the embedded
// calibration (NCCL's, fitted on this machine type with other harnesses:
// none of these files was fitted to it), one per transport, protocol and
// column: medians 3 points and maxima 5 points above what it reaches
// (measured median and max in the comments, in percent). Against NCCL,
// P2P is within 3.5-6.3 percent median held out and SHM within 5.3-6.6
// (simple.host_fence_us, fitted on proto/shm-*-simple, took SHM Simple
// from 6.9); the P2P Simple maxima are AllGather and ReduceScatter at 1.5 MiB
// (NCCL faster than its neighbouring sizes predict) and Reduce below
// 24 KiB (the simulation 25-32 percent slow). Sockets between split hosts
// are 19-26 percent off, no better than NCCL agrees with itself: its own
// socket times moved 5-21 percent (median) between three starts of the
// machine, P2P and SHM 0.5-1.8 (docs/perf.md). Our executor's column is
// only bounded coarsely here (our kernels are not NCCL's): h200OursBounds
// bound it under its own calibration.
var h200Bounds = []poolBound{
	{"p2p-*", ColNCCL, BucketAll, 0.07, 0.25},                // 3.6, 19.2
	{"shm-*", ColNCCL, BucketAll, 0.10, 0.26},                // 6.7, 20.1
	{"net-*", ColNCCL, BucketAll, 0.17, 0.36},                // 13.3, 30.6
	{"proto/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.21},       // 3.3, 15.3
	{"proto/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.23},    // 4.7, 17.3
	{"proto/p2p-*-simple", ColNCCL, BucketAll, 0.11, 0.33},   // 7.1, 27.5
	{"proto/shm-*-ll", ColNCCL, BucketAll, 0.12, 0.24},       // 8.1, 18.4
	{"proto/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.35},   // 5.1, 29.3
	{"proto/net-*-ll", ColNCCL, BucketAll, 0.29, 0.51},       // 25.6, 45.2
	{"proto/net-*-simple", ColNCCL, BucketAll, 0.22, 0.40},   // 18.7, 34.9
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.23},     // 3.5, 17.2
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.09, 0.24},  // 5.1, 18.8
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.10, 0.34}, // 6.3, 28.1
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.10, 0.32},     // 6.6, 26.5
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.31}, // 5.3, 25.4
	{"heldout/net-*-ll", ColNCCL, BucketAll, 0.26, 0.40},     // 22.1, 34.6
	{"heldout/net-*-simple", ColNCCL, BucketAll, 0.22, 0.37}, // 18.6, 31.8
	{"p2p-*", ColOurs, BucketAll, 0.31, 0.57},                // 27.1, 51.1
	{"shm-*", ColOurs, BucketAll, 0.23, 0.42},                // 19.2, 36.5
	{"net-*", ColOurs, BucketAll, 0.25, 0.58},                // 21.5, 52.5
	// heldout/ recorded again on another start of the machine
	{"rerun/heldout/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.23},     // 3.3, 17.7
	{"rerun/heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.25},  // 4.7, 19.9
	{"rerun/heldout/p2p-*-simple", ColNCCL, BucketAll, 0.09, 0.36}, // 5.7, 30.5
	{"rerun/heldout/shm-*-ll", ColNCCL, BucketAll, 0.10, 0.33},     // 6.5, 27.1
	{"rerun/heldout/shm-*-simple", ColNCCL, BucketAll, 0.09, 0.31}, // 5.4, 26.0
	{"rerun/heldout/net-*-ll", ColNCCL, BucketAll, 0.18, 0.32},     // 14.5, 26.7
	{"rerun/heldout/net-*-simple", ColNCCL, BucketAll, 0.14, 0.37}, // 10.2, 31.7
}

// h200OursBounds are tolerances on our executor's column simulated with
// calib/h200-twinccl.json, fitted on proto/ (and the tuner's choices from
// 16 MiB) by testdata/hw/fit-ours.sh, as h200Bounds. Held out (heldout/):
// P2P 4.3-8.6 percent median, SHM 3.5-6.5 (Simple 7.0 before host_fence_us,
// the fence of a Simple slice stored into host memory), sockets 9.6-17.2
// (our socket times moved 15-17 percent median between two starts of the
// machine). The SHM Simple maximum is AllReduce below 24 KiB (a tree
// there: 20-27 percent slow) against AllGather (12-17 percent fast): the
// host's per-hop costs fit neither exactly.
var h200OursBounds = []poolBound{
	{"p2p-*", ColOurs, BucketAll, 0.10, 0.28},                // 6.3, 22.3
	{"shm-*", ColOurs, BucketAll, 0.08, 0.22},                // 4.9, 16.2
	{"net-*", ColOurs, BucketAll, 0.16, 0.33},                // 12.2, 27.9
	{"proto/p2p-*-ll", ColOurs, BucketAll, 0.11, 0.18},       // 7.2, 12.3
	{"proto/p2p-*-ll128", ColOurs, BucketAll, 0.14, 0.24},    // 10.1, 19.0
	{"proto/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.16},   // 2.8, 10.9
	{"proto/shm-*-ll", ColOurs, BucketAll, 0.11, 0.22},       // 7.9, 16.5
	{"proto/shm-*-simple", ColOurs, BucketAll, 0.11, 0.33},   // 7.3, 27.5
	{"proto/net-*-ll", ColOurs, BucketAll, 0.13, 0.30},       // 9.3, 24.3
	{"proto/net-*-simple", ColOurs, BucketAll, 0.15, 0.26},   // 11.3, 20.8
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.10, 0.20},     // 6.9, 14.1
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.12, 0.29},  // 8.6, 23.8
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.08, 0.17}, // 4.3, 11.7
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.10, 0.22},     // 6.5, 16.8
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.32}, // 3.5, 26.6
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.21, 0.50},     // 17.2, 44.2
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.13, 0.38}, // 9.6, 32.4
	// heldout/ recorded again on another start of the machine
	{"rerun/heldout/p2p-*-ll", ColOurs, BucketAll, 0.10, 0.19},     // 6.9, 14.0
	{"rerun/heldout/p2p-*-ll128", ColOurs, BucketAll, 0.13, 0.28},  // 9.6, 22.3
	{"rerun/heldout/p2p-*-simple", ColOurs, BucketAll, 0.08, 0.18}, // 4.2, 12.6
	{"rerun/heldout/shm-*-ll", ColOurs, BucketAll, 0.10, 0.23},     // 6.3, 17.6
	{"rerun/heldout/shm-*-simple", ColOurs, BucketAll, 0.07, 0.34}, // 3.8, 28.4
	{"rerun/heldout/net-*-ll", ColOurs, BucketAll, 0.27, 0.70},     // 23.1, 64.9
	{"rerun/heldout/net-*-simple", ColOurs, BucketAll, 0.20, 0.74}, // 16.4, 68.6
}

// h200FromH100Bounds: calib/h100-twinccl.json, our executor's calibration
// fitted on the H100 pair (before the step rounding and forced-protocol
// channel changes of this recording), predicts the H200 pair's held-out
// recordings within these bounds: P2P within 5-9 percent median, SHM
// 8-11; the sockets, the loopback of another host, not.
var h200FromH100Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.12, 0.25},     // 8.5, 19.2
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.10, 0.29},  // 6.6, 24.0
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.08, 0.24}, // 5.0, 19.0
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.11, 0.36},     // 7.8, 30.1
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.14, 0.52}, // 10.9, 46.1
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.16, 0.97},     // 12.7, 91.9
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.27, 0.61}, // 23.5, 55.8
}

// TestRegressionH200x2 predicts every recording of testdata/hw/h200x2,
// rerun/heldout (heldout/ recorded again, the same build, on another start
// of the machine: what a held-back re-recording sees) included (the first
// recordings, h200FirstDir, have TestRegressionH200x2First),
// and fails, with a table of the offending rows, when a pool's median or
// a row leaves its tolerance.
func TestRegressionH200x2(t *testing.T) {
	checkMachine(t, hwDir(), 108, []string{"rerun/heldout/"}, []calibBounds{
		{"", h200Bounds}, {twincclCalib(), h200OursBounds}, {calibFile("h100-twinccl.json"), h200FromH100Bounds},
	})
}
