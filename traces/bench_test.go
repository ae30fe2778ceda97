package traces

import (
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"
)

var benchRows = flag.Int("trace.rows", 10_000_000, "rows written and read by BenchmarkEventTrace")

// peakHeap samples the live heap every few milliseconds until stop is called
// and returns the largest value seen.
func peakHeap() (stop func() uint64) {
	var peak atomic.Uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	go func() {
		defer close(finished)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sample)
			if v := sample[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); <-finished; return peak.Load() }
}

// fillEvents makes batch i of a synthetic 8-rank, 24-channel ring trace.
func fillEvents(batch []EventRow, first int64) {
	for j := range batch {
		i := first + int64(j)
		rank := int32(i % 8)
		ch := int32(i / 8 % 24)
		step := i / 192
		batch[j] = EventRow{
			Comm: 0xa62b7a58480480ae, Call: step / 64, Rank: rank, Channel: ch,
			SendPeer: (rank + 1) % 8, RecvPeer: (rank + 7) % 8, Primitive: prims[step%3],
			Protocol: "Simple", Step: step % 64, Bytes: 1 << 19, StartNs: step*3000 + int64(ch),
			EndNs: step*3000 + 2500, Source: SourceHW,
		}
	}
}

// BenchmarkEventTrace writes and reads -trace.rows event rows (10 million by
// default) through a file and reports rows/s each way and the peak live heap.
// Run: go test -run '^$' -bench EventTrace -benchtime 1x ./traces/
func BenchmarkEventTrace(b *testing.B) {
	n := int64(*benchRows)
	path := filepath.Join(b.TempDir(), "events.parquet")
	for range b.N {
		runtime.GC()
		stop := peakHeap()
		start := time.Now()
		w, err := CreateEventFile(path, WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		batch := make([]EventRow, 4096)
		for i := int64(0); i < n; i += int64(len(batch)) {
			k := min(int64(len(batch)), n-i)
			fillEvents(batch[:k], i)
			if err := w.Append(batch[:k]...); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			b.Fatal(err)
		}
		wdur := time.Since(start)
		wpeak := stop()

		runtime.GC()
		stop = peakHeap()
		start = time.Now()
		r, err := OpenEventFile(path)
		if err != nil {
			b.Fatal(err)
		}
		var got, bytes int64
		err = r.Scan(Filter{}, func(rows []EventRow) error {
			got += int64(len(rows))
			for i := range rows {
				bytes += rows[i].Bytes
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		r.Close()
		rdur := time.Since(start)
		rpeak := stop()
		if got != n {
			b.Fatalf("read %d rows, wrote %d", got, n)
		}
		st, _ := os.Stat(path)
		b.ReportMetric(float64(n)/wdur.Seconds(), "write-rows/s")
		b.ReportMetric(float64(n)/rdur.Seconds(), "read-rows/s")
		b.ReportMetric(float64(wpeak)/(1<<20), "write-peak-heap-MiB")
		b.ReportMetric(float64(rpeak)/(1<<20), "read-peak-heap-MiB")
		b.ReportMetric(float64(st.Size())/float64(n), "file-bytes/row")
	}
}
