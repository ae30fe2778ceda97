package model

import (
	"fmt"
	"slices"
)

// Transport is how a connection moves its data (nccl-facts §7.6).
type Transport uint8

// Transports, in the order NCCL tries them for a peer (its transport
// selection: p2p, shm, then net).
const (
	TransportP2P Transport = iota // GPU to GPU over NVLink or PCIe
	TransportSHM                  // through host memory
	TransportNET                  // through proxies and NICs
)

// String returns NCCL's name of the transport.
func (t Transport) String() string {
	switch t {
	case TransportP2P:
		return "P2P"
	case TransportSHM:
		return "SHM"
	case TransportNET:
		return "NET"
	}
	return fmt.Sprintf("Transport(%d)", int(t))
}

// Conn is the decision NCCL makes for one connection (a sender rank, a
// receiver rank, a channel): the transport, and for NET the NIC of each
// end and whether each end uses GPUDirect RDMA. The simulator routes the
// connection by it and the hardware executor builds the connection by it,
// so that both run the same transports on every machine.
type Conn struct {
	From, To, Channel int
	Transport         Transport
	// Path is the type of the GPU-to-GPU path (P2P and SHM; PathNET for
	// ranks on different nodes).
	Path PathType
	// P2PRead is NCCL's read mode of a P2P connection (ncclTopoCheckP2p).
	P2PRead bool
	// SendNIC and RecvNIC are the NET ports of the channel at the sender
	// and at the receiver (NET only).
	SendNIC, RecvNIC *Node
	// SendGDR and RecvGDR say whether the sender's NIC reads the GPU's
	// memory and the receiver's writes it directly (GPUDirect RDMA); where
	// not, the data is staged through host memory (NET only).
	SendGDR, RecvGDR bool
}

// GDR says whether the connection runs GPUDirect RDMA at both ends, as
// NCCL's net transport needs to skip the host staging buffers.
func (c Conn) GDR() bool { return c.SendGDR && c.RecvGDR }

// Socket says whether a NET connection goes through NCCL's socket plugin:
// its NET devices advertise 65536 connections (maxComms), where the IB
// plugin advertises 131072 or more.
func (c Conn) Socket() bool {
	return c.Transport == TransportNET && (IsSocketNIC(c.SendNIC) || IsSocketNIC(c.RecvNIC))
}

// IsSocketNIC reports whether a NET device belongs to NCCL's socket
// plugin (65536 connections), not to an RDMA plugin.
func IsSocketNIC(n *Node) bool { return n != nil && n.NET.MaxChannels == 65536 }

// String is the connection as replay and run print it: "P2P/NVL",
// "SHM/SYS", "NET/mlx5_0->mlx5_1/GDR".
func (c Conn) String() string {
	switch c.Transport {
	case TransportNET:
		s := "NET"
		if c.SendNIC != nil && c.RecvNIC != nil {
			s += "/" + c.SendNIC.NET.Name + "->" + c.RecvNIC.NET.Name
		}
		if c.GDR() {
			s += "/GDR"
		}
		return s
	case TransportP2P, TransportSHM:
		return c.Transport.String() + "/" + c.Path.String()
	}
	return c.Transport.String()
}

// NodeOfRank is the index of the cluster node that holds rank r, or -1.
func (cl *Cluster) NodeOfRank(r int) int {
	for i, n := range cl.Nodes {
		if slices.Contains(n.Ranks, r) {
			return i
		}
	}
	return -1
}

// ConnPlanner decides connections of one cluster (Conn) with the node of
// every rank looked up once, for callers that decide many: the simulator's
// routes, the executor's links.
type ConnPlanner struct {
	cl   *Cluster
	node []int // node[r]: the cluster node of rank r, -1 for none
	// plan, when set, picks a NET connection's NICs as NCCL does for the
	// plan's rings and trees (Cluster.NetDevs, under crossNicOff);
	// without it each end takes its GPU's local NIC for the channel.
	plan        *Plan
	crossNicOff bool
}

// Planner indexes the cluster's ranks for Conn. The cluster must not
// change while the planner is in use.
func (cl *Cluster) Planner() *ConnPlanner {
	p := &ConnPlanner{cl: cl, node: make([]int, cl.NRanks)}
	for i := range p.node {
		p.node[i] = -1
	}
	for i, n := range cl.Nodes {
		for _, r := range n.Ranks {
			if r >= 0 && r < len(p.node) {
				p.node[r] = i
			}
		}
	}
	return p
}

// PlannerFor is Planner with the NICs of NET connections chosen for the
// plan's graphs as NCCL chooses them (Cluster.NetDevs; crossNicOff is
// NCCL_CROSS_NIC=0).
func (cl *Cluster) PlannerFor(plan *Plan, crossNicOff bool) *ConnPlanner {
	p := cl.Planner()
	p.plan, p.crossNicOff = plan, crossNicOff
	return p
}

// Conn decides one connection (Planner().Conn: for many, keep a planner).
func (cl *Cluster) Conn(from, to, channel int) (Conn, error) {
	return cl.Planner().Conn(from, to, channel)
}

// Conn decides the connection from rank from to rank to on a channel as
// NCCL does: P2P when ncclTopoCheckP2p allows it and the NIC is not
// preferred (ncclTopoCheckNet), else SHM within a node, else NET through
// the channel's NICs (ncclTopoGetLocalNet) with GPUDirect RDMA where
// ncclTopoCheckGdr allows it at that end. A connection to itself is P2P.
func (p *ConnPlanner) Conn(from, to, channel int) (Conn, error) {
	cl := p.cl
	c := Conn{From: from, To: to, Channel: channel}
	if from < 0 || from >= cl.NRanks || to < 0 || to >= cl.NRanks {
		return c, fmt.Errorf("connection %d->%d: rank out of range (%d ranks)", from, to, cl.NRanks)
	}
	na, nb := p.node[from], p.node[to]
	if na < 0 || nb < 0 {
		return c, fmt.Errorf("connection %d->%d: rank on no node of the cluster", from, to)
	}
	sa, sb := cl.Nodes[na].System, cl.Nodes[nb].System
	ga, gb := sa.GPUByRank(from), sb.GPUByRank(to)
	if ga == nil || gb == nil {
		return c, fmt.Errorf("connection %d->%d: a rank has no GPU on its node", from, to)
	}
	if from == to {
		c.Transport, c.Path = TransportP2P, PathLOC
		return c, nil
	}
	if na == nb {
		c.Path = ga.Path(gb).Type
		p2p, read, _ := sa.CheckP2P(ga, gb)
		viaNet := sa.CheckNet(ga, gb)
		switch {
		case p2p && !viaNet:
			c.Transport, c.P2PRead = TransportP2P, read
			return c, nil
		case !viaNet:
			c.Transport = TransportSHM
			return c, nil
		}
	} else {
		c.Path = PathNET
	}
	c.Transport = TransportNET
	var err error
	if p.plan != nil {
		if c.SendNIC, c.RecvNIC, err = cl.NetDevs(p.plan, na, from, nb, to, channel, p.crossNicOff); err != nil {
			return c, fmt.Errorf("connection %d->%d on channel %d: %w", from, to, channel, err)
		}
	} else {
		if c.SendNIC, err = sa.LocalNet(ga, channel); err != nil {
			return c, fmt.Errorf("connection %d->%d on channel %d: %w", from, to, channel, err)
		}
		if c.RecvNIC, err = sb.LocalNet(gb, channel); err != nil {
			return c, fmt.Errorf("connection %d->%d on channel %d: %w", from, to, channel, err)
		}
	}
	gdrA, err := sa.CheckGDR(ga, c.SendNIC, true)
	if err != nil {
		return c, fmt.Errorf("connection %d->%d on channel %d: %w", from, to, channel, err)
	}
	gdrB, err := sb.CheckGDR(gb, c.RecvNIC, false)
	if err != nil {
		return c, fmt.Errorf("connection %d->%d on channel %d: %w", from, to, channel, err)
	}
	c.SendGDR, c.RecvGDR = gdrA != GDRDisabled, gdrB != GDRDisabled
	return c, nil
}
