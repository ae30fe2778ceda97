package sim

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// loadSearchFile is loadSearch returning the error (a topology the model
// refuses, or a multi-host file that --nodes does not apply to).
func loadSearchFile(file string, nodes int) (*search.Result, error) {
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	root, _, err := model.ReadTopologyFile(file)
	if err != nil {
		return nil, err
	}
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	if err != nil {
		return nil, err
	}
	return search.Run(cl, search.DefaultOptions())
}

// TestFastEveryTopology runs every single-host topology of
// ../shared/topologies at --nodes 2 and 4 in the fast and the
// step-accurate mode, over every op at two counts (one of them splitting unevenly). Where the fast mode folds or merges
// (an automorphism of the simulated system, see Machine.aggregate), the
// two times must be equal up to the rounding of floating-point sums in
// another order (1e-9 relative); where it runs step-accurate they must be
// equal to the bit. A ring fold of a count that splits unevenly (ModeFast
// only) gives ranks its representatives' chunk sizes: its error must stay
// within the largest relative size difference of a step. At least one
// call per topology must fold.
// testdata/xml/dgx-h100-8x400g.xml joins them: its ring search lets
// channel pairs cross NICs (crossNic 2), so that its hosts fold only with
// channels c and c^1 swapped on odd hosts, which the test requires.
func TestFastEveryTopology(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(), "..", "shared", "topologies", "*.xml"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Skip("../shared/topologies not available")
	}
	crossNic := filepath.Join(repoRoot(), "testdata", "xml", "dgx-h100-8x400g.xml")
	files = append(files, crossNic)
	calls := []Call{
		{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: -1},
		{Coll: model.CollAllReduce, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoTree, Proto: -1},
		{Coll: model.CollAllGather, Count: 1 << 14, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		{Coll: model.CollReduceScatter, Count: 1 << 14, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		{Coll: model.CollBroadcast, Count: 1 << 18, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 1},
		{Coll: model.CollReduce, Count: 1 << 18, Dtype: model.DtypeFP32, Algo: -1, Proto: -1, Root: 1},
		{Coll: model.CollAlltoAll, Count: 1 << 10, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
		{Coll: model.CollSendRecv, Count: 1 << 16, Dtype: model.DtypeFP32, Algo: -1, Proto: -1},
	}
	var log strings.Builder
	approx := 0
	fmt.Fprintf(&log, "%-50s %5s %-13s %9s %-12s %12s %12s %10s  %s\n", "topology", "nodes", "op", "count", "algo/proto", "accurate us", "fast us", "rel diff", "fast mode")
	for _, f := range files {
		name := filepath.Base(f)
		foldedAny := false
		for _, nodes := range []int{2, 4} {
			res, err := loadSearchFile(f, nodes)
			if err != nil {
				if nodes == 2 {
					t.Logf("%s: not run: %v", name, err)
				}
				break
			}
			acc, fast := newSim(t, res, nil), newSim(t, res, nil)
			fast.Mode = ModeFast
			for _, c0 := range calls {
				for _, div := range []int64{1, 61} { // 61: a count that splits unevenly
					c := c0
					c.Count = max(c0.Count/div, 1)
					a, err := acc.Run(c)
					if err != nil {
						t.Logf("%s --nodes %d %s: not run: %v", name, nodes, c.Coll, err)
						continue
					}
					x, err := fast.Run(c)
					require.NoError(t, err, "%s --nodes %d %s", name, nodes, c.Coll)
					rel := math.Abs(x.TimeUs-a.TimeUs) / a.TimeUs
					fmt.Fprintf(&log, "%-50s %5d %-13s %9d %-12s %12.3f %12.3f %10.2e  %s\n", name, nodes, c.Coll, c.Count, fmt.Sprintf("%s/%s", a.Algo, a.Proto), a.TimeUs, x.TimeUs, rel, x.Fast)
					if strings.HasPrefix(x.Fast, "step-accurate") {
						assert.Equal(t, a.TimeUs, x.TimeUs, "%s --nodes %d %s ran step-accurate in both modes", name, nodes, c.Coll)
						continue
					}
					foldedAny = true
					if f == crossNic && c.Coll == model.CollAllReduce && c.Algo == model.AlgoRing && div == 1 {
						assert.Contains(t, x.Fast, "c^1 swapped", "--nodes %d", nodes)
					}
					tol := 1e-9
					if strings.Contains(x.Fast, "approximate") {
						// The ring fold of a count that splits unevenly:
						// every step within the chunks' size difference.
						g, _, err := fast.Generator(c)
						require.NoError(t, err)
						fd, why := fast.Machine.fold(g, ModeFast)
						require.NotNil(t, fd, why)
						require.Positive(t, fd.skew)
						tol = fd.skew
						approx++
					}
					assert.LessOrEqual(t, rel, tol, "%s --nodes %d %s %d: %s", name, nodes, c.Coll, c.Count, x.Fast)
				}
			}
		}
		if _, err := loadSearchFile(f, 2); err == nil {
			assert.True(t, foldedAny, "%s: the fast mode folded no call", name)
		}
	}
	t.Logf("fast versus step-accurate (%d approximate ring folds):\n%s", approx, log.String())
	if out := os.Getenv("TWINCCL_FAST_TOPOS_OUT"); out != "" {
		require.NoError(t, os.WriteFile(out, []byte(log.String()), 0o644))
	}
}
