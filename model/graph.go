package model

import "fmt"

// Pattern is the shape of a channel graph (NCCL_TOPO_PATTERN_*).
type Pattern int

// Graph patterns, numbered as in NCCL.
const (
	PatternBalancedTree  Pattern = 1 // intra-node chain; NET enters at GPU0, leaves at GPU0, GPU1 holds one child
	PatternSplitTree     Pattern = 2 // NET enters at GPU0 and leaves at GPU1
	PatternTree          Pattern = 3 // NET enters and leaves at GPU0
	PatternRing          Pattern = 4
	PatternNVLS          Pattern = 5
	PatternCollNetDirect Pattern = 6
)

var patternNames = map[Pattern]string{
	PatternBalancedTree: "BALANCED_TREE", PatternSplitTree: "SPLIT_TREE", PatternTree: "TREE",
	PatternRing: "RING", PatternNVLS: "NVLS", PatternCollNetDirect: "COLLNET_DIRECT",
}

func (p Pattern) String() string {
	if s, ok := patternNames[p]; ok {
		return s
	}
	return fmt.Sprintf("Pattern(%d)", int(p))
}

// GraphID identifies the graphs NCCL computes at init.
type GraphID int

// Graph ids, as in NCCL (the index into comm->graphs).
const (
	GraphRing          GraphID = 0
	GraphTree          GraphID = 1
	GraphCollNetChain  GraphID = 2
	GraphNVLS          GraphID = 3
	GraphCollNetDirect GraphID = 4
	NumGraphs                  = 5
)

// GraphOrder is the order in which NCCL computes, prints and dumps the
// graphs (ring, tree, collnet direct, collnet chain, nvls).
var GraphOrder = [NumGraphs]GraphID{GraphRing, GraphTree, GraphCollNetDirect, GraphCollNetChain, GraphNVLS}

// NoNet marks an absent NET in GraphChannel.Inter (intra-node graphs).
const NoNet int64 = -1

// GraphChannel is one channel of a graph: the ranks it visits in order
// and, for inter-node graphs, the NET ids it enters and leaves through.
type GraphChannel struct {
	Intra []int    // ranks, in channel order (NVLS: only Intra[0], the head, is meaningful)
	Inter [2]int64 // entry and exit NET node ids; NoNet when the graph is intra-node
}

// Graph is the result of NCCL's channel search (struct ncclTopoGraph) for
// one pattern on one node's system.
type Graph struct {
	ID      GraphID
	Pattern Pattern
	CollNet bool
	// MinChannels and MaxChannels bound the search (inputs).
	MinChannels, MaxChannels int

	Channels     []GraphChannel // len == NChannels
	BWIntra      float32        // GB/s per channel inside the node
	BWInter      float32        // GB/s per channel through the NET
	LatencyInter float32        // µs, latency of the chosen NET
	TypeIntra    PathType       // worst GPU-GPU path type allowed by the solution
	TypeInter    PathType       // worst GPU-NET path type allowed by the solution
	SameChannels int            // 1: every channel has the same GPU order
	NHops        int
	CrossNic     int // 0, 1, or 2 (channel pairs may cross NICs)
}

// NChannels is the number of channels of the graph.
func (g *Graph) NChannels() int { return len(g.Channels) }

// Clone returns a deep copy of g.
func (g *Graph) Clone() *Graph {
	c := *g
	c.Channels = make([]GraphChannel, len(g.Channels))
	for i, ch := range g.Channels {
		c.Channels[i] = GraphChannel{Intra: append([]int(nil), ch.Intra...), Inter: ch.Inter}
	}
	return &c
}

// EmptyGraph is a graph that was not computed (NVLS or CollNet disabled):
// NCCL leaves such a graph zeroed except for its id, pattern and collNet.
func EmptyGraph(id GraphID) *Graph {
	g := &Graph{ID: id, TypeIntra: PathLOC, TypeInter: PathLOC}
	switch id {
	case GraphRing:
		g.Pattern = PatternRing
	case GraphTree:
		g.Pattern = PatternBalancedTree
	case GraphCollNetChain:
		g.Pattern, g.CollNet = PatternTree, true
	case GraphNVLS:
		g.Pattern = PatternNVLS
	case GraphCollNetDirect:
		g.Pattern, g.CollNet = PatternCollNetDirect, true
	}
	return g
}
