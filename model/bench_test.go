package model

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkParseAndPaths measures reading the 16-NIC A100 topology
// (oci-bm-gpu4.8) and computing all of NCCL's paths: parse, build, paths,
// trim, paths again, search bounds.
func BenchmarkParseAndPaths(b *testing.B) {
	for _, name := range []string{"oci-bm-gpu4.8-a100-40g-x8-nvswitch-16x100g.xml", "oci-bm-gpu-h100.8-h100x8-nvswitch-16x200g.xml"} {
		data, err := os.ReadFile(filepath.Join(sharedDir(b), "topologies", name))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				root, _, err := ParseTopologyXML(bytes.NewReader(data), name)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := LoadCluster(root, name, LoadOptions{Params: DefaultParams()}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
