package sim

import "github.com/twinccl/twinccl/model"

// netDevs picks the NET devices a NET connection leaves and enters through
// on a channel, as NCCL 2.28.9 does (model.Cluster.NetDevs: the graph's
// channel NETs for ring and tree connections, the peer's rail through PXN
// for p2p ones).
func (m *Machine) netDevs(ga, gb *model.Node, channel int) (neta, netb *model.Node, err error) {
	from, to := ga.GPU.Rank, gb.GPU.Rank
	return m.Cluster.NetDevs(m.Plan, m.rankNode[from], from, m.rankNode[to], to, channel, m.settings.CrossNicOff)
}
