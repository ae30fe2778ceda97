package profiler

// Handle is what the plugin returns NCCL for an event it records; 0 means
// no event (NCCL then makes no further call about it). Handles are record
// numbers plus one, checked on every use, so that a handle that is not
// the recorder's (a parent of another process) is ignored, never followed.
type Handle uint64

// Flags of a handle, which the plugin's C side reads to save NCCL's
// threads a call into Go where the recorder has nothing to do.
const (
	// KernelFlag marks the handle of a kernel channel event: its call's
	// handle with this bit set (channels fold into their call's record).
	// Its stop needs no call when the channel's end came with a GPU time
	// (ABI versions 4 and 5).
	KernelFlag Handle = 1 << 62
	// NoStopFlag marks a handle whose stop the recorder ignores (API
	// events: their start is the call's enqueue time).
	NoStopFlag Handle = 1 << 61
)

// Context is one communicator's profiler context (its number plus one).
type Context uint64

// Event is one startEvent descriptor, whatever ABI version it came in.
type Event struct {
	HostNs    int64 // CLOCK_MONOTONIC when NCCL called the plugin
	Type      uint32
	Rank      int32
	Parent    Handle
	CommHash  uint64 // versions 1-3 only
	SeqNumber uint64
	Func      string // NCCL's names: "AllReduce", "ncclFloat32", "RING", "SIMPLE" (may alias C memory: not kept)
	Datatype  string
	Algo      string
	Proto     string
	RedOp     string
	Count     uint64
	Root      int32
	Peer      int32
	NChannels int32
	Stream    uint64
	Channel   int32
	PTimer    uint64 // GPU %globaltimer of a kernel channel's start
	IsSend    bool
	NSteps    int32
	ChunkSize int32
	Step      int32
	Foreign   bool // a proxy operation of another process
}
