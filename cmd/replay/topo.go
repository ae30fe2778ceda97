package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
)

const topoHelp = `Usage: replay topo [FILE.xml] [--nodes N] [--ranks LIST] [--json OUT]

Reads an NCCL topology XML (the format of NCCL_TOPO_FILE / NCCL_TOPO_DUMP_FILE),
builds the system graph and computes every GPU and NET path exactly as NCCL 2.28.9
does, and prints them in the form of NCCL's own log (ncclTopoPrint, NCCL_DEBUG=INFO
NCCL_DEBUG_SUBSYS=GRAPH), so the output can be diffed against a real job's log.

Without FILE the embedded default topology is used (%s: two H200 on NVSwitch,
recorded on our GPU machine).

A file with one host (one host_hash, or none) stands for --nodes N identical hosts,
ranks node-major. A file with several host_hash values describes several hosts.

` + ranksHelp + `
Flags:
`

func runTopo(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("topo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	jsonOut := fs.String("json", "", "also write the JSON document (nRanks, nNodes, nodes[].system) to `OUT` (- for stdout)")
	ranks := &ranksFlag{}
	fs.Var(ranks, "ranks", ranksFlagHelp)
	fs.Usage = func() {
		fmt.Fprintf(stderr, topoHelp, twinccl.DefaultTopology)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: expected at most one topology file, got %d: %s", errUsage, len(pos), strings.Join(pos, " "))
	}
	if *nodes < 1 || *nodes > model.MaxClusterNodes {
		return fmt.Errorf("%w: --nodes %d: must be between 1 and %d", errUsage, *nodes, model.MaxClusterNodes)
	}
	params, err := model.ParamsFromEnv(nil)
	if err != nil {
		return err
	}
	cl, err := loadClusterRanks(pos, *nodes, ranks.ranks, params)
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		err := writeJSON(*jsonOut, stdout, cl.Doc())
		if err != nil {
			return err
		}
		if *jsonOut == "-" {
			return nil
		}
	}
	return printCluster(stdout, cl)
}

// loadCluster reads the topology named by pos (or the embedded default).
func loadCluster(pos []string, nodes int, params model.Params) (*model.Cluster, error) {
	return loadClusterRanks(pos, nodes, nil, params)
}

// loadClusterRanks is loadCluster for the communicator of the job's ranks
// (nil: every rank).
func loadClusterRanks(pos []string, nodes int, ranks []int, params model.Params) (*model.Cluster, error) {
	var (
		root  *model.Element
		warns []model.Warning
		err   error
		name  string
	)
	if len(pos) == 0 {
		name = "embedded:" + twinccl.DefaultTopology
		data, rerr := twinccl.RecordedTopology(twinccl.DefaultTopology)
		if rerr != nil {
			return nil, rerr
		}
		root, warns, err = model.ParseTopologyXML(bytes.NewReader(data), name)
	} else {
		name = pos[0]
		root, warns, err = model.ReadTopologyFile(name)
	}
	if err != nil {
		return nil, err
	}
	logWarnings(warns)
	return model.LoadCluster(root, name, model.LoadOptions{Nodes: nodes, Params: params, Ranks: ranks})
}

// maxLoggedWarnings bounds how many parser warnings are printed one by one.
const maxLoggedWarnings = 5

func logWarnings(warns []model.Warning) {
	for i, w := range warns {
		if i == maxLoggedWarnings {
			slog.Warn(fmt.Sprintf("%d more warnings like these", len(warns)-i), "file", w.File)
			return
		}
		slog.Warn(w.Msg, "file", w.File, "line", w.Line)
	}
}

// printCluster prints each node's system as NCCL logs it on that node's
// first rank. Replicated nodes (--nodes N) are summarised after node 0.
func printCluster(w io.Writer, cl *model.Cluster) error {
	fmt.Fprintf(w, "# %s: %d rank(s) on %d node(s)", cl.File, cl.NRanks, len(cl.Nodes))
	if cl.MNNVL {
		fmt.Fprint(w, ", one NVLink fabric across hosts (MNNVL)")
	}
	fmt.Fprintln(w)
	for _, n := range cl.Nodes {
		fmt.Fprintf(w, "# node %d, ranks %s\n", n.Index, rankList(n.Ranks))
		if err := model.PrintSystem(w, n.System, fmt.Sprintf("[%d] NCCL INFO ", n.Ranks[0])); err != nil {
			return err
		}
		if cl.Replicated {
			per := len(n.Ranks)
			fmt.Fprintf(w, "# nodes 1..%d: same system as node 0, node k holding ranks k*%d..k*%d+%d\n", len(cl.Nodes)-1, per, per, per-1)
			break
		}
	}
	return nil
}

func rankList(r []int) string {
	if len(r) > 1 && r[len(r)-1]-r[0] == len(r)-1 {
		return fmt.Sprintf("%d..%d", r[0], r[len(r)-1])
	}
	return strings.Trim(fmt.Sprint(r), "[]")
}
