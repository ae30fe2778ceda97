package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// Kind names a transport.
type Kind int

// Transports, in the order Setup tries them (NCCL: P2P, SHM, NET).
const (
	KindSHM Kind = iota
	KindNet
	// KindSelf is a connection from a rank to itself (trees of one rank
	// per node can loop back): one private memory both sides use.
	KindSelf
)

func (k Kind) String() string {
	return [...]string{"SHM", "NET", "SELF"}[k]
}

// Key identifies a connection of a job: channel, sender, receiver and the
// occurrence of that triple among the connections of the job's Programs.
type Key struct {
	Channel, From, To, Index int
}

func (k Key) String() string { return fmt.Sprintf("ch%d %d->%d #%d", k.Channel, k.From, k.To, k.Index) }

// Conn is one side of a connection.
type Conn struct {
	Key  Key
	Kind Kind
	// Send is true on the sender's side.
	Send bool
	// Peer is the rank at the other end.
	Peer int
	// Mem is the side's view of the connection's memory.
	Mem Mem
	// Step is the connection's persistent step counter (conn.step): the
	// absolute step the next Program starts from, before rounding.
	Step uint64

	mapped  []byte // munmap on close
	shmPath string // unlinked after the peer mapped it (receiver side)
	net     *netConn
}

// Notify wakes the proxy of a net connection after the counters moved.
func (c *Conn) Notify() {
	if c.net != nil {
		c.net.notify()
	}
}

// Config selects transports and tunes the net transport.
type Config struct {
	// HostIDs are every rank's host identity (TWINCCL_HOSTID or the host
	// name): ranks with the same one connect through shm.
	HostIDs []string
	// ForceNet uses the net transport between every pair.
	ForceNet bool
	// Net is the network plugin (Socket when nil).
	Net Plugin
	// ShmDir is where shm segments are created (/dev/shm when empty).
	ShmDir string
	Log    *slog.Logger
}

// Set is a rank's connections and the state their transports share.
type Set struct {
	comm  *bootstrap.Comm
	cfg   Config
	mu    sync.Mutex
	conns map[Key]*Conn
	net   Plugin
	px    *proxy
}

// NewSet prepares the transports of one rank.
func NewSet(comm *bootstrap.Comm, cfg Config) (*Set, error) {
	if len(cfg.HostIDs) != comm.NRanks() {
		return nil, fmt.Errorf("transport rank %d: %d host ids for %d ranks", comm.Rank(), len(cfg.HostIDs), comm.NRanks())
	}
	if cfg.ShmDir == "" {
		cfg.ShmDir = "/dev/shm"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	s := &Set{comm: comm, cfg: cfg, conns: map[Key]*Conn{}, net: cfg.Net}
	if s.net == nil {
		s.net = NewSocket(SocketOptionsFromEnv())
	}
	if err := s.net.Init(comm); err != nil {
		return nil, fmt.Errorf("transport rank %d: net plugin %s: %w", comm.Rank(), s.net.Name(), err)
	}
	s.px = newProxy(comm, cfg.Log)
	return s, nil
}

// Get is the connection for k, or nil.
func (s *Set) Get(k Key) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.conns[k]
}

// canSHM is NCCL's shm canConnect: same host, /dev/shm usable, not forced
// to the network.
func (s *Set) canSHM(a, b int) bool {
	if s.cfg.ForceNet || s.cfg.HostIDs[a] != s.cfg.HostIDs[b] {
		return false
	}
	st, err := os.Stat(s.cfg.ShmDir)
	return err == nil && st.IsDir()
}

// connect-info tags (bootstrap p2p); bit 30 keeps them off the barrier's.
func infoTag(k Key, phase uint32) uint32 {
	return 1<<30 | phase<<28 | uint32(k.Index&0xff)<<20 | uint32(k.Channel&0xfffff)
}

// Connect sets up every connection of keys this rank is an end of and does
// not hold yet: for each, choose the transport, set up both sides,
// exchange connect info with the peer in one batch, connect; then the
// senders acknowledge and the receivers unlink their shm segments. Every
// rank must call it with the same keys in the same order.
func (s *Set) Connect(keys []Key) ([]*Conn, error) {
	me := s.comm.Rank()
	type pending struct {
		c    *Conn
		info []byte
		ln   Listener
	}
	var todo []*pending
	out := make([]*Conn, len(keys))
	for i, k := range keys {
		if k.From != me && k.To != me {
			continue
		}
		if c := s.Get(k); c != nil {
			out[i] = c
			continue
		}
		if k.From == k.To {
			m, err := anonMem()
			if err != nil {
				return nil, fmt.Errorf("transport rank %d: self connection %v: %w", me, k, err)
			}
			c := &Conn{Key: k, Kind: KindSelf, Send: true, Peer: me, mapped: m, Mem: Mem(m)}
			c.Mem.Init()
			s.mu.Lock()
			s.conns[k] = c
			s.mu.Unlock()
			out[i] = c
			continue
		}
		c := &Conn{Key: k, Send: k.From == me}
		if c.Send {
			c.Peer = k.To
		} else {
			c.Peer = k.From
		}
		c.Kind = KindNet
		if s.canSHM(k.From, k.To) {
			c.Kind = KindSHM
		}
		todo = append(todo, &pending{c: c})
		out[i] = c
	}
	fail := func(err error) ([]*Conn, error) {
		for _, p := range todo {
			if p.ln != nil {
				p.ln.Close()
			}
			p.c.close()
		}
		return nil, err
	}
	// Setup: receivers allocate (shm segment) or listen (net).
	for _, p := range todo {
		c := p.c
		if c.Send {
			continue
		}
		switch c.Kind {
		case KindSHM:
			if err := c.shmCreate(s.cfg.ShmDir, s.comm.Magic()); err != nil {
				return fail(fmt.Errorf("transport rank %d: shm setup for %v from rank %d: %w", me, c.Key, c.Peer, err))
			}
			p.info = []byte(c.shmPath)
		case KindNet:
			h, ln, err := s.net.Listen(c.Peer)
			if err != nil {
				return fail(fmt.Errorf("transport rank %d: net setup for %v from rank %d: %w", me, c.Key, c.Peer, err))
			}
			p.info, p.ln = h, ln
		}
	}
	// Exchange connect info in one batch: receivers send, senders receive.
	for _, p := range todo {
		if !p.c.Send {
			msg := append([]byte{byte(p.c.Kind)}, p.info...)
			if err := s.comm.Send(p.c.Peer, infoTag(p.c.Key, 0), msg); err != nil {
				return fail(fmt.Errorf("transport rank %d: connect info for %v to rank %d: %w", me, p.c.Key, p.c.Peer, err))
			}
		}
	}
	for _, p := range todo {
		if p.c.Send {
			msg, err := s.comm.Recv(p.c.Peer, infoTag(p.c.Key, 0))
			if err != nil {
				return fail(fmt.Errorf("transport rank %d: connect info for %v from rank %d: %w", me, p.c.Key, p.c.Peer, err))
			}
			if len(msg) < 1 || Kind(msg[0]) != p.c.Kind {
				return fail(fmt.Errorf("transport rank %d: rank %d chose another transport for %v", me, p.c.Peer, p.c.Key))
			}
			p.info = msg[1:]
		}
	}
	// Connect.
	for _, p := range todo {
		c := p.c
		var err error
		switch {
		case c.Kind == KindSHM && c.Send:
			err = c.shmOpen(string(p.info), s.cfg.ShmDir)
		case c.Kind == KindNet && c.Send:
			var sc SendComm
			if sc, err = s.net.Connect(c.Peer, p.info); err == nil {
				err = c.netInit(sc, nil)
			}
		case c.Kind == KindNet:
			var rc RecvComm
			if rc, err = p.ln.Accept(s.comm.Timeout()); err == nil {
				err = c.netInit(nil, rc)
			}
			p.ln.Close()
			p.ln = nil
		}
		if err != nil {
			return fail(fmt.Errorf("transport rank %d: connect %v %s with rank %d: %w", me, c.Key, c.Kind, c.Peer, err))
		}
	}
	// Senders acknowledge; receivers unlink their segments once mapped.
	for _, p := range todo {
		if p.c.Send {
			if err := s.comm.Send(p.c.Peer, infoTag(p.c.Key, 1), nil); err != nil {
				return fail(fmt.Errorf("transport rank %d: connect ack for %v to rank %d: %w", me, p.c.Key, p.c.Peer, err))
			}
		}
	}
	for _, p := range todo {
		if !p.c.Send {
			if _, err := s.comm.Recv(p.c.Peer, infoTag(p.c.Key, 1)); err != nil {
				return fail(fmt.Errorf("transport rank %d: connect ack for %v from rank %d: %w", me, p.c.Key, p.c.Peer, err))
			}
			p.c.unlink()
		}
	}
	s.mu.Lock()
	for _, p := range todo {
		s.conns[p.c.Key] = p.c
		if p.c.net != nil {
			s.px.add(p.c)
		}
	}
	s.mu.Unlock()
	return out, nil
}

// Close stops the proxy and releases every connection.
func (s *Set) Close() error {
	s.px.stop()
	s.mu.Lock()
	conns := s.conns
	s.conns = map[Key]*Conn{}
	s.mu.Unlock()
	var errs []error
	for _, c := range conns {
		if err := c.close(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.net.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ShmPrefix starts the name of every shm segment twinccl creates.
const ShmPrefix = "twinccl-"

func (c *Conn) shmCreate(dir string, magic uint64) error {
	var rnd [8]byte
	binary.LittleEndian.PutUint64(rnd[:], bootstrap.RandomMagic())
	name := fmt.Sprintf("%s%016x-%d-%d-%d-%d-%x", ShmPrefix, magic, c.Key.Channel, c.Key.From, c.Key.To, c.Key.Index, rnd[:4])
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	c.shmPath = path
	if err := f.Truncate(MemBytes); err != nil {
		c.unlink()
		return err
	}
	m, err := syscall.Mmap(int(f.Fd()), 0, MemBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		c.unlink()
		return fmt.Errorf("mmap %s: %w", path, err)
	}
	c.mapped, c.Mem = m, Mem(m)
	c.Mem.Init()
	return nil
}

func (c *Conn) shmOpen(name, dir string) error {
	if filepath.Dir(name) != filepath.Clean(dir) || !strings.HasPrefix(filepath.Base(name), ShmPrefix) {
		return fmt.Errorf("peer sent shm segment %q outside %s", name, dir)
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	m, err := syscall.Mmap(int(f.Fd()), 0, MemBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("mmap %s: %w", name, err)
	}
	c.mapped, c.Mem = m, Mem(m)
	return nil
}

func (c *Conn) unlink() {
	if c.shmPath != "" {
		_ = os.Remove(c.shmPath)
		c.shmPath = ""
	}
}

func (c *Conn) close() error {
	var errs []error
	if c.net != nil {
		if err := c.net.close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.unlink()
	if c.mapped != nil {
		if err := syscall.Munmap(c.mapped); err != nil {
			errs = append(errs, err)
		}
		c.mapped, c.Mem = nil, nil
	}
	return errors.Join(errs...)
}

// anonMem allocates private page-aligned connection memory.
func anonMem() ([]byte, error) {
	return syscall.Mmap(-1, 0, MemBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

// Backoff is the adaptive wait of the polling loops (device lanes and
// proxies). Ranks often outnumber cores (4 processes on 2 cores), so
// after a short spin it gives the core away with sched_yield, which lets
// the peer that must produce the data run at once; only after a longer
// idle (BackoffYield) does it sleep, and then briefly (Go rounds short
// sleeps of an idle process up to its timer granularity, about 1 ms, so
// sleeping early is what made small messages take milliseconds).
type Backoff struct {
	n     int
	since time.Time // when yielding began
	sleep bool      // past the yield phase
}

// Backoff phases.
const (
	// BackoffSpin is the number of waits that only spin.
	BackoffSpin = 64
	// BackoffYield is how long waits yield the core before sleeping.
	BackoffYield = 2 * time.Millisecond
	// BackoffSleep is the sleep of one wait after that.
	BackoffSleep = 200 * time.Microsecond
)

// Reset is called after progress.
func (b *Backoff) Reset() { b.n, b.sleep = 0, false }

// Waits is the number of waits since the last Reset.
func (b *Backoff) Waits() int { return b.n }

// Sleeping reports whether the waits since the last Reset went past the
// spin and yield phases (a caller that can block on an event should).
func (b *Backoff) Sleeping() bool { return b.sleep }

// Wait waits once: spins, then yields the core, then sleeps.
func (b *Backoff) Wait() {
	b.n++
	switch {
	case b.n < BackoffSpin:
	case b.n == BackoffSpin:
		b.since = time.Now()
		osYield()
	case !b.sleep:
		osYield()
		b.sleep = b.n&15 == 0 && time.Since(b.since) > BackoffYield
	default:
		time.Sleep(BackoffSleep)
	}
}

// osYield gives the core to another runnable thread (sched_yield):
// runtime.Gosched alone yields only to goroutines of this process.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
