package search

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// ConnectUnset marks a channel-count parameter of ConnectOptions that was
// not set (NCCL's NCCL_PARAM default of -2 for these parameters).
const ConnectUnset = -2

// ConnectOptions are the NCCL settings that the channel wiring of NCCL
// 2.28.9 reads (ncclTopoPostset, ncclTopoComputeP2pChannels, NVLS init).
// Build them with DefaultConnectOptions or ConnectOptionsFromEnv.
type ConnectOptions struct {
	// MinNChannels and MaxNChannels are NCCL_MIN_NCHANNELS and
	// NCCL_MAX_NCHANNELS; MinNRings and MaxNRings are their legacy names
	// NCCL_MIN_NRINGS and NCCL_MAX_NRINGS, which the new names override.
	// ConnectUnset means not set. Every value is accepted and clamped as
	// ncclMinNchannels and ncclMaxNchannels do: the minimum to 0..64, the
	// maximum to what WorkArgsBytes allows and to 1..64.
	MinNChannels, MaxNChannels int
	MinNRings, MaxNRings       int
	// WorkArgsBytes is NCCL_WORK_ARGS_BYTES, the kernel argument space
	// (default math.MaxInt64). It bounds the channel count at
	// (WorkArgsBytes-32)/16 and p2pnChannels at the power of two at or
	// below that (at least 1, where NCCL's pow2Down(0) is undefined); a
	// value below 32 wraps around in NCCL's unsigned arithmetic and bounds
	// nothing.
	WorkArgsBytes int64
	// MinCTAs and MaxCTAs are the communicator's config.minCTAs and
	// config.maxCTAs (NCCL_MIN_CTAS and NCCL_MAX_CTAS; default 1 and 64).
	// Connect rejects values below 1, as ncclCommInitRankConfig does, caps
	// both at 64 and lowers MinCTAs to MaxCTAs when it is larger, as
	// NCCL's envConfigOverride does.
	MinCTAs, MaxCTAs int
	// NVLSCTAs is config.nvlsCTAs (NCCL_NVLS_NCHANNELS), the NVLS channel
	// count; 0 or less selects NCCL's default for the architecture (16,
	// on sm100 and later 24 within one NVLink domain and 32 across
	// several).
	NVLSCTAs int
	// NChannelsPerNetPeer is config.nChannelsPerNetPeer
	// (NCCL_NCHANNELS_PER_NET_PEER): the p2p channels toward a peer reached
	// through the network. 0 means not set: NCCL then uses 2, halved while
	// 2*nRanks > 4*p2pnChannels, and at least the number of local NICs
	// needed to match the GPU's bandwidth. Negative values are rejected.
	NChannelsPerNetPeer int
	// MinP2PNChannels and MaxP2PNChannels are NCCL_MIN_P2P_NCHANNELS
	// (default 1) and NCCL_MAX_P2P_NCHANNELS (default 64), used unclamped
	// as NCCL does; the power-of-two rounding and the kernel argument
	// limit bound the result.
	MinP2PNChannels, MaxP2PNChannels int
	// UnpackDoubleNChannels is NCCL_UNPACK_DOUBLE_NCHANNELS (default on):
	// with an unpack network device and several nodes, fewer than 16
	// channels are doubled.
	UnpackDoubleNChannels bool
	// NetDeviceUnpack says the network plugin's device type is
	// NCCL_NET_DEVICE_UNPACK (device-side unpacking, e.g. GPUDirect TCPX).
	// Topology files do not record it; default off.
	NetDeviceUnpack bool
	// CollNetEnable is config.collnetEnable after NCCL's local check:
	// NCCL_COLLNET_ENABLE=1 with a network plugin that offers CollNet.
	CollNetEnable bool
	// CollNetNodeThreshold is NCCL_COLLNET_NODE_THRESHOLD (default 2):
	// CollNet is dropped on fewer nodes.
	CollNetNodeThreshold int
}

// DefaultConnectOptions returns NCCL 2.28.9's defaults.
func DefaultConnectOptions() ConnectOptions {
	return ConnectOptions{
		MinNChannels: ConnectUnset, MaxNChannels: ConnectUnset, MinNRings: ConnectUnset, MaxNRings: ConnectUnset,
		WorkArgsBytes: math.MaxInt64,
		MinCTAs:       1, MaxCTAs: model.MaxChannels,
		MinP2PNChannels: 1, MaxP2PNChannels: model.MaxChannels,
		UnpackDoubleNChannels: true,
		CollNetNodeThreshold:  2,
	}
}

// ConnectEnvNames lists the environment variables ConnectOptionsFromEnv
// reads.
var ConnectEnvNames = []string{
	"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS", "NCCL_WORK_ARGS_BYTES",
	"NCCL_MIN_CTAS", "NCCL_MAX_CTAS", "NCCL_NVLS_NCHANNELS", "NCCL_NCHANNELS_PER_NET_PEER",
	"NCCL_MIN_P2P_NCHANNELS", "NCCL_MAX_P2P_NCHANNELS", "NCCL_UNPACK_DOUBLE_NCHANNELS",
	"NCCL_COLLNET_ENABLE", "NCCL_COLLNET_NODE_THRESHOLD",
}

// ConnectOptionsFromEnv reads the wiring settings through lookup
// (os.LookupEnv when nil). An unset or empty variable keeps the default.
// A value that is not an integer (C strtoll syntax: decimal, 0x hex or
// leading-0 octal), or does not fit NCCL's integer type, is an error naming
// the variable (NCCL would silently keep the default). Integers are taken
// as NCCL 2.28.9 takes them: NCCL_MIN_CTAS, NCCL_MAX_CTAS and
// NCCL_NCHANNELS_PER_NET_PEER at or below 0 are ignored, NCCL_NVLS_NCHANNELS
// at or below 0 means the default, the CTA bounds are capped at 64 with the
// minimum lowered to the maximum, NCCL_COLLNET_ENABLE other than 0 or 1
// means 0, and the channel counts are clamped where they are used (see
// ConnectOptions). CollNetEnable assumes the network plugin offers CollNet.
// Where NCCL logs that it ignores or corrects a value, a warning naming
// the variable and value says so (envWarn).
func ConnectOptionsFromEnv(lookup func(string) (string, bool)) (ConnectOptions, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	o := DefaultConnectOptions()
	get := func(name string, bits int) (int64, bool, error) { return model.LookupEnvInt(lookup, name, bits) }
	ints := []struct {
		name string
		dst  *int
	}{
		{"NCCL_MIN_NRINGS", &o.MinNRings}, {"NCCL_MAX_NRINGS", &o.MaxNRings},
		{"NCCL_MIN_NCHANNELS", &o.MinNChannels}, {"NCCL_MAX_NCHANNELS", &o.MaxNChannels},
		{"NCCL_MIN_P2P_NCHANNELS", &o.MinP2PNChannels}, {"NCCL_MAX_P2P_NCHANNELS", &o.MaxP2PNChannels},
		{"NCCL_COLLNET_NODE_THRESHOLD", &o.CollNetNodeThreshold},
	}
	for _, p := range ints {
		v, ok, err := get(p.name, 32)
		if err != nil {
			return o, err
		}
		if ok {
			*p.dst = int(v)
		}
	}
	if v, ok, err := get("NCCL_WORK_ARGS_BYTES", 64); err != nil {
		return o, err
	} else if ok {
		o.WorkArgsBytes = v
	}
	positive := []struct {
		name string
		dst  *int
	}{
		{"NCCL_MIN_CTAS", &o.MinCTAs}, {"NCCL_MAX_CTAS", &o.MaxCTAs},
		{"NCCL_NCHANNELS_PER_NET_PEER", &o.NChannelsPerNetPeer}, {"NCCL_NVLS_NCHANNELS", &o.NVLSCTAs},
	}
	for _, p := range positive {
		v, ok, err := get(p.name, 32)
		if err != nil {
			return o, err
		}
		if ok && v > 0 {
			*p.dst = int(v)
		}
	}
	if v, ok, err := get("NCCL_UNPACK_DOUBLE_NCHANNELS", 64); err != nil {
		return o, err
	} else if ok {
		o.UnpackDoubleNChannels = v != 0
	}
	if v, ok, err := get("NCCL_COLLNET_ENABLE", 32); err != nil {
		return o, err
	} else if ok {
		o.CollNetEnable = v == 1
	}
	o.MinCTAs, o.MaxCTAs = connectCapCTAs(o.MinCTAs, o.MaxCTAs)
	connectEnvWarnings(lookup, o)
	return o, nil
}

// envWarn prints a warning (slog) about the NCCL setting name=value of
// lookup: what NCCL 2.28.9 does with it (msg, its own INFO line where it
// logs one) and where (src).
func envWarn(lookup func(string) (string, bool), name, msg, src string) {
	v, _ := lookup(name)
	slog.Warn(fmt.Sprintf("%s=%s: %s (NCCL 2.28.9 %s)", name, v, msg, src))
}

// connectEnvWarnings warns about the settings NCCL 2.28.9 reads and then
// ignores or corrects, as it logs them (NCCL_DEBUG=INFO); o holds the
// values read.
func connectEnvWarnings(lookup func(string) (string, bool), o ConnectOptions) {
	set := func(name string) bool { v, ok := lookup(name); return ok && strings.TrimSpace(v) != "" }
	// src/graph/connect.cc ncclMinNchannels: NCCL_MIN_NCHANNELS (else
	// NCCL_MIN_NRINGS; -2 is unset) above MAXCHANNELS is limited to it,
	// below 0 set to 0.
	minName, n := "", 0
	switch {
	case o.MinNChannels != ConnectUnset:
		minName, n = "NCCL_MIN_NCHANNELS", o.MinNChannels
	case o.MinNRings != ConnectUnset:
		minName, n = "NCCL_MIN_NRINGS", o.MinNRings
	}
	if minName != "" {
		switch {
		case n > model.MaxChannels:
			envWarn(lookup, minName, fmt.Sprintf("User asked for a minimum of %d channels, limiting to %d", n, model.MaxChannels), "src/graph/connect.cc ncclMinNchannels")
		case n < 0:
			envWarn(lookup, minName, "a negative minimum is taken as 0", "src/graph/connect.cc ncclMinNchannels")
		}
	}
	// ncclMaxNchannels: NCCL_MAX_NCHANNELS (else NCCL_MAX_NRINGS), bounded
	// by what NCCL_WORK_ARGS_BYTES allows, below 1 is set to 1, above
	// MAXCHANNELS limited to it.
	maxName, n := "", model.MaxChannels
	switch {
	case o.MaxNChannels != ConnectUnset:
		maxName, n = "NCCL_MAX_NCHANNELS", o.MaxNChannels
	case o.MaxNRings != ConnectUnset:
		maxName, n = "NCCL_MAX_NRINGS", o.MaxNRings
	}
	if maxName != "" && n > model.MaxChannels {
		envWarn(lookup, maxName, fmt.Sprintf("a maximum of %d channels is limited to %d (MAXCHANNELS)", n, model.MaxChannels), "src/graph/connect.cc ncclMaxNchannels")
	}
	if args := maxChannelsForArgsBytes(o.WorkArgsBytes); args < n {
		n = args
		if n < 1 {
			maxName = "NCCL_WORK_ARGS_BYTES"
		}
	}
	if maxName != "" && n < 1 {
		envWarn(lookup, maxName, fmt.Sprintf("User asked for a maximum of %d channels, setting it to 1", n), "src/graph/connect.cc ncclMaxNchannels")
	}
	// src/init.cc envConfigOverride: CTA bounds and the per-peer and NVLS
	// channel counts at or below 0 are ignored; CTA bounds above
	// MAXCHANNELS are capped, and a minimum above the maximum lowered.
	for _, c := range []struct{ name, field string }{
		{"NCCL_MIN_CTAS", "minCTAs"}, {"NCCL_MAX_CTAS", "maxCTAs"}, {"NCCL_NCHANNELS_PER_NET_PEER", "nChannelsPerNetPeer"},
	} {
		if v, ok, _ := model.LookupEnvInt(lookup, c.name, 32); ok && v <= 0 {
			envWarn(lookup, c.name, fmt.Sprintf("%s %d is too low, leaving %s at its default", c.name, v, c.field), "src/init.cc envConfigOverride")
		} else if ok && v > model.MaxChannels && c.field != "nChannelsPerNetPeer" {
			envWarn(lookup, c.name, fmt.Sprintf("%s %d is larger than #channels upper limit %d, cap it to %d", c.field, v, model.MaxChannels, model.MaxChannels), "src/init.cc envConfigOverride")
		}
	}
	if set("NCCL_MIN_CTAS") && set("NCCL_MAX_CTAS") {
		lo, _, _ := model.LookupEnvInt(lookup, "NCCL_MIN_CTAS", 32)
		hi, _, _ := model.LookupEnvInt(lookup, "NCCL_MAX_CTAS", 32)
		if lo > 0 && hi > 0 && min(lo, model.MaxChannels) > min(hi, model.MaxChannels) {
			envWarn(lookup, "NCCL_MIN_CTAS", fmt.Sprintf("minCTAs %d is larger than maxCTAs %d, set both to %d", min(lo, model.MaxChannels), o.MaxCTAs, o.MaxCTAs), "src/init.cc envConfigOverride")
		}
	}
	if v, ok, _ := model.LookupEnvInt(lookup, "NCCL_NVLS_NCHANNELS", 32); ok && v <= 0 {
		envWarn(lookup, "NCCL_NVLS_NCHANNELS", fmt.Sprintf("nvlsCTAs %d is not a valid value, NCCL will decide the default value automatically", v), "src/init.cc envConfigOverride")
	}
	if v, ok, _ := model.LookupEnvInt(lookup, "NCCL_COLLNET_ENABLE", 32); ok && v != 0 && v != 1 {
		envWarn(lookup, "NCCL_COLLNET_ENABLE", fmt.Sprintf("collnetEnable %d is not a valid value 0/1, set it to 0", v), "src/init.cc envConfigOverride")
	}
}

// connectCapCTAs caps the CTA bounds as envConfigOverride does.
func connectCapCTAs(minCTAs, maxCTAs int) (int, int) {
	minCTAs = min(minCTAs, model.MaxChannels)
	maxCTAs = min(maxCTAs, model.MaxChannels)
	return min(minCTAs, maxCTAs), maxCTAs
}

// maxChannelsForArgsBytes is ncclDevMaxChannelsForArgsBytes: the channels
// whose work batches (16 bytes each) fit in the kernel arguments after the
// 32-byte ncclDevKernelArgs header, computed in size_t as NCCL does.
func maxChannelsForArgsBytes(argsBytes int64) int {
	room := uint64(argsBytes) - 32
	return int(min(uint64(model.MaxChannels), room/16))
}

// minNChannels is ncclMinNchannels.
func (o ConnectOptions) minNChannels() int {
	n := 0
	if o.MinNRings != ConnectUnset {
		n = o.MinNRings
	}
	if o.MinNChannels != ConnectUnset {
		n = o.MinNChannels
	}
	return max(min(n, model.MaxChannels), 0)
}

// maxNChannels is ncclMaxNchannels.
func (o ConnectOptions) maxNChannels() int {
	n := model.MaxChannels
	if o.MaxNRings != ConnectUnset {
		n = o.MaxNRings
	}
	if o.MaxNChannels != ConnectUnset {
		n = o.MaxNChannels
	}
	n = min(n, maxChannelsForArgsBytes(o.WorkArgsBytes), model.MaxChannels)
	return max(n, 1)
}

// connChannel is what one rank's channel holds after wiring.
type connChannel struct {
	prev, next int // ring neighbours
	up         int
	down       [model.TreeArity]int
}

// connRank is one rank's state through ncclTopoPreset and
// ncclTopoPostset: the graphs its node searched, the ncclTopoRanks it
// publishes and its channels.
type connRank struct {
	rank   int
	cnode  int // index of its node in the cluster
	sys    *model.System
	sm     int
	graphs *[model.NumGraphs]*model.Graph
	nOrig  int // comm->nChannels at Preset time

	ringRecv, ringSend, ringPrev, ringNext   [model.MaxChannels]int
	treeToParent, treeToChild0, treeToChild1 [model.MaxChannels]int
	crossNicRing                             int
	nvlsHeads                                []int

	ch           [model.MaxChannels]connChannel
	nvlsChannels int
}

// graphScalars are the per-graph values NCCL aligns across ranks.
type graphScalars struct {
	nChannels, sameChannels int
	bwIntra, bwInter        float32
	typeIntra, typeInter    model.PathType
	crossNic                int
}

// Connect aligns the per-node graphs across ranks and wires every channel,
// as NCCL 2.28.9's initTransportsRank does between the graph search and
// the transport setup: ncclTopoPreset on every rank, the AllGather3
// alignment (min/max of the graph values over ranks, node numbering by the
// first GPU of ring channel 0), ncclTopoPostset (cross-NIC ring
// alternation on odd nodes, rings, double binary trees, channel doubling,
// CollNet growth, the sm90 multi-node doubling, NCCL_MIN/MAX_NCHANNELS,
// NVLS heads, ncclBuildRings) and ncclTopoComputeP2pChannels.
//
// nodeGraphs[n] are the graphs node n of c searched, indexed by GraphID (a
// nil graph stands for one that was not computed). Every rank uses the
// graphs of the node whose Ranks hold it; the intra-node lists of the ring,
// tree and CollNet chain graphs must be permutations of the ranks of that
// node's System. Values that describe the rank 0 view (Graphs, Rings,
// P2PChannelsPerPeer, NVLSChannels) are taken from rank 0, as NCCL logs
// them there.
func Connect(c *model.Cluster, nodeGraphs [][model.NumGraphs]*model.Graph, opts ConnectOptions) (*model.Plan, error) {
	if err := connectCheckOptions(opts); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	opts.MinCTAs, opts.MaxCTAs = connectCapCTAs(opts.MinCTAs, opts.MaxCTAs)
	ranks, graphs, err := connectRanks(c, nodeGraphs)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	nRanks := c.NRanks
	for _, r := range ranks {
		if err := r.preset(); err != nil {
			return nil, fmt.Errorf("connect: rank %d: %w", r.rank, err)
		}
		r.nvlsChannels = connectNVLSChannels(c, r, opts)
	}

	// AllGather3: node numbering by ring channel 0's first rank.
	var firstRanks []int
	rankToNode := make([]int, nRanks)
	for _, r := range ranks {
		node := 0
		for node < len(firstRanks) && firstRanks[node] != r.ringRecv[0] {
			node++
		}
		if node == len(firstRanks) {
			firstRanks = append(firstRanks, r.ringRecv[0])
		}
		rankToNode[r.rank] = node
	}
	nNodes := len(firstRanks)
	nodeRanks := make([][]int, nNodes)
	rankToLocal := make([]int, nRanks)
	for r := 0; r < nRanks; r++ {
		n := rankToNode[r]
		rankToLocal[r] = len(nodeRanks[n])
		nodeRanks[n] = append(nodeRanks[n], r)
	}

	// Alignment: minimum of channel counts and bandwidths, maximum of path
	// types and crossNic, over every rank.
	var aligned [model.NumGraphs]graphScalars
	var maxTreePattern model.Pattern
	for id := range aligned {
		for i, r := range ranks {
			g := r.graphs[id]
			s := graphScalars{g.NChannels(), g.SameChannels, g.BWIntra, g.BWInter, g.TypeIntra, g.TypeInter, g.CrossNic}
			if i == 0 {
				aligned[id] = s
				continue
			}
			a := &aligned[id]
			a.nChannels, a.sameChannels = min(a.nChannels, s.nChannels), min(a.sameChannels, s.sameChannels)
			a.bwIntra, a.bwInter = min(a.bwIntra, s.bwIntra), min(a.bwInter, s.bwInter)
			a.typeIntra, a.typeInter = max(a.typeIntra, s.typeIntra), max(a.typeInter, s.typeInter)
			a.crossNic = max(a.crossNic, s.crossNic)
		}
	}
	for _, r := range ranks {
		maxTreePattern = max(maxTreePattern, r.graphs[model.GraphTree].Pattern)
	}
	collNet := opts.CollNetEnable && aligned[model.GraphCollNetChain].nChannels > 0
	nvls := aligned[model.GraphNVLS].nChannels > 0
	if !nvls {
		for _, r := range ranks {
			r.nvlsChannels = 0
		}
	}
	n := min(aligned[model.GraphRing].nChannels, aligned[model.GraphTree].nChannels)
	aligned[model.GraphRing].nChannels, aligned[model.GraphTree].nChannels = n, n
	for _, r := range ranks {
		// Preset duplicated channels after its own count; move the copies
		// right after the aligned count.
		if n < r.nOrig {
			for i := 0; i < n; i++ {
				r.ch[n+i] = r.ch[r.nOrig+i]
			}
		}
	}
	if collNet && nNodes < opts.CollNetNodeThreshold {
		collNet = false
	}

	w := &connectWiring{ranks: ranks, nRanks: nRanks, nNodes: nNodes, rankToNode: rankToNode, firstRanks: firstRanks}
	nCh, err := w.postset(n, aligned, collNet, opts, connectMinCompCap(ranks))
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}

	p := &model.Plan{
		NRanks: nRanks, NNodes: nNodes, MNNVL: c.MNNVL,
		MaxTreePattern: maxTreePattern,
		NChannels:      nCh, CollChannels: nCh,
		TreeDepth:      nRanks/nNodes - 1 + log2Floor(nNodes),
		TreeChannels:   n,
		NodeRanks:      nodeRanks,
		Rings:          w.rings,
		CollNetSupport: collNet,
	}
	p.MinCompCap, p.MaxCompCap = connectMinCompCap(ranks), connectMaxCompCap(ranks)
	p.MinLocalRanks, p.MaxLocalRanks = math.MaxInt, 0
	for _, nr := range nodeRanks {
		p.MinLocalRanks, p.MaxLocalRanks = min(p.MinLocalRanks, len(nr)), max(p.MaxLocalRanks, len(nr))
	}
	p.NVLSChannels = ranks[0].nvlsChannels
	p.NVLSSupport = p.NVLSChannels > 0
	for cn := range c.Nodes {
		var own, al [model.NumGraphs]*model.Graph
		for id, g := range graphs[cn] {
			own[id] = g.Clone()
			al[id] = connectAlignedGraph(g, aligned[id])
		}
		p.NodeGraphs = append(p.NodeGraphs, own)
		p.NodeAlignedGraphs = append(p.NodeAlignedGraphs, al)
	}
	p.Graphs = p.NodeAlignedGraphs[ranks[0].cnode]
	for _, r := range ranks {
		rc := model.RankChannels{Rank: r.rank, Node: rankToNode[r.rank], LocalRank: rankToLocal[r.rank],
			Ring: make([]model.RingLinks, nCh), Tree: make([]model.TreeLinks, nCh)}
		for k := 0; k < nCh; k++ {
			ch := r.ch[k]
			rc.Ring[k] = model.RingLinks{Prev: ch.prev, Next: ch.next}
			rc.Tree[k] = model.TreeLinks{Up: ch.up, Down: ch.down}
		}
		for k := 0; k < 2*p.TreeChannels; k++ {
			rc.ConnectTree = append(rc.ConnectTree, model.TreeLinks{Up: r.ch[k].up, Down: r.ch[k].down})
		}
		p.Ranks = append(p.Ranks, rc)
	}
	p.P2PChannels, p.P2PChannelsPerPeer, err = connectP2PChannels(c, ranks[0].cnode, nCh, opts)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return p, nil
}

// connectCheckOptions rejects settings NCCL refuses at communicator init.
func connectCheckOptions(o ConnectOptions) error {
	if o.MinCTAs < 1 || o.MaxCTAs < 1 {
		return fmt.Errorf("invalid min/max CTAs %d/%d (NCCL needs both at least 1)", o.MinCTAs, o.MaxCTAs)
	}
	if o.NChannelsPerNetPeer < 0 {
		return fmt.Errorf("invalid nChannelsPerNetPeer %d (0 means not set)", o.NChannelsPerNetPeer)
	}
	return nil
}

// connectRanks checks the cluster and the graphs and sets up one connRank
// per rank, in rank order. It returns the graphs with absent ones filled
// in as NCCL's zeroed graphs.
func connectRanks(c *model.Cluster, nodeGraphs [][model.NumGraphs]*model.Graph) ([]*connRank, [][model.NumGraphs]*model.Graph, error) {
	if c == nil || len(c.Nodes) == 0 {
		return nil, nil, fmt.Errorf("cluster has no nodes")
	}
	if c.NRanks < 1 {
		return nil, nil, fmt.Errorf("cluster has %d ranks", c.NRanks)
	}
	if len(nodeGraphs) != len(c.Nodes) {
		return nil, nil, fmt.Errorf("%d sets of node graphs for %d nodes", len(nodeGraphs), len(c.Nodes))
	}
	ranks := make([]*connRank, c.NRanks)
	graphs := make([][model.NumGraphs]*model.Graph, len(c.Nodes))
	for n, node := range c.Nodes {
		if node == nil || node.System == nil {
			return nil, nil, fmt.Errorf("node %d has no system", n)
		}
		for id := range graphs[n] {
			g := nodeGraphs[n][id]
			if g == nil {
				g = model.EmptyGraph(model.GraphID(id))
			}
			if g.ID != model.GraphID(id) {
				return nil, nil, fmt.Errorf("node %d: graph at index %d has id %d", n, id, g.ID)
			}
			graphs[n][id] = g
		}
		if err := connectCheckGraphs(node, &graphs[n]); err != nil {
			return nil, nil, fmt.Errorf("node %d: %w", n, err)
		}
		for _, rank := range node.Ranks {
			if rank < 0 || rank >= c.NRanks {
				return nil, nil, fmt.Errorf("node %d holds rank %d, outside 0..%d", n, rank, c.NRanks-1)
			}
			if ranks[rank] != nil {
				return nil, nil, fmt.Errorf("rank %d is on nodes %d and %d", rank, ranks[rank].cnode, n)
			}
			gpu := node.System.GPUByRank(rank)
			if gpu == nil {
				return nil, nil, fmt.Errorf("node %d: rank %d has no GPU in the node's system", n, rank)
			}
			ranks[rank] = &connRank{rank: rank, cnode: n, sys: node.System, sm: gpu.GPU.SM, graphs: &graphs[n]}
		}
	}
	for r, cr := range ranks {
		if cr == nil {
			return nil, nil, fmt.Errorf("rank %d is on no node", r)
		}
	}
	return ranks, graphs, nil
}

// connectCheckGraphs checks that a node's graphs can be wired: channel
// counts within NCCL's bounds and intra-node lists made of the ranks of
// the node's system.
func connectCheckGraphs(node *model.ClusterNode, graphs *[model.NumGraphs]*model.Graph) error {
	sys := node.System
	ngpus := len(sys.Nodes[model.GPU])
	if ngpus == 0 {
		return fmt.Errorf("system has no GPU")
	}
	inSys := map[int]bool{}
	for _, g := range sys.Nodes[model.GPU] {
		inSys[g.GPU.Rank] = true
	}
	ring, tree := graphs[model.GraphRing], graphs[model.GraphTree]
	if ring.NChannels() == 0 || tree.NChannels() == 0 {
		return fmt.Errorf("ring graph has %d channels and tree graph %d; both need at least one", ring.NChannels(), tree.NChannels())
	}
	if n := min(ring.NChannels(), tree.NChannels()); n > model.MaxChannels/2 {
		return fmt.Errorf("%d ring/tree channels; NCCL searches at most %d", n, model.MaxChannels/2)
	}
	for id, g := range graphs {
		if g.NChannels() > model.MaxChannels {
			return fmt.Errorf("graph %d has %d channels, more than %d", id, g.NChannels(), model.MaxChannels)
		}
		full := id == int(model.GraphRing) || id == int(model.GraphTree) || id == int(model.GraphCollNetChain)
		for ci, ch := range g.Channels {
			if full && len(ch.Intra) != ngpus {
				return fmt.Errorf("graph %d channel %d lists %d ranks; the node's system has %d GPUs", id, ci, len(ch.Intra), ngpus)
			}
			if len(ch.Intra) == 0 || len(ch.Intra) > ngpus {
				return fmt.Errorf("graph %d channel %d lists %d ranks; the node's system has %d GPUs", id, ci, len(ch.Intra), ngpus)
			}
			ranks := ch.Intra
			if g.Pattern == model.PatternNVLS {
				ranks = ranks[:1] // only the head is meaningful
			}
			seen := map[int]bool{}
			for _, r := range ranks {
				if !inSys[r] {
					return fmt.Errorf("graph %d channel %d lists rank %d, which is not a GPU of the node's system", id, ci, r)
				}
				if seen[r] {
					return fmt.Errorf("graph %d channel %d lists rank %d twice", id, ci, r)
				}
				seen[r] = true
			}
		}
	}
	return nil
}

// preset is ncclTopoPreset for one rank: its ring position and tree
// attachment points per channel, the intra-node ring and tree links, the
// channels duplicated after comm->nChannels, and its NVLS heads.
func (r *connRank) preset() error {
	ring, tree, nvls := r.graphs[model.GraphRing], r.graphs[model.GraphTree], r.graphs[model.GraphNVLS]
	n := min(ring.NChannels(), tree.NChannels())
	r.nOrig = n
	r.crossNicRing = ring.CrossNic
	for c := range r.ch {
		r.ch[c] = connChannel{prev: -1, next: -1, up: -1, down: [model.TreeArity]int{-1, -1, -1}}
	}
	child0, child1 := 1, 0
	if tree.Pattern == model.PatternTree {
		child0 = 0
	}
	if tree.Pattern == model.PatternSplitTree {
		child1 = 1
	}
	for c := 0; c < n; c++ {
		intra := ring.Channels[c].Intra
		last := len(intra) - 1
		i := connIndex(intra, r.rank)
		if i < 0 {
			return fmt.Errorf("ring channel %d does not list the rank", c)
		}
		r.ringRecv[c], r.ringSend[c] = intra[0], intra[last]
		r.ringPrev[c], r.ringNext[c] = -1, -1
		if i > 0 {
			r.ringPrev[c] = intra[i-1]
		}
		if i < last {
			r.ringNext[c] = intra[i+1]
		}

		intra = tree.Channels[c].Intra
		last = len(intra) - 1
		i = connIndex(intra, r.rank)
		if i < 0 {
			return fmt.Errorf("tree channel %d does not list the rank", c)
		}
		// With one GPU the search uses the TREE pattern; clamp the child
		// index anyway so that a single-GPU balanced tree stays in range.
		r.treeToParent[c] = intra[0]
		r.treeToChild0[c] = intra[min(child0, last)]
		r.treeToChild1[c] = intra[min(child1, last)]
		if i > 0 {
			r.ch[c].up = intra[i-1]
		}
		if i < last {
			r.ch[c].down[0] = intra[i+1]
		}
	}
	copy(r.ch[n:2*n], r.ch[:n])
	for _, ch := range nvls.Channels {
		if connIndex(r.nvlsHeads, ch.Intra[0]) < 0 {
			r.nvlsHeads = append(r.nvlsHeads, ch.Intra[0])
		}
	}
	return nil
}

func connIndex(list []int, x int) int {
	for i, v := range list {
		if v == x {
			return i
		}
	}
	return -1
}

// connectNVLSChannels is comm->nvlsChannels as ncclNvlsInit sets it for a
// rank whose node found NVLS channels (0 otherwise).
func connectNVLSChannels(c *model.Cluster, r *connRank, opts ConnectOptions) int {
	if r.graphs[model.GraphNVLS].NChannels() == 0 {
		return 0
	}
	channels := 16
	if r.sm >= 100 {
		// One NVLink domain (one host, or an MNNVL clique holding every
		// rank) gets 24 channels, several get 32.
		multiNode := len(c.Nodes) > 1
		if c.MNNVL {
			multiNode = len(r.sys.Nodes[model.GPU]) < c.NRanks
		}
		channels = 24
		if multiNode {
			channels = 32
		}
	}
	if opts.NVLSCTAs > 0 {
		channels = opts.NVLSCTAs
	}
	return max(opts.MinCTAs, min(opts.MaxCTAs, channels))
}

func connectMinCompCap(ranks []*connRank) int {
	m := ranks[0].sm
	for _, r := range ranks {
		m = min(m, r.sm)
	}
	return m
}

func connectMaxCompCap(ranks []*connRank) int {
	m := ranks[0].sm
	for _, r := range ranks {
		m = max(m, r.sm)
	}
	return m
}

// connectAlignedGraph returns g as a rank holds it after alignment.
func connectAlignedGraph(g *model.Graph, a graphScalars) *model.Graph {
	out := g.Clone()
	if a.nChannels < len(out.Channels) {
		out.Channels = out.Channels[:a.nChannels]
	}
	out.SameChannels = a.sameChannels
	out.BWIntra, out.BWInter = a.bwIntra, a.bwInter
	out.TypeIntra, out.TypeInter = a.typeIntra, a.typeInter
	out.CrossNic = a.crossNic
	return out
}

// connectWiring is the state ncclTopoPostset shares between ranks: the
// published ncclTopoRanks of every rank (in connRank), the node numbering
// and the ring neighbour arrays per channel.
type connectWiring struct {
	ranks      []*connRank
	nRanks     int
	nNodes     int
	rankToNode []int
	firstRanks []int
	// ringPrev[c][r] and ringNext[c][r]: rank r's ring neighbours on
	// channel c.
	ringPrev, ringNext [model.MaxChannels][]int
	rings              [][]int
}

// postset is ncclTopoPostset on every rank with n aligned channels. It
// returns the final channel count.
func (w *connectWiring) postset(n int, aligned [model.NumGraphs]graphScalars, collNet bool, opts ConnectOptions, minCompCap int) (int, error) {
	nNodes := w.nNodes
	// Alternate rings on odd nodes to avoid crossing rails, where the
	// rank's own ring search allowed channel pairs to cross NICs.
	for _, r := range w.ranks {
		if r.crossNicRing == 2 && n%2 == 0 && w.rankToNode[r.rank]%2 == 1 {
			for c := 0; c < n; c += 2 {
				r.ringRecv[c], r.ringRecv[c^1] = r.ringRecv[c^1], r.ringRecv[c]
				r.ringSend[c], r.ringSend[c^1] = r.ringSend[c^1], r.ringSend[c]
				r.ringPrev[c], r.ringPrev[c^1] = r.ringPrev[c^1], r.ringPrev[c]
				r.ringNext[c], r.ringNext[c^1] = r.ringNext[c^1], r.ringNext[c]
			}
		}
	}
	for c := range w.ringPrev {
		w.ringPrev[c] = make([]int, w.nRanks)
		w.ringNext[c] = make([]int, w.nRanks)
	}
	ttp := make([][]int, n)
	ttc0 := make([][]int, n)
	ttc1 := make([][]int, n)
	for c := 0; c < n; c++ {
		recv, send := make([]int, nNodes), make([]int, nNodes)
		ttp[c], ttc0[c], ttc1[c] = make([]int, nNodes), make([]int, nNodes), make([]int, nNodes)
		for node, fr := range w.firstRanks {
			r := w.ranks[fr]
			recv[node], send[node] = r.ringRecv[c], r.ringSend[c]
			ttp[c][node], ttc0[c][node], ttc1[c][node] = r.treeToParent[c], r.treeToChild0[c], r.treeToChild1[c]
		}
		for _, r := range w.ranks {
			w.ringPrev[c][r.rank], w.ringNext[c][r.rank] = r.ringPrev[c], r.ringNext[c]
		}
		// connectRings: close each node's chain on the neighbouring nodes.
		for node := 0; node < nNodes; node++ {
			w.ringPrev[c][recv[node]] = send[(node-1+nNodes)%nNodes]
			w.ringNext[c][send[node]] = recv[(node+1)%nNodes]
		}
	}
	for _, r := range w.ranks {
		if err := w.connectTrees(r, n, ttp, ttc0, ttc1); err != nil {
			return 0, fmt.Errorf("rank %d: %w", r.rank, err)
		}
	}
	for c := 0; c < n; c++ {
		copy(w.ringPrev[c+n], w.ringPrev[c])
		copy(w.ringNext[c+n], w.ringNext[c])
		for _, r := range w.ranks {
			prev, next := w.ringPrev[c][r.rank], w.ringNext[c][r.rank]
			r.ch[c].prev, r.ch[c].next = prev, next
			r.ch[c+n].prev, r.ch[c+n].next = prev, next
		}
	}
	nCh := min(model.MaxChannels, 2*n)

	if collNet {
		chain := aligned[model.GraphCollNetChain]
		// More channels to saturate intra-node bandwidth, except with one
		// rank per node.
		if chain.bwIntra > chain.bwInter && w.nRanks > nNodes {
			nCh = w.copyChannels(nCh, min(model.MaxChannels, nCh+nCh/2))
		}
	}
	// Four compute channels per search channel on sm90+ across nodes.
	if minCompCap >= 90 && nNodes > 1 && aligned[model.GraphRing].bwIntra > 45.0 && nCh < 16 {
		nCh = w.copyChannels(nCh, 2*nCh)
	}
	if opts.NetDeviceUnpack && nNodes > 1 && nCh < 16 && opts.UnpackDoubleNChannels {
		nCh = w.copyChannels(nCh, 2*nCh)
	}
	// NCCL_MAX_NCHANNELS and maxCTAs first, then duplicate up to
	// NCCL_MIN_NCHANNELS and minCTAs.
	nCh = min(opts.maxNChannels(), nCh, opts.MaxCTAs)
	nCh = w.copyChannels(nCh, max(opts.minNChannels(), opts.MinCTAs))

	// connectNvls: without a head on some node there are no NVLS channels.
	minHeads := math.MaxInt
	for _, fr := range w.firstRanks {
		minHeads = min(minHeads, len(w.ranks[fr].nvlsHeads))
	}
	if minHeads == 0 {
		for _, r := range w.ranks {
			r.nvlsChannels = 0
		}
	}
	if err := w.buildRings(nCh); err != nil {
		return 0, err
	}
	return nCh, nil
}

// connectTrees wires rank r into the double binary tree over nodes for the
// n aligned channels: channel c gets tree 0, channel c+n tree 1.
func (w *connectWiring) connectTrees(r *connRank, n int, ttp, ttc0, ttc1 [][]int) error {
	node := w.rankToNode[r.rank]
	t0, t1 := dtree(w.nNodes, node)
	for c := 0; c < n; c++ {
		ch0, ch1 := &r.ch[c], &r.ch[c+n]
		if r.rank == ttp[c][node] {
			connSetUp(ch0, connChildSide(t0, ttc0[c], ttc1[c]), t0.Up)
			connSetUp(ch1, connChildSide(t1, ttc0[c], ttc1[c]), t1.Up)
		}
		if r.rank == ttc0[c][node] {
			if err := connSetDown(ch0, ttp[c], t0.Down0, c); err != nil {
				return err
			}
			if err := connSetDown(ch1, ttp[c], t1.Down0, c+n); err != nil {
				return err
			}
		}
		if r.rank == ttc1[c][node] {
			if err := connSetDown(ch0, ttp[c], t0.Down1, c); err != nil {
				return err
			}
			if err := connSetDown(ch1, ttp[c], t1.Down1, c+n); err != nil {
				return err
			}
		}
	}
	return nil
}

// connChildSide picks the parent node's child GPUs on the side this node
// hangs from.
func connChildSide(t treeSide, ttc0, ttc1 []int) []int {
	if t.ChildType == 0 {
		return ttc0
	}
	return ttc1
}

func connSetUp(ch *connChannel, indexes []int, u int) {
	if u != -1 {
		ch.up = indexes[u]
	}
}

func connSetDown(ch *connChannel, indexes []int, d, c int) error {
	if d == -1 {
		return nil
	}
	x := 0
	for x < model.TreeArity && ch.down[x] >= 0 {
		x++
	}
	if x == model.TreeArity {
		return fmt.Errorf("tree channel %d already has %d children (%d %d %d)", c, x, ch.down[0], ch.down[1], ch.down[2])
	}
	ch.down[x] = indexes[d]
	return nil
}

// copyChannels duplicates channels [0, end-start) into [start, end) for
// every rank and returns the new channel count (start when end <= start).
func (w *connectWiring) copyChannels(start, end int) int {
	c := start
	for ; c < end; c++ {
		copy(w.ringPrev[c], w.ringPrev[c-start])
		copy(w.ringNext[c], w.ringNext[c-start])
		for _, r := range w.ranks {
			r.ch[c] = r.ch[c-start]
		}
	}
	return c
}

// buildRings is ncclBuildRings seen from rank 0: each channel's ring,
// followed from rank 0, must come back to it after visiting every rank
// once. It also requires every rank's prev to be the rank whose next it
// is, which NCCL does not check but needs.
func (w *connectWiring) buildRings(nCh int) error {
	w.rings = make([][]int, nCh)
	for c := 0; c < nCh; c++ {
		next, prev := w.ringNext[c], w.ringPrev[c]
		ring := make([]int, w.nRanks)
		seen := make([]bool, w.nRanks)
		cur := 0
		for i := 0; i < w.nRanks; i++ {
			if cur < 0 || cur >= w.nRanks {
				return fmt.Errorf("ring %d: rank %d has next %d, not a rank", c, ring[i-1], cur)
			}
			if seen[cur] {
				return fmt.Errorf("ring %d visits rank %d twice (order %v)", c, cur, ring[:i])
			}
			seen[cur] = true
			ring[i] = cur
			cur = next[cur]
		}
		if cur != 0 {
			return fmt.Errorf("ring %d does not loop back to rank 0 (ends at %d, order %v)", c, cur, ring)
		}
		for r := 0; r < w.nRanks; r++ {
			if p := prev[r]; p < 0 || p >= w.nRanks || next[p] != r {
				return fmt.Errorf("ring %d: rank %d has prev %d, whose next is not %d", c, r, p, r)
			}
		}
		w.rings[c] = ring
	}
	return nil
}

// PlanChannelsDoc returns the JSON "channels" section for p: the channel
// counts, every ring from rank 0, and every rank's ring and tree links per
// channel.
func PlanChannelsDoc(p *model.Plan) ChannelsDoc {
	d := ChannelsDoc{
		NChannels: p.NChannels, CollChannels: p.CollChannels, NVLSChannels: p.NVLSChannels,
		P2PnChannels: p.P2PChannels, P2PnChannelsPerPeer: p.P2PChannelsPerPeer,
		Rings: [][]int{}, Ranks: []RankDoc{},
	}
	for _, ring := range p.Rings {
		d.Rings = append(d.Rings, append([]int{}, ring...))
	}
	for _, rc := range p.Ranks {
		rd := RankDoc{Rank: rc.Rank, Node: rc.Node, LocalRank: rc.LocalRank, Ring: []RingDoc{}, Tree: []TreeDoc{}}
		for _, l := range rc.Ring {
			rd.Ring = append(rd.Ring, RingDoc{Prev: l.Prev, Next: l.Next})
		}
		for _, t := range rc.Tree {
			rd.Tree = append(rd.Tree, TreeDoc{Up: t.Up, Down: append([]int{}, t.Down[:]...)})
		}
		d.Ranks = append(d.Ranks, rd)
	}
	return d
}
