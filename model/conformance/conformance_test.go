package conformance_test

import (
	"testing"

	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

func TestRefexecConformance(t *testing.T) {
	conformance.Run(t, refexec.Executor{})
}
