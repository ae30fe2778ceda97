package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/hw/transport"
)

// TestBenchLocal launches 4 or 8 ranks (this test binary re-executed, see
// init below) through shm and through split hosts (sockets), with data
// checking, for several collectives.
func TestBenchLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	cases := []struct {
		hostid string
		args   []string
	}{
		{"", []string{"-np", "4", "--op", "allreduce", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"}},
		{"split:1", []string{"-np", "4", "--op", "allgather", "--dtype", "fp16", "-b", "64", "-e", "256K", "-f", "64", "-n", "2", "-w", "1"}},
		{"split:2", []string{"-np", "4", "--op", "reducescatter", "--proto", "ll", "--redop", "prod", "-b", "64", "-e", "64K", "-f", "32", "-n", "2", "-w", "1"}},
		{"", []string{"-np", "8", "--op", "allreduce", "-b", "8", "-e", "4M", "-f", "64", "-n", "2", "-w", "1"}},
		{"split:4", []string{"-np", "8", "--op", "allgather", "-b", "1K", "-e", "1M", "-f", "32", "-n", "2", "-w", "1"}},
		{"", []string{"-np", "4", "--op", "alltoall", "--dtype", "int8", "-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-w", "1"}},
	}
	for _, c := range cases {
		t.Run("np"+strings.Join(c.args[1:4], "")+c.hostid, func(t *testing.T) {
			t.Setenv("TWINCCL_HOSTID", c.hostid)
			var out, errb bytes.Buffer
			if rc := run(append([]string{"bench"}, c.args...), &out, &errb); rc != 0 {
				t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
			}
			lines := 0
			for _, l := range strings.Split(out.String(), "\n") {
				f := strings.Fields(l)
				if len(f) == 9 && !strings.HasPrefix(l, "#") {
					lines++
					if f[8] != "0" {
						t.Errorf("wrong elements: %s", l)
					}
				}
			}
			if lines == 0 {
				t.Fatalf("no table rows:\n%s\n%s", out.String(), errb.String())
			}
			t.Log("\n" + out.String())
		})
	}
	if m, _ := filepath.Glob("/dev/shm/" + transport.ShmPrefix + "*"); len(m) > 0 {
		t.Errorf("shm segments left: %v", m)
	}
}

// TestBenchBaseline runs `run bench --baseline` once, briefly: every
// bandwidth and both ratios are printed and positive.
func TestBenchBaseline(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	var out, errb bytes.Buffer
	if rc := run([]string{"bench", "--baseline", "-n", "1", "-w", "1"}, &out, &errb); rc != 0 {
		t.Fatalf("exit %d\n%s\n%s", rc, out.String(), errb.String())
	}
	ratios := 0
	for _, l := range strings.Split(out.String(), "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[len(f)-2] == "ratio" {
			if v, err := strconv.ParseFloat(f[len(f)-1], 64); err != nil || v <= 0 {
				t.Errorf("bad ratio: %s", l)
			}
			ratios++
		}
	}
	if ratios != 2 {
		t.Errorf("want 2 ratios:\n%s", out.String())
	}
	if m, _ := filepath.Glob("/dev/shm/" + transport.ShmPrefix + "*"); len(m) > 0 {
		t.Errorf("shm segments left: %v", m)
	}
	t.Log("\n" + out.String())
}

func init() {
	// A rank started by the bench launcher: the test binary acts as run.
	if os.Getenv(envUID) != "" && len(os.Args) > 1 && os.Args[1] == "bench" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}
