package traces

import (
	"errors"
	"fmt"
	"io"
)

// MergeCallFiles writes the rows of the call traces at paths (in that
// order, e.g. the parts that the ranks of one job wrote) to w as one call
// trace. Every part must be a call trace; no row is dropped or changed.
func MergeCallFiles(w io.Writer, paths []string) error {
	cw, err := NewCallWriter(w, WriterOptions{})
	if err != nil {
		return err
	}
	for _, p := range paths {
		rd, err := OpenCallFile(p)
		if err != nil {
			return errors.Join(err, cw.Close())
		}
		err = rd.Scan(Filter{}, func(rows []CallRow) error { return cw.Append(rows...) })
		rd.Close()
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", p, err), cw.Close())
		}
	}
	return cw.Close()
}

// MergeEventFiles is MergeCallFiles for event traces.
func MergeEventFiles(w io.Writer, paths []string) error {
	ew, err := NewEventWriter(w, WriterOptions{})
	if err != nil {
		return err
	}
	for _, p := range paths {
		rd, err := OpenEventFile(p)
		if err != nil {
			return errors.Join(err, ew.Close())
		}
		err = rd.Scan(Filter{}, func(rows []EventRow) error { return ew.Append(rows...) })
		rd.Close()
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", p, err), ew.Close())
		}
	}
	return ew.Close()
}
