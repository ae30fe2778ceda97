package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// Transport is how a connection moves its data: the model's decision
// (model.Cluster.Conn), which the hardware executor follows too.
type Transport = model.Transport

// Transports.
const (
	TransportP2P = model.TransportP2P
	TransportSHM = model.TransportSHM
	TransportNET = model.TransportNET
)

// route is the way one connection's data goes: the resources it crosses,
// its one-way latency and an optional rate cap of the transport.
type route struct {
	res []int32
	// recvRes, when set, are the resources the receiver's loads cross (a
	// SHM route with Calib.SHMReadLeg: host memory and the way from it to
	// the receiver's GPU); res are then the sender's stores' alone
	recvRes   []int32
	lat       Time
	capGBps   float64 // 0: none
	transport Transport
	gdr       bool
	// hostSend and hostRecv: the sender's GPU stores the data into host
	// memory, the receiver's GPU loads it from there (SHM, and NET staged
	// through host memory without GPUDirect RDMA).
	hostSend, hostRecv bool
	desc               string
	// w is the number of identical connections the route carries (the fast
	// mode's merged channels); 1 otherwise.
	w float64
	// ib, on a NET route through ib NICs, are the RDMA costs of its
	// messages (ib.go); nil otherwise.
	ib *ibCost
	// proxyCopies, when above 0, says the route's slices go through the
	// socket plugin's proxy threads of its two ranks (SocketCalib): the
	// times the sender's proxy copies each byte (1, 2 over loopback); the
	// receiver's copies it once.
	proxyCopies float64
}

// remapped is a copy of the route with its resources mapped by f (the
// fast mode's folding onto one host) and carrying w identical
// connections.
func (rt *route) remapped(f func(int32) int32, w float64) *route {
	remap := func(ids []int32) []int32 {
		if ids == nil {
			return nil
		}
		out := make([]int32, len(ids))
		for i, id := range ids {
			out[i] = f(id)
		}
		return out
	}
	c := *rt
	c.res, c.recvRes = remap(rt.res), remap(rt.recvRes)
	c.w = w
	return &c
}

// Machine is a Cluster and its Plan prepared for simulation: one resource
// per directed link of every host, and the routes of connections (built on
// demand and cached). A Machine is not safe for concurrent use.
type Machine struct {
	Cluster *model.Cluster
	Plan    *model.Plan
	calib   *Calib
	res     []resource
	resType []model.LinkType
	linkRes map[*model.Link]int32
	// rankNode is the cluster node of every rank.
	rankNode []int
	routes   map[routeKey]*route
	// hostRes[i] is the first resource of cluster node i; hostRes has one
	// more entry, the number of resources.
	hostRes []int32
	// Progress, when set, is called during long runs (about every 65536
	// events) with the slices executed so far and the total the run will
	// execute. It must not call back into the Machine.
	Progress func(done, total int64)
	// LoopCalls, when positive, runs every Program as the timing loops of
	// nccl-tests and of run gpu do: an aligning call, then LoopCalls timed
	// calls back to back on every rank (see loop.go). Zero runs one
	// isolated call.
	LoopCalls int
	// EagerCalls runs the LoopCalls loop as nccl-tests does without CUDA
	// graphs: the host issues the calls one after another, one every
	// Calib.HostCallUs from the first, and a rank's call starts no earlier
	// than its issue (see loop.go).
	EagerCalls bool
	// symmetric caches hostsIdentical once symChecked.
	symChecked, symmetric bool
	// settings are the run's facts the topology does not record.
	settings Settings
	// extra[i] is the kind of resource i: a link (extraLink) or a host
	// resource the System has no link for (host memory).
	extra []uint8
	// memRes[j] is the host memory resource of cluster node j.
	memRes []int32
	// streamRuns is the number of runs of calls a streamed lane keeps in
	// memory (0: streamWindow); tests lower it to move the windows often.
	streamRuns int
	// planner decides each route's connection (model.Cluster.Conn).
	planner *model.ConnPlanner
	// unbatched recomputes the sharing at every flow start and end instead
	// of once per time (fabric.batch); tests compare the two.
	unbatched bool
	// nvlsRes[i] are the NVSwitch resources of cluster node i (nvls.go).
	nvlsRes []nvlsHost
	// fab is the switched network above the NICs (fabric.go); nil: the
	// NICs of all hosts meet in one non-blocking switch.
	fab *fabricNet
}

// Kinds of resources besides links.
const (
	extraLink uint8 = iota
	extraMem        // host memory of a node
)

// Settings are the facts about a run that its topology does not record
// and that change what connections cost.
type Settings struct {
	// LoopbackNet is set when the socket network runs over the loopback
	// interface (NCCL_SOCKET_IFNAME=lo): NET connections stay within the
	// machine and cross no NIC, only the proxies and host memory.
	LoopbackNet bool
	// BuffSize is NCCL_BUFFSIZE, the Simple buffer of every connection (0:
	// NCCL's default, model.BuffSizeSimple): it sets the step, chunk and
	// slice sizes of Simple collectives (model.ProgOptions.BuffSize).
	BuffSize int
	// CrossNicOff is NCCL_CROSS_NIC=0: a p2p send leaves through the NET
	// of the peer's rail even where PXN would not allow it (netdev.go).
	CrossNicOff bool
}

// unmodelled are NCCL settings that change what NCCL runs but that the
// Programs do not follow, with the one value they are built for: a run
// under another value cannot be simulated faithfully.
var unmodelled = []struct {
	key, what string
	value     int
}{
	{"NCCL_LL_BUFFSIZE", "the LL buffer", model.BuffSizeLL},
	{"NCCL_LL128_BUFFSIZE", "the LL128 buffer", model.BuffSizeLL128},
}

// SettingsFromEnv reads Settings from NCCL_* variables through lookup
// (nil: none set). A bad NCCL_BUFFSIZE, or a setting of unmodelled at
// another value than NCCL's default, is an error naming it.
func SettingsFromEnv(lookup func(string) (string, bool)) (Settings, error) {
	var st Settings
	if lookup == nil {
		return st, nil
	}
	for _, u := range unmodelled {
		if v, ok := lookup(u.key); ok && strings.TrimSpace(v) != strconv.Itoa(u.value) {
			return st, fmt.Errorf("%s=%s: the simulator models %s at NCCL's default only (%d)", u.key, v, u.what, u.value)
		}
	}
	if v, ok := lookup("NCCL_BUFFSIZE"); ok {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 0, 64)
		if err != nil {
			return st, fmt.Errorf("NCCL_BUFFSIZE=%q: not a number of bytes", v)
		}
		if err := model.CheckBuffSizeSimple(n); err != nil {
			return st, err
		}
		st.BuffSize = int(n)
	}
	if v, ok := lookup("NCCL_CROSS_NIC"); ok {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 || n > 2 {
			return st, fmt.Errorf("NCCL_CROSS_NIC=%q: want 0, 1 or 2", v)
		}
		st.CrossNicOff = n == 0
	}
	if v, ok := lookup("NCCL_SOCKET_IFNAME"); ok {
		v = strings.TrimLeft(v, "=^")
		st.LoopbackNet = v == "lo" || strings.HasPrefix(v, "lo") && !strings.Contains(v, ",")
	}
	return st, nil
}

// resKind names the type of resource id: its link type, or MEM.
func (m *Machine) resKind(id int32) string {
	switch m.extra[id] {
	case extraMem:
		return "MEM"
	case extraNVLSReduce, extraNVLSMcast:
		return "NVLS"
	}
	return m.resType[id].String()
}

// SetSettings changes the run's settings (routes are rebuilt).
func (m *Machine) SetSettings(st Settings) {
	m.settings = st
	m.routes = map[routeKey]*route{}
	m.planner = nil // NCCL_CROSS_NIC may have changed
}

// Settings returns the run's settings.
func (m *Machine) Settings() Settings { return m.settings }

type routeKey struct{ from, to, channel int32 }

// NewMachine prepares a cluster and its plan (from search.Run) for
// simulation with calibration c.
func NewMachine(cl *model.Cluster, plan *model.Plan, c *Calib) (*Machine, error) {
	if cl == nil || len(cl.Nodes) == 0 {
		return nil, fmt.Errorf("sim: empty cluster")
	}
	if plan == nil || plan.NRanks != cl.NRanks {
		return nil, fmt.Errorf("sim: plan does not match the cluster's %d ranks", cl.NRanks)
	}
	if c == nil {
		return nil, fmt.Errorf("sim: no calibration")
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	m := &Machine{Cluster: cl, Plan: plan, calib: c.Clone(), linkRes: map[*model.Link]int32{}, routes: map[routeKey]*route{}}
	m.rankNode = make([]int, cl.NRanks)
	for i := range m.rankNode {
		m.rankNode[i] = -1
	}
	for ni, n := range cl.Nodes {
		for _, r := range n.Ranks {
			if r < 0 || r >= cl.NRanks {
				return nil, fmt.Errorf("sim: node %d lists rank %d outside %d ranks", ni, r, cl.NRanks)
			}
			m.rankNode[r] = ni
		}
		m.hostRes = append(m.hostRes, int32(len(m.res)))
		s := n.System
		for t := 0; t < model.NumNodeTypes; t++ {
			for _, nd := range s.Nodes[t] {
				for _, l := range nd.Links {
					if _, ok := m.linkRes[l]; ok {
						continue
					}
					lc := m.calib.Link(l.Type)
					name := fmt.Sprintf("h%d:%s->%s", ni, nd.Name(), l.Remote.Name())
					m.res = append(m.res, resource{name: name, cap: float64(l.BW) * lc.Eff * 1e-3, lat: usToPs(lc.LatencyUs)})
					m.resType = append(m.resType, l.Type)
					m.extra = append(m.extra, extraLink)
					m.linkRes[l] = int32(len(m.res) - 1)
				}
			}
		}
		// Host memory: a resource of the host that no link of the
		// System stands for.
		m.res = append(m.res, resource{name: fmt.Sprintf("h%d:MEM", ni), cap: m.calib.hostMemGBps() * 1e-3})
		m.resType = append(m.resType, model.LinkLOC)
		m.extra = append(m.extra, extraMem)
		m.memRes = append(m.memRes, int32(len(m.res)-1))
		m.addNVLSResources(ni, s)
	}
	m.hostRes = append(m.hostRes, int32(len(m.res)))
	for r, n := range m.rankNode {
		if n < 0 {
			return nil, fmt.Errorf("sim: rank %d is on no node of the cluster", r)
		}
	}
	return m, nil
}

// NumResources is the number of link resources of the machine.
func (m *Machine) NumResources() int { return len(m.res) }

// linksToRoute appends the resources of a model path.
func (m *Machine) linksToRoute(rt *route, p *model.Path, what string) error {
	if p == nil || p.Type == model.PathDIS {
		return fmt.Errorf("no path %s", what)
	}
	for _, l := range p.Links {
		id, ok := m.linkRes[l]
		if !ok {
			return fmt.Errorf("path %s uses a link outside the machine", what)
		}
		rt.res = append(rt.res, id)
		rt.lat += m.res[id].lat
	}
	return nil
}

// TransportName names how the connection from rank from to rank to on
// channel 0 moves its data: "P2P", "SHM", "NET/Socket" (through the
// socket plugin's proxies) or "NET/IB".
func (m *Machine) TransportName(from, to int) (string, error) {
	rt, err := m.route(from, to, 0)
	if err != nil {
		return "", err
	}
	switch {
	case rt.transport != TransportNET:
		return rt.transport.String(), nil
	case rt.proxyCopies > 0:
		return "NET/Socket", nil
	}
	return "NET/IB", nil
}

// route returns (building it once) the route of the connection from rank
// from to rank to on a channel, following NCCL's transport choice: P2P
// when ncclTopoCheckP2p allows it and the NIC is not preferred, else SHM
// within a host, else NET through the channel's NICs.
func (m *Machine) route(from, to, channel int) (*route, error) {
	k := routeKey{int32(from), int32(to), int32(channel)}
	if rt, ok := m.routes[k]; ok {
		return rt, nil
	}
	rt, err := m.buildRoute(from, to, channel)
	if err != nil {
		return nil, fmt.Errorf("sim: connection %d->%d on channel %d: %w", from, to, channel, err)
	}
	m.routes[k] = rt
	return rt, nil
}

func (m *Machine) buildRoute(from, to, channel int) (*route, error) {
	if from < 0 || from >= len(m.rankNode) || to < 0 || to >= len(m.rankNode) {
		return nil, fmt.Errorf("rank out of range")
	}
	if m.planner == nil {
		m.planner = m.Cluster.PlannerFor(m.Plan, m.settings.CrossNicOff)
	}
	c, err := m.planner.Conn(from, to, channel)
	if err != nil {
		return nil, err
	}
	rt := &route{w: 1, transport: c.Transport}
	sa := m.Cluster.Nodes[m.rankNode[from]].System
	ga := sa.GPUByRank(from)
	switch {
	case from == to:
		rt.desc = "self"
		return rt, nil
	case c.Transport == TransportP2P:
		gb := sa.GPUByRank(to)
		if err := m.linksToRoute(rt, ga.Path(gb), ga.Name()+" to "+gb.Name()); err != nil {
			return nil, err
		}
		rt.desc = c.String()
		return rt, nil
	case c.Transport == TransportSHM:
		gb := sa.GPUByRank(to)
		cpu := sa.LocalCPU(ga)
		if cpu == nil {
			return nil, fmt.Errorf("%s has no local CPU for SHM", ga.Name())
		}
		if err := m.linksToRoute(rt, ga.Path(cpu), ga.Name()+" to "+cpu.Name()); err != nil {
			return nil, err
		}
		// The sender's GPU writes into host memory, the receiver's
		// reads it back: host memory carries every byte twice.
		mem := m.memRes[m.rankNode[from]]
		rt.res = append(rt.res, mem)
		if m.calib.SHMReadLeg {
			// The reads cross when the receiver loads, not with the
			// sender's stores.
			send := rt.res
			rt.res = []int32{mem}
			if err := m.linksToRoute(rt, cpu.Path(gb), cpu.Name()+" to "+gb.Name()); err != nil {
				return nil, err
			}
			rt.res, rt.recvRes = send, rt.res
		} else {
			rt.res = append(rt.res, mem)
			if err := m.linksToRoute(rt, cpu.Path(gb), cpu.Name()+" to "+gb.Name()); err != nil {
				return nil, err
			}
		}
		rt.hostSend, rt.hostRecv = true, true
		rt.lat += usToPs(m.calib.SHMLatencyUs)
		rt.capGBps = m.calib.SHMCopyGBps
		rt.desc = c.String()
		return rt, nil
	}
	return m.netRoute(rt, c)
}

// netRoute is a NET connection: sender GPU to its channel's NET port
// (GPUDirect RDMA or staged through host memory), the network, the
// receiver's NET port to its GPU; the proxies add their latency.
func (m *Machine) netRoute(rt *route, c model.Conn) (*route, error) {
	sa := m.Cluster.Nodes[m.rankNode[c.From]].System
	sb := m.Cluster.Nodes[m.rankNode[c.To]].System
	ga, gb := sa.GPUByRank(c.From), sb.GPUByRank(c.To)
	neta, netb := c.SendNIC, c.RecvNIC
	rt.gdr = c.GDR()
	socket := c.Socket()
	loop := socket && m.settings.LoopbackNet && !rt.gdr
	from, to := ga.GPU.Rank, gb.GPU.Rank
	pa, pb := ga.Path(neta), netb.Path(gb)
	if loop {
		// Loopback sockets: only the way to host memory and back.
		pa, pb = toCPU(pa), fromCPU(pb)
	}
	if err := m.linksToRoute(rt, pa, ga.Name()+" to "+neta.Name()); err != nil {
		return nil, err
	}
	if !loop {
		if err := m.fabricHop(rt, m.rankNode[from], neta, m.rankNode[to], netb, c.Channel); err != nil {
			return nil, err
		}
	}
	if !rt.gdr {
		// Staged through host memory: the sender's GPU writes it.
		rt.res = append(rt.res, m.memRes[m.rankNode[from]])
		rt.hostSend, rt.hostRecv = true, true
	}
	if socket {
		// The socket plugin's proxy threads copy every byte through the
		// kernel, one operation at a time (runner.proxyServe). Over
		// loopback the sending thread also runs the receive path of
		// TCP, which costs it as much again.
		rt.proxyCopies = 1
		if loop {
			rt.proxyCopies = 2
		}
		rt.lat += usToPs(m.calib.NetSocket.LatencyUs)
	}
	if !rt.gdr {
		rt.res = append(rt.res, m.memRes[m.rankNode[to]])
	}
	if err := m.linksToRoute(rt, pb, netb.Name()+" to "+gb.Name()); err != nil {
		return nil, err
	}
	rt.lat += usToPs(m.calib.NetProxyUs)
	if !socket {
		m.applyIB(rt, true)
	}
	if !rt.gdr {
		rt.lat += usToPs(m.calib.NoGDRPenaltyUs)
	}
	rt.desc = c.String()
	return rt, nil
}

// toCPU is the leading part of a GPU-to-NIC path that ends at its CPU
// (the whole path when it crosses none).
func toCPU(p *model.Path) *model.Path {
	for i, l := range p.Links {
		if l.Remote.Type == model.CPU {
			q := *p
			q.Links = p.Links[:i+1]
			return &q
		}
	}
	return p
}

// fromCPU is the trailing part of a NIC-to-GPU path from its CPU on.
func fromCPU(p *model.Path) *model.Path {
	for i := len(p.Links) - 1; i >= 0; i-- {
		if p.Links[i].Remote.Type == model.CPU {
			q := *p
			q.Links = p.Links[i+1:]
			return &q
		}
	}
	return p
}
