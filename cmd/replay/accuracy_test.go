package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/internal/manifest"
)

// repoRoot is the repository's root (the tests run in cmd/replay).
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := manifest.FindRoot(".")
	require.NoError(t, err)
	return root
}

// accuracySummary returns the summary table of the committed report
// (docs/accuracy.md, between its summary markers), as a document that
// quotes it (the README) must have it.
func accuracySummary(t testing.TB) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "accuracy.md"))
	require.NoError(t, err)
	s, err := manifest.Summary(doc)
	require.NoError(t, err)
	return s
}

// TestAccuracyReportIsCurrent regenerates docs/accuracy.md and its plots
// (replay accuracy, as make accuracy runs it) into a temporary directory:
// each must equal the committed file byte for byte, so the committed
// report cannot go stale (rerun make accuracy after a change of the
// simulator, a calibration or the manifest). The published tables'
// topologies are in ../shared beside the repository: without them the
// report cannot be made.
func TestAccuracyReportIsCurrent(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates every reported recording (about 7 s of CPU)")
	}
	root := repoRoot(t)
	if _, err := os.Stat(filepath.Join(root, "..", "shared", "topologies")); err != nil {
		t.Skipf("the published tables' topologies are not beside the repository: %v", err)
	}
	dir := t.TempDir()
	var so, se bytes.Buffer
	require.NoError(t, runAccuracy([]string{"--out", filepath.Join(dir, "accuracy.md")}, &so, &se), se.String())
	names := []string{"accuracy.md"}
	for _, s := range accuracySVGs {
		names = append(names, s.name)
	}
	for _, name := range names {
		got, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(root, "docs", name))
		if err != nil {
			t.Errorf("docs/%s: %v: run make accuracy", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/%s is stale: run make accuracy (first difference: %s)", name, firstDiff(want, got))
		}
	}
}

// firstDiff names the first line where two texts differ.
func firstDiff(want, got []byte) string {
	w, g := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d: committed %q, now %q", i+1, short(wl), short(gl))
		}
	}
	return "none"
}

// short cuts a long line for a message.
func short(s string) string {
	if len(s) > 160 {
		return s[:160] + "..."
	}
	return s
}

// TestAccuracySummary: the committed report's summary table, which the
// README quotes, is a Markdown table with a row per machine, column and
// transport, and only eval recordings appear anywhere in the report.
func TestAccuracySummary(t *testing.T) {
	s := accuracySummary(t)
	lines := strings.Split(s, "\n")
	require.GreaterOrEqual(t, len(lines), 3)
	assert.Equal(t, "| machine | vs | transport | files | rows | median / max error (%) |", lines[0])
	row := regexp.MustCompile(`^\| h[12]00x[248] \| (NCCL|ours) \| (P2P|SHM|NET/Socket) \| \d+ \| \d+ \| \d+\.\d / \d+\.\d \|$`)
	for _, l := range lines[2:] {
		assert.Regexp(t, row, l)
	}
	root := repoRoot(t)
	m, err := manifest.Load(filepath.Join(root, filepath.FromSlash(manifest.Path)))
	require.NoError(t, err)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "accuracy.md"))
	require.NoError(t, err)
	paths := regexp.MustCompile("`(testdata/(hw|nccl-timings|published)/[^`]+\\.(json|tsv))`").FindAllStringSubmatch(string(doc), -1)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		e, ok := m.Lookup(p[1])
		if assert.True(t, ok, "%s is not in the manifest", p[1]) {
			assert.Equal(t, manifest.Eval, e.Role, "%s is reported but is a fit file", p[1])
		}
	}
}

// TestAccuracyNeverReportsFitFiles: a manifest whose reported entries are
// all fit files reports no recording; one plot recording that is not an
// eval entry is an error naming it.
func TestAccuracyNeverReportsFitFiles(t *testing.T) {
	root := repoRoot(t)
	src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(manifest.Path)))
	require.NoError(t, err)
	// Keep the header and the fit entries, and one eval recording turned fit.
	var b strings.Builder
	for _, l := range strings.Split(string(src), "\n") {
		f := strings.Split(l, "\t")
		switch {
		case strings.HasPrefix(l, "#") || l == "" || f[0] == "path":
			b.WriteString(l + "\n")
		case f[5] == string(manifest.Fit):
			b.WriteString(l + "\n")
		case f[0] == accuracySVGs[0].path:
			f[5], f[6], f[7] = "fit", "fit-test", "-"
			b.WriteString(strings.Join(f, "\t") + "\n")
		}
	}
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "testdata"), 0o755))
	man := filepath.Join(dir, "testdata", "manifest.tsv")
	require.NoError(t, os.WriteFile(man, []byte(b.String()), 0o644))
	m, err := manifest.Load(man)
	require.NoError(t, err)
	_, err = buildAccuracy(root, m)
	require.Error(t, err)
	assert.Contains(t, err.Error(), accuracySVGs[0].path+" is not a reported eval recording")
}

func TestAccuracyUsage(t *testing.T) {
	var so, se bytes.Buffer
	err := runAccuracy([]string{"extra"}, &so, &se)
	assert.True(t, errors.Is(err, errUsage), "%v", err)
	err = runAccuracy([]string{"--manifest", filepath.Join(t.TempDir(), "none.tsv")}, &so, &se)
	assert.Error(t, err)
}

func TestAccuracyHelpers(t *testing.T) {
	assert.Equal(t, "2.28.3", softwareField("nccl=2.28.3 kernel=a6a13e53b6fb520e+lt640", "nccl"))
	assert.Equal(t, "-", softwareField("kernel=-", "nccl"))
	assert.Equal(t, "none", leftLine(map[string]int{}))
	assert.Equal(t, "3 other build, 2 disturbed", leftLine(map[string]int{"build": 3, "disturbed": 2}))
}
