package sim

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTableUnknownKeys: a key of a table argument or of a table's
// "settings:" header that nothing reads is an error naming it and listing
// the known keys (it used to land in the environment and be ignored).
func TestTableUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		text  string
		words []string
		want  []string
	}{
		{specTable, []string{"harnes=pytorch"}, []string{`unknown key "harnes" in "harnes=pytorch"; known keys: colls, harness, maxbytes, minbytes, timing, topo (col= only for hardware recordings), and the NCCL_* settings NCCL_ALGO, NCCL_BUFFSIZE,`}},
		{specTable, []string{"NCCL_PORTO=LL"}, []string{`unknown key "NCCL_PORTO"`, "NCCL_PROTO", "NCCL_MAX_NCHANNELS", "NCCL_P2P_LEVEL"}},
		{specTable, []string{"col=ours"}, []string{`unknown key "col"`, "col= only for hardware recordings"}},
		{"# settings: NCCL_PROTO=LL NCCL_MAX_NCHANELS=4\nall_reduce 8 5.0\n", nil, []string{`t.tsv: settings: unknown setting "NCCL_MAX_NCHANELS"; known: NCCL_ALGO, NCCL_BUFFSIZE`}},
		{"# settings: colls=all_reduce\nall_reduce 8 5.0\n", nil, []string{`t.tsv: settings: unknown setting "colls"`}},
	} {
		tb, err := ReadTable(strings.NewReader(tc.text), "t.tsv")
		if err == nil {
			err = tb.ApplySpec(tc.words)
		}
		require.Error(t, err, "%v", tc.words)
		for _, w := range tc.want {
			require.ErrorContains(t, err, w, "%v", tc.words)
		}
	}
	// Every setting the recordings in testdata carry, and what the
	// readers take, is accepted.
	tb, err := ReadTable(strings.NewReader("# settings: NCCL_NET=Socket NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo NCCL_NVLS_ENABLE=0\nall_reduce 8 5.0\n"), "t.tsv")
	require.NoError(t, err)
	require.NoError(t, tb.ApplySpec([]string{"NCCL_PROTO=Simple", "NCCL_BUFFSIZE=1048576", "NCCL_IB_DISABLE=1", "NCCL_TOPO_DUMP_FILE=x.xml", "harness=pytorch"}))
	require.Equal(t, "NCCL_BUFFSIZE=1048576 NCCL_IB_DISABLE=1 NCCL_NET=Socket NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1 NCCL_PROTO=Simple NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo", tb.Settings())
	names := KnownEnvNames()
	require.IsIncreasing(t, names)
	for _, n := range names {
		require.True(t, strings.HasPrefix(n, "NCCL_"), n)
	}
}
