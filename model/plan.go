package model

// TreeArity is the most children a rank has in a tree (NCCL_MAX_TREE_ARITY).
const TreeArity = 3

// RingLinks are a rank's neighbours on one channel's ring.
type RingLinks struct {
	Prev, Next int
}

// TreeLinks are a rank's parent and children on one channel's tree; -1
// marks an absent neighbour.
type TreeLinks struct {
	Up   int
	Down [TreeArity]int
}

// RankChannels is what one rank's channels connect to.
type RankChannels struct {
	Rank      int
	Node      int // node index, numbered in order of first appearance by rank
	LocalRank int
	Ring      []RingLinks // per channel
	Tree      []TreeLinks // per channel
	// ConnectTree are the tree links of channels 0..2*Plan.TreeChannels-1
	// as NCCL's connectTrees left them, before NCCL_MAX_NCHANNELS or the
	// CTA bounds cut the channel count (NCCL logs these "Tree" lines).
	ConnectTree []TreeLinks
}

// Plan is what NCCL decides at communicator init for a cluster: the graphs
// each node searched, the graphs after cross-rank alignment, and per channel
// the ring and tree neighbours of every rank (ncclTopoPreset/Postset), plus
// the channel counts that the collective and p2p paths use.
type Plan struct {
	NRanks int
	NNodes int
	MNNVL  bool // GPUs of several hosts share one NVLink fabric
	// NodeGraphs[n] are the graphs node n computed, before alignment, indexed
	// by GraphID.
	NodeGraphs [][NumGraphs]*Graph
	// Graphs are the graphs after cross-rank alignment, indexed by GraphID.
	Graphs [NumGraphs]*Graph
	// MaxTreePattern is the largest tree pattern among the nodes.
	MaxTreePattern Pattern

	NChannels              int // channels after Postset (ring/tree doubling, NCCL_MIN/MAX_NCHANNELS)
	CollChannels           int
	NVLSChannels           int
	P2PChannels            int     // p2pnChannels
	P2PChannelsPerPeer     int     // p2pnChannelsPerPeer
	TreeDepth              int     // tree depth approximation used by the tuner
	Rings                  [][]int // per channel: the ring order starting at rank 0
	Ranks                  []RankChannels
	MinCompCap, MaxCompCap int // smallest and largest sm among all GPUs
	// TreeChannels is the channel count when trees were connected: channel c
	// and channel c+TreeChannels carry the two trees of the double binary tree.
	TreeChannels int

	// NodeAlignedGraphs[n] are the graphs as the ranks of input node n
	// hold them after alignment: NodeGraphs[n] with the aligned nChannels,
	// sameChannels, bandwidths, path types and crossNic, and their channel
	// list cut to the aligned count. Graphs is the view of the node that
	// holds rank 0.
	NodeAlignedGraphs [][NumGraphs]*Graph
	// NodeRanks[n] lists the ranks of NCCL node n (RankChannels.Node) in
	// local-rank order (comm->nodeRanks[n].localRankToRank). NCCL tells
	// nodes apart by the first GPU of ring channel 0, so an MNNVL domain
	// that spans several hosts is one node.
	NodeRanks [][]int
	// MinLocalRanks and MaxLocalRanks are the fewest and the most ranks of
	// an NCCL node.
	MinLocalRanks, MaxLocalRanks int
	// CollNetSupport is CollNet's state at the end of init
	// (config.collnetEnable after the CollNet chain alignment and the
	// node-count threshold).
	CollNetSupport bool
	// NVLSSupport is NVLS's state at the end of init: every rank found NVLS
	// channels and NVLSChannels is not zero.
	NVLSSupport bool
}
