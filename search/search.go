package search

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// NCCLVersion is the NCCL release whose decisions this package reproduces.
const NCCLVersion = "2.28.9"

// Options are every NCCL_* setting the search, the wiring and the tuner
// read.
type Options struct {
	Search  SearchOptions
	Connect ConnectOptions
	Tune    TuneOptions
}

// DefaultOptions are NCCL's defaults.
func DefaultOptions() Options {
	return Options{Search: DefaultSearchOptions(), Connect: DefaultConnectOptions(), Tune: DefaultTuneOptions()}
}

// OptionsFromEnv reads the NCCL_* variables through lookup (os.LookupEnv
// when nil). Every bad variable is reported, not only the first.
func OptionsFromEnv(lookup func(string) (string, bool)) (Options, error) {
	var o Options
	var errs []error
	var err error
	if o.Search, err = SearchOptionsFromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	if o.Connect, err = ConnectOptionsFromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	if o.Tune, err = TuneOptionsFromEnv(lookup); err != nil {
		errs = append(errs, err)
	}
	return o, errors.Join(errs...)
}

// reconciled makes the settings that the search, the wiring and the tuner
// each read agree: CollNet is on for all when any asks for it, and NVLS
// support follows NCCL_NVLS_ENABLE (the NVLS graph then decides whether
// the hardware offers it).
func (o Options) reconciled() Options {
	collNet := o.Search.CollNetEnable || o.Connect.CollNetEnable || o.Tune.CollNetEnable
	o.Search.CollNetEnable, o.Connect.CollNetEnable, o.Tune.CollNetEnable = collNet, collNet, collNet
	nvls := o.Search.NVLSEnable || o.Tune.NVLSSupport
	o.Search.NVLSEnable, o.Tune.NVLSSupport = nvls, nvls
	return o
}

// Result is everything NCCL decides at init for a cluster.
type Result struct {
	Cluster    *model.Cluster
	Options    Options
	NodeGraphs [][model.NumGraphs]*model.Graph // per node, as searched
	Plan       *model.Plan
	Tuning     *Tuning
}

// Run searches every node's graphs, wires the channels and builds the
// tuning tables.
//
// Nodes that are copies of one host (model.Cluster.Replicated) search the
// same system and so find the same graphs up to rank numbering: node 0 is
// searched and the others take its graphs with their own ranks. Copies
// joined into MNNVL cliques (model.Cluster.CliqueHosts) likewise take node
// 0's graphs: its clique's nodes hold the same fused system, the other
// cliques the same one with their own ranks.
func Run(c *model.Cluster, opts Options) (*Result, error) {
	if c == nil || len(c.Nodes) == 0 {
		return nil, errors.New("search: empty cluster")
	}
	opts = opts.reconciled()
	r := &Result{Cluster: c, Options: opts, NodeGraphs: make([][model.NumGraphs]*model.Graph, len(c.Nodes))}
	for i, n := range c.Nodes {
		if c.Replicated && i > 0 {
			r.NodeGraphs[i] = renumberGraphs(r.NodeGraphs[0], n.Ranks[0]-c.Nodes[0].Ranks[0])
			continue
		}
		if k := c.CliqueHosts; k > 0 && i > 0 {
			// MNNVL copies: a clique's nodes search one fused system, and
			// the cliques are copies of the first up to rank numbering.
			first := i - i%k
			r.NodeGraphs[i] = renumberGraphs(r.NodeGraphs[0], c.Nodes[first].Ranks[0]-c.Nodes[0].Ranks[0])
			continue
		}
		gs, err := ComputeGraphs(n.System, opts.Search)
		if err != nil {
			return nil, fmt.Errorf("%s: node %d: %w", c.File, i, err)
		}
		r.NodeGraphs[i] = gs
	}
	p, err := Connect(c, r.NodeGraphs, opts.Connect)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c.File, err)
	}
	p.MNNVL = c.MNNVL
	if p.TreeChannels == 0 {
		p.TreeChannels = min(p.Graphs[model.GraphRing].NChannels(), p.Graphs[model.GraphTree].NChannels())
	}
	r.Plan = p
	if r.Tuning, err = Tune(p, c, opts.Tune); err != nil {
		return nil, fmt.Errorf("%s: %w", c.File, err)
	}
	return r, nil
}

// renumberGraphs copies graphs with every rank shifted by delta.
func renumberGraphs(gs [model.NumGraphs]*model.Graph, delta int) [model.NumGraphs]*model.Graph {
	var out [model.NumGraphs]*model.Graph
	for id, g := range gs {
		cp := g.Clone()
		for _, ch := range cp.Channels {
			for i := range ch.Intra {
				// An NVLS channel records only its head; the other
				// entries stay NCCL's zeros.
				if i == 0 || g.Pattern != model.PatternNVLS {
					ch.Intra[i] += delta
				}
			}
		}
		out[id] = cp
	}
	return out
}

// Document returns the complete JSON document of the result (the schema of
// shared/groundtruth/nccl-2.28.9).
func (r *Result) Document() (Document, error) {
	c := r.Cluster
	d := Document{
		NCCL: NCCLVersion, Input: c.File, NRanks: c.NRanks, NNodes: r.Plan.NNodes, MNNVL: c.MNNVL,
		Assumptions: Assumptions{NVLSEnableEnv: "0"},
	}
	if r.Plan.NVLSSupport {
		d.Assumptions.NVLSSupport = 1
	}
	switch {
	case r.Options.Search.NVLSForce:
		d.Assumptions.NVLSEnableEnv = "1"
	case r.Options.Search.NVLSEnable:
		d.Assumptions.NVLSEnableEnv = "2"
	}
	if r.Options.Search.CollNetEnable {
		d.Assumptions.CollNetEnable = 1
	}
	for i, n := range c.Nodes {
		nd := NodeDoc{Node: n.Index, Ranks: n.Ranks, System: n.System.Doc()}
		for _, id := range model.GraphOrder {
			gd, err := GraphDocOf(r.NodeGraphs[i][id], n.System)
			if err != nil {
				return d, fmt.Errorf("node %d: %w", i, err)
			}
			nd.Graphs = append(nd.Graphs, gd)
			ad, err := GraphDocOf(r.Plan.NodeAlignedGraphs[i][id], n.System)
			if err != nil {
				return d, fmt.Errorf("node %d: aligned %w", i, err)
			}
			nd.AlignedGraphs = append(nd.AlignedGraphs, ad)
		}
		d.Nodes = append(d.Nodes, nd)
	}
	d.Channels = PlanChannelsDoc(r.Plan)
	d.Tuning = r.Tuning.Doc()
	return d, nil
}

// WriteLog writes the result in NCCL's log forms, in sections: the graph
// search of node 0 (ncclTopoPrintGraph), its graphs as NCCL_GRAPH_DUMP_FILE
// XML, the per-rank channel layout (only rank 0 when allRanks is false),
// the ring and tree summary, and the tuning table.
func (r *Result) WriteLog(w io.Writer, allRanks bool) error {
	var b strings.Builder
	n0 := r.Cluster.Nodes[0]
	b.WriteString("======== graph search (ncclTopoPrintGraph) ========\n")
	for _, id := range model.GraphOrder {
		g := r.NodeGraphs[0][id]
		if g.NChannels() == 0 {
			continue
		}
		if err := WriteGraphLog(&b, n0.System, g, LogPrefix(n0.Ranks[0])); err != nil {
			return err
		}
	}
	b.WriteString("\n======== graphs, node 0 (NCCL_GRAPH_DUMP_FILE format, before cross-rank alignment) ========\n")
	if err := WriteGraphsXML(&b, n0.System, r.NodeGraphs[0]); err != nil {
		return err
	}
	b.WriteString("\n======== channels: communicator layout ========\n")
	for rank := range r.Plan.Ranks {
		if rank > 0 && !allRanks {
			break
		}
		if err := WriteRankLayout(&b, r.Plan, rank); err != nil {
			return err
		}
	}
	b.WriteString("\n======== channels: ring order and tree per channel ========\n")
	if err := WriteChannelSummary(&b, r.Plan); err != nil {
		return err
	}
	b.WriteString("\n======== tuning (latency us / bandwidth GB/s) ========\n")
	if err := WriteTuningTable(&b, r.Tuning, r.Plan, LogPrefix(0)); err != nil {
		return err
	}
	_, err := io.WriteString(w, b.String())
	return err
}
