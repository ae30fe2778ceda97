package cuda

// ExternalStream wraps a stream created elsewhere in the process (an
// application's cudaStream_t, which is its CUstream) so that work can be
// enqueued on it, as NCCL's API enqueues on the caller's stream: 0 is the
// legacy default stream, 2 the per-thread default stream. The stream stays
// the caller's: never Destroy it through the wrapper.
func (c *Context) ExternalStream(h uintptr) *Stream { return &Stream{ctx: c, h: h} }
