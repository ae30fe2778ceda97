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
	// NVLSEnable computes the NVLS graph (NCCL_NVLS_ENABLE). It is off by
	// default: the reference runs with NCCL_NVLS_ENABLE=0, and multicast
	// support is not something a topology file records.
	NVLSEnable bool
	// CollNetEnable computes the CollNet chain and direct graphs
	// (NCCL_COLLNET_ENABLE=1; off by default).
	CollNetEnable bool
	// MNNVLScatterNets orders preferred NETs GPU by GPU on multi-host
	// NVLink systems (NCCL_MNNVL_SCATTER_NETS_ENABLE, default on).
	MNNVLScatterNets bool
}

// DefaultSearchOptions returns NCCL 2.28.9's defaults, with NVLS and
// CollNet off as in the reference runs.
func DefaultSearchOptions() SearchOptions {
	return SearchOptions{CrossNic: 2, MNNVLScatterNets: true}
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
	nvls, err := envInt(lookup, "NCCL_NVLS_ENABLE", 0, 0, 2)
	if err != nil {
		return o, err
	}
	o.NVLSEnable = nvls != 0
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
