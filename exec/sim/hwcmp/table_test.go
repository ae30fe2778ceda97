package hwcmp

import (
	"path/filepath"
	"testing"
)

// TestTableTakesNCCLEnv: a recording's table for "replay calibrate" runs
// under the NCCL_* settings the recording says NCCL ran under (here SHM:
// NCCL_P2P_DISABLE=1, LL forced), as "replay compare" does, and the
// caller's settings win over them.
func TestTableTakesNCCLEnv(t *testing.T) {
	in, err := Open(filepath.Join(h100Dir(), "heldout", "shm-broadcast-ll.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, col := range []string{ColNCCL, ColOurs} {
		tb, err := Table(in, col, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tb.Env["NCCL_P2P_DISABLE"] != "1" || tb.Env["NCCL_PROTO"] != "LL" {
			t.Errorf("%s: settings %v, want the recording's NCCL_P2P_DISABLE=1 NCCL_PROTO=LL", col, tb.Env)
		}
	}
	tb, err := Table(in, ColNCCL, map[string]string{"NCCL_P2P_DISABLE": "0"})
	if err != nil {
		t.Fatal(err)
	}
	if tb.Env["NCCL_P2P_DISABLE"] != "0" {
		t.Errorf("settings %v: the caller's NCCL_P2P_DISABLE=0 should win", tb.Env)
	}
}
