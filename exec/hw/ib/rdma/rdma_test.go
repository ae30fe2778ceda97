package rdma

import (
	"os"
	"testing"
)

// TestDevices opens each device and queries port 1; it skips without a
// device unless TWINCCL_REQUIRE_IB=1.
func TestDevices(t *testing.T) {
	p, err := New()
	if err != nil {
		t.Skip(err)
	}
	names, err := p.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		if os.Getenv("TWINCCL_REQUIRE_IB") == "1" {
			t.Fatal("TWINCCL_REQUIRE_IB=1 but ibv_get_device_list found no device")
		}
		t.Skip("no RDMA device")
	}
	for _, n := range names {
		c, err := p.Open(n)
		if err != nil {
			t.Fatal(err)
		}
		pa, err := c.QueryPort(1)
		t.Logf("%s: %+v %v", n, pa, err)
		c.Close()
	}
}
