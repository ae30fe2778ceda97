// Package guide keeps the user guide's reference sections (docs/guide/*.md)
// equal to the commands' own help text: a page holds the help between two
// marker lines, and a command's test checks it, or rewrites it with -update.
package guide

import (
	"bytes"
	"fmt"
	"os"
	"strings"
)

// The markers around a page's generated help.
const (
	Begin = "<!-- help:begin: generated from the command's -h; go test ./cmd/... -run TestGuide -update rewrites it -->"
	End   = "<!-- help:end -->"
)

// Block is the generated section for help: the markers around a fenced
// copy of it.
func Block(help string) string {
	return Begin + "\n```\n" + strings.TrimRight(help, "\n") + "\n```\n" + End
}

// Splice returns page with the section between its markers replaced by
// help's block; an error names a page without exactly one pair of markers.
func Splice(name string, page []byte, help string) ([]byte, error) {
	b := bytes.Index(page, []byte(Begin))
	e := bytes.Index(page, []byte(End))
	if b < 0 || e < b || bytes.Count(page, []byte(Begin)) != 1 || bytes.Count(page, []byte(End)) != 1 {
		return nil, fmt.Errorf("%s: want one %q line and one %q line after it", name, Begin, End)
	}
	var out bytes.Buffer
	out.Write(page[:b])
	out.WriteString(Block(help))
	out.Write(page[e+len(End):])
	return out.Bytes(), nil
}

// Check compares the page at path with help, or rewrites the page when
// update is set; it returns the page's expected bytes and whether the page
// was current.
func Check(path, help string, update bool) (bool, error) {
	page, err := os.ReadFile(path)
	if err != nil {
		return false, err
	}
	want, err := Splice(path, page, help)
	if err != nil {
		return false, err
	}
	if bytes.Equal(page, want) {
		return true, nil
	}
	if update {
		return true, os.WriteFile(path, want, 0o644)
	}
	return false, nil
}
