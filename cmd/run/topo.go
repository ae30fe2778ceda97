package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/twinccl/twinccl/exec/hw"
	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/model"
)

// discoverTopology finds the local machine's topology; tests replace it.
var discoverTopology = liveTopology

// liveTopology discovers the machine through NVML (required), CUDA
// (optional: the GPUs' gdr attribute) and sysfs.
func liveTopology(log *slog.Logger) (*model.Element, error) {
	lib, err := hw.OpenNVML()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := lib.Close(); err != nil {
			log.Warn("NVML shutdown", "err", err)
		}
	}()
	opts := hw.Options{NVML: lib, Logger: log}
	if cuda, err := hw.OpenCUDA(); err != nil {
		log.Warn("CUDA driver unavailable; <gpu gdr> follows the peer-memory module", "err", err)
	} else {
		opts.CUDA = cuda
	}
	return hw.Discover(opts)
}

func runTopo(e *env, args []string) error {
	fs := flag.NewFlagSet("topo", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dump := fs.String("dump", "", "write the XML to `FILE` (atomically) instead of stdout")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			topoUsage(e.stdout, fs)
			return err
		}
		return &usageError{err.Error() + " (see run topo -h)"}
	}
	if *version {
		printVersion(e.stdout)
		return flag.ErrHelp
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	root, err := discoverTopology(e.log)
	if err != nil {
		return err
	}
	if *dump == "" {
		return model.WriteXML(e.stdout, root)
	}
	if err := atomicfile.Write(*dump, func(w io.Writer) error { return model.WriteXML(w, root) }); err != nil {
		return err
	}
	e.log.Info("wrote topology", "file", *dump)
	return nil
}

func topoUsage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, `Usage: run topo [--dump FILE]

Discovers this machine's GPUs (NVML), PCI tree and NUMA nodes (sysfs) and
NICs (RDMA devices, else the socket interfaces NCCL would use), and writes
the topology XML that NCCL 2.28.9 dumps with NCCL_TOPO_DUMP_FILE for a job
with one rank per GPU (rank = NVML index). Without --dump the XML goes to
stdout. NCCL's variables NCCL_SOCKET_IFNAME, NCCL_SOCKET_FAMILY, NCCL_IB_HCA,
NCCL_IB_DISABLE, NCCL_IB_MERGE_VFS, NCCL_NET and NCCL_HOSTID are honoured.

Flags:
`)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
