package ncclapi

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gpudev"
	"github.com/twinccl/twinccl/model"
)

// progKey identifies a prepared launch: every rank makes the same calls in
// the same order, so every rank finds (or prepares) the same launches.
type progKey struct {
	coll    model.Collective
	count   uint64
	dtype   model.Dtype
	op      model.RedOp
	root    int
	inPlace bool
	// p2p is the group's send/receive tasks of every rank, encoded (the
	// tasks' offsets depend on the buffers, so this keys them too).
	p2p string
}

// run executes one group's calls of this communicator, in call order:
// collectives one by one; the sends and receives between two collectives
// fused into one launch, as NCCL fuses a group's point-to-point calls.
func (c *Comm) run(calls []Call) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return errorf(InvalidUsage, "%s: communicator destroyed", c)
	}
	var p2p []Call
	flush := func() error {
		if len(p2p) == 0 {
			return nil
		}
		err := c.runP2P(p2p)
		p2p = p2p[:0]
		return err
	}
	for _, k := range calls {
		if k.Coll == model.CollSend || k.Coll == model.CollRecv {
			p2p = append(p2p, k)
			continue
		}
		if err := flush(); err != nil {
			return err
		}
		if err := c.runColl(k); err != nil {
			return err
		}
	}
	return flush()
}

// stream is the caller's stream in this communicator's context.
func (c *Comm) stream(h uintptr) *cuda.Stream { return c.ctx.ExternalStream(h) }

// runColl enqueues one collective on its stream.
func (c *Comm) runColl(k Call) error {
	in, out, _ := k.bytes(c.NRanks)
	if in == 0 && out == 0 {
		return nil
	}
	if c.NRanks == 1 {
		return c.copyOneRank(k)
	}
	send, recv := k.Send, k.Recv
	if send == 0 {
		send = recv // a Broadcast's non-root rank reads nothing
	}
	if recv == 0 {
		recv = send // a Reduce's non-root rank writes nothing
	}
	l, err := c.launchFor(k)
	if err != nil {
		return err
	}
	if err := c.ordered(k.Stream); err != nil {
		return err
	}
	if err := l.Enqueue(c.stream(k.Stream), cuda.DevicePtr(send), cuda.DevicePtr(recv)); err != nil {
		return fmt.Errorf("%s: %s: %w", c, k, err)
	}
	c.launchedOn(l, k.Stream)
	return nil
}

// copyOneRank runs a one-rank communicator's collective as NCCL does
// (ncclLaunchOneRank): one device-to-device copy on the stream, nothing
// when in place. Every collective of one rank copies its count elements
// (an average divides by one).
func (c *Comm) copyOneRank(k Call) error {
	in, _, _ := k.bytes(1)
	if k.Send == k.Recv || in == 0 {
		return nil
	}
	if err := c.ctx.MemcpyDtoDAsync(cuda.DevicePtr(k.Recv), cuda.DevicePtr(k.Send), in, c.stream(k.Stream)); err != nil {
		return fmt.Errorf("%s: %s: %w", c, k, err)
	}
	return nil
}

// launchFor prepares (once) the launch of collective k: the tuner's
// algorithm, protocol and channels for its size, as run gpu chooses them,
// and the Program for them.
func (c *Comm) launchFor(k Call) (*gpudev.Launch, error) {
	dt := k.dtype()
	op := model.RedOp(k.Op)
	if !k.reduces() {
		op = model.RedSum
	}
	root := 0
	if k.Coll == model.CollBroadcast || k.Coll == model.CollReduce {
		root = k.Root
	}
	key := progKey{coll: k.Coll, count: k.Count, dtype: dt, op: op, root: root, inPlace: k.inPlace(c.Rank)}
	if l, ok := c.launches[key]; ok {
		return l, nil
	}
	var p *model.Program
	var err error
	if k.Coll == model.CollAlltoAll {
		proto := model.P2PProtocol(int64(k.Count)*int64(dt.Size()), c.res.Plan.P2PChannels, c.res.Plan.NNodes > 1, false)
		p, err = model.GenerateAlltoAllProgram(c.res.Plan, proto, int64(k.Count), dt, model.P2POptions{})
	} else {
		var algo model.Algorithm
		var proto model.Protocol
		var nch int
		if algo, proto, nch, err = c.choose(k.Coll, int64(k.Count), dt); err != nil {
			return nil, err
		}
		p, err = model.GenerateProgram(c.res.Plan, k.Coll, algo, proto, int64(k.Count), dt, op, model.ProgOptions{NChannels: nch, Root: root, InPlace: key.inPlace})
	}
	if err != nil {
		return nil, errorf(InternalError, "%s: %s: %v", c, k, err)
	}
	l, err := c.dev.Prepare(p, false)
	if err != nil {
		return nil, fmt.Errorf("%s: %s: %w", c, k, err)
	}
	c.launches[key] = l
	return l, nil
}

// choose is the tuner's algorithm, protocol and channel budget for a
// collective of count elements, moved to Ring where Programs do not cover
// the algorithm (NVLS, CollNet) and to Simple where the pair is not
// allowed, as run gpu does.
func (c *Comm) choose(coll model.Collective, count int64, dt model.Dtype) (model.Algorithm, model.Protocol, int, error) {
	ch, err := c.res.Tuning.Choose(coll, count, dt.Size())
	if err != nil {
		return 0, 0, 0, errorf(InternalError, "%s: tuner: %v", c, err)
	}
	algo, proto := ch.Algo, ch.Proto
	if !model.ProgramCovers(coll, algo, proto, c.NRanks) {
		algo = model.AlgoRing
	}
	if !model.CollAllowed(coll, algo, proto) {
		proto = model.ProtoSimple
	}
	return algo, proto, ch.NChannels, nil
}
