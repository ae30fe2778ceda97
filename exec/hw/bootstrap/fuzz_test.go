package bootstrap

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/exec/hw/auth"
)

// FuzzParseHello: any 20 bytes give a hello or an error; an accepted one
// fits the job and encodes back to the same bytes.
func FuzzParseHello(f *testing.F) {
	f.Add(Hello{Magic: 7, Type: TypeP2P, Rank: 1, NRanks: 4}.bytes())
	f.Add(Hello{Magic: 7, Type: 99, Rank: 9, NRanks: 4}.bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHello(b, 7, 4)
		if err != nil {
			return
		}
		require.Less(t, int(h.Rank), 4)
		require.GreaterOrEqual(t, h.Type, TypeRoot)
		require.Less(t, h.Type, typeEnd)
		require.Equal(t, b, h.bytes())
	})
}

// FuzzDecodeFrame: a frame never yields more than its bound, and what it
// yields is what WriteFrame would have sent.
func FuzzDecodeFrame(f *testing.F) {
	f.Add([]byte{3, 0, 0, 0, 'a', 'b', 'c'}, uint16(16))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f, 1}, uint16(1024))
	f.Add([]byte{0, 0, 1, 0}, uint16(65535))
	f.Fuzz(func(t *testing.T, b []byte, max uint16) {
		data, err := DecodeFrame(bytes.NewReader(b), int(max))
		if err != nil {
			return
		}
		require.LessOrEqual(t, len(data), int(max))
		require.Equal(t, b[:4+len(data)], append([]byte{byte(len(data)), byte(len(data) >> 8), byte(len(data) >> 16), byte(len(data) >> 24)}, data...))
	})
}

// fuzzConn is a connection whose peer says b and hears nothing.
type fuzzConn struct{ r io.Reader }

func (c fuzzConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c fuzzConn) Write(p []byte) (int, error)      { return len(p), nil }
func (c fuzzConn) Close() error                     { return nil }
func (c fuzzConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (c fuzzConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (c fuzzConn) SetDeadline(time.Time) error      { return nil }
func (c fuzzConn) SetReadDeadline(time.Time) error  { return nil }
func (c fuzzConn) SetWriteDeadline(time.Time) error { return nil }

// fuzzSecret is the job secret the handshake fuzzing guards.
var fuzzSecret = auth.Secret{1, 2, 3}

// FuzzReadHello: no byte string a peer sends without the secret passes
// the handshake (it would have to forge an HMAC over a fresh nonce).
func FuzzReadHello(f *testing.F) {
	good := Hello{Magic: 7, Type: TypeP2P, Rank: 1, NRanks: 4}.bytes()
	f.Add(append(good, make([]byte, auth.NonceSize+auth.MACSize)...))
	f.Add(good)
	f.Fuzz(func(t *testing.T, b []byte) {
		_, err := ReadHello(fuzzConn{bytes.NewReader(b)}, 7, fuzzSecret, 4, time.Now().Add(time.Second))
		require.Error(t, err, "a handshake without the secret was accepted")
	})
}
