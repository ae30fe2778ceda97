// Package auth proves that both ends of a connection hold the job's
// secret without sending it: a mutual challenge-response, each side
// answering the other's fresh random nonce with an HMAC-SHA256 keyed by
// the secret. Every connection of a job (bootstrap, proxy, socket
// transport, software verbs) runs it, binding what was said before it
// (socket type, rank, queue pair numbers) into both proofs, so that a
// process without the secret can neither join nor impersonate a rank, and
// a recorded handshake cannot be replayed.
package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"
)

// SecretSize is the length of a job secret in bytes.
const SecretSize = 32

// NonceSize and MACSize are the sizes of the handshake's fields.
const (
	NonceSize = 16
	MACSize   = sha256.Size
)

// Secret is a job's secret. Its String and slog form are redacted, so that
// printing an id or a config never shows it; Hex is the one way out.
type Secret [SecretSize]byte

// NewSecret returns SecretSize random bytes from crypto/rand.
func NewSecret() Secret {
	var s Secret
	if _, err := rand.Read(s[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux (Go 1.24+ documents it never returns an error)
	}
	return s
}

// ParseSecret reads the hex form Hex writes.
func ParseSecret(h string) (Secret, error) {
	var s Secret
	b, err := hex.DecodeString(h)
	if err != nil {
		return s, fmt.Errorf("secret: not hex: %w", err)
	}
	if len(b) != SecretSize {
		return s, fmt.Errorf("secret: %d bytes, want %d", len(b), SecretSize)
	}
	copy(s[:], b)
	return s, nil
}

// Hex is the secret in hex, for passing it to a rank (environment, file).
func (s Secret) Hex() string { return hex.EncodeToString(s[:]) }

// IsZero reports whether s was never set.
func (s Secret) IsZero() bool { return s == Secret{} }

// String never shows the secret.
func (s Secret) String() string { return "[secret]" }

// Format never shows the secret, whatever the verb (%x, %d, %#v included).
func (s Secret) Format(f fmt.State, _ rune) { io.WriteString(f, "[secret]") }

// Tag is a public name derived from the secret (HMAC of label): it names
// things (a Unix socket) that peers holding the secret must find, without
// revealing the secret or letting anyone else predict the name.
func (s Secret) Tag(label string) string {
	m := hmac.New(sha256.New, s[:])
	m.Write([]byte("twinccl tag\x00" + label))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// ErrDenied is wrapped by every failed proof.
var ErrDenied = errors.New("authentication failed")

func mac(s Secret, role string, context, cn, sn []byte) []byte {
	m := hmac.New(sha256.New, s[:])
	m.Write([]byte("twinccl v1 " + role + "\x00"))
	var n [4]byte
	n[0], n[1], n[2], n[3] = byte(len(context)), byte(len(context)>>8), byte(len(context)>>16), byte(len(context)>>24)
	m.Write(n[:])
	m.Write(context)
	m.Write(cn)
	m.Write(sn)
	return m.Sum(nil)
}

func nonce() []byte {
	b := make([]byte, NonceSize)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}

// Client runs the connecting side after it sent context in the clear:
// send a nonce, check the server's proof over both nonces, send its own.
// The deadline bounds the whole exchange.
func Client(c net.Conn, s Secret, context []byte, deadline time.Time) error {
	_ = c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	cn := nonce()
	if _, err := c.Write(cn); err != nil {
		return fmt.Errorf("send challenge: %w", err)
	}
	var in [NonceSize + MACSize]byte
	if _, err := io.ReadFull(c, in[:]); err != nil {
		return fmt.Errorf("read the server's proof: %w", err)
	}
	sn := in[:NonceSize]
	if !hmac.Equal(in[NonceSize:], mac(s, "server", context, cn, sn)) {
		return fmt.Errorf("the server's proof is wrong (not this job): %w", ErrDenied)
	}
	if _, err := c.Write(mac(s, "client", context, cn, sn)); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	return nil
}

// Server runs the accepting side after it read context: read the client's
// nonce, answer with its own nonce and proof, check the client's proof.
// The deadline bounds the whole exchange, so a silent client costs at
// most that long.
func Server(c net.Conn, s Secret, context []byte, deadline time.Time) error {
	_ = c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	cn := make([]byte, NonceSize)
	if _, err := io.ReadFull(c, cn); err != nil {
		return fmt.Errorf("read challenge: %w", err)
	}
	sn := nonce()
	if _, err := c.Write(append(sn, mac(s, "server", context, cn, sn)...)); err != nil {
		return fmt.Errorf("send proof: %w", err)
	}
	got := make([]byte, MACSize)
	if _, err := io.ReadFull(c, got); err != nil {
		return fmt.Errorf("read the client's proof: %w", err)
	}
	if !hmac.Equal(got, mac(s, "client", context, cn, sn)) {
		return fmt.Errorf("the client's proof is wrong (not this job): %w", ErrDenied)
	}
	return nil
}

// LogValue keeps the secret out of structured logs.
func (s Secret) LogValue() slog.Value { return slog.StringValue("[secret]") }
