package search

import (
	"fmt"
	"os"

	"github.com/twinccl/twinccl/model"
)

// SearchOptions are the NCCL_* settings that steer the channel search.
// NCCL_GRAPH_FILE (a precomputed graph), NCCL_NETDEVS_POLICY other than
// AUTO and NCCL_MNNVL_RAIL_PER_HOST are not modelled: the search behaves
// as with their defaults.
type SearchOptions struct {
	// CrossNic is NCCL_CROSS_NIC: 0 keeps each channel on one NIC port, 1
	// lets channels enter and leave through different NICs, 2 (the
	// default) tries without first and lets ring channel pairs cross.
	CrossNic int
	// NVLSEnable turns NVLS on (NCCL_NVLS_ENABLE other than 0). It is on
	// by default, as NCCL_NVLS_ENABLE=2 (auto) is in NCCL: ncclNvlsInit
	// then asks the driver whether the GPU supports multicast, which a
	// topology file does not record; a GPU of compute capability 9.0 or
	// more with an NVLink to an NVSwitch stands for it (NVLSCapable). The
	// recorded ground truth ran with NCCL_NVLS_ENABLE=0: comparisons with
	// it turn NVLS off.
	NVLSEnable bool
	// NVLSForce is NCCL_NVLS_ENABLE=1: NVLS without the multicast check
	// (the NVLS graph search still needs an NVSwitch and sm90).
	NVLSForce bool
	// CollNetEnable computes the CollNet chain and direct graphs
	// (NCCL_COLLNET_ENABLE=1; off by default).
	CollNetEnable bool
	// MNNVLScatterNets orders preferred NETs GPU by GPU on multi-host
	// NVLink systems (NCCL_MNNVL_SCATTER_NETS_ENABLE, default on).
	MNNVLScatterNets bool
}

// DefaultSearchOptions returns NCCL 2.28.9's defaults: NVLS where the
// hardware offers it, CollNet off (it needs a CollNet network plugin).
func DefaultSearchOptions() SearchOptions {
	return SearchOptions{CrossNic: 2, NVLSEnable: true, MNNVLScatterNets: true}
}

// SearchEnvNames lists the environment variables SearchOptionsFromEnv reads.
var SearchEnvNames = []string{"NCCL_CROSS_NIC", "NCCL_NVLS_ENABLE", "NCCL_COLLNET_ENABLE", "NCCL_MNNVL_SCATTER_NETS_ENABLE"}

// SearchOptionsFromEnv reads the search settings through lookup
// (os.LookupEnv when nil). Unset or empty variables keep their defaults;
// a value NCCL would not accept is an error naming the variable.
func SearchOptionsFromEnv(lookup func(string) (string, bool)) (SearchOptions, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	o := DefaultSearchOptions()
	var err error
	if o.CrossNic, err = envInt(lookup, "NCCL_CROSS_NIC", o.CrossNic, 0, 2); err != nil {
		return o, err
	}
	nvls, err := envInt(lookup, "NCCL_NVLS_ENABLE", 2, 0, 2)
	if err != nil {
		return o, err
	}
	o.NVLSEnable, o.NVLSForce = nvls != 0, nvls == 1
	collnet, err := envInt(lookup, "NCCL_COLLNET_ENABLE", 0, 0, 1)
	if err != nil {
		return o, err
	}
	o.CollNetEnable = collnet == 1
	scatter, err := envInt(lookup, "NCCL_MNNVL_SCATTER_NETS_ENABLE", 1, 0, 1)
	if err != nil {
		return o, err
	}
	o.MNNVLScatterNets = scatter != 0
	return o, nil
}

// envInt reads an integer variable in [lo, hi]; def when unset or empty.
func envInt(lookup func(string) (string, bool), name string, def, lo, hi int) (int, error) {
	n, ok, err := model.LookupEnvInt(lookup, name, 64)
	if err != nil || !ok {
		return def, err
	}
	if n < int64(lo) || n > int64(hi) {
		v, _ := lookup(name)
		return def, fmt.Errorf("%s=%q: out of range %d..%d", name, v, lo, hi)
	}
	return int(n), nil
}

// NVLSCapable is ncclNvlsInit's check on one host's system: at least two
// GPUs (ncclTopoGetGpuCount), and unless forced, multicast support on
// every GPU, which needs compute capability 9.0 or more and an NVLink to
// an NVSwitch (CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED on real hardware).
func NVLSCapable(s *model.System, force bool) bool {
	gpus := s.Nodes[model.GPU]
	if len(gpus) < 2 {
		return false
	}
	if force {
		return true
	}
	for _, g := range gpus {
		if g.GPU.SM < 90 {
			return false
		}
		nvs := false
		for _, l := range g.Links {
			nvs = nvs || (l.Type == model.LinkNVL && l.Remote.Type == model.NVS)
		}
		if !nvs {
			return false
		}
	}
	return true
}
