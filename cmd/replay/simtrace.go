package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/traces"
)

// simTracer writes the predicted call and event traces of a simulation
// (traces' parquet schema, source "sim") and, from them, the Chrome
// timeline and the pprof profile. Calls run back to back in virtual time:
// call i starts when call i-1 ended (its launch cost included).
type simTracer struct {
	job                 string
	callPath, eventPath string
	timeline, profile   string
	tmpDir              string
	pair                *tracePair // written atomically (tracepair.go)
	calls               *traces.CallWriter
	events              *traces.EventWriter
	nranks              int
	seq                 int64
	clockNs             float64 // virtual start of the next call
	base                float64 // virtual start of the current call
	buf                 []traces.EventRow
	err                 error
}

// simTracePaths turns --trace PREFIX into the call and event trace paths:
// PREFIX.calls.parquet and PREFIX.events.parquet (a trailing ".parquet"
// of PREFIX is dropped).
func simTracePaths(prefix string) (calls, events string) {
	prefix = strings.TrimSuffix(prefix, ".parquet")
	return prefix + ".calls.parquet", prefix + ".events.parquet"
}

// newSimTracer opens the trace files; trace (a prefix), timeline and
// profile may each be empty. It returns nil when none is asked for.
// members, when set (--ranks), are the job ranks of the communicator's
// ranks, which the call trace's metadata records (traces.MetaComms).
func newSimTracer(job, trace, timeline, profile string, nranks int, members []int) (*simTracer, error) {
	if trace == "" && timeline == "" && profile == "" {
		return nil, nil
	}
	t := &simTracer{job: job, timeline: timeline, profile: profile, nranks: nranks}
	if trace != "" {
		t.callPath, t.eventPath = simTracePaths(trace)
	} else {
		dir, err := os.MkdirTemp("", "replay-sim-")
		if err != nil {
			return nil, fmt.Errorf("trace scratch directory: %w", err)
		}
		t.tmpDir = dir
		t.callPath, t.eventPath = filepath.Join(dir, "calls.parquet"), filepath.Join(dir, "events.parquet")
	}
	meta := map[string]string{"twinccl.sim.job": job}
	if members != nil {
		c := traces.CommInfo{}
		for _, g := range members {
			c.Ranks = append(c.Ranks, int32(g))
		}
		s, err := traces.EncodeComms([]traces.CommInfo{c})
		if err != nil {
			t.cleanup()
			return nil, err
		}
		meta[traces.MetaComms] = s
	}
	var err error
	if t.pair, err = createTracePair(t.callPath, t.eventPath, traces.WriterOptions{Metadata: meta}); err != nil {
		t.cleanup()
		return nil, fmt.Errorf("--trace: %w", err)
	}
	t.calls, t.events = t.pair.Calls, t.pair.Events
	return t, nil
}

// slice records one simulated slice (sim.Machine.RunRecord's callback).
func (t *simTracer) slice(e *sim.SliceEvent) {
	if t.err != nil {
		return
	}
	t.buf = append(t.buf, simEventRow(0, t.seq, t.base, e))
	if len(t.buf) >= 4096 {
		t.flush()
	}
}

// simEventRow is the event row of a simulated slice e of call seq on
// communicator comm, whose times count from base (ns).
func simEventRow(comm uint64, seq int64, base float64, e *sim.SliceEvent) traces.EventRow {
	ns := func(t sim.Time) int64 { return int64(base + float64(t)/1e3) }
	return traces.EventRow{Comm: comm, Call: seq, Rank: e.Rank, Channel: e.Channel, SendPeer: e.SendPeer,
		RecvPeer: e.RecvPeer, Primitive: e.Prim.String(), Protocol: e.Proto.String(), Step: e.Step, Bytes: e.Bytes,
		StartNs: ns(e.Start), EndNs: ns(e.End), DataNs: ns(e.Data), Source: traces.SourceSim}
}

func (t *simTracer) flush() {
	if len(t.buf) > 0 && t.err == nil {
		if err := t.events.Append(t.buf...); err != nil {
			t.err = fmt.Errorf("event trace %s: %w", t.eventPath, err)
		}
	}
	t.buf = t.buf[:0]
}

// end records the call on every rank and advances the clock.
func (t *simTracer) end(c sim.Call, cr sim.CallResult) error {
	t.flush()
	if t.err != nil {
		return t.err
	}
	root := int32(-1)
	if c.Coll == model.CollBroadcast || c.Coll == model.CollReduce {
		root = int32(c.Root)
	}
	redop := ""
	if c.Coll == model.CollAllReduce || c.Coll == model.CollReduce || c.Coll == model.CollReduceScatter {
		redop = strings.ToLower(c.Op.String())
	}
	algo := cr.Algo.String()
	if c.Coll.IsP2P() {
		algo = ""
	}
	rows := make([]traces.CallRow, 0, t.nranks)
	for r := 0; r < t.nranks; r++ {
		end := t.base
		if r < len(cr.RankKernelUs) {
			end += cr.RankKernelUs[r] * 1e3
		}
		rows = append(rows, traces.CallRow{Job: t.job, Call: t.seq, Rank: int32(r), NRanks: int32(t.nranks), Op: c.Coll.String(),
			Algorithm: algo, Protocol: cr.Proto.String(), Channels: int32(cr.NChannels), Count: c.Count,
			Datatype: ncclDtypeName(c.Dtype), RedOp: redop, Root: root, EnqueueNs: int64(t.base), StartNs: int64(t.base),
			EndNs: int64(end), Source: traces.SourceSim})
	}
	if err := t.calls.Append(rows...); err != nil {
		return fmt.Errorf("call trace %s: %w", t.callPath, err)
	}
	t.seq++
	t.clockNs += cr.TimeUs * 1e3
	t.base = t.clockNs
	return nil
}

// finish closes the traces, moves them into place and writes the
// timeline and the profile.
func (t *simTracer) finish(stdout io.Writer) error {
	defer t.cleanup()
	t.flush()
	if t.err != nil {
		t.pair.abort()
		return t.err
	}
	if err := t.pair.commit(); err != nil {
		return fmt.Errorf("--trace: %w", err)
	}
	if t.timeline == "" && t.profile == "" {
		return nil
	}
	calls, err := traces.OpenCallFile(t.callPath)
	if err != nil {
		return err
	}
	defer calls.Close()
	events, err := traces.OpenEventFile(t.eventPath)
	if err != nil {
		return err
	}
	defer events.Close()
	if t.timeline != "" {
		if err := writeOutput(t.timeline, stdout, func(w io.Writer) error { return traces.WriteChrome(w, calls, events) }); err != nil {
			return fmt.Errorf("--timeline %s: %w", t.timeline, err)
		}
	}
	if t.profile != "" {
		if err := writeOutput(t.profile, stdout, func(w io.Writer) error { return traces.WritePprof(w, events) }); err != nil {
			return fmt.Errorf("--profile %s: %w", t.profile, err)
		}
	}
	return nil
}

// abort drops the traces after an error: the previous files stay.
func (t *simTracer) abort() {
	t.pair.abort()
	t.cleanup()
}

// cleanup removes the scratch directory of traces nobody asked to keep.
func (t *simTracer) cleanup() {
	if t.tmpDir != "" {
		os.RemoveAll(t.tmpDir)
		t.tmpDir = ""
	}
}

// ncclDtypeName is NCCL's name of a datatype without its prefix, as the
// trace schema records it ("float32", "bfloat16").
func ncclDtypeName(d model.Dtype) string {
	switch d {
	case model.DtypeFP16:
		return "float16"
	case model.DtypeFP32:
		return "float32"
	case model.DtypeFP64:
		return "float64"
	case model.DtypeBF16:
		return "bfloat16"
	}
	return d.String()
}
