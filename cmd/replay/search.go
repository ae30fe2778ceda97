package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

const searchHelp = `Usage: replay search [FILE.xml] [--nodes N] [--ranks LIST] [--json OUT] [--graph-out G.xml] [--all-ranks]

Runs NCCL 2.28.9's init-time decisions on a topology: the channel search of every
node (ring, tree, CollNet, NVLS graphs), their alignment across ranks, the ring and
double-binary-tree wiring of every channel, p2p channel counts and the tuning model.
It prints them as NCCL logs them (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,GRAPH,TUNING):
the graph search lines, the graphs in NCCL_GRAPH_DUMP_FILE form, the channel layout,
a per-channel ring/tree summary and the latency/bandwidth table.

Without FILE the embedded default topology is used (%s).
A single-host file stands for --nodes N identical hosts, ranks node-major.

` + ranksHelp + `
Environment (as in NCCL): NCCL_NVLS_ENABLE (default 2, auto: NVLS is searched on
hosts of two or more GPUs of compute capability 9.0 or more on an NVSwitch, as the
driver's multicast support has it; 0 reports it empty, as in our reference runs;
1 searches it anywhere), NCCL_COLLNET_ENABLE, NCCL_ALGO, NCCL_PROTO,
NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS, NCCL_CROSS_NIC, NCCL_NTHREADS,
NCCL_LL128_NTHREADS, NCCL_THREAD_THRESHOLDS, NCCL_NET_OVERHEAD, and the path
settings listed by "replay help".

Flags:
`

func runSearch(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	jsonOut := fs.String("json", "", "also write the complete JSON document (graphs, aligned graphs, channels, tuning) to `OUT` (- for stdout)")
	graphOut := fs.String("graph-out", "", "also write node 0's graphs in NCCL_GRAPH_DUMP_FILE form to `G.xml` (- for stdout)")
	allRanks := fs.Bool("all-ranks", false, "print the channel layout lines of every rank, not only rank 0")
	ranks := &ranksFlag{}
	fs.Var(ranks, "ranks", ranksFlagHelp)
	fs.Usage = func() {
		fmt.Fprintf(stderr, searchHelp, twinccl.DefaultTopology)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	res, err := searchTopologyRanks(pos, *nodes, ranks.ranks, nil)
	if err != nil {
		return err
	}
	quiet := false
	if *jsonOut != "" {
		doc, err := res.Document()
		if err != nil {
			return err
		}
		err = writeJSON(*jsonOut, stdout, doc)
		if err != nil {
			return err
		}
		quiet = *jsonOut == "-"
	}
	if *graphOut != "" {
		n0 := res.Cluster.Nodes[0]
		err := writeOutput(*graphOut, stdout, func(w io.Writer) error {
			return search.WriteGraphsXML(w, n0.System, res.NodeGraphs[0])
		})
		if err != nil {
			return err
		}
		quiet = quiet || *graphOut == "-"
	}
	if quiet {
		return nil
	}
	fmt.Fprintf(stdout, "# %s: %d rank(s) on %d node(s), NCCL %s rules\n", res.Cluster.File, res.Cluster.NRanks, res.Plan.NNodes, search.NCCLVersion)
	return res.WriteLog(stdout, *allRanks)
}

// searchTopology loads the optional topology file named by pos and runs
// the search with the NCCL_* settings of the environment.
func searchTopology(pos []string, nodes int) (*search.Result, error) {
	return searchTopologyWith(pos, nodes, nil)
}

// searchTopologyWith is searchTopology with the NCCL_* settings lookup
// gives (nil: the environment's).
func searchTopologyWith(pos []string, nodes int, lookup func(string) (string, bool)) (*search.Result, error) {
	return searchTopologyRanks(pos, nodes, nil, lookup)
}

// searchTopologyRanks is searchTopologyWith for the communicator of the
// job's ranks (nil: every rank).
func searchTopologyRanks(pos []string, nodes int, ranks []int, lookup func(string) (string, bool)) (*search.Result, error) {
	if len(pos) > 1 {
		return nil, fmt.Errorf("%w: expected at most one topology file, got %d: %s", errUsage, len(pos), strings.Join(pos, " "))
	}
	if nodes < 1 || nodes > model.MaxClusterNodes {
		return nil, fmt.Errorf("%w: --nodes %d: must be between 1 and %d", errUsage, nodes, model.MaxClusterNodes)
	}
	params, err := model.ParamsFromEnv(lookup)
	if err != nil {
		return nil, err
	}
	opts, err := search.OptionsFromEnv(lookup)
	if err != nil {
		return nil, err
	}
	cl, err := loadClusterRanks(pos, nodes, ranks, params)
	if err != nil {
		return nil, err
	}
	return search.Run(cl, opts)
}
