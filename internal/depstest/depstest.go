// Package depstest checks from a test which packages the package under
// test depends on, so that a package keeps its job (a hardware tool
// without the simulator, a reader of recordings without the executor).
package depstest

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Forbid fails t for every dependency of the package in the test's
// directory (`go list -deps .`) that forbidden reports; it skips without a
// go command.
func Forbid(t testing.TB, forbidden func(dep string) bool) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the dependencies")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if forbidden(dep) {
			t.Errorf("depends on %s", dep)
		}
	}
}
