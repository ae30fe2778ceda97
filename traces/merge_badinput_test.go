package traces

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMergeRefusesDuplicateParts: the same part twice (by the same path,
// another path or a link) or two parts holding one rank of a communicator
// used to duplicate rows; now each is an error naming both parts.
func TestMergeRefusesDuplicateParts(t *testing.T) {
	dir := t.TempDir()
	part := func(name string, rank int32, comm uint64) string {
		rows := testCalls(8, uint64(rank))
		for i := range rows {
			rows[i].Rank, rows[i].Comm, rows[i].Call = rank, comm, int64(i)
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, writeCalls(t, rows, WriterOptions{}), 0o644))
		return p
	}
	r0 := part("p.rank0.parquet", 0, 0xabc)
	r1 := part("p.rank1.parquet", 1, 0xabc)
	again := part("again.rank0.parquet", 0, 0xabc)
	otherComm := part("other.rank0.parquet", 0, 0xdef) // rank 0 of another communicator: distinct
	link := filepath.Join(dir, "link.parquet")
	require.NoError(t, os.Symlink(r1, link))
	dotted := dir + string(filepath.Separator) + "." + string(filepath.Separator) + "p.rank1.parquet"

	for _, tc := range []struct {
		parts []string
		want  string
	}{
		{[]string{r0, r1, r0}, "part " + r0 + " is given twice"},
		{[]string{r0, r1, dotted}, "parts " + r1 + " and " + dotted + " are the same file"},
		{[]string{r1, link}, "parts " + r1 + " and " + link + " are the same file"},
		{[]string{r0, r1, again}, "parts " + r0 + " and " + again + " both hold rank 0 of communicator 0xabc: one rank's rows would be merged twice"},
	} {
		var buf bytes.Buffer
		err := MergeCallFiles(&buf, tc.parts)
		require.EqualError(t, err, tc.want, "%v", tc.parts)
	}
	var buf bytes.Buffer
	require.NoError(t, MergeCallFiles(&buf, []string{r0, r1, otherComm}))

	// Event parts likewise.
	ev := func(name string, rank int32) string {
		rows := testEvents(16, 3)
		for i := range rows {
			rows[i].Rank = rank
		}
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, writeEvents(t, rows, WriterOptions{}), 0o644))
		return p
	}
	e0, e1, e0b := ev("e0.events.parquet", 0), ev("e1.events.parquet", 1), ev("e0b.events.parquet", 0)
	require.EqualError(t, MergeEventFiles(&buf, []string{e0, e1, e0}), "part "+e0+" is given twice")
	require.EqualError(t, MergeEventFiles(&buf, []string{e0, e1, e0b}), "parts "+e0+" and "+e0b+" both hold rank 0 of communicator 0x7: one rank's rows would be merged twice")
	buf.Reset()
	require.NoError(t, MergeEventFiles(&buf, []string{e0, e1}))
}
