package model

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNVLSChunkBytes checks nvlsChunkBytes against calcCollChunking's
// NVLS and NVLS_TREE rules (NCCL 2.28.9 src/enqueue.cc) worked by hand
// for eight heads: NVLS starts at min(Simple step, NCCL_NVLS_CHUNKSIZE)
// and drops to 64/32/16 KiB below 64/8/2 chunks per head; NVLS_TREE
// starts at NCCL_NVLS_CHUNKSIZE (64 KiB from four nodes) and drops to
// 64/32 KiB below 4/1 chunks per head.
func TestNVLSChunkBytes(t *testing.T) {
	const step = 512 << 10
	for _, tc := range []struct {
		a      Algorithm
		nBytes int64
		nNodes int
		step   int
		want   int64
	}{
		{AlgoNVLS, 64 << 20, 1, step, 128 << 10}, // exactly 64 chunks per head
		{AlgoNVLS, 64<<20 - 1, 1, step, 64 << 10},
		{AlgoNVLS, 32 << 20, 1, step, 64 << 10},
		{AlgoNVLS, 4 << 20, 1, step, 64 << 10},
		{AlgoNVLS, 2 << 20, 1, step, 32 << 10},
		{AlgoNVLS, 512 << 10, 1, step, 32 << 10},
		{AlgoNVLS, 100 << 10, 1, step, 16 << 10},
		{AlgoNVLS, 8, 1, step, 16 << 10},
		{AlgoNVLS, 1 << 30, 1, 64 << 10, 64 << 10}, // NCCL_BUFFSIZE=512K: the Simple step caps it
		{AlgoNVLSTree, 64 << 20, 2, step, 128 << 10},
		{AlgoNVLSTree, 4 << 20, 2, step, 128 << 10},
		{AlgoNVLSTree, 2 << 20, 2, step, 64 << 10},
		{AlgoNVLSTree, 100 << 10, 2, step, 32 << 10},
		{AlgoNVLSTree, 64 << 20, 4, step, 64 << 10}, // NCCL_NVLS_TREE_MAX_CHUNKSIZE's default from 4 nodes
	} {
		require.Equal(t, tc.want, nvlsChunkBytes(tc.a, tc.nBytes, 8, tc.nNodes, tc.step), "%s %d B on %d nodes", tc.a, tc.nBytes, tc.nNodes)
	}
}
