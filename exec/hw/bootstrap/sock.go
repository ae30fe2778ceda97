package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"
)

// Socket types sent in every handshake after the magic (NCCL sends the
// 8-byte magic and a 4-byte socket type; we add the sender's rank and the
// job size so that the accepting side can check them too).
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
)

// MaxFrame bounds a framed message (bootstrap messages are small; the
// bound stops a corrupt length from exhausting memory).
const MaxFrame = 1 << 30

const helloSize = 8 + 4 + 4 + 4

var le = binary.LittleEndian

// Hello is the handshake every connection starts with.
type Hello struct {
	Magic  uint64
	Type   uint32
	Rank   uint32
	NRanks uint32
}

// WriteHello sends the handshake on c before deadline.
func WriteHello(c net.Conn, h Hello, deadline time.Time) error {
	var b [helloSize]byte
	le.PutUint64(b[0:], h.Magic)
	le.PutUint32(b[8:], h.Type)
	le.PutUint32(b[12:], h.Rank)
	le.PutUint32(b[16:], h.NRanks)
	_ = c.SetWriteDeadline(deadline)
	_, err := c.Write(b[:])
	_ = c.SetWriteDeadline(time.Time{})
	return err
}

// ReadHello reads the handshake and checks the magic, the job size and the
// rank range. An error means the connection must be refused.
func ReadHello(c net.Conn, magic uint64, nranks int, deadline time.Time) (Hello, error) {
	var b [helloSize]byte
	_ = c.SetReadDeadline(deadline)
	_, err := io.ReadFull(c, b[:])
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		return Hello{}, fmt.Errorf("handshake from %s: %w", c.RemoteAddr(), err)
	}
	h := Hello{Magic: le.Uint64(b[0:]), Type: le.Uint32(b[8:]), Rank: le.Uint32(b[12:]), NRanks: le.Uint32(b[16:])}
	if h.Magic != magic {
		return h, fmt.Errorf("handshake from %s: wrong magic %#016x (want %#016x)", c.RemoteAddr(), h.Magic, magic)
	}
	if int(h.NRanks) != nranks || int(h.Rank) >= nranks {
		return h, fmt.Errorf("handshake from %s: rank %d of %d does not fit this job of %d ranks", c.RemoteAddr(), h.Rank, h.NRanks, nranks)
	}
	return h, nil
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

// ReadFrame reads one frame written by WriteFrame, at most max bytes.
func ReadFrame(c net.Conn, max int, deadline time.Time) ([]byte, error) {
	var b [4]byte
	_ = c.SetReadDeadline(deadline)
	defer c.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(c, b[:]); err != nil {
		return nil, err
	}
	n := int(le.Uint32(b[:]))
	if n > max {
		return nil, fmt.Errorf("frame of %d bytes exceeds the %d-byte limit", n, max)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(c, data); err != nil {
		return nil, err
	}
	return data, nil
}

// Dial connects to addr, retrying refused connections with backoff until
// deadline (the peer may not listen yet), and sends the handshake.
func Dial(addr string, h Hello, deadline time.Time) (net.Conn, error) {
	wait := time.Millisecond
	for {
		d := net.Dialer{Deadline: deadline}
		c, err := d.Dial("tcp", addr)
		if err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetNoDelay(true)
			}
			if err = WriteHello(c, h, deadline); err != nil {
				c.Close()
				return nil, fmt.Errorf("handshake to %s: %w", addr, err)
			}
			return c, nil
		}
		if time.Now().Add(wait).After(deadline) {
			return nil, fmt.Errorf("connect to %s: %w", addr, err)
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
