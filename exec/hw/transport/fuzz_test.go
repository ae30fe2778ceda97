package transport

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// FuzzProxyRequest: a request header and payload as a client sends them.
// The service takes only known types with a payload within bounds and of
// the right size, and decodes an Init into what initReq encodes.
func FuzzProxyRequest(f *testing.F) {
	init := initReq(KindNet, true, 1, Key{Channel: 2, From: 0, To: 1, Index: 0})
	f.Add(rawReq(ProxyInit, uint32(len(init)), 1, init))
	f.Add(rawReq(ProxySetup, 8, 2, binary.LittleEndian.AppendUint64(nil, 1)))
	f.Add(rawReq(ProxyConnect, 20, 3, make([]byte, 20)))
	f.Add(rawReq(99, 0, 0, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < proxyReqHeader {
			return
		}
		typ, size, opID, bad := parseProxyHeader(b[:proxyReqHeader])
		if bad != "" {
			return
		}
		require.True(t, typ >= 1 && typ < proxyMsgEnd)
		require.LessOrEqual(t, size, uint32(MaxProxyRequest))
		require.NotZero(t, opID)
		payload := b[proxyReqHeader:]
		if int(size) != len(payload) || checkProxyPayload(typ, payload) != "" {
			return
		}
		switch typ {
		case ProxyInit:
			require.Len(t, payload, proxyInitBytes)
			u := func(i int) uint32 { return binary.LittleEndian.Uint32(payload[4*i:]) }
			if u(1) > 1 {
				return // initReq writes 0 or 1
			}
			k := Key{Channel: int(int32(u(3))), From: int(int32(u(4))), To: int(int32(u(5))), Index: int(int32(u(6)))}
			require.Equal(t, payload, initReq(Kind(u(0)), u(1) == 1, int(int32(u(2))), k))
		case ProxySetup, ProxyConvertFd, ProxyClose:
			require.Len(t, payload, 8)
		case ProxyConnect:
			require.GreaterOrEqual(t, len(payload), 8)
		}
	})
}

// FuzzSocketHeader: a net message header (the sender's FIFO entry) that
// validEntry accepts fits its slot of the protocol's buffer, and decoding
// then encoding gives the same bytes.
func FuzzSocketHeader(f *testing.F) {
	var h [HeaderSize]byte
	putHeader(h[:], FifoEntry{Size: 4096, Wire: 4096, Step: 3, Steps: 1, Proto: int32(model.ProtoSimple)})
	f.Add(h[:])
	putHeader(h[:], FifoEntry{Size: 64, Wire: 128, Step: 9, Steps: 2, Proto: int32(model.ProtoLL)})
	f.Add(h[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) != HeaderSize {
			return
		}
		e := getHeader(b)
		var back [HeaderSize]byte
		putHeader(back[:], e)
		require.Equal(t, b, back[:])
		if validEntry(e) != nil {
			return
		}
		pr := model.Protocol(e.Proto)
		slot := int(uint64(e.Step) % model.ProgSlots)
		require.GreaterOrEqual(t, e.Wire, int64(0))
		require.LessOrEqual(t, int64(slot*SlotStride(pr))+e.Wire, int64(model.ProtoBuffSize(pr)), "the payload would overrun the buffer")
	})
}
