package kernels_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// sourceValue finds "NAME = VALUE" (an enum member) or "#define NAME
// VALUE" in the kernel source and returns VALUE.
func sourceValue(t *testing.T, src, name string) int {
	t.Helper()
	re := regexp.MustCompile(`(?m)(?:\b` + name + `\s*=\s*|#define\s+` + name + `\s+)(\d+)\b`)
	m := re.FindAllStringSubmatch(src, -1)
	if len(m) != 1 {
		t.Fatalf("interp.cu: %d definitions of %s, want one", len(m), name)
	}
	v, err := strconv.Atoi(m[0][1])
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestInterpConstants: the numbers the Go side writes into Programs and
// reads from a launch's status word are the ones interp.cu defines. The
// kernel is built per protocol with -DTW_PROTO=model.Protocol, so its
// protocol numbers must be model's.
func TestInterpConstants(t *testing.T) {
	for _, c := range []struct {
		name string
		want int
	}{
		{"PROTO_LL", int(model.ProtoLL)},
		{"PROTO_LL128", int(model.ProtoLL128)},
		{"PROTO_SIMPLE", int(model.ProtoSimple)},
		{"ST_TIMEOUT", kernels.StatusTimeout},
		{"ST_ABORT", kernels.StatusAbort},
		{"ST_PROTO", kernels.StatusProto},
		{"LANE_HOST_RECV", kernels.LaneHostRecv},
		{"LANE_HOST_SEND", kernels.LaneHostSend},
		{"TW_SLOT_LL", kernels.SlotLL},
		{"TW_SLOT_LL128", kernels.SlotLL128},
		{"TW_SLOT_SIMPLE", kernels.SlotSimple},
	} {
		if got := sourceValue(t, kernels.Interp, c.name); got != c.want {
			t.Errorf("interp.cu %s = %d, Go side %d", c.name, got, c.want)
		}
	}
	if model.NumProtocols != 3 {
		t.Errorf("model has %d protocols, the kernel three", model.NumProtocols)
	}
}

// TestCurrentLineThreads: the build a recording names has the LL and
// LL128 block limit the launches use.
func TestCurrentLineThreads(t *testing.T) {
	if got := kernels.Current().LineThreads; got != kernels.LineThreads {
		t.Errorf("the current build says line_threads %d, the launches use %d", got, kernels.LineThreads)
	}
	if err := kernels.Current().Validate(); err != nil {
		t.Errorf("the current build does not validate: %v", err)
	}
}
