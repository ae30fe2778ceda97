// Package groundtruth locates the reference results NCCL 2.28.9 computed on
// recorded topologies (shared/groundtruth/nccl-2.28.9 beside the checkout)
// for tests. It does not parse the documents: each package's tests read the
// parts they check.
package groundtruth

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Dir returns the shared reference directory: $TWINCCL_SHARED, or ../shared
// beside the repository root. The calling test is skipped when it is absent.
func Dir(tb testing.TB) string {
	tb.Helper()
	if d := os.Getenv("TWINCCL_SHARED"); d != "" {
		return d
	}
	d, err := filepath.Abs(filepath.Join(repoRoot(tb), "..", "shared"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "groundtruth")); err != nil {
		tb.Skipf("shared reference data not found at %s (set TWINCCL_SHARED): %v", d, err)
	}
	return d
}

// repoRoot walks up from the test's working directory to the directory
// holding go.mod.
func repoRoot(tb testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			tb.Fatalf("no go.mod above %s", dir)
		}
	}
}

// Case is one document of shared/groundtruth/nccl-2.28.9.
type Case struct {
	Name   string // file name without extension, e.g. "h200x2-nvswitch.nodes2"
	JSON   string // path of the .json document
	Text   string // path of the .txt log
	Graph  string // path of the .graph.xml dump
	Input  string // the topology XML NCCL read, resolved inside the shared directory
	NNodes int    // number of identical hosts the XML was replicated into
}

// Cases lists every ground-truth case, in file-name order.
func Cases(tb testing.TB) []Case {
	tb.Helper()
	shared := Dir(tb)
	files, err := filepath.Glob(filepath.Join(shared, "groundtruth", "nccl-2.28.9", "*.json"))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no ground-truth documents under %s: %v", shared, err)
	}
	var out []Case
	for _, f := range files {
		c, err := readCase(shared, f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

func readCase(shared, file string) (Case, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Case{}, err
	}
	var head struct {
		Input  string `json:"input"`
		NNodes int    `json:"nNodes"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Case{}, fmt.Errorf("%s: %w", file, err)
	}
	in := head.Input
	switch {
	case strings.HasPrefix(in, "groundtruth/h200x2-nvswitch/"):
		in = filepath.Join(shared, "baselines", "h200x2-nvswitch", filepath.Base(in))
	case strings.HasPrefix(in, "shared/"):
		in = filepath.Join(shared, strings.TrimPrefix(in, "shared/"))
	default:
		return Case{}, fmt.Errorf("%s: unknown input %q", file, in)
	}
	base := strings.TrimSuffix(file, ".json")
	return Case{Name: filepath.Base(base), JSON: file, Text: base + ".txt", Graph: base + ".graph.xml", Input: in, NNodes: head.NNodes}, nil
}

// Section returns the lines of the section of a ground-truth .txt log whose
// "======== " header starts with title, without the header and the blank
// lines that end it. The test fails when there is no such section.
func Section(tb testing.TB, file, title string) []string {
	tb.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "======== ") {
			if in {
				break
			}
			in = strings.HasPrefix(line, "======== "+title)
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		tb.Fatalf("%s: no section %q", file, title)
	}
	return out
}
