package ncclapi

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// IDBytes is NCCL_UNIQUE_ID_BYTES.
const IDBytes = 128

// The 128 bytes of an ncclUniqueId, little-endian:
//
//	[0:4)    idTag "TWID", so that an id of another library (NCCL's own)
//	         is refused with a clear error instead of a hang
//	[4:8)    idVersion
//	[8:16)   the job's magic (bootstrap.UniqueID.Magic)
//	[16:48)  the job's secret: 32 random bytes from ncclGetUniqueId,
//	         for the bootstrap's per-job HMAC (being added to
//	         exec/hw/bootstrap), so that ids need not change shape when
//	         it comes; zero with NCCL_COMM_ID
//	[48]     length of the root's address
//	[49:128) the root's address, host:port
const (
	idTag        = "TWID"
	idVersion    = 1
	idSecretOff  = 16
	idSecretSize = 32
	idAddrLenOff = 48
	idAddrOff    = 49
	maxAddrLen   = IDBytes - idAddrOff
)

// UniqueID is the decoded ncclUniqueId.
type UniqueID struct {
	Magic  uint64
	Secret [idSecretSize]byte
	Addr   string
}

// Encode writes the id's 128 bytes.
func (u UniqueID) Encode() ([IDBytes]byte, error) {
	var b [IDBytes]byte
	if len(u.Addr) == 0 || len(u.Addr) > maxAddrLen {
		return b, errorf(InternalError, "root address %q does not fit the unique id (at most %d bytes)", u.Addr, maxAddrLen)
	}
	copy(b[0:4], idTag)
	binary.LittleEndian.PutUint32(b[4:8], idVersion)
	binary.LittleEndian.PutUint64(b[8:16], u.Magic)
	copy(b[idSecretOff:idSecretOff+idSecretSize], u.Secret[:])
	b[idAddrLenOff] = byte(len(u.Addr))
	copy(b[idAddrOff:], u.Addr)
	return b, nil
}

// DecodeUniqueID reads an id written by Encode; an id of another library,
// an uninitialised or a damaged one is ncclInvalidArgument.
func DecodeUniqueID(b []byte) (UniqueID, error) {
	if len(b) != IDBytes {
		return UniqueID{}, errorf(InvalidArgument, "unique id of %d bytes, want %d", len(b), IDBytes)
	}
	if !bytes.Equal(b[0:4], []byte(idTag)) {
		return UniqueID{}, errorf(InvalidArgument, "unique id was not made by this library's ncclGetUniqueId (tag %q, want %q): every rank must use twinccl's libnccl", b[0:4], idTag)
	}
	if v := binary.LittleEndian.Uint32(b[4:8]); v != idVersion {
		return UniqueID{}, errorf(InvalidArgument, "unique id version %d, this library reads %d", v, idVersion)
	}
	n := int(b[idAddrLenOff])
	if n == 0 || n > maxAddrLen {
		return UniqueID{}, errorf(InvalidArgument, "unique id: root address length %d out of range", n)
	}
	u := UniqueID{Magic: binary.LittleEndian.Uint64(b[8:16]), Addr: string(b[idAddrOff : idAddrOff+n])}
	copy(u.Secret[:], b[idSecretOff:idSecretOff+idSecretSize])
	if _, _, err := net.SplitHostPort(u.Addr); err != nil {
		return UniqueID{}, errorf(InvalidArgument, "unique id: root address %q: %v", u.Addr, err)
	}
	return u, nil
}

// bootID is the id as the bootstrap takes it. The secret stays in the
// ncclUniqueId until the bootstrap proves it on every connection (the
// security work on exec/hw/bootstrap): then it goes into the bootstrap's
// id here, and ensureRoot starts the root with it.
func (u UniqueID) bootID() bootstrap.UniqueID {
	return bootstrap.UniqueID{Magic: u.Magic, Addr: u.Addr, Secret: auth.Secret(u.Secret)}
}

// NCCLMagic is NCCL_MAGIC, the magic of a job whose root address comes
// from NCCL_COMM_ID.
const NCCLMagic = 0x0280028002800280

// pendingRoots are the ids this process made with GetUniqueID: NCCL's
// root starts listening in ncclGetUniqueId and learns the job size from
// the first rank, but our bootstrap root is told the size when it starts,
// so the root starts when the first rank of this process joins the job
// (the process that calls ncclGetUniqueId is rank 0's in every launcher
// we know of). Ranks of other processes that come first retry their
// refused connections until the bootstrap timeout.
var (
	rootsMu      sync.Mutex
	pendingRoots = map[UniqueID]*rootStart{}
)

type rootStart struct {
	once sync.Once
	err  error
}

// GetUniqueID is ncclGetUniqueId: a random magic and an address for the
// root on the bootstrap interface (TWINCCL_SOCKET_IFNAME, else
// NCCL_SOCKET_IFNAME's syntax), with a port free now. With NCCL_COMM_ID
// set, the root's address is that variable's and the magic NCCL_MAGIC; as
// in NCCL, rank 0 then starts the root.
func GetUniqueID() (UniqueID, error) {
	if v := os.Getenv("NCCL_COMM_ID"); v != "" {
		if _, _, err := net.SplitHostPort(v); err != nil {
			return UniqueID{}, errorf(InvalidArgument, "NCCL_COMM_ID=%q: want host:port: %v", v, err)
		}
		return UniqueID{Magic: NCCLMagic, Addr: v}, nil
	}
	ifname := os.Getenv("TWINCCL_SOCKET_IFNAME")
	if ifname == "" {
		ifname = os.Getenv("NCCL_SOCKET_IFNAME")
	}
	host, err := bootstrap.ListenAddr(ifname)
	if err != nil {
		return UniqueID{}, errorf(SystemError, "bootstrap interface: %v", err)
	}
	return newUniqueID(host)
}

// newUniqueID reserves a port on host for the root of a new job, which
// this process starts when its first rank joins.
func newUniqueID(host string) (UniqueID, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return UniqueID{}, errorf(SystemError, "reserve a bootstrap port on %s: %v", host, err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return UniqueID{}, errorf(SystemError, "reserve a bootstrap port on %s: %v", host, err)
	}
	u := UniqueID{Magic: bootstrap.RandomMagic(), Addr: addr}
	if _, err := rand.Read(u.Secret[:]); err != nil {
		return UniqueID{}, errorf(SystemError, "job secret: %v", err)
	}
	rootsMu.Lock()
	pendingRoots[u] = &rootStart{}
	rootsMu.Unlock()
	return u, nil
}

// ensureRoot starts the bootstrap root of u for nranks ranks, once, when
// this process made u (or, with NCCL_COMM_ID, on rank 0).
func ensureRoot(u UniqueID, rank, nranks int, timeout time.Duration, log *slog.Logger) error {
	rootsMu.Lock()
	rs, ok := pendingRoots[u]
	if !ok && u.Magic == NCCLMagic && rank == 0 {
		rs = &rootStart{}
		pendingRoots[u] = rs
		ok = true
	}
	rootsMu.Unlock()
	if !ok {
		return nil
	}
	rs.once.Do(func() {
		root, err := bootstrap.StartRootSecret(u.Addr, u.Magic, auth.Secret(u.Secret), nranks, timeout, log)
		if err != nil {
			rs.err = errorf(SystemError, "bootstrap root on %s: %v", u.Addr, err)
			return
		}
		go func() {
			if err := root.Wait(); err != nil {
				log.Warn("bootstrap root", "addr", u.Addr, "err", err)
			}
			root.Close()
		}()
	})
	if rs.err != nil {
		return fmt.Errorf("rank %d: %w", rank, rs.err)
	}
	return nil
}
