package bootstrap

import (
	"sync"
	"testing"
	"time"
)

// BenchmarkBarrier times a dissemination barrier of 8 ranks on loopback:
// every round opens a fresh connection per rank (bootstrapSend), so it
// measures the per-connection handshake.
func BenchmarkBarrier(b *testing.B) {
	comms, err := StartLocal(8, Config{Timeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll(comms)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var wg sync.WaitGroup
		for _, c := range comms {
			wg.Add(1)
			go func() { defer wg.Done(); _ = c.Barrier() }()
		}
		wg.Wait()
	}
}
