package profiler

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// NCCL calls from application threads and proxy threads at once: calls of
// several communicators, their kernel channels from other goroutines, and
// a finalize in the middle, all land in the trace.
func TestRecorderConcurrentCommunicators(t *testing.T) {
	r, _ := newTestRecorder(t)
	const comms, calls = 4, 200
	var wg sync.WaitGroup
	for c := range comms {
		cx := r.Init(5, uint64(0x100+c), "", 1, 1, 0)
		handles := make(chan Handle, calls)
		wg.Add(2)
		go func() { // the application's thread
			defer wg.Done()
			for i := range calls {
				now := int64(1000 + 10*i)
				api := r.Start(cx, &Event{Type: TypeCollApi, HostNs: now, Stream: uint64(c)})
				r.Stop(api, now+1)
				h := r.Start(cx, &Event{Type: TypeColl, Parent: api, Func: "AllReduce", Datatype: "ncclFloat32",
					Algo: "RING", Proto: "LL", HostNs: now + 2})
				r.Stop(h, now+3)
				handles <- h
			}
			close(handles)
		}()
		go func() { // the proxy thread
			defer wg.Done()
			for h := range handles {
				k := r.Start(cx, &Event{Type: TypeKernelCh, Parent: h, PTimer: 5000, HostNs: 9000})
				r.Record(k, StateKernelChStop, 0, 6000, 9500)
				r.Stop(k, 9600)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		assert.NoError(t, r.Write()) // a write while the calls come
	}()
	wg.Wait()
	require.NoError(t, r.Finalize(1))
	rows, info := readRows(t, r.Config().CallPath())
	require.Len(t, rows, comms*calls)
	seen := map[[2]int64]bool{}
	for _, row := range rows {
		seen[[2]int64{int64(row.Comm), row.Call}] = true
		assert.Equal(t, int64(1000), row.EndNs-row.StartNs, "the GPU's duration")
		assert.Equal(t, row.Comm-0x100, row.Stream)
	}
	assert.Len(t, seen, comms*calls, "every call once, numbered 0..%d on each communicator", calls-1)
	assert.Equal(t, "0", info.Metadata[MetaIncomplete])
}
