package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeps keeps bin/run a hardware tool: it must not carry the simulator
// (exec/sim) or the test harness (model/conformance pulls in testing).
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		switch dep {
		case "github.com/twinccl/twinccl/exec/sim", "github.com/twinccl/twinccl/model/conformance", "testing":
			t.Errorf("cmd/run depends on %s", dep)
		}
	}
}
