package main

import (
	"fmt"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// cpuRankSM is the compute capability the tuner is told for a CPU rank.
const cpuRankSM = "80"

// cpuRankNetSpeed is the speed (Mb/s, NCCL's <net speed>) of the NIC a
// host of CPU ranks is given: 10 GbE-class, what TCP over sockets reaches.
const cpuRankNetSpeed = "10000"

// cpuTopology describes a job of CPU ranks to the search as NCCL topology
// XML, so that search.Run plans and tunes it with NCCL's own rules:
//
//   - every host (ranks sharing a host id; node-major, as NCCL numbers
//     ranks) is one <cpu> with its own host_hash;
//   - every rank is a GPU (sm 80, no GPUDirect) on a PCIe Gen4 x16 link of
//     its own below that CPU, and no NVLink: ranks of a host reach each
//     other through the CPU (path PHB), which is exactly the host-memory
//     (shm) transport the host device uses between them;
//   - every host has one NIC below its CPU (10 Gb/s, no GPUDirect), which
//     the net transport's sockets stand for between hosts.
//
// The tuner then weighs ring against tree and Simple against LL/LL128 the
// way NCCL would for PCIe GPUs without NVLink (the closest GPU machine to
// ranks whose links are memory copies); the flags --algo and --proto
// override it.
func cpuTopology(hosts []string) (*model.Element, error) {
	sys := model.NewElement("system", "version", "1")
	var cur *model.Element
	var last string
	seen := map[string]bool{}
	for r, h := range hosts {
		if r == 0 || h != last {
			if seen[h] {
				return nil, fmt.Errorf("ranks of host %q are not consecutive (rank %d)", h, r)
			}
			seen[h] = true
			last = h
			cur = sys.Add(model.NewElement("cpu", "host_hash", fmt.Sprintf("%#x", hostHash(h)), "numaid", "0", "arch", "x86_64", "vendor", "GenuineIntel", "familyid", "6", "modelid", "85"))
			nic := cur.Add(model.NewElement("pci", "busid", "0000:ff:00.0", "class", "0x020000", "link_speed", "16.0 GT/s PCIe", "link_width", "16"))
			nic.Add(model.NewElement("nic")).Add(model.NewElement("net", "name", "eth0", "dev", "0", "latency", "0", "speed", cpuRankNetSpeed, "port", "1", "guid", fmt.Sprintf("%#x", hostHash(h)), "maxconn", "65536", "gdr", "0"))
		}
		pci := cur.Add(model.NewElement("pci", "busid", fmt.Sprintf("0000:%02x:00.0", 1+r%200), "class", "0x030200", "link_speed", "16.0 GT/s PCIe", "link_width", "16"))
		pci.Add(model.NewElement("gpu", "dev", fmt.Sprint(r), "sm", cpuRankSM, "rank", fmt.Sprint(r), "gdr", "0"))
	}
	return sys, nil
}

// hostHash is a stable non-zero hash of a host id (FNV-1a).
func hostHash(h string) uint64 {
	v := uint64(14695981039346656037)
	for i := 0; i < len(h); i++ {
		v ^= uint64(h[i])
		v *= 1099511628211
	}
	return v | 1
}

// tunedPlan runs the search and the tuner on the job's CPU topology.
func tunedPlan(hosts []string) (*search.Result, error) {
	root, err := cpuTopology(hosts)
	if err != nil {
		return nil, err
	}
	cl, err := model.LoadCluster(root, "cpu-ranks", model.LoadOptions{})
	if err != nil {
		return nil, fmt.Errorf("topology of the CPU ranks: %w", err)
	}
	res, err := search.Run(cl, search.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("search on the CPU ranks: %w", err)
	}
	return res, nil
}
