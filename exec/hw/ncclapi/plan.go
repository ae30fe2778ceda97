package ncclapi

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/hw"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// loadTopology is the machine's topology as NCCL would see it: the file
// NCCL_TOPO_FILE names, else live discovery (NVML, CUDA, sysfs: what run
// topo writes), else the embedded default, with a warning.
func loadTopology(log *slog.Logger) (string, []byte, error) {
	if f := os.Getenv("NCCL_TOPO_FILE"); f != "" {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", nil, errorf(InvalidArgument, "NCCL_TOPO_FILE: %v", err)
		}
		return f, b, nil
	}
	root, err := liveTopology(log)
	if err == nil {
		var buf bytes.Buffer
		if err = model.WriteXML(&buf, root); err == nil {
			return "live", buf.Bytes(), nil
		}
	}
	log.Warn("live topology discovery failed; planning on the embedded default", "topology", twinccl.DefaultTopology, "err", err)
	b, err := twinccl.RecordedTopology(twinccl.DefaultTopology)
	if err != nil {
		return "", nil, err
	}
	return "embedded:" + twinccl.DefaultTopology, b, nil
}

// liveTopology discovers this machine as run topo does.
func liveTopology(log *slog.Logger) (*model.Element, error) {
	lib, err := hw.OpenNVML()
	if err != nil {
		return nil, err
	}
	defer lib.Close()
	opts := hw.Options{NVML: lib, Logger: log}
	if c, err := hw.OpenCUDA(); err == nil {
		opts.CUDA = c
	}
	return hw.Discover(opts)
}

// plan gives a communicator of several ranks its Plan and tuning tables
// as run gpu plans a job: rank 0 loads the topology and hands it to every
// rank (so that all plan on the same one), ranks on several hosts are
// planned as that many nodes of it, and NCCL's variables (NCCL_ALGO,
// NCCL_PROTO, NCCL_P2P_DISABLE, ...) shape the search and the tuner.
func (c *Comm) plan() error {
	var msg []byte
	if c.Rank == 0 {
		name, xml, err := loadTopology(c.log)
		if err != nil {
			c.boot.AllGather(nil) // peers learn of it from the empty message
			return err
		}
		msg = append([]byte(name+"\n"), xml...)
	}
	all, err := c.boot.AllGather(msg)
	if err != nil {
		return fmt.Errorf("rank %d: topology from rank 0: %w", c.Rank, err)
	}
	name, xml, ok := bytes.Cut(all[0], []byte("\n"))
	if !ok {
		return errorf(SystemError, "rank %d: rank 0 could not load a topology", c.Rank)
	}
	file := string(name)
	root, _, err := model.ParseTopologyXML(bytes.NewReader(xml), file)
	if err != nil {
		return err
	}
	params, err := model.ParamsFromEnv(nil)
	if err != nil {
		return errorf(InvalidArgument, "%v", err)
	}
	hostIDs, err := c.boot.AllGather([]byte(transport.HostID(c.Rank)))
	if err != nil {
		return fmt.Errorf("rank %d: host ids: %w", c.Rank, err)
	}
	seen := map[string]bool{}
	for _, h := range hostIDs {
		seen[string(h)] = true
	}
	cl, err := fitCluster(root, file, params, len(seen), c.NRanks)
	if err != nil {
		return err
	}
	opts, err := search.OptionsFromEnv(os.LookupEnv)
	if err != nil {
		return errorf(InvalidArgument, "%v", err)
	}
	if c.res, err = search.Run(cl, opts); err != nil {
		return err
	}
	c.topo = file
	return c.dev.SetCluster(cl)
}

// fitCluster loads root as a cluster of n ranks on hosts hosts: one node
// per host with n/hosts of its GPUs, or, on one host, the first n GPUs or
// n/GPUs copies of the host.
func fitCluster(root *model.Element, file string, params model.Params, hosts, n int) (*model.Cluster, error) {
	cl, err := model.LoadCluster(root, file, model.LoadOptions{Params: params})
	if err != nil {
		return nil, err
	}
	local := cl.NRanks
	switch {
	case hosts > 1:
		if n%hosts != 0 {
			return nil, errorf(InvalidUsage, "%d ranks on %d hosts: want the same number of ranks on every host", n, hosts)
		}
		if per := n / hosts; per < local {
			model.KeepRanks(root, per)
		}
		cl, err = model.LoadCluster(root, file, model.LoadOptions{Nodes: hosts, Params: params})
	case n == local:
		return cl, nil
	case n > local && n%local == 0:
		cl, err = model.LoadCluster(root, file, model.LoadOptions{Nodes: n / local, Params: params})
	case n < local:
		model.KeepRanks(root, n)
		cl, err = model.LoadCluster(root, file, model.LoadOptions{Params: params})
	default:
		err = errorf(InvalidUsage, "%s has %d GPUs, which does not fit a communicator of %d ranks (set NCCL_TOPO_FILE)", file, local, n)
	}
	if err == nil && cl.NRanks != n {
		err = errorf(InvalidUsage, "%s: planned %d ranks for a communicator of %d (set NCCL_TOPO_FILE)", file, cl.NRanks, n)
	}
	return cl, err
}
