package hwcmp

import "testing"

// h200Bounds are the tolerances on testdata/hw/h200x2 (recorded
// 2026-11-26 on nvidia-h200-x2, the machine issue 10 judges: the tuner's
// choices, proto/ with every protocol forced and heldout/ at other sizes,
// NCCL forced to the same protocol through nccl_env) under the embedded
// calibration (NCCL's, fitted on this machine type with other harnesses;
// of these files only proto/shm-*-simple, for its simple.host_fence_us,
// and proto/shm-*-ll, for LL's rounds of loads from host memory),
// one per transport, protocol and
// column: medians 3 points and maxima 5 points above what it reaches
// (measured median and max in the comments, in percent). Against NCCL,
// P2P is within 3.2-6.5 percent median held out and SHM 5.2 for Simple
// and LL (simple.host_fence_us, fitted on proto/shm-*-simple, took SHM Simple
// from 6.9 to 5.3 on an earlier recording; ll.host_round_us and the host
// load costs refitted with it, on proto/shm-*-ll, SHM LL from 9.2 to 5.2,
// its maximum from 25.2 to 13.7); the P2P Simple maxima are
// Reduce below 24 KiB (the simulation 26-30 percent slow) and AllGather
// from 24 KiB to 1.5 MiB (15-16 percent fast). Sockets between split
// hosts are 19-22 percent off, no better than NCCL agrees with itself:
// its own socket times moved 5-21 percent (median) between starts of the
// machine, P2P and SHM 0.4-1.8 (docs/perf.md). Our executor's column is
// only bounded coarsely here (our kernels are not NCCL's): h200OursBounds
// bound it under its own calibration.
var h200Bounds = []poolBound{
	{"p2p-*", ColNCCL, BucketAll, 0.07, 0.16},                // 3.3, 10.4
	{"shm-*", ColNCCL, BucketAll, 0.07, 0.24},                // 4.0, 19.2
	{"net-*", ColNCCL, BucketAll, 0.17, 0.35},                // 14.7, 29.9
	{"proto/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.20},       // 3.2, 14.5
	{"proto/p2p-*-ll128", ColNCCL, BucketAll, 0.07, 0.17},    // 3.5, 11.4
	{"proto/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.21},   // 2.2, 15.6
	{"proto/shm-*-ll", ColNCCL, BucketAll, 0.07, 0.16},       // 3.1, 10.4
	{"proto/shm-*-simple", ColNCCL, BucketAll, 0.06, 0.21},   // 2.7, 15.1
	{"proto/net-*-ll", ColNCCL, BucketAll, 0.28, 0.50},       // 24.3, 44.8
	{"proto/net-*-simple", ColNCCL, BucketAll, 0.20, 0.40},   // 16.2, 34.9
	{"heldout/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.19},     // 3.2, 13.9
	{"heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.17},  // 5.2, 11.7
	{"heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.16}, // 2.3, 10.3
	{"heldout/shm-*-ll", ColNCCL, BucketAll, 0.09, 0.19},     // 5.2, 13.7
	{"heldout/shm-*-simple", ColNCCL, BucketAll, 0.07, 0.20}, // 3.7, 14.5
	{"heldout/net-*-ll", ColNCCL, BucketAll, 0.26, 0.40},     // 24.8, 34.6
	{"heldout/net-*-simple", ColNCCL, BucketAll, 0.22, 0.37}, // 19.6, 32.4
	{"p2p-*", ColOurs, BucketAll, 0.24, 0.48},                // 20.8, 42.1
	{"shm-*", ColOurs, BucketAll, 0.12, 0.31},                // 9.1, 25.4
	{"net-*", ColOurs, BucketAll, 0.24, 0.56},                // 21.8, 50.7
	// Simple under NCCL_NTHREADS (threads/): 2-96 KiB (fitted, stages 8
	// and 9 of h200.json) and 256 KiB-64 MiB on 96-288 threads (held out)
	{"threads/p2p-*-nt*[0-9t]", ColNCCL, BucketAll, 0.06, 0.20}, // 2.8, 14.8
	{"threads/shm-*-nt*[0-9t]", ColNCCL, BucketAll, 0.07, 0.20}, // 3.5, 14.9
	{"threads/p2p-*-large", ColNCCL, BucketAll, 0.11, 0.61},     // 7.4, 55.9: a small block's copy rate on large calls
	{"threads/shm-*-large", ColNCCL, BucketAll, 0.21, 0.68},     // 18.0, 62.8
	// heldout/ recorded again on another start of the machine (the 8-pack kernel: see below)
	{"rerun/heldout/p2p-*-ll", ColNCCL, BucketAll, 0.07, 0.23},     // 3.3, 17.7
	{"rerun/heldout/p2p-*-ll128", ColNCCL, BucketAll, 0.08, 0.17},  // 5.1, 11.4
	{"rerun/heldout/p2p-*-simple", ColNCCL, BucketAll, 0.06, 0.17}, // 2.4, 11.8
	{"rerun/heldout/shm-*-ll", ColNCCL, BucketAll, 0.06, 0.21},     // 2.8, 15.9
	{"rerun/heldout/shm-*-simple", ColNCCL, BucketAll, 0.07, 0.18}, // 3.2, 12.6
	{"rerun/heldout/net-*-ll", ColNCCL, BucketAll, 0.18, 0.32},     // 14.4, 30.8
	{"rerun/heldout/net-*-simple", ColNCCL, BucketAll, 0.14, 0.37}, // 11.5, 31.7
}

// h200OursBounds are tolerances on our executor's column simulated with
// calib/h200-twinccl.json, fitted on proto/ (and the tuner's choices from
// 16 MiB) by testdata/hw/fit-ours.sh, as h200Bounds. Held out (heldout/):
// P2P 2.9-6.2 percent median and at most 13.0 (the P2P and SHM files are
// the kernel with 4 Simple packs in flight, TW_UNROLL, whose LL and LL128
// steps are steadier than the 8-pack kernel's), SHM 5.6-6.5 (its maxima,
// 27-32 percent: AllReduce below 24 KiB, a tree there, and Broadcast LL),
// sockets 10.9-18.3 (the 8-pack kernel; our socket times moved 15-27
// percent median between two starts of the machine). rerun/heldout is
// the 8-pack kernel too: its P2P is 6-27 percent slower than the 4-pack
// kernel the calibration describes, and its pools bound that.
var h200OursBounds = []poolBound{
	{"p2p-*", ColOurs, BucketAll, 0.09, 0.21},                // 5.9, 15.9
	{"shm-*", ColOurs, BucketAll, 0.08, 0.26},                // 4.6, 20.3
	{"net-*", ColOurs, BucketAll, 0.15, 0.38},                // 12.0, 32.1
	{"proto/p2p-*-ll", ColOurs, BucketAll, 0.10, 0.18},       // 6.7, 12.1
	{"proto/p2p-*-ll128", ColOurs, BucketAll, 0.11, 0.18},    // 7.8, 12.6
	{"proto/p2p-*-simple", ColOurs, BucketAll, 0.07, 0.16},   // 3.5, 10.5
	{"proto/shm-*-ll", ColOurs, BucketAll, 0.11, 0.25},       // 7.6, 19.2
	{"proto/shm-*-simple", ColOurs, BucketAll, 0.09, 0.39},   // 5.5, 33.4
	{"proto/net-*-ll", ColOurs, BucketAll, 0.11, 0.21},       // 8.0, 16.0
	{"proto/net-*-simple", ColOurs, BucketAll, 0.15, 0.26},   // 11.3, 21.0
	{"heldout/p2p-*-ll", ColOurs, BucketAll, 0.09, 0.17},     // 5.8, 11.5
	{"heldout/p2p-*-ll128", ColOurs, BucketAll, 0.10, 0.18},  // 6.2, 13.0
	{"heldout/p2p-*-simple", ColOurs, BucketAll, 0.06, 0.16}, // 2.9, 10.6
	{"heldout/shm-*-ll", ColOurs, BucketAll, 0.09, 0.32},     // 5.6, 27.2
	{"heldout/shm-*-simple", ColOurs, BucketAll, 0.10, 0.38}, // 6.5, 32.2
	{"heldout/net-*-ll", ColOurs, BucketAll, 0.21, 0.45},     // 17.1, 39.1
	{"heldout/net-*-simple", ColOurs, BucketAll, 0.14, 0.41}, // 10.9, 35.6
	{"threads/p2p-*", ColOurs, BucketAll, 0.08, 0.18},        // 4.3, 13.0: our block size is fixed
	{"threads/shm-*", ColOurs, BucketAll, 0.10, 0.42},        // 6.8, 36.1
	// heldout/ recorded again on another start of the machine (the 8-pack kernel: see below)
	{"rerun/heldout/p2p-*-ll", ColOurs, BucketAll, 0.20, 0.33},     // 16.1, 27.9
	{"rerun/heldout/p2p-*-ll128", ColOurs, BucketAll, 0.30, 0.48},  // 26.6, 42.5
	{"rerun/heldout/p2p-*-simple", ColOurs, BucketAll, 0.14, 0.24}, // 10.6, 18.4
	{"rerun/heldout/shm-*-ll", ColOurs, BucketAll, 0.15, 0.30},     // 11.8, 27.2
	{"rerun/heldout/shm-*-simple", ColOurs, BucketAll, 0.10, 0.31}, // 6.6, 25.6
	{"rerun/heldout/net-*-ll", ColOurs, BucketAll, 0.20, 0.64},     // 17.0, 59.0
	{"rerun/heldout/net-*-simple", ColOurs, BucketAll, 0.21, 0.63}, // 17.6, 57.2
}

// h200FromH100Bounds: calib/h100-twinccl.json, our executor's calibration
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
	checkMachine(t, hwDir(), 178, []string{"rerun/heldout/", "threads/"}, []calibBounds{
		{"", h200Bounds}, {twincclCalib(), h200OursBounds}, {calibFile("h100-twinccl.json"), h200FromH100Bounds},
	})
}
