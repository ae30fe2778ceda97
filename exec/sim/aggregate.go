package sim

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// aggregated is a Program reduced to the orbits of two of its symmetries,
// for any collective or p2p schedule (the fast mode of the calls that the
// ring fold does not cover: trees, Broadcast, Reduce, AlltoAll, SendRecv,
// hosts that differ).
//
// The symmetries are checked on the Program, never assumed:
//
//   - Host rotation: the hosts are identical and rotating every rank to
//     the rank at the same local position of the next host maps every
//     lane onto a lane with the same primitive calls (kinds, sizes, steps)
//     and every connection onto a connection with the same route (up to
//     the host). Then the ranks at one local position run the same slices
//     at the same times and every host's links carry the same flows: host
//     0's lanes stand for all, and every connection is replaced by its
//     rotation that leaves host 0, with the receiving host's resources
//     mapped onto host 0's (which the folded host's incoming connections
//     load exactly as the real ones would). AlltoAll and SendRecv over
//     identical hosts have this symmetry; rooted and tree collectives
//     do not.
//   - Channel permutation: two channels whose lanes run the same calls,
//     between the same ranks, over the very same resources (the same NICs
//     included) behave alike; the first runs weighing as many flows on
//     every resource as the channels it stands for.
//
// Both are automorphisms of the whole simulated system (lanes, flow
// control and resources), and the max-min fair share of a symmetric
// system is symmetric, so the quotient predicts the same times as the
// step-accurate run, up to floating-point rounding.
type aggregated struct {
	prog   *model.Program
	routes []*route
	// hosts is the number of hosts folded onto host 0 (0: none); merged
	// the number of channels that ran as another one.
	hosts, merged int
	// perm names the host symmetry when it is not the plain rotation;
	// repHost maps every host to the kept host that stands for it.
	perm    string
	repHost func(int) int
	// rep[r] is the quotient's rank standing for real rank r; conn[c] the
	// quotient connection standing for real connection c.
	rep  []int32
	conn []int32
	real []model.ProgConn
}

// connKey names a connection: its ranks, channel, and its order among
// the connections between the same ranks on the same channel.
type connKey struct{ from, to, channel, occ int32 }

// sameOps reports whether two lanes run the same primitive calls (kinds,
// flags, sizes and steps; buffer offsets do not change the timing).
func sameOps(a, b []model.ProgOp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		u, v := &a[i], &b[i]
		if u.Kind != v.Kind || u.Flags != v.Flags || u.N != v.N || u.RecvStep != v.RecvStep || u.SendStep != v.SendStep {
			return false
		}
	}
	return true
}

// mergeable reports whether a connection over route rt can run merged
// with the same connection of other channels (a flow of weight w). One
// through socket proxies cannot: its channels' slices queue one after
// another on the proxy threads, and no single merged operation ends when
// each of them would.
func mergeable(rt *route) bool { return rt.proxyCopies == 0 }

// sameRouteShape reports whether two routes cost the same, their
// resources compared after mapping through f (nil: as they are).
func sameRouteShape(x, y *route, f func(int32) int32) bool {
	if x.lat != y.lat || x.capGBps != y.capGBps || x.transport != y.transport || x.gdr != y.gdr ||
		x.hostSend != y.hostSend || x.hostRecv != y.hostRecv || x.proxyCopies != y.proxyCopies || len(x.res) != len(y.res) {
		return false
	}
	for i := range x.res {
		a, b := x.res[i], y.res[i]
		if f != nil {
			a, b = f(a), f(b)
		}
		if a != b {
			return false
		}
	}
	return true
}

// hostOf is the cluster node a resource belongs to.
func (m *Machine) hostOf(id int32) int {
	return sort.Search(len(m.hostRes)-1, func(j int) bool { return m.hostRes[j+1] > id })
}

// toHost0Fast is toHost0 by binary search (identical hosts).
func (m *Machine) toHost0Fast(id int32) int32 {
	j := m.hostOf(id)
	if j <= 0 || j >= len(m.hostRes)-1 {
		return id
	}
	return id - m.hostRes[j] + m.hostRes[0]
}

// aggregate reduces a (valid) Program by its host rotation and channel
// permutation symmetries, or says why it has neither.
func (m *Machine) aggregate(p *model.Program) (*aggregated, string) {
	n, nch := p.NRanks, p.NChannels
	if n != m.Cluster.NRanks {
		return nil, "program does not match the machine"
	}
	if len(p.Lanes) == 0 {
		return nil, "empty call"
	}
	occ := make([]int32, len(p.Conns))
	rts := make([]*route, len(p.Conns))
	// Connections between the same ranks on the same channel (a tree's
	// up and down groups) are told apart by their order.
	key := make(map[connKey]int32, len(p.Conns))
	for i, c := range p.Conns {
		rt, err := m.route(int(c.From), int(c.To), int(c.Channel))
		if err != nil {
			return nil, err.Error()
		}
		rts[i] = rt
		k := connKey{c.From, c.To, c.Channel, 0}
		for {
			if _, dup := key[k]; !dup {
				break
			}
			k.occ++
		}
		key[k] = int32(i)
		occ[i] = k.occ
	}
	laneAt := make([][]int32, n*nch)
	for i := range p.Lanes {
		l := &p.Lanes[i]
		k := int(l.Rank)*nch + int(l.Channel)
		laneAt[k] = append(laneAt[k], int32(i))
	}

	// Host rotation.
	hosts := len(m.Cluster.Nodes)
	local := make([]int32, n)
	rankAt := make([][]int32, hosts)
	for j, nd := range m.Cluster.Nodes {
		rankAt[j] = make([]int32, len(nd.Ranks))
		for a, r := range nd.Ranks {
			local[r] = int32(a)
			rankAt[j][a] = int32(r)
		}
	}
	var sym hostSym
	rot := func(r int32, k int) int32 {
		return rankAt[sym.host(m.rankNode[r], k)][local[r]]
	}
	var whyRot string
	rotOK := false
	switch {
	case hosts < 2:
		whyRot = "one host"
	case !m.hostsIdentical():
		whyRot = "hosts differ"
	default:
		for _, cand := range hostSyms(hosts, nch) {
			sym = cand
			if rotOK, whyRot = m.checkRotation(p, rts, key, occ, laneAt, rot, cand.perm); rotOK {
				break
			}
		}
	}
	canon := func(c int32) int32 {
		if !rotOK {
			return c
		}
		cn := p.Conns[c]
		e := sym.toRep(m.rankNode[cn.From])
		if e == 0 {
			return c
		}
		x, ok := key[connKey{rot(cn.From, e), rot(cn.To, e), sym.perm(cn.Channel, e), occ[c]}]
		if !ok {
			return -1
		}
		return x
	}
	kept := func(r int32) bool { return !rotOK || sym.toRep(m.rankNode[r]) == 0 }
	var keptRanks []int32
	for r := range int32(n) {
		if kept(r) {
			keptRanks = append(keptRanks, r)
		}
	}

	// Channel classes over the kept ranks.
	lead := make([]int, nch)
	weight := make([]float64, nch)
	var leaders []int
	merged := 0
	for ch := 0; ch < nch; ch++ {
		lead[ch] = -1
		used := false
		for r := 0; r < n && !used; r++ {
			used = len(laneAt[r*nch+ch]) > 0
		}
		if !used {
			continue
		}
		lead[ch] = ch
		for _, k := range leaders {
			if m.sameChannels(p, rts, laneAt, keptRanks, canon, k, ch) {
				lead[ch] = k
				merged++
				break
			}
		}
		if lead[ch] == ch {
			leaders = append(leaders, ch)
		}
		weight[lead[ch]]++
	}
	if !rotOK && merged == 0 {
		return nil, whyRot + ", no identical channels"
	}

	// The quotient Program.
	a := &aggregated{merged: merged, real: p.Conns, rep: make([]int32, n), conn: make([]int32, len(p.Conns))}
	if rotOK {
		a.hosts = sym.orbit
		a.perm = sym.name
		a.repHost = func(h int) int { return sym.host(h, sym.toRep(h)) }
	}
	q := *p
	q.Conns, q.Lanes = nil, nil
	qc := make([]int32, len(p.Conns))
	for i := range qc {
		qc[i] = -1
	}
	mapRes := func(id int32) int32 { return id }
	if rotOK {
		mapRes = func(id int32) int32 {
			j := m.hostOf(id)
			if j < 0 || j >= hosts {
				return id
			}
			return id - m.hostRes[j] + m.hostRes[a.repHost(j)]
		}
	}
	for i := range p.Lanes {
		l := &p.Lanes[i]
		if !kept(l.Rank) || lead[l.Channel] != int(l.Channel) {
			continue
		}
		for _, c := range l.Send {
			if qc[c] >= 0 {
				return nil, "a connection has two senders"
			}
			qc[c] = int32(len(q.Conns))
			q.Conns = append(q.Conns, p.Conns[c])
			a.routes = append(a.routes, rts[c].remapped(mapRes, weight[l.Channel]))
		}
	}
	partner := m.partners(p, laneAt, keptRanks, lead)
	recvd := make([]int, len(q.Conns))
	for i := range p.Lanes {
		l := &p.Lanes[i]
		if !kept(l.Rank) || lead[l.Channel] != int(l.Channel) {
			continue
		}
		ql := *l
		ql.Send = make([]int32, len(l.Send))
		for j, c := range l.Send {
			ql.Send[j] = qc[c]
		}
		ql.Recv = make([]int32, len(l.Recv))
		for j, c := range l.Recv {
			x := canon(c)
			if x >= 0 {
				x = qc[partner[x]]
			}
			if x < 0 {
				return nil, "a received connection has no sender in the quotient"
			}
			ql.Recv[j] = x
			recvd[x]++
		}
		q.Lanes = append(q.Lanes, ql)
	}
	for _, k := range recvd {
		if k != 1 {
			return nil, "a connection of the quotient is not received exactly once"
		}
	}
	// Real connections and ranks onto the quotient's.
	used := make([]bool, len(p.Conns))
	for i := range p.Lanes {
		for _, c := range p.Lanes[i].Send {
			used[c] = true
		}
	}
	for c := range p.Conns {
		if !used[c] {
			a.conn[c] = -1 // no lane sends on it: no traffic
			continue
		}
		x := canon(int32(c))
		if x < 0 || qc[partner[x]] < 0 {
			return nil, "a connection has no counterpart in the quotient"
		}
		a.conn[c] = qc[partner[x]]
	}
	for r := range int32(n) {
		a.rep[r] = r
		if rotOK {
			a.rep[r] = rot(r, sym.toRep(m.rankNode[r]))
		}
	}
	a.prog = &q
	return a, ""
}

// checkRotation verifies that rotating every rank by one host maps the
// Program onto itself: lanes onto lanes with the same calls, connections
// onto connections with the same route up to the host.
func (m *Machine) checkRotation(p *model.Program, rts []*route, key map[connKey]int32, occ []int32, laneAt [][]int32, rot func(int32, int) int32, perm func(int32, int) int32) (bool, string) {
	n, nch := p.NRanks, p.NChannels
	img := func(c int32) (int32, bool) {
		cn := p.Conns[c]
		x, ok := key[connKey{rot(cn.From, 1), rot(cn.To, 1), perm(cn.Channel, 1), occ[c]}]
		return x, ok
	}
	for r := range int32(n) {
		r2 := rot(r, 1)
		for ch := 0; ch < nch; ch++ {
			la, lb := laneAt[int(r)*nch+ch], laneAt[int(r2)*nch+int(perm(int32(ch), 1))]
			if len(la) != len(lb) {
				return false, fmt.Sprintf("rank %d and rank %d run different lanes on channel %d", r, r2, ch)
			}
			for i := range la {
				x, y := &p.Lanes[la[i]], &p.Lanes[lb[i]]
				if len(x.Recv) != len(y.Recv) || len(x.Send) != len(y.Send) || !sameOps(x.Ops, y.Ops) {
					return false, fmt.Sprintf("rank %d and rank %d run different calls on channel %d", r, r2, ch)
				}
				for j, c := range x.Recv {
					if d, ok := img(c); !ok || d != y.Recv[j] {
						return false, "not symmetric under a rotation by one host"
					}
				}
				for j, c := range x.Send {
					d, ok := img(c)
					if !ok || d != y.Send[j] {
						return false, "not symmetric under a rotation by one host"
					}
					if !sameRouteShape(rts[c], rts[d], m.toHost0Fast) {
						return false, fmt.Sprintf("routes differ between hosts on channel %d", ch)
					}
				}
			}
		}
	}
	return true, ""
}

// sameChannels reports whether channel b's lanes (of the given ranks)
// run as channel a's: the same calls, between the same ranks, over the
// very same resources (and none through socket proxies, see mergeable).
func (m *Machine) sameChannels(p *model.Program, rts []*route, laneAt [][]int32, ranks []int32, canon func(int32) int32, a, b int) bool {
	nch := p.NChannels
	same := func(x, y int32) bool {
		cx, cy := canon(x), canon(y)
		u, v := p.Conns[cx], p.Conns[cy]
		return u.From == v.From && u.To == v.To && mergeable(rts[cx]) && sameRouteShape(rts[cx], rts[cy], nil)
	}
	for _, r := range ranks {
		la, lb := laneAt[int(r)*nch+a], laneAt[int(r)*nch+b]
		if len(la) != len(lb) {
			return false
		}
		for i := range la {
			x, y := &p.Lanes[la[i]], &p.Lanes[lb[i]]
			if len(x.Recv) != len(y.Recv) || len(x.Send) != len(y.Send) || !sameOps(x.Ops, y.Ops) {
				return false
			}
			for j := range x.Recv {
				if !same(x.Recv[j], y.Recv[j]) {
					return false
				}
			}
			for j := range x.Send {
				if !same(x.Send[j], y.Send[j]) {
					return false
				}
			}
		}
	}
	return true
}

// describe says what the aggregation did.
func (a *aggregated) describe() string {
	var parts []string
	if a.hosts > 0 {
		s := fmt.Sprintf("%d hosts folded onto one", a.hosts)
		if a.perm != "" {
			s += " (" + a.perm + ")"
		}
		parts = append(parts, s)
	}
	if a.merged > 0 {
		parts = append(parts, fmt.Sprintf("%d identical channel(s) merged", a.merged))
	}
	return strings.Join(parts, ", ")
}

// runAggregated runs the quotient Program and expands its result to the
// real ranks, connections and links.
func (m *Machine) runAggregated(a *aggregated, rec func(*SliceEvent)) (*Result, error) {
	r, err := m.exec(a.prog, a.routes, rec, nil)
	if err != nil {
		return nil, err
	}
	rk := make([]float64, len(a.rep))
	for i := range rk {
		rk[i] = r.RankKernelUs[a.rep[i]]
	}
	r.RankKernelUs = rk
	conns := make([]ConnStats, len(a.real))
	for i, c := range a.real {
		var cs ConnStats
		if a.conn[i] >= 0 {
			cs = r.Conns[a.conn[i]]
		} else if rt, err := m.route(int(c.From), int(c.To), int(c.Channel)); err == nil {
			cs.Transport = rt.transport.String()
		}
		cs.From, cs.To, cs.Channel = int(c.From), int(c.To), int(c.Channel)
		conns[i] = cs
	}
	r.Conns = conns
	if a.hosts > 0 {
		m.expandLinks(r, a.repHost)
	}
	r.Folded = a.hosts
	r.Merged = a.merged
	r.Fast = a.describe()
	return r, nil
}

// expandLinks replaces a folded run's links (those of the kept hosts) by
// the same links of every host: host j's are those of repHost(j).
func (m *Machine) expandLinks(r *Result, repHost func(int) int) {
	hosts := len(m.hostRes) - 1
	name := make(map[string]int32, len(r.Links))
	for id := range m.res {
		name[m.res[id].name] = int32(id)
	}
	byHost := make([][]int, hosts)
	var other []LinkStats
	for i, l := range r.Links {
		id, ok := name[l.Name]
		j := m.hostOf(id)
		if !ok || j >= hosts {
			other = append(other, l)
			continue
		}
		byHost[j] = append(byHost[j], i)
	}
	links := make([]LinkStats, 0, len(r.Links)*hosts)
	for j := range hosts {
		h := repHost(j)
		for _, i := range byHost[h] {
			l := r.Links[i]
			l.Name = m.res[name[l.Name]-m.hostRes[h]+m.hostRes[j]].name
			links = append(links, l)
		}
	}
	r.Links = append(links, other...)
}

// expandHostLinks replaces a folded run's links (host 0's) by the same
// links of every host.
func (m *Machine) expandHostLinks(r *Result, hosts int) {
	links := make([]LinkStats, 0, len(r.Links)*hosts)
	ids := make([]int32, 0, len(r.Links))
	name := map[string]int32{}
	for id := m.hostRes[0]; id < m.hostRes[1]; id++ {
		if _, ok := name[m.res[id].name]; !ok {
			name[m.res[id].name] = id
		}
	}
	for _, l := range r.Links {
		ids = append(ids, name[l.Name]-m.hostRes[0])
	}
	for j := 0; j < hosts; j++ {
		for i, l := range r.Links {
			l.Name = m.res[m.hostRes[j]+ids[i]].name
			links = append(links, l)
		}
	}
	r.Links = links
}

// hostSym is a permutation of the hosts (every rank going to the same
// position of its image host) applied together with a permutation of the
// channels, which Machine.aggregate checks as a symmetry of a Program: if
// it maps the Program (lanes, connections and routes up to the host) onto
// itself, so does every power of it, and the hosts of one orbit run
// alike, one standing for all.
type hostSym struct {
	name string
	// host(h, k) is where k applications take host h; perm(ch, k) the
	// same for channel ch.
	host func(h, k int) int
	perm func(ch int32, k int) int32
	// toRep(h) is the number of applications that take h to the kept
	// host of its orbit; orbit is the number of hosts of every orbit.
	toRep func(h int) int
	orbit int
}

// hostSyms are the host symmetries a Program is checked for, in order:
// the rotation by one host with each permutation of chanPerms; then, for
// an even number of hosts and channels, NCCL's double binary tree's:
// mirroring the hosts (h <-> N-1-h) exchanges its two trees (ncclGetDtree
// mirrors the first tree into the second one, which runs on the second
// half of the channels, as connectTrees duplicates them).
func hostSyms(hosts, nch int) []hostSym {
	var out []hostSym
	for _, cp := range chanPerms(hosts, nch) {
		out = append(out, hostSym{name: cp.name, perm: cp.perm, orbit: hosts,
			host:  func(h, k int) int { return (h + k) % hosts },
			toRep: func(h int) int { return (hosts - h) % hosts }})
	}
	if hosts%2 == 0 && nch%2 == 0 && hosts > 2 {
		out = append(out, hostSym{name: "hosts h and N-1-h, channels c and c+" + fmt.Sprint(nch/2) + " exchanged", orbit: 2,
			host: func(h, k int) int {
				if k%2 == 1 {
					return hosts - 1 - h
				}
				return h
			},
			perm: func(ch int32, k int) int32 {
				if k%2 == 1 {
					return (ch + int32(nch/2)) % int32(nch)
				}
				return ch
			},
			toRep: func(h int) int {
				if h < hosts/2 {
					return 0
				}
				return 1
			}})
	}
	return out
}

// chanPerm is the channel permutation that goes with rotating the ranks
// by one host: perm(ch, k) is the channel that channel ch of a host plays
// on the host k hosts further.
type chanPerm struct {
	name string
	perm func(ch int32, k int) int32
}

// chanPerms are the permutations a host rotation is checked with, in
// order: none, then NCCL's cross-NIC alternation (ncclTopoPostset swaps
// the rings of channels c and c^1 on odd hosts when the ring search let
// channel pairs cross NICs, crossNic 2: rotating by one host then maps
// channel c onto c^1), which is a symmetry of the whole cluster only when
// the hosts and the channels are even in number.
func chanPerms(hosts, nch int) []chanPerm {
	ps := []chanPerm{{"", func(ch int32, _ int) int32 { return ch }}}
	if hosts%2 == 0 && nch%2 == 0 {
		ps = append(ps, chanPerm{"channels c and c^1 swapped on odd hosts", func(ch int32, k int) int32 { return ch ^ int32(k&1) }})
	}
	return ps
}

// partners maps every connection sent by a kept rank on a merged channel
// to the one its leader's lane sends in the same place (lane order), and
// every other connection to itself.
func (m *Machine) partners(p *model.Program, laneAt [][]int32, kept []int32, lead []int) []int32 {
	nch := p.NChannels
	partner := make([]int32, len(p.Conns))
	for i := range partner {
		partner[i] = int32(i)
	}
	for _, r := range kept {
		for ch := 0; ch < nch; ch++ {
			l := lead[ch]
			if l < 0 || l == ch {
				continue
			}
			la, lb := laneAt[int(r)*nch+l], laneAt[int(r)*nch+ch]
			for i := range lb {
				for j, c := range p.Lanes[lb[i]].Send {
					partner[c] = p.Lanes[la[i]].Send[j]
				}
			}
		}
	}
	return partner
}
