package sim

import (
	"math"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestRelayOnlyDelaysRingsOfThreeOrMore: RelayUs delays what a lane that
// receives from one GPU and sends to another posts, RelayHoldUs holds
// such a lane, and neither touches anything else. A two-rank ring has no
// such lane, so no call of the H200 pair moves under either; on
// the eight GPUs of an H100 host a 256-byte AllGather (one slice a step,
// and under zeroCalib no cost that could hide a delay) is a chain of n-1
// hops of which the n-2 middle ones relay, so its isolated time grows by
// exactly (n-2)·RelayUs. (A larger call's second slice overlaps the next
// rank's wait: a latency shorter than a slice's work costs nothing.)
func TestRelayOnlyDelaysRingsOfThreeOrMore(t *testing.T) {
	const relay = 3.0
	run := func(file string, c Call, relayUs, holdUs float64) float64 {
		t.Helper()
		cal := zeroCalib(30, 1)
		cal.Simple.RelayUs, cal.Simple.RelayHoldUs = relayUs, holdUs
		s := newSim(t, loadSearch(t, file, 1), cal)
		r, err := s.RunTimed(c, true)
		if err != nil {
			t.Fatal(err)
		}
		return r.TimeUs
	}
	for _, coll := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast} {
		c := Call{Coll: coll, Count: 1 << 20, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 2}
		if a, b := run("", c, 0, 0), run("", c, relay, relay); a != b {
			t.Errorf("two H200, %s: %.4f us with relay_us and relay_hold_us %.1f, %.4f without", coll, b, relay, a)
		}
	}
	file := h100XML(t)
	n := newSim(t, loadSearch(t, file, 1), nil).Machine.Cluster.NRanks
	c := Call{Coll: model.CollAllGather, Count: 64, Dtype: model.DtypeFP32, Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: 1}
	base, delayed := run(file, c, 0, 0), run(file, c, relay, 0)
	if want := base + float64(n-2)*relay; math.Abs(delayed-want) > 1e-3*want {
		t.Errorf("%d H100, 256-byte AllGather: %.4f us with relay_us %.1f, want %.4f (%.4f without + %d relays)", n, delayed, relay, want, base, n-2)
	}
}
