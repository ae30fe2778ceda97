package tuner

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/hw"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// ModeFromEnv reads TWINCCL_TUNER: "sim" (the default) or "nccl".
func ModeFromEnv() (Mode, error) {
	switch v := os.Getenv("TWINCCL_TUNER"); v {
	case "", "sim":
		return ModeSim, nil
	case "nccl":
		return ModeNCCL, nil
	default:
		return 0, fmt.Errorf("TWINCCL_TUNER=%q: want sim or nccl", v)
	}
}

// topology is the machine's topology as NCCL sees it: NCCL_TOPO_FILE,
// else live discovery (what run topo writes), else the embedded default.
func topology(log *slog.Logger) (string, []byte, error) {
	if f := os.Getenv("NCCL_TOPO_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, fmt.Errorf("NCCL_TOPO_FILE: %w", err)
		}
		return f, b, nil
	}
	if lib, err := hw.OpenNVML(); err == nil {
		opts := hw.Options{NVML: lib, Logger: log}
		if c, err := hw.OpenCUDA(); err == nil {
			opts.CUDA = c
		}
		root, err := hw.Discover(opts)
		lib.Close()
		if err == nil {
			var buf bytes.Buffer
			if err = model.WriteXML(&buf, root); err == nil {
				return "live", buf.Bytes(), nil
			}
		}
		log.Warn("live topology discovery failed", "err", err)
	}
	b, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	return "embedded:" + twinccl.DefaultTopology, b, err
}

// Search plans a communicator of nRanks ranks on nNodes hosts of the
// machine's topology (nRanks/nNodes GPUs of each), under NCCL's
// variables, as NCCL's init does before it consults the tuner.
func Search(nRanks, nNodes int, log *slog.Logger) (*search.Result, error) {
	if nNodes < 1 || nRanks < nNodes || nRanks%nNodes != 0 {
		return nil, fmt.Errorf("tuner: %d ranks on %d nodes: want the same number on every node", nRanks, nNodes)
	}
	file, xml, err := topology(log)
	if err != nil {
		return nil, err
	}
	root, _, err := model.ParseTopologyXML(bytes.NewReader(xml), file)
	if err != nil {
		return nil, err
	}
	params, err := model.ParamsFromEnv(nil)
	if err != nil {
		return nil, err
	}
	model.KeepRanks(root, nRanks/nNodes)
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Nodes: nNodes, Params: params})
	if err != nil {
		return nil, err
	}
	if cl.NRanks != nRanks {
		return nil, fmt.Errorf("tuner: %s has %d GPU(s) per node for a communicator of %d ranks on %d node(s) (set NCCL_TOPO_FILE)", file, cl.NRanks/nNodes, nRanks, nNodes)
	}
	opts, err := search.OptionsFromEnv(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	return search.Run(cl, opts)
}

// Calib is the simulator's calibration: TWINCCL_CALIB, else the embedded
// one for the cluster's GPUs.
func Calib(cl *model.Cluster) (*sim.Calib, error) {
	if p := os.Getenv("TWINCCL_CALIB"); p != "" {
		return sim.LoadCalib(p)
	}
	sm := 0
	for _, g := range cl.Nodes[0].System.Nodes[model.GPU] {
		sm = g.GPU.SM
		break
	}
	return sim.DefaultCalib(sm)
}

var (
	cacheMu sync.Mutex
	cache   = map[[3]int]*Table{}
)

// Load is the table of a communicator of nRanks ranks on nNodes nodes,
// built once per process (a job's communicators of one shape share it).
func Load(nRanks, nNodes int, mode Mode, log *slog.Logger) (*Table, error) {
	key := [3]int{nRanks, nNodes, int(mode)}
	cacheMu.Lock()
	defer cacheMu.Unlock()
	if t, ok := cache[key]; ok {
		return t, nil
	}
	res, err := Search(nRanks, nNodes, log)
	if err != nil {
		return nil, err
	}
	c, err := Calib(res.Cluster)
	if err != nil {
		return nil, err
	}
	t, err := Build(res, c, mode)
	if err != nil {
		return nil, err
	}
	cache[key] = t
	return t, nil
}
