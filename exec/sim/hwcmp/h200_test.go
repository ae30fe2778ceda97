package hwcmp

import "testing"

// h200Bounds are the tolerances on testdata/hw/h200x2 (recorded
// 2026-11-26 on nvidia-h200-x2, the machine issue 10 judges: the tuner's
// choices, proto/ with every protocol forced and heldout/ at other sizes,
// all with NCCL forced to the same protocol through nccl_env) under the
// embedded calibration (NCCL's, fitted on this machine type with other
// harnesses), one per transport, protocol and column: medians 3 points
// and maxima 5 points above what it reaches (measured median and max in
// the comments, in percent). None of these files was fitted to it.
// Against NCCL, P2P is within 2.5-6.2 percent median held out; the maxima
// are single rows (Simple 30.8: AllGather and ReduceScatter at 1.5 MiB,
// where NCCL is faster than its neighbours predict); sockets between
// split hosts are 11-20 percent off, as on the H100 pair. Our executor's
// column is only bounded coarsely here (our kernels are not NCCL's):
// h200OursBounds bound it under its own calibration.
var h200Bounds = []poolBound{
	{"p2p-*", ColNCCL, BucketAll, 0.07, 0.18},                // 3.4, 12.1
	{"shm-*", ColNCCL, BucketAll, 0.10, 0.25},                // 7.0, 19.8
	{"net-*", ColNCCL, BucketAll, 0.12, 0.47},                // 8.9, 41.1
	{"proto/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.23},       // 4.0, 17.5
	{"proto/p2p-*-ll128", ColNCCL, BucketAll, 0.09, 0.24},    // 5.4, 18.8
	{"proto/p2p-*-simple", ColNCCL, BucketAll, 0.11, 0.35},   // 7.7, 30.0
	{"proto/shm-*-ll", ColNCCL, BucketAll, 0.11, 0.22},       // 7.5, 16.4
	{"proto/shm-*-simple", ColNCCL, BucketAll, 0.08, 0.29},   // 5.0, 23.1
	{"proto/net-*-ll", ColNCCL, BucketAll, 0.23, 0.39},       // 19.6, 33.4
	{"proto/net-*-simple", ColNCCL, BucketAll, 0.18, 0.36},   // 14.2, 30.8
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.06, 0.23},     // 2.5, 17.2
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.25},  // 4.9, 20.0
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.10, 0.36}, // 6.2, 30.8
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.10, 0.32},     // 6.6, 26.1
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.11, 0.26}, // 7.1, 20.3
	{"heldout/net-*-ll", ColNCCL, BucketAll, 0.23, 0.42},     // 19.6, 36.5
	{"heldout/net-*-simple", ColNCCL, BucketAll, 0.14, 0.35}, // 10.6, 29.8
	{"p2p-*", ColOurs, BucketAll, 0.31, 0.56},                // 27.2, 50.6
	{"shm-*", ColOurs, BucketAll, 0.25, 0.66},                // 21.3, 60.7
	{"net-*", ColOurs, BucketAll, 0.19, 0.70},                // 15.4, 64.7
}

// h200OursBounds are tolerances on our executor's column simulated with
// calib/h200-twinccl.json, fitted on proto/ (and the tuner's choices from
// 16 MiB) by testdata/hw/fit-ours.sh, as h200Bounds. Held out (heldout/):
// P2P 4.6-6.8 percent median, SHM 7.9-8.0, sockets 8.0-10.2. The maxima
// are rows where our executor, not the model, departs from NCCL: SHM
// Broadcast and Reduce (Simple 1.5-2 MiB, LL 24-196 KiB: 1.5-2x NCCL's
// time, the root's stores into host memory slower than NCCL's; see
// docs/perf.md) and socket Broadcast LL at small sizes.
var h200OursBounds = []poolBound{
	{"p2p-*", ColOurs, BucketAll, 0.09, 0.21},                // 5.2, 15.9
	{"shm-*", ColOurs, BucketAll, 0.10, 0.54},                // 6.7, 49.0
	{"net-*", ColOurs, BucketAll, 0.24, 0.99},                // 20.9, 93.5
	{"proto/p2p-*-ll", ColOurs, BucketAll, 0.09, 0.18},       // 5.7, 12.6
	{"proto/p2p-*-ll128", ColOurs, BucketAll, 0.12, 0.25},    // 8.3, 19.8
	{"proto/p2p-*-simple", ColOurs, BucketAll, 0.07, 0.16},   // 3.3, 11.0
	{"proto/shm-*-ll", ColOurs, BucketAll, 0.12, 0.45},       // 8.5, 39.4
	{"proto/shm-*-simple", ColOurs, BucketAll, 0.13, 0.23},   // 9.2, 17.7
	{"proto/net-*-ll", ColOurs, BucketAll, 0.13, 0.39},       // 9.5, 33.3
	{"proto/net-*-simple", ColOurs, BucketAll, 0.17, 0.53},   // 14.0, 47.7
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.10, 0.20},     // 6.8, 14.8
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.09, 0.26},  // 6.0, 20.3
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.08, 0.16}, // 4.6, 10.3
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.11, 0.52},     // 8.0, 46.4
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.11, 0.45}, // 7.9, 39.2
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.11, 0.55},     // 8.0, 49.4
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.14, 0.33}, // 10.2, 27.4
}

// h200FromH100Bounds: calib/h100-twinccl.json, our executor's calibration
// fitted on the H100 pair, predicts the H200 pair's held-out recordings
// within these bounds (P2P and SHM within 6-9 percent median: the
// kernels' costs carry over between the two machines; the sockets do
// not, the loopback of another host).
var h200FromH100Bounds = []poolBound{
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.11, 0.24},     // 7.7, 18.3
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.09, 0.27},  // 5.9, 21.8
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.11, 0.27}, // 7.4, 22.0
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.11, 0.52},     // 7.5, 46.2
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.12, 0.35}, // 8.5, 29.2
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.22, 0.46},     // 19.0, 40.9
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.34, 0.60}, // 30.2, 54.2
}

// TestRegressionH200x2 predicts every recording of testdata/hw/h200x2
// (the first recordings, h200FirstDir, have TestRegressionH200x2First)
// and fails, with a table of the offending rows, when a pool's median or
// a row leaves its tolerance.
func TestRegressionH200x2(t *testing.T) {
	checkMachine(t, hwDir(), 77, nil, []calibBounds{
		{"", h200Bounds}, {twincclCalib(), h200OursBounds}, {calibFile("h100-twinccl.json"), h200FromH100Bounds},
	})
}
