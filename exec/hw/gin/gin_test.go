package gin

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/gpudev"
	"github.com/twinccl/twinccl/kernels"
)

// job starts n in-process ranks (rank r on GPU r mod GPUs) with a GIN
// communicator each; without a GPU the test skips, unless
// TWINCCL_REQUIRE_GPU=1.
func job(t *testing.T, n int, opts Options) ([]*Comm, []*cuda.Context) {
	t.Helper()
	ctxs, err := gpudev.Contexts()
	if err != nil {
		if os.Getenv("TWINCCL_REQUIRE_GPU") == "1" {
			t.Fatalf("TWINCCL_REQUIRE_GPU=1 but no GPU: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	if n == 0 {
		n = max(2, len(ctxs))
	}
	lj, err := gpudev.NewLocalJob(n, ctxs, 20*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lj.Close() })
	comms := make([]*Comm, n)
	rctx := make([]*cuda.Context, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		rctx[r] = lj.Devices[r].Context()
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = New(lj.Comms[r], rctx[r], opts)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range comms {
			if err := c.Close(); err != nil {
				t.Error(err)
			}
		}
	})
	return comms, rctx
}

// onAll runs f for every rank at once.
func onAll(n int, f func(r int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// pattern is the 32-bit word i of rank r's slice for peer p.
func pattern(r, p, i int) uint32 { return uint32(r)<<24 ^ uint32(p)<<16 ^ uint32(i)*2654435761 }

// TestAllToAll runs the GIN all-to-all example on every GPU (at least two
// ranks) for several sizes and chunkings, three launches each, and checks
// every received byte and the signal counts.
func TestAllToAll(t *testing.T) {
	comms, ctxs := job(t, 0, Options{Contexts: 4})
	n := len(comms)
	const maxBytes = 8 << 20 // per peer
	send := make([]cuda.DevicePtr, n)
	recv := make([]cuda.DevicePtr, n)
	streams := make([]*cuda.Stream, n)
	for r := 0; r < n; r++ {
		var err error
		if send[r], err = ctxs[r].MemAlloc(maxBytes * uint64(n)); err != nil {
			t.Fatal(err)
		}
		if recv[r], err = ctxs[r].MemAlloc(maxBytes * uint64(n)); err != nil {
			t.Fatal(err)
		}
		if streams[r], err = ctxs[r].NewStream(cuda.StreamNonBlocking); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctxs[r].MemFree(send[r]); ctxs[r].MemFree(recv[r]); streams[r].Destroy() })
	}
	if err := onAll(n, func(r int) error {
		if w, err := comms[r].RegisterWindow(send[r], maxBytes*uint64(n)); err != nil || w != 0 {
			return fmt.Errorf("send window %d: %v", w, err)
		}
		if w, err := comms[r].RegisterWindow(recv[r], maxBytes*uint64(n)); err != nil || w != 1 {
			return fmt.Errorf("receive window %d: %v", w, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	signal := 5
	for _, tc := range []struct {
		bytes  uint64
		chunks int
	}{{4, 1}, {4100, 1}, {4100, 3}, {1 << 20, 0}, {maxBytes, 4}, {maxBytes - 12, 7}} {
		t.Run(fmt.Sprintf("%dB-%dchunks", tc.bytes, tc.chunks), func(t *testing.T) {
			words := int(tc.bytes / 4)
			before := make([]uint64, n)
			err := onAll(n, func(r int) error {
				host := make([]byte, tc.bytes*uint64(n))
				for p := 0; p < n; p++ {
					for i := 0; i < words; i++ {
						binary.LittleEndian.PutUint32(host[uint64(p)*tc.bytes+uint64(4*i):], pattern(r, p, i))
					}
				}
				if err := ctxs[r].MemcpyHtoD(send[r], host); err != nil {
					return err
				}
				if err := ctxs[r].MemsetD8(recv[r], 0xee, tc.bytes*uint64(n)); err != nil {
					return err
				}
				before[r] = comms[r].Signal(signal)
				a, err := comms[r].NewAllToAll(0, 1, tc.bytes, tc.chunks, signal)
				if err != nil {
					return err
				}
				defer a.Release()
				for k := 0; k < 3; k++ {
					if err := a.Enqueue(streams[r]); err != nil {
						return err
					}
				}
				if err := streams[r].Synchronize(); err != nil {
					return err
				}
				if err := a.Check(); err != nil {
					return err
				}
				if got, want := comms[r].Signal(signal)-before[r], uint64(3*n*a.Chunks()); got != want {
					return fmt.Errorf("rank %d: signal moved by %d, want %d", r, got, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			for r := 0; r < n; r++ {
				host := make([]byte, tc.bytes*uint64(n))
				if err := ctxs[r].MemcpyDtoH(host, recv[r]); err != nil {
					t.Fatal(err)
				}
				bad := 0
				for p := 0; p < n; p++ {
					for i := 0; i < words; i++ {
						if got := binary.LittleEndian.Uint32(host[uint64(p)*tc.bytes+uint64(4*i):]); got != pattern(p, r, i) {
							if bad < 3 {
								t.Errorf("rank %d: word %d from rank %d is %#x, want %#x", r, i, p, got, pattern(p, r, i))
							}
							bad++
						}
					}
				}
				if bad > 0 {
					t.Fatalf("rank %d: %d wrong words", r, bad)
				}
			}
		})
	}
}

// TestOrderProbe checks the ordering rules with the probe kernel: no
// signal is seen before its payload, counters never run ahead of the
// completed puts.
func TestOrderProbe(t *testing.T) {
	comms, ctxs := job(t, 2, Options{Contexts: 2})
	const bytes, rounds = 1 << 20, 48
	buf := make([]cuda.DevicePtr, 2)
	for r := range buf {
		var err error
		if buf[r], err = ctxs[r].MemAlloc(bytes * rounds); err != nil {
			t.Fatal(err)
		}
		if err := ctxs[r].MemsetD8(buf[r], 0, bytes*rounds); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctxs[r].MemFree(buf[r]) })
	}
	stale := make([]uint32, 2)
	ahead := make([]bool, 2)
	err := onAll(2, func(r int) error {
		w, err := comms[r].RegisterWindow(buf[r], bytes*rounds)
		if err != nil {
			return err
		}
		s, err := ctxs[r].NewStream(cuda.StreamNonBlocking)
		if err != nil {
			return err
		}
		defer s.Destroy()
		stale[r], ahead[r], err = comms[r].OrderProbe(s, w, buf[r], w, buf[r], bytes, rounds)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if stale[1] != 0 || ahead[0] {
		t.Fatalf("%d stale words seen after their signal; counter ahead of completions: %v", stale[1], ahead[0])
	}
	if got := comms[1].Signal(0); got != rounds {
		t.Errorf("rank 1's signal 0 is %d, want %d", got, rounds)
	}
	if got := comms[0].Counter(0); got != rounds {
		t.Errorf("rank 0's counter 0 is %d, want %d", got, rounds)
	}
}

// TestBadDescriptor: a descriptor naming a rank that does not exist (as a
// buggy kernel would write it) fails the proxy with an error naming it,
// and nothing is copied.
func TestBadDescriptor(t *testing.T) {
	comms, _ := job(t, 2, Options{Contexts: 1})
	c := comms[0]
	slot := c.queues[0].mem.Bytes()[:kernels.GinDescSize]
	le := binary.LittleEndian
	le.PutUint64(slot[16:], 64) // bytes
	le.PutUint32(slot[32:], 99) // peer
	le.PutUint64(slot[kernels.GinDescSeqOffset:], 1)
	deadline := time.Now().Add(5 * time.Second)
	for c.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := c.Err(); err == nil || !strings.Contains(err.Error(), "peer 99 outside 2 ranks") {
		t.Fatalf("proxy error %v, want one naming peer 99", err)
	}
}

// TestLostPeer: a rank that never launches makes the other's all-to-all
// fail at its timeout with an error, not hang.
func TestLostPeer(t *testing.T) {
	comms, ctxs := job(t, 2, Options{Contexts: 1, Timeout: 300 * time.Millisecond})
	bufs := make([]cuda.DevicePtr, 2)
	err := onAll(2, func(r int) error {
		var err error
		if bufs[r], err = ctxs[r].MemAlloc(1 << 12); err != nil {
			return err
		}
		_, err = comms[r].RegisterWindow(bufs[r], 1<<12)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ctxs[0].MemFree(bufs[0])
	defer ctxs[1].MemFree(bufs[1])
	a, err := comms[0].NewAllToAll(0, 0, 1024, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release()
	s, err := ctxs[0].NewStream(cuda.StreamNonBlocking)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Destroy()
	start := time.Now()
	if err := a.Enqueue(s); err != nil {
		t.Fatal(err)
	}
	if err := s.Synchronize(); err != nil {
		t.Fatal(err)
	}
	err = a.Check()
	if err == nil || !strings.Contains(err.Error(), "barrier did not complete") {
		t.Fatalf("error %v, want the barrier's timeout", err)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("took %v", el)
	}
}

// TestOptions: bad sizes are refused before anything is allocated.
func TestOptions(t *testing.T) {
	for _, o := range []Options{{Contexts: 9}, {Signals: 1}, {QueueSlots: 1000}, {Counters: -1}} {
		if err := o.defaults(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	o := Options{}
	if err := o.defaults(); err != nil || o.Contexts != 4 || o.QueueSlots != 1024 {
		t.Fatalf("defaults %+v: %v", o, err)
	}
}
