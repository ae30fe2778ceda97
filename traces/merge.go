package traces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// MergeCallFiles writes the rows of the call traces at paths (in that
// order, e.g. the parts that the ranks of one job wrote) to w as one call
// trace. Every part must be a call trace; no row is dropped or changed.
// Parts must be distinct: the same file given twice, or two parts that
// hold rows of the same rank of a communicator, is an error naming both
// (their rows would be merged twice).
func MergeCallFiles(w io.Writer, paths []string) error {
	return MergeCallFilesMeta(w, paths, nil)
}

// MergeCallFilesMeta is MergeCallFiles with metadata added to (or
// replacing keys of) the first file's: what only the parts together say,
// such as the job's communicators (MetaComms).
func MergeCallFilesMeta(w io.Writer, paths []string, extra map[string]string) error {
	return mergeFiles(w, paths, NewCallWriter, OpenCallFile, func(r *CallRow) rankKey { return rankKey{r.Comm, r.Rank} }, extra)
}

// MergeEventFiles is MergeCallFiles for event traces.
func MergeEventFiles(w io.Writer, paths []string) error {
	return mergeFiles(w, paths, NewEventWriter, OpenEventFile, func(r *EventRow) rankKey { return rankKey{r.Comm, r.Rank} }, nil)
}

// rankKey is a rank of a communicator.
type rankKey struct {
	comm uint64
	rank int32
}

// CheckDistinctFiles refuses a list of paths that names one file twice
// (os.SameFile: also through another path or a link).
func CheckDistinctFiles(paths []string) error {
	infos := make([]os.FileInfo, len(paths))
	for i, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		for j := range i {
			if os.SameFile(infos[j], fi) {
				if paths[j] == p {
					return fmt.Errorf("part %s is given twice", p)
				}
				return fmt.Errorf("parts %s and %s are the same file", paths[j], p)
			}
		}
		infos[i] = fi
	}
	return nil
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
// empty trace. A file given twice, or a rank (key) found in two files, is
// an error.
func mergeFiles[R any, W rowWriter[R], D rowReader[R]](w io.Writer, paths []string,
	create func(io.Writer, WriterOptions) (W, error), open func(string) (D, error), key func(*R) rankKey, extra map[string]string) error {
	if err := CheckDistinctFiles(paths); err != nil {
		return err
	}
	owner := map[rankKey]int{} // the part that holds each rank
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
	for k, v := range extra {
		meta[k] = v
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
		var dup error
		err = rd.Scan(Filter{}, func(rows []R) error {
			for j := range rows {
				k := key(&rows[j])
				o, seen := owner[k]
				if !seen {
					owner[k] = i
				} else if o != i {
					dup = fmt.Errorf("parts %s and %s both hold rank %d of communicator %#x: one rank's rows would be merged twice", paths[o], p, k.rank, k.comm)
					return dup
				}
			}
			return tw.Append(rows...)
		})
		rd.Close()
		if err != nil {
			if dup != nil {
				return errors.Join(dup, tw.Close())
			}
			return errors.Join(fmt.Errorf("%s: %w", p, err), tw.Close())
		}
	}
	return tw.Close()
}
