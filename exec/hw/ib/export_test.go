package ib

import (
	"net"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"

	"github.com/twinccl/twinccl/exec/hw/transport"
)

// CtlConn is the control socket of a send or receive comm (tests play a
// misbehaving peer on it).
func CtlConn(c any) net.Conn {
	switch x := c.(type) {
	case *sendComm:
		return x.e.ctl
	case *recvComm:
		return x.e.ctl
	}
	return nil
}

// QPs are the data queue pairs of a send or receive comm.
func QPs(c any) []verbs.QP {
	switch x := c.(type) {
	case *sendComm:
		return x.e.qps
	case *recvComm:
		return x.e.qps
	}
	return nil
}

var _ transport.SendComm = (*sendComm)(nil)
