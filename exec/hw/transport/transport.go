package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
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

// ProgramKeys names p's connections: the k-th connection from a to b on
// channel c is Key{c, a, b, k}. Every device (host or GPU) sets up the
// connections of a Program under these keys, so ranks agree on them.
func ProgramKeys(p *model.Program) []Key {
	seen := map[[3]int32]int{}
	keys := make([]Key, len(p.Conns))
	for i, c := range p.Conns {
		t := [3]int32{c.Channel, c.From, c.To}
		keys[i] = Key{Channel: int(c.Channel), From: int(c.From), To: int(c.To), Index: seen[t]}
		seen[t]++
	}
	return keys
}

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

	mapped []byte // munmap on close
	net    *netConn
}

// Notify wakes the proxy of a net connection after the counters moved.
func (c *Conn) Notify() {
	if c.net != nil {
		c.net.notify()
	}
}

// NetCounters are the proxy's step counters of a net connection (see
// the progress loop): posted, transmitted, received, done, and the
// number of flushes. Timeouts counts the times the connection's progress
// loop (shared by the rank's net connections) woke from its idle timer
// instead of an event: a wake-up nobody sent, or a device that moves the
// counters without Notify and without PollCounters.
type NetCounters struct {
	Posted, Transmitted, Received, Done, Flushes uint64
	Timeouts                                     uint64
}

// NetCounters reads the proxy counters; false for other transports.
func (c *Conn) NetCounters() (NetCounters, bool) {
	if c.net == nil {
		return NetCounters{}, false
	}
	n := c.net
	nc := NetCounters{Posted: n.Posted.Load(), Transmitted: n.Transmitted.Load(), Received: n.Received.Load(), Done: n.Done.Load(), Flushes: n.Flushes.Load()}
	if n.timeouts != nil {
		nc.Timeouts = n.timeouts.Load()
	}
	return nc, true
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
	// Flush is the net transport's flush hook (a no-op when nil).
	Flush FlushFunc
	Log   *slog.Logger
}

// Set is a rank's connections and the state their transports share: its
// proxy service and a client of it, and clients of the same-host peers'
// proxies (to fetch shm segments).
type Set struct {
	comm   *bootstrap.Comm
	cfg    Config
	mu     sync.Mutex
	conns  map[Key]*Conn
	ids    map[Key]uint64 // proxy connection ids
	svc    *ProxyService
	client *ProxyClient
	peers  map[int]*ProxyClient
	shared bool // SharedInit done
}

// NewSet prepares the transports of one rank and starts its proxy.
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
	svc, err := NewProxyService(comm, cfg)
	if err != nil {
		return nil, fmt.Errorf("transport rank %d: %w", comm.Rank(), err)
	}
	client, err := DialProxy(comm, comm.Rank())
	if err != nil {
		svc.Close()
		return nil, fmt.Errorf("transport rank %d: %w", comm.Rank(), err)
	}
	return &Set{comm: comm, cfg: cfg, conns: map[Key]*Conn{}, ids: map[Key]uint64{}, svc: svc, client: client, peers: map[int]*ProxyClient{}}, nil
}

// Proxy is the rank's proxy service.
func (s *Set) Proxy() *ProxyService { return s.svc }

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
// not hold yet, as NCCL does: choose the transport (shm, then net); Init
// a proxy connection for every net side and every shm receiver, then
// SharedInit and Setup (receivers listen or create their segment); send
// the connect info to the peers in one batch; then connect: net sides
// through asynchronous Connect requests answered as they complete, shm
// senders by fetching the segment's descriptor from the receiver's proxy
// (ConvertFd) and mapping it. Every rank must call it with the same keys
// in the same order.
func (s *Set) Connect(keys []Key) ([]*Conn, error) {
	me := s.comm.Rank()
	type pending struct {
		c    *Conn
		id   uint64 // proxy connection
		op   uint64 // request in flight
		info []byte
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
	}
	fail := func(err error) ([]*Conn, error) {
		for _, p := range todo {
			if p.id != 0 {
				if _, cerr := s.client.Call(ProxyClose, binary.LittleEndian.AppendUint64(nil, p.id)); cerr != nil {
					s.cfg.Log.Warn("transport: closing a proxy connection after a failed connect", "key", p.c.Key, "err", cerr)
				}
			}
			p.c.close()
		}
		return nil, err
	}
	// Init: one proxy connection per net side and shm receiver.
	needNet := false
	for _, p := range todo {
		if p.c.Kind == KindSHM && p.c.Send {
			continue
		}
		needNet = needNet || p.c.Kind == KindNet
		op, err := s.client.CallAsync(ProxyInit, initReq(p.c.Kind, p.c.Send, p.c.Peer, p.c.Key))
		if err != nil {
			return fail(err)
		}
		p.op = op
	}
	for _, p := range todo {
		if p.op == 0 {
			continue
		}
		resp, _, err := s.client.Wait(p.op)
		p.op = 0
		if err == nil && len(resp) != 8 {
			err = fmt.Errorf("init answer of %d bytes", len(resp))
		}
		if err != nil {
			return fail(fmt.Errorf("transport rank %d: proxy init for %v: %w", me, p.c.Key, err))
		}
		p.id = binary.LittleEndian.Uint64(resp)
	}
	if needNet && !s.shared {
		if _, err := s.client.Call(ProxySharedInit, nil); err != nil {
			return fail(fmt.Errorf("transport rank %d: proxy shared init: %w", me, err))
		}
		s.shared = true
	}
	// Setup: receivers listen (net) or create their segment (shm).
	for _, p := range todo {
		if p.c.Send {
			continue
		}
		info, err := s.client.Call(ProxySetup, binary.LittleEndian.AppendUint64(nil, p.id))
		if err != nil {
			return fail(fmt.Errorf("transport rank %d: %s setup for %v from rank %d: %w", me, p.c.Kind, p.c.Key, p.c.Peer, err))
		}
		p.info = info
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
	// Connect: every net side asynchronously, then the shm senders.
	for _, p := range todo {
		if p.c.Kind != KindNet {
			continue
		}
		req := binary.LittleEndian.AppendUint64(nil, p.id)
		if p.c.Send {
			req = append(req, p.info...)
		}
		op, err := s.client.CallAsync(ProxyConnect, req)
		if err != nil {
			return fail(err)
		}
		p.op = op
	}
	for _, p := range todo {
		c := p.c
		if c.Kind == KindSHM && c.Send {
			if err := s.shmOpen(c, p.info); err != nil {
				return fail(fmt.Errorf("transport rank %d: connect %v shm with rank %d: %w", me, c.Key, c.Peer, err))
			}
		}
	}
	for _, p := range todo {
		if p.op == 0 {
			continue
		}
		_, _, err := s.client.Wait(p.op)
		p.op = 0
		if err != nil {
			return fail(fmt.Errorf("transport rank %d: connect %v %s with rank %d: %w", me, p.c.Key, p.c.Kind, p.c.Peer, err))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, k := range keys {
		if out[i] != nil || (k.From != me && k.To != me) {
			continue
		}
		for _, p := range todo {
			if p.c.Key != k {
				continue
			}
			if p.id != 0 {
				c := s.svc.conn(p.id)
				if c == nil {
					return nil, fmt.Errorf("transport rank %d: proxy connection %d for %v not ready", me, p.id, k)
				}
				p.c = c
				s.ids[k] = p.id
			}
			s.conns[k] = p.c
			out[i] = p.c
		}
	}
	return out, nil
}

// shmOpen maps the segment of an shm receiver: its descriptor comes from
// the receiver's proxy (ConvertFd over the Unix socket), so that the
// segment has no name anyone could leave behind.
func (s *Set) shmOpen(c *Conn, info []byte) error {
	if len(info) != 8 {
		return fmt.Errorf("shm connect info of %d bytes", len(info))
	}
	pc := s.peers[c.Peer]
	if pc == nil {
		var err error
		if pc, err = DialProxy(s.comm, c.Peer); err != nil {
			return err
		}
		s.peers[c.Peer] = pc
	}
	op, err := pc.CallAsync(ProxyConvertFd, info)
	if err != nil {
		return err
	}
	resp, fd, err := pc.Wait(op)
	if err != nil {
		return err
	}
	if fd < 0 {
		return fmt.Errorf("the proxy of rank %d sent no descriptor", c.Peer)
	}
	defer syscall.Close(fd)
	if len(resp) != 8 || binary.LittleEndian.Uint64(resp) != MemBytes {
		return fmt.Errorf("the proxy of rank %d describes a segment of another size", c.Peer)
	}
	m, err := mapFd(fd)
	if err != nil {
		return err
	}
	c.mapped, c.Mem = m, Mem(m)
	return nil
}

// Close stops the proxy (Stop message; its progress loop says goodbye on
// the net connections) and releases every connection.
func (s *Set) Close() error {
	var errs []error
	if _, err := s.client.Call(ProxyStop, nil); err != nil {
		errs = append(errs, err)
	}
	s.svc.Close()
	s.client.Close()
	for _, pc := range s.peers {
		pc.Close()
	}
	s.mu.Lock()
	conns := s.conns
	s.conns = map[Key]*Conn{}
	s.mu.Unlock()
	for _, c := range conns {
		if err := c.close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ShmPrefix starts the name of every shm segment twinccl creates (each
// is unlinked as soon as it is created).
const ShmPrefix = "twinccl-"

func (c *Conn) close() error {
	var errs []error
	if c.net != nil {
		if err := c.net.close(); err != nil {
			errs = append(errs, err)
		}
	}
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
