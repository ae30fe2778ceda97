package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCalibrateProgress: --progress reports on stderr the table loaded,
// then the fit's evaluations with the lowest loss ("calibrate:
// evaluation N, loss L, T s") and its restarts; stdout is the same as
// without it, and without it (stderr no terminal) stderr stays empty.
func TestCalibrateProgress(t *testing.T) {
	tab := filepath.Join(t.TempDir(), "t.tsv")
	require.NoError(t, os.WriteFile(tab, []byte("all_reduce 8 5.65\nall_reduce 33554432 136.04\nbroadcast 8388608 36.34\n"), 0o644))
	args := []string{"--table", tab, "--max-evals", "60", "--restarts", "1"}
	var quietOut, quietErr, so, se bytes.Buffer
	require.NoError(t, runCalibrate(args, &quietOut, &quietErr))
	assert.Empty(t, quietErr.String())
	require.NoError(t, runCalibrate(append(args, "--progress"), &so, &se))
	assert.Equal(t, quietOut.String(), so.String())
	lines := strings.Split(strings.TrimSuffix(se.String(), "\n"), "\n")
	require.GreaterOrEqual(t, len(lines), 2, se.String())
	assert.Regexp(t, `^calibrate: table 1/1 .*t\.tsv, \d+ s$`, lines[0])
	assert.Regexp(t, `^calibrate: evaluation 1, loss \d+\.\d{6}, \d+ s$`, lines[1])
	for _, l := range lines[1:] {
		assert.Regexp(t, `^calibrate: (evaluation \d+, loss \d+\.\d{6}|restart \d+ after \d+ evaluations: median \|err\| .*), \d+ s$`, l)
	}
}
