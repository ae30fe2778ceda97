package hwcmp

import (
	"path/filepath"
	"strconv"
	"strings"
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

// TestSVGHeaderFits: a header line that would run past the plot's edge
// is drawn smaller (at most halved), a short one at its own size; the
// settings line wraps onto a second line first (wrapHeader).
func TestSVGHeaderFits(t *testing.T) {
	if got := fitFont("2x H100: p2p-allreduce", 16); got != "16.0" {
		t.Errorf("short title: font %s, want 16.0", got)
	}
	long := strings.Repeat("NCCL_SETTING=value ", 8) // 152 characters
	got, err := strconv.ParseFloat(fitFont(long, 11), 64)
	if err != nil || !(got < 11 && got > 5.5) || float64(len(long))*headerEm*got > headerWidth+1 {
		t.Errorf("152-character line: font %v (%v), want it below 11 and fitting the width", got, err)
	}
	if got := fitFont(strings.Repeat("x", 2000), 11); got != "5.5" {
		t.Errorf("very long line: font %s, want half of 11", got)
	}
	// The settings line wraps at spaces onto a second line before it
	// shrinks: every word kept, in order, each line at its full size.
	settings := "testdata/hw/h100x2/topo-1gpu.xml as 2 hosts of 1 GPU(s), NCCL_HOSTID=host0 NCCL_IB_DISABLE=1 NCCL_NET=Socket " +
		"NCCL_NVLS_ENABLE=0 NCCL_PROTO=Simple NCCL_SOCKET_IFNAME=lo; CUDA-graph-timed medians of repetitions"
	lines := wrapHeader(settings, svgSettingsPx, 2)
	if len(lines) != 2 || strings.Join(lines, " ") != settings {
		t.Errorf("settings wrapped as %q, want two lines that join back to it", lines)
	}
	for _, l := range lines {
		if f := fitFont(l, svgSettingsPx); f != "10.0" {
			t.Errorf("line %q: font %s, want it whole at 10", l, f)
		}
	}
	if got := wrapHeader("NCCL_PROTO=LL", svgSettingsPx, 2); len(got) != 1 {
		t.Errorf("short settings wrapped as %q, want one line", got)
	}
	if got := wrapHeader(strings.Repeat("x", 300), svgSettingsPx, 2); len(got) != 1 {
		t.Errorf("a line with no space to break at: %d lines, want it whole (fitFont shrinks it)", len(got))
	}
}
