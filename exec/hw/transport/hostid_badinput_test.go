package transport

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHostIDFromEnvRefusesBadSplit: a TWINCCL_HOSTID=split:K whose K is
// not a positive integer used to be taken silently as one literal host
// id; HostIDFromEnv names the variable and value.
func TestHostIDFromEnvRefusesBadSplit(t *testing.T) {
	for _, v := range []string{"split:abc", "split:0", "split:-2", "split:", "split:2x", "split:1.5"} {
		t.Setenv("TWINCCL_HOSTID", v)
		_, err := HostIDFromEnv(0)
		require.EqualError(t, err, `TWINCCL_HOSTID="`+v+`": split:K wants K, the ranks per host, as a positive integer`)
	}
	h, _ := os.Hostname()
	for _, tc := range []struct {
		v    string
		rank int
		want string
	}{
		{"", 3, h}, {"node7", 3, "node7"}, {"split:2", 3, h + "/1"}, {"split:1", 3, h + "/3"},
	} {
		t.Setenv("TWINCCL_HOSTID", tc.v)
		got, err := HostIDFromEnv(tc.rank)
		require.NoError(t, err, tc.v)
		require.Equal(t, tc.want, got, tc.v)
		require.Equal(t, tc.want, HostID(tc.rank), tc.v)
	}
}
