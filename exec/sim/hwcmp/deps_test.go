package hwcmp

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeps keeps the comparison a reader of recordings: it reads run gpu's
// schema (traces/gpurecord), not the CUDA sources that produced them
// (kernels) or anything of the hardware executor.
func TestDeps(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if dep == "github.com/twinccl/twinccl/kernels" || strings.HasPrefix(dep, "github.com/twinccl/twinccl/exec/hw") {
			t.Errorf("exec/sim/hwcmp depends on %s", dep)
		}
	}
}
