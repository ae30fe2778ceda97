package model

import (
	"fmt"
	"sort"
	"strconv"
)

// ClusterNode is one host of a job: its ranks and the System NCCL builds
// there (trimmed to the ranks it can reach without the network, with paths
// computed and search bounds set).
type ClusterNode struct {
	Index  int
	Ranks  []int
	System *System
}

// Cluster is a whole job's topology: one System per node, ranks node-major.
type Cluster struct {
	File   string
	NRanks int
	MNNVL  bool
	// Replicated is set when the nodes are copies of one single-host file
	// (--nodes N): their systems differ only in ranks.
	Replicated bool
	// CliqueHosts is set when the nodes are copies of one single-host file
	// joined into MNNVL cliques of this many hosts (NCCL_MNNVL_ENABLE=1):
	// the nodes of a clique hold the same fused system, and the cliques
	// differ only in ranks.
	CliqueHosts int
	Nodes       []*ClusterNode
}

// LoadOptions controls how a topology XML becomes a Cluster.
type LoadOptions struct {
	// Nodes replicates a single-host XML into that many identical hosts
	// (ranks node-major, like a multi-node job). 0 or 1: one host.
	Nodes  int
	Params Params
	// Ranks makes the Cluster one communicator of the job: its members as
	// job ranks (after Nodes' replication), in the order of their ranks in
	// the communicator (ncclCommInitRank over a subset, or ncclCommSplit:
	// see SplitComms). Every host sees only its members' GPUs, renumbered,
	// and its NICs (subsetXML); hosts without a member are not in it. nil:
	// every rank of the job.
	Ranks []int
}

// MaxClusterNodes bounds --nodes so that a typo cannot exhaust memory.
const MaxClusterNodes = 4096

// LoadCluster builds the per-node Systems of a job from a topology XML.
//
// A file whose cpus carry one host_hash (or none) describes one host; with
// opts.Nodes = N it stands for N identical hosts, node k holding ranks
// k*n .. k*n+n-1 where n is the number of ranked GPUs in the file. A file
// with several host_hash values describes several hosts: when GPUs of
// different hosts share the NVLink fabric (an MNNVL dump), every node sees
// the fused system as NCCL does for an MNNVL clique; otherwise each node
// sees only its own host's part.
func LoadCluster(root *Element, file string, opts LoadOptions) (*Cluster, error) {
	if opts.Nodes < 0 || opts.Nodes > MaxClusterNodes {
		return nil, fmt.Errorf("%s: --nodes %d out of range 1..%d", file, opts.Nodes, MaxClusterNodes)
	}
	hosts := hostHashes(root)
	c := &Cluster{File: file}
	switch {
	case len(hosts) > 1 && opts.Nodes > 1:
		return nil, fmt.Errorf("%s: describes %d hosts already; --nodes applies to single-host files", file, len(hosts))
	case len(hosts) > 1:
		return c, c.loadMultiHost(root, hosts, opts)
	}
	nodes := max(opts.Nodes, 1)
	local, err := rankedGPUs(root, file)
	if err != nil {
		return nil, err
	}
	if opts.Params.MNNVLEnable == 1 && nodes > 1 {
		if opts.Ranks != nil {
			return nil, fmt.Errorf("%s: --ranks with NCCL_MNNVL_ENABLE=1 and --nodes %d: a communicator of joined NVLink domains is not modelled yet", file, nodes)
		}
		return c, c.loadMNNVLCopies(root, local, nodes, opts.Params)
	}
	c.NRanks = nodes * local
	c.Replicated = nodes > 1
	var newRank map[int]int
	if opts.Ranks != nil {
		if newRank, err = commRanks(file, opts.Ranks, c.NRanks); err != nil {
			return nil, err
		}
		c.NRanks = len(opts.Ranks)
		c.Replicated = replicatedSubset(opts.Ranks, local)
	}
	var hash uint64
	if len(hosts) == 1 {
		hash = hosts[0]
	}
	for k := 0; k < nodes; k++ {
		xml := root
		if k > 0 {
			xml = root.Clone()
			offsetRanks(xml, k*local)
		}
		if newRank != nil {
			var members int
			if xml, members = subsetXML(xml, newRank); members == 0 {
				continue
			}
		}
		build := func() (*System, error) { return BuildSystem(xml, file, hash, opts.Params) }
		s, err := build()
		if err != nil {
			return nil, err
		}
		if err := c.addNodes(s, build); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// addNodes adds the host of system s as one node, or, when some of its GPUs
// can reach each other neither by P2P nor by SHM (NCCL_P2P_DISABLE=1 with
// NCCL_SHM_DISABLE=1), as one node per group of GPUs that can: NCCL trims
// every rank's system to its group (ncclTopoTrimSystem), so that such a
// host counts as several nodes joined by the network. build makes a fresh
// copy of the host's system for every group after the first.
func (c *Cluster) addNodes(s *System, build func() (*System, error)) error {
	s.NRanks = c.NRanks
	if err := s.ComputePaths(); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	groups := s.localDomains()
	if len(groups) <= 1 {
		return c.addNode(s)
	}
	for i, rank := range groups {
		gs := s
		if i > 0 {
			var err error
			if gs, err = build(); err != nil {
				return err
			}
			gs.NRanks = c.NRanks
			if err := gs.ComputePaths(); err != nil {
				return fmt.Errorf("%s: %w", c.File, err)
			}
		}
		if err := gs.Trim(rank); err != nil {
			return fmt.Errorf("%s: %w", c.File, err)
		}
		if err := c.addNode(gs); err != nil {
			return err
		}
	}
	return nil
}

// localDomains returns, for every group of this host's GPUs that reach
// each other without the network (Trim's domains), the lowest rank of the
// group, in GPU order. Paths must be computed.
func (s *System) localDomains() []int {
	gpus := s.Nodes[GPU]
	domains := make([]int, len(gpus))
	var firsts []int
	for g, gpu := range gpus {
		domains[g] = g
		for p := 0; p < g; p++ {
			if gpu.PathTo(GPU, p).Type < PathNET {
				domains[g] = min(domains[g], domains[p])
			}
		}
	}
	seen := map[int]int{}
	for g, gpu := range gpus {
		if SystemIDOf(gpu.ID) != s.SystemID {
			continue
		}
		if i, ok := seen[domains[g]]; ok {
			firsts[i] = min(firsts[i], gpu.GPU.Rank)
			continue
		}
		seen[domains[g]] = len(firsts)
		firsts = append(firsts, gpu.GPU.Rank)
	}
	return firsts
}

func (c *Cluster) addNode(s *System) error {
	s.NRanks = c.NRanks
	s.MNNVL = c.MNNVL
	if err := checkUnique(s, c.File); err != nil {
		return err
	}
	if err := s.ComputePaths(); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	node := &ClusterNode{Index: len(c.Nodes), System: s}
	for _, g := range s.Nodes[GPU] {
		if SystemIDOf(g.ID) == s.SystemID {
			node.Ranks = append(node.Ranks, g.GPU.Rank)
		}
	}
	sort.Ints(node.Ranks)
	if len(node.Ranks) == 0 {
		return fmt.Errorf("%s: node %d has no GPU with a rank", c.File, node.Index)
	}
	if err := s.Trim(node.Ranks[0]); err != nil {
		return fmt.Errorf("%s: %w", c.File, err)
	}
	s.SearchInit()
	c.Nodes = append(c.Nodes, node)
	return nil
}

func (c *Cluster) loadMultiHost(root *Element, hosts []uint64, opts LoadOptions) error {
	params := opts.Params
	total, err := rankedGPUs(root, c.File)
	if err != nil {
		return err
	}
	c.NRanks = total
	if opts.Ranks != nil {
		newRank, err := commRanks(c.File, opts.Ranks, total)
		if err != nil {
			return err
		}
		root, _ = subsetXML(root, newRank)
		c.NRanks = len(opts.Ranks)
		var members []uint64
		for _, h := range hosts {
			if hasRankedGPU(root, h) {
				members = append(members, h)
			}
		}
		hosts = members
	}
	full, err := BuildSystem(root, c.File, hosts[0], params)
	if err != nil {
		return err
	}
	// init.cc: MNNVL needs P2P (NCCL_P2P_DISABLE=1 turns it off) and
	// NCCL_MNNVL_ENABLE other than 0.
	c.MNNVL = sharedNVSwitch(full) && params.MNNVLEnable != 0 && params.P2PLevel != PathLOC
	for _, h := range hosts {
		xml := root
		if !c.MNNVL {
			xml = hostOnly(root, h)
		}
		s, err := BuildSystem(xml, c.File, h, params)
		if err != nil {
			return err
		}
		if err := c.addNode(s); err != nil {
			return err
		}
	}
	return nil
}

// hasRankedGPU reports whether a cpu of host hash holds a GPU with a rank.
func hasRankedGPU(root *Element, hash uint64) bool {
	found := false
	for _, cpu := range root.ChildrenNamed("cpu") {
		if hostHash(cpu) != hash {
			continue
		}
		walk(cpu, func(e *Element) {
			if _, ok := e.Get("rank"); ok && e.Name == "gpu" {
				found = true
			}
		})
	}
	return found
}

// replicatedSubset reports whether a communicator of a replicated job
// (hosts of local ranks each) is itself replicated: m members on every
// host it uses, the same local GPUs, node-major, so that host k's
// members are host 0's shifted by k*m.
func replicatedSubset(ranks []int, local int) bool {
	m := 0
	for m < len(ranks) && ranks[m]/local == ranks[0]/local {
		m++
	}
	if m == len(ranks) || len(ranks)%m != 0 {
		return false
	}
	for i, r := range ranks {
		j, t := i/m, i%m
		if r%local != ranks[t]%local || r/local != ranks[j*m]/local {
			return false
		}
		if t == 0 && j > 0 && r/local <= ranks[(j-1)*m]/local {
			return false
		}
	}
	return true
}

// loadMNNVLCopies builds nodes copies of a single-host file joined into
// MNNVL cliques (NCCL_MNNVL_ENABLE=1) of params.MNNVLHosts hosts each (all
// of them when 0): each copy gets its own host hash and ranks, and every
// node sees the fused topology of its clique, as NCCL fuses the XMLs of a
// clique's ranks (the GB300 trays of ../shared/topologies show the result
// on real hardware); cliques reach each other through the network.
func (c *Cluster) loadMNNVLCopies(root *Element, local, nodes int, params Params) error {
	per := params.MNNVLHosts
	if per <= 0 || per > nodes {
		per = nodes
	}
	if per < 2 {
		return fmt.Errorf("%s: TWINCCL_MNNVL_HOSTS=%d leaves each host alone in its NVLink domain; want 2 or more", c.File, params.MNNVLHosts)
	}
	if nodes%per != 0 {
		return fmt.Errorf("%s: --nodes %d is not a whole number of NVLink domains of TWINCCL_MNNVL_HOSTS=%d hosts", c.File, nodes, per)
	}
	const base = uint64(0x4d4e4e564c000000) // "MNNVL", then the copy's index
	c.NRanks = nodes * local
	c.MNNVL = true
	c.CliqueHosts = per
	for first := 0; first < nodes; first += per {
		fused := &Element{Name: root.Name, Attrs: append([]Attr(nil), root.Attrs...), Line: root.Line}
		for k := first; k < first+per; k++ {
			x := root.Clone()
			offsetRanks(x, k*local)
			for _, cpu := range x.ChildrenNamed("cpu") {
				cpu.Set("host_hash", fmt.Sprintf("%#x", base+uint64(k)))
			}
			uniqueGUIDs(x, k)
			fused.Children = append(fused.Children, x.Children...)
		}
		for k := first; k < first+per; k++ {
			s, err := BuildSystem(fused, c.File, base+uint64(k), params)
			if err != nil {
				return err
			}
			if k == first && !sharedNVSwitch(s) {
				return fmt.Errorf("%s: NCCL_MNNVL_ENABLE=1 joins the --nodes copies by their NVLink fabric, and the GPUs have no NVSwitch link", c.File)
			}
			if err := c.addNode(s); err != nil {
				return err
			}
		}
	}
	return nil
}

// uniqueGUIDs gives the NICs of copy k of a host GUIDs of their own (the
// copy index in the top byte): NCCL takes NETs with one GUID and port for
// ports of one NIC sharing its bandwidth, which the NICs of different
// hosts of a fused MNNVL system are not.
func uniqueGUIDs(root *Element, k int) {
	if k == 0 {
		return
	}
	walk(root, func(e *Element) {
		if e.Name != "net" {
			return
		}
		if v, ok := e.Get("guid"); ok {
			e.Set("guid", fmt.Sprintf("%#x", cStrtoull(v, 16)^uint64(k)<<56))
		}
	})
}

// sharedNVSwitch reports whether GPUs of more than one host link to the
// NVSwitch fabric.
func sharedNVSwitch(s *System) bool {
	if len(s.Nodes[NVS]) == 0 {
		return false
	}
	seen := map[int]bool{}
	for _, l := range s.Nodes[NVS][0].Links {
		if l.Remote.Type == GPU {
			seen[SystemIDOf(l.Remote.ID)] = true
		}
	}
	return len(seen) > 1
}

func hostHashes(root *Element) []uint64 {
	var out []uint64
	for _, cpu := range root.ChildrenNamed("cpu") {
		h := hostHash(cpu)
		found := false
		for _, x := range out {
			found = found || x == h
		}
		if !found {
			out = append(out, h)
		}
	}
	return out
}

func hostOnly(root *Element, hash uint64) *Element {
	out := &Element{Name: root.Name, Attrs: append([]Attr(nil), root.Attrs...), Line: root.Line}
	for _, c := range root.Children {
		if c.Name != "cpu" || hostHash(c) == hash {
			out.Children = append(out.Children, c)
		}
	}
	return out
}

// walk calls f for e and every element below it.
func walk(e *Element, f func(*Element)) {
	f(e)
	for _, c := range e.Children {
		walk(c, f)
	}
}

// rankedGPUs counts the <gpu> elements with a rank.
func rankedGPUs(root *Element, file string) (int, error) {
	n := 0
	walk(root, func(e *Element) {
		if _, ok := e.Get("rank"); ok && e.Name == "gpu" {
			n++
		}
	})
	if n == 0 {
		return 0, fmt.Errorf("%s: no <gpu> element with a rank attribute", file)
	}
	return n, nil
}

func offsetRanks(root *Element, offset int) {
	walk(root, func(e *Element) {
		if v, ok := e.Get("rank"); ok && e.Name == "gpu" {
			e.Set("rank", strconv.Itoa(cStrtol(v)+offset))
		}
	})
}

// checkUnique rejects systems where two GPUs share a rank or an id, or two
// NETs share a device index on one host: NCCL's behaviour there is undefined.
func checkUnique(s *System, file string) error {
	ranks := map[int]*Node{}
	ids := map[[2]uint64]*Node{}
	for _, t := range []NodeType{GPU, NET} {
		for _, n := range s.Nodes[t] {
			key := [2]uint64{uint64(t), n.ID}
			if o := ids[key]; o != nil {
				return fmt.Errorf("%s: two %s nodes with id %s", file, t, n.Name())
			}
			ids[key] = n
			if t == GPU {
				if o := ranks[n.GPU.Rank]; o != nil {
					return fmt.Errorf("%s: GPUs %s and %s both have rank %d", file, o.Name(), n.Name(), n.GPU.Rank)
				}
				ranks[n.GPU.Rank] = n
				if n.GPU.Rank < 0 || n.GPU.Rank >= s.NRanks {
					return fmt.Errorf("%s: GPU %s has rank %d, outside 0..%d", file, n.Name(), n.GPU.Rank, s.NRanks-1)
				}
			}
		}
	}
	return nil
}

// KeepRanks removes from a topology every element that is or directly
// holds a GPU ranked n or above (the GPU's PCI device): what one host of a
// job of n ranks per host sees of a topology file that describes a larger
// one (a split-host run of one GPU per host on a file of the whole
// machine).
func KeepRanks(e *Element, n int) {
	kept := e.Children[:0]
	for _, c := range e.Children {
		drop := false
		for _, g := range append([]*Element{c}, c.ChildrenNamed("gpu")...) {
			if v, ok := g.Get("rank"); ok && g.Name == "gpu" {
				if r, whole := cWholeInt(v); whole && r >= int64(n) { // strtol syntax, as BuildSystem reads it
					drop = true
				}
			}
		}
		if !drop {
			KeepRanks(c, n)
			kept = append(kept, c)
		}
	}
	e.Children = kept
}
