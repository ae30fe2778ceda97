package ncclapi

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gpudev"
)

// ordered makes a launch of this communicator on stream s start after
// the previous one, as NCCL orders all of a communicator's work: two
// launches of one communicator share its connections' step counters and
// must not run at once. On one stream (PyTorch's, nccl-tests') the
// stream orders them and this costs nothing; on another, s waits for an
// event recorded after the previous launch. Called with c.mu held.
func (c *Comm) ordered(s uintptr) error {
	if !c.launched || s == c.lastStream {
		return nil
	}
	if c.orderEv == nil {
		ev, err := c.ctx.NewEvent(cuda.EventDisableTiming)
		if err != nil {
			return fmt.Errorf("%s: order event: %w", c, err)
		}
		c.orderEv = ev
	}
	if err := c.orderEv.Record(c.stream(c.lastStream)); err != nil {
		return fmt.Errorf("%s: order after the previous launch: %w", c, err)
	}
	if err := c.stream(s).WaitEvent(c.orderEv); err != nil {
		return fmt.Errorf("%s: order after the previous launch: %w", c, err)
	}
	return nil
}

// launchedOn records the latest launch and its stream.
func (c *Comm) launchedOn(l *gpudev.Launch, s uintptr) { c.launched, c.lastStream, c.last = true, s, l }
