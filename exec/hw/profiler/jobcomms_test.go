package profiler

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func commsMeta(t *testing.T, cs ...CommMeta) map[string]string {
	b, err := json.Marshal(cs)
	require.NoError(t, err)
	return map[string]string{MetaComms: string(b)}
}

func TestJobComms(t *testing.T) {
	// TP=2 x DP=2 on four processes: world, two TP groups, two DP groups.
	var metas []map[string]string
	var names []string
	for g := int32(0); g < 4; g++ {
		tp, dp := g/2, g%2
		metas = append(metas, commsMeta(t,
			CommMeta{Comm: "0x10", Name: "world", Rank: g, NRanks: 4, GlobalRank: g},
			CommMeta{Comm: hex(uint64(0x20 + tp)), Name: "tp", Rank: g % 2, NRanks: 2, GlobalRank: g},
			CommMeta{Comm: hex(uint64(0x30 + dp)), Rank: g / 2, NRanks: 2, GlobalRank: g},
		))
		names = append(names, "part"+string(rune('0'+g)))
	}
	// The parts come in any order.
	metas[0], metas[3] = metas[3], metas[0]
	names[0], names[3] = names[3], names[0]
	got, err := JobComms(names, metas)
	require.NoError(t, err)
	assert.Equal(t, []JobComm{
		{Comm: 0x10, Name: "world", Ranks: []int32{0, 1, 2, 3}},
		{Comm: 0x20, Name: "tp", Ranks: []int32{0, 1}},
		{Comm: 0x21, Name: "tp", Ranks: []int32{2, 3}},
		{Comm: 0x30, Ranks: []int32{0, 2}},
		{Comm: 0x31, Ranks: []int32{1, 3}},
	}, got)

	for _, bad := range []struct {
		metas []map[string]string
		want  string
	}{
		{[]map[string]string{{}}, "p0: no twinccl.profiler.comms metadata"},
		{[]map[string]string{{MetaComms: "{"}}, "p0: twinccl.profiler.comms: unexpected end"},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "zz", NRanks: 1})}, `communicator "zz" is not a number`},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "0x1", NRanks: 1, GlobalRank: -1})}, "p0: communicator 0x1: the process's global rank is not known"},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "0x1", Rank: 2, NRanks: 2})}, "rank 2 of 2"},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "0x1", NRanks: 2}), commsMeta(t, CommMeta{Comm: "0x1", Rank: 1, NRanks: 3, GlobalRank: 1})},
			"p1: communicator 0x1 has 3 ranks, another part says 2"},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "0x1", NRanks: 2}), commsMeta(t, CommMeta{Comm: "0x1", NRanks: 2, GlobalRank: 1})},
			"p1: communicator 0x1 rank 0 is held by global ranks 0 and 1"},
		{[]map[string]string{commsMeta(t, CommMeta{Comm: "0x1", NRanks: 2})}, "communicator 0x1: no part holds its rank 1 (of 2)"},
	} {
		names := []string{"p0", "p1"}[:len(bad.metas)]
		_, err := JobComms(names, bad.metas)
		require.Error(t, err, bad.want)
		assert.Contains(t, err.Error(), bad.want)
	}
}
