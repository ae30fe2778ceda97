// Package gpurecord is the recording that "run gpu --json" writes and
// "replay compare" and "replay accuracy" read: one schema for the writer and
// every reader, checked on decoding, so that a file either side accepts the
// other reads the same way.
package gpurecord

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// MaxBytes bounds the size of a recording read into memory.
const MaxBytes = 64 << 20

// MaxRows bounds the rows of one recording.
const MaxRows = 1 << 20

// Report is the whole document: the run's setting and one row per size
// (and per data type and operation where the sweep had several).
type Report struct {
	NRanks     int    `json:"nranks"`
	Collective string `json:"collective"`
	// Graph says whether the calls were launched as CUDA graphs; absent
	// (nil) in recordings before the field existed, which all were.
	Graph *bool `json:"cuda_graph"`
	// Repetitions are every row's repetitions over the passes; a row
	// timed again (--retries) holds more (its reps_us say how many).
	Repetitions int      `json:"repetitions"`
	Topology    string   `json:"topology"`
	GPUs        []string `json:"gpus"`
	NCCLVersion string   `json:"nccl_version,omitempty"`
	// NCCLEnv are the NCCL_* settings of the environment NCCL's
	// communicator was created in: those inherited and those that
	// --algo, --proto and --channels set.
	NCCLEnv map[string]string `json:"nccl_env,omitempty"`
	// NetProbe are rank 0's probes of its host's loopback sockets before
	// and after the sweep (and each row's before its size, Row.NetProbe),
	// in runs whose ranks are on several hosts: what the socket network's
	// times depend on at the time.
	NetProbe []NetProbe `json:"net_probe,omitempty"`
	// Hosts is the number of hosts the ranks were on, in runs over
	// several: replay simulates them as that many nodes of one host's
	// topology.
	Hosts int `json:"hosts,omitempty"`
	// Kernel is the interpreter build the rows ran.
	Kernel *Kernel `json:"kernel,omitempty"`
	// Revision is the twinccl commit the binary was built from: with
	// Kernel it names the build of our executor's column.
	Revision string `json:"twinccl_revision,omitempty"`
	Rows     []Row  `json:"rows"`
}

// Row is one size of the sweep, out of place, with its in-place half.
type Row struct {
	Op        string  `json:"op"`
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	Dtype     string  `json:"dtype"`
	RedOp     string  `json:"redop"`
	Algo      string  `json:"algo"`
	Proto     string  `json:"proto"`
	NChannels int     `json:"nchannels"`
	TimeUs    float64 `json:"time_us"`
	BestUs    float64 `json:"best_us"`
	// RepsUs and NCCLRepsUs are the time per call of each repetition
	// (their slowest rank's), whose mean and best are TimeUs and BestUs
	// (NCCLTime and NCCLBest): replay takes their median, which one
	// disturbed repetition does not move.
	RepsUs     []float64 `json:"reps_us,omitempty"`
	AlgBW      float64   `json:"algbw_GBps"`
	BusBW      float64   `json:"busbw_GBps"`
	Wrong      int64     `json:"wrong"`
	NCCLTime   float64   `json:"nccl_time_us,omitempty"`
	NCCLBest   float64   `json:"nccl_best_us,omitempty"`
	NCCLRepsUs []float64 `json:"nccl_reps_us,omitempty"`
	NCCLAlgBW  float64   `json:"nccl_algbw_GBps,omitempty"`
	NCCLBusBW  float64   `json:"nccl_busbw_GBps,omitempty"`
	NCCLWrong  int64     `json:"nccl_wrong,omitempty"`
	Ratio      float64   `json:"ratio,omitempty"`
	// NetProbe is rank 0's probe of its host's loopback sockets just
	// before this size ran, in runs over several hosts.
	NetProbe *NetProbe `json:"net_probe,omitempty"`
	// Root is the root of Broadcast and Reduce (0 for the others).
	Root int `json:"root"`
	// Checked says whether the result was checked (-c): Wrong counts
	// only then.
	Checked bool `json:"checked"`
	// InPlace is the same size run in place (nccl-tests' in-place
	// columns): one buffer, the input at the rank's offset. Nil where it
	// did not run.
	InPlace *Row `json:"in_place,omitempty"`
}

// NetProbe is one probe of a host's loopback sockets (exec/hw/netprobe's
// Result, which converts to it).
type NetProbe struct {
	// LatencyUs is the one-way time of an 8-byte message, microseconds.
	LatencyUs float64 `json:"latency_us"`
	// OneWayGBps is the throughput of a bulk transfer in one direction,
	// BothWaysGBps that of each direction while both run at once.
	OneWayGBps   float64 `json:"one_way_GBps"`
	BothWaysGBps float64 `json:"both_ways_GBps"`
	Addr         string  `json:"addr"`
}

// Valid says the probe's latency is one a host can have, and its
// throughput (0: not measured) one a loopback can have.
func (p NetProbe) Valid() bool {
	return p.LatencyUs > 0 && p.LatencyUs < 1e6 && p.BothWaysGBps >= 0 && p.BothWaysGBps < 1e6
}

// Kernel names an interpreter build: the digest of its interp.cu, the
// largest LL and LL128 block it launches and the extra compile options.
type Kernel struct {
	Source string `json:"source_sha256"`
	// LineThreads is the largest LL and LL128 block; 0 in the recordings
	// of the builds before 2026-11-27, which launched at most the Simple
	// block.
	LineThreads int      `json:"line_threads,omitempty"`
	Options     []string `json:"options,omitempty"`
}

// String is "interp.cu DIGEST [line_threads=N] [OPTION ...]"; N is left
// out where it is 0.
func (k Kernel) String() string {
	s := "interp.cu " + k.Source
	if k.LineThreads != 0 {
		s += fmt.Sprintf(" line_threads=%d", k.LineThreads)
	}
	return strings.TrimSpace(s + " " + strings.Join(k.Options, " "))
}

// Validate checks a build read from a file: a hex digest and a few short
// printable words of options.
func (k Kernel) Validate() error {
	if len(k.Source) == 0 || len(k.Source) > 64 || strings.Trim(k.Source, "0123456789abcdef") != "" {
		return fmt.Errorf("source_sha256 %.70q is not a hex digest", k.Source)
	}
	if k.LineThreads != 0 && (k.LineThreads < 64 || k.LineThreads > 1024 || k.LineThreads%32 != 0) {
		return fmt.Errorf("line_threads %d is not a block size (64 to 1024 threads, whole warps)", k.LineThreads)
	}
	if len(k.Options) > 32 {
		return fmt.Errorf("%d options, more than 32", len(k.Options))
	}
	for _, o := range k.Options {
		if len(o) == 0 || len(o) > 128 || strings.IndexFunc(o, func(r rune) bool { return r <= ' ' || r > '~' }) >= 0 {
			return fmt.Errorf("option %.140q is not one printable word", o)
		}
	}
	return nil
}

// Encode writes the report as run gpu --json does: indented, rows never
// null.
func Encode(w io.Writer, rep *Report) error {
	r := *rep
	if r.Rows == nil {
		r.Rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(&r)
}

// Decode reads and checks a recording (name is used in errors): at most
// MaxBytes, a positive rank count, 1 to MaxRows rows each with op
// (or the report's collective), bytes, count and time_us, and every
// header field within what a run can write. It checks the schema, not
// whether a row's call is one a simulator can run.
func Decode(r io.Reader, name string) (*Report, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(data) > MaxBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a \"run gpu --json\" file", name, MaxBytes>>20)
	}
	var rep Report
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&rep); err != nil {
		return nil, fmt.Errorf("%s: not a \"run gpu --json\" file: %w", name, err)
	}
	if err := rep.check(data); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &rep, nil
}

// required is the part of a row whose absence Row's zero values would
// hide: a row without a size or a time is not a measurement.
type required struct {
	Rows []struct {
		Bytes  *int64   `json:"bytes"`
		Count  *int64   `json:"count"`
		TimeUs *float64 `json:"time_us"`
	} `json:"rows"`
}

func (rep *Report) check(data []byte) error {
	if rep.NRanks < 1 || rep.NRanks > 1<<20 {
		return fmt.Errorf("nranks %d: want a positive rank count (is this a \"run gpu --json\" file?)", rep.NRanks)
	}
	if len(rep.Rows) == 0 {
		return fmt.Errorf("no rows")
	}
	if len(rep.Rows) > MaxRows {
		return fmt.Errorf("%d rows, more than %d", len(rep.Rows), MaxRows)
	}
	if k := rep.Kernel; k != nil {
		if err := k.Validate(); err != nil {
			return fmt.Errorf("kernel: %w", err)
		}
	}
	if len(rep.Revision) > 64 || strings.ContainsFunc(rep.Revision, func(r rune) bool { return r < ' ' || r > '~' }) {
		return fmt.Errorf("twinccl_revision %.80q: want a commit (printable, at most 64 characters)", rep.Revision)
	}
	for k := range rep.NCCLEnv {
		if !strings.HasPrefix(k, "NCCL_") {
			return fmt.Errorf("nccl_env: %q is not an NCCL_* setting", k)
		}
	}
	if len(rep.GPUs) > rep.NRanks {
		return fmt.Errorf("gpus: %d GPUs for %d ranks", len(rep.GPUs), rep.NRanks)
	}
	if rep.Hosts < 0 || rep.Hosts > rep.NRanks || rep.Hosts > 0 && rep.NRanks%rep.Hosts != 0 {
		return fmt.Errorf("hosts %d: want a divisor of the %d ranks", rep.Hosts, rep.NRanks)
	}
	probe := func(where string, p NetProbe) error {
		if !p.Valid() {
			return fmt.Errorf("%s: latency_us %v, both_ways_GBps %v: want a positive latency below a second and a throughput from 0 (not measured) to 1e6",
				where, p.LatencyUs, p.BothWaysGBps)
		}
		return nil
	}
	for i, p := range rep.NetProbe {
		if err := probe(fmt.Sprintf("net_probe %d", i), p); err != nil {
			return err
		}
	}
	var req required
	if err := json.Unmarshal(data, &req); err != nil { // decoded once already: cannot fail differently
		return err
	}
	for i, r := range rep.Rows {
		if q := req.Rows[i]; q.Bytes == nil || q.Count == nil || q.TimeUs == nil {
			return fmt.Errorf("row %d: want op, bytes, count and time_us", i)
		}
		if r.NetProbe != nil {
			if err := probe(fmt.Sprintf("row %d: net_probe", i), *r.NetProbe); err != nil {
				return err
			}
		}
		if r.Wrong < 0 || r.NCCLWrong < 0 {
			return fmt.Errorf("row %d: wrong %d, nccl_wrong %d: want a count of wrong elements (0 or more)", i, r.Wrong, r.NCCLWrong)
		}
	}
	return nil
}
