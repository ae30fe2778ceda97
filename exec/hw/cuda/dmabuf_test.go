package cuda

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMemGetDmaBufFd exports a 2 MiB allocation as dma-buf where the
// device says it can (a descriptor that fstat accepts), and otherwise
// gets an error wrapping ErrNotSupported, never another failure; a range
// beyond the allocation is refused.
func TestMemGetDmaBufFd(t *testing.T) {
	c := ctx0(t)
	const n = 2 << 20
	p, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(p)
	fd, err := c.MemGetDmaBufFd(p, n)
	if err != nil {
		require.ErrorIs(t, err, ErrNotSupported, "dma-buf export failed otherwise than 'not supported'")
		require.False(t, c.DmaBufSupported() && !errors.Is(err, ErrNotSupported))
		t.Skipf("dma-buf not supported here: %v", err)
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	require.NoError(t, syscall.Fstat(fd, &st), "the exported descriptor")
	require.True(t, c.DmaBufSupported(), "exported although the device attribute says no")
	_, err = c.MemGetDmaBufFd(p, 2*n)
	require.Error(t, err, "a range beyond the allocation")
}
