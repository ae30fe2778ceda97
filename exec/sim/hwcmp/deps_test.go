package hwcmp

import (
	"strings"
	"testing"

	"github.com/twinccl/twinccl/internal/depstest"
)

// TestDeps keeps the comparison a reader of recordings: it reads run gpu's
// schema (traces/gpurecord), not the CUDA sources that produced them
// (kernels) or anything of the hardware executor.
func TestDeps(t *testing.T) {
	depstest.Forbid(t, func(dep string) bool {
		return dep == "github.com/twinccl/twinccl/kernels" || strings.HasPrefix(dep, "github.com/twinccl/twinccl/exec/hw")
	})
}
