package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// envTraceDir is where ranks started by the local launcher write their
// parts of the trace (the launcher merges them).
const envTraceDir = "TWINCCL_BENCH_TRACE_DIR"

// tracePaths are the call and event trace files of --trace OUT: the call
// trace is OUT itself and the event trace sits beside it, OUT with
// ".parquet" replaced by ".events.parquet". rank >= 0 names one rank's
// part (OUT.rankR.parquet, OUT.rankR.events.parquet), which is what each
// rank writes when it was started by Slurm, Open MPI or torchrun.
func tracePaths(out string, rank int) (calls, events string) {
	prefix := strings.TrimSuffix(out, ".parquet")
	if rank >= 0 {
		prefix = fmt.Sprintf("%s.rank%d", prefix, rank)
	}
	return prefix + ".parquet", prefix + ".events.parquet"
}

// traceParts prepares a local launcher's --trace OUT: a directory beside
// OUT where the ranks (told by the returned environment entry) write their
// parts, and finish, which merges the parts into OUT when the job
// succeeded (err == nil) and removes the directory either way.
func traceParts(out string, np int) (env string, finish func(err error) error, err error) {
	dir, err := os.MkdirTemp(filepath.Dir(out), ".twinccl-trace-")
	if err != nil {
		return "", nil, fmt.Errorf("trace: %w", err)
	}
	finish = func(err error) error {
		defer os.RemoveAll(dir)
		if err != nil {
			return err
		}
		return mergeTraces(dir, np, out)
	}
	return envTraceDir + "=" + dir, finish, nil
}

// traceSink collects one rank's trace rows: one call row per collective
// call, one event row per executed slice.
type traceSink struct {
	job    string
	comm   uint64
	host   string
	next   int64
	calls  []traces.CallRow
	events []traces.EventRow
	// env are the NCCL_* settings of the run (traces.MetaNCCLEnv), nil
	// for none
	env map[string]string
	// comms, when set, are the job's communicators (traces.MetaComms), for
	// the call trace's metadata
	comms string
}

// ncclDtype is NCCL's datatype name without its prefix.
func ncclDtype(d model.Dtype) string {
	switch d {
	case model.DtypeInt8:
		return "int8"
	case model.DtypeUint8:
		return "uint8"
	case model.DtypeInt32:
		return "int32"
	case model.DtypeUint32:
		return "uint32"
	case model.DtypeInt64:
		return "int64"
	case model.DtypeUint64:
		return "uint64"
	case model.DtypeFP16:
		return "float16"
	case model.DtypeBF16:
		return "bfloat16"
	case model.DtypeFP32:
		return "float32"
	case model.DtypeFP64:
		return "float64"
	}
	return d.String()
}

// add records one call of p by rank (count as NCCL's argument).
func (t *traceSink) add(p *model.Program, rank int, count int64, root int, rec *callRecord, enqueue int64) {
	call := t.next
	t.next++
	t.calls = append(t.calls, t.callRow(p, rank, count, root, call, enqueue, rec.Start.UnixNano(), rec.End.UnixNano()))
	for _, ev := range rec.Slices {
		t.events = append(t.events, traces.EventRow{Comm: t.comm, Call: call, Rank: int32(rank), Channel: int32(ev.Channel),
			SendPeer: int32(ev.SendPeer), RecvPeer: int32(ev.RecvPeer), Primitive: ev.Prim.String(), Protocol: ev.Proto.String(),
			Step: ev.Step, Bytes: ev.Bytes, StartNs: ev.Start.UnixNano(), EndNs: ev.End.UnixNano(), Source: traces.SourceHW})
	}
}

// callRow is the call row of call number call of p on rank.
func (t *traceSink) callRow(p *model.Program, rank int, count int64, root int, call, enqueue, start, end int64) traces.CallRow {
	redop, r := "", int32(-1)
	switch p.Coll {
	case model.CollAllReduce, model.CollReduceScatter, model.CollReduce:
		redop = strings.ToLower(p.Op.String())
	}
	if p.Coll == model.CollBroadcast || p.Coll == model.CollReduce {
		r = int32(root)
	}
	return traces.CallRow{Job: t.job, Comm: t.comm, Call: call, Rank: int32(rank), NRanks: int32(p.NRanks),
		Op: p.Coll.String(), Algorithm: p.Algo.String(), Protocol: p.Proto.String(), Channels: int32(p.NChannels),
		Count: count, Datatype: ncclDtype(p.Dtype), RedOp: redop, Root: r, EnqueueNs: enqueue,
		StartNs: start, EndNs: end, Source: traces.SourceHW, Host: t.host}
}

// write stores the rows in a call and an event file, each atomically.
func (t *traceSink) write(callPath, eventPath string) error {
	var opt traces.WriterOptions
	if len(t.env) > 0 {
		b, err := json.Marshal(t.env)
		if err != nil {
			return fmt.Errorf("call trace %s: %w", callPath, err)
		}
		opt.Metadata = map[string]string{traces.MetaNCCLEnv: string(b)}
	}
	if t.comms != "" {
		if opt.Metadata == nil {
			opt.Metadata = map[string]string{}
		}
		opt.Metadata[traces.MetaComms] = t.comms
	}
	if err := atomicfile.Write(callPath, func(w io.Writer) error {
		cw, err := traces.NewCallWriter(w, opt)
		if err != nil {
			return err
		}
		return errors.Join(cw.Append(t.calls...), cw.Close())
	}); err != nil {
		return fmt.Errorf("call trace %s: %w", callPath, err)
	}
	if err := atomicfile.Write(eventPath, func(w io.Writer) error {
		ew, err := traces.NewEventWriter(w, opt)
		if err != nil {
			return err
		}
		return errors.Join(ew.Append(t.events...), ew.Close())
	}); err != nil {
		os.Remove(callPath) // both or neither
		return fmt.Errorf("event trace %s: %w", eventPath, err)
	}
	return nil
}

// mergeTraces writes the parts the ranks left in dir (rank0.parquet,
// rank0.events.parquet, ...) into the call and event files of out, each
// atomically; on error neither is written.
func mergeTraces(dir string, n int, out string) error {
	callPath, eventPath := tracePaths(out, -1)
	callParts, eventParts := make([]string, n), make([]string, n)
	for r := range n {
		callParts[r], eventParts[r] = tracePaths(filepath.Join(dir, "part"), r)
	}
	if err := atomicfile.Write(callPath, func(w io.Writer) error { return traces.MergeCallFiles(w, callParts) }); err != nil {
		return fmt.Errorf("merge call trace %s: %w", callPath, err)
	}
	if err := atomicfile.Write(eventPath, func(w io.Writer) error { return traces.MergeEventFiles(w, eventParts) }); err != nil {
		os.Remove(callPath)
		return fmt.Errorf("merge event trace %s: %w", eventPath, err)
	}
	return nil
}
