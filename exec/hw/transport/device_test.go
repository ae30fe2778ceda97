package transport

import (
	"os"
	"testing"
)

// TestHostID checks TWINCCL_HOSTID: unset (the host name), a fixed id,
// and split:K (every K consecutive ranks on a host of their own).
func TestHostID(t *testing.T) {
	h, _ := os.Hostname()
	t.Setenv("TWINCCL_HOSTID", "")
	if got := HostID(3); got != h {
		t.Errorf("unset: %q, want the host name %q", got, h)
	}
	t.Setenv("TWINCCL_HOSTID", "node7")
	if got := HostID(3); got != "node7" {
		t.Errorf("fixed: %q", got)
	}
	t.Setenv("TWINCCL_HOSTID", "split:2")
	for r, want := range []int{0, 0, 1, 1, 2} {
		if got, w := HostID(r), h+"/"+string(rune('0'+want)); got != w {
			t.Errorf("split:2 rank %d: %q, want %q", r, got, w)
		}
	}
	if HostID(0) == HostID(2) || HostID(0) != HostID(1) {
		t.Error("split:2 does not pair ranks 0,1 apart from 2")
	}
	t.Setenv("TWINCCL_HOSTID", "split:x")
	if got := HostID(0); got != "split:x" {
		t.Errorf("bad split: %q, want the value itself", got)
	}
}
