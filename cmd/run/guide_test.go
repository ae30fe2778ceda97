package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/guide"
)

var update = flag.Bool("update", false, "rewrite the help sections of docs/guide/run-*.md")

// TestGuide checks that every run command has its user guide page and that
// the page's reference section is the command's current -h.
func TestGuide(t *testing.T) {
	for _, c := range commands {
		code, out, stderr := runArgs(c.name, "-h")
		require.Equal(t, 0, code, stderr)
		page := filepath.Join("..", "..", "docs", "guide", "run-"+c.name+".md")
		ok, err := guide.Check(page, "$ run "+c.name+" -h\n"+out, *update)
		require.NoError(t, err, "every run command has a guide page")
		require.True(t, ok, "%s is stale: go test ./cmd/run -run TestGuide -update", page)
	}
}
