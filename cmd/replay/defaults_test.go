package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// The acceptance check of NCCL's defaults: on every recorded topology of
// ../shared/topologies, alone and as two identical hosts, `replay sim`
// with no setting simulates every collective, each row with the
// algorithm NCCL 2.28.9's tuner picks for it (NVLS included where NCCL
// enables it), and the call NCCL would make at 8 GiB has a Program.
// TestDefaultsSimulateAtScale simulates 8 GiB too, and 16 and 128 hosts.

// sharedTopologies lists ../shared/topologies/*.xml, skipping when the
// shared data is not beside the checkout.
func sharedTopologies(t testing.TB) []string {
	files, err := filepath.Glob(filepath.Join("..", "..", "..", "shared", "topologies", "*.xml"))
	require.NoError(t, err)
	if len(files) == 0 {
		t.Skip("../shared/topologies not available")
	}
	return files
}

// defaultsCase runs replay sim with NCCL's defaults on file as nodes
// hosts for sizes, checks every row's algorithm against the tuner's
// choice, and returns the rows. A topology the model does not read (an
// RCCL file) or a multi-host file asked for more hosts is skipped with
// its reason.
func defaultsCase(t *testing.T, file string, nodes int, sizes []int64) []simRow {
	t.Helper()
	for _, k := range []string{"NCCL_NVLS_ENABLE", "NCCL_ALGO", "NCCL_PROTO", "NCCL_COLLNET_ENABLE"} {
		t.Setenv(k, "") // empty is unset: NCCL's defaults, whatever the caller's environment
	}
	var rows []simRow
	for _, size := range sizes {
		js := filepath.Join(t.TempDir(), "rows.json")
		s := strconv.FormatInt(size, 10)
		out, stderr, code := runReplay(t, "sim", "--topo", file, "--nodes", strconv.Itoa(nodes), "-b", s, "-e", s, "--loop", "0", "--json", js)
		if code != 0 && (strings.Contains(stderr, "unsupported topology format") || strings.Contains(stderr, "--nodes applies to single-host files")) {
			t.Skipf("%s", strings.TrimSpace(stderr))
		}
		require.Equal(t, 0, code, "%s --nodes %d %d B:\n%s%s", filepath.Base(file), nodes, size, out, stderr)
		data, err := os.ReadFile(js)
		require.NoError(t, err)
		var got []simRow
		require.NoError(t, json.Unmarshal(data, &got))
		rows = append(rows, got...)
	}
	// The tuner's own choice for every row (fp32 sum, nccl-tests' counts).
	root, _, err := model.ReadTopologyFile(file)
	require.NoError(t, err)
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	require.NoError(t, err)
	res, err := search.Run(cl, search.DefaultOptions())
	require.NoError(t, err)
	for _, r := range rows {
		c, err := model.ParseCollective(r.Op)
		require.NoError(t, err)
		if c.IsP2P() {
			require.Equal(t, "P2P", r.Algo, "%s %d B", r.Op, r.Bytes)
			continue
		}
		ch, err := res.Tuning.Choose(c, r.Count, 4)
		require.NoError(t, err)
		require.Equal(t, ch.Algo.String(), r.Algo, "%s --nodes %d %s %d B: the algorithm NCCL picks", filepath.Base(file), nodes, r.Op, r.Bytes)
		require.Equal(t, ch.Proto.String(), r.Proto, "%s --nodes %d %s %d B", filepath.Base(file), nodes, r.Op, r.Bytes)
		require.Greater(t, r.TimeUs, 0.0)
	}
	return rows
}

// nvlsHost reports whether NCCL enables NVLS on file's hosts by default.
func nvlsHost(t *testing.T, file string) bool {
	root, _, err := model.ReadTopologyFile(file)
	require.NoError(t, err)
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Params: params})
	require.NoError(t, err)
	res, err := search.Run(cl, search.DefaultOptions())
	require.NoError(t, err)
	return res.Plan.NVLSSupport
}

func TestDefaultsSimulateEveryTopology(t *testing.T) {
	for _, file := range sharedTopologies(t) {
		for _, nodes := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/nodes%d", filepath.Base(file), nodes), func(t *testing.T) {
				rows := defaultsCase(t, file, nodes, []int64{8, 64 << 10, 16 << 20})
				// Every collective ran at every size its count is not
				// zero at (8 B split over the ranks is nothing: nccl-tests
				// skips it, as replay sim does).
				seen := map[string]int{}
				for _, r := range rows {
					seen[r.Op]++
				}
				for _, op := range simOps {
					require.GreaterOrEqual(t, seen[op.name], 2, op.name)
				}
				if nodes == 1 && nvlsHost(t, file) {
					nvls := 0
					for _, r := range rows {
						if r.Algo == "NVLS" {
							nvls++
						}
					}
					require.Positive(t, nvls, "NCCL picks NVLS for a 16 MiB AllReduce on an NVSwitch host with NVLS")
				}
				generates8GiB(t, file, nodes)
			})
		}
	}
}

// generates8GiB checks that every collective NCCL would run at 8 GiB on
// file has a Program (the generator's checks; simulating it is
// TestDefaultsSimulateAtScale's).
func generates8GiB(t *testing.T, file string, nodes int) {
	t.Helper()
	root, _, err := model.ReadTopologyFile(file)
	require.NoError(t, err)
	params, err := model.ParamsFromEnv(func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nodes, Params: params})
	require.NoError(t, err)
	res, err := search.Run(cl, search.DefaultOptions())
	require.NoError(t, err)
	c, err := sim.DefaultCalib(res.Plan.MinCompCap)
	require.NoError(t, err)
	s, err := sim.NewSimulator(res, c)
	require.NoError(t, err)
	for _, op := range simOps {
		if op.coll.IsP2P() {
			continue
		}
		count := int64(8<<30) / 4
		if op.coll == model.CollAllGather || op.coll == model.CollReduceScatter {
			count /= int64(res.Plan.NRanks)
		}
		g, cr, err := s.Generator(sim.Call{Coll: op.coll, Count: count, Dtype: model.DtypeFP32, Op: model.RedSum, Algo: -1, Proto: -1})
		require.NoError(t, err, "%s 8 GiB", op.name)
		require.NoError(t, g.Header().Validate(), "%s 8 GiB %s", op.name, cr.Algo)
	}
}

// TestDefaultsPickNVLSTreeAcrossDGXH100: across two DGX H100 (8x 400G
// NICs), NCCL's defaults put a 16 MiB AllReduce on NVLS trees, and replay
// sim runs it.
func TestDefaultsPickNVLSTreeAcrossDGXH100(t *testing.T) {
	rows := defaultsCase(t, filepath.Join("..", "..", "testdata", "xml", "dgx-h100-8x400g.xml"), 2, []int64{16 << 20})
	algo := map[string]string{}
	for _, r := range rows {
		algo[r.Op] = r.Algo
	}
	require.Equal(t, "NVLSTree", algo["allreduce"])
}
