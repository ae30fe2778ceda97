package main

import (
	"flag"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/guide"
)

var update = flag.Bool("update", false, "rewrite the help sections of docs/guide/replay-*.md")

// TestGuide checks that every command has its user guide page and that the
// page's reference section is the command's current -h.
func TestGuide(t *testing.T) {
	for _, c := range commands {
		out, stderr, code := runReplay(t, c.name, "-h")
		require.Equal(t, 0, code, stderr)
		page := filepath.Join("..", "..", "docs", "guide", "replay-"+c.name+".md")
		ok, err := guide.Check(page, "$ replay "+c.name+" -h\n"+out, *update)
		require.NoError(t, err, "every replay command has a guide page")
		require.True(t, ok, "%s is stale: go test ./cmd/replay -run TestGuide -update", page)
	}
}
