package model

import (
	"fmt"
	"strings"
)

// Link is a directed link from one node to Remote. Links added while
// building are merged with a parallel link of the same type by adding
// bandwidths; Broadcom switch flattening, as in NCCL, can still leave
// parallel links.
type Link struct {
	Type   LinkType
	BW     float32 // GB/s
	Remote *Node
}

// Path is the route from a node to another node: its links (starting at the
// source), its bottleneck bandwidth and its NCCL type.
type Path struct {
	Links []*Link
	BW    float32
	Type  PathType
}

// Count is the number of hops of the path.
func (p *Path) Count() int { return len(p.Links) }

// GPUInfo holds the attributes of a GPU node.
type GPUInfo struct {
	Dev  int // NVML device index
	Rank int // communicator rank
	SM   int // compute capability, major*10+minor
	GDR  int // GPUDirect RDMA support
}

// CPUInfo holds the attributes of a CPU (NUMA domain) node.
type CPUInfo struct {
	Arch, Vendor, Model int
	Affinity            string
}

// NETInfo holds the attributes of a network port.
type NETInfo struct {
	Name        string
	Dev         int
	Asic        uint64 // NIC identity (guid); ports of one asic share bandwidth
	Port        int
	BW          float32 // GB/s
	Latency     float32 // µs
	GDR         int
	MaxChannels int
	CollSupport int
	LocalGPU    int // index of the GPU that uses this NET first (-1: none)
}

// Node is a vertex of the System graph. Its id follows NCCL: the host's
// system id in the top 8 bits, a type-specific local id below.
type Node struct {
	Type  NodeType
	ID    uint64
	Index int // position in System.Nodes[Type]
	Links []*Link
	// Paths[t][i] is the path from this node to node i of type t; nil when
	// no path search ever reached this node from a node of type t.
	Paths [NumNodeTypes][]Path

	GPU    GPUInfo
	CPU    CPUInfo
	NET    NETInfo
	Device uint64 // PCI switches: vendor<<48 | device<<32 | subsystem vendor<<16 | subsystem device
}

// SystemIDOf returns the host index encoded in a node id.
func SystemIDOf(id uint64) int { return int(id >> 56) }

// LocalIDOf returns the host-local part of a node id.
func LocalIDOf(id uint64) uint64 { return id & 0x00ffffffffffffff }

func topoID(systemID int, local int64) uint64 {
	return uint64(systemID)<<56 + uint64(local)&0x00ffffffffffffff
}

// Name returns NCCL's printed name of the node, e.g. "GPU/0-1b000".
func (n *Node) Name() string {
	return fmt.Sprintf("%s/%x-%x", n.Type, SystemIDOf(n.ID), LocalIDOf(n.ID))
}

// System is NCCL's topology graph of one process's view (ncclTopoSystem):
// typed nodes and directed links with bandwidths, and after ComputePaths
// the paths between them.
type System struct {
	Nodes      [NumNodeTypes][]*Node
	HostHashes []uint64 // host_hash of each system id, in order of appearance
	SystemID   int      // the local host's system id
	MaxBW      float32  // best per-channel bandwidth (ncclTopoSearchInit)
	TotalBW    float32  // best per-GPU total bandwidth
	Inter      bool     // some ranks live outside this system
	// NRanks is the number of ranks of the communicator (all nodes).
	NRanks int
	// MNNVL is set when GPUs of several hosts share one NVLink fabric.
	MNNVL  bool
	Params Params
}

// GPUByRank returns the GPU node of a rank, or nil.
func (s *System) GPUByRank(rank int) *Node {
	for _, g := range s.Nodes[GPU] {
		if g.GPU.Rank == rank {
			return g
		}
	}
	return nil
}

// NodeByID returns the node of type t with the given id, or nil.
func (s *System) NodeByID(t NodeType, id uint64) *Node {
	for _, n := range s.Nodes[t] {
		if n.ID == id {
			return n
		}
	}
	return nil
}

func (s *System) createNode(t NodeType, id uint64) (*Node, error) {
	if len(s.Nodes[t]) == MaxNodesPerType {
		return nil, fmt.Errorf("more than %d %s nodes", MaxNodesPerType, t)
	}
	n := &Node{Type: t, ID: id, Index: len(s.Nodes[t])}
	switch t {
	case GPU:
		n.GPU = GPUInfo{Dev: Undef, Rank: Undef, SM: Undef}
	case CPU:
		n.CPU = CPUInfo{Arch: Undef, Vendor: Undef, Model: Undef}
	case NET:
		n.NET.Port = Undef
		n.NET.LocalGPU = Undef
	}
	s.Nodes[t] = append(s.Nodes[t], n)
	return n, nil
}

// removeNode deletes a node and every link pointing to it.
func (s *System) removeNode(del *Node) {
	for t := range s.Nodes {
		for _, n := range s.Nodes[t] {
			kept := n.Links[:0]
			for _, l := range n.Links {
				if l.Remote != del {
					kept = append(kept, l)
				}
			}
			n.Links = kept
		}
	}
	list := s.Nodes[del.Type]
	list = append(list[:del.Index], list[del.Index+1:]...)
	for i, n := range list {
		n.Index = i
	}
	s.Nodes[del.Type] = list
}

// connect adds bw to the link a->b of type t (creating it if needed) and
// keeps a's links sorted by decreasing bandwidth, as ncclTopoConnectNodes.
func connect(a, b *Node, t LinkType, bw float32) error {
	pos := -1
	for i, l := range a.Links {
		if l.Remote == b && l.Type == t {
			pos = i
			break
		}
	}
	if pos < 0 {
		if len(a.Links) == MaxLinksPerNode {
			return fmt.Errorf("%s has more than %d links", a.Name(), MaxLinksPerNode)
		}
		a.Links = append(a.Links, &Link{Type: t, Remote: b})
		pos = len(a.Links) - 1
	}
	l := a.Links[pos]
	l.BW += bw
	for pos > 0 && a.Links[pos-1].BW < l.BW {
		a.Links[pos] = a.Links[pos-1]
		pos--
	}
	a.Links[pos] = l
	return nil
}

// xmlError names the element of a System-building error.
func xmlError(file string, e *Element, format string, args ...any) error {
	return &ParseError{File: file, Line: e.Line, Msg: fmt.Sprintf(format, args...)}
}

type sysBuilder struct {
	s    *System
	file string
}

// connectBoth links a and c in both directions, naming e in errors.
func (b *sysBuilder) connectBoth(e *Element, a, c *Node, t LinkType, bw float32) error {
	if err := connect(a, c, t, bw); err != nil {
		return xmlError(b.file, e, "%v", err)
	}
	if err := connect(c, a, t, bw); err != nil {
		return xmlError(b.file, e, "%v", err)
	}
	return nil
}

func (b *sysBuilder) attr(e *Element, key string) (string, error) {
	v, ok := e.Get(key)
	if !ok {
		return "", xmlError(b.file, e, "<%s> lacks required attribute %s", e.Name, key)
	}
	return v, nil
}

// attrInt reads a required integer attribute as NCCL does, refusing a
// value outside its topoAttrs range (see attrNumber).
func (b *sysBuilder) attrInt(e *Element, key string) (int, error) {
	v, err := b.attr(e, key)
	if err != nil {
		return 0, err
	}
	f, _, err := attrNumber(b.file, e, key, v)
	return int(f), err
}

// attrIntDefault is attrInt for an optional attribute: def when absent.
func (b *sysBuilder) attrIntDefault(e *Element, key string, def int) (int, error) {
	v, ok := e.Get(key)
	if !ok {
		return def, nil
	}
	f, _, err := attrNumber(b.file, e, key, v)
	return int(f), err
}

// BuildSystem builds NCCL's system graph from a topology XML, as
// ncclTopoGetSystemFromXml does: CPUs, the PCI tree, GPUs, NICs and NETs,
// then NVLinks, C2C links and PCI links, Broadcom switch flattening, CPU
// interconnects and link sorting. localHostHash selects the local system id
// (0 when absent from the XML and the XML has a single host). file names
// the input in errors.
func BuildSystem(root *Element, file string, localHostHash uint64, params Params) (*System, error) {
	if root == nil || root.Name != "system" {
		return nil, fmt.Errorf("%s: topology root must be <system>", file)
	}
	b := &sysBuilder{s: &System{SystemID: -1, Params: params}, file: file}
	for _, c := range root.Children {
		if c.Name == "cpu" {
			if err := b.addCPU(c); err != nil {
				return nil, err
			}
		}
	}
	s := b.s
	for i, h := range s.HostHashes {
		if h == localHostHash {
			s.SystemID = i
		}
	}
	if s.SystemID == -1 {
		if len(s.HostHashes) > 1 {
			return nil, fmt.Errorf("%s: local host hash %#x is not among the file's host_hash values", file, localHostHash)
		}
		s.SystemID = 0
	}
	if err := b.addNVLinks(root); err != nil {
		return nil, err
	}
	if err := b.addC2C(root); err != nil {
		return nil, err
	}
	if err := b.addPCILinks(root); err != nil {
		return nil, err
	}
	if err := s.flattenBcmSwitches(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := s.connectCPUs(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	s.sortLinks()
	return s, nil
}

// hostHash reads a cpu element's host_hash (hex, as strtoull base 16; 0
// when absent).
func hostHash(cpu *Element) uint64 {
	v, _ := cpu.Get("host_hash")
	return cStrtoull(v, 16)
}

func (b *sysBuilder) systemID(cpu *Element) int {
	h := hostHash(cpu)
	for i, x := range b.s.HostHashes {
		if x == h {
			return i
		}
	}
	b.s.HostHashes = append(b.s.HostHashes, h)
	return len(b.s.HostHashes) - 1
}

func (b *sysBuilder) addCPU(e *Element) error {
	numa, err := b.attrInt(e, "numaid")
	if err != nil {
		return err
	}
	if v, ok := e.Get("host_hash"); ok {
		if _, _, err := attrNumber(b.file, e, "host_hash", v); err != nil {
			return err
		}
	}
	sysID := b.systemID(e)
	cpu, err := b.s.createNode(CPU, topoID(sysID, int64(numa)))
	if err != nil {
		return xmlError(b.file, e, "%v", err)
	}
	cpu.CPU.Affinity, _ = e.Get("affinity")
	arch, err := b.attr(e, "arch")
	if err != nil {
		return err
	}
	cpu.CPU.Arch = dictCPUArch.lookup(arch)
	if cpu.CPU.Arch == CPUArchX86 {
		vendor, err := b.attr(e, "vendor")
		if err != nil {
			return err
		}
		cpu.CPU.Vendor = dictCPUVendor.lookup(vendor)
		if cpu.CPU.Vendor == CPUVendorIntel || cpu.CPU.Vendor == CPUVendorZhaoxin {
			family, err := b.attrInt(e, "familyid")
			if err != nil {
				return err
			}
			model, err := b.attrInt(e, "modelid")
			if err != nil {
				return err
			}
			if cpu.CPU.Vendor == CPUVendorIntel {
				switch {
				case family == 6 && model >= 0xCF:
					cpu.CPU.Model = CPUModelIntelERP
				case family == 6 && model >= 0x8F:
					cpu.CPU.Model = CPUModelIntelSRP
				case family == 6 && model >= 0x55:
					cpu.CPU.Model = CPUModelIntelSKL
				default:
					cpu.CPU.Model = CPUModelIntelBDW
				}
			} else if family == 7 && model == 0x5B {
				cpu.CPU.Model = CPUModelYongfeng
			}
		}
	}
	for _, c := range e.Children {
		switch c.Name {
		case "pci":
			if err := b.addPCI(c, cpu, sysID); err != nil {
				return err
			}
		case "nic":
			nic := b.s.NodeByID(NIC, topoID(sysID, 0))
			if nic == nil {
				if nic, err = b.s.createNode(NIC, topoID(sysID, 0)); err != nil {
					return xmlError(b.file, c, "%v", err)
				}
				if err := b.connectBoth(c, cpu, nic, LinkPCI, LocBW); err != nil {
					return err
				}
			}
			if err := b.addNIC(c, nic, sysID); err != nil {
				return err
			}
		}
	}
	return nil
}

// BusIDToInt converts a PCI bus id to NCCL's integer form: the hex digits
// concatenated ("0000:07:00.0" -> 0x70000), stopping at the first other
// character; at most 16 digits are read.
func BusIDToInt(busID string) int64 {
	var digits []byte
	for i := 0; i < len(busID) && len(digits) < 16; i++ {
		c := busID[i]
		if c == '.' || c == ':' {
			continue
		}
		if !isHexDigit(c) {
			break
		}
		digits = append(digits, c)
	}
	u, overflow := cParseUint(string(digits), 16)
	if overflow || u > 1<<63-1 {
		return 1<<63 - 1 // strtol saturates
	}
	return int64(u)
}

func (b *sysBuilder) addPCI(e *Element, parent *Node, sysID int) error {
	class, err := b.attr(e, "class")
	if err != nil {
		return err
	}
	typ := NodeType(dictPCIClass.lookup(class))
	busStr, err := b.attr(e, "busid")
	if err != nil {
		return err
	}
	busID := BusIDToInt(busStr)
	var node *Node
	if g := firstChild(e, "gpu"); g != nil {
		typ = GPU
		if _, ok := g.Get("rank"); !ok {
			return nil // NCCL skips GPUs without a rank, with their whole pci element
		}
		if node, err = b.s.createNode(GPU, topoID(sysID, busID)); err != nil {
			return xmlError(b.file, e, "%v", err)
		}
		for _, f := range []struct {
			key string
			dst *int
		}{{"sm", &node.GPU.SM}, {"rank", &node.GPU.Rank}, {"dev", &node.GPU.Dev}, {"gdr", &node.GPU.GDR}} {
			if *f.dst, err = b.attrInt(g, f.key); err != nil {
				return err
			}
		}
	}
	if n := firstChild(e, "nic"); n != nil {
		typ = NIC
		id := topoID(sysID, busID)
		nic := b.s.NodeByID(NIC, id)
		if nic == nil {
			if nic, err = b.s.createNode(NIC, id); err != nil {
				return xmlError(b.file, e, "%v", err)
			}
			node = nic
		}
		if err := b.addNIC(n, nic, sysID); err != nil {
			return err
		}
	} else if typ == PCI {
		if node, err = b.s.createNode(PCI, topoID(sysID, busID)); err != nil {
			return xmlError(b.file, e, "%v", err)
		}
		for i, key := range []string{"vendor", "device", "subsystem_vendor", "subsystem_device"} {
			id, err := b.attrIntDefault(e, key, 0)
			if err != nil {
				return err
			}
			node.Device += uint64(id) << (48 - 16*i)
		}
		for _, c := range e.Children {
			if c.Name != "pcilink" {
				if err := b.addPCI(c, node, sysID); err != nil {
					return err
				}
			}
		}
	}
	if node == nil {
		return nil
	}
	width, err := b.attrInt(e, "link_width")
	if err != nil {
		return err
	}
	speed, err := b.attr(e, "link_speed")
	if err != nil {
		return err
	}
	bw := PCILinkBW(speed, width)
	if err := b.connectBoth(e, node, parent, LinkPCI, bw); err != nil {
		return err
	}
	return nil
}

func firstChild(e *Element, name string) *Element {
	for _, c := range e.Children {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (b *sysBuilder) addNIC(e *Element, nic *Node, sysID int) error {
	for _, c := range e.Children {
		if c.Name != "net" {
			continue
		}
		if _, ok := c.Get("dev"); !ok {
			continue // NCCL ignores nets without a device index
		}
		if err := b.addNET(c, nic, sysID); err != nil {
			return err
		}
	}
	return nil
}

func (b *sysBuilder) addNET(e *Element, nic *Node, sysID int) error {
	dev, err := b.attrInt(e, "dev")
	if err != nil {
		return err
	}
	net, err := b.s.createNode(NET, topoID(sysID, int64(dev)))
	if err != nil {
		return xmlError(b.file, e, "%v", err)
	}
	n := &net.NET
	n.Dev = dev
	n.Name, _ = e.Get("name")
	if g, ok := e.Get("guid"); ok {
		// strtoull(guid, NULL, 16) (topo.cc ncclTopoAddNet): the 0x
		// prefix NCCL writes is optional.
		if _, n.Asic, err = attrNumber(b.file, e, "guid", g); err != nil {
			return err
		}
	} else {
		// topo.cc ncclTopoAddNet: without a guid the NET id (system id
		// and dev), unique within the host and across an MNNVL domain.
		n.Asic = topoID(sysID, int64(dev))
	}
	mbps, err := b.attrIntDefault(e, "speed", 0)
	if err != nil {
		return err
	}
	if mbps <= 0 {
		mbps = 10000 // topo.cc: "Some NICs define speed = -1"
	}
	n.BW = float32(float64(mbps) / 8000.0)
	if v, ok := e.Get("latency"); ok {
		lat, _, err := attrNumber(b.file, e, "latency", v)
		if err != nil {
			return err
		}
		n.Latency = float32(lat)
	}
	for _, f := range []struct {
		key string
		dst *int
		def int
	}{{"port", &n.Port, 0}, {"gdr", &n.GDR, 0}, {"maxconn", &n.MaxChannels, MaxChannels}, {"coll", &n.CollSupport, 0}} {
		if *f.dst, err = b.attrIntDefault(e, f.key, f.def); err != nil {
			return err
		}
	}
	if err := b.connectBoth(e, nic, net, LinkNET, n.BW); err != nil {
		return err
	}
	return nil
}

// findLocalCPU walks up the PCI tree from n to its CPU.
func findLocalCPU(n, from *Node) *Node {
	if n.Type == CPU {
		return n
	}
	for _, l := range n.Links {
		if l.Type == LinkPCI && l.Remote != from && (l.Remote.Type == PCI || l.Remote.Type == CPU) {
			if c := findLocalCPU(l.Remote, n); c != nil {
				return c
			}
		}
	}
	return nil
}

// walkBelowPCI visits every element below e with the bus id of its
// closest pci ancestor and the system id of its cpu, calling visit for
// elements named want.
func (b *sysBuilder) walkBelowPCI(e *Element, parentBus string, sysID int, want string, visit func(e *Element, parentBus string, sysID int) error) error {
	if e.Name == want {
		return visit(e, parentBus, sysID)
	}
	if e.Name == "cpu" {
		sysID = b.systemID(e)
	}
	bus := parentBus
	if v, ok := e.Get("busid"); ok {
		bus = v
	}
	for _, c := range e.Children {
		if err := b.walkBelowPCI(c, bus, sysID, want, visit); err != nil {
			return err
		}
	}
	return nil
}

// gpuLink finds the GPU owning an <nvlink> or <c2c> element and reads the
// element's link count.
func (b *sysBuilder) gpuLink(e *Element, parentBus string, sysID int) (*Node, int, error) {
	g := b.s.NodeByID(GPU, topoID(sysID, BusIDToInt(parentBus)))
	if g == nil {
		return nil, 0, xmlError(b.file, e, "<%s> under GPU %s, which is not in the system (its <gpu> lacks a rank)", e.Name, parentBus)
	}
	count, err := b.attrInt(e, "count")
	return g, count, err
}

func (b *sysBuilder) addNVLinks(root *Element) error {
	return b.walkBelowPCI(root, "", 0, "nvlink", func(e *Element, parentBus string, sysID int) error {
		gpu, count, err := b.gpuLink(e, parentBus, sysID)
		if err != nil {
			return err
		}
		tclass, err := b.attr(e, "tclass")
		if err != nil {
			return err
		}
		var remote *Node
		switch NodeType(dictPCIClass.lookup(tclass)) {
		case GPU:
			target, err := b.attr(e, "target")
			if err != nil {
				return err
			}
			remote = b.s.NodeByID(GPU, topoID(sysID, BusIDToInt(target)))
		case CPU:
			remote = findLocalCPU(gpu, nil)
		default:
			if len(b.s.Nodes[NVS]) == 0 {
				if remote, err = b.s.createNode(NVS, 0); err != nil {
					return xmlError(b.file, e, "%v", err)
				}
			} else {
				remote = b.s.Nodes[NVS][0]
			}
		}
		if remote == nil {
			return nil
		}
		bw := float32(count) * NVLinkBW(gpu.GPU.SM)
		if err := connect(gpu, remote, LinkNVL, bw); err != nil {
			return xmlError(b.file, e, "%v", err)
		}
		if remote.Type != GPU {
			if err := connect(remote, gpu, LinkNVL, bw); err != nil {
				return xmlError(b.file, e, "%v", err)
			}
		}
		return nil
	})
}

func (b *sysBuilder) addC2C(root *Element) error {
	return b.walkBelowPCI(root, "", 0, "c2c", func(e *Element, parentBus string, sysID int) error {
		gpu, count, err := b.gpuLink(e, parentBus, sysID)
		if err != nil {
			return err
		}
		bwMBs, err := b.attrInt(e, "bw")
		if err != nil {
			return err
		}
		cpu := findLocalCPU(gpu, nil)
		if cpu == nil {
			return nil
		}
		bw := float32(float64(bwMBs*count) / 1000.0)
		if err := b.connectBoth(e, gpu, cpu, LinkC2C, bw); err != nil {
			return err
		}
		return nil
	})
}

func (b *sysBuilder) addPCILinks(root *Element) error {
	return b.walkBelowPCI(root, "", 0, "pcilink", func(e *Element, parentBus string, sysID int) error {
		sw := b.s.NodeByID(PCI, topoID(sysID, BusIDToInt(parentBus)))
		if sw == nil {
			return xmlError(b.file, e, "<pcilink> under %s, which is not a PCI switch", parentBus)
		}
		target, err := b.attr(e, "target")
		if err != nil {
			return err
		}
		if remote := b.s.NodeByID(PCI, topoID(sysID, BusIDToInt(target))); remote != nil {
			if err := connect(sw, remote, LinkLOC, LocBW); err != nil {
				return xmlError(b.file, e, "%v", err)
			}
		}
		return nil
	})
}

// bcmGen returns the Broadcom PEX generation (4 or 5) of a switch's packed
// PCI ids at a given level of a two-level switch, or 0.
func bcmGen(device uint64, level int) int {
	masked := device & 0xfffffffffffff000
	if masked == 0x1000c0101000a000 {
		return 4
	}
	if masked == 0x1000c03010000000|uint64(level)*0x1000 {
		return 5
	}
	return 0
}

// flattenBcmSwitches merges the second level of Broadcom Gen4/Gen5
// switches into the first, as ncclTopoFlattenBcmSwitches does (including
// its restart, which resumes the scan at index 1).
func (s *System) flattenBcmSwitches() error {
	for i := 0; i < len(s.Nodes[PCI]); i++ {
		sw := s.Nodes[PCI][i]
		gen := bcmGen(sw.Device, 0)
		if gen == 0 {
			continue
		}
		var subs []*Node
		kept := sw.Links[:0:0]
		for _, l := range sw.Links {
			if l.Remote.Type == PCI && bcmGen(l.Remote.Device, 1) == gen {
				subs = append(subs, l.Remote)
				continue
			}
			kept = append(kept, l)
		}
		sw.Links = kept
		for k, sub := range subs {
			if containsNode(subs[:k], sub) {
				// NCCL looks the sub-switch up again by id and fails.
				return fmt.Errorf("flattening PCI switch %s: linked twice to sub-switch %s", sw.Name(), sub.Name())
			}
			for _, l := range sub.Links {
				rem := l.Remote
				if rem == sw {
					continue
				}
				if len(sw.Links) == MaxLinksPerNode {
					return fmt.Errorf("flattening PCI switch %s: more than %d links", sw.Name(), MaxLinksPerNode)
				}
				sw.Links = append(sw.Links, &Link{Type: l.Type, BW: l.BW, Remote: rem})
				for _, rl := range rem.Links {
					if rl.Remote == sub {
						rl.Remote = sw
						break
					}
				}
			}
			s.removeNode(sub)
		}
		sw.Device |= 0xffff
		i = 0 // NCCL sets s=0 then its loop increments: the scan resumes at 1
	}
	return nil
}

func interCPUBW(c *Node) float32 {
	switch {
	case c.CPU.Arch == CPUArchPower:
		return p9BW
	case c.CPU.Arch == CPUArchARM:
		return armBW
	case c.CPU.Arch == CPUArchX86 && c.CPU.Vendor == CPUVendorIntel:
		switch c.CPU.Model {
		case CPUModelIntelERP:
			return erpQPIBW
		case CPUModelIntelSRP:
			return srpQPIBW
		case CPUModelIntelSKL:
			return sklQPIBW
		}
		return bdwQPIBW
	case c.CPU.Arch == CPUArchX86 && c.CPU.Vendor == CPUVendorAMD:
		return amdBW
	case c.CPU.Arch == CPUArchX86 && c.CPU.Vendor == CPUVendorZhaoxin:
		if c.CPU.Model == CPUModelYongfeng {
			return yongfengBW
		}
		return zpiBW
	}
	return LocBW
}

func (s *System) connectCPUs() error {
	for _, c1 := range s.Nodes[CPU] {
		for _, c2 := range s.Nodes[CPU] {
			if c1 == c2 || SystemIDOf(c1.ID) != SystemIDOf(c2.ID) {
				continue
			}
			if err := connect(c1, c2, LinkSYS, interCPUBW(c1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// sortLinks moves, on every node below a CPU in the PCI tree, the link back
// to its parent to the end of its link list (ncclTopoSortSystem).
func (s *System) sortLinks() {
	var sortRec func(n, up *Node)
	sortRec = func(n, up *Node) {
		if up != nil {
			for i, l := range n.Links {
				if l.Remote == up {
					copy(n.Links[i:], n.Links[i+1:])
					n.Links[len(n.Links)-1] = l
					break
				}
			}
		}
		for _, l := range n.Links {
			if l.Type == LinkPCI && l.Remote != up {
				sortRec(l.Remote, n)
			}
		}
	}
	for _, c := range s.Nodes[CPU] {
		sortRec(c, nil)
	}
}

// String summarises the system's node counts.
func (s *System) String() string {
	var parts []string
	for t := range s.Nodes {
		if n := len(s.Nodes[t]); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, NodeType(t)))
		}
	}
	return strings.Join(parts, ", ")
}
