package main

import (
	"testing"

	"github.com/twinccl/twinccl/internal/depstest"
)

// TestDeps keeps bin/run a hardware tool: it must not carry the simulator
// (exec/sim) or the test harness (model/conformance pulls in testing).
func TestDeps(t *testing.T) {
	depstest.Forbid(t, func(dep string) bool {
		switch dep {
		case "github.com/twinccl/twinccl/exec/sim", "github.com/twinccl/twinccl/model/conformance", "testing":
			return true
		}
		return false
	})
}
