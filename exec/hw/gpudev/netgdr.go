package gpudev

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/model"
)

// NetGDR is NCCL's GPUDirect RDMA decision for a net connection: whether
// the sender's NIC reads the GPU's memory (Send) and the receiver's
// writes it (Recv), as model.Conn decides them (the simulator routes by
// the same), and the receiver's flush rule (ib.NeedFlushFor). The ib
// plugin carries either kind of end (IsendDevice, IrecvDevice, Iflush);
// the proxy's connections still stage every slice through host memory.
type NetGDR struct {
	Send, Recv bool
	Flush      ib.FlushMode
}

// NetGDRFor is the decision for the connection from rank from to rank to
// on channel of the cluster.
func NetGDRFor(cl *model.Cluster, from, to, channel int) (NetGDR, error) {
	c, err := cl.Conn(from, to, channel)
	if err != nil {
		return NetGDR{}, err
	}
	if c.Transport != model.TransportNET {
		return NetGDR{}, fmt.Errorf("gpudev: ranks %d and %d connect over %s, not NET", from, to, c.Transport)
	}
	g := NetGDR{Send: c.SendGDR, Recv: c.RecvGDR}
	if g.Recv {
		sys := cl.Nodes[cl.NodeOfRank(to)].System
		if g.Flush, err = ib.NeedFlushFor(sys, sys.GPUByRank(to), c.RecvNIC); err != nil {
			return NetGDR{}, fmt.Errorf("gpudev: connection %d->%d: %w", from, to, err)
		}
	}
	return g, nil
}
