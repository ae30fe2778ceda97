// Package atomicfile writes output files so that a reader, or a failure
// halfway, never leaves a partial file behind.
package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write produces the contents with fill, then writes them to path through a
// temporary file in the same directory, synced and renamed over path once
// complete: readers see the old file or the whole new one, never a part.
// When fill fails nothing is created.
func Write(path string, fill func(io.Writer) error) (err error) {
	var buf bytes.Buffer
	if err := fill(&buf); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("%s: create temporary file: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("%s: write %s: %w", path, tmp, err)
	}
	if err = f.Chmod(0o644); err != nil {
		return fmt.Errorf("%s: chmod %s: %w", path, tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("%s: sync %s: %w", path, tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%s: close %s: %w", path, tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%s: rename %s: %w", path, tmp, err)
	}
	return nil
}
