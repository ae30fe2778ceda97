// Package search is NCCL 2.28.9's channel search and tuner: for every node of
// a cluster it computes the ring, tree, CollNet and NVLS graphs
// (ncclTopoCompute), aligns them across ranks and wires the channels
// (ncclTopoPreset/Postset, double binary trees, p2p channel counts) into a
// model.Plan, and builds NCCL's latency/bandwidth tables and the per-call
// algorithm/protocol choice.
package search

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// Document is the complete JSON form of a search: the schema of the
// ground-truth documents in shared/groundtruth/nccl-2.28.9.
type Document struct {
	NCCL        string      `json:"nccl"`
	Input       string      `json:"input"`
	NRanks      int         `json:"nRanks"`
	NNodes      int         `json:"nNodes"`
	MNNVL       bool        `json:"mnnvl"`
	Assumptions Assumptions `json:"assumptions"`
	Nodes       []NodeDoc   `json:"nodes"`
	Channels    ChannelsDoc `json:"channels"`
	Tuning      TuningDoc   `json:"tuning"`
}

// Assumptions records the settings the search ran under that a topology
// file does not say.
type Assumptions struct {
	NVLSSupport   int    `json:"nvlsSupport"`
	CollNetEnable int    `json:"collnetEnable"`
	NVLSEnableEnv string `json:"nvlsEnableEnv"`
}

// NodeDoc is one node: its system, the graphs it searched and the graphs
// after cross-rank alignment.
type NodeDoc struct {
	Node          int             `json:"node"`
	Ranks         []int           `json:"ranks"`
	System        model.SystemDoc `json:"system"`
	Graphs        []GraphDoc      `json:"graphs"`
	AlignedGraphs []GraphDoc      `json:"alignedGraphs"`
}

// GraphDoc is the JSON form of a model.Graph.
type GraphDoc struct {
	ID           int               `json:"id"`
	Pattern      int               `json:"pattern"`
	CrossNic     int               `json:"crossNic"`
	CollNet      int               `json:"collNet"`
	NChannels    int               `json:"nChannels"`
	BWIntra      model.F32         `json:"bwIntra"`
	BWInter      model.F32         `json:"bwInter"`
	LatencyInter model.F32         `json:"latencyInter"`
	TypeIntra    string            `json:"typeIntra"`
	TypeInter    string            `json:"typeInter"`
	SameChannels int               `json:"sameChannels"`
	Channels     []GraphChannelDoc `json:"channels"`
}

// GraphChannelDoc is one channel of a graph: ranks in order and, for
// inter-node graphs, the names of the entry and exit NETs.
type GraphChannelDoc struct {
	Intra []int    `json:"intra"`
	Inter []string `json:"inter,omitempty"`
}

// ChannelsDoc is the wiring after ncclTopoPostset.
type ChannelsDoc struct {
	NChannels           int       `json:"nChannels"`
	CollChannels        int       `json:"collChannels"`
	NVLSChannels        int       `json:"nvlsChannels"`
	P2PnChannels        int       `json:"p2pnChannels"`
	P2PnChannelsPerPeer int       `json:"p2pnChannelsPerPeer"`
	Rings               [][]int   `json:"rings"`
	Ranks               []RankDoc `json:"ranks"`
}

// RankDoc is one rank's ring and tree neighbours per channel.
type RankDoc struct {
	Rank      int       `json:"rank"`
	Node      int       `json:"node"`
	LocalRank int       `json:"localRank"`
	Ring      []RingDoc `json:"ring"`
	Tree      []TreeDoc `json:"tree"`
}

// RingDoc is a rank's ring neighbours on one channel.
type RingDoc struct {
	Prev int `json:"prev"`
	Next int `json:"next"`
}

// TreeDoc is a rank's tree parent and children on one channel.
type TreeDoc struct {
	Up   int   `json:"up"`
	Down []int `json:"down"`
}

// TuningDoc is the tuning table of rank 0.
type TuningDoc struct {
	Table      []TuneEntryDoc  `json:"table"`
	MaxThreads []MaxThreadsDoc `json:"maxThreads"`
}

// TuneEntryDoc is the modelled latency (µs) and bandwidth (GB/s) of one
// (collective, algorithm, protocol).
type TuneEntryDoc struct {
	Coll      string    `json:"coll"`
	Algo      string    `json:"algo"`
	Proto     string    `json:"proto"`
	Latency   model.F32 `json:"latency"`
	Bandwidth model.F32 `json:"bandwidth"`
}

// MaxThreadsDoc is the thread count per protocol of one algorithm.
type MaxThreadsDoc struct {
	Algo   string `json:"algo"`
	LL     int    `json:"LL"`
	LL128  int    `json:"LL128"`
	Simple int    `json:"Simple"`
}

// GraphDocOf returns the JSON form of g; NET ids are named as nodes of s.
func GraphDocOf(g *model.Graph, s *model.System) (GraphDoc, error) {
	d := GraphDoc{
		ID: int(g.ID), Pattern: int(g.Pattern), CrossNic: g.CrossNic, NChannels: g.NChannels(),
		BWIntra: model.F32(g.BWIntra), BWInter: model.F32(g.BWInter), LatencyInter: model.F32(g.LatencyInter),
		TypeIntra: g.TypeIntra.String(), TypeInter: g.TypeInter.String(), SameChannels: g.SameChannels,
		Channels: []GraphChannelDoc{},
	}
	if g.CollNet {
		d.CollNet = 1
	}
	for c, ch := range g.Channels {
		cd := GraphChannelDoc{Intra: append([]int{}, ch.Intra...)}
		if ch.Inter[0] != model.NoNet || ch.Inter[1] != model.NoNet {
			for _, id := range ch.Inter {
				name, err := netName(s, id)
				if err != nil {
					return d, fmt.Errorf("graph %d channel %d: %w", g.ID, c, err)
				}
				cd.Inter = append(cd.Inter, name)
			}
		}
		d.Channels = append(d.Channels, cd)
	}
	return d, nil
}

// netName names a NET id as NCCL prints it ("NET/0-3"); NoNet is "-1".
func netName(s *model.System, id int64) (string, error) {
	if id == model.NoNet {
		return "-1", nil
	}
	n := s.NodeByID(model.NET, uint64(id))
	if n == nil {
		return "", fmt.Errorf("no NET with id %#x", id)
	}
	return n.Name(), nil
}

// GraphOfDoc converts a GraphDoc back into a model.Graph, resolving NET
// names against s.
func GraphOfDoc(d GraphDoc, s *model.System) (*model.Graph, error) {
	g := &model.Graph{
		ID: model.GraphID(d.ID), Pattern: model.Pattern(d.Pattern), CollNet: d.CollNet != 0, CrossNic: d.CrossNic,
		BWIntra: float32(d.BWIntra), BWInter: float32(d.BWInter), LatencyInter: float32(d.LatencyInter),
		SameChannels: d.SameChannels,
	}
	var ok bool
	if g.TypeIntra, ok = model.ParsePathType(d.TypeIntra); !ok {
		return nil, fmt.Errorf("graph %d: unknown typeIntra %q", d.ID, d.TypeIntra)
	}
	if g.TypeInter, ok = model.ParsePathType(d.TypeInter); !ok {
		return nil, fmt.Errorf("graph %d: unknown typeInter %q", d.ID, d.TypeInter)
	}
	if len(d.Channels) != d.NChannels {
		return nil, fmt.Errorf("graph %d: nChannels %d but %d channels", d.ID, d.NChannels, len(d.Channels))
	}
	for c, cd := range d.Channels {
		ch := model.GraphChannel{Intra: append([]int(nil), cd.Intra...), Inter: [2]int64{model.NoNet, model.NoNet}}
		if len(cd.Inter) != 0 && len(cd.Inter) != 2 {
			return nil, fmt.Errorf("graph %d channel %d: %d inter NETs, want 2", d.ID, c, len(cd.Inter))
		}
		for i, name := range cd.Inter {
			id, err := netID(s, name)
			if err != nil {
				return nil, fmt.Errorf("graph %d channel %d: %w", d.ID, c, err)
			}
			ch.Inter[i] = id
		}
		g.Channels = append(g.Channels, ch)
	}
	return g, nil
}

func netID(s *model.System, name string) (int64, error) {
	if name == "-1" {
		return model.NoNet, nil
	}
	for _, n := range s.Nodes[model.NET] {
		if n.Name() == name {
			return int64(n.ID), nil
		}
	}
	return 0, fmt.Errorf("no NET named %q", name)
}
