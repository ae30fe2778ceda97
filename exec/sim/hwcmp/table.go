package hwcmp

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
)

// Table turns the measured calls of in into a timing table for
// sim.FitTables ("replay calibrate"): one row per call, timed by column
// col of the recording under the NCCL_* settings the recording says NCCL
// ran under (Input.NCCLEnv), overridden by env, as "replay compare" does.
//
//   - ColOurs: our executor's time (time_us of a JSON file, the traced
//     kernel time of the rank that started last for a call trace), with
//     the algorithm, protocol and channels the call was recorded with
//     forced, as "replay compare" simulates it. Traced rows are compared
//     with the simulated kernel time (no launch cost).
//   - ColNCCL: NCCL's time (nccl_time_us of a JSON file) at the tuner's
//     choice, which is what NCCL ran; rows without one are skipped.
//
// The table is named after the file and the column ("p2p-allreduce.json:ours").
func Table(in *Input, col string, env map[string]string) (*sim.Table, error) {
	if col != ColOurs && col != ColNCCL {
		return nil, fmt.Errorf("%s: column %q (want %s or %s)", in.Path, col, ColOurs, ColNCCL)
	}
	if col == ColNCCL && in.Kind != KindJSON {
		return nil, fmt.Errorf("%s: a call trace has no NCCL column (col=%s needs a \"run gpu --json\" file recorded with --baseline nccl)", in.Path, ColNCCL)
	}
	// NCCL's column was timed by run gpu's loop on the device's libnccl
	// (sim.HarnessRunGPU); our executor's calibration has its own per-call
	// costs, fitted on this column under the nccl-tests harness.
	harness := sim.HarnessNCCLTests
	if col == ColNCCL {
		harness = sim.HarnessRunGPU
	}
	t := &sim.Table{Name: filepath.Base(in.Path) + ":" + col, Env: map[string]string{}, Harness: harness, Host: in.Host}
	if col == ColOurs {
		t.Kernel = in.Kernel
	}
	for k, v := range in.NCCLEnv {
		t.Env[k] = v
	}
	for k, v := range env {
		t.Env[k] = v
	}
	for _, c := range in.Calls {
		m := sim.Measurement{Coll: c.Coll, Bytes: c.Bytes, Line: int(c.Index) + 1}
		switch col {
		case ColOurs:
			if err := c.notProgram(); err != nil {
				return nil, fmt.Errorf("%s: row %d: %w", in.Path, c.Index, err)
			}
			m.MeanUs, m.BestUs = c.HwUs, c.HwBestUs
			m.Recorded = &sim.Recorded{Algo: c.Algo, Proto: c.Proto, NChannels: c.NChannels, Root: c.Root,
				Dtype: c.Dtype, Count: c.Count, Kernel: in.Kind == KindTrace}
		case ColNCCL:
			if !(c.NCCLUs > 0) {
				continue
			}
			m.MeanUs, m.BestUs = c.NCCLUs, c.NCCLBestUs
			m.Recorded = &sim.Recorded{Algo: -1, Proto: -1, Root: c.Root, Dtype: c.Dtype, Count: c.Count}
		}
		t.Rows = append(t.Rows, m)
	}
	if len(t.Rows) == 0 {
		return nil, fmt.Errorf("%s: no %s times", in.Path, col)
	}
	return t, nil
}

// IsInput reports whether path names a hardware recording that Open
// reads ("run gpu --json" output or a call trace) rather than a timing
// table, by its extension.
func IsInput(path string) bool {
	ext := strings.ToLower(filepath.Ext(path))
	return ext == ".json" || ext == ".parquet"
}
