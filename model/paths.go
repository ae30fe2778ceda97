package model

import (
	"fmt"
)

// disPath is the value of a path that was never set.
var disPath = Path{Type: PathDIS}

// PathTo returns the path from n to node i of type t (DIS when unknown).
func (n *Node) PathTo(t NodeType, i int) *Path {
	if n.Paths[t] == nil || i < 0 || i >= len(n.Paths[t]) {
		return &disPath
	}
	return &n.Paths[t][i]
}

// Path returns the path from n to m.
func (n *Node) Path(m *Node) *Path { return n.PathTo(m.Type, m.Index) }

func (s *System) allocPaths(n *Node, t NodeType) {
	if n.Paths[t] != nil {
		return
	}
	n.Paths[t] = make([]Path, len(s.Nodes[t]))
	for i := range n.Paths[t] {
		n.Paths[t][i].Type = PathDIS
	}
}

// setPaths runs NCCL's breadth-first search from base and stores, on every
// node reached, its path towards base (ncclTopoSetPaths, 2.28 rules: among
// the shortest paths the widest wins; a GPU may be crossed only as a single
// NVLink hop between two GPUs).
func (s *System) setPaths(base *Node) error {
	t, bi := base.Type, base.Index
	s.allocPaths(base, t)
	base.Paths[t][bi] = Path{BW: LocBW, Type: PathLOC}
	frontier := []*Node{base}
	var next []*Node
	for len(frontier) > 0 {
		next = next[:0]
		for _, n := range frontier {
			path := &n.Paths[t][bi]
			for _, l := range n.Links {
				r := l.Remote
				s.allocPaths(r, t)
				rp := &r.Paths[t][bi]
				bw := min(path.BW, l.BW)
				if n != base && n.Type == GPU && (s.Params.NVBDisable || l.Type != LinkNVL || r.Type != GPU || path.Count() > 1) {
					continue
				}
				if !((rp.BW == 0 || rp.Count() > path.Count()) && rp.BW < bw) {
					continue
				}
				var rev *Link
				for _, rl := range r.Links {
					if rl.Remote == n && rl.Type == l.Type {
						rev = rl
						break
					}
				}
				if rev == nil {
					return fmt.Errorf("paths: link %s -> %s (%s) has no reverse link, which NCCL requires", n.Name(), r.Name(), l.Type)
				}
				links := make([]*Link, 0, path.Count()+1)
				rp.Links = append(append(links, rev), path.Links...)
				rp.BW = bw
				typ := PathType(l.Type)
				if l.Type == LinkNET {
					typ = PathLOC
				}
				if n.Type == PCI && r.Type == PCI {
					typ = PathPXB
				}
				if l.Type == LinkPCI && (n.Type == CPU || r.Type == CPU) {
					typ = PathPHB
				}
				if n.Type == GPU && path.Type == PathNVL && typ == PathNVL && rp.Count() > 1 {
					typ = PathNVB
				}
				rp.Type = max(path.Type, typ)
				if !containsNode(next, r) {
					next = append(next, r)
				}
			}
		}
		frontier, next = next, frontier
	}
	return nil
}

func containsNode(list []*Node, n *Node) bool {
	for _, x := range list {
		if x == n {
			return true
		}
	}
	return false
}

// mergePathType combines the types of two concatenated paths: C2C followed
// by PHB (either order) is P2C, anything else the worse of the two.
func mergePathType(a, b PathType) PathType {
	if (a == PathC2C && b == PathPHB) || (a == PathPHB && b == PathC2C) {
		return PathP2C
	}
	return max(a, b)
}

// addInterStep reroutes the path src -> node i2 of type t2 through mid:
// src->mid followed by mid->dst (addInterStep in paths.cc).
func addInterStep(mid, src *Node, t2 NodeType, i2 int) {
	p1, p2 := src.Path(mid), mid.PathTo(t2, i2)
	dst := src.PathTo(t2, i2)
	if dst == &disPath {
		return
	}
	if (p1.Count() == 0 && src != mid) || (p2.Count() == 0 && mid.Type != t2) {
		// A leg does not exist (e.g. the CPU of another host): the route
		// is unusable, not a walk through nowhere.
		*dst = Path{Type: PathDIS}
		return
	}
	links := make([]*Link, 0, p1.Count()+p2.Count())
	links = append(append(links, p1.Links...), p2.Links...)
	typ := mergePathType(p1.Type, p2.Type)
	if mid.Type == GPU {
		typ = PathPXN
	}
	*dst = Path{Links: links, BW: min(p1.BW, p2.BW), Type: typ}
}

// local returns the nodes of type rt that n reaches with the highest
// bandwidth, ties broken by the lowest path type (ncclTopoGetLocal).
func (s *System) local(n *Node, rt NodeType) ([]*Node, PathType) {
	paths := n.Paths[rt]
	if paths == nil {
		return nil, PathDIS
	}
	minType, maxBW := PathDIS, float32(0)
	var out []*Node
	for i := range paths {
		p := &paths[i]
		if p.BW > maxBW || (p.BW == maxBW && p.Type < minType) {
			maxBW, minType = p.BW, p.Type
			out = out[:0]
		}
		if p.BW == maxBW && p.Type == minType {
			out = append(out, s.Nodes[rt][i])
		}
	}
	return out, minType
}

// LocalCPU returns the CPU closest to GPU g: best (bandwidth, type) path,
// then fewest hops.
func (s *System) LocalCPU(g *Node) *Node {
	cpus, _ := s.local(g, CPU)
	var best *Node
	for _, c := range cpus {
		if best == nil || g.Path(c).Count() < g.Path(best).Count() {
			best = c
		}
	}
	return best
}

func mirrorBits(val, pow2 int) int {
	mirror := 0
	for b, mb := 1, pow2>>1; b < pow2; b, mb = b<<1, mb>>1 {
		if val&b != 0 {
			mirror |= mb
		}
	}
	return mirror
}

func isPow2(v int) bool { return v > 0 && v&(v-1) == 0 }

// localNetPlan is what ncclTopoGetLocalNet needs to pick a NET per channel.
type localNetPlan struct {
	nets       []*Node
	base       int
	netsPerGPU int
}

func (s *System) localNetPlan(g *Node) (localNetPlan, error) {
	nets, _ := s.local(g, NET)
	if len(nets) == 0 {
		return localNetPlan{}, fmt.Errorf("no local path from %s to any NET", g.Name())
	}
	gpus, _ := s.local(nets[0], GPU)
	if len(gpus) == 0 {
		return localNetPlan{}, fmt.Errorf("no local path from %s to any GPU", nets[0].Name())
	}
	idx := g.GPU.Dev
	if isPow2(len(nets)) {
		idx = mirrorBits(idx, len(nets))
	}
	return localNetPlan{nets: nets, base: idx, netsPerGPU: (len(nets) + len(gpus) - 1) / len(gpus)}, nil
}

func (p localNetPlan) net(channel int) *Node {
	i := (p.base + channel%p.netsPerGPU) % len(p.nets)
	if i < 0 {
		i += len(p.nets)
	}
	return p.nets[i]
}

// LocalNet returns the NET GPU g uses for a channel (ncclTopoGetLocalNet).
func (s *System) LocalNet(g *Node, channel int) (*Node, error) {
	p, err := s.localNetPlan(g)
	if err != nil {
		return nil, err
	}
	return p.net(channel), nil
}

// localGPU returns the first GPU that, in channel order, picks net as its
// local NET, or nil (ncclTopoGetLocalGpu).
func (s *System) localGPU(net *Node) (*Node, error) {
	gpus, _ := s.local(net, GPU)
	plans := make([]localNetPlan, len(gpus))
	period := 0
	for i, g := range gpus {
		p, err := s.localNetPlan(g)
		if err != nil {
			return nil, err
		}
		plans[i] = p
		period = max(period, p.netsPerGPU)
	}
	// Each GPU's choice repeats with period netsPerGPU, so the first match
	// over MaxChannels channels is found within the longest period.
	for c := 0; c < min(MaxChannels, period); c++ {
		for i, g := range gpus {
			if plans[i].net(c) == net {
				return g, nil
			}
		}
	}
	return nil, nil
}

// CheckP2P says whether GPUs g1 and g2 may use P2P, whether P2P reads are
// preferred, and the GPU relaying an NVB path (ncclTopoCheckP2p without the
// live NVML check).
func (s *System) CheckP2P(g1, g2 *Node) (p2p, read bool, intermediate *Node) {
	if SystemIDOf(g1.ID) != SystemIDOf(g2.ID) && !(s.MNNVL && onNVSwitch(g1) && onNVSwitch(g2)) {
		return false, false, nil
	}
	path := g1.Path(g2)
	if path.Count() == 2 && path.Links[0].Remote.Type == GPU {
		intermediate = path.Links[0].Remote
	}
	level := PathPXB
	if cpus := s.Nodes[CPU]; len(cpus) > 0 && cpus[0].CPU.Arch == CPUArchX86 && cpus[0].CPU.Vendor == CPUVendorAMD && len(s.Nodes[GPU]) <= 2 {
		level = PathSYS
	}
	if s.Params.P2PLevel >= 0 {
		level = s.Params.P2PLevel
	}
	p2p = path.Type <= level
	read = path.Type == PathNVL && g1.GPU.SM == 80 && g2.GPU.SM == 80
	return p2p, read, intermediate
}

// onNVSwitch reports whether a GPU has an NVLink to the NVSwitch fabric,
// which is what puts it in an MNNVL clique with GPUs of other hosts.
func onNVSwitch(g *Node) bool {
	for _, l := range g.Links {
		if l.Type == LinkNVL && l.Remote.Type == NVS {
			return true
		}
	}
	return false
}

// CheckNet says whether two GPUs of one node should talk through the NIC
// because both reach a NET faster than each other (ncclTopoCheckNet).
func (s *System) CheckNet(g1, g2 *Node) bool {
	if s.Params.NetDisableIntra {
		return false
	}
	speed := g1.Path(g2).BW
	var net1, net2 float32
	for i := range s.Nodes[NET] {
		if p := g1.PathTo(NET, i); p.Type <= PathPXB && p.BW > net1 {
			net1 = p.BW
		}
		if p := g2.PathTo(NET, i); p.Type <= PathPXB && p.BW > net2 {
			net2 = p.BW
		}
	}
	return net1 > speed && net2 > speed
}

// GDRMode is the outcome of a GPUDirect RDMA check.
type GDRMode int

// GPUDirect RDMA modes.
const (
	GDRDisabled GDRMode = iota
	GDRDefault
	GDRPCI // forced PCIe mapping on C2C systems
)

// IntermediateGPU returns the GPU relaying g's PXN path to net, or g itself.
func (s *System) IntermediateGPU(g, net *Node) (*Node, error) {
	path := g.Path(net)
	if path.Type != PathPXN {
		return g, nil
	}
	for _, l := range path.Links {
		if l.Remote.Type != NVS {
			if l.Remote.Type == GPU {
				return l.Remote, nil
			}
			break
		}
	}
	return nil, fmt.Errorf("no intermediate GPU between %s and %s", g.Name(), net.Name())
}

// CheckGDR decides whether GPU g may use GPUDirect RDMA with net (read is
// the send direction), as ncclTopoCheckGdr.
func (s *System) CheckGDR(g, net *Node, read bool) (GDRMode, error) {
	if net.NET.GDR == 0 || g.GPU.GDR == 0 {
		return GDRDisabled, nil
	}
	if read {
		p := s.Params.NetGDRRead
		if p == 0 {
			return GDRDisabled, nil
		}
		if p < 0 && g.GPU.SM < 80 {
			nvlink := len(s.Nodes[GPU]) == 1
			for _, o := range s.Nodes[GPU] {
				if o != g && g.Path(o).Type == PathNVL {
					nvlink = true
					break
				}
			}
			if !nvlink {
				return GDRDisabled, nil
			}
		}
	}
	// NCCL 2.28.9 (paths.cc, ncclTopoCheckGdr): the level is PXB (or
	// NCCL_NET_GDR_LEVEL); a P2C distance counts as C2C when
	// NCCL_NET_GDR_C2C is on, so it passes any level from C2C up; a GPU
	// on C2C whose NIC is not reached through C2C gets a PCIe mapping.
	// (2.29 raised the default level to P2C and compares P2C itself.)
	level := PathPXB
	if s.Params.GDRLevel >= 0 {
		level = s.Params.GDRLevel
	}
	distance := g.Path(net).Type
	if distance == PathPXN {
		proxy, err := s.IntermediateGPU(g, net)
		if err != nil {
			return GDRDisabled, err
		}
		g = proxy
		distance = g.Path(net).Type
	}
	if s.Params.NetGDRC2C && distance == PathP2C {
		distance = PathC2C
	}
	if distance > level {
		return GDRDisabled, nil
	}
	if c := s.LocalCPU(g); c != nil && g.Path(c).Type == PathC2C && distance != PathC2C {
		return GDRPCI, nil
	}
	return GDRDefault, nil
}

func (s *System) clearPaths() {
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			n.Paths = [NumNodeTypes][]Path{}
		}
	}
}

// ComputePaths computes every path NCCL keeps (ncclTopoComputePaths with a
// communicator): breadth-first searches from CPUs, GPUs, NETs and NVSwitches;
// GPU pairs without P2P rerouted through the CPU; peers reachable by neither
// P2P nor SHM marked NET; P2C, PXN and GPUDirect RDMA adjustments of GPU/NET
// paths; and each NET's local GPU.
func (s *System) ComputePaths() error {
	s.clearPaths()
	for _, t := range []NodeType{CPU, GPU, NET, NVS} {
		for _, n := range s.Nodes[t] {
			if err := s.setPaths(n); err != nil {
				return err
			}
		}
	}
	gpus := s.Nodes[GPU]
	for _, g := range gpus {
		for _, p := range gpus {
			if ok, _, _ := s.CheckP2P(p, g); !ok {
				cpu := s.LocalCPU(g)
				if cpu == nil {
					return fmt.Errorf("paths: no CPU close to %s", g.Name())
				}
				addInterStep(cpu, p, GPU, g.Index)
			}
		}
		for _, p := range gpus {
			if p == g {
				continue
			}
			p2p, _, inter := s.CheckP2P(p, g)
			useNet := s.CheckNet(p, g)
			p2pOK := p2p && (inter != nil || !useNet)
			shmOK := !s.Params.SHMDisable && !useNet && SystemIDOf(p.ID) == SystemIDOf(g.ID)
			if !p2pOK && !shmOK {
				p.PathTo(GPU, g.Index).Type = PathNET
			}
		}
	}
	// P2C: a GPU attached to its CPU by C2C reaches every NIC behind that
	// CPU's host bridge as P2C, in both directions. NCCL 2.28.9
	// (paths.cc, ncclTopoComputePaths, "update the GPU -> NIC path in the
	// case of C2C + PHB") applies this to every NET; only 2.29 narrowed it
	// to the GPU's closest NETs.
	for _, n := range s.Nodes[NET] {
		for _, g := range gpus {
			cpu := s.LocalCPU(g)
			if cpu == nil {
				continue
			}
			if mergePathType(g.Path(cpu).Type, n.Path(cpu).Type) == PathP2C {
				gp, np := g.Path(n), n.Path(g)
				gp.Type = min(PathP2C, gp.Type)
				np.Type = min(PathP2C, np.Type)
			}
		}
	}
	pxnMax := PathPXB
	if s.Params.PXNC2C {
		pxnMax = PathP2C
	}
	for _, n := range s.Nodes[NET] {
		for _, g := range gpus {
			if !s.Params.PXNDisable {
				lg, err := s.localGPU(n)
				if err != nil {
					return fmt.Errorf("paths: %w", err)
				}
				// NCCL 2.28.9 does not ask whether the relay GPU may use
				// GPUDirect RDMA here (2.30 does).
				if lg != nil && lg != g && lg.Path(n).Type <= pxnMax && lg.Path(g).Type <= PathNVL &&
					SystemIDOf(lg.ID) == SystemIDOf(g.ID) && (lg.Path(n).BW > g.Path(n).BW || g.Path(n).Type > PathPXN) {
					addInterStep(lg, g, NET, n.Index)
				}
			}
			if g.Path(n).Type < PathPHB {
				mode, err := s.CheckGDR(g, n, false)
				if err != nil {
					return fmt.Errorf("paths: %w", err)
				}
				if mode == GDRDisabled {
					cpu := s.LocalCPU(g)
					if cpu == nil {
						return fmt.Errorf("paths: no CPU close to %s", g.Name())
					}
					addInterStep(cpu, n, GPU, g.Index)
					addInterStep(cpu, g, NET, n.Index)
				}
			}
		}
	}
	for _, n := range s.Nodes[NET] {
		lg, err := s.localGPU(n)
		if err != nil {
			return fmt.Errorf("paths: %w", err)
		}
		n.NET.LocalGPU = -1
		if lg != nil {
			n.NET.LocalGPU = lg.Index
		}
	}
	return nil
}

// Trim removes the GPUs that rank cannot reach without the network and
// sets Inter when ranks remain elsewhere (ncclTopoTrimSystem). Paths must
// be computed before and are recomputed after.
func (s *System) Trim(rank int) error {
	gpus := s.Nodes[GPU]
	domains := make([]int, len(gpus))
	myDomain := 0
	for g, gpu := range gpus {
		domains[g] = g
		for p := 0; p < g; p++ {
			if gpu.PathTo(GPU, p).Type < PathNET {
				domains[g] = min(domains[g], domains[p])
			}
		}
		if gpu.GPU.Rank == rank {
			myDomain = domains[g]
		}
	}
	var drop []*Node
	for g, gpu := range gpus {
		if domains[g] != myDomain {
			drop = append(drop, gpu)
		}
	}
	for _, gpu := range drop {
		s.removeNode(gpu)
	}
	s.Inter = len(s.Nodes[GPU]) != s.NRanks
	if len(drop) == 0 {
		return nil // NCCL recomputes here; the graph is unchanged, so are the paths
	}
	return s.ComputePaths()
}

// SearchInit sets MaxBW and TotalBW, the per-channel and total bandwidth
// bounds of the channel search (ncclTopoSearchInit).
func (s *System) SearchInit() {
	s.MaxBW, s.TotalBW = 0, 0
	if !s.Inter && len(s.Nodes[GPU]) == 1 {
		s.MaxBW, s.TotalBW = LocBW, LocBW
		return
	}
	target := GPU
	if s.Inter {
		target = NET
	}
	for _, g := range s.Nodes[GPU] {
		var maxBW float32
		for i := range s.Nodes[target] {
			if p := g.PathTo(target, i); p.Count() != 0 {
				maxBW = max(maxBW, p.BW)
			}
		}
		var nvl, pci float32
		for _, l := range g.Links {
			switch l.Type {
			case LinkNVL:
				nvl += l.BW
			case LinkPCI:
				pci = l.BW
			}
		}
		s.MaxBW = max(s.MaxBW, maxBW)
		s.TotalBW = max(s.TotalBW, max(pci, nvl))
	}
}
