package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/exec/hw"
	"github.com/twinccl/twinccl/model"
)

func runArgs(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// fakeTopology makes discoverTopology return root (or err) for one test.
func fakeTopology(t *testing.T, root *model.Element, err error) {
	t.Helper()
	old := discoverTopology
	discoverTopology = func(*slog.Logger) (*model.Element, error) { return root, err }
	t.Cleanup(func() { discoverTopology = old })
}

func sample() *model.Element {
	sys := model.NewElement("system", "version", "1")
	cpu := sys.Add(model.NewElement("cpu", "host_hash", "0x1", "numaid", "-1", "arch", "x86_64"))
	pci := cpu.Add(model.NewElement("pci", "busid", "0000:00:06.0", "class", "0x030200", "link_speed", "32.0 GT/s PCIe", "link_width", "16"))
	pci.Add(model.NewElement("gpu", "dev", "0", "sm", "90", "rank", "0", "gdr", "1"))
	return sys
}

const sampleXML = `<system version="1">
  <cpu host_hash="0x1" numaid="-1" arch="x86_64">
    <pci busid="0000:00:06.0" class="0x030200" link_speed="32.0 GT/s PCIe" link_width="16">
      <gpu dev="0" sm="90" rank="0" gdr="1"/>
    </pci>
  </cpu>
</system>
`

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}} {
		code, out, _ := runArgs(args...)
		if code != 0 || !strings.Contains(out, "Commands:") || !strings.Contains(out, "topo") {
			t.Errorf("run %v: exit %d, stdout %q", args, code, out)
		}
	}
	code, out, _ := runArgs("topo", "-h")
	if code != 0 || !strings.Contains(out, "--dump FILE") || !strings.Contains(out, "NCCL_TOPO_DUMP_FILE") {
		t.Errorf("run topo -h: exit %d, stdout %q", code, out)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{{}, {"frob"}, {"-x"}, {"topo", "--bogus"}, {"topo", "extra"}} {
		code, _, errOut := runArgs(args...)
		if code != 2 || errOut == "" {
			t.Errorf("run %v: exit %d, stderr %q; want exit 2 and a message", args, code, errOut)
		}
	}
}

func TestTopoStdout(t *testing.T) {
	fakeTopology(t, sample(), nil)
	code, out, errOut := runArgs("topo")
	if code != 0 || out != sampleXML {
		t.Errorf("run topo: exit %d, stdout\n%s\nstderr %s", code, out, errOut)
	}
}

func TestTopoDump(t *testing.T) {
	fakeTopology(t, sample(), nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "topo.xml")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runArgs("topo", "--dump", path)
	if code != 0 || out != "" {
		t.Fatalf("run topo --dump: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != sampleXML {
		t.Errorf("dumped file = %q, %v", got, err)
	}
	if _, _, err := model.ReadTopologyFile(path); err != nil {
		t.Errorf("dumped file does not parse: %v", err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

func TestTopoFailureWritesNothing(t *testing.T) {
	fakeTopology(t, nil, errors.New("NVML not available: nvmlInit: ERROR_LIBRARY_NOT_FOUND (no NVIDIA driver on this machine)"))
	dir := t.TempDir()
	path := filepath.Join(dir, "topo.xml")
	code, out, errOut := runArgs("topo", "--dump", path)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, "run topo: NVML not available: ") {
		t.Errorf("stderr %q: want one line starting with \"run topo: NVML not available: \"", errOut)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("failed run left files: %v", ents)
	}
	// An element NCCL could not read back is refused before anything is
	// written, and an existing file survives.
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	fakeTopology(t, model.NewElement("system", "version", "bad\"quote"), nil)
	if code, _, _ := runArgs("topo", "--dump", path); code != 1 {
		t.Errorf("unwritable XML: exit %d, want 1", code)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("existing file clobbered: %q", got)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("temporary files left behind: %v", ents)
	}
}

// TestTopoWithoutDriver runs the real discovery; on a machine without the
// NVIDIA driver it must fail with one clear line and write nothing.
func TestTopoWithoutDriver(t *testing.T) {
	if lib, err := hw.OpenNVML(); err == nil {
		lib.Close()
		t.Skip("NVML is available on this machine")
	}
	path := filepath.Join(t.TempDir(), "topo.xml")
	code, out, errOut := runArgs("topo", "--dump", path)
	if code != 1 || out != "" {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	if strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, "NVML not available: ") {
		t.Errorf("stderr %q: want one line saying NVML is not available", errOut)
	}
	if strings.Contains(errOut, "ERROR_LIBRARY_NOT_FOUND") && !strings.Contains(errOut, "(no NVIDIA driver on this machine)") {
		t.Errorf("stderr %q does not say there is no driver", errOut)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("%s exists after a failed run", path)
	}
}

func TestNetProbe(t *testing.T) {
	code, out, errOut := runArgs("netprobe", "--json", "--bytes", "1048576", "-r", "1")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r struct {
		LatencyUs, OneWayGBps, BothWaysGBps float64
	}
	if err := json.Unmarshal([]byte(out), &struct {
		L *float64 `json:"latency_us"`
		O *float64 `json:"one_way_GBps"`
		B *float64 `json:"both_ways_GBps"`
	}{&r.LatencyUs, &r.OneWayGBps, &r.BothWaysGBps}); err != nil {
		t.Fatalf("%v in %q", err, out)
	}
	if r.LatencyUs <= 0 || r.OneWayGBps <= 0 || r.BothWaysGBps <= 0 {
		t.Errorf("probe %+v: want every figure positive", r)
	}
	for _, args := range [][]string{{"netprobe", "extra"}, {"netprobe", "--bytes", "10"}, {"netprobe", "-r", "0"}} {
		if code, _, _ := runArgs(args...); code != 2 {
			t.Errorf("run %v: exit %d, want 2", args, code)
		}
	}
}
