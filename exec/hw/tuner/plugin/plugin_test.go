package main

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/tuner"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
)

// answer is one line of tuner_test's output.
type answer struct {
	tag               string
	coll              model.Collective
	bytes             int64
	algo, proto, nchs int
}

// runPlugin builds the plugin, compiles testdata/lib/tuner_test.c and runs
// it on the plugin with env, returning its answers.
func runPlugin(t *testing.T, dir string, nRanks, nNodes int, env ...string) []answer {
	t.Helper()
	cmd := exec.Command(filepath.Join(dir, "tuner_test"), filepath.Join(dir, "plugin.so"), fmt.Sprint(nRanks), fmt.Sprint(nNodes))
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tuner_test: %s", stderr.String())
	var as []answer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a answer
		var c int
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d %d %d %d", &a.tag, &c, &a.bytes, &a.algo, &a.proto, &a.nchs); err != nil {
			require.Equal(t, "name twinccl", sc.Text())
			continue
		}
		a.coll = model.Collective(c)
		as = append(as, a)
	}
	require.Len(t, as, 2*5*30)
	return as
}

func build(t *testing.T) string {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the plugin is built for Linux")
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	b := exec.Command("go", "build", "-buildmode=c-shared", "-ldflags=-extldflags=-Wl,-z,lazy", "-o", filepath.Join(dir, "plugin.so"), ".")
	b.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
	out, err := b.CombinedOutput()
	require.NoError(t, err, "go build:\n%s", out)
	cc := exec.Command("gcc", "-std=c11", "-Wall", "-Werror", "-o", filepath.Join(dir, "tuner_test"), "../../../../testdata/lib/tuner_test.c", "-ldl")
	out, err = cc.CombinedOutput()
	require.NoError(t, err, "gcc:\n%s", out)
	return dir
}

// TestPluginAnswers loads the plugin as NCCL does on two recorded
// topologies. With TWINCCL_TUNER=nccl its answers must be exactly replay
// tune's choice (search's ChooseCall on the same topology: algorithm,
// protocol, channels) at every size, which checks the plumbing: struct
// layout, cost-table indexing, size lookup. With the simulator (the
// default) each answer must be the fastest of the simulated candidates
// (checked against exec/sim runs made here), and never a disallowed pair.
func TestPluginAnswers(t *testing.T) {
	dir := build(t)
	for _, tc := range []struct {
		file           string
		nRanks, nNodes int
	}{
		{"pcie-rtx4090x2-cx4-2x100g.xml", 2, 1},
		{"azure-ncv4-a100pcie-x4-nvlink-bridge-pairs.xml", 4, 1},
	} {
		t.Run(tc.file, func(t *testing.T) {
			topo, err := filepath.Abs(filepath.Join("../../../../../shared/topologies", tc.file))
			require.NoError(t, err)
			t.Setenv("NCCL_TOPO_FILE", topo)
			res, err := tuner.Search(tc.nRanks, tc.nNodes, slog.Default())
			require.NoError(t, err)

			for _, a := range runPlugin(t, dir, tc.nRanks, tc.nNodes, "TWINCCL_TUNER=nccl") {
				if a.tag != "all" {
					continue
				}
				dt, count := model.DtypeFP32, a.bytes/4
				if c, err := sim.CountOf(a.coll, a.bytes, dt, tc.nRanks); err == nil {
					count = c
				} else {
					dt = model.DtypeUint8
					if count, err = sim.CountOf(a.coll, a.bytes, dt, tc.nRanks); err != nil {
						continue
					}
				}
				ch, err := res.Tuning.Choose(a.coll, count, dt.Size())
				require.NoError(t, err)
				assert.Equal(t, [3]int{int(ch.Algo), int(ch.Proto), ch.NChannels}, [3]int{a.algo, a.proto, a.nchs}, "%s of %d bytes", a.coll, a.bytes)
			}

			calib, err := tuner.Calib(res.Cluster)
			require.NoError(t, err)
			s, err := sim.NewSimulator(res, calib)
			require.NoError(t, err)
			s.Mode = sim.ModeFast
			checked := 0
			for _, a := range runPlugin(t, dir, tc.nRanks, tc.nNodes) {
				if a.tag == "noring" {
					assert.NotEqual(t, int(model.AlgoRing), a.algo, "%s of %d bytes: a disallowed pair", a.coll, a.bytes)
				}
				if a.tag != "all" || a.bytes%(1<<8) != 0 || a.bytes > 1<<26 {
					continue // a sample of sizes keeps the test quick
				}
				require.GreaterOrEqual(t, a.algo, 0, "%s of %d bytes: no advice", a.coll, a.bytes)
				count, err := sim.CountOf(a.coll, a.bytes, model.DtypeFP32, tc.nRanks)
				require.NoError(t, err)
				run := func(algo model.Algorithm, proto model.Protocol) float64 {
					cr, err := s.Run(sim.Call{Coll: a.coll, Count: count, Dtype: model.DtypeFP32, Algo: algo, Proto: proto})
					require.NoError(t, err)
					return cr.TimeUs
				}
				chosen := run(model.Algorithm(a.algo), model.Protocol(a.proto))
				ch, err := res.Tuning.Choose(a.coll, count, 4)
				require.NoError(t, err)
				for al := model.Algorithm(0); al < model.NumAlgorithms; al++ {
					for p := model.Protocol(0); p < model.NumProtocols; p++ {
						if ch.Costs[al][p] < 0 || !model.ProgramCovers(a.coll, al, p, tc.nRanks) {
							continue
						}
						assert.LessOrEqual(t, chosen, run(al, p), "%s of %d bytes: chose %s/%s over %s/%s", a.coll, a.bytes,
							model.Algorithm(a.algo), model.Protocol(a.proto), al, p)
					}
				}
				checked++
			}
			assert.Greater(t, checked, 40)
		})
	}
}
