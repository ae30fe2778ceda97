package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
)

// BenchmarkDefaultsAtScale is the heavy half of the defaults acceptance
// check (TestDefaultsSimulateEveryTopology): replay sim with NCCL's
// defaults for every collective at 8 B, 64 KiB, 16 MiB and 8 GiB on
// every topology of ../shared/topologies as 1, 2, 16 and 128 hosts, one
// sub-benchmark per case (select with -bench 'DefaultsAtScale/h100/nodes16/allreduce').
// A case that fails is reported with replay's message.
func BenchmarkDefaultsAtScale(b *testing.B) {
	for _, file := range sharedTopologies(b) {
		for _, nodes := range []int{1, 2, 16, 128} {
			for _, op := range simOps {
				for _, size := range []int64{8, 64 << 10, 16 << 20, 8 << 30} {
					name := fmt.Sprintf("%s/nodes%d/%s/%d", filepath.Base(file), nodes, op.name, size)
					b.Run(name, func(b *testing.B) {
						s := strconv.FormatInt(size, 10)
						for i := 0; i < b.N; i++ {
							var out, errb bytes.Buffer
							if code := run([]string{"sim", "--topo", file, "--nodes", strconv.Itoa(nodes), "--op", op.name,
								"-b", s, "-e", s, "--loop", "0"}, &out, &errb); code != 0 {
								b.Skipf("replay sim: %s", errb.String())
							}
						}
					})
				}
			}
		}
	}
}
