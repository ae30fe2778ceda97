package sim

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// TestHarnessOnAnotherMachine: a harness named NAME@MACHINE costs what
// the calibration says for it, else what NAME costs; it calls in place as
// NAME does, and a malformed name is refused.
func TestHarnessOnAnotherMachine(t *testing.T) {
	c := &Calib{HarnessUs: map[string]float64{HarnessPyTorch: 1.5, HarnessPyTorch + "@h100": 0.8}}
	for h, want := range map[string]float64{
		HarnessPyTorch:           1.5,
		HarnessPyTorch + "@h100": 0.8,
		HarnessPyTorch + "@b200": 1.5,
		HarnessRunGPU + "@h100":  0,
		HarnessNCCLTests:         0,
	} {
		if got := c.HarnessCostUs(h); got != want {
			t.Errorf("HarnessCostUs(%q) = %g, want %g", h, got, want)
		}
	}
	if !harnessInPlace(HarnessPyTorch+"@h100", model.CollAllReduce) || harnessInPlace(HarnessRunGPU+"@h100", model.CollAllReduce) {
		t.Error("a harness on another machine should call in place as its base does")
	}
	for _, bad := range []string{"pytorch@", "torch@h100", "pytorch@h 100", "@h100"} {
		if err := (&Table{}).ApplySpec([]string{"harness=" + bad}); err == nil {
			t.Errorf("harness=%s accepted", bad)
		}
	}
}

// TestEmbeddedCalibs: every calibration built into the binary loads by
// its name ("embedded:NAME.json") and is the file in calib/ it was built
// from; an unknown name is refused with the list of the known ones.
func TestEmbeddedCalibs(t *testing.T) {
	names := EmbeddedCalibNames()
	for _, want := range []string{DefaultCalibName, "h100.json", "h200-twinccl.json", "h100-twinccl.json"} {
		if !slices.Contains(names, want) {
			t.Errorf("embedded calibrations %v lack %s", names, want)
		}
	}
	for _, n := range names {
		emb, err := LoadCalib(EmbeddedPrefix + n)
		if err != nil {
			t.Fatal(err)
		}
		disk, err := LoadCalib(filepath.Join("calib", n))
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(emb, disk) {
			t.Errorf("%s: the embedded calibration differs from calib/%s", n, n)
		}
	}
	_, err := LoadCalib(EmbeddedPrefix + "nope.json")
	if err == nil || !strings.Contains(err.Error(), "embedded:nope.json") || !strings.Contains(err.Error(), "h100.json") {
		t.Errorf("unknown embedded calibration: %v, want an error naming it and the known ones", err)
	}
}

// TestCalibNameForGPUs: a recording's GPUs pick the embedded calibration
// measured on their model, which must be one built in; GPUs of no
// measured model, of two models, or none pick nothing.
func TestCalibNameForGPUs(t *testing.T) {
	h100 := "rank 0: vm GPU 0 NVIDIA H100 80GB HBM3 (sm_90, 0000:00:06.0)"
	h200 := "rank 1: vm GPU 1 NVIDIA H200 (sm_90, 0000:00:07.0)"
	for _, tc := range []struct {
		gpus []string
		want string
	}{
		{[]string{h100, strings.Replace(h100, "rank 0", "rank 1", 1)}, "h100.json"},
		{[]string{h200}, "h200.json"},
		{[]string{h100, h200}, ""},
		{[]string{h100, "rank 1: GPU 1 NVIDIA B200 (sm_100)"}, ""},
		{[]string{"rank 0: GPU 0 NVIDIA A100-SXM4-80GB (sm_80)"}, ""},
		{nil, ""},
	} {
		got := CalibNameForGPUs(tc.gpus)
		if got != tc.want {
			t.Errorf("CalibNameForGPUs(%q) = %q, want %q", tc.gpus, got, tc.want)
		}
		if got != "" && !slices.Contains(EmbeddedCalibNames(), got) {
			t.Errorf("CalibNameForGPUs(%q) = %q, which is not built in", tc.gpus, got)
		}
	}
}
