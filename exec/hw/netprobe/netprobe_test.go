package netprobe

import (
	"strings"
	"testing"
	"time"
)

func TestLoopback(t *testing.T) {
	r, err := Loopback(Options{Bytes: 4 << 20, Chunk: 64 << 10, RoundTrips: 200, Repeats: 2})
	if err != nil {
		t.Fatal(err)
	}
	// A round trip over loopback takes microseconds, not nothing and not
	// a second; 4 MiB moves at more than 10 MB/s on any host CI runs on.
	if r.LatencyUs <= 0.1 || r.LatencyUs > 1e5 {
		t.Errorf("latency %.3f us: want between 0.1 us and 100 ms", r.LatencyUs)
	}
	for name, v := range map[string]float64{"one way": r.OneWayGBps, "both ways": r.BothWaysGBps} {
		if v < 0.01 || v > 1000 {
			t.Errorf("%s %.3f GB/s: want between 0.01 and 1000", name, v)
		}
	}
	if !strings.HasPrefix(r.Addr, "127.0.0.1:") {
		t.Errorf("addr %q: want 127.0.0.1:PORT", r.Addr)
	}
}

func TestLoopbackBadAddr(t *testing.T) {
	_, err := Loopback(Options{Addr: "256.0.0.1:0", Timeout: time.Second})
	if err == nil || !strings.Contains(err.Error(), "256.0.0.1:0") {
		t.Fatalf("err = %v: want a listen error naming the address", err)
	}
}
