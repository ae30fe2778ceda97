package sim

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParseCalib: a calibration JSON file as --calib reads it: an error or
// a valid calibration, and a calibration it accepts survives writing and
// reading back unchanged (issue 51: every input format is fuzzed).
func FuzzParseCalib(f *testing.F) {
	b, err := os.ReadFile("calib/h100-twinccl.json")
	require.NoError(f, err)
	f.Add(b)
	f.Add([]byte(`{"gpu":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCalib(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			return
		}
		out, err := json.Marshal(c)
		require.NoError(t, err)
		c2, err := ParseCalib(bytes.NewReader(out), "again.json")
		require.NoError(t, err, "a calibration it accepted, written back, is refused")
		require.Equal(t, c, c2)
	})
}
