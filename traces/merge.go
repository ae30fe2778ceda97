package traces

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// MergeCallFiles writes the rows of the call traces at paths (in that
// order, e.g. the parts that the ranks of one job wrote) to w as one call
// trace. Every part must be a call trace; no row is dropped or changed.
func MergeCallFiles(w io.Writer, paths []string) error {
	return mergeFiles(w, paths, NewCallWriter, OpenCallFile)
}

// MergeEventFiles is MergeCallFiles for event traces.
func MergeEventFiles(w io.Writer, paths []string) error {
	return mergeFiles(w, paths, NewEventWriter, OpenEventFile)
}

// rowWriter and rowReader are what the call and event writers and
// readers have in common.
type rowWriter[R any] interface {
	Append(rows ...R) error
	Close() error
}

type rowReader[R any] interface {
	Scan(filter Filter, fn func([]R) error) error
	Info() FileInfo
	Close() error
}

// mergeFiles appends every row of the files at paths, opened with open,
// to one trace written to w by a writer from create, with the first
// file's own metadata (keys outside metaReserved); no files make an
// empty trace.
func mergeFiles[R any, W rowWriter[R], D rowReader[R]](w io.Writer, paths []string,
	create func(io.Writer, WriterOptions) (W, error), open func(string) (D, error)) error {
	if len(paths) == 0 {
		tw, err := create(w, WriterOptions{})
		if err != nil {
			return err
		}
		return tw.Close()
	}
	rd, err := open(paths[0])
	if err != nil {
		return err
	}
	meta := map[string]string{}
	for k, v := range rd.Info().Metadata {
		if !strings.HasPrefix(k, metaReserved) {
			meta[k] = v
		}
	}
	tw, err := create(w, WriterOptions{Metadata: meta})
	if err != nil {
		rd.Close()
		return err
	}
	for i, p := range paths {
		if i > 0 {
			if rd, err = open(p); err != nil {
				return errors.Join(err, tw.Close())
			}
		}
		err = rd.Scan(Filter{}, func(rows []R) error { return tw.Append(rows...) })
		rd.Close()
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", p, err), tw.Close())
		}
	}
	return tw.Close()
}
