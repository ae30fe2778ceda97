// Package manifest reads testdata/manifest.tsv: every hardware recording
// and timing table of the repository with the machine that recorded it,
// its software, its date, and its role: "fit" for anything any fit ever
// read as fitting data, "eval" for the rest. The file states the rule at
// its top. replay calibrate refuses an eval file as a fitting table
// (CheckFitting), and replay accuracy reports the simulator's errors on
// eval files only.
package manifest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Path is where the manifest lives below the repository's root.
const Path = "testdata/manifest.tsv"

// Role is what a file is for.
type Role string

const (
	// Fit: something read the file as fitting data (a fit script, a
	// calibration stage, a --table line of docs/eval-tables.txt, a test
	// that fits, a fit tried and not kept).
	Fit Role = "fit"
	// Eval: nothing ever fitted on it.
	Eval Role = "eval"
)

// Columns are the manifest's columns, in order: its header line.
var Columns = []string{"path", "machine", "gpus", "software", "date", "role", "set", "report", "note"}

// Entry is one recording or table.
type Entry struct {
	// Path is relative to the repository's root, with forward slashes
	// (../shared/... for the shared baselines beside it).
	Path    string
	Machine string
	GPUs    int
	// Software is NCCL's version and our executor's build as the
	// recording names them.
	Software string
	// Date is YYYY-MM-DD.
	Date string
	Role Role
	// Set is the frozen evaluation set of an eval entry, the fit groups
	// (joined by +) of a fit one.
	Set string
	// Report says how replay accuracy simulates an eval entry: "-" (not
	// reported), else comma-separated KEY=VALUE options (ReportOptions).
	Report string
	Note   string
	// Line is the entry's line in the file.
	Line int
}

// Reported says whether replay accuracy reports the entry.
func (e *Entry) Reported() bool { return e.Role == Eval && e.Report != "-" }

// ReportOptions are the entry's report options as KEY=VALUE pairs, in
// their order ("topo=FILE", "nodes=2", "harness=pytorch@h100", ...); nil
// when it is not reported.
func (e *Entry) ReportOptions() []string {
	if e.Report == "-" || e.Report == "" {
		return nil
	}
	return strings.Split(e.Report, ",")
}

// ReportOption is the value of report option key ("" when absent).
func (e *Entry) ReportOption(key string) string {
	for _, kv := range e.ReportOptions() {
		if k, v, _ := strings.Cut(kv, "="); k == key {
			return v
		}
	}
	return ""
}

// Groups are the names in the entry's set (a fit entry's fit groups).
func (e *Entry) Groups() []string { return strings.Split(e.Set, "+") }

// Manifest is the parsed file.
type Manifest struct {
	// File names the file in errors.
	File    string
	Entries []Entry
	byPath  map[string]int
}

// Load reads the manifest file path.
func Load(path string) (*Manifest, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads a manifest from r, named name in errors ("NAME:LINE: ...").
// Blank lines and lines starting with '#' are comments; the first other
// line is the header (Columns), then one entry per line.
func Parse(r io.Reader, name string) (*Manifest, error) {
	m := &Manifest{File: name, byPath: map[string]int{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	line, header := 0, false
	fail := func(format string, a ...any) error {
		return fmt.Errorf("%s:%d: %s", name, line, fmt.Sprintf(format, a...))
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, "\t")
		if !header {
			if !slices.Equal(fields, Columns) {
				return nil, fail("header %q: want the tab-separated columns %s", text, strings.Join(Columns, ", "))
			}
			header = true
			continue
		}
		if len(fields) != len(Columns) {
			return nil, fail("%d tab-separated fields, want %d (%s)", len(fields), len(Columns), strings.Join(Columns, ", "))
		}
		e, err := parseEntry(fields)
		if err != nil {
			return nil, fail("%v", err)
		}
		e.Line = line
		if prev, ok := m.byPath[e.Path]; ok {
			return nil, fail("%s listed twice (line %d too)", e.Path, m.Entries[prev].Line)
		}
		m.byPath[e.Path] = len(m.Entries)
		m.Entries = append(m.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line, err)
	}
	if !header {
		return nil, fmt.Errorf("%s: no header line (%s)", name, strings.Join(Columns, "\t"))
	}
	return m, nil
}

// parseEntry checks and reads the fields of one line.
func parseEntry(f []string) (Entry, error) {
	for i, v := range f {
		if strings.TrimSpace(v) != v || v == "" {
			return Entry{}, fmt.Errorf("column %s: %q: want a value without surrounding blanks (\"-\" for none)", Columns[i], v)
		}
	}
	e := Entry{Path: f[0], Machine: f[1], Software: f[3], Date: f[4], Role: Role(f[5]), Set: f[6], Report: f[7], Note: f[8]}
	if clean := cleanPath(e.Path); clean != e.Path || filepath.IsAbs(e.Path) {
		return e, fmt.Errorf("path %q: want a clean path relative to the repository's root (%s)", e.Path, clean)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil || n < 1 {
		return e, fmt.Errorf("gpus %q: want a positive count of ranks", f[2])
	}
	e.GPUs = n
	if _, err := time.Parse(time.DateOnly, e.Date); err != nil {
		return e, fmt.Errorf("date %q: want YYYY-MM-DD", e.Date)
	}
	switch e.Role {
	case Fit:
		for _, g := range e.Groups() {
			if !strings.HasPrefix(g, "fit-") {
				return e, fmt.Errorf("set %q of a fit entry: want fit groups (fit-NAME, joined by +)", e.Set)
			}
		}
		if e.Report != "-" {
			return e, fmt.Errorf("report %q of a fit entry: only eval entries are reported (want -)", e.Report)
		}
	case Eval:
		if strings.HasPrefix(e.Set, "fit-") || strings.Contains(e.Set, "+") {
			return e, fmt.Errorf("set %q of an eval entry: want the name of one evaluation set", e.Set)
		}
		for _, kv := range e.ReportOptions() {
			if k, v, ok := strings.Cut(kv, "="); !ok || k == "" || v == "" {
				return e, fmt.Errorf("report %q: want - or KEY=VALUE options joined by commas", e.Report)
			}
		}
	default:
		return e, fmt.Errorf("role %q: want %s or %s", f[5], Fit, Eval)
	}
	return e, nil
}

// cleanPath is p cleaned, with forward slashes.
func cleanPath(p string) string { return filepath.ToSlash(filepath.Clean(filepath.FromSlash(p))) }

// Lookup returns the entry of path (relative to the repository's root;
// cleaned first).
func (m *Manifest) Lookup(path string) (Entry, bool) {
	i, ok := m.byPath[cleanPath(path)]
	if !ok {
		return Entry{}, false
	}
	return m.Entries[i], true
}

// Role returns the role of path, and whether the manifest lists it.
func (m *Manifest) Role(path string) (Role, bool) {
	e, ok := m.Lookup(path)
	return e.Role, ok
}

// Sets returns the names of the sets that entries of role role belong to
// (every role when role is ""), sorted; a fit entry counts in each of its
// groups.
func (m *Manifest) Sets(role Role) []string {
	seen := map[string]bool{}
	for i := range m.Entries {
		e := &m.Entries[i]
		if role != "" && e.Role != role {
			continue
		}
		for _, g := range e.Groups() {
			seen[g] = true
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// Count returns how many entries have role role.
func (m *Manifest) Count(role Role) int {
	n := 0
	for i := range m.Entries {
		if m.Entries[i].Role == role {
			n++
		}
	}
	return n
}

// FindRoot returns the repository root at or above dir: the first
// directory holding the manifest (Path).
func FindRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if st, err := os.Stat(filepath.Join(d, filepath.FromSlash(Path))); err == nil && !st.IsDir() {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no %s at or above %s", Path, dir)
		}
	}
}

// ErrNotListed marks a fitting table under the repository's testdata (or
// the shared baselines beside it) that the manifest does not list.
var ErrNotListed = errors.New("not in the manifest")

// ErrEval marks a fitting table that the manifest lists as eval.
var ErrEval = errors.New("role eval")

// CheckFitting checks the fitting tables of a fit (replay calibrate's
// --table arguments: FILE[,KEY=VALUE...], relative to the working
// directory or absolute) against the manifest of the repository each is
// in (the first directory above it holding Path; for a file outside any,
// such as the shared baselines beside the repository, the repository of
// the working directory): a file under the repository's testdata/ or
// under ../shared/ must be listed with role fit. Files elsewhere (a
// scratch table) are not the repository's recordings and pass, and so
// does everything where no manifest is found.
func CheckFitting(specs []string) error {
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	wdRoot, wdErr := FindRoot(wd)
	manifests := map[string]*Manifest{}
	var errs []error
	for _, spec := range specs {
		file, _, _ := strings.Cut(spec, ",")
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		root, err := FindRoot(filepath.Dir(abs))
		if err != nil {
			if wdErr != nil {
				continue
			}
			root = wdRoot
		}
		m := manifests[root]
		if m == nil {
			if m, err = Load(filepath.Join(root, filepath.FromSlash(Path))); err != nil {
				return err
			}
			manifests[root] = m
		}
		if err := m.CheckFitting(root, []string{spec}); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// CheckFitting checks fitting tables (FILE[,KEY=VALUE...], relative to
// the working directory or absolute) against m, the manifest of the
// repository at root, as the package's CheckFitting does; the error names
// every offending file with its role, wrapping ErrEval or ErrNotListed.
func (m *Manifest) CheckFitting(root string, specs []string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	var errs []error
	for _, spec := range specs {
		file, _, _ := strings.Cut(spec, ",")
		abs, err := filepath.Abs(file)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		if !strings.HasPrefix(rel, "testdata/") && !strings.HasPrefix(rel, "../shared/") {
			continue
		}
		e, ok := m.Lookup(rel)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s: %w %s: list it (role fit, the fit that reads it in its note) before fitting it", file, ErrNotListed, m.File))
		case e.Role != Fit:
			errs = append(errs, fmt.Errorf("%s: %w in %s:%d (set %s): an eval file is never fitted; predict it with --heldout or --evaluate",
				file, ErrEval, m.File, e.Line, e.Set))
		}
	}
	return errors.Join(errs...)
}
