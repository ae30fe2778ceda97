package traces

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzOpenCallTrace: a call-trace parquet file as replay reads it: an
// error or rows, never a panic or a blow-up; rows it reads it reads again
// the same way (issue 51: every input format is fuzzed).
func FuzzOpenCallTrace(f *testing.F) {
	f.Add(writeCalls(f, testCalls(40, 1), WriterOptions{RowGroupRows: 16}))
	f.Add(writeCalls(f, testCalls(40, 2), WriterOptions{RowGroupRows: 16, Compression: CompressionSnappy}))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := readAllCalls(t, data, Filter{})
		if err != nil {
			return
		}
		again, err := readAllCalls(t, data, Filter{})
		require.NoError(t, err)
		require.Equal(t, rows, again)
	})
}
