package manifest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const header = "path\tmachine\tgpus\tsoftware\tdate\trole\tset\treport\tnote\n"

// sample is a small manifest: a comment, the header, a fit table, an
// eval recording that the report simulates and one it does not.
const sample = "# the rule\n\n" + header +
	"testdata/nccl-timings/p2p-ll.tsv\th200x2\t2\tnccl=2.28.9\t2026-11-22\tfit\tfit-h200\t-\th200.json stage 1\n" +
	"testdata/hw/h100x2/rerun38/heldout/p2p-allreduce-ll.json\th100x2\t2\tnccl=2.28.3\t2026-11-27\teval\teval-2026-12-07\ttopo=testdata/hw/h100x2/topo.xml\theld out\n" +
	"testdata/hw/h100x2/proxy-ab/a.r0.json\th100x2\t2\tnccl=-\t2026-11-26\teval\teval-2026-12-07\t-\tan A/B\n" +
	"../shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv\th200x2\t2\tnccl=2.28.9\t2026-11-22\tfit\tfit-h200+fit-old\t-\tstage 1\n"

func TestParseAndLookup(t *testing.T) {
	m, err := Parse(strings.NewReader(sample), "m.tsv")
	require.NoError(t, err)
	require.Len(t, m.Entries, 4)

	e, ok := m.Lookup("testdata/hw/h100x2/rerun38/heldout/p2p-allreduce-ll.json")
	require.True(t, ok)
	assert.Equal(t, Eval, e.Role)
	assert.Equal(t, "h100x2", e.Machine)
	assert.Equal(t, 2, e.GPUs)
	assert.Equal(t, "2026-11-27", e.Date)
	assert.Equal(t, 5, e.Line)
	assert.True(t, e.Reported())
	assert.Equal(t, "testdata/hw/h100x2/topo.xml", e.ReportOption("topo"))
	assert.Equal(t, "", e.ReportOption("nodes"))

	// A path is looked up cleaned.
	r, ok := m.Role("./testdata/nccl-timings//p2p-ll.tsv")
	assert.True(t, ok)
	assert.Equal(t, Fit, r)
	_, ok = m.Role("testdata/nccl-timings/p2p-simple.tsv")
	assert.False(t, ok)

	ab, _ := m.Lookup("testdata/hw/h100x2/proxy-ab/a.r0.json")
	assert.False(t, ab.Reported())
	assert.Nil(t, ab.ReportOptions())

	assert.Equal(t, []string{"eval-2026-12-07"}, m.Sets(Eval))
	assert.Equal(t, []string{"fit-h200", "fit-old"}, m.Sets(Fit))
	assert.Equal(t, []string{"eval-2026-12-07", "fit-h200", "fit-old"}, m.Sets(""))
	assert.Equal(t, 2, m.Count(Fit))
	assert.Equal(t, 2, m.Count(Eval))
}

// TestParseErrors: every malformed line is an error naming the file and
// the line, and what is wrong with it.
func TestParseErrors(t *testing.T) {
	good := "testdata/x.tsv\th200x2\t2\tnccl=2.28.9\t2026-11-22\tfit\tfit-h200\t-\tnote\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"no header", "# only a comment\n", "m.tsv: no header line"},
		{"bad header", "path\tmachine\n" + good, "m.tsv:1: header"},
		{"few fields", header + "testdata/x.tsv\th200x2\t2\n", "m.tsv:2: 3 tab-separated fields, want 9"},
		{"role", header + strings.Replace(good, "\tfit\t", "\tfitted\t", 1), `m.tsv:2: role "fitted": want fit or eval`},
		{"date", header + strings.Replace(good, "2026-11-22", "2026-11-32", 1), `m.tsv:2: date "2026-11-32"`},
		{"gpus", header + strings.Replace(good, "\t2\t", "\ttwo\t", 1), `m.tsv:2: gpus "two"`},
		{"unclean path", header + strings.Replace(good, "testdata/x.tsv", "testdata/../testdata/x.tsv", 1), "m.tsv:2: path"},
		{"absolute path", header + strings.Replace(good, "testdata/x.tsv", "/testdata/x.tsv", 1), "m.tsv:2: path"},
		{"empty field", header + strings.Replace(good, "\tnote", "\t", 1), "m.tsv:2: column note"},
		{"fit set", header + strings.Replace(good, "fit-h200", "eval-2026-12-07", 1), "m.tsv:2: set \"eval-2026-12-07\" of a fit entry"},
		{"fit reported", header + strings.Replace(good, "\t-\t", "\ttopo=x.xml\t", 1), "m.tsv:2: report \"topo=x.xml\" of a fit entry"},
		{"eval set", header + strings.Replace(good, "\tfit\t", "\teval\t", 1), "m.tsv:2: set \"fit-h200\" of an eval entry"},
		{"report", header + "testdata/y.json\th100x2\t2\tnccl=2.28.3\t2026-11-27\teval\teval-2026-12-07\ttopo\tnote\n", `m.tsv:2: report "topo"`},
		{"twice", header + good + "# comment\n" + good, "m.tsv:4: testdata/x.tsv listed twice (line 2 too)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.text), "m.tsv")
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestCheckFitting: a fitting table that the manifest marks eval is an
// error naming the file and its role; so is a file under testdata/ that
// it does not list; fit files and scratch tables outside the repository
// pass.
func TestCheckFitting(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "testdata"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "testdata", "manifest.tsv"), []byte(sample), 0o644))
	m, err := Load(filepath.Join(root, "testdata", "manifest.tsv"))
	require.NoError(t, err)
	in := func(p string) string { return filepath.Join(root, filepath.FromSlash(p)) }

	assert.NoError(t, m.CheckFitting(root, []string{in("testdata/nccl-timings/p2p-ll.tsv") + ",colls=all_reduce"}))
	assert.NoError(t, m.CheckFitting(root, []string{in("../shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv")}))
	assert.NoError(t, m.CheckFitting(root, []string{filepath.Join(t.TempDir(), "scratch.tsv")}))

	eval := in("testdata/hw/h100x2/rerun38/heldout/p2p-allreduce-ll.json")
	err = m.CheckFitting(root, []string{in("testdata/nccl-timings/p2p-ll.tsv"), eval + ",col=nccl"})
	require.ErrorIs(t, err, ErrEval)
	assert.Contains(t, err.Error(), eval+": role eval in ")
	assert.Contains(t, err.Error(), "manifest.tsv:5 (set eval-2026-12-07)")

	missing := in("testdata/hw/h100x2/rerun99/p2p-allreduce.json")
	err = m.CheckFitting(root, []string{missing})
	require.ErrorIs(t, err, ErrNotListed)
	assert.Contains(t, err.Error(), missing+": not in the manifest ")

	// Both at once: both named.
	err = m.CheckFitting(root, []string{eval, missing})
	require.ErrorIs(t, err, ErrEval)
	require.ErrorIs(t, err, ErrNotListed)

	// A path relative to the working directory resolves against it.
	t.Chdir(filepath.Join(root, "testdata"))
	err = CheckFitting([]string{"hw/h100x2/rerun38/heldout/p2p-allreduce-ll.json"})
	require.ErrorIs(t, err, ErrEval)
	assert.NoError(t, CheckFitting([]string{"nccl-timings/p2p-ll.tsv"}))
	// A file of the repository given from outside it is checked against
	// the repository's manifest; a scratch file outside any passes.
	t.Chdir(t.TempDir())
	require.ErrorIs(t, CheckFitting([]string{eval}), ErrEval)
	assert.NoError(t, CheckFitting([]string{in("testdata/nccl-timings/p2p-ll.tsv"), filepath.Join(t.TempDir(), "x.tsv")}))
}

func TestFindRoot(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "testdata", "hw", "x")
	require.NoError(t, os.MkdirAll(deep, 0o755))
	_, err := FindRoot(deep)
	require.Error(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(root, "testdata", "manifest.tsv"), []byte(sample), 0o644))
	got, err := FindRoot(deep)
	require.NoError(t, err)
	want, _ := filepath.EvalSymlinks(root)
	gotReal, _ := filepath.EvalSymlinks(got)
	assert.Equal(t, want, gotReal)
}

func TestSummary(t *testing.T) {
	doc := "# Report\n\n" + SummaryBegin + "\n| a | b |\n|---|---|\n| 1 | 2 |\n" + SummaryEnd + "\n\nmore\n"
	s, err := Summary([]byte(doc))
	require.NoError(t, err)
	assert.Equal(t, "| a | b |\n|---|---|\n| 1 | 2 |", s)
	_, err = Summary([]byte("no markers"))
	assert.ErrorContains(t, err, SummaryBegin)
	_, err = Summary([]byte(SummaryBegin + "\nx\n"))
	assert.ErrorContains(t, err, SummaryEnd)
	_, err = Summary([]byte(SummaryBegin + SummaryBegin + SummaryEnd))
	assert.ErrorContains(t, err, "twice")
}

// TestManifestFile: the repository's manifest parses, lists every run gpu
// recording under testdata/hw and every timing table, and says where the
// report finds each eval entry's topology.
func TestManifestFile(t *testing.T) {
	root, err := FindRoot(".")
	require.NoError(t, err)
	m, err := Load(filepath.Join(root, Path))
	require.NoError(t, err)
	assert.Greater(t, m.Count(Fit), 0)
	assert.Greater(t, m.Count(Eval), 0)
	var missing []string
	check := func(rel string) {
		if _, ok := m.Lookup(rel); !ok {
			missing = append(missing, rel)
		}
	}
	require.NoError(t, filepath.WalkDir(filepath.Join(root, "testdata", "hw"), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		if isRecording(t, p) {
			rel, _ := filepath.Rel(root, p)
			check(filepath.ToSlash(rel))
		}
		return nil
	}))
	for _, pat := range []string{"testdata/nccl-timings/*.tsv", "testdata/nccl-timings/*/*.tsv", "testdata/published/*.tsv"} {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pat)))
		require.NoError(t, err)
		require.NotEmpty(t, files, pat)
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			check(filepath.ToSlash(rel))
		}
	}
	assert.Empty(t, missing, "recordings and tables not in %s", Path)
	for _, e := range m.Entries {
		if strings.HasPrefix(e.Path, "testdata/published/") {
			assert.Equal(t, Eval, e.Role, "%s: published tables are never fitted", e.Path)
		}
		if !strings.HasPrefix(e.Path, "../") {
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(e.Path)))
			assert.NoError(t, err, "%s:%d", m.File, e.Line)
		}
		if topo := e.ReportOption("topo"); topo != "" && topo != "embedded" && !strings.HasPrefix(topo, "../") {
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(topo)))
			assert.NoError(t, err, "%s:%d: report topology", m.File, e.Line)
		}
	}
}

// isRecording says whether a JSON file under testdata/hw is a run gpu
// recording (ranks and rows), not a calibration.
func isRecording(t *testing.T, path string) bool {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var doc struct {
		NRanks int               `json:"nranks"`
		Rows   []json.RawMessage `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(data, &doc), path)
	return doc.NRanks > 0 && doc.Rows != nil
}
