package ncclapi

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// TestBootstrapFromUniqueID runs the path of ncclCommInitRank up to the
// device, without a GPU: an id from GetUniqueID, through its 128 bytes,
// joined by three ranks of which two come before the root exists (they
// retry), the root started by the first rank of the id's process; the
// ranks then exchange data.
func TestBootstrapFromUniqueID(t *testing.T) {
	t.Setenv("TWINCCL_SOCKET_IFNAME", "lo")
	made, err := GetUniqueID()
	require.NoError(t, err)
	b, err := made.Encode()
	require.NoError(t, err)
	id, err := DecodeUniqueID(b[:])
	require.NoError(t, err)
	host, err := listenHost(id)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", host)

	const n = 3
	comms := make([]*bootstrap.Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := n - 1; r >= 0; r-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r == 0 {
				time.Sleep(200 * time.Millisecond) // the others dial a root that does not listen yet
			}
			if errs[r] = ensureRoot(id, r, n, 10*time.Second, slog.Default()); errs[r] != nil {
				return
			}
			comms[r], errs[r] = bootstrap.Init(bootstrap.Config{Rank: r, NRanks: n, ID: id.bootID(), Host: host, Timeout: 10 * time.Second})
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	defer func() {
		for _, c := range comms {
			c.Close()
		}
	}()
	var got [n][][]byte
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[r], errs[r] = comms[r].AllGather([]byte{byte('a' + r)})
		}()
	}
	wg.Wait()
	for r := range n {
		require.NoError(t, errs[r])
		assert.Equal(t, [][]byte{[]byte("a"), []byte("b"), []byte("c")}, got[r], "rank %d", r)
	}
}
