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
