package model

import "fmt"

// NodeType is the kind of a System node, numbered as in NCCL 2.28 (topo.h).
type NodeType int

// Node types.
const (
	GPU NodeType = iota
	PCI
	NVS
	CPU
	NIC
	NET
	NumNodeTypes = 6
)

var nodeTypeNames = [NumNodeTypes]string{"GPU", "PCI", "NVS", "CPU", "NIC", "NET"}

func (t NodeType) String() string {
	if t >= 0 && int(t) < NumNodeTypes {
		return nodeTypeNames[t]
	}
	return fmt.Sprintf("NodeType(%d)", int(t))
}

// LinkType is the kind of a link; values line up with PathType on purpose.
type LinkType int

// Link types.
const (
	LinkLOC LinkType = 0
	LinkNVL LinkType = 1
	LinkC2C LinkType = 3
	LinkPCI LinkType = 4
	LinkSYS LinkType = 9
	LinkNET LinkType = 10
)

var linkTypeNames = map[LinkType]string{LinkLOC: "LOC", LinkNVL: "NVL", LinkC2C: "C2C", LinkPCI: "PCI", LinkSYS: "SYS", LinkNET: "NET"}

func (t LinkType) String() string {
	if s, ok := linkTypeNames[t]; ok {
		return s
	}
	return fmt.Sprintf("LinkType(%d)", int(t))
}

// PathType classifies a path between two nodes, from closest (LOC) to
// unreachable (DIS), numbered as in NCCL >= 2.27.7.
type PathType int

// Path types.
const (
	PathLOC PathType = iota // same node
	PathNVL                 // direct NVLink (possibly through NVSwitch)
	PathNVB                 // NVLink through an intermediate GPU
	PathC2C                 // chip-to-chip link to the CPU (Grace)
	PathPIX                 // at most one PCIe switch
	PathPXB                 // several PCIe switches, no host bridge
	PathP2C                 // GPU C2C to CPU then PCIe to the NIC
	PathPXN                 // through an NVLinked GPU that is close to the NIC
	PathPHB                 // through a CPU host bridge
	PathSYS                 // across CPU sockets (SMP interconnect)
	PathNET                 // across the network
	PathDIS                 // disconnected
)

// PathTypeNames are NCCL's strings for path types (topoPathTypeStr).
var PathTypeNames = [...]string{"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"}

func (t PathType) String() string {
	if t >= 0 && int(t) < len(PathTypeNames) {
		return PathTypeNames[t]
	}
	return fmt.Sprintf("PathType(%d)", int(t))
}

// ParsePathType maps an NCCL path type string (e.g. "PXB") to its value.
func ParsePathType(s string) (PathType, bool) {
	for i, n := range PathTypeNames {
		if n == s {
			return PathType(i), true
		}
	}
	return 0, false
}

// Bandwidth constants of NCCL 2.28 (topo.h), in GB/s.
const (
	LocBW        = 5000.0
	sm60NVLinkBW = 18.0
	sm70NVLinkBW = 20.0
	sm80NVLinkBW = 20.0
	sm86NVLinkBW = 12.0
	sm90NVLinkBW = 20.6
	sm100NVLink  = 40.1
	PCIBW        = 12.0 // Gen3 x16, used by the tuner
	amdBW        = 16.0
	bdwQPIBW     = 6.0
	sklQPIBW     = 10.0
	srpQPIBW     = 22.0
	erpQPIBW     = 40.0
	zpiBW        = 6.0
	yongfengBW   = 9.0
	p9BW         = 32.0
	armBW        = 6.0
)

// NVLinkBW returns the per-link NVLink bandwidth NCCL assumes for a GPU of
// compute capability sm (major*10+minor).
func NVLinkBW(sm int) float32 {
	switch {
	case sm >= 100:
		return sm100NVLink
	case sm >= 90:
		return sm90NVLinkBW
	case sm == 86:
		return sm86NVLinkBW
	case sm >= 80:
		return sm80NVLinkBW
	case sm >= 70:
		return sm70NVLinkBW
	case sm >= 60:
		return sm60NVLinkBW
	}
	return sm80NVLinkBW
}

// CPU architecture, vendor and model codes (NCCL_TOPO_CPU_*). Undef (-1)
// marks a value the XML did not set.
const (
	Undef = -1

	CPUArchX86   = 1
	CPUArchPower = 2
	CPUArchARM   = 3

	CPUVendorIntel   = 1
	CPUVendorAMD     = 2
	CPUVendorZhaoxin = 3

	CPUModelIntelBDW = 1
	CPUModelIntelSKL = 2
	CPUModelIntelSRP = 3
	CPUModelIntelERP = 4
	CPUModelYongfeng = 1
)

// Limits of NCCL's system graph (topo.h).
const (
	MaxNodesPerType = 576 // NCCL_TOPO_MAX_NODES
	MaxLinksPerNode = 576 // NCCL_TOPO_MAX_LINKS
	MaxChannels     = 64  // MAXCHANNELS
)

// prefixDict is one of NCCL's string dictionaries: an input matches the first
// entry it starts with; no match gives the fallback.
type prefixDict struct {
	entries  []prefixEntry
	fallback int
}

type prefixEntry struct {
	prefix string
	value  int
}

func (d prefixDict) lookup(s string) int {
	for _, e := range d.entries {
		if len(s) >= len(e.prefix) && s[:len(e.prefix)] == e.prefix {
			return e.value
		}
	}
	return d.fallback
}

var (
	dictCPUArch   = prefixDict{[]prefixEntry{{"x86_64", CPUArchX86}, {"arm64", CPUArchARM}, {"ppc64", CPUArchPower}}, 0}
	dictCPUVendor = prefixDict{[]prefixEntry{{"GenuineIntel", CPUVendorIntel}, {"AuthenticAMD", CPUVendorAMD}, {"CentaurHauls", CPUVendorZhaoxin}, {"  Shanghai  ", CPUVendorZhaoxin}}, 0}
	// PCI class -> node type. Unknown classes are PCI switches.
	dictPCIClass = prefixDict{[]prefixEntry{{"0x060400", int(PCI)}, {"0x080100", int(PCI)}, {"0x068000", int(NVS)}, {"0x068001", int(CPU)}, {"0x03", int(GPU)}, {"0x02", int(NIC)}}, int(PCI)}
	// PCI link speed string -> per-lane rate in units of 100 Mb/s.
	dictPCIGen = prefixDict{[]prefixEntry{
		{"2.5 GT/s", 15}, {"5 GT/s", 30}, {"8 GT/s", 60}, {"16 GT/s", 120}, {"32 GT/s", 240},
		{"2.5 GT/s PCIe", 15}, {"5.0 GT/s PCIe", 30}, {"8.0 GT/s PCIe", 60}, {"16.0 GT/s PCIe", 120}, {"32.0 GT/s PCIe", 240}, {"64.0 GT/s PCIe", 480},
	}, 60}
)

// PCILinkBW returns the bandwidth (GB/s) NCCL derives from a pci element's
// link_speed and link_width attributes (width 0 means 16 lanes).
func PCILinkBW(speed string, width int) float32 {
	if width == 0 {
		width = 16
	}
	return float32(float64(width*dictPCIGen.lookup(speed)) / 80.0)
}
