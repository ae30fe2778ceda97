package main

import (
	"fmt"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model/fabric"
)

// fabricFlagHelp is the help of every --fabric flag.
const fabricFlagHelp = "fabric `FILE.yaml` above the NICs: rail or ToR leaves, spine, oversubscription, " +
	"adaptive routing (see docs/guide/fabric.md; default: every NIC on one non-blocking switch)"

// fabricHelp is the paragraph sim's and run's help give the fabric file.
const fabricHelp = `--fabric FILE.yaml describes the network above the NICs, which NCCL's XML stops at:
leaves of N hosts (one per rail of the group in a rail-optimised cluster, "kind: rail",
or one per group, "kind: tor"), their uplinks to a spine and oversubscription, and
adaptive routing or static ECMP (docs/guide/fabric.md). Transfers between NICs under
different leaves then share the leaves' spine links. Without it every NIC meets every
other in one non-blocking switch. Ring and tree connections leave and enter through
the NICs of their graph's channel, p2p ones through the NIC of the peer's rail where
PXN allows (NCCL_CROSS_NIC=0: always), as NCCL 2.28.9 picks them.
`

// attachFabric reads the --fabric file (none: nothing to do) and attaches
// it to the simulator's machine.
func attachFabric(s *sim.Simulator, path string) error {
	if path == "" {
		return nil
	}
	f, err := fabric.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--fabric: %w", err)
	}
	if err := s.Machine.SetFabric(f); err != nil {
		return fmt.Errorf("--fabric: %w", err)
	}
	return nil
}
