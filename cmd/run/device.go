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
	// (inBytes and outBytes bytes), reusing earlier ones where it can:
	// two buffers out of place (ip nil), or, in place, one buffer of
	// ip.bytes holding the input at ip.inOff and the output at ip.outOff
	// (nccl-tests' in-place layout: the input at the rank's offset of an
	// AllGather's output, the output at the rank's offset of a
	// ReduceScatter's input, else both at 0).
	Alloc(inBytes, outBytes int64, ip *inPlaceLayout) error
	// SetInput copies host into the input buffer (len(host) == inBytes).
	SetInput(host []byte) error
	// ClearOutput zeroes the output buffer (in place: the whole buffer,
	// so that SetInput must follow).
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

// inPlaceLayout places an in-place call's input and output in its one
// buffer (see benchDevice.Alloc).
type inPlaceLayout struct {
	bytes, inOff, outOff int64
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
	buf     []byte // the buffer of in-place calls, nil out of place
	rec     *callRecord
	ins     []byte // reused allocations
	outs    []byte
	bufs    []byte
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

func (b *hostBench) Alloc(in, out int64, ip *inPlaceLayout) error {
	if in < 0 || out < 0 {
		return fmt.Errorf("host device: buffers of %d/%d bytes", in, out)
	}
	if ip != nil {
		if ip.inOff < 0 || ip.outOff < 0 || ip.inOff+in > ip.bytes || ip.outOff+out > ip.bytes {
			return fmt.Errorf("host device: in-place buffer of %d bytes for an input of %d at %d and an output of %d at %d", ip.bytes, in, ip.inOff, out, ip.outOff)
		}
		if int64(cap(b.bufs)) < ip.bytes {
			b.bufs = make([]byte, ip.bytes)
		}
		b.buf = b.bufs[:ip.bytes]
		b.in, b.out = b.buf[ip.inOff:ip.inOff+in], b.buf[ip.outOff:ip.outOff+out]
		return nil
	}
	if int64(cap(b.ins)) < in {
		b.ins = make([]byte, in)
	}
	if int64(cap(b.outs)) < out {
		b.outs = make([]byte, out)
	}
	b.buf, b.in, b.out = nil, b.ins[:in], b.outs[:out]
	return nil
}

func (b *hostBench) SetInput(host []byte) error {
	if len(host) != len(b.in) {
		return fmt.Errorf("host device: input of %d bytes for a %d-byte buffer", len(host), len(b.in))
	}
	copy(b.in, host)
	return nil
}

func (b *hostBench) ClearOutput() error {
	if b.buf != nil {
		clear(b.buf)
	} else {
		clear(b.out)
	}
	return nil
}

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
	b.in, b.out, b.buf, b.ins, b.outs, b.bufs = nil, nil, nil, nil, nil, nil
	b.r.Device.Trace = nil
	return nil
}
