package ncclapi

import (
	"encoding/binary"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
)

// gpuCount is the number of GPUs, or skips the test when there is none
// (failing it when TWINCCL_REQUIRE_GPU=1 says there must be one).
func gpuCount(t *testing.T) int {
	t.Helper()
	n, err := deviceCount()
	if err == nil && n == 0 {
		err = cuda.ErrUnavailable
	}
	if err != nil {
		if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" {
			t.Fatalf("TWINCCL_REQUIRE_GPU=1 but: %v", err)
		}
		t.Skipf("not supported without a GPU: %v", err)
	}
	return n
}

// testTid is the "thread" the tests' groups run on.
const testTid = 1 << 30

// rankBuf is one rank's device buffers and stream for a test.
type rankBuf struct {
	c         *Comm
	s, s2     *cuda.Stream // s2: a second stream of the communicator
	send, out cuda.DevicePtr
}

func f32bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func f32s(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// input is rank r's send buffer of n floats: small integers, so that every
// sum is exact.
func input(r, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32((r+1)*(i%7+1) + i%3)
	}
	return v
}

func setup(t *testing.T, comms []*Comm, elems int) []rankBuf {
	t.Helper()
	bufs := make([]rankBuf, len(comms))
	for r, c := range comms {
		s, err := c.ctx.NewStream(cuda.StreamNonBlocking)
		require.NoError(t, err)
		s2, err := c.ctx.NewStream(cuda.StreamNonBlocking)
		require.NoError(t, err)
		send, err := c.ctx.MemAlloc(uint64(4 * elems * len(comms)))
		require.NoError(t, err)
		out, err := c.ctx.MemAlloc(uint64(4 * elems * len(comms)))
		require.NoError(t, err)
		in := input(r, elems*len(comms))
		require.NoError(t, c.ctx.MemcpyHtoD(send, f32bytes(in)))
		require.NoError(t, c.ctx.MemsetD8(out, 0, uint64(4*elems*len(comms))))
		require.NoError(t, c.ctx.Synchronize()) // the memset is on the legacy stream, which ours do not wait for
		bufs[r] = rankBuf{c: c, s: s, s2: s2, send: send, out: out}
		t.Cleanup(func() {
			_ = c.ctx.MemFree(send)
			_ = c.ctx.MemFree(out)
			_ = s.Destroy()
			_ = s2.Destroy()
		})
	}
	return bufs
}

// runGroup issues one call per rank in a group and waits for the streams.
func runGroup(t *testing.T, bufs []rankBuf, mk func(r int, b rankBuf) []Call) {
	t.Helper()
	GroupStart(testTid)
	for r, b := range bufs {
		for _, k := range mk(r, b) {
			require.NoError(t, Enqueue(testTid, b.c, k))
		}
	}
	require.NoError(t, GroupEnd(testTid))
	for _, b := range bufs {
		require.NoError(t, b.s.Synchronize())
	}
}

func output(t *testing.T, b rankBuf, n int) []float32 {
	raw := make([]byte, 4*n)
	require.NoError(t, b.c.ctx.MemcpyDtoH(raw, b.out))
	return f32s(raw)
}

// TestCollectivesOnGPU runs every collective of the API on one rank (NCCL's
// one-rank copy) and on every GPU of the machine (ncclCommInitAll), and
// checks the outputs against the definitions.
func TestCollectivesOnGPU(t *testing.T) {
	ngpu := gpuCount(t)
	sizes := []int{1}
	if ngpu > 1 {
		sizes = append(sizes, ngpu)
	}
	const elems = 4099 // not a multiple of anything
	for _, n := range sizes {
		devs := make([]int, n)
		for i := range devs {
			devs[i] = i
		}
		comms, err := InitAll(devs)
		require.NoError(t, err)
		t.Cleanup(func() {
			for _, c := range comms {
				assert.NoError(t, c.Destroy())
			}
		})
		bufs := setup(t, comms, elems)
		f32 := int32(model.DtypeFP32)
		call := func(coll model.Collective, b rankBuf, count int, root int) Call {
			return Call{Coll: coll, Send: uintptr(b.send), Recv: uintptr(b.out), Count: uint64(count), Dtype: f32, Root: root, Stream: b.s.Handle()}
		}
		t.Run("AllReduce", func(t *testing.T) {
			runGroup(t, bufs, func(r int, b rankBuf) []Call { return []Call{call(model.CollAllReduce, b, elems, 0)} })
			for _, b := range bufs {
				got := output(t, b, elems)
				for i := range elems {
					want := float32(0)
					for r := range n {
						want += input(r, elems*n)[i]
					}
					require.Equal(t, want, got[i], "rank %d element %d", b.c.Rank, i)
				}
			}
		})
		t.Run("AllGather", func(t *testing.T) {
			runGroup(t, bufs, func(r int, b rankBuf) []Call { return []Call{call(model.CollAllGather, b, elems, 0)} })
			for _, b := range bufs {
				got := output(t, b, elems*n)
				for r := range n {
					assert.Equal(t, input(r, elems*n)[:elems], got[r*elems:(r+1)*elems], "rank %d block %d", b.c.Rank, r)
				}
			}
		})
		t.Run("ReduceScatter", func(t *testing.T) {
			runGroup(t, bufs, func(r int, b rankBuf) []Call { return []Call{call(model.CollReduceScatter, b, elems, 0)} })
			for _, b := range bufs {
				got := output(t, b, elems)
				for i := range elems {
					want := float32(0)
					for r := range n {
						want += input(r, elems*n)[b.c.Rank*elems+i]
					}
					require.Equal(t, want, got[i], "rank %d element %d", b.c.Rank, i)
				}
			}
		})
		t.Run("Broadcast", func(t *testing.T) {
			root := n - 1
			runGroup(t, bufs, func(r int, b rankBuf) []Call { return []Call{call(model.CollBroadcast, b, elems, root)} })
			for _, b := range bufs {
				assert.Equal(t, input(root, elems*n)[:elems], output(t, b, elems), "rank %d", b.c.Rank)
			}
		})
		t.Run("SendRecvRing", func(t *testing.T) {
			runGroup(t, bufs, func(r int, b rankBuf) []Call {
				s := call(model.CollSend, b, elems, (r+1)%n)
				v := call(model.CollRecv, b, elems, (r+n-1)%n)
				return []Call{s, v}
			})
			for _, b := range bufs {
				assert.Equal(t, input((b.c.Rank+n-1)%n, elems*n)[:elems], output(t, b, elems), "rank %d", b.c.Rank)
			}
		})
		t.Run("GatherScatter", func(t *testing.T) {
			root := n - 1
			GroupStart(testTid)
			for _, b := range bufs {
				k := call(model.CollBroadcast, b, elems, root)
				require.NoError(t, EnqueueRooted(testTid, b.c, Gather, k))
			}
			require.NoError(t, GroupEnd(testTid))
			for _, b := range bufs {
				require.NoError(t, b.s.Synchronize())
			}
			got := output(t, bufs[root], elems*n)
			for r := range n {
				assert.Equal(t, input(r, elems*n)[:elems], got[r*elems:(r+1)*elems], "gathered block %d", r)
			}
			GroupStart(testTid)
			for _, b := range bufs {
				require.NoError(t, EnqueueRooted(testTid, b.c, Scatter, call(model.CollBroadcast, b, elems, root)))
			}
			require.NoError(t, GroupEnd(testTid))
			for _, b := range bufs {
				require.NoError(t, b.s.Synchronize())
				assert.Equal(t, input(root, elems*n)[b.c.Rank*elems:(b.c.Rank+1)*elems], output(t, b, elems), "scattered to rank %d", b.c.Rank)
			}
		})
		t.Run("TwoStreams", func(t *testing.T) {
			// Two launches of one communicator on two streams, back to back:
			// the second must wait for the first (they share connections).
			GroupStart(testTid)
			for _, b := range bufs {
				require.NoError(t, Enqueue(testTid, b.c, call(model.CollAllReduce, b, elems, 0)))
				second := call(model.CollBroadcast, b, elems, 0)
				second.Send, second.Stream = uintptr(b.out), b.s2.Handle() // in place on the AllReduce's result
				require.NoError(t, Enqueue(testTid, b.c, second))
			}
			require.NoError(t, GroupEnd(testTid))
			for _, b := range bufs {
				require.NoError(t, b.s.Synchronize())
				require.NoError(t, b.s2.Synchronize())
				got := output(t, b, elems)
				for i := range elems {
					want := float32(0)
					for q := range n {
						want += input(q, elems*n)[i]
					}
					require.Equal(t, want, got[i], "rank %d element %d", b.c.Rank, i)
				}
			}
		})
		t.Run("GraphCapture", func(t *testing.T) {
			// A warm-up call prepares the launch (preparing allocates, which a
			// capture forbids); the captured graph then replays it.
			mk := func(r int, b rankBuf) []Call { return []Call{call(model.CollAllReduce, b, elems, 0)} }
			runGroup(t, bufs, mk)
			for _, b := range bufs {
				require.NoError(t, b.c.ctx.MemsetD8(b.out, 0, 4*elems))
				require.NoError(t, b.c.ctx.Synchronize())
			}
			execs := make([]*cuda.GraphExec, n)
			for r, b := range bufs {
				unlock, err := b.c.ctx.LockThread()
				require.NoError(t, err)
				require.NoError(t, b.s.BeginCapture(cuda.CaptureModeRelaxed))
				GroupStart(testTid)
				require.NoError(t, Enqueue(testTid, b.c, mk(r, b)[0]))
				// Each rank's launch is captured alone: prepared already, it
				// waits for no peer on the host.
				require.NoError(t, GroupEnd(testTid))
				g, err := b.s.EndCapture()
				require.NoError(t, err)
				execs[r], err = g.Instantiate(0)
				require.NoError(t, err)
				require.NoError(t, g.Destroy())
				unlock()
			}
			for r, b := range bufs {
				require.NoError(t, execs[r].Launch(b.s))
			}
			for r, b := range bufs {
				require.NoError(t, b.s.Synchronize())
				require.NoError(t, execs[r].Destroy())
				got := output(t, b, elems)
				want := float32(0)
				for q := range n {
					want += input(q, elems*n)[elems-1]
				}
				assert.Equal(t, want, got[elems-1], "rank %d", b.c.Rank)
			}
		})
	}
}
