package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/hw/transport"
)

// TestBenchLocal launches 4 ranks (this test binary re-executed, see
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
		{"", []string{"-np", "4", "--op", "alltoall", "--dtype", "int8", "-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-w", "1"}},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args[2:4], "")+c.hostid, func(t *testing.T) {
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

func init() {
	// A rank started by the bench launcher: the test binary acts as run.
	if os.Getenv(envUID) != "" && len(os.Args) > 1 && os.Args[1] == "bench" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
}
