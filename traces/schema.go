package traces

import (
	"fmt"
	"strconv"
	"strings"
)

// Schema versions and the parquet key-value metadata that carries them.
//
// Every trace file written by this package carries MetaKind ("call" or
// "event") and MetaVersion ("MAJOR.MINOR"). A reader accepts any minor
// version of the major version it knows (minor versions only add columns)
// and rejects other major versions with an error naming both versions.
const (
	// SchemaMajor is the major version of the call and event schemas.
	SchemaMajor = 1
	// SchemaMinor is the minor version written by this build (1: event
	// rows have data_ns).
	SchemaMinor = 1

	// MetaKind is the metadata key naming the kind of rows in a file.
	MetaKind = "twinccl.trace.kind"
	// MetaVersion is the metadata key holding the schema version "MAJOR.MINOR".
	MetaVersion = "twinccl.trace.version"
	// MetaSort is the metadata key describing the sort order inside each row group.
	MetaSort = "twinccl.trace.sort"
	// MetaIndex is the metadata key holding the row-group index (JSON, see RowGroupInfo).
	MetaIndex = "twinccl.trace.index"
	// metaReserved begins every metadata key the package writes itself;
	// WriterOptions.Metadata may not use it.
	metaReserved = "twinccl.trace."
	// MetaNCCLEnv is the metadata key of the NCCL_* settings the traced
	// run was made under (a JSON object, as "run gpu --json"'s nccl_env):
	// "replay compare" simulates the trace under them.
	MetaNCCLEnv = "twinccl.nccl_env"
)

// Kind is the kind of rows a trace file holds.
type Kind string

// Trace kinds.
const (
	KindCall  Kind = "call"
	KindEvent Kind = "event"
)

// Sources of a trace row.
const (
	SourceHW  = "hw"  // measured on real hardware
	SourceSim = "sim" // predicted by the simulator
)

// CallRow is one collective (or point-to-point) call as seen by one rank.
//
// Names follow model: Op is a model.Collective name ("AllReduce"), Algorithm
// a model.Algorithm name ("Ring"), Protocol a model.Protocol name ("Simple").
// Times are nanoseconds on the rank's clock (hw) or in virtual time (sim).
type CallRow struct {
	Job       string `parquet:"job,dict"`       // job or run name, free text
	Comm      uint64 `parquet:"comm"`           // communicator id (NCCL commId hash)
	Call      int64  `parquet:"call"`           // sequence number of the call on its communicator (NCCL opCount)
	Rank      int32  `parquet:"rank"`           // rank in the communicator
	NRanks    int32  `parquet:"nranks"`         // ranks in the communicator
	Op        string `parquet:"op,dict"`        // model.Collective name
	Algorithm string `parquet:"algorithm,dict"` // model.Algorithm name, "" if not known
	Protocol  string `parquet:"protocol,dict"`  // model.Protocol name, "" if not known
	Channels  int32  `parquet:"channels"`       // channels the call ran on, 0 if not known
	Count     int64  `parquet:"count"`          // element count (per rank, as passed to NCCL)
	Datatype  string `parquet:"datatype,dict"`  // element type, NCCL's name without the prefix: "float32", "bfloat16", ...
	RedOp     string `parquet:"redop,dict"`     // reduction: "sum", "prod", "max", "min", "avg"; "" if none
	Root      int32  `parquet:"root"`           // root (Broadcast, Reduce) or peer (Send, Recv) rank; -1 if none
	Stream    uint64 `parquet:"stream"`         // stream id or handle, 0 if not known
	EnqueueNs int64  `parquet:"enqueue_ns"`     // when the host enqueued the call
	StartNs   int64  `parquet:"start_ns"`       // when the kernel started
	EndNs     int64  `parquet:"end_ns"`         // when the kernel ended
	Source    string `parquet:"source,dict"`    // SourceHW or SourceSim
	Host      string `parquet:"host,dict"`      // host name of the rank
}

// EventRow is one primitive step of one rank on one channel.
//
// A step may receive from one peer and send to another (recvReduceSend);
// SendPeer and RecvPeer are -1 where the step does not send or receive.
// Step numbers a rank's steps on one channel of one call in execution
// order; the k-th step sending from a to b on a channel pairs with the k-th
// step of b receiving from a there (connection FIFO order).
type EventRow struct {
	Comm      uint64 `parquet:"comm"`           // communicator id, as in CallRow
	Call      int64  `parquet:"call"`           // the call this step belongs to (CallRow.Call)
	Rank      int32  `parquet:"rank"`           // rank executing the step
	Channel   int32  `parquet:"channel"`        // channel index
	SendPeer  int32  `parquet:"send_peer"`      // rank the step sends to, -1 if none
	RecvPeer  int32  `parquet:"recv_peer"`      // rank the step receives from, -1 if none
	Primitive string `parquet:"primitive,dict"` // NCCL primitive name: "send", "recvReduceSend", ...
	Protocol  string `parquet:"protocol,dict"`  // model.Protocol name
	Step      int64  `parquet:"step"`           // step index in the rank's program for this call and channel
	Bytes     int64  `parquet:"bytes"`          // payload bytes moved by the step
	StartNs   int64  `parquet:"start_ns"`       // step start, before it waits for its data and credits
	EndNs     int64  `parquet:"end_ns"`         // step end
	Source    string `parquet:"source,dict"`    // SourceHW or SourceSim
	// DataNs is when the step's data and send credits were there (its
	// wait ended: StartNs <= DataNs <= EndNs); 0 where the file does not
	// have it (schema 1.0) or the step was not stamped so.
	DataNs int64 `parquet:"data_ns"`
}

// Version is a schema version.
type Version struct {
	Major, Minor int
}

// CurrentVersion is the schema version this build writes.
var CurrentVersion = Version{SchemaMajor, SchemaMinor}

func (v Version) String() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// ParseVersion reads "MAJOR.MINOR".
func ParseVersion(s string) (Version, error) {
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, fmt.Errorf("schema version %q: want MAJOR.MINOR", s)
	}
	a, err1 := strconv.ParseUint(maj, 10, 16)
	b, err2 := strconv.ParseUint(min, 10, 16)
	if err1 != nil || err2 != nil {
		return Version{}, fmt.Errorf("schema version %q: want MAJOR.MINOR", s)
	}
	return Version{int(a), int(b)}, nil
}

// checkVersion accepts every minor version of SchemaMajor.
func checkVersion(s string) (Version, error) {
	v, err := ParseVersion(s)
	if err != nil {
		return v, err
	}
	if v.Major != SchemaMajor {
		return v, fmt.Errorf("trace schema version %s is not supported: this build reads %d.x (written by a %s build of twinccl; convert it or use a matching twinccl)",
			v, SchemaMajor, map[bool]string{true: "newer", false: "older"}[v.Major > SchemaMajor])
	}
	return v, nil
}

// columnSpec is a column a reader requires: its name and physical type.
type columnSpec struct {
	name string
	kind string // parquet physical type name as parquet-go's Kind.String prints it
	// since says a minor version added the column: files of older minor
	// versions may lack it
	since bool
}

var callColumns = []columnSpec{
	{name: "job", kind: "BYTE_ARRAY"}, {name: "comm", kind: "INT64"}, {name: "call", kind: "INT64"},
	{name: "rank", kind: "INT32"}, {name: "nranks", kind: "INT32"}, {name: "op", kind: "BYTE_ARRAY"},
	{name: "algorithm", kind: "BYTE_ARRAY"}, {name: "protocol", kind: "BYTE_ARRAY"}, {name: "channels", kind: "INT32"},
	{name: "count", kind: "INT64"}, {name: "datatype", kind: "BYTE_ARRAY"}, {name: "redop", kind: "BYTE_ARRAY"},
	{name: "root", kind: "INT32"}, {name: "stream", kind: "INT64"}, {name: "enqueue_ns", kind: "INT64"},
	{name: "start_ns", kind: "INT64"}, {name: "end_ns", kind: "INT64"}, {name: "source", kind: "BYTE_ARRAY"},
	{name: "host", kind: "BYTE_ARRAY"},
}

var eventColumns = []columnSpec{
	{name: "comm", kind: "INT64"}, {name: "call", kind: "INT64"}, {name: "rank", kind: "INT32"}, {name: "channel", kind: "INT32"},
	{name: "send_peer", kind: "INT32"}, {name: "recv_peer", kind: "INT32"}, {name: "primitive", kind: "BYTE_ARRAY"},
	{name: "protocol", kind: "BYTE_ARRAY"}, {name: "step", kind: "INT64"}, {name: "bytes", kind: "INT64"},
	{name: "start_ns", kind: "INT64"}, {name: "end_ns", kind: "INT64"}, {name: "source", kind: "BYTE_ARRAY"},
	{name: "data_ns", kind: "INT64", since: true},
}

// callLess orders calls inside a row group: rank, comm, call, start.
func callLess(a, b *CallRow) int {
	switch {
	case a.Rank != b.Rank:
		return cmp3(int64(a.Rank), int64(b.Rank))
	case a.Comm != b.Comm:
		if a.Comm < b.Comm {
			return -1
		}
		return 1
	case a.Call != b.Call:
		return cmp3(a.Call, b.Call)
	default:
		return cmp3(a.StartNs, b.StartNs)
	}
}

// eventLess orders events inside a row group: rank, comm, call, channel, step, start.
func eventLess(a, b *EventRow) int {
	switch {
	case a.Rank != b.Rank:
		return cmp3(int64(a.Rank), int64(b.Rank))
	case a.Comm != b.Comm:
		if a.Comm < b.Comm {
			return -1
		}
		return 1
	case a.Call != b.Call:
		return cmp3(a.Call, b.Call)
	case a.Channel != b.Channel:
		return cmp3(int64(a.Channel), int64(b.Channel))
	case a.Step != b.Step:
		return cmp3(a.Step, b.Step)
	default:
		return cmp3(a.StartNs, b.StartNs)
	}
}

func cmp3(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

const (
	callSortOrder  = "rank,comm,call,start_ns"
	eventSortOrder = "rank,comm,call,channel,step,start_ns"
)

// DatatypeSize returns the size in bytes of one element of the named
// datatype (NCCL's names, with or without the "nccl" prefix, any case), and
// false for unknown names.
func DatatypeSize(name string) (int, bool) {
	n := strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(name, "nccl"), "Nccl"))
	switch n {
	case "int8", "char", "uint8", "float8e4m3", "float8e5m2", "fp8e4m3", "fp8e5m2", "i8", "u8":
		return 1, true
	case "float16", "half", "bfloat16", "bf16", "f16", "fp16":
		return 2, true
	case "int32", "int", "uint32", "float32", "float", "f32", "fp32", "i32", "u32":
		return 4, true
	case "int64", "uint64", "float64", "double", "f64", "fp64", "i64", "u64":
		return 8, true
	}
	return 0, false
}
