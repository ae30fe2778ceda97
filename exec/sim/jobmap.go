package sim

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// A communicator's Machine has resources of its own, numbered on its own
// hosts; a Job runs its calls on the job's. These map one onto the other:
// a link of a communicator's system is the job's link of the same name on
// the job host that communicator node is.

// onJob returns (making it once) a copy of communicator machine cm whose
// link resources are the job's: hostOf[i] is the job host (cluster node of
// the job's machine) of cm's cluster node i. A link of the communicator's
// systems is the job's link of the same name on that host.
func (j *Job) onJob(cm *Machine, hostOf []int) (*Machine, error) {
	if sm, ok := j.byComm[cm]; ok {
		return sm, nil
	}
	if len(hostOf) != len(cm.Cluster.Nodes) {
		return nil, fmt.Errorf("sim: %d job hosts for a communicator of %d hosts", len(hostOf), len(cm.Cluster.Nodes))
	}
	byName := make(map[string]int32, len(j.m.res))
	for id, r := range j.m.res {
		if _, dup := byName[r.name]; dup {
			return nil, fmt.Errorf("sim: the job's machine has two resources named %s", r.name)
		}
		byName[r.name] = int32(id)
	}
	sm := *cm
	sm.res, sm.resType, sm.extra = j.m.res, j.m.resType, j.m.extra
	sm.linkRes = make(map[*model.Link]int32, len(cm.linkRes))
	for l, id := range cm.linkRes {
		name := cm.res[id].name
		h, rest, ok := splitHost(name)
		if !ok || h < 0 || h >= len(hostOf) || hostOf[h] < 0 || hostOf[h] >= len(j.m.Cluster.Nodes) {
			return nil, fmt.Errorf("sim: communicator resource %s is on no host of the job", name)
		}
		jid, ok := byName["h"+strconv.Itoa(hostOf[h])+":"+rest]
		if !ok {
			return nil, fmt.Errorf("sim: communicator link %s (job host %d) is not a link of the job's topology", name, hostOf[h])
		}
		if j.m.res[jid].cap != cm.res[id].cap {
			return nil, fmt.Errorf("sim: communicator link %s has %.1f GB/s, the job's %.1f GB/s", name, cm.res[id].cap*1e3, j.m.res[jid].cap*1e3)
		}
		sm.linkRes[l] = jid
	}
	sm.memRes = make([]int32, len(cm.memRes))
	for i := range cm.memRes {
		sm.memRes[i] = j.m.memRes[hostOf[i]]
	}
	sm.hostRes = nil // no folding onto one host on shared resources
	sm.routes = map[routeKey]*route{}
	sm.Progress, sm.LoopCalls, sm.EagerCalls = nil, 0, false
	j.byComm[cm] = &sm
	return &sm, nil
}

// CommHosts returns, for every cluster node of a communicator, the host of
// the job it is on: members are the communicator's ranks as job ranks
// (model.LoadOptions.Ranks), job the Machine of the whole job.
func CommHosts(job *Machine, members []int, comm *model.Cluster) ([]int, error) {
	out := make([]int, len(comm.Nodes))
	for i, n := range comm.Nodes {
		if len(n.Ranks) == 0 || n.Ranks[0] >= len(members) {
			return nil, fmt.Errorf("sim: communicator node %d has no member", i)
		}
		g := members[n.Ranks[0]]
		if g < 0 || g >= len(job.rankNode) {
			return nil, fmt.Errorf("sim: communicator rank %d is job rank %d, outside the job's %d", n.Ranks[0], g, len(job.rankNode))
		}
		out[i] = job.rankNode[g]
	}
	return out, nil
}

// splitHost splits a resource name "h3:GPU/0-0->NVS/0" into its host and
// the rest.
func splitHost(name string) (int, string, bool) {
	num, rest, ok := strings.Cut(strings.TrimPrefix(name, "h"), ":")
	if !ok || !strings.HasPrefix(name, "h") {
		return 0, "", false
	}
	h, err := strconv.Atoi(num)
	return h, rest, err == nil
}
