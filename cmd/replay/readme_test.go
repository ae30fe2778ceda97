package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/manifest"
)

// TestReadme keeps the README honest: its one accuracy table is the
// accuracy report's summary, verbatim; it fits on a screen or two; its
// links stay inside the repository and point at files that exist.
func TestReadme(t *testing.T) {
	root := repoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	got, err := manifest.Summary(readme)
	require.NoError(t, err, "README.md quotes the report's summary between its markers")
	assert.Equal(t, accuracySummary(t), got, "README.md's accuracy table differs from docs/accuracy.md's: copy the summary over")

	lines := strings.Count(string(readme), "\n")
	assert.LessOrEqual(t, lines, 160, "README.md is for a first look: move detail into docs/")
	assert.NotContains(t, string(readme), "../shared", "a README link must work in a fresh clone")

	for _, m := range regexp.MustCompile(`\]\(([^)#]+)\)`).FindAllStringSubmatch(string(readme), -1) {
		link := m[1]
		if strings.Contains(link, "://") {
			continue
		}
		_, err := os.Stat(filepath.Join(root, filepath.FromSlash(link)))
		assert.NoError(t, err, "README.md links %s", link)
	}
	// Accuracy figures live in the table only: no percentage in prose.
	prose := regexp.MustCompile("(?s)```.*?```|<!-- summary:begin -->.*?<!-- summary:end -->").ReplaceAllString(string(readme), "")
	assert.NotRegexp(t, `\d+(\.\d+)?\s?%`, prose, "an error figure outside the generated table")
}
