package hwcmp

import (
	"slices"
	"strings"
	"sync"

	"github.com/twinccl/twinccl/exec/sim"
)

// CalibCache parses each embedded calibration once for comparisons that
// share it (replay accuracy, TestAccuracy); every user gets a clone of its
// own. The zero value is ready; it is safe for concurrent use.
type CalibCache struct {
	mu sync.Mutex
	m  map[string]*sim.Calib
}

// Get returns a clone of the embedded calibration name.
func (cc *CalibCache) Get(name string) (*sim.Calib, error) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.m == nil {
		cc.m = map[string]*sim.Calib{}
	}
	c, ok := cc.m[name]
	if !ok {
		var err error
		if c, err = sim.LoadCalib(sim.EmbeddedPrefix + name); err != nil {
			return nil, err
		}
		cc.m[name] = c
	}
	return c.Clone(), nil
}

// OursCalibName is the embedded calibration of our executor on the GPUs of
// NCCL's embedded calibration name (h100.json: h100-twinccl.json), or ""
// where there is none.
func OursCalibName(name string) string {
	ours := strings.TrimSuffix(name, ".json") + "-twinccl.json"
	if slices.Contains(sim.EmbeddedCalibNames(), ours) {
		return ours
	}
	return ""
}

// FittedBuilds are the kernels of the recordings a calibration's last fit
// used: the builds whose rows our executor's column counts.
func FittedBuilds(c *sim.Calib) []string {
	if c.Fit == nil {
		return nil
	}
	var out []string
	for _, tf := range c.Fit.Tables {
		if tf.Fitted && tf.Kernel != "" && !slices.Contains(out, tf.Kernel) {
			out = append(out, tf.Kernel)
		}
	}
	return out
}
