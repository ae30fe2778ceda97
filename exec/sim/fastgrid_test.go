package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// gridTopo is one topology of the fast-versus-accurate grid.
type gridTopo struct {
	name  string
	file  string // "" for the embedded default; relative to the repo root
	nodes int
}

// gridCase is one call of the grid.
type gridCase struct {
	name  string
	coll  model.Collective
	algo  model.Algorithm
	proto model.Protocol
	bytes int64
}

func gridFile(t testing.TB, f string) string {
	if f == "" {
		return ""
	}
	p := filepath.Join(repoRoot(), f)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("topology %s not available: %v", f, err)
	}
	return p
}

// fastGrid compares fast and step-accurate runs over topologies and calls;
// it fails with a table of the calls that deviate more than 2% (or that
// the fast mode answers without saying how).
func fastGrid(t *testing.T, topos []gridTopo, cases []gridCase) {
	type row struct {
		topo, call     string
		acc, fast, dev float64
		how            string
		evAcc, evFast  uint64
	}
	var rows, bad []row
	worst := map[string]float64{}
	aggregated := map[string]int{}
	for _, tp := range topos {
		res := loadSearch(t, gridFile(t, tp.file), tp.nodes)
		acc := newSim(t, res, nil)
		fast := newSim(t, res, nil)
		fast.Mode = ModeFast
		n := res.Cluster.NRanks
		for _, gc := range cases {
			unit := int64(4 * n)
			count, err := CountOf(gc.coll, max(gc.bytes/unit, 1)*unit, model.DtypeFP32, n)
			if err != nil {
				t.Fatal(err)
			}
			c := Call{Coll: gc.coll, Count: count, Dtype: model.DtypeFP32, Algo: gc.algo, Proto: gc.proto, Root: n / 3}
			a, err := acc.Run(c)
			if err != nil {
				t.Logf("%s %s: %v (skipped)", tp.name, gc.name, err)
				continue
			}
			f, err := fast.Run(c)
			if err != nil {
				t.Errorf("%s %s: fast: %v", tp.name, gc.name, err)
				continue
			}
			e := math.Abs(f.TimeUs-a.TimeUs) / a.TimeUs
			r := row{tp.name, fmt.Sprintf("%s %s/%s %d", gc.name, a.Algo, a.Proto, gc.bytes), a.TimeUs, f.TimeUs, e, f.Fast, a.Events, f.Events}
			rows = append(rows, r)
			worst[gc.name] = max(worst[gc.name], e)
			if !strings.HasPrefix(f.Fast, "step-accurate") {
				aggregated[gc.name]++
			}
			if e > 0.02 || f.Fast == "" || a.Fast != "" {
				bad = append(bad, r)
			}
		}
	}
	var b strings.Builder
	table := func(rs []row) {
		fmt.Fprintf(&b, "%-16s %-36s %12s %12s %8s %10s %10s  %s\n", "topology", "call", "accurate us", "fast us", "dev %", "events", "fast ev", "fast mode")
		for _, r := range rs {
			fmt.Fprintf(&b, "%-16s %-36s %12.2f %12.2f %8.3f %10d %10d  %s\n", r.topo, r.call, r.acc, r.fast, 100*r.dev, r.evAcc, r.evFast, r.how)
		}
	}
	table(rows)
	var names []string
	for k := range worst {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		fmt.Fprintf(&b, "max deviation %-14s %.4f%%  (%d aggregated)\n", k, 100*worst[k], aggregated[k])
		if aggregated[k] == 0 {
			t.Errorf("%s: the fast mode aggregated no call of the grid", k)
		}
	}
	t.Logf("fast versus accurate, %d calls:\n%s", len(rows), b.String())
	if len(bad) > 0 {
		b.Reset()
		table(bad)
		t.Errorf("%d call(s) where fast and accurate disagree by more than 2%% or the fast mode did not say how it ran:\n%s", len(bad), b.String())
	}
}

func gridCases(sizes []int64) []gridCase {
	var cs []gridCase
	for _, sz := range sizes {
		cs = append(cs,
			gridCase{"allreduce-ring", model.CollAllReduce, model.AlgoRing, -1, sz},
			gridCase{"allreduce-tree", model.CollAllReduce, model.AlgoTree, -1, sz},
			gridCase{"allgather", model.CollAllGather, -1, -1, sz},
			gridCase{"reducescatter", model.CollReduceScatter, -1, -1, sz},
			gridCase{"broadcast", model.CollBroadcast, -1, -1, sz},
			gridCase{"reduce", model.CollReduce, -1, -1, sz},
			gridCase{"alltoall", model.CollAlltoAll, -1, -1, sz},
			gridCase{"sendrecv", model.CollSendRecv, -1, -1, sz},
		)
	}
	return cs
}

// TestFastGrid compares the fast mode with the step-accurate one over
// every op on several topologies of testdata/xml and ../shared/topologies,
// one and several hosts (TWINCCL_SIM_GRID=long: more topologies and sizes).
func TestFastGrid(t *testing.T) {
	topos := []gridTopo{
		{"h200x2", "", 1},
		{"h200x2-4nodes", "", 4},
		{"h100x8", "../shared/topologies/oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 1},
		{"h100x8-2nodes", "../shared/topologies/oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 2},
		// two trays of an NVL72 whose hosts differ (one MNNVL system)
		{"gb300-2trays", "../shared/topologies/oci-gb300-nvl72-2trays-x8-mnnvl-8x800g.xml", 1},
	}
	sizes := []int64{64 << 10, 4 << 20}
	if os.Getenv("TWINCCL_SIM_GRID") == "long" {
		topos = append(topos,
			gridTopo{"h100x8-4nodes", "../shared/topologies/oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml", 4},
			gridTopo{"dgx1-v100", "../shared/topologies/dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml", 1},
			gridTopo{"rtx3090x8-2n", "../shared/topologies/pcie-rtx3090x8-2socket-1ib.xml", 2},
			gridTopo{"a100pcie-2n", "../shared/topologies/azure-ncv4-a100pcie-x4-nvlink-bridge-pairs.xml", 2},
			gridTopo{"power9", "testdata/xml/edge-power9-nvlink-cpu.xml", 1},
		)
		sizes = append(sizes, 1<<10, 64<<20, 3<<20+4096)
	}
	fastGrid(t, topos, gridCases(sizes))
}
