package search

import (
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twinccl/twinccl/internal/groundtruth"
	"github.com/twinccl/twinccl/model"
)

// BenchmarkRun times the whole init-time pipeline (search of every node,
// wiring, tuning) on clusters of the A100 16-NIC box and the RTX 3090 PCIe
// box, up to 16 nodes of 8 GPUs.
func BenchmarkRun(b *testing.B) {
	dir := filepath.Join(groundtruth.Dir(b), "topologies")
	for _, bc := range []struct {
		file  string
		nodes int
	}{
		{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", 1},
		{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", 16},
		{"pcie-rtx3090x8-2socket-1ib.xml", 16},
	} {
		root, _, err := model.ReadTopologyFile(filepath.Join(dir, bc.file))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.file+"/nodes"+strconv.Itoa(bc.nodes), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// Load inside the loop: the search mutates nothing, but a
				// user pays for building the cluster too.
				cl, err := model.LoadCluster(root, bc.file, model.LoadOptions{Nodes: bc.nodes, Params: model.DefaultParams()})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Run(cl, DefaultOptions()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
