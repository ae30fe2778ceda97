package search

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// TestChoiceMatchesNCCLLog replays every collective call NCCL 2.28.9 logged
// on our two-H200 machine (nccl-tests sweeps, 4 B to 512 MiB) and checks
// that the tuner picks the same algorithm and protocol and that the work
// lands on the same channel range ("X: N Bytes -> Algo A proto P
// channel{Lo..Hi}={lo..hi}").
func TestChoiceMatchesNCCLLog(t *testing.T) {
	dir := filepath.Join(groundtruth.Dir(t), "baselines", "h200x2-nvswitch")
	root, _, err := model.ReadTopologyFile(filepath.Join(dir, "topo.xml"))
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, "topo.xml", model.LoadOptions{Params: model.DefaultParams()})
	require.NoError(t, err)
	res, err := Run(cl, DefaultOptions())
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(dir, "nccl-2.28.9-debug.log"))
	require.NoError(t, err)
	re := regexp.MustCompile(`NCCL INFO (\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}`)
	seen := map[string]bool{}
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		if seen[m[0]] {
			continue
		}
		seen[m[0]] = true
		coll, err := model.ParseCollective(m[1])
		require.NoError(t, err)
		nBytes, _ := strconv.ParseInt(m[2], 10, 64)
		lo, _ := strconv.Atoi(m[5])
		hi, _ := strconv.Atoi(m[6])
		// The log prints NCCL's count times the type size: nccl-tests ran
		// float32, so the count is bytes/4 (per rank for AllGather and
		// ReduceScatter).
		count := nBytes / 4
		ch, err := res.Tuning.Choose(coll, count, 4)
		require.NoError(t, err, m[0])
		require.Equal(t, m[3], strings.ToUpper(ch.Algo.String()), m[0])
		require.Equal(t, m[4], strings.ToUpper(ch.Proto.String()), m[0])
		sp, err := model.SplitChannels(coll, ch.Proto, count, 4, res.Plan.NRanks, ch.NChannels, res.Plan.NChannels)
		require.NoError(t, err)
		require.Equal(t, [2]int{lo, hi}, [2]int{sp.ChannelLo, sp.ChannelHi}, "%s (budget %d)", m[0], ch.NChannels)
	}
	require.Greater(t, len(seen), 40, "distinct logged calls")
}

// TestSplitChannelsConservesCount checks that the per-channel counts add up
// to the whole collective and stay within the channel budget.
func TestSplitChannelsConservesCount(t *testing.T) {
	for _, coll := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast, model.CollReduce} {
		for _, proto := range []model.Protocol{model.ProtoLL, model.ProtoLL128, model.ProtoSimple} {
			for _, count := range []int64{0, 1, 7, 1000, 4097, 1 << 20, 123456789} {
				for _, es := range []int{1, 2, 4, 8} {
					for _, nch := range []int{1, 2, 3, 16, 24, 64} {
						for _, nRanks := range []int{2, 8} {
							sp, err := model.SplitChannels(coll, proto, count, es, nRanks, nch, nch)
							require.NoError(t, err)
							total := sp.CountLo + int64(sp.NMidChannels)*sp.CountMid + sp.CountHi
							want := count
							if coll == model.CollAllGather || coll == model.CollBroadcast {
								want *= int64(es) // moved as bytes
							}
							require.Equal(t, want, total, "%v %v count %d es %d ch %d: %+v", coll, proto, count, es, nch, sp)
							require.True(t, sp.ChannelLo >= 0 && sp.ChannelHi < nch && sp.ChannelLo <= sp.ChannelHi, "%+v", sp)
							if count > 0 {
								require.Equal(t, sp.NChannels(), b2i(sp.CountLo != 0)+sp.NMidChannels+b2i(sp.CountHi != 0), "%+v", sp)
							}
						}
					}
				}
			}
		}
	}
	_, err := model.SplitChannels(model.CollAllReduce, model.ProtoSimple, -1, 4, 2, 1, 1)
	require.Error(t, err)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
