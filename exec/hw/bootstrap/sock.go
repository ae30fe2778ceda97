package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
)

// Socket types sent in every handshake after the magic (NCCL sends the
// 8-byte magic and a 4-byte socket type; we add the sender's rank and the
// job size so that the accepting side can check them too, then both sides
// prove the job's secret).
const (
	// TypeRoot is a rank's connection to the root.
	TypeRoot uint32 = 1
	// TypeRing is the bootstrap ring connection from a rank to its next.
	TypeRing uint32 = 2
	// TypeP2P carries one point-to-point message (bootstrapSend).
	TypeP2P uint32 = 3
	// TypeWatch is the liveness connection between two ranks.
	TypeWatch uint32 = 4
	// TypeNet is a data connection of the net transport (socket plugin).
	TypeNet uint32 = 5
	// TypeProxy is a client connection to a rank's proxy service (over
	// its Unix socket; see exec/hw/transport).
	TypeProxy uint32 = 6
	typeEnd   uint32 = 7
)

// Frame bounds, one per message type, checked before anything is
// allocated (a length prefix from a peer is a claim, not a size to trust).
const (
	// MaxAddrLen bounds the listen address a rank sends the root.
	MaxAddrLen = 256
	// MaxMessage bounds a point-to-point message and an AllGather slice
	// (bootstrap messages are connection infos of a few KiB).
	MaxMessage = 16 << 20
	// MaxFrame is the largest frame any bootstrap reader accepts.
	MaxFrame = MaxMessage
)

const helloSize = 8 + 4 + 4 + 4

var le = binary.LittleEndian

// Hello is what every connection says first, in the clear: the job's
// public magic (a quick refusal of another job's connection), the socket
// type, the sender's rank and the job size. The authentication that
// follows covers these bytes, so that the rank a connection claims is
// the rank it proved.
type Hello struct {
	Magic  uint64
	Type   uint32
	Rank   uint32
	NRanks uint32
}

func (h Hello) bytes() []byte {
	b := make([]byte, helloSize)
	le.PutUint64(b[0:], h.Magic)
	le.PutUint32(b[8:], h.Type)
	le.PutUint32(b[12:], h.Rank)
	le.PutUint32(b[16:], h.NRanks)
	return b
}

// ParseHello decodes a hello and checks it against a job of nranks ranks
// with the given magic. An error means the connection must be refused;
// it names neither magic.
func ParseHello(b []byte, magic uint64, nranks int) (Hello, error) {
	if len(b) != helloSize {
		return Hello{}, fmt.Errorf("hello of %d bytes (want %d)", len(b), helloSize)
	}
	h := Hello{Magic: le.Uint64(b[0:]), Type: le.Uint32(b[8:]), Rank: le.Uint32(b[12:]), NRanks: le.Uint32(b[16:])}
	if h.Magic != magic {
		return h, errors.New("not this job (wrong magic)")
	}
	if int(h.NRanks) != nranks || int(h.Rank) >= nranks {
		return h, fmt.Errorf("rank %d of %d does not fit this job of %d ranks", h.Rank, h.NRanks, nranks)
	}
	if h.Type < TypeRoot || h.Type >= typeEnd {
		return h, fmt.Errorf("unknown socket type %d", h.Type)
	}
	return h, nil
}

// WriteHello sends the hello on c and proves the job's secret (a
// challenge-response bound to the hello) before deadline.
func WriteHello(c net.Conn, h Hello, secret auth.Secret, deadline time.Time) error {
	b := h.bytes()
	_ = c.SetWriteDeadline(deadline)
	_, err := c.Write(b)
	_ = c.SetWriteDeadline(time.Time{})
	if err != nil {
		return err
	}
	return auth.Client(c, secret, b, deadline)
}

// ReadHello reads the hello, checks the magic, the job size and the rank
// range, and has the peer prove the job's secret, before deadline. An
// error means the connection must be refused.
func ReadHello(c net.Conn, magic uint64, secret auth.Secret, nranks int, deadline time.Time) (Hello, error) {
	b := make([]byte, helloSize)
	_ = c.SetReadDeadline(deadline)
	_, err := io.ReadFull(c, b)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return Hello{}, fmt.Errorf("handshake from %s: %w", c.RemoteAddr(), err)
	}
	h, err := ParseHello(b, magic, nranks)
	if err != nil {
		return h, fmt.Errorf("handshake from %s: %w", c.RemoteAddr(), err)
	}
	if err := auth.Server(c, secret, b, deadline); err != nil {
		return h, fmt.Errorf("handshake from %s claiming rank %d: %w", c.RemoteAddr(), h.Rank, err)
	}
	return h, nil
}

// handshakeDeadline is when a handshake starting now must be over.
func handshakeDeadline(timeout time.Duration) time.Time {
	return time.Now().Add(min(timeout, HandshakeTimeout))
}

// WriteFrame sends data as an int32 size followed by the payload.
func WriteFrame(c net.Conn, data []byte, deadline time.Time) error {
	var b [4]byte
	le.PutUint32(b[:], uint32(len(data)))
	_ = c.SetWriteDeadline(deadline)
	defer c.SetWriteDeadline(time.Time{})
	if _, err := (&net.Buffers{b[:], data}).WriteTo(c); err != nil {
		return err
	}
	return nil
}

// ReadFrame reads one frame written by WriteFrame, at most max bytes. The
// buffer grows with the bytes that actually arrive, so a length prefix
// that lies costs no more memory than the peer sends.
func ReadFrame(c net.Conn, max int, deadline time.Time) ([]byte, error) {
	_ = c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	return DecodeFrame(c, max)
}

// DecodeFrame reads one {u32 size, payload} frame from r, at most max
// bytes of payload.
func DecodeFrame(r io.Reader, max int) ([]byte, error) {
	var b [4]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return nil, err
	}
	n := int64(le.Uint32(b[:]))
	if n > int64(max) {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, max)
	}
	const step = 64 << 10
	data := make([]byte, 0, min(n, step))
	for int64(len(data)) < n {
		k := min(n-int64(len(data)), step)
		data = slices.Grow(data, int(k))
		m, err := io.ReadFull(r, data[len(data):len(data)+int(k)])
		data = data[:len(data)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return data, nil
}

// Dial connects to addr, retrying refused connections with backoff until
// deadline (the peer may not listen yet), and sends the handshake.
func Dial(addr string, h Hello, secret auth.Secret, deadline time.Time) (net.Conn, error) {
	wait := time.Millisecond
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			if err = WriteHello(c, h, secret, deadline); err == nil {
				return c, nil
			}
			c.Close()
			// A listener full of unproven connections closes the oldest
			// (see MaxPending): try again. A wrong proof is final.
			if errors.Is(err, auth.ErrDenied) {
				return nil, fmt.Errorf("handshake to %s: %w", addr, err)
			}
			err = fmt.Errorf("handshake to %s: %w", addr, err)
		}
		if time.Now().Add(wait).After(deadline) {
			if !strings.HasPrefix(err.Error(), "handshake") {
				err = fmt.Errorf("connect to %s: %w", addr, err)
			}
			return nil, err
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// IsTimeout reports whether err is a deadline expiry.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// ListenAddr picks the address to listen on: the first IPv4 address of an
// interface matching TWINCCL_SOCKET_IFNAME (NCCL_SOCKET_IFNAME's syntax: a
// comma list of prefixes, "^" to exclude, "=" for exact names), else the
// first up non-loopback interface, else loopback.
func ListenAddr(ifname string) (string, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return "", fmt.Errorf("list interfaces: %w", err)
	}
	match := func(name string) bool {
		if ifname == "" {
			return true
		}
		spec, exclude, exact := ifname, false, false
		if strings.HasPrefix(spec, "^") {
			spec, exclude = spec[1:], true
		}
		if strings.HasPrefix(spec, "=") {
			spec, exact = spec[1:], true
		}
		hit := false
		for _, p := range strings.Split(spec, ",") {
			if p == "" {
				continue
			}
			if (exact && name == p) || (!exact && strings.HasPrefix(name, p)) {
				hit = true
			}
		}
		return hit != exclude
	}
	var loop string
	for _, pass := range []bool{false, true} {
		for _, it := range ifs {
			if it.Flags&net.FlagUp == 0 || !match(it.Name) {
				continue
			}
			isLoop := it.Flags&net.FlagLoopback != 0
			if isLoop != pass && ifname == "" {
				continue
			}
			addrs, _ := it.Addrs()
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok || ipn.IP.To4() == nil {
					continue
				}
				if isLoop && loop == "" {
					loop = ipn.IP.String()
				}
				return ipn.IP.String(), nil
			}
		}
		if ifname != "" {
			break
		}
	}
	if loop != "" {
		return loop, nil
	}
	if ifname != "" {
		return "", fmt.Errorf("no up IPv4 interface matches TWINCCL_SOCKET_IFNAME=%q", ifname)
	}
	return "127.0.0.1", nil
}
