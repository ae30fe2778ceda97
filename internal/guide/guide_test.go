package guide

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSplice(t *testing.T) {
	page := []byte("# x\n\nintro\n\n" + Begin + "\nold\n" + End + "\n\ntail\n")
	got, err := Splice("x.md", page, "Usage: x\n")
	require.NoError(t, err)
	require.Equal(t, "# x\n\nintro\n\n"+Begin+"\n```\nUsage: x\n```\n"+End+"\n\ntail\n", string(got))
	_, err = Splice("y.md", []byte("no markers"), "h")
	require.ErrorContains(t, err, "y.md")
	_, err = Splice("z.md", []byte(End+"\n"+Begin), "h")
	require.Error(t, err, "markers out of order")
}

func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "p.md")
	require.NoError(t, os.WriteFile(p, []byte(Begin+"\n"+End+"\n"), 0o644))
	ok, err := Check(p, "help", false)
	require.NoError(t, err)
	require.False(t, ok, "a stale page is reported")
	ok, err = Check(p, "help", true)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = Check(p, "help", false)
	require.NoError(t, err)
	require.True(t, ok, "the rewritten page is current")
}
