package profiler

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"

	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/traces"
)

// Metadata keys of the plugin's traces (beside traces.MetaNCCLEnv, the
// NCCL_* settings of the process, which "replay run" replays under).
const (
	MetaClock      = "twinccl.profiler.clock"
	MetaComms      = "twinccl.profiler.comms"
	MetaGlobalRank = "twinccl.profiler.global_rank"
	MetaHost       = "twinccl.profiler.host"
	MetaPID        = "twinccl.profiler.pid"
	MetaAPI        = "twinccl.profiler.api"
	MetaDropped    = "twinccl.profiler.dropped_events"
	MetaIncomplete = "twinccl.profiler.incomplete_calls"
)

// ClockNote is MetaClock's value: what the times of the trace are.
const ClockNote = "CLOCK_MONOTONIC ns of the host (plugin's clock); kernel times are the GPU's %globaltimer moved to it by the smallest host-minus-GPU time the plugin saw on each communicator"

// writeBatch is the number of records turned into rows at a time, and the
// rows of a row group: it bounds a write's buffers inside the
// application's process (traces' default row group is 128K rows).
const writeBatch = 16 << 10

func hex(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// Write writes the process's traces with everything recorded so far,
// each file atomically (a failure leaves no file, or the previous one).
func (r *Recorder) Write() error {
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	r.mu.Lock()
	s := r.snapshotLocked()
	r.dirty = false
	r.mu.Unlock()

	meta, err := r.metadata(&s)
	if err != nil {
		return err
	}
	opt := traces.WriterOptions{Metadata: meta, RowGroupRows: writeBatch}
	defer debug.FreeOSMemory() // a write's buffers are garbage after it: give them back
	if err := atomicfile.Write(r.cfg.CallPath(), func(w io.Writer) error {
		cw, err := traces.NewCallWriter(w, opt)
		if err != nil {
			return err
		}
		var rows []traces.CallRow
		for lo := 0; lo < s.n; lo += writeBatch {
			rows = r.callRows(&s, lo, min(lo+writeBatch, s.n), rows[:0])
			if err := cw.Append(rows...); err != nil {
				cw.Close()
				return err
			}
		}
		return cw.Close()
	}); err != nil {
		r.markDirty()
		return fmt.Errorf("twinccl profiler: call trace: %w", err)
	}
	if !r.cfg.Proxy {
		return nil
	}
	if err := atomicfile.Write(r.cfg.EventPath(), func(w io.Writer) error {
		ew, err := traces.NewEventWriter(w, opt)
		if err != nil {
			return err
		}
		var rows []traces.EventRow
		for lo := 0; lo < s.n; lo += writeBatch {
			rows = r.stepRows(lo, min(lo+writeBatch, s.n), rows[:0])
			if err := ew.Append(rows...); err != nil {
				ew.Close()
				return err
			}
		}
		return ew.Close()
	}); err != nil {
		r.markDirty()
		return fmt.Errorf("twinccl profiler: event trace: %w", err)
	}
	return nil
}

func (r *Recorder) markDirty() {
	r.mu.Lock()
	r.dirty = true
	r.mu.Unlock()
}

func (r *Recorder) metadata(s *snapshot) (map[string]string, error) {
	comms := slices.Clone(s.comms)
	slices.SortStableFunc(comms, func(a, b CommMeta) int {
		if a.Comm != b.Comm {
			return compareHex(a.Comm, b.Comm)
		}
		return int(a.Rank) - int(b.Rank)
	})
	cj, err := json.Marshal(comms)
	if err != nil {
		return nil, err
	}
	env, err := json.Marshal(r.cfg.NCCLEnv)
	if err != nil {
		return nil, err
	}
	m := map[string]string{
		MetaClock: ClockNote, MetaComms: string(cj), MetaHost: r.cfg.Host, MetaPID: strconv.Itoa(r.cfg.PID),
		MetaAPI: fmt.Sprintf("v%d", s.apiLevel), MetaDropped: strconv.FormatInt(s.dropped, 10),
		MetaIncomplete: strconv.Itoa(len(s.unfinished)), traces.MetaNCCLEnv: string(env),
	}
	if r.cfg.GlobalRank >= 0 {
		m[MetaGlobalRank] = strconv.Itoa(int(r.cfg.GlobalRank))
	}
	return m, nil
}

func compareHex(a, b string) int {
	x, _ := strconv.ParseUint(a[2:], 16, 64)
	y, _ := strconv.ParseUint(b[2:], 16, 64)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
