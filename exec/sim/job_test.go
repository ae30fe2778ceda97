package sim

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// jobComm is one communicator of a test job: its members (job ranks), its
// simulator and the job hosts of its nodes.
type jobComm struct {
	members []int
	sim     *Simulator
	hosts   []int
}

// loadJob builds the machine of a whole job (a topology file replicated
// on nodes hosts) and the communicators of the given members.
func loadJob(t *testing.T, name string, nodes int, comms ...[]int) (*Simulator, []jobComm) {
	t.Helper()
	file := filepath.Join(repoRoot(), "..", "shared", "topologies", name)
	whole := newSim(t, loadSearch(t, file, nodes), nil)
	root, _, err := model.ReadTopologyFile(file)
	require.NoError(t, err)
	var out []jobComm
	for _, members := range comms {
		cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: model.DefaultParams(), Ranks: members})
		require.NoError(t, err)
		res, err := search.Run(cl, search.DefaultOptions())
		require.NoError(t, err)
		s := newSim(t, res, nil)
		hosts, err := CommHosts(whole.Machine, members, cl)
		require.NoError(t, err)
		out = append(out, jobComm{members: members, sim: s, hosts: hosts})
	}
	return whole, out
}

// runJob starts one call per communicator at time 0 and runs them to the
// end; it returns each call's end (ps) by communicator and the job.
func runJob(t *testing.T, whole *Simulator, comms []jobComm, c Call) ([]Time, *Job) {
	t.Helper()
	j := NewJob(whole.Machine)
	for i, cm := range comms {
		p, _, err := cm.sim.Program(c)
		require.NoError(t, err)
		require.NoError(t, j.Start(cm.sim.Machine, cm.hosts, p, i, nil))
	}
	ends := make([]Time, len(comms))
	for j.InFlight() > 0 {
		fin, err := j.Advance(1 << 62)
		require.NoError(t, err)
		for _, f := range fin {
			ends[f.Tag] = f.End - f.Start
		}
	}
	return ends, j
}

// jobTraffic is the wire bytes of a call run step-accurate on its
// communicator's machine, per resource of the job (hostOf: CommHosts).
func jobTraffic(t *testing.T, r *Result, hostOf []int) map[string]float64 {
	t.Helper()
	require.Zero(t, r.Folded)
	out := map[string]float64{}
	for _, l := range r.Links {
		h, rest, ok := splitHost(l.Name)
		require.True(t, ok && h >= 0 && h < len(hostOf), l.Name)
		out["h"+strconv.Itoa(hostOf[h])+":"+rest] += l.Bytes
	}
	return out
}

var bigAllReduce = Call{Coll: model.CollAllReduce, Count: 32 << 20, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: -1, Proto: -1}

// TestJobAloneIsMachineRun: one call alone in a Job takes exactly the time
// it takes on its own machine, and moves the same bytes on the same links.
func TestJobAloneIsMachineRun(t *testing.T) {
	whole, comms := loadJob(t, "pcie-rtx3090x8-2socket-1ib.xml", 2, []int{1, 9})
	p, _, err := comms[0].sim.Program(bigAllReduce)
	require.NoError(t, err)
	alone, err := comms[0].sim.Machine.Run(p)
	require.NoError(t, err)
	ends, j := runJob(t, whole, comms, bigAllReduce)
	require.Equal(t, alone.KernelUs, float64(ends[0])/psPerUs)
	require.Equal(t, jobTraffic(t, alone, comms[0].hosts), j.Moved())

	// Streamed from the generator, as Machine.RunGen runs it.
	g, _, err := comms[0].sim.Generator(bigAllReduce)
	require.NoError(t, err)
	gen, err := comms[0].sim.Machine.RunGen(g, nil)
	require.NoError(t, err)
	require.Equal(t, alone.KernelUs, gen.KernelUs)
	j = NewJob(whole.Machine)
	g, _, err = comms[0].sim.Generator(bigAllReduce)
	require.NoError(t, err)
	require.NoError(t, j.StartGen(comms[0].sim.Machine, comms[0].hosts, g, 7, nil))
	fin, err := j.Advance(1 << 62)
	require.NoError(t, err)
	require.Len(t, fin, 1)
	require.Equal(t, 7, fin[0].Tag)
	require.Equal(t, alone.KernelUs, float64(fin[0].End-fin[0].Start)/psPerUs)
}

// TestJobSharedLinksTakeTwice: two identical bandwidth-bound AllReduces
// of disjoint communicators that cross the same NIC and PCIe links (one
// GPU of each of two hosts each, one IB NIC per host) take about twice as
// long together as one alone; every link carries the bytes of both.
func TestJobSharedLinksTakeTwice(t *testing.T) {
	whole, comms := loadJob(t, "pcie-rtx3090x8-2socket-1ib.xml", 2, []int{0, 8}, []int{1, 9})
	one, _ := runJob(t, whole, comms[:1], bigAllReduce)
	two, j := runJob(t, whole, comms, bigAllReduce)
	// No resource carries more than its capacity allows in the time
	// both took, and sharing is no worse than one after the other.
	var floor float64 // ps
	for i := range j.fab.res {
		if rs := &j.fab.res[i]; rs.cap > 0 {
			floor = max(floor, rs.bytes/rs.cap)
		}
	}
	for i, e := range two {
		ratio := float64(e) / float64(one[0])
		t.Logf("communicator %v: %.1f us together, %.1f us alone: x%.3f; busiest link's bytes at its capacity %.1f us",
			comms[i].members, float64(e)/psPerUs, float64(one[0])/psPerUs, ratio, floor/psPerUs)
		assert.GreaterOrEqual(t, float64(e), floor, "communicator %v: faster than the links allow", comms[i].members)
		assert.LessOrEqual(t, ratio, 2.0, "communicator %v: slower than one after the other", comms[i].members)
		assert.GreaterOrEqual(t, ratio, 1.8, "communicator %v: about twice one's time", comms[i].members)
	}
	// Conservation: each resource carried what the two calls alone move.
	want := map[string]float64{}
	for _, cm := range comms {
		p, _, err := cm.sim.Program(bigAllReduce)
		require.NoError(t, err)
		r, err := cm.sim.Machine.Run(p)
		require.NoError(t, err)
		for name, b := range jobTraffic(t, r, cm.hosts) {
			want[name] += b
		}
	}
	got := j.Moved()
	require.Equal(t, len(want), len(got))
	for name, b := range want {
		assert.InEpsilon(t, b, got[name], 1e-9, name)
	}
}

// TestJobDisjointLinksRunAsAlone: two AllReduces on disjoint GPU pairs of
// one NVSwitch host share no link and each takes its time alone.
func TestJobDisjointLinksRunAsAlone(t *testing.T) {
	whole, comms := loadJob(t, "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", 1, []int{0, 1}, []int{2, 3})
	one, _ := runJob(t, whole, comms[:1], bigAllReduce)
	two, _ := runJob(t, whole, comms, bigAllReduce)
	for i, e := range two {
		assert.InEpsilon(t, float64(one[0]), float64(e), 1e-3, "communicator %v", comms[i].members)
	}
}

func TestJobRejectsForeignLinks(t *testing.T) {
	// A communicator of another topology has links the job has not.
	whole, _ := loadJob(t, "pcie-rtx3090x8-2socket-1ib.xml", 1)
	_, other := loadJob(t, "oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", 1, []int{0, 1})
	p, _, err := other[0].sim.Program(bigAllReduce)
	require.NoError(t, err)
	err = NewJob(whole.Machine).Start(other[0].sim.Machine, other[0].hosts, p, 0, nil)
	require.ErrorContains(t, err, "is not a link of the job's topology")
}

// TestJobStaggeredCalls: a call started while another is half done slows
// it (both end later than alone, the second by less than the whole of the
// first), and a call started after the first ended takes exactly its
// time alone: nothing of the first (its last credits and posts still in
// flight when it ended) is left on the links.
func TestJobStaggeredCalls(t *testing.T) {
	whole, comms := loadJob(t, "pcie-rtx3090x8-2socket-1ib.xml", 2, []int{0, 8}, []int{1, 9})
	alone, _ := runJob(t, whole, comms[:1], bigAllReduce)
	progs := make([]*model.Program, 2)
	for i, cm := range comms {
		p, _, err := cm.sim.Program(bigAllReduce)
		require.NoError(t, err)
		progs[i] = p
	}
	for _, tc := range []struct {
		name    string
		at      Time // start of the second call
		overlap bool
	}{{"half", alone[0] / 2, true}, {"after", alone[0] + alone[0]/10, false}} {
		j := NewJob(whole.Machine)
		require.NoError(t, j.Start(comms[0].sim.Machine, comms[0].hosts, progs[0], 0, nil))
		ends := map[int]Finished{}
		fin, err := j.Advance(tc.at)
		require.NoError(t, err)
		for _, f := range fin {
			ends[f.Tag] = f
		}
		if len(fin) == 0 {
			require.Equal(t, tc.at, j.Now(), tc.name)
		} else { // the first ended before: run on to the second's start
			_, err := j.Advance(tc.at)
			require.NoError(t, err)
		}
		require.NoError(t, j.Start(comms[1].sim.Machine, comms[1].hosts, progs[1], 1, nil))
		for j.InFlight() > 0 {
			fin, err := j.Advance(1 << 62)
			require.NoError(t, err)
			for _, f := range fin {
				ends[f.Tag] = f
			}
		}
		first, second := ends[0].End-ends[0].Start, ends[1].End-ends[1].Start
		require.Equal(t, tc.at, ends[1].Start, tc.name)
		if !tc.overlap {
			require.Equal(t, alone[0], first, tc.name)
			require.Equal(t, alone[0], second, "%s: a call after another takes its time alone", tc.name)
			continue
		}
		assert.Greater(t, first, alone[0], tc.name)
		assert.Greater(t, second, alone[0], tc.name)
		assert.Less(t, ends[0].End, ends[1].End, tc.name)
		assert.Less(t, second, alone[0]+alone[0]/2+alone[0]/10, "%s: shared only while both ran", tc.name)
	}
}

// TestJobProxiesPerCommunicator: on hosts joined by the socket plugin, two
// concurrent calls of one communicator queue on its proxy threads, two of
// two communicators over the same ranks (NCCL's proxy thread per
// communicator) do not, so the first pair takes longer. Either pair also
// shares the NICs and links.
func TestJobProxiesPerCommunicator(t *testing.T) {
	whole, comms := loadJob(t, "pcie-rtxa6000x4-2socket-ethernet-only.xml", 2, []int{0, 4}, []int{0, 4})
	call := Call{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: -1, Proto: -1}
	same, _ := runJob(t, whole, []jobComm{comms[0], comms[0]}, call)
	two, _ := runJob(t, whole, comms, call)
	one, _ := runJob(t, whole, comms[:1], call)
	t.Logf("alone %.1f us, two calls of one communicator %.1f us, of two communicators %.1f us",
		float64(one[0])/psPerUs, float64(max(same[0], same[1]))/psPerUs, float64(max(two[0], two[1]))/psPerUs)
	assert.Greater(t, max(two[0], two[1]), one[0])
	assert.Greater(t, max(same[0], same[1]), max(two[0], two[1]))
}
