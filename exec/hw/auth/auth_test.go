package auth

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handshake runs Client and Server over a pipe and returns their errors.
func handshake(cs, ss Secret, cctx, sctx []byte) (cerr, serr error) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan error, 1)
	go func() {
		err := Server(b, ss, sctx, time.Now().Add(2*time.Second))
		b.Close()
		done <- err
	}()
	cerr = Client(a, cs, cctx, time.Now().Add(2*time.Second))
	a.Close()
	return cerr, <-done
}

func TestHandshake(t *testing.T) {
	s := NewSecret()
	ctx := []byte("hello rank 3")
	cerr, serr := handshake(s, s, ctx, ctx)
	require.NoError(t, cerr)
	require.NoError(t, serr)

	// Another secret: the client detects the server first and never
	// sends a proof.
	cerr, serr = handshake(NewSecret(), s, ctx, ctx)
	require.ErrorIs(t, cerr, ErrDenied)
	require.Error(t, serr)

	// The same secret but the hello changed on the way (a rank claim
	// rewritten): both proofs fail.
	cerr, _ = handshake(s, s, []byte("hello rank 0"), ctx)
	require.ErrorIs(t, cerr, ErrDenied)
}

// A client that skips checking the server and answers with a proof for
// another secret is refused by the server.
func TestServerRefusesWrongProof(t *testing.T) {
	s := NewSecret()
	a, b := net.Pipe()
	defer a.Close()
	done := make(chan error, 1)
	go func() { done <- Server(b, s, nil, time.Now().Add(2*time.Second)) }()
	cn := make([]byte, NonceSize)
	_, _ = a.Write(cn)
	in := make([]byte, NonceSize+MACSize)
	_, err := a.Read(in)
	require.NoError(t, err)
	_, _ = a.Write(mac(NewSecret(), "client", nil, cn, in[:NonceSize]))
	require.ErrorIs(t, <-done, ErrDenied)
	// A server proof replayed as the client's (reflection) fails too.
	a2, b2 := net.Pipe()
	defer a2.Close()
	go func() { done <- Server(b2, s, nil, time.Now().Add(2*time.Second)) }()
	_, _ = a2.Write(cn)
	_, err = a2.Read(in)
	require.NoError(t, err)
	_, _ = a2.Write(in[NonceSize:])
	require.ErrorIs(t, <-done, ErrDenied)
}

func TestSecretNeverPrinted(t *testing.T) {
	s := NewSecret()
	var logs bytes.Buffer
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "secret", s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %x %d %s", s, s, s, s, s, s), fmt.Sprintf("%v", struct{ S Secret }{s}), logs.String(), s.Tag("proxy 1")} {
		assert.NotContains(t, out, s.Hex())
		assert.NotContains(t, out, s.Hex()[:16])
	}
	back, err := ParseSecret(s.Hex())
	require.NoError(t, err)
	assert.Equal(t, s, back)
	for _, bad := range []string{"", "zz", s.Hex()[:62], s.Hex() + "00"} {
		_, err := ParseSecret(bad)
		assert.Error(t, err, "%q", bad)
	}
	assert.NotEqual(t, s.Tag("a"), s.Tag("b"))
	assert.NotEqual(t, s.Tag("a"), NewSecret().Tag("a"))
	assert.False(t, s.IsZero())
	assert.True(t, Secret{}.IsZero())
}
