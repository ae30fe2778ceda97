package main

import (
	"fmt"
	"time"

	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/model"
)

// benchDevice is the device side of one rank's benchmark loop: the loop
// (benchSize) owns the sweep, the data patterns, the checks, the timing
// and the traces, and a backend only moves bytes. The host device
// (hostBench) is one backend; a GPU backend plugs in behind the same
// methods (buffers in device memory, Launch enqueuing the Program on a
// stream, Sync waiting for it).
type benchDevice interface {
	// Name is the backend's name for the table header ("host", "cuda").
	Name() string
	// Alloc provides the input and output buffers of the next calls
	// (inBytes and outBytes bytes), reusing earlier ones where it can.
	Alloc(inBytes, outBytes int64) error
	// SetInput copies host into the input buffer (len(host) == inBytes).
	SetInput(host []byte) error
	// ClearOutput zeroes the output buffer.
	ClearOutput() error
	// GetOutput copies the output buffer into host (len == outBytes),
	// after Sync.
	GetOutput(host []byte) error
	// Launch starts one call of p on the buffers. A synchronous backend
	// runs it to the end; an asynchronous one enqueues it. Either fills
	// rec (start and end times; with rec.Events set, one event per
	// slice) by the time Sync returns.
	Launch(p *model.Program, rec *callRecord) error
	// Sync waits until every launched call completed.
	Sync() error
	// Close releases the buffers (not the job: the loop owns that).
	Close() error
}

// callRecord is what a backend measures of one call.
type callRecord struct {
	Start, End time.Time
	// Events, when true, asks for slice events in Slices.
	Events bool
	Slices []hostdev.SliceEvent
}

// hostBench runs Programs on the host device of a rank (synchronously:
// Launch returns when the rank's part of the call is done).
type hostBench struct {
	r       *hostdev.Rank
	in, out []byte
	rec     *callRecord
}

// newHostBench returns the backend of rank r; with trace, the device
// reports its slices (otherwise it does not even read the clock).
func newHostBench(r *hostdev.Rank, trace bool) *hostBench {
	b := &hostBench{r: r}
	if trace {
		r.Device.Trace = func(ev hostdev.SliceEvent) {
			if b.rec != nil && b.rec.Events {
				b.rec.Slices = append(b.rec.Slices, ev)
			}
		}
	}
	return b
}

func (b *hostBench) Name() string { return "host" }

func (b *hostBench) Alloc(in, out int64) error {
	if in < 0 || out < 0 {
		return fmt.Errorf("host device: buffers of %d/%d bytes", in, out)
	}
	if int64(cap(b.in)) < in {
		b.in = make([]byte, in)
	}
	if int64(cap(b.out)) < out {
		b.out = make([]byte, out)
	}
	b.in, b.out = b.in[:in], b.out[:out]
	return nil
}

func (b *hostBench) SetInput(host []byte) error {
	if len(host) != len(b.in) {
		return fmt.Errorf("host device: input of %d bytes for a %d-byte buffer", len(host), len(b.in))
	}
	copy(b.in, host)
	return nil
}

func (b *hostBench) ClearOutput() error { clear(b.out); return nil }

func (b *hostBench) GetOutput(host []byte) error {
	if len(host) != len(b.out) {
		return fmt.Errorf("host device: output of %d bytes for a %d-byte buffer", len(host), len(b.out))
	}
	copy(host, b.out)
	return nil
}

func (b *hostBench) Launch(p *model.Program, rec *callRecord) error {
	b.rec = rec
	defer func() { b.rec = nil }()
	rec.Start = time.Now()
	_, err := b.r.Device.Run(p, b.in, b.out)
	rec.End = time.Now()
	return err
}

func (b *hostBench) Sync() error { return nil }

func (b *hostBench) Close() error {
	b.in, b.out = nil, nil
	b.r.Device.Trace = nil
	return nil
}
