package search

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// LogPrefix is how NCCL starts an INFO line logged by a rank.
func LogPrefix(rank int) string { return fmt.Sprintf("[%d] NCCL INFO ", rank) }

// WriteGraphLog writes g as NCCL logs a searched graph (ncclTopoPrintGraph):
// a header with pattern, bandwidths and types, then one line per channel
// with its GPUs and, on systems that reach other nodes, its NETs.
func WriteGraphLog(w io.Writer, s *model.System, g *model.Graph, prefix string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%sPattern %d, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels %d\n",
		prefix, g.Pattern, g.CrossNic, g.NChannels(), g.BWIntra, g.BWInter, g.TypeIntra, g.TypeInter, g.SameChannels)
	for c, ch := range g.Channels {
		fmt.Fprintf(&b, "%s%2d :", prefix, c)
		if s.Inter {
			b.WriteString(" " + idName(model.NET, ch.Inter[0]))
		}
		for _, r := range ch.Intra {
			gpu := s.GPUByRank(r)
			if gpu == nil {
				return fmt.Errorf("graph %d channel %d: rank %d is not a GPU of this node", g.ID, c, r)
			}
			b.WriteString(" " + gpu.Name())
		}
		if s.Inter {
			b.WriteString(" " + idName(model.NET, ch.Inter[1]))
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// idName prints a node id as NCCL does ("NET/0-3"), whether or not a node
// has it.
func idName(t model.NodeType, id int64) string {
	u := uint64(id)
	return fmt.Sprintf("%s/%x-%x", t, model.SystemIDOf(u), model.LocalIDOf(u))
}

// graphTypeNames is the dictionary NCCL uses for types in graph XML files;
// it lacks C2C, NET and DIS, so such graphs cannot be written.
var graphTypeNames = map[model.PathType]string{
	model.PathLOC: "LOC", model.PathNVL: "NVL", model.PathNVB: "NVB", model.PathPIX: "PIX", model.PathPXB: "PXB",
	model.PathP2C: "P2C", model.PathPXN: "PXN", model.PathPHB: "PHB", model.PathSYS: "SYS",
}

// GraphsXML builds the NCCL_GRAPH_DUMP_FILE document of one node's graphs,
// in NCCL's order (ring, tree, collnet direct, collnet chain, nvls).
func GraphsXML(s *model.System, graphs [model.NumGraphs]*model.Graph) (*model.Element, error) {
	root := model.NewElement("graphs", "version", "1")
	for _, id := range model.GraphOrder {
		g := graphs[id]
		if g == nil {
			return nil, fmt.Errorf("graph %d missing", id)
		}
		e, err := graphXML(s, g)
		if err != nil {
			return nil, err
		}
		root.Add(e)
	}
	return root, nil
}

func graphXML(s *model.System, g *model.Graph) (*model.Element, error) {
	ti, ok1 := graphTypeNames[g.TypeIntra]
	te, ok2 := graphTypeNames[g.TypeInter]
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("graph %d: type %s/%s has no name in NCCL's graph XML dictionary", g.ID, g.TypeIntra, g.TypeInter)
	}
	e := model.NewElement("graph",
		"id", strconv.Itoa(int(g.ID)), "pattern", strconv.Itoa(int(g.Pattern)), "crossnic", strconv.Itoa(g.CrossNic),
		"nchannels", strconv.Itoa(g.NChannels()), "speedintra", cFloatG(g.BWIntra), "speedinter", cFloatG(g.BWInter),
		"latencyinter", cFloatG(g.LatencyInter), "typeintra", ti, "typeinter", te,
		"samechannels", strconv.Itoa(g.SameChannels))
	for c, ch := range g.Channels {
		ce := model.NewElement("channel")
		if s.Inter {
			ce.Add(model.NewElement("net", "dev", cHexLong(ch.Inter[0])))
		}
		n := len(ch.Intra)
		if g.Pattern == model.PatternNVLS {
			n = 1 // NVLS records only the head
		}
		for _, r := range ch.Intra[:n] {
			gpu := s.GPUByRank(r)
			if gpu == nil {
				return nil, fmt.Errorf("graph %d channel %d: rank %d is not a GPU of this node", g.ID, c, r)
			}
			dev := int64(model.SystemIDOf(gpu.ID))<<56 + int64(gpu.GPU.Dev)
			ce.Add(model.NewElement("gpu", "dev", cHexLong(dev)))
		}
		if s.Inter {
			ce.Add(model.NewElement("net", "dev", cHexLong(ch.Inter[1])))
		}
		e.Add(ce)
	}
	return e, nil
}

// WriteGraphsXML writes one node's graphs in NCCL_GRAPH_DUMP_FILE form.
func WriteGraphsXML(w io.Writer, s *model.System, graphs [model.NumGraphs]*model.Graph) error {
	root, err := GraphsXML(s, graphs)
	if err != nil {
		return err
	}
	return model.WriteXML(w, root)
}

// cFloatG formats like C's "%g" (6 significant digits, no trailing zeros).
func cFloatG(f float32) string {
	// Go's 'g' with 6 digits matches C for finite values, exponent form
	// ("1e-05", "1.23457e+06") included.
	return strconv.FormatFloat(float64(f), 'g', 6, 64)
}

// cHexLong formats like C's "%#lx": 0 is "0", others "0x..." (negative
// values as their 64-bit two's complement).
func cHexLong(v int64) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(uint64(v), 16)
}

// ncclLineMax is the longest line NCCL's fixed buffers hold for the
// "Trees" line (1024-byte buffer, snprintf bounded by 1023).
const ncclLineMax = 1022

// WriteRankLayout writes the lines NCCL logs for one rank while wiring
// channels: the communicator line, the tree links of the channels where the
// rank attaches its node to the inter-node trees ("Tree c : up -> r ->
// down"), the rings (rank 0 only, "Channel c/n : ..."), its ring neighbours
// and all its tree links on one "Trees" line. NCCL's "comm 0x..." handle has
// no meaning here and is left out of the first line.
func WriteRankLayout(w io.Writer, p *model.Plan, rank int) error {
	if rank < 0 || rank >= len(p.Ranks) {
		return fmt.Errorf("rank %d out of range 0..%d", rank, len(p.Ranks)-1)
	}
	rc := p.Ranks[rank]
	pre := LogPrefix(rank)
	var b strings.Builder
	localRanks := 0
	for _, o := range p.Ranks {
		if o.Node == rc.Node {
			localRanks++
		}
	}
	mnnvl := 0
	if p.MNNVL {
		mnnvl = 1
	}
	fmt.Fprintf(&b, "%srank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d\n",
		pre, rank, p.NRanks, p.NNodes, localRanks, rc.LocalRank, mnnvl)
	half := p.TreeChannels
	atConnect := rc.ConnectTree
	if len(atConnect) == 0 {
		atConnect = rc.Tree
	}
	for c := 0; c < half && c+half < len(atConnect); c++ {
		if !treeAttachPoint(p, rank, c) {
			continue
		}
		for _, cc := range []int{c, c + half} {
			t := atConnect[cc]
			fmt.Fprintf(&b, "%sTree %d : %d -> %d -> %d/%d/%d\n", pre, cc, t.Up, rank, t.Down[0], t.Down[1], t.Down[2])
		}
	}
	if rank == 0 {
		width := len(strconv.Itoa(p.NRanks - 1))
		for c, ring := range p.Rings {
			line := fmt.Sprintf("Channel %02d/%02d :", c, len(p.Rings))
			for _, r := range ring {
				line += fmt.Sprintf(" %*d", width, r)
				if len(line) >= 127 {
					break
				}
			}
			if len(line) >= 128 { // NCCL's 128-byte buffer marks a cut line with "..."
				line = line[:124] + "..."
			}
			b.WriteString(pre + line + "\n")
		}
	}
	trees := ""
	for c, t := range rc.Tree {
		fmt.Fprintf(&b, "%sRing %02d : %d -> %d -> %d\n", pre, c, rc.Ring[c].Prev, rank, rc.Ring[c].Next)
		trees += fmt.Sprintf(" [%d] %d/%d/%d->%d->%d", c, t.Down[0], t.Down[1], t.Down[2], rank, t.Up)
		if len(trees) > ncclLineMax {
			trees = trees[:ncclLineMax]
		}
	}
	b.WriteString(pre + "Trees" + trees + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// treeAttachPoint reports whether rank is where its node's tree for
// channel c attaches to the parent or to a child node (NCCL logs those
// ranks' "Tree" lines).
func treeAttachPoint(p *model.Plan, rank, c int) bool {
	// NodeGraphs is indexed by cluster node, not by NCCL's node number:
	// find the graph whose channel holds the rank.
	for _, gs := range p.NodeGraphs {
		g := gs[model.GraphTree]
		if g == nil || c >= len(g.Channels) || !slices.Contains(g.Channels[c].Intra, rank) {
			continue
		}
		intra := g.Channels[c].Intra
		child0, child1 := 1, 0
		if g.Pattern == model.PatternTree || len(intra) == 1 {
			child0 = 0
		}
		if g.Pattern == model.PatternSplitTree && len(intra) > 1 {
			child1 = 1
		}
		return rank == intra[0] || rank == intra[child0] || rank == intra[child1]
	}
	return false
}

// WriteChannelSummary writes the wiring in a compact text form: the channel
// counts, then per channel the ring order from rank 0 and every rank's tree
// links ("down0/down1/down2->rank->up").
func WriteChannelSummary(w io.Writer, p *model.Plan) error {
	var b strings.Builder
	fmt.Fprintf(&b, "nChannels %d (collChannels %d), nvlsChannels %d, p2pnChannels %d, p2pnChannelsPerPeer %d, nNodes %d\n",
		p.NChannels, p.CollChannels, p.NVLSChannels, p.P2PChannels, p.P2PChannelsPerPeer, p.NNodes)
	for c, ring := range p.Rings {
		fmt.Fprintf(&b, "channel %2d ring:", c)
		for _, r := range ring {
			fmt.Fprintf(&b, " %d", r)
		}
		b.WriteByte('\n')
	}
	for c := range p.Rings {
		fmt.Fprintf(&b, "channel %2d tree:", c)
		for r, rc := range p.Ranks {
			t := rc.Tree[c]
			fmt.Fprintf(&b, " %d/%d/%d->%d->%d", t.Down[0], t.Down[1], t.Down[2], r, t.Up)
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteTuningTable writes the tuning model as NCCL logs it at init: per
// block of three algorithms the thread counts and, per collective, the
// latency (µs) and bandwidth (GB/s) of every protocol; then the thread
// thresholds, the channel counts, and a full-precision copy of the table
// as "tune coll algo proto latency bandwidth (maxThreads)" rows.
func WriteTuningTable(w io.Writer, t *Tuning, p *model.Plan, prefix string) error {
	var b strings.Builder
	const perBlock = 3
	for block := 0; block*perBlock < model.NumAlgorithms; block++ {
		b.WriteString(prefix + "  Algorithm   |")
		for ba := 0; ba < perBlock; ba++ {
			if a := block*perBlock + ba; a < model.NumAlgorithms {
				fmt.Fprintf(&b, " %14s   %14s   %14s |", "", model.Algorithm(a), "")
			}
		}
		// NCCL's protocol header does not stop at the last algorithm.
		b.WriteString("\n" + prefix + "  Protocol    |")
		for ba := 0; ba < perBlock; ba++ {
			for pr := 0; pr < model.NumProtocols; pr++ {
				fmt.Fprintf(&b, " %14s |", model.Protocol(pr))
			}
		}
		b.WriteString("\n" + prefix + " Max NThreads |")
		for ba := 0; ba < perBlock; ba++ {
			if a := block*perBlock + ba; a < model.NumAlgorithms {
				for pr := 0; pr < model.NumProtocols; pr++ {
					fmt.Fprintf(&b, " %14d |", t.MaxThreads[a][pr])
				}
			}
		}
		b.WriteByte('\n')
		for coll := 0; coll < model.NumTunedCollectives; coll++ {
			fmt.Fprintf(&b, "%s%13s |", prefix, model.Collective(coll))
			for ba := 0; ba < perBlock; ba++ {
				if a := block*perBlock + ba; a < model.NumAlgorithms {
					for pr := 0; pr < model.NumProtocols; pr++ {
						fmt.Fprintf(&b, " %7.1f/%6.1f |", t.Latency[coll][a][pr], t.Bandwidth[coll][a][pr])
					}
				}
			}
			b.WriteByte('\n')
		}
	}
	fmt.Fprintf(&b, "%sthreadThresholds %s\n", prefix, t.ThreadThresholdsString())
	fmt.Fprintf(&b, "%s%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer\n",
		prefix, p.CollChannels, p.NChannels, p.NVLSChannels, p.P2PChannels, p.P2PChannelsPerPeer)
	b.WriteString("\n# tuning table, rank 0, full precision: coll algo proto latency_us bandwidth_GBps (maxThreads)\n")
	for coll := 0; coll < model.NumTunedCollectives; coll++ {
		for a := 0; a < model.NumAlgorithms; a++ {
			for pr := 0; pr < model.NumProtocols; pr++ {
				fmt.Fprintf(&b, "tune %-13s %-13s %-6s %10.4f %10.4f (%d)\n", model.Collective(coll), model.Algorithm(a),
					model.Protocol(pr), t.Latency[coll][a][pr], t.Bandwidth[coll][a][pr], t.MaxThreads[a][pr])
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
