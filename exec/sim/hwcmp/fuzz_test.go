package hwcmp

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzReadJSON: a "run gpu --json" file as replay compare reads it: an
// error or calls that each move data (empty rows are left out) within the
// job's ranks (issue 51: every input format is fuzzed).
func FuzzReadJSON(f *testing.F) {
	f.Add([]byte(`{"nranks": 4, "rows": [
		{"op":"AllGather","bytes":8,"count":0,"time_us":0.1},
		{"op":"AllGather","bytes":128,"count":8,"time_us":9}]}`))
	f.Add([]byte(`{"nranks": 2, "hosts": 2, "net_probe": [{"latency_us": 5, "both_ways_GBps": 10}], "rows": [
		{"op":"AllReduce","bytes":1024,"count":256,"type":"float","redop":"sum","time_us":12,"reps_us":[11,12,13]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		in, err := ReadJSON(bytes.NewReader(data), "fuzz.json")
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, in.NRanks, 1)
		for _, c := range in.Calls {
			require.Positive(t, c.Count, "call %d", c.Index)
			require.Less(t, c.Root, max(in.NRanks, 1), "call %d", c.Index)
		}
	})
}
