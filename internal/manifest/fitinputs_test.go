package manifest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fitInput is a file (or a glob of files, relative to the repository's
// root) that something documented reads as fitting data, and what.
type fitInput struct {
	pattern, by string
	// optional: the glob may match nothing (a fit script's nullglob
	// inputs, such as a start without socket recordings).
	optional bool
}

// fitScripts model testdata/hw/fit-*.sh: what each reads as fitting data
// (its replay calibrate tables, not its --heldout ones) given its
// arguments and environment. A fit script without a model here fails
// TestFitScriptsGoThroughTheGuard.
var fitScripts = map[string]func(args []string, env map[string]string) []string{
	"fit-sockets.sh": func(args []string, env map[string]string) []string {
		var out []string
		for _, s := range fittedStarts(args) {
			for _, sub := range []string{"", "proto/", "heldout/"} {
				out = append(out, "?testdata/hw/"+s+"/"+sub+"net-*.json")
			}
		}
		return out
	},
	"fit-shm-gpus.sh": func(args []string, env map[string]string) []string {
		protos := []string{"simple", "ll"}
		if st, ok := env["STAGES"]; ok && !strings.Contains(st, "L") {
			protos = []string{"simple"}
		}
		var out []string
		for _, s := range fittedStarts(args) {
			for _, p := range protos {
				out = append(out, "shm-start:"+s+":"+p)
			}
		}
		for _, l := range strings.Fields(env["LARGE"]) {
			out = append(out, "testdata/hw/"+l+"/shm-{allgather,allreduce,broadcast,reduce,reducescatter}.json")
		}
		return out
	},
	"fit-ours.sh": func(args []string, env map[string]string) []string {
		if len(args) == 0 {
			return nil
		}
		dir := args[0]
		out := []string{dir + "/proto/p2p-*-{ll,ll128,simple}.json", dir + "/p2p-*.json", dir + "/proto/shm-*.json", dir + "/shm-*.json",
			"?" + dir + "/proto/net-*.json"}
		if l := env["LARGE"]; l != "" {
			out = append(out, l+"/heldout/p2p-*-{ll,ll128}.json")
		}
		if l := env["LATE"]; l != "" {
			out = append(out, l+"/proto/shm-*-{ll,simple}.json", l+"/shm-*.json")
		}
		return out
	},
	"fit-nccl.sh": func(args []string, env map[string]string) []string {
		if len(args) == 0 {
			return nil
		}
		dir := args[0]
		out := []string{dir + "/proto/shm-*-{ll,simple}.json", dir + "/proto/p2p-*-{simple,ll128}.json",
			dir + "/threads/{p2p,shm}-*-nt{64,128,256,default}.json", dir + "/shm-*.json", dir + "/rerun3/ll128-large/p2p-*-ll128.json",
			"testdata/nccl-timings/h100x2/{p2p-ll128,ll128-nch-1,ll128-nch-4}.tsv"}
		if len(args) >= 4 {
			out = append(out, args[3]+"/*.json")
		}
		return out
	},
	"fit-nccl-host.sh": func(args []string, env map[string]string) []string {
		if len(args) == 0 {
			return nil
		}
		dir, net := args[0], args[0]
		if n := env["NETDIR"]; n != "" {
			net = n
		}
		out := []string{dir + "/proto/shm-*.json", net + "/proto/net-*.json"}
		if t := env["TABLES"]; t != "" {
			out = append(out, t+"/{shm-simple,shm}.tsv")
		}
		return out
	},
	"fit-nccl-shm.sh": func(args []string, env map[string]string) []string {
		return ncclSHMInputs
	},
	"fit-nccl-h100.sh": func(args []string, env map[string]string) []string {
		// its stage 3 is fit-nccl-shm.sh
		return append([]string{"testdata/hw/h100x2/rerun{13,16}/proto/p2p-*-{ll,simple}.json", "testdata/hw/h100x2/rerun{13,16}/p2p-*.json"},
			ncclSHMInputs...)
	},
}

// ncclSHMInputs are fit-nccl-shm.sh's fitting tables.
var ncclSHMInputs = []string{"testdata/hw/h100x2/proto/shm-*.json", "testdata/nccl-timings/h100x2/{shm-simple,shm,shm-simple-nch-1,shm-ll-nch-1}.tsv"}

// knownInvocations are fit scripts' runs that the calibrations' source
// notes describe in words, without a command line.
var knownInvocations = []struct {
	script, by string
	args       []string
	env        map[string]string
}{
	// h200.json: "Stages 7 to 10 are testdata/hw/fit-nccl.sh (NCCL's
	// column of testdata/hw/h200x2 ...)", stage 8 "with testdata/hw/h200x4/*.json"
	{"fit-nccl.sh", "h200.json source (stages 7-12)", []string{"testdata/hw/h200x2", "START.json", "OUT.json", "testdata/hw/h200x4", "topo.xml"}, nil},
	// h100.json: "Refitted on 2026-11-26 by testdata/hw/fit-nccl-host.sh
	// (the same two stages: NETDIR=testdata/hw/h100x2/sockets-helpers,
	// TABLES=testdata/nccl-timings/h100x2)"
	{"fit-nccl-host.sh", "h100.json source", []string{"testdata/hw/h100x2", "OUT.json", "h100"},
		map[string]string{"NETDIR": "testdata/hw/h100x2/sockets-helpers", "TABLES": "testdata/nccl-timings/h100x2"}},
}

// goTestFits are the recordings that Go tests fit or measure a
// calibration constant on, by test file. TestGoTestFitsAreKnown fails on a
// test file that calls sim.FitTables or sim.Fit and is not listed.
var goTestFits = map[string][]string{
	// TestCrossValidationOurs fits its xvalCases' fit lists (read from
	// the file as well: xvalFits) of h200FirstDir.
	"exec/sim/hwcmp/xval_test.go": nil,
	// TestFitProtoLinkEff and TestHostLinkEff fit synthetic tables.
	"exec/sim/linkeff_test.go": nil,
	// TestFitRecovers fits a synthetic table.
	"exec/sim/optimize_test.go": nil,
	// TestRunGPUHarness recomputes harness_us.run-gpu (a measured
	// constant of h200.json) from these.
	"exec/sim/hwcmp/harness_test.go": {"../shared/baselines/h200x2-nvswitch/nccl-2.28.9-p2p.tsv",
		"testdata/hw/h200x2/2026-11-22/p2p-{allreduce,allgather,reducescatter,broadcast}.json"},
}

// fittedStarts are the starts a fit-sockets.sh or fit-shm-gpus.sh
// command line fits (after START OUT COL, up to --).
func fittedStarts(args []string) []string {
	if len(args) < 3 {
		return nil
	}
	var out []string
	for _, a := range args[3:] {
		if a == "--" {
			break
		}
		out = append(out, a)
	}
	return out
}

var (
	// a fit script's command line in prose: environment settings, bash,
	// the script, its arguments up to the end of the sentence or clause
	scriptCmd = regexp.MustCompile(`((?:[A-Z_]+=(?:'[^']*'|"[^"]*"|[^\s'"]+)\s+)*)bash testdata/hw/(fit-[a-z0-9-]+\.sh)((?:\s+(?:<\(git show [^)]*\)|[^\s;,()]+))*)`)
	envAssign = regexp.MustCompile(`([A-Z_]+)=('[^']*'|"[^"]*"|[^\s'"]+)`)
	// a replay calibrate command line in prose
	calibrateCmd = regexp.MustCompile(`replay calibrate((?:\s+(?:<\(git show [^)]*\)|\$\(for f in \S+; do echo --table \S+; done\)|'[^']*'|[^\s;()]+))*)`)
	forGlob      = regexp.MustCompile(`^\$\(for f in (\S+); do echo --table`)
	startArg     = regexp.MustCompile(`^h[12]00x[248](/[A-Za-z0-9._-]+)*$`)
)

// scriptRuns finds the fit script command lines in text and the files
// each reads as fitting data.
func scriptRuns(text, by string) (inputs []fitInput, unknown []string) {
	for _, m := range scriptCmd.FindAllStringSubmatch(text, -1) {
		script := m[2]
		model, ok := fitScripts[script]
		if !ok {
			unknown = append(unknown, script)
			continue
		}
		env := map[string]string{}
		for _, kv := range envAssign.FindAllStringSubmatch(m[1], -1) {
			env[kv[1]] = strings.Trim(kv[2], `'"`)
		}
		var args []string
		for _, a := range strings.Fields(strings.ReplaceAll(m[3], "<(git show ", "<(git-show:")) {
			args = append(args, strings.TrimRight(a, "."))
		}
		if len(args) == 0 || args[0] == "DIR" || args[0] == "START.json" && script != "fit-nccl-h100.sh" && script != "fit-nccl-shm.sh" {
			continue // the usage line, not a run
		}
		if (script == "fit-sockets.sh" || script == "fit-shm-gpus.sh") && len(args) > 3 {
			// the starts end where the prose goes on
			n := 3
			for n < len(args) && (args[n] == "--" || startArg.MatchString(args[n])) {
				n++
			}
			args = args[:n]
		}
		for _, p := range model(args, env) {
			inputs = append(inputs, fitInput{pattern: strings.TrimPrefix(p, "?"), by: by + ": " + script, optional: strings.HasPrefix(p, "?")})
		}
	}
	return inputs, unknown
}

// calibrateRuns finds the replay calibrate command lines in text (not
// --evaluate) and their fitting tables: positional files and --table
// arguments, with the globs of "$(for f in GLOB; do echo --table ...)".
func calibrateRuns(text, by string) []fitInput {
	var out []fitInput
	for _, m := range calibrateCmd.FindAllStringSubmatch(text, -1) {
		args := strings.Fields(m[1])
		if slices.Contains(args, "--evaluate") {
			continue
		}
		// rejoin the $(for ...) expressions the fields split
		joined := strings.Join(args, " ")
		var toks []string
		for len(joined) > 0 {
			if strings.HasPrefix(joined, "$(for f in ") {
				end := strings.Index(joined, "done)")
				if end < 0 {
					break
				}
				toks = append(toks, joined[:end+len("done)")])
				joined = strings.TrimSpace(joined[end+len("done)"):])
				continue
			}
			tok, rest, _ := strings.Cut(joined, " ")
			toks = append(toks, tok)
			joined = strings.TrimSpace(rest)
		}
		valued := map[string]bool{"--topo": true, "--start": true, "--out": true, "--params": true, "--set": true, "--column": true, "--env": true,
			"--loss": true, "--max-evals": true, "--name": true, "--nodes": true, "--heldout": true, "--p2p-read": true, "--starts": true, "--loop": true}
		for i := 0; i < len(toks); i++ {
			t := toks[i]
			switch {
			case valued[t]:
				i++
			case t == "--table" && i+1 < len(toks):
				i++
				out = append(out, fitInput{pattern: tableFile(toks[i]), by: by + ": replay calibrate --table"})
			case forGlob.MatchString(t):
				out = append(out, fitInput{pattern: forGlob.FindStringSubmatch(t)[1], by: by + ": replay calibrate --table"})
			case strings.HasPrefix(t, "testdata/") || strings.HasPrefix(t, "../shared/"):
				out = append(out, fitInput{pattern: tableFile(t), by: by + ": replay calibrate"})
			}
		}
	}
	return out
}

// tableFile is the file of a TABLE argument (FILE[,KEY=VALUE...]).
func tableFile(spec string) string {
	f, _, _ := strings.Cut(spec, ",")
	return strings.TrimRight(f, ".")
}

// documentedFits collects every documented fit's inputs in the
// repository at root: docs/eval-tables.txt's --table lines, the fit
// scripts' runs and the replay calibrate runs that the calibrations'
// source notes and the scripts' headers record, the known runs described
// in words, and the Go tests that fit.
func documentedFits(t *testing.T, root string) []fitInput {
	t.Helper()
	read := func(rel string) string {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		require.NoError(t, err)
		return string(data)
	}
	var out []fitInput
	for i, line := range strings.Split(read("docs/eval-tables.txt"), "\n") {
		if spec, ok := strings.CutPrefix(strings.TrimSpace(line), "--table "); ok {
			out = append(out, fitInput{pattern: tableFile(spec), by: fmt.Sprintf("docs/eval-tables.txt:%d", i+1)})
		}
	}
	var texts [][2]string // (text, where)
	calibs, err := filepath.Glob(filepath.Join(root, "exec", "sim", "calib", "*.json"))
	require.NoError(t, err)
	old, err := filepath.Glob(filepath.Join(root, "testdata", "hw", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, calibs)
	for _, f := range append(calibs, old...) {
		var c struct {
			Source string `json:"source"`
		}
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(data, &c), f)
		rel, _ := filepath.Rel(root, f)
		texts = append(texts, [2]string{c.Source, filepath.ToSlash(rel) + " source"})
	}
	scripts, err := filepath.Glob(filepath.Join(root, "testdata", "hw", "fit-*.sh"))
	require.NoError(t, err)
	for _, f := range scripts {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		var comments []string
		for _, l := range strings.Split(string(data), "\n") {
			if c, ok := strings.CutPrefix(l, "#"); ok {
				// a command continued on the next comment line
				comments = append(comments, strings.TrimSuffix(strings.TrimSpace(c), "\\"))
			}
		}
		texts = append(texts, [2]string{strings.Join(comments, " "), "testdata/hw/" + filepath.Base(f) + " header"})
	}
	for _, tx := range texts {
		in, unknown := scriptRuns(tx[0], tx[1])
		require.Empty(t, unknown, "%s runs fit scripts without a model in fitScripts", tx[1])
		out = append(out, in...)
		out = append(out, calibrateRuns(tx[0], tx[1])...)
	}
	for _, k := range knownInvocations {
		for _, p := range fitScripts[k.script](k.args, k.env) {
			out = append(out, fitInput{pattern: strings.TrimPrefix(p, "?"), by: k.by + ": " + k.script, optional: strings.HasPrefix(p, "?")})
		}
	}
	files := make([]string, 0, len(goTestFits))
	for f := range goTestFits {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		for _, p := range goTestFits[f] {
			out = append(out, fitInput{pattern: p, by: f})
		}
	}
	for _, name := range xvalFits(t, read("exec/sim/hwcmp/xval_test.go")) {
		out = append(out, fitInput{pattern: "testdata/hw/h200x2/2026-11-22/" + name + ".json", by: "exec/sim/hwcmp/xval_test.go"})
	}
	return out
}

// xvalFits are the recordings that xval_test.go's cases fit (their fit:
// lists, of h200FirstDir).
func xvalFits(t *testing.T, src string) []string {
	t.Helper()
	re := regexp.MustCompile(`fit:\s*\[\]string\{([^}]*)\}`)
	var out []string
	for _, m := range re.FindAllStringSubmatch(src, -1) {
		for _, q := range strings.Split(m[1], ",") {
			if q = strings.Trim(strings.TrimSpace(q), `"`); q != "" {
				out = append(out, q)
			}
		}
	}
	require.NotEmpty(t, out, "xval_test.go: no fit lists found")
	return out
}

// expandBraces expands {a,b} alternatives (innermost first).
func expandBraces(p string) []string {
	i := strings.Index(p, "{")
	if i < 0 {
		return []string{p}
	}
	j := strings.Index(p[i:], "}")
	if j < 0 {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:i+j], ",") {
		out = append(out, expandBraces(p[:i]+alt+p[i+j+1:])...)
	}
	return out
}

// resolve turns a fit input into files relative to root: a literal path
// as it is (checked against the manifest even where it is absent, e.g.
// the shared baselines), a glob as what it matches; "shm-start:S:P" is a
// start of fit-shm-gpus.sh (its heldout/shm-*-P.json, or its own
// shm-*-P.json where it has no heldout/).
func resolve(root, pattern string) ([]string, error) {
	if rest, ok := strings.CutPrefix(pattern, "shm-start:"); ok {
		s, p, _ := strings.Cut(rest, ":")
		dir := "testdata/hw/" + s + "/heldout"
		if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir))); err != nil || !st.IsDir() {
			dir = "testdata/hw/" + s
		}
		pattern = dir + "/shm-*-" + p + ".json"
	}
	var out []string
	for _, p := range expandBraces(pattern) {
		if !strings.ContainsAny(p, "*?[") {
			out = append(out, p)
			continue
		}
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rel, _ := filepath.Rel(root, f)
			out = append(out, filepath.ToSlash(rel))
		}
	}
	return out, nil
}

// checkFits checks every documented fit input against m: each file it
// reads must be listed with role fit, and each glob must match something.
// It returns one line per problem.
func checkFits(root string, m *Manifest, inputs []fitInput) []string {
	var bad []string
	seen := map[string]bool{}
	for _, in := range inputs {
		files, err := resolve(root, in.pattern)
		if err != nil {
			bad = append(bad, fmt.Sprintf("%s (%s): %v", in.pattern, in.by, err))
			continue
		}
		if len(files) == 0 && !in.optional {
			bad = append(bad, fmt.Sprintf("%s (%s): matches no file", in.pattern, in.by))
		}
		for _, f := range files {
			key := f + "\x00" + in.by
			if seen[key] {
				continue
			}
			seen[key] = true
			switch e, ok := m.Lookup(f); {
			case !ok:
				bad = append(bad, fmt.Sprintf("%s (fitted by %s): not in %s", f, in.by, m.File))
			case e.Role != Fit:
				bad = append(bad, fmt.Sprintf("%s (fitted by %s): role %s in %s:%d", f, in.by, e.Role, m.File, e.Line))
			}
		}
	}
	slices.Sort(bad)
	return slices.Compact(bad)
}

// loadRepo finds the repository root and loads its manifest.
func loadRepo(t *testing.T) (string, *Manifest) {
	t.Helper()
	root, err := FindRoot(".")
	require.NoError(t, err)
	m, err := Load(filepath.Join(root, filepath.FromSlash(Path)))
	require.NoError(t, err)
	return root, m
}

// TestNoEvalFileIsFitted: every file that a documented fit reads as
// fitting data (docs/eval-tables.txt's --table lines, the fit scripts' runs
// and the replay calibrate runs in the calibrations' source notes and the
// scripts' headers, the Go tests that fit or measure a constant) is a fit
// file in the manifest.
func TestNoEvalFileIsFitted(t *testing.T) {
	root, m := loadRepo(t)
	inputs := documentedFits(t, root)
	require.Greater(t, len(inputs), 100, "too few documented fit inputs found: the parsers lost the calibrations' notes")
	bad := checkFits(root, m, inputs)
	assert.Empty(t, bad, "documented fits read files that %s does not list as fit", Path)
	// Each kind of source contributed.
	var bys []string
	for _, in := range inputs {
		bys = append(bys, in.by)
	}
	for _, want := range []string{"docs/eval-tables.txt", ": fit-sockets.sh", ": fit-shm-gpus.sh", ": fit-ours.sh", ": fit-nccl.sh",
		": fit-nccl-host.sh", ": fit-nccl-h100.sh", ": replay calibrate --table", "exec/sim/hwcmp/xval_test.go", "exec/sim/hwcmp/harness_test.go"} {
		assert.True(t, slices.ContainsFunc(bys, func(b string) bool { return strings.Contains(b, want) }), "no fit input found from %q", want)
	}
}

// TestNoEvalFileIsFittedCanFail: the same check on a manifest where one
// file of each kind of documented fit is eval (an eval-tables --table
// line, a fit-sockets.sh start named in a source note, a replay
// calibrate run's --table glob, a Go test's fit) names each of them, and
// a file missing from the manifest is named too.
func TestNoEvalFileIsFittedCanFail(t *testing.T) {
	root, m := loadRepo(t)
	inputs := documentedFits(t, root)
	flip := []string{
		"testdata/nccl-timings/p2p-ll.tsv",                            // eval-tables --table
		"testdata/hw/h100x2/rerun18/heldout/net-allgather-ll.json",    // fit-sockets.sh start
		"testdata/hw/h200x4/2026-11-26/heldout/p2p-allreduce-ll.json", // replay calibrate $(for f in ...)
		"testdata/hw/h200x2/2026-11-22/p2p-broadcast.json",            // xval_test.go
	}
	drop := "testdata/hw/h100x2/rerun16/proto/p2p-allreduce-ll.json" // fit-ours.sh DIR
	fake := &Manifest{File: "fake.tsv", byPath: map[string]int{}}
	for _, e := range m.Entries {
		if e.Path == drop {
			continue
		}
		if slices.Contains(flip, e.Path) {
			require.Equal(t, Fit, e.Role, e.Path)
			e.Role, e.Set, e.Report = Eval, "eval-2026-12-07", "-"
		}
		fake.byPath[e.Path] = len(fake.Entries)
		fake.Entries = append(fake.Entries, e)
	}
	bad := strings.Join(checkFits(root, fake, inputs), "\n")
	for _, f := range flip {
		assert.Contains(t, bad, f+" (fitted by")
	}
	assert.Contains(t, bad, "role eval in fake.tsv")
	assert.Contains(t, bad, drop+" (fitted by")
	assert.Contains(t, bad, "not in fake.tsv")
}

// TestFitScriptsGoThroughTheGuard: every fit script under testdata/hw fits
// through replay calibrate (whose guard, CheckFitting, refuses eval files
// as fitting tables), never with --evaluate alone, and has a model of its
// inputs here.
func TestFitScriptsGoThroughTheGuard(t *testing.T) {
	root, _ := loadRepo(t)
	scripts, err := filepath.Glob(filepath.Join(root, "testdata", "hw", "fit-*.sh"))
	require.NoError(t, err)
	require.NotEmpty(t, scripts)
	calls := regexp.MustCompile(`(\$replay|\$\{REPLAY:-bin/replay\}|bash testdata/hw/fit-[a-z0-9-]+\.sh)`)
	for _, f := range scripts {
		name := filepath.Base(f)
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		src := string(data)
		assert.Contains(t, fitScripts, name, "%s has no model of its fitting inputs in fitScripts", name)
		assert.True(t, calls.MatchString(src), "%s runs neither replay calibrate nor another fit script", name)
		for _, l := range strings.Split(src, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "#") {
				continue
			}
			assert.NotContains(t, l, "--evaluate", "%s: a fit script fits", name)
			if strings.Contains(l, "replay") && strings.Contains(l, "calibrate") {
				assert.Regexp(t, `"?(\$replay|\$\{REPLAY:-bin/replay\})"? calibrate`, l, "%s: replay calibrate run another way", name)
			}
		}
	}
}

// TestGoTestFitsAreKnown: every Go test file that fits (calls
// sim.FitTables or sim.Fit) is in goTestFits, so that the files it fits
// are checked.
func TestGoTestFitsAreKnown(t *testing.T) {
	root, _ := loadRepo(t)
	call := regexp.MustCompile(`\b(sim\.)?(FitTables|Fit)\(`)
	var found []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, l := range strings.Split(string(data), "\n") {
			l = strings.TrimSpace(l)
			if strings.HasPrefix(l, "//") || strings.HasPrefix(l, "func ") {
				continue
			}
			if call.MatchString(l) {
				rel, _ := filepath.Rel(root, p)
				found = append(found, filepath.ToSlash(rel))
				break
			}
		}
		return nil
	}))
	require.NotEmpty(t, found)
	for _, f := range found {
		if f == "internal/manifest/fitinputs_test.go" {
			continue
		}
		_, ok := goTestFits[f]
		assert.True(t, ok, "%s fits (sim.FitTables or sim.Fit): list the files it fits in goTestFits", f)
	}
}
