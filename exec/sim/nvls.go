package sim

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// This file models NVLink SHARP (NVLS): the NVSwitch reduces what a
// multimem.ld_reduce loads from every member of a multicast group and
// copies one multimem.st to every member. A host with an NVSwitch gets
// two resources besides its links:
//
//   - the switch's reduction: every byte of every member's contribution
//     a head's multimem.ld_reduce pulls crosses it;
//   - the switch's multicast: every copy the switch delivers to a member
//     crosses it.
//
// Each has the bandwidth of the switch's GPU ports (the sum of the
// GPU->NVSwitch, resp. NVSwitch->GPU, NVLink bandwidths of the host's
// System) times NCCL's nvlsEfficiency for the GPUs' architecture
// (search.NVLSEfficiency, tuning.cc: 0.85 on Hopper, 0.74 on Blackwell):
// the share of the NVLink bandwidth NCCL's own model credits NVLS with.
// Nothing is fitted. The bytes also cross the links they use: a member's
// contribution its GPU->switch link, a delivered copy the switch->GPU
// link; a head's reduced result (its switch->GPU link) and its one store
// (its GPU->switch link) ride on its connections to itself.

// Kinds of resources for NVLS (Machine.extra).
const (
	extraNVLSReduce uint8 = extraMem + 1 + iota
	extraNVLSMcast
)

// nvlsHost are a host's NVLS resources; -1 where the host has no NVSwitch.
type nvlsHost struct{ reduce, mcast int32 }

// addNVLSResources appends host ni's NVLS resources to m (NewMachine,
// after the host's links).
func (m *Machine) addNVLSResources(ni int, s *model.System) {
	h := nvlsHost{-1, -1}
	var up, down float64
	sm := 0
	for _, g := range s.Nodes[model.GPU] {
		sm = max(sm, g.GPU.SM)
		for _, l := range g.Links {
			if l.Type == model.LinkNVL && l.Remote.Type == model.NVS {
				up += float64(l.BW)
			}
		}
	}
	for _, nvs := range s.Nodes[model.NVS] {
		for _, l := range nvs.Links {
			if l.Type == model.LinkNVL && l.Remote.Type == model.GPU {
				down += float64(l.BW)
			}
		}
	}
	eff := search.NVLSEfficiency(sm)
	if up > 0 && down > 0 && eff > 0 {
		add := func(name string, gbps float64, kind uint8) int32 {
			m.res = append(m.res, resource{name: fmt.Sprintf("h%d:%s", ni, name), cap: gbps * eff * 1e-3})
			m.resType = append(m.resType, model.LinkNVL)
			m.extra = append(m.extra, kind)
			return int32(len(m.res) - 1)
		}
		h.reduce = add("NVLS-reduce", up, extraNVLSReduce)
		h.mcast = add("NVLS-multicast", down, extraNVLSMcast)
	}
	m.nvlsRes = append(m.nvlsRes, h)
}

// nvlsRouteChannel is the channel field of the route cache's key for an
// NVLS connection of kind k: negative, so it never meets a channel, and
// distinct per kind (an NVLS route does not depend on the channel).
func nvlsRouteChannel(k model.ConnKind) int32 { return -1 - int32(k) }

// connRoute is the route of Program connection c: NCCL's transport for a
// point-to-point connection, the NVSwitch for an NVLS one.
func (m *Machine) connRoute(c model.ProgConn) (*route, error) {
	if !c.Kind.NVLS() {
		return m.route(int(c.From), int(c.To), int(c.Channel))
	}
	k := routeKey{c.From, c.To, nvlsRouteChannel(c.Kind)}
	if rt, ok := m.routes[k]; ok {
		return rt, nil
	}
	rt, err := m.nvlsRoute(int(c.From), int(c.To), c.Kind)
	if err != nil {
		return nil, fmt.Errorf("sim: NVLS %s connection %d->%d: %w", c.Kind, c.From, c.To, err)
	}
	m.routes[k] = rt
	return rt, nil
}

// nvlsRoute is the way of an NVLS connection from rank from to rank to
// (see the file comment): a reduce-group buffer crosses the sender's
// GPU->switch link and the switch's reduction, plus the head's
// switch->GPU link on the head's own buffer; a broadcast-group buffer
// crosses the switch's multicast and the receiver's switch->GPU link,
// plus the head's GPU->switch link on its own.
func (m *Machine) nvlsRoute(from, to int, kind model.ConnKind) (*route, error) {
	if from < 0 || from >= len(m.rankNode) || to < 0 || to >= len(m.rankNode) {
		return nil, fmt.Errorf("rank out of range")
	}
	// The sender's host's System holds both GPUs when they share its
	// NVLink fabric (one host, or an MNNVL domain whose Systems are fused).
	hi := m.rankNode[from]
	s := m.Cluster.Nodes[hi].System
	ga, gb := s.GPUByRank(from), s.GPUByRank(to)
	if ga == nil || gb == nil {
		return nil, fmt.Errorf("ranks not in one NVLink domain (host %d sees only its own): a multicast group stays within an NVSwitch fabric", hi)
	}
	res := m.nvlsRes[hi]
	if res.reduce < 0 {
		return nil, fmt.Errorf("host %d has no NVSwitch with NVLS (an NVS node linked to its GPUs, compute capability 9.0 or more)", hi)
	}
	upA, err := m.nvsLink(ga, true)
	if err != nil {
		return nil, err
	}
	downB, err := m.nvsLink(gb, false)
	if err != nil {
		return nil, err
	}
	rt := &route{w: 1, transport: TransportP2P}
	if kind == model.ConnNVLSReduce {
		rt.res = append(rt.res, upA, res.reduce)
		if from == to {
			rt.res = append(rt.res, downB)
		}
		rt.desc = "NVLS/reduce"
	} else {
		rt.res = append(rt.res, downB, res.mcast)
		if from == to {
			rt.res = append(rt.res, upA)
		}
		rt.desc = "NVLS/multicast"
	}
	// multimem operations go through the switch both ways
	rt.lat = m.res[upA].lat + m.res[downB].lat
	return rt, nil
}

// nvsLink is the resource of g's NVLink to its NVSwitch (up) or back.
func (m *Machine) nvsLink(g *model.Node, up bool) (int32, error) {
	if up {
		for _, l := range g.Links {
			if l.Type == model.LinkNVL && l.Remote.Type == model.NVS {
				return m.linkRes[l], nil
			}
		}
	} else {
		for _, l := range g.Links {
			if l.Type != model.LinkNVL || l.Remote.Type != model.NVS {
				continue
			}
			for _, b := range l.Remote.Links {
				if b.Remote == g {
					return m.linkRes[b], nil
				}
			}
		}
	}
	return -1, fmt.Errorf("%s has no NVLink to an NVSwitch", g.Name())
}

// nvlsWarps are the warps (of NCCL_MAX_NTHREADS/32 = 20) NCCL 2.28.9's
// NVLS kernels give each group on one node without registered buffers
// (all_reduce.h, all_gather.h, reduce_scatter.h), by lane role.
func nvlsWarps(p *model.Program, role int, hasUp bool) float64 {
	const total = 20
	switch p.Coll {
	case model.CollAllGather: // gather 8 warps, the multicast the rest
		if role == nvlsRoleGather {
			return 8
		}
		return total - 8
	case model.CollReduceScatter: // scatter 8 warps, the reduction the rest
		if role == nvlsRoleScatter {
			return 8
		}
		return total - 8
	}
	bcast, reduce := 0, 5
	if hasUp {
		bcast = 4
	} else if p.NRanks <= 6 {
		reduce = 7
	}
	switch role {
	case nvlsRoleScatter:
		return float64((total - reduce - bcast + 1) / 2)
	case nvlsRoleGather:
		return float64((total - reduce - bcast) / 2)
	case nvlsRoleReduce:
		return float64(reduce)
	}
	return float64(bcast)
}

// NVLS lane roles as the simulator tells them apart.
const (
	nvlsRoleNone = iota
	nvlsRoleScatter
	nvlsRoleGather
	nvlsRoleReduce
	nvlsRoleBcast
)

// nvlsRole tells which group of an NVLS block lane l is, from its
// connections (a streamed lane has no calls yet): a head's reduction
// receives from its reduce group, a scatter lane sends into one, a gather
// lane receives from one broadcast buffer, a broadcast lane (AllGather's
// multicast store, an NVLS tree's way down) sends to the broadcast group.
func nvlsRole(p *model.Program, l *model.ProgLane) int {
	if p.Algo != model.AlgoNVLS && p.Algo != model.AlgoNVLSTree {
		return nvlsRoleNone
	}
	kind := func(c int32) model.ConnKind { return p.Conns[c].Kind }
	switch {
	case len(l.Recv) > 0 && kind(l.Recv[0]) == model.ConnNVLSReduce:
		return nvlsRoleReduce
	case len(l.Recv) == 0 && len(l.Send) == 1 && kind(l.Send[0]) == model.ConnNVLSReduce:
		return nvlsRoleScatter
	case len(l.Recv) == 1 && len(l.Send) == 0 && kind(l.Recv[0]) == model.ConnNVLSBcast:
		return nvlsRoleGather
	case len(l.Send) > 0 && kind(l.Send[0]) == model.ConnNVLSBcast:
		return nvlsRoleBcast
	}
	return nvlsRoleNone
}

// nvlsFracs gives the share of the block's copy rate of every NVLS lane
// (NCCL's warps for its group, a group's warps shared by its per-head
// lanes); 0 for lanes of other Programs.
func nvlsFracs(p *model.Program) []float64 {
	if p.Algo != model.AlgoNVLS && p.Algo != model.AlgoNVLSTree {
		return nil
	}
	type block struct{ r, c int32 }
	roles := make([]int, len(p.Lanes))
	count := map[block]*[5]int{}
	hasUp := map[block]bool{}
	for i := range p.Lanes {
		l := &p.Lanes[i]
		roles[i] = nvlsRole(p, l)
		b := block{l.Rank, l.Channel}
		if count[b] == nil {
			count[b] = &[5]int{}
		}
		count[b][roles[i]]++
		if roles[i] == nvlsRoleBcast && p.Algo == model.AlgoNVLSTree {
			hasUp[b] = true
		}
	}
	out := make([]float64, len(p.Lanes))
	for i := range p.Lanes {
		l := &p.Lanes[i]
		b := block{l.Rank, l.Channel}
		if roles[i] == nvlsRoleNone {
			continue
		}
		out[i] = nvlsWarps(p, roles[i], hasUp[b]) / 20 / float64(count[b][roles[i]])
	}
	return out
}

// nvlsUnits is the memory traffic per data byte of a call of an NVLS
// lane (runner.units for NVLS): a multimem.ld_reduce is one load however
// many members the switch reads, and a multimem.st one store however
// many it copies to; scatter stores and gather loads stay in the own
// GPU's memory; tree connections to other nodes cost as any send or
// receive.
func (x *runner) nvlsUnits(a *actor, k model.PrimKind) float64 {
	u := 0.0
	if k.ReadsInput() {
		u += x.loadCost
	}
	if k.Receives() {
		mm := false
		for _, c := range x.cids[a.rb:a.sb] {
			switch x.p.Conns[c].Kind {
			case model.ConnNVLSReduce:
				if !mm {
					u += x.remoteLoad // one multimem.ld_reduce
					mm = true
				}
			default:
				u += x.recvLoad
			}
		}
	}
	if k.WritesOutput() {
		u++
	}
	if k.Sends() {
		mc := false
		for _, c := range x.cids[a.sb:a.se] {
			switch x.p.Conns[c].Kind {
			case model.ConnNVLSBcast:
				if !mc {
					u += x.remoteCost // one multimem.st
					mc = true
				}
			case model.ConnNVLSReduce:
				u++ // into the own unicast buffer
			default:
				u++
			}
		}
	}
	return max(u, 0.05)
}
