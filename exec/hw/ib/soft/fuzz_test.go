package soft

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
)

// FuzzSoftRequest: a request header as a remote requester sends it. It
// decodes into fields that encode back to it (padding aside), and the
// memory the responder would touch for it lies inside the region its key
// names, or the request is refused.
func FuzzSoftRequest(f *testing.F) {
	p, err := New(Options{})
	require.NoError(f, err)
	f.Cleanup(func() { p.Close() })
	ctx, _ := p.Open("soft0")
	pdi, _ := ctx.AllocPD()
	pd := pdi.(*PD)
	buf := make([]byte, 4096)
	mri, err := pd.RegMR(buf, all)
	require.NoError(f, err)
	mr := mri.(*MR)
	seed := func(w wireReq) []byte { h := encodeReq(w); return h[:] }
	f.Add(seed(wireReq{op: verbs.OpWrite, rkey: mr.RKey(), raddr: mr.Addr() + 8, n: 64}))
	f.Add(seed(wireReq{op: verbs.OpRead, rkey: mr.RKey(), raddr: mr.Addr() + 4090, n: 64}))
	f.Add(seed(wireReq{op: verbs.OpAtomicFetchAdd, rkey: mr.RKey(), raddr: ^uint64(0) - 3, n: 8}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != reqBytes {
			return
		}
		w := decodeReq(b)
		back := encodeReq(w)
		want := append([]byte(nil), b...)
		clear(want[1:4]) // padding
		require.Equal(t, want, back[:])
		// The fuzzer finds the key through the seeds; the address near
		// the region through offsets from them.
		mem, ok := pd.dev.lookup(pd, w.rkey, w.raddr, w.n, verbs.AccessRemoteWrite)
		if !ok {
			return
		}
		require.Equal(t, int(w.n), len(mem.b))
		require.GreaterOrEqual(t, w.raddr, mr.Addr())
		require.LessOrEqual(t, w.raddr+w.n, mr.Addr()+uint64(len(buf)))
	})
}
