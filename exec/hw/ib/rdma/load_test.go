//go:build cgo

package rdma

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// TestLoadNotFound: without the library, New's error is one line that
// says libibverbs was not found and wraps verbs.ErrNoDevice.
func TestLoadNotFound(t *testing.T) {
	loadMu.Lock()
	already := loaded
	loadMu.Unlock()
	if already {
		t.Skip("libibverbs is loaded already")
	}
	saved := libNames
	libNames = []string{"libtwinccl-absent.so.1", "libtwinccl-absent.so"}
	defer func() { libNames = saved }()
	err := load()
	require.Error(t, err)
	assert.True(t, errors.Is(err, verbs.ErrNoDevice))
	assert.Equal(t, "rdma: libibverbs not found (no libtwinccl-absent.so.1 or libtwinccl-absent.so on the library path)", err.Error())
}

func TestDlNotFound(t *testing.T) {
	assert.True(t, dlNotFound("libibverbs.so.1: cannot open shared object file: No such file or directory", "libibverbs.so.1"))
	// The library is there but a dependency is not.
	assert.False(t, dlNotFound("libnl-route-3.so.200: cannot open shared object file: No such file or directory", "libibverbs.so.1"))
	assert.False(t, dlNotFound("/usr/lib/libibverbs.so.1: wrong ELF class: ELFCLASS32", "libibverbs.so.1"))
}
