package rdma

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// TestDevices opens each device, queries port 1 and its GID table; it
// skips without libibverbs or a device unless TWINCCL_REQUIRE_IB=1.
func TestDevices(t *testing.T) {
	require := os.Getenv("TWINCCL_REQUIRE_IB") == "1"
	p, err := New()
	if err != nil {
		if require {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	names, err := p.Devices()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 {
		if require {
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
		for i := 0; i < pa.GIDTableLen && i < 8; i++ {
			g, err := c.QueryGID(1, i)
			t.Logf("  gid %d: %x %v %v", i, g.GID, g.Type, err)
		}
		c.Close()
	}
}

func TestGIDTypeFromSysfs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "mlx5_0", "ports", "1", "gid_attrs", "types")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"IB/RoCE v1\n", "RoCE v2\n", "RoCE v1\n", "\n"} {
		if err := os.WriteFile(filepath.Join(dir, string(rune('0'+i))), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []verbs.GIDType{verbs.GIDTypeIB, verbs.GIDTypeRoCEv2, verbs.GIDTypeRoCEv1, verbs.GIDTypeUnknown, verbs.GIDTypeUnknown} {
		if got := GIDTypeFromSysfs(root, "mlx5_0", 1, i); got != want {
			t.Errorf("index %d: %v, want %v", i, got, want)
		}
	}
}
