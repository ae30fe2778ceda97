package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.txt")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))

	// A failing producer leaves the old file and no temporary behind.
	err := Write(path, func(w io.Writer) error {
		io.WriteString(w, "partial")
		return errors.New("boom")
	})
	require.ErrorContains(t, err, "boom")
	data, _ := os.ReadFile(path)
	require.Equal(t, "old", string(data))

	require.NoError(t, Write(path, func(w io.Writer) error { _, err := io.WriteString(w, "new"); return err }))
	data, _ = os.ReadFile(path)
	require.Equal(t, "new", string(data))
	entries, _ := os.ReadDir(dir)
	require.Len(t, entries, 1)

	require.ErrorContains(t, Write(filepath.Join(dir, "missing", "x"), func(io.Writer) error { return nil }), "missing")
}
