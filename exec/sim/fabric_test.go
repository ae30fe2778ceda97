package sim

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	fabfile "github.com/twinccl/twinccl/model/fabric"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// dgxH100 is testdata/xml/dgx-h100-8x400g.xml: 8 GPUs, each with its own
// 400G NIC (one rail per GPU).
func dgxH100() string { return filepath.Join(repoRoot(), "testdata", "xml", "dgx-h100-8x400g.xml") }

func parseFabric(t *testing.T, text string) *fabfile.Fabric {
	t.Helper()
	f, err := fabfile.Parse("test.yaml", []byte(text))
	require.NoError(t, err)
	return f
}

// alltoall16M is an AlltoAll of 16 MiB per rank: Count is per peer (as
// ncclAlltoAll's), 1 MiB to each of 16 peers (Simple).
var alltoall16M = Call{Coll: model.CollAlltoAll, Count: 256 << 10, Dtype: model.DtypeFP32, Algo: -1, Proto: -1}

// fabricBytes sums the bytes carried by the fabric's spine links, going up
// from the leaves and coming down to them.
func fabricBytes(r CallResult) (up, down float64) {
	for _, l := range r.Links {
		switch {
		case strings.HasPrefix(l.Name, "fabric:spine->"):
			down += l.Bytes
		case strings.HasPrefix(l.Name, "fabric:"):
			up += l.Bytes
		}
	}
	return up, down
}

// TestFabricTransparentWhenNonBlocking: one leaf for every host, or a
// non-blocking rail fabric without switch latency, predicts what the flat
// network predicts, and on the rail fabric nothing crosses the spine:
// rings keep their graph's NIC at both ends (same rail) and AlltoAll's
// sends go out through the NIC of the receiver's rail by PXN.
func TestFabricTransparentWhenNonBlocking(t *testing.T) {
	res := loadSearch(t, dgxH100(), 2)
	ring := Call{Coll: model.CollAllReduce, Count: 1 << 22, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple}
	flat := newSim(t, res, nil)
	flat.Loop = 0
	var want []CallResult
	for _, c := range []Call{ring, alltoall16M} {
		r, err := flat.Run(c)
		require.NoError(t, err)
		want = append(want, r)
	}
	for _, text := range []string{
		"leaf: {kind: tor, hosts: 2}\n",
		"leaf: {kind: rail, hosts: 2, uplinks: 4, oversubscription: 8}\nspine: {}\nadaptive_routing: true\n",
	} {
		s := newSim(t, res, nil)
		s.Loop = 0
		require.NoError(t, s.Machine.SetFabric(parseFabric(t, text)))
		for i, c := range []Call{ring, alltoall16M} {
			got, err := s.Run(c)
			require.NoError(t, err)
			require.Equal(t, want[i].TimeUs, got.TimeUs, "%s: %v", text, c.Coll)
			up, down := fabricBytes(got)
			require.Zero(t, up+down, "%s: %v crossed the spine", text, c.Coll)
		}
	}
}

// TestFabricPXNDisabledCrossesRails: without PXN (NCCL_PXN_DISABLE=1) a
// p2p send leaves through the sender's own NIC, the receiver's arrives on
// its own, so every pair of GPUs with different indices crosses rails: on
// a rail fabric 56 of the 64 GPU pairs between the two hosts go through
// the spine, each way, 1 MiB each. The spine is 8:1 oversubscribed, so
// the AlltoAll also takes longer than with PXN.
func TestFabricPXNDisabledCrossesRails(t *testing.T) {
	railFabric := "leaf: {kind: rail, hosts: 2, uplinks: 4, oversubscription: 8}\nspine: {}\nadaptive_routing: true\n"
	pxn := newSim(t, loadSearch(t, dgxH100(), 2), nil)
	pxn.Loop = 0
	require.NoError(t, pxn.Machine.SetFabric(parseFabric(t, railFabric)))
	with, err := pxn.Run(alltoall16M)
	require.NoError(t, err)

	noPXN := newSim(t, loadSearchEnv(t, dgxH100(), 2, map[string]string{"NCCL_PXN_DISABLE": "1"}), nil)
	noPXN.Loop = 0
	require.NoError(t, noPXN.Machine.SetFabric(parseFabric(t, railFabric)))
	without, err := noPXN.Run(alltoall16M)
	require.NoError(t, err)
	up, down := fabricBytes(without)
	perPeer := float64(alltoall16M.Count * 4)
	require.InDelta(t, 2*56*perPeer, up, 1)
	require.InDelta(t, 2*56*perPeer, down, 1)
	require.Greater(t, without.TimeUs, 1.5*with.TimeUs, "8:1 spine links slow the cross-rail traffic")
}

// TestFabricOversubscriptionBound: with one host per ToR leaf and 4:1
// oversubscription, each host's traffic to the other leaves the host
// through 8*50/4 = 100 GB/s (times the NET links' efficiency). An
// AlltoAll sends 8 GPUs x 8 remote peers x 1 MiB off each host, so it
// cannot finish before that volume over that capacity, and the network
// being the bottleneck, it should not take much longer either.
func TestFabricOversubscriptionBound(t *testing.T) {
	s := newSim(t, loadSearch(t, dgxH100(), 2), nil)
	s.Loop = 0
	require.NoError(t, s.Machine.SetFabric(parseFabric(t, "leaf: {kind: tor, hosts: 1, uplinks: 1, oversubscription: 4}\nspine: {}\nadaptive_routing: true\n")))
	r, err := s.Run(alltoall16M)
	require.NoError(t, err)
	perPeer := float64(alltoall16M.Count * 4)
	eff := s.Machine.calib.Link(model.LinkNET).Eff
	boundUs := 64 * perPeer / (8 * 50 / 4 * eff * 1e3)
	require.GreaterOrEqual(t, r.KernelUs, boundUs)
	require.Less(t, r.KernelUs, 1.25*boundUs)
	up, down := fabricBytes(r)
	require.InDelta(t, 2*64*perPeer, up, 1)
	require.InDelta(t, up, down, 1)
}

// TestFabricECMP: static ECMP over one uplink is adaptive routing over
// that uplink; over eight, transfers hashed onto the same uplink share an
// eighth of the capacity, which can only be slower than spreading them
// over all of it.
func TestFabricECMP(t *testing.T) {
	res := loadSearch(t, dgxH100(), 2)
	run := func(text string) CallResult {
		s := newSim(t, res, nil)
		s.Loop = 0
		require.NoError(t, s.Machine.SetFabric(parseFabric(t, text)))
		r, err := s.Run(alltoall16M)
		require.NoError(t, err)
		return r
	}
	const tor = "leaf: {kind: tor, hosts: 1, uplinks: %d, oversubscription: 4}\nspine: {}\nadaptive_routing: %v\n"
	ar1 := run(strings.NewReplacer("%d", "1", "%v", "true").Replace(tor))
	ecmp1 := run(strings.NewReplacer("%d", "1", "%v", "false").Replace(tor))
	require.Equal(t, ar1.TimeUs, ecmp1.TimeUs)
	ar8 := run(strings.NewReplacer("%d", "8", "%v", "true").Replace(tor))
	ecmp8 := run(strings.NewReplacer("%d", "8", "%v", "false").Replace(tor))
	require.Equal(t, ar1.TimeUs, ar8.TimeUs, "adaptive routing pools the uplinks")
	require.Greater(t, ecmp8.TimeUs, ar8.TimeUs)
	used := 0
	for _, l := range ecmp8.Links {
		if strings.HasPrefix(l.Name, "fabric:leaf0.0.up") && l.Bytes > 0 {
			used++
		}
	}
	require.Greater(t, used, 1, "the hash spreads the transfers over several uplinks")
}

// TestFabricErrors: a fabric written for another cluster is refused with
// its file named; detaching it restores the flat network.
func TestFabricErrors(t *testing.T) {
	s := newSim(t, loadSearch(t, dgxH100(), 2), nil)
	err := s.Machine.SetFabric(parseFabric(t, "hosts: 4\nleaf: {kind: tor, hosts: 2}\nspine: {}\n"))
	require.EqualError(t, err, "test.yaml: written for 4 hosts, the cluster has 2")
	err = s.Machine.SetFabric(parseFabric(t, "leaf: {kind: tor, hosts: 1}\n"))
	require.ErrorContains(t, err, "test.yaml: 2 hosts fill 2 leaf groups of 1 and the fabric has no spine")
	require.NoError(t, s.Machine.SetFabric(nil))
	_, err = s.Run(alltoall16M)
	require.NoError(t, err)
}

// TestFabricCrossNic: NCCL_CROSS_NIC decides, in the search, whether a
// ring channel may enter a host through one NIC and leave through another.
// With 0, and with the default 2 (ring channel pairs cross NICs so that
// consecutive hosts meet on the same rail), every hop between hosts stays
// on one rail and a rail fabric carries nothing on its spine; with 1 the
// DGX H100's rings enter on NET i and leave on NET i+1, so each hop between
// hosts changes rails, crosses the 8:1 spine and the AllReduce slows down.
func TestFabricCrossNic(t *testing.T) {
	ring := Call{Coll: model.CollAllReduce, Count: 16 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple}
	run := func(crossNic int) CallResult {
		t.Helper()
		cl := loadSearch(t, dgxH100(), 2).Cluster
		o := search.DefaultOptions()
		o.Search.CrossNic = crossNic
		res, err := search.Run(cl, o)
		require.NoError(t, err)
		s := newSim(t, res, nil)
		s.Loop = 0
		require.NoError(t, s.Machine.SetFabric(parseFabric(t, "leaf: {kind: rail, hosts: 2, uplinks: 4, oversubscription: 8}\nspine: {}\nadaptive_routing: true\n")))
		r, err := s.Run(ring)
		require.NoError(t, err)
		return r
	}
	for _, c := range []int{0, 2} {
		up, down := fabricBytes(run(c))
		require.Zero(t, up+down, "NCCL_CROSS_NIC=%d", c)
	}
	same := run(0)
	crossed := run(1)
	up, down := fabricBytes(crossed)
	require.Positive(t, up)
	require.InDelta(t, up, down, 1)
	require.Greater(t, crossed.TimeUs, same.TimeUs)
}

// TestFabricGin: GPU-initiated puts between hosts cross the fabric too:
// behind 4:1 leaves of one host, the GIN AlltoAll on two DGX H100 puts
// every off-host byte on the spine links and takes longer than on the
// flat network.
func TestFabricGin(t *testing.T) {
	res := loadSearch(t, dgxH100(), 2)
	p, err := GinAlltoAllProgram(res.Cluster.NRanks, 1, 1<<20)
	require.NoError(t, err)
	flat := newSim(t, res, nil)
	want, err := flat.Machine.RunGin(p)
	require.NoError(t, err)
	s := newSim(t, res, nil)
	require.NoError(t, s.Machine.SetFabric(parseFabric(t, "leaf: {kind: tor, hosts: 1, oversubscription: 4}\nspine: {}\nadaptive_routing: true\n")))
	got, err := s.Machine.RunGin(p)
	require.NoError(t, err)
	require.Greater(t, got.KernelUs, want.KernelUs)
	var up, offHost float64
	for _, l := range got.Links {
		if strings.HasPrefix(l.Name, "fabric:") && !strings.HasPrefix(l.Name, "fabric:spine->") {
			up += l.Bytes
		}
	}
	for _, put := range got.Puts {
		if (put.Rank < 8) != (put.Peer < 8) {
			offHost += float64(put.Bytes)
		}
	}
	require.Positive(t, offHost)
	require.InDelta(t, offHost, up, 1)
}

// TestFabricFastMode: with a fabric the fast mode does not fold hosts
// (leaves break the rotation symmetry) but still merges identical
// channels, and predicts what the accurate mode predicts, spine traffic
// included (NCCL_CROSS_NIC=1 rings cross rails on an 8:1 spine).
func TestFabricFastMode(t *testing.T) {
	cl := loadSearch(t, dgxH100(), 4).Cluster
	o := search.DefaultOptions()
	o.Search.CrossNic = 1
	res, err := search.Run(cl, o)
	require.NoError(t, err)
	call := Call{Coll: model.CollAllGather, Count: 1 << 18, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple}
	var times [2]float64
	for i, mode := range []Mode{ModeAccurate, ModeFast} {
		s := newSim(t, res, nil)
		s.Loop = 0
		s.Mode = mode
		require.NoError(t, s.Machine.SetFabric(parseFabric(t, "leaf: {kind: rail, hosts: 2, uplinks: 4, oversubscription: 8}\nspine: {}\nadaptive_routing: true\n")))
		r, err := s.Run(call)
		require.NoError(t, err)
		times[i] = r.TimeUs
		if mode == ModeFast {
			folded, why, err := s.Fold(call)
			require.NoError(t, err)
			require.True(t, folded, "identical channels still merge")
			require.NotContains(t, why, "onto one", "hosts must not fold under a fabric")
		}
	}
	require.InEpsilon(t, times[0], times[1], 1e-9)
}
