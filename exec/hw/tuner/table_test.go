package tuner

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/twinccl/twinccl/model"
)

func TestNearestLogs(t *testing.T) {
	assert.Equal(t, []int{3, 4, 5}, nearestLogs(8)[:3])
	assert.Equal(t, 3, nearestLogs(0)[0])
	assert.Equal(t, 3, nearestLogs(12)[0], "12 is as near 8 as 16: the lower")
	assert.Equal(t, 4, nearestLogs(13)[0])
	assert.Equal(t, []int{10, 9, 11, 8, 12}, nearestLogs(1 << 10)[:5])
	assert.Equal(t, []int{32, 31}, nearestLogs(1 << 40)[:2])
	assert.Len(t, nearestLogs(1<<20), MaxLog-MinLog+1, "every size once")
}

// table is an empty Table with the given cells set.
func table(set func(tb *Table)) *Table {
	tb := &Table{}
	for c := range tb.t {
		for k := range tb.t[c] {
			for a := range tb.t[c][k] {
				for p := range tb.t[c][k][a] {
					tb.t[c][k][a][p].us = -1
				}
			}
		}
	}
	set(tb)
	return tb
}

func TestChoose(t *testing.T) {
	all := func(model.Algorithm, model.Protocol) bool { return true }
	ar := model.CollAllReduce
	tb := table(func(tb *Table) {
		c := &tb.t[ar][10-MinLog]
		c[model.AlgoRing][model.ProtoSimple] = pairTime{us: 5, nChannels: 8}
		c[model.AlgoTree][model.ProtoLL128] = pairTime{us: 5, nChannels: 4}
		c[model.AlgoRing][model.ProtoLL] = pairTime{us: 7, nChannels: 2}
	})
	a, ok := tb.Choose(ar, 1<<10, all)
	assert.True(t, ok)
	assert.Equal(t, Answer{Algo: model.AlgoTree, Proto: model.ProtoLL128, NChannels: 4, TimeUs: 5}, a, "a tie goes to the lower algorithm, as in NCCL's scan")
	noTree := func(al model.Algorithm, _ model.Protocol) bool { return al != model.AlgoTree }
	a, _ = tb.Choose(ar, 1<<10, noTree)
	assert.Equal(t, model.AlgoRing, a.Algo)
	assert.Equal(t, model.ProtoSimple, a.Proto)
	// Sizes without predictions take the nearest size that has some.
	a, ok = tb.Choose(ar, 1<<20, all)
	assert.True(t, ok)
	assert.Equal(t, model.AlgoTree, a.Algo)
	// Nothing allowed, or a collective without a table: no advice.
	_, ok = tb.Choose(ar, 1<<10, func(model.Algorithm, model.Protocol) bool { return false })
	assert.False(t, ok)
	_, ok = tb.Choose(model.CollSendRecv, 1<<10, all)
	assert.False(t, ok)
}
