// Package tracetest writes small call traces for the tests of the packages
// that read them (exec/sim/hwcmp, cmd/replay).
package tracetest

import (
	"testing"

	"github.com/twinccl/twinccl/traces"
)

// WriteCalls writes rows as a call trace at path, with metadata meta (nil:
// none), and returns path; it fails t when the file does not write.
func WriteCalls(t testing.TB, path string, meta map[string]string, rows ...traces.CallRow) string {
	t.Helper()
	w, err := traces.CreateCallFile(path, traces.WriterOptions{Metadata: meta})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Append(rows...); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// EveryRank is row on ranks 0 to n-1 (Rank and NRanks set).
func EveryRank(n int32, row traces.CallRow) []traces.CallRow {
	rows := make([]traces.CallRow, n)
	for r := range rows {
		rows[r] = row
		rows[r].Rank, rows[r].NRanks = int32(r), n
	}
	return rows
}
