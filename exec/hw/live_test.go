//go:build cgo

package hw

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// requireGPU reports whether the environment says a GPU must be present.
func requireGPU() bool { return os.Getenv("TWINCCL_REQUIRE_GPU") == "1" }

// TestOpenNVMLWithoutDriver checks the error on a machine without the
// NVIDIA driver (CI, developer laptops). It is skipped where NVML works.
func TestOpenNVMLWithoutDriver(t *testing.T) {
	lib, err := OpenNVML()
	if err == nil {
		lib.Close()
		t.Skip("NVML is available on this machine")
	}
	if !errors.Is(err, ErrNoNVML) {
		t.Errorf("OpenNVML error %v does not wrap ErrNoNVML", err)
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "NVML not available: ") || strings.Contains(msg, "\n") {
		t.Errorf("OpenNVML error %q is not one line starting with \"NVML not available: \"", msg)
	}
	if strings.Contains(msg, "ERROR_LIBRARY_NOT_FOUND") && !strings.Contains(msg, "(no NVIDIA driver on this machine)") {
		t.Errorf("OpenNVML error %q does not explain that there is no driver", msg)
	}
	if requireGPU() {
		t.Fatalf("TWINCCL_REQUIRE_GPU=1 but NVML is not available: %v", err)
	}
}

// TestLiveTopology discovers the real machine. It skips without a GPU and
// fails when TWINCCL_REQUIRE_GPU=1 says there must be one.
func TestLiveTopology(t *testing.T) {
	lib, err := OpenNVML()
	if err != nil {
		if requireGPU() {
			t.Fatalf("TWINCCL_REQUIRE_GPU=1: %v", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	defer lib.Close()
	opts := Options{NVML: lib, Logger: quietLogger()}
	if cuda, err := OpenCUDA(); err != nil {
		t.Logf("CUDA driver unavailable (gdr from the peer-memory rule): %v", err)
	} else {
		opts.CUDA = cuda
	}
	root, err := Discover(opts)
	if err != nil {
		t.Fatal(err)
	}
	out := render(t, root)
	t.Logf("discovered topology:\n%s", out)

	n, err := lib.DeviceCount()
	if err != nil {
		t.Fatal(err)
	}
	var gpus []*model.Element
	var walk func(e *model.Element)
	walk = func(e *model.Element) {
		if e.Name == "gpu" {
			gpus = append(gpus, e)
		}
		for _, c := range e.Children {
			walk(c)
		}
	}
	walk(root)
	if len(gpus) != n {
		t.Fatalf("%d <gpu> elements for %d NVML devices", len(gpus), n)
	}
	seen := map[int]bool{}
	for _, g := range gpus {
		rank, _ := g.Get("rank")
		dev, _ := g.Get("dev")
		r, err := strconv.Atoi(rank)
		if err != nil || rank != dev || seen[r] {
			t.Errorf("<gpu dev=%q rank=%q>: want distinct ranks equal to the NVML index", dev, rank)
		}
		seen[r] = true
	}
}
