package model

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSplitCommsOrdersByKeyThenRank(t *testing.T) {
	// Six ranks: colors 0/1 alternate, rank 5 opts out; keys reverse the
	// order of color 0 and tie on color 1 (old rank breaks the tie).
	colors := []int{0, 1, 0, 1, 0, SplitNoColor}
	keys := []int{9, 3, 5, 3, 1, 0}
	comms, err := SplitComms(colors, keys)
	require.NoError(t, err)
	assert.Equal(t, [][]int{{4, 2, 0}, {1, 3}}, comms)

	// Colors are returned in increasing order whatever rank shows them first.
	comms, err = SplitComms([]int{7, 2, 7, 2}, []int{0, 0, 0, 0})
	require.NoError(t, err)
	assert.Equal(t, [][]int{{1, 3}, {0, 2}}, comms)

	comms, err = SplitComms([]int{SplitNoColor, SplitNoColor}, []int{0, 0})
	require.NoError(t, err)
	assert.Empty(t, comms)

	// Other negative colors are colors like any other.
	comms, err = SplitComms([]int{0, -2, -2, 0}, []int{0, 1, 0, 0})
	require.NoError(t, err)
	assert.Equal(t, [][]int{{2, 1}, {0, 3}}, comms)
	_, err = SplitComms([]int{0}, []int{0, 0})
	require.Error(t, err)
}

func TestParseRanks(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  string
	}{
		{in: "0,2,4-7", want: []int{0, 2, 4, 5, 6, 7}},
		{in: "3,1", want: []int{3, 1}},
		{in: " 5 ", want: []int{5}},
		{in: "", err: "empty"},
		{in: "1,,2", err: `"" is not a rank`},
		{in: "-1", err: "not a rank"},
		{in: "4-2", err: "increasing range"},
		{in: "0,1-3,2", err: "rank 2 appears twice"},
		{in: "a", err: "not a rank"},
	} {
		got, err := ParseRanks(c.in)
		if c.err != "" {
			require.ErrorContains(t, err, c.err, c.in)
			continue
		}
		require.NoError(t, err, c.in)
		assert.Equal(t, c.want, got, c.in)
	}
}

func loadSubset(t *testing.T, name string, nodes int, ranks []int) *Cluster {
	t.Helper()
	file := filepath.Join("..", "..", "shared", "topologies", name)
	root, _, err := ReadTopologyFile(file)
	require.NoError(t, err)
	c, err := LoadCluster(root, file, LoadOptions{Nodes: nodes, Params: DefaultParams(), Ranks: ranks})
	require.NoError(t, err)
	return c
}

// busIDs returns the bus id of every GPU of a node's system by rank.
func busIDs(t *testing.T, c *Cluster) map[int]uint64 {
	t.Helper()
	out := map[int]uint64{}
	for _, n := range c.Nodes {
		for _, g := range n.System.Nodes[GPU] {
			if SystemIDOf(g.ID) == n.System.SystemID {
				out[g.GPU.Rank] = g.ID
			}
		}
	}
	return out
}

// TestSubsetKeepsMembersOnly checks what a communicator's ranks see: only
// their GPUs, renumbered in communicator order on the right GPU, every
// NIC, and only the hosts they are on.
func TestSubsetKeepsMembersOnly(t *testing.T) {
	const file = "dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml"
	full := loadSubset(t, file, 2, nil)
	fullIDs := busIDs(t, full)

	ranks := []int{14, 1, 6, 9} // two GPUs on each host, out of order
	sub := loadSubset(t, file, 2, ranks)
	require.Equal(t, 4, sub.NRanks)
	require.Len(t, sub.Nodes, 2)
	assert.False(t, sub.Replicated, "members out of node-major order")
	assert.Equal(t, []int{1, 2}, sub.Nodes[0].Ranks, "job ranks 1 and 6 are on host 0")
	assert.Equal(t, []int{0, 3}, sub.Nodes[1].Ranks, "job ranks 14 and 9 are on host 1")
	ids := busIDs(t, sub)
	for newRank, old := range ranks {
		assert.Equal(t, fullIDs[old]&0xffffffffff, ids[newRank]&0xffffffffff, "communicator rank %d is job rank %d's GPU", newRank, old)
	}
	for i, n := range sub.Nodes {
		assert.Len(t, n.System.Nodes[GPU], 2, "node %d keeps only its members' GPUs", i)
		assert.Len(t, n.System.Nodes[NET], len(full.Nodes[i].System.Nodes[NET]), "node %d keeps its NICs", i)
		assert.Equal(t, 4, n.System.NRanks)
		assert.True(t, n.System.Inter, "node %d: members remain on the other host", i)
		require.NoError(t, CheckPathInvariants(n.System))
	}

	one := loadSubset(t, file, 2, []int{8, 10})
	require.Len(t, one.Nodes, 1, "a host without a member is not in the communicator")
	assert.Equal(t, []int{0, 1}, one.Nodes[0].Ranks)
	assert.False(t, one.Nodes[0].System.Inter, "all members on one host: no network")

	rep := loadSubset(t, file, 3, []int{2, 5, 10, 13, 18, 21})
	assert.True(t, rep.Replicated, "the same two GPUs of every host, node-major")
	assert.Equal(t, []int{4, 5}, rep.Nodes[2].Ranks)
}

func TestSubsetRejectsBadRanks(t *testing.T) {
	file := filepath.Join("..", "..", "shared", "topologies", "dgx1-v100-32g-x8-nvlink-hybrid-cube-mesh.xml")
	root, _, err := ReadTopologyFile(file)
	require.NoError(t, err)
	for _, c := range []struct {
		ranks []int
		err   string
	}{
		{ranks: []int{0, 16}, err: "job rank 16, outside the job's ranks 0..15"},
		{ranks: []int{3, 3}, err: "job rank 3 appears twice"},
		{ranks: []int{}, err: "no rank"},
	} {
		_, err := LoadCluster(root, file, LoadOptions{Nodes: 2, Ranks: c.ranks})
		require.ErrorContains(t, err, c.err)
		require.ErrorContains(t, err, file)
	}
}

func TestReplicatedSubset(t *testing.T) {
	assert.True(t, replicatedSubset([]int{0, 1, 8, 9}, 8))
	assert.True(t, replicatedSubset([]int{8, 9, 24, 25}, 8), "hosts may be skipped")
	assert.False(t, replicatedSubset([]int{0, 1, 2}, 8), "one host")
	assert.False(t, replicatedSubset([]int{0, 1, 8}, 8), "uneven")
	assert.False(t, replicatedSubset([]int{0, 1, 9, 8}, 8), "another local order")
	assert.False(t, replicatedSubset([]int{0, 1, 9, 10}, 8), "other GPUs")
	assert.False(t, replicatedSubset([]int{8, 9, 0, 1}, 8), "hosts out of order")
	assert.False(t, replicatedSubset([]int{0, 8, 1, 9}, 8), "interleaved")
}

// FuzzParseRanks: any text gives an error or a list of distinct ranks
// from 0, which, written back as a plain list, reads the same.
func FuzzParseRanks(f *testing.F) {
	for _, s := range []string{"0,2,4-7", "3,1", "0-65535", "5-", "1,,2", "0-4,2", " 7 ", "-3", "9999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseRanks(s)
		if err != nil {
			return
		}
		require.NotEmpty(t, got)
		require.LessOrEqual(t, len(got), maxCommRanks)
		seen := map[int]bool{}
		parts := make([]string, len(got))
		for i, r := range got {
			require.GreaterOrEqual(t, r, 0)
			require.False(t, seen[r], "rank %d twice", r)
			seen[r] = true
			parts[i] = strconv.Itoa(r)
		}
		again, err := ParseRanks(strings.Join(parts, ","))
		require.NoError(t, err)
		require.Equal(t, got, again)
	})
}
