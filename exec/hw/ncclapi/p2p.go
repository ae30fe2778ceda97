package ncclapi

import (
	"encoding/binary"
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
)

// runP2P runs a group's sends and receives of this communicator. On one
// rank they are copies: the k-th send to self goes to the k-th receive.
// On several, every rank's tasks are gathered over the bootstrap (a
// Program describes every rank's part, and all ranks must prepare the same
// ones), so every rank of the communicator must call ncclGroupEnd with
// its sends and receives, possibly none, where NCCL only needs the peers.
func (c *Comm) runP2P(calls []Call) error {
	if c.NRanks == 1 {
		return c.p2pOneRank(calls)
	}
	stream := calls[0].Stream
	var sendBase, recvBase uintptr
	for _, k := range calls {
		if k.Stream != stream {
			return errorf(InvalidUsage, "%s: the sends and receives of one group must use one stream (twinccl fuses them into one launch)", c)
		}
		if k.Count == 0 {
			continue
		}
		if k.Coll == model.CollSend && (sendBase == 0 || k.Send < sendBase) {
			sendBase = k.Send
		}
		if k.Coll == model.CollRecv && (recvBase == 0 || k.Recv < recvBase) {
			recvBase = k.Recv
		}
	}
	// Tasks in bytes from the lowest buffer of each side: 1 byte of kind,
	// then peer, count and offset (8 bytes each).
	var mine []byte
	for _, k := range calls {
		if k.Count == 0 {
			continue
		}
		n, _, _ := k.bytes(c.NRanks)
		kind, off := byte(0), uint64(0)
		if k.Coll == model.CollSend {
			kind, off = 1, uint64(k.Send-sendBase)
		} else {
			_, n, _ = k.bytes(c.NRanks)
			off = uint64(k.Recv - recvBase)
		}
		mine = append(mine, kind)
		mine = binary.LittleEndian.AppendUint64(mine, uint64(k.Root))
		mine = binary.LittleEndian.AppendUint64(mine, n)
		mine = binary.LittleEndian.AppendUint64(mine, off)
	}
	all, err := c.boot.AllGather(mine)
	if err != nil {
		return fmt.Errorf("%s: gather the group's sends and receives: %w", c, err)
	}
	var tasks []model.P2PTask
	var key []byte
	var maxBytes int64
	for r, b := range all {
		if len(b)%25 != 0 {
			return errorf(InternalError, "%s: rank %d sent %d bytes of tasks", c, r, len(b))
		}
		for i := 0; i < len(b); i += 25 {
			t := model.P2PTask{Rank: r, Send: b[i] == 1, Peer: int(binary.LittleEndian.Uint64(b[i+1:])),
				Count: int64(binary.LittleEndian.Uint64(b[i+9:])), Offset: int64(binary.LittleEndian.Uint64(b[i+17:]))}
			tasks = append(tasks, t)
			maxBytes = max(maxBytes, t.Count)
		}
		key = binary.LittleEndian.AppendUint32(key, uint32(len(b)))
		key = append(key, b...)
	}
	if len(tasks) == 0 {
		return nil
	}
	pk := progKey{coll: model.CollSendRecv, p2p: string(key)}
	l, ok := c.launches[pk]
	if !ok {
		plan := c.res.Plan
		_, chMax := model.P2PChannelRange(c.NRanks, plan.P2PChannels, plan.P2PChannelsPerPeer)
		proto := model.P2PProtocol(maxBytes, chMax, plan.NNodes > 1, false)
		p, err := model.GenerateP2PProgram(plan, tasks, proto, model.DtypeUint8, model.P2POptions{})
		if err != nil {
			return errorf(InvalidUsage, "%s: the group's sends and receives do not match: %v", c, err)
		}
		if l, err = c.dev.Prepare(p, false); err != nil {
			return fmt.Errorf("%s: sends and receives: %w", c, err)
		}
		c.launches[pk] = l
	}
	if sendBase == 0 {
		sendBase = recvBase
	}
	if recvBase == 0 {
		recvBase = sendBase
	}
	if err := c.ordered(stream); err != nil {
		return err
	}
	if err := l.Enqueue(c.stream(stream), cuda.DevicePtr(sendBase), cuda.DevicePtr(recvBase)); err != nil {
		return fmt.Errorf("%s: sends and receives: %w", c, err)
	}
	c.launchedOn(l, stream)
	return nil
}

// p2pOneRank pairs a one-rank group's sends with its receives, in order.
func (c *Comm) p2pOneRank(calls []Call) error {
	var sends, recvs []Call
	for _, k := range calls {
		if k.Coll == model.CollSend {
			sends = append(sends, k)
		} else {
			recvs = append(recvs, k)
		}
	}
	if len(sends) != len(recvs) {
		return errorf(InvalidUsage, "%s: %d sends to self and %d receives from self in one group: each send needs its receive in the same group", c, len(sends), len(recvs))
	}
	for i, s := range sends {
		r := recvs[i]
		sb, _, _ := s.bytes(1)
		_, rb, _ := r.bytes(1)
		if sb != rb {
			return errorf(InvalidUsage, "%s: send %d to self has %d bytes, its receive %d", c, i, sb, rb)
		}
		if sb == 0 || s.Send == r.Recv {
			continue
		}
		if err := c.ctx.MemcpyDtoDAsync(cuda.DevicePtr(r.Recv), cuda.DevicePtr(s.Send), sb, c.stream(r.Stream)); err != nil {
			return fmt.Errorf("%s: send to self: %w", c, err)
		}
	}
	return nil
}
