package gpudev

import (
	"cmp"
	"fmt"
	"os"
	"slices"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
)

// Copy launches. NCCL 2.28.9 runs a collective of a one-rank communicator
// without a kernel: taskAppend (src/enqueue.cc) hands it to
// ncclLaunchOneRank (src/device/onerank.cu), which enqueues one
// cudaMemcpyAsync from the send to the receive buffer on the call's stream,
// or nothing when they are one buffer. A Program does the same where every
// lane of the rank only copies its input to its output (model.PrimCopy,
// no connections): a one-rank collective, a one-rank AlltoAll, a group of
// sends and receives to self. Prepare then turns the rank's part into
// device-to-device copies (copyPlan) and Enqueue issues them on the stream
// with cuMemcpyDtoDAsync (which a CUDA graph captures as a memcpy node),
// skipping those whose source and destination coincide (in place).
//
// Where NCCL differs: an ncclAvg of a floating-point type becomes
// ncclDevPreMulSum by 1/nRanks (hostToDevRedOp), for which
// ncclLaunchOneRank launches its oneRankReduce kernel (in place too);
// multiplying by 1 leaves every value as it is, so a copy gives the same
// result. And NCCL moves a send to self in its p2p kernel.

// copySeg is one device-to-device copy of a copy launch: n bytes from byte
// offset in of the input buffer to byte offset out of the output buffer.
type copySeg struct{ in, out, n int64 }

// addrs are the copy's destination and source for buffers in and out.
func (c copySeg) addrs(in, out cuda.DevicePtr) (dst, src cuda.DevicePtr) {
	return out.Add(uint64(c.out)), in.Add(uint64(c.in))
}

// localCopy reports whether Prepare may turn copy-only Programs into copy
// launches: unless TWINCCL_LOCAL_COPY=0, which runs them through the
// interpreter kernel like any other (to exercise its copy primitive).
func localCopy() bool { return os.Getenv("TWINCCL_LOCAL_COPY") != "0" }

// copyPlan reports whether rank me's part of p is a plain copy of its input
// to its output, and if so lists the copies, merged where contiguous: every
// lane of the rank has no connection and only model.PrimCopy calls (or
// nops) whose post operation, if any, leaves values as they are (avg
// divides by the rank count: by 1 on one rank). A rank without lanes is a
// copy of nothing.
func copyPlan(p *model.Program, me int) ([]copySeg, bool) {
	es := int64(p.Dtype.Size())
	if es <= 0 {
		return nil, false
	}
	identity := p.Op != model.RedAvg || p.NRanks == 1
	var segs []copySeg
	for li := range p.Lanes {
		ln := &p.Lanes[li]
		if int(ln.Rank) != me {
			continue
		}
		if len(ln.Recv) > 0 || len(ln.Send) > 0 {
			return nil, false
		}
		for _, op := range ln.Ops {
			switch {
			case op.Kind == model.PrimNop:
				continue
			case op.Kind != model.PrimCopy:
				return nil, false
			case op.Flags&^(model.PrimPostOp|model.PrimDirect) != 0:
				return nil, false
			case op.Flags&model.PrimPostOp != 0 && !identity:
				return nil, false
			case op.InOff < 0 || op.OutOff < 0:
				return nil, false
			}
			if op.N > 0 {
				segs = append(segs, copySeg{in: op.InOff * es, out: op.OutOff * es, n: int64(op.N) * es})
			}
		}
	}
	return mergeCopies(segs), true
}

// mergeCopies orders segs by destination and joins each copy that continues
// the previous one in both buffers.
func mergeCopies(segs []copySeg) []copySeg {
	slices.SortStableFunc(segs, func(a, b copySeg) int { return cmp.Compare(a.out, b.out) })
	out := segs[:0]
	for _, s := range segs {
		if k := len(out) - 1; k >= 0 && out[k].in+out[k].n == s.in && out[k].out+out[k].n == s.out {
			out[k].n += s.n
			continue
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Copy reports whether the launch runs as device-to-device copies on the
// stream, without a kernel (as NCCL runs a one-rank collective): callers
// that show the algorithm can name it "Copy".
func (l *Launch) Copy() bool { return l.copy }

// enqueueCopies issues the copy launch's copies on s.
func (l *Launch) enqueueCopies(s *cuda.Stream, in, out cuda.DevicePtr) error {
	for _, c := range l.copies {
		dst, src := c.addrs(in, out)
		if dst == src {
			continue
		}
		if err := l.d.ctx.MemcpyDtoDAsync(dst, src, uint64(c.n), s); err != nil {
			return fmt.Errorf("gpudev rank %d: copy: %w", l.d.comm.Rank(), err)
		}
	}
	return nil
}
