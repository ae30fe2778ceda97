package ncclapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/model"
)

func TestUniqueIDRoundTrip(t *testing.T) {
	u := UniqueID{Magic: 0x0123456789abcdef, Addr: "10.1.2.3:40123"}
	for i := range u.Secret {
		u.Secret[i] = byte(i * 7)
	}
	b, err := u.Encode()
	require.NoError(t, err)
	got, err := DecodeUniqueID(b[:])
	require.NoError(t, err)
	assert.Equal(t, u, got)

	// An address too long for the id is refused, not truncated.
	long := UniqueID{Magic: 1, Addr: fmt.Sprintf("%0*d:1", maxAddrLen, 0)}
	_, err = long.Encode()
	require.Error(t, err)
	assert.Equal(t, InternalError, Code(err))
}

func TestDecodeUniqueIDRejects(t *testing.T) {
	good, err := UniqueID{Magic: 7, Addr: "127.0.0.1:9"}.Encode()
	require.NoError(t, err)
	cases := map[string]func(b []byte) []byte{
		"zero id (NCCL's or uninitialised)": func(b []byte) []byte { return make([]byte, IDBytes) },
		"other version":                     func(b []byte) []byte { b[4] = 9; return b },
		"address length 0":                  func(b []byte) []byte { b[idAddrLenOff] = 0; return b },
		"address length past the end":       func(b []byte) []byte { b[idAddrLenOff] = 200; return b },
		"address without port":              func(b []byte) []byte { b[idAddrLenOff] = 9; return b },
		"short":                             func(b []byte) []byte { return b[:100] },
	}
	for name, mangle := range cases {
		t.Run(name, func(t *testing.T) {
			b := good
			_, err := DecodeUniqueID(mangle(b[:]))
			require.Error(t, err)
			assert.Equal(t, InvalidArgument, Code(err))
		})
	}
}

func TestGetUniqueIDsDiffer(t *testing.T) {
	t.Setenv("TWINCCL_SOCKET_IFNAME", "lo")
	a, err := GetUniqueID()
	require.NoError(t, err)
	b, err := GetUniqueID()
	require.NoError(t, err)
	assert.NotEqual(t, a.Magic, b.Magic)
	assert.NotEqual(t, a.Addr, b.Addr, "each id reserves its own port")
	assert.NotEqual(t, a.Secret, b.Secret)
	assert.NotEqual(t, [idSecretSize]byte{}, a.Secret, "a random secret")
	t.Setenv("NCCL_COMM_ID", "10.0.0.1:5000")
	c, err := GetUniqueID()
	require.NoError(t, err)
	assert.Equal(t, UniqueID{Magic: NCCLMagic, Addr: "10.0.0.1:5000"}, c)
	t.Setenv("NCCL_COMM_ID", "nonsense")
	_, err = GetUniqueID()
	assert.Equal(t, InvalidArgument, Code(err))
}

func TestCallCheck(t *testing.T) {
	c := &Comm{Rank: 1, NRanks: 4}
	ok := Call{Coll: model.CollAllReduce, Send: 0x1000, Recv: 0x2000, Count: 8, Dtype: int32(model.DtypeFP32)}
	require.NoError(t, ok.check(c))
	cases := []struct {
		name   string
		mod    func(k *Call)
		code   Result
		reason string
	}{
		{"datatype", func(k *Call) { k.Dtype = numDtypes }, InvalidArgument, "invalid datatype 12"},
		{"negative datatype", func(k *Call) { k.Dtype = -1 }, InvalidArgument, "invalid datatype -1"},
		{"operation", func(k *Call) { k.Op = 5 }, InvalidArgument, "invalid reduction operation 5"},
		{"fp8 reduction", func(k *Call) { k.Dtype = dtypeFP8e4m3 }, InvalidUsage, "fp8"},
		{"NULL send", func(k *Call) { k.Send = 0 }, InvalidArgument, "sendbuff is NULL"},
		{"NULL recv", func(k *Call) { k.Recv = 0 }, InvalidArgument, "recvbuff is NULL"},
		{"overflow", func(k *Call) { k.Count = 1 << 62 }, InvalidArgument, "overflows"},
		{"broadcast root", func(k *Call) { k.Coll, k.Root = model.CollBroadcast, 4 }, InvalidArgument, "root 4 out of range"},
		{"send peer", func(k *Call) { k.Coll, k.Root = model.CollSend, -1 }, InvalidArgument, "peer -1 out of range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k := ok
			tc.mod(&k)
			err := k.check(c)
			require.Error(t, err)
			assert.Equal(t, tc.code, Code(err))
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
	// Buffers a rank does not use may be NULL: a Broadcast's non-root
	// send, a Reduce's non-root receive; an fp8 AllGather moves bytes.
	for _, k := range []Call{
		{Coll: model.CollBroadcast, Recv: 0x2000, Count: 8, Dtype: int32(model.DtypeFP32), Root: 0},
		{Coll: model.CollReduce, Send: 0x1000, Count: 8, Dtype: int32(model.DtypeFP32), Root: 2},
		{Coll: model.CollAllGather, Send: 0x1000, Recv: 0x2000, Count: 8, Dtype: dtypeFP8e5m2},
		{Coll: model.CollAllReduce, Count: 0, Dtype: int32(model.DtypeFP32)},
	} {
		assert.NoError(t, k.check(c), "%s", k)
	}
}

func TestCallBytesAndInPlace(t *testing.T) {
	k := Call{Coll: model.CollAllGather, Count: 10, Dtype: int32(model.DtypeFP16)}
	in, out, ok := k.bytes(4)
	require.True(t, ok)
	assert.Equal(t, [2]uint64{20, 80}, [2]uint64{in, out})
	k.Coll = model.CollReduceScatter
	in, out, _ = k.bytes(4)
	assert.Equal(t, [2]uint64{80, 20}, [2]uint64{in, out})
	// NCCL's in-place placements.
	ag := Call{Coll: model.CollAllGather, Count: 10, Dtype: int32(model.DtypeFP32), Recv: 0x1000, Send: 0x1000 + 2*40}
	assert.True(t, ag.inPlace(2))
	assert.False(t, ag.inPlace(1))
	rs := Call{Coll: model.CollReduceScatter, Count: 10, Dtype: int32(model.DtypeFP32), Send: 0x1000, Recv: 0x1000 + 3*40}
	assert.True(t, rs.inPlace(3))
	ar := Call{Coll: model.CollAllReduce, Send: 0x10, Recv: 0x10}
	assert.True(t, ar.inPlace(0))
}

func TestCodes(t *testing.T) {
	assert.Equal(t, Success, Code(nil))
	assert.Equal(t, InvalidUsage, Code(fmt.Errorf("wrapped: %w", errorf(InvalidUsage, "x"))))
	assert.Equal(t, UnhandledCudaError, Code(fmt.Errorf("rank 0: %w", cuda.ErrUnavailable)))
	assert.Equal(t, SystemError, Code(errors.New("socket")))
	for r := Success; r < NumResults; r++ {
		assert.NotEqual(t, "unknown result code", ErrorString(r))
	}
	assert.Equal(t, "unknown result code", ErrorString(NumResults))
	assert.Equal(t, InvalidArgument, Fail("ncclX", errorf(InvalidArgument, "why")))
	assert.Equal(t, "ncclX: why", LastError())
}

func TestGroupsArePerThread(t *testing.T) {
	require.Error(t, GroupEnd(101))
	GroupStart(101)
	GroupStart(101)
	assert.True(t, InGroup(101))
	assert.False(t, InGroup(102))
	ran := 0
	assert.True(t, Defer(101, func() error { ran++; return nil }))
	assert.False(t, Defer(102, func() error { return nil }))
	require.NoError(t, GroupEnd(101))
	assert.Equal(t, 0, ran, "inner GroupEnd runs nothing")
	require.NoError(t, GroupEnd(101))
	assert.Equal(t, 1, ran)
	assert.False(t, InGroup(101))
	GroupStart(103)
	Defer(103, func() error { return errorf(RemoteError, "peer gone") })
	assert.Equal(t, RemoteError, Code(GroupEnd(103)))
}
