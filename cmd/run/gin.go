package main

import (
	"encoding/binary"
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gin"
	"github.com/twinccl/twinccl/exec/hw/nccl"
)

// run gpu --op alltoall runs GIN's all-to-all example (exec/hw/gin over
// its proxy backend) as our side and grouped ncclSend/ncclRecv as NCCL's,
// like nccl-tests' alltoall: a size is one rank's whole send buffer, a
// slice of size/n bytes for every rank.

// ginSignal is the signal the all-to-all counts on.
const ginSignal = 0

// initGIN creates the rank's GIN communicator and registers the input
// (send) and output (receive) buffers as windows 0 and 1.
func (j *gpuJob) initGIN() error {
	var err error
	if j.gin, err = gin.New(j.comm, j.ctx, gin.Options{Timeout: j.o.timeout, Log: j.e.log}); err != nil {
		return err
	}
	for i, p := range []cuda.DevicePtr{j.in, j.out} {
		w, err := j.gin.RegisterWindow(p, j.bufBytes)
		if err != nil {
			return fmt.Errorf("rank %d: GIN window: %w", j.rank, err)
		}
		if w != i {
			return fmt.Errorf("rank %d: GIN window %d, want %d", j.rank, w, i)
		}
	}
	return nil
}

// a2aWord is 32-bit word i of rank r's send buffer: every word of every
// rank differs, so a misplaced slice shows.
func a2aWord(r int, i int64) uint32 {
	return uint32(r)*0x9e3779b9 ^ uint32(i)*2654435761 ^ uint32(i>>32)
}

// fillAllToAll writes this rank's pattern into bytes bytes of the send
// buffer and poisons the receive buffer.
func (j *gpuJob) fillAllToAll(bytes uint64) error {
	if uint64(len(j.hostIn)) < bytes {
		j.hostIn = make([]byte, bytes)
	}
	b := j.hostIn[:bytes]
	for i := int64(0); i < int64(bytes)/4; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], a2aWord(j.rank, i))
	}
	if bytes == 0 {
		return nil
	}
	if err := j.ctx.MemcpyHtoD(j.in, b); err != nil {
		return fmt.Errorf("rank %d: copy the input: %w", j.rank, err)
	}
	if err := j.ctx.MemsetD8(j.out, 0xa5, bytes); err != nil {
		return fmt.Errorf("rank %d: clear the output: %w", j.rank, err)
	}
	// Done on the legacy stream, which the GIN stream does not wait for
	// (see fillInput).
	if err := j.ctx.Synchronize(); err != nil {
		return fmt.Errorf("rank %d: prepare the buffers: %w", j.rank, err)
	}
	return nil
}

// countWrongAllToAll counts the elements of the receive buffer that are
// not what rank p sent this rank: slice p of rank p's buffer at slice
// index j.rank.
func (j *gpuJob) countWrongAllToAll(slice uint64) (int64, error) {
	total := slice * uint64(j.n)
	if uint64(len(j.hostOut)) < total {
		j.hostOut = make([]byte, total)
	}
	out := j.hostOut[:total]
	if total == 0 {
		return 0, nil
	}
	if err := j.ctx.MemcpyDtoH(out, j.out); err != nil {
		return 0, fmt.Errorf("rank %d: copy the output back: %w", j.rank, err)
	}
	es := uint64(j.o.dt.Size())
	var wrong int64
	for p := 0; p < j.n; p++ {
		got := out[uint64(p)*slice:][:slice]
		base := int64(uint64(j.rank) * slice / 4)
		for e := uint64(0); e < slice; e += es {
			for k := e; k < e+es; k++ {
				w := a2aWord(p, base+int64(k/4))
				if got[k] != byte(w>>(8*(k%4))) {
					wrong++
					break
				}
			}
		}
	}
	return wrong, nil
}

// runAllToAll checks (with -c 1) and times the GIN all-to-all, then
// NCCL's, for slices of count elements.
func (j *gpuJob) runAllToAll(size, count int64) (ours, theirs timing, chunks int, err error) {
	slice := uint64(count) * uint64(j.o.dt.Size())
	total := slice * uint64(j.n)
	if total > j.bufBytes {
		return ours, theirs, 0, fmt.Errorf("rank %d: %d bytes: all-to-all needs %d bytes of buffers, %d allocated", j.rank, size, total, j.bufBytes)
	}
	a, err := j.gin.NewAllToAll(0, 1, slice, 0, ginSignal)
	if err != nil {
		return ours, theirs, 0, fmt.Errorf("rank %d: %d bytes: %w", j.rank, size, err)
	}
	defer a.Release()
	chunks = a.Chunks()
	s := j.dev.Stream()
	enqueue := func() error { return a.Enqueue(s) }
	run := func(what string, enqueue, status func() error, sync *cuda.Stream) (timing, error) {
		var t timing
		if j.o.check > 0 {
			if err := j.fillAllToAll(total); err != nil {
				return t, err
			}
			if err := enqueue(); err != nil {
				return t, fmt.Errorf("%s, %d bytes: %w", what, size, err)
			}
			if err := sync.Synchronize(); err != nil {
				return t, fmt.Errorf("rank %d: %s, %d bytes: %w", j.rank, what, size, err)
			}
			if err := status(); err != nil {
				return t, fmt.Errorf("%s, %d bytes: %w", what, size, err)
			}
			if t.wrong, err = j.countWrongAllToAll(slice); err != nil {
				return t, err
			}
		}
		var err error
		t.reps, err = j.timeLoop(sync, j.o.itersFor(size), enqueue, status, nil)
		if err != nil {
			return t, fmt.Errorf("%s, %d bytes: %w", what, size, err)
		}
		return t, nil
	}
	j.faultPoint(size, "ours")
	if ours, err = run("GIN all-to-all", enqueue, a.Check, s); err != nil {
		return ours, theirs, chunks, err
	}
	if j.nc != nil {
		j.faultPoint(size, "nccl")
		dt := nccl.DataType(j.o.dt)
		ncclA2A := func() error {
			return j.lib.Group(func() error {
				for p := 0; p < j.n; p++ {
					off := uint64(p) * slice
					if err := j.nc.Send(j.in.Add(off), uint64(count), dt, p, j.ncs); err != nil {
						return err
					}
					if err := j.nc.Recv(j.out.Add(off), uint64(count), dt, p, j.ncs); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if theirs, err = run("NCCL", ncclA2A, j.nc.AsyncError, j.ncs); err != nil {
			return ours, theirs, chunks, err
		}
	}
	return ours, theirs, chunks, nil
}
