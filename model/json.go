package model

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// F32 is a float32 written to JSON with 9 significant digits (C's %.9g), so
// that values such as 18*20.6 = 370.800018 read back bit for bit and match
// the documents NCCL-based tools write.
type F32 float32

// MarshalJSON implements json.Marshaler.
func (f F32) MarshalJSON() ([]byte, error) {
	return strconv.AppendFloat(nil, float64(f), 'g', 9, 64), nil
}

// SystemDoc is the JSON form of a System: its search bounds, GPUs, NETs and
// the paths from every GPU and NET (the "system" object of the ground-truth
// documents in shared/groundtruth).
type SystemDoc struct {
	MaxBW    F32        `json:"maxBw"`
	TotalBW  F32        `json:"totalBw"`
	Inter    int        `json:"inter"`
	SystemID int        `json:"systemId"`
	GPUs     []GPUDoc   `json:"gpus"`
	NETs     []NETDoc   `json:"nets"`
	Paths    PathsByKey `json:"paths"`
}

// GPUDoc describes one GPU node.
type GPUDoc struct {
	ID   string `json:"id"`
	Rank int    `json:"rank"`
	Dev  int    `json:"dev"`
	SM   int    `json:"sm"`
	GDR  int    `json:"gdr"`
}

// NETDoc describes one NET node.
type NETDoc struct {
	ID          string `json:"id"`
	Dev         int    `json:"dev"`
	BW          F32    `json:"bw"`
	Latency     F32    `json:"latency"`
	GDR         int    `json:"gdr"`
	Port        int    `json:"port"`
	MaxChannels int    `json:"maxChannels"`
	LocalGPU    int    `json:"localGpu"`
}

// PathDoc is one path: destination node, hop count, bandwidth, type.
type PathDoc struct {
	To    string `json:"to"`
	Count int    `json:"count"`
	BW    F32    `json:"bw"`
	Type  string `json:"type"`
}

// PathsByKey maps a source node name to its paths, keeping the source
// order (GPUs, then NETs) when written.
type PathsByKey struct {
	Keys  []string
	Paths map[string][]PathDoc
}

// MarshalJSON writes the object with keys in insertion order.
func (p PathsByKey) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range p.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(p.Paths[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads the object (key order is not recovered).
func (p *PathsByKey) UnmarshalJSON(data []byte) error {
	p.Paths = map[string][]PathDoc{}
	if err := json.Unmarshal(data, &p.Paths); err != nil {
		return err
	}
	p.Keys = p.Keys[:0]
	for k := range p.Paths {
		p.Keys = append(p.Keys, k)
	}
	return nil
}

// Doc returns the JSON form of the system.
func (s *System) Doc() SystemDoc {
	d := SystemDoc{MaxBW: F32(s.MaxBW), TotalBW: F32(s.TotalBW), SystemID: s.SystemID,
		GPUs: []GPUDoc{}, NETs: []NETDoc{}, Paths: PathsByKey{Paths: map[string][]PathDoc{}}}
	if s.Inter {
		d.Inter = 1
	}
	for _, g := range s.Nodes[GPU] {
		d.GPUs = append(d.GPUs, GPUDoc{ID: g.Name(), Rank: g.GPU.Rank, Dev: g.GPU.Dev, SM: g.GPU.SM, GDR: g.GPU.GDR})
	}
	for _, n := range s.Nodes[NET] {
		d.NETs = append(d.NETs, NETDoc{ID: n.Name(), Dev: n.NET.Dev, BW: F32(n.NET.BW), Latency: F32(n.NET.Latency),
			GDR: n.NET.GDR, Port: n.NET.Port, MaxChannels: n.NET.MaxChannels, LocalGPU: n.NET.LocalGPU})
	}
	for _, t := range []NodeType{GPU, NET} {
		for _, n := range s.Nodes[t] {
			list := []PathDoc{}
			for pt := range n.Paths {
				for i, m := range s.Nodes[pt] {
					if n.Paths[pt] == nil {
						break
					}
					p := &n.Paths[pt][i]
					list = append(list, PathDoc{To: m.Name(), Count: p.Count(), BW: F32(p.BW), Type: p.Type.String()})
				}
			}
			d.Paths.Keys = append(d.Paths.Keys, n.Name())
			d.Paths.Paths[n.Name()] = list
		}
	}
	return d
}

// ClusterDoc is the JSON document of `replay topo --json`: the job's size
// and each node's system, with the field names of shared/groundtruth.
type ClusterDoc struct {
	Input  string    `json:"input"`
	NRanks int       `json:"nRanks"`
	NNodes int       `json:"nNodes"`
	MNNVL  bool      `json:"mnnvl"`
	Nodes  []NodeDoc `json:"nodes"`
}

// NodeDoc is one node of a ClusterDoc.
type NodeDoc struct {
	Node   int       `json:"node"`
	Ranks  []int     `json:"ranks"`
	System SystemDoc `json:"system"`
}

// Doc returns the JSON form of the cluster.
func (c *Cluster) Doc() ClusterDoc {
	d := ClusterDoc{Input: c.File, NRanks: c.NRanks, NNodes: len(c.Nodes), MNNVL: c.MNNVL}
	for _, n := range c.Nodes {
		d.Nodes = append(d.Nodes, NodeDoc{Node: n.Index, Ranks: n.Ranks, System: n.System.Doc()})
	}
	return d
}
