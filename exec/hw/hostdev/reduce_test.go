package hostdev

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/refexec"
)

// TestCombineParallel checks that splitting a slice across workers gives
// byte for byte the sequential result, for every combination of sources,
// destinations and post op, at sizes around the split thresholds.
func TestCombineParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []model.Dtype{model.DtypeFP32, model.DtypeFP16, model.DtypeInt8, model.DtypeFP64} {
		for _, op := range []model.RedOp{model.RedSum, model.RedProd, model.RedAvg, model.RedMax} {
			for _, n := range []int{ParallelMin - 8, 3*ParallelMin + 24} {
				n = n / dt.Size() * dt.Size()
				for _, shape := range [][2]int{{1, 1}, {2, 1}, {3, 2}, {2, 3}} {
					srcs := make([][]byte, shape[0])
					for i := range srcs {
						srcs[i] = make([]byte, n)
						for j := range srcs[i] {
							srcs[i][j] = byte(rng.IntN(7))
						}
					}
					post := op == model.RedAvg
					want := make([][]byte, shape[1])
					got := make([][]byte, shape[1])
					for i := range want {
						want[i], got[i] = make([]byte, n), make([]byte, n)
					}
					// The reference: refexec's left-to-right reduction.
					copy(want[0], srcs[0])
					for _, s := range srcs[1:] {
						refexec.ReduceInto(dt, op, want[0], s)
					}
					if post {
						refexec.PostOp(dt, op, want[0], 4)
					}
					for _, w := range want[1:] {
						copy(w, want[0])
					}
					for _, workers := range []int{1, 3} {
						d := &Device{Workers: workers}
						for _, g := range got {
							clear(g)
						}
						d.combine(dt, op, got, srcs, post, 4)
						for i := range got {
							if !bytes.Equal(got[i], want[i]) {
								t.Fatalf("%s %s n=%d srcs=%d dsts=%d workers=%d: destination %d differs", dt, op, n, shape[0], shape[1], workers, i)
							}
						}
					}
				}
			}
		}
	}
}

// TestReduceSrcsInPlace: the destination may be one of the sources (an
// in-place call, where the user's input is the output): every reduction
// gives refexec's left-to-right result into a separate buffer, whichever
// source the destination is and however many there are.
func TestReduceSrcsInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, dt := range []model.Dtype{model.DtypeFP32, model.DtypeFP16, model.DtypeInt8, model.DtypeFP64, model.DtypeBF16} {
		for op := model.RedOp(0); op < model.NumRedOps; op++ {
			for _, nsrc := range []int{2, 3} {
				for alias := 0; alias < nsrc; alias++ {
					n := 1000 * dt.Size()
					srcs := make([][]byte, nsrc)
					for i := range srcs {
						srcs[i] = make([]byte, n)
						for j := range srcs[i] {
							srcs[i][j] = byte(rng.IntN(7))
						}
					}
					want := make([]byte, n)
					copy(want, srcs[0])
					for _, s := range srcs[1:] {
						refexec.ReduceInto(dt, op, want, s)
					}
					reduceSrcs(dt, op, srcs[alias], srcs)
					if !bytes.Equal(srcs[alias], want) {
						t.Errorf("%s %s, %d sources, destination = source %d: differs from the out-of-place result", dt, op, nsrc, alias)
					}
				}
			}
		}
	}
}
