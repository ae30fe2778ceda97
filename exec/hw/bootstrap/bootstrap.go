// Package bootstrap is twinccl's out-of-band bootstrap network (NCCL's
// bootstrap.cc, nccl-facts §10): a unique id holding a random magic and
// the root's address; a root that gathers every rank's listen address and
// hands the table back; a ring of sockets for AllGather; point-to-point
// messages on fresh connections matched by (peer, tag); a dissemination
// barrier; and liveness connections that name a lost peer when its process
// dies or stops answering heartbeats. Every connection starts with a
// hello (the public magic, the socket type, the sender's rank, the job
// size) and a challenge-response proving the job's secret (exec/hw/auth);
// connections that do not prove it are refused and logged without either
// value. Every read is bounded by a per-type frame size and a deadline,
// unreceived messages by a queue bound, and unproven connections per
// listener by MaxPending.
package bootstrap

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
)

// UniqueID identifies one job (ncclUniqueId's ncclBootstrapHandle): a
// random public magic, the root's address, and the job's secret, which
// every connection proves. Like NCCL's unique id it is what a rank needs
// to join, so it is passed only where the job's user alone can read it
// (a process environment, a 0600 file).
type UniqueID struct {
	Magic  uint64
	Addr   string // host:port of the root
	Secret auth.Secret
}

// String encodes the id as "magic@host:port#secret" (hex), the form
// ParseUniqueID reads; it carries the secret, so it must not be logged
// (Public is the loggable part).
func (u UniqueID) String() string { return u.Public() + "#" + u.Secret.Hex() }

// Public is "magic@host:port", without the secret.
func (u UniqueID) Public() string { return fmt.Sprintf("%016x@%s", u.Magic, u.Addr) }

// LogValue keeps the secret out of structured logs.
func (u UniqueID) LogValue() slog.Value { return slog.StringValue(u.Public()) }

// ParseUniqueID reads what String writes. Error messages never repeat
// the secret.
func ParseUniqueID(s string) (UniqueID, error) {
	pub, sec, ok := strings.Cut(s, "#")
	if !ok {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %q: want magic@host:port#secret", s)
	}
	m, a, ok := strings.Cut(pub, "@")
	if !ok {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %q: want magic@host:port#secret", pub)
	}
	v, err := strconv.ParseUint(m, 16, 64)
	if err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %q: magic: %w", pub, err)
	}
	if _, _, err := net.SplitHostPort(a); err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %q: address: %w", pub, err)
	}
	secret, err := auth.ParseSecret(sec)
	if err != nil {
		return UniqueID{}, fmt.Errorf("bootstrap: unique id %q: %w", pub, err)
	}
	return UniqueID{Magic: v, Addr: a, Secret: secret}, nil
}

// RandomMagic returns 8 random bytes as the job magic (ncclGetUniqueId).
// The magic is public (it names shared-memory segments and refuses
// another job's connections quickly); the secret is auth.NewSecret.
func RandomMagic() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return binary.LittleEndian.Uint64(b[:])
}

// StaggerThreshold and StaggerRate are NCCL_UID_STAGGER_THRESHOLD and
// NCCL_UID_STAGGER_RATE: above that many ranks, rank r waits r/rate
// seconds before contacting the root.
const (
	StaggerThreshold = 256
	StaggerRate      = 7000.0
)

// DefaultTimeout bounds every bootstrap operation when Config.Timeout is 0.
const DefaultTimeout = 60 * time.Second

// rankInfo is what a rank tells the root.
type rankInfo struct {
	Rank int
	Addr string
}

// Root gathers the ranks' addresses and sends the whole table back.
type Root struct {
	ln      net.Listener
	id      UniqueID
	nranks  int
	timeout time.Duration
	log     *slog.Logger
	acc     *Acceptor
	arrive  chan rootArrival
	stop    chan struct{} // Close asks serve to give up
	quit    chan struct{} // serve is ending: handlers stop offering ranks
	done    chan struct{}
	err     error
}

type rootArrival struct {
	rank int
	addr string
	c    net.Conn
}

// StartRoot is StartRootSecret with a fresh random secret (the launcher's
// and single-process jobs' case).
func StartRoot(host string, magic uint64, nranks int, timeout time.Duration, log *slog.Logger) (*Root, error) {
	return StartRootSecret(host, magic, auth.NewSecret(), nranks, timeout, log)
}

// StartRootSecret listens on host, or host:port (without a port one is
// picked) and serves one job of nranks ranks in the background. The
// returned Root's ID is what every rank passes to Init. Connections are
// handled concurrently, each with its own handshake deadline, so that
// silent or hostile ones do not hold up the ranks.
func StartRootSecret(host string, magic uint64, secret auth.Secret, nranks int, timeout time.Duration, log *slog.Logger) (*Root, error) {
	if nranks < 1 {
		return nil, fmt.Errorf("bootstrap root: %d ranks", nranks)
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	addr := host
	if _, _, err := net.SplitHostPort(host); err != nil {
		addr = net.JoinHostPort(host, "0")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("bootstrap root: listen on %s: %w", addr, err)
	}
	r := &Root{ln: ln, id: UniqueID{Magic: magic, Addr: ln.Addr().String(), Secret: secret}, nranks: nranks, timeout: timeout, log: log,
		arrive: make(chan rootArrival), stop: make(chan struct{}), quit: make(chan struct{}), done: make(chan struct{})}
	r.acc = NewAcceptor(ln, max(MaxPending, nranks), log, r.handle)
	go r.serve()
	return r, nil
}

// ID is the job's unique id.
func (r *Root) ID() UniqueID { return r.id }

// Wait blocks until the root has served every rank or failed.
func (r *Root) Wait() error { <-r.done; return r.err }

// Close stops the root (ranks still connecting fail) and waits for it.
func (r *Root) Close() error {
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	<-r.done
	return r.err
}

// handle takes one connection: hello and proof, then the rank's address.
func (r *Root) handle(c net.Conn, proven func()) {
	deadline := handshakeDeadline(r.timeout)
	h, err := ReadHello(c, r.id.Magic, r.id.Secret, r.nranks, deadline)
	if err == nil && h.Type != TypeRoot {
		err = fmt.Errorf("socket type %d is not a root connection", h.Type)
	}
	if err != nil {
		r.log.Warn("bootstrap root: refused connection", "remote", c.RemoteAddr().String(), "err", err)
		c.Close()
		return
	}
	proven()
	b, err := ReadFrame(c, MaxAddrLen, deadline)
	if err != nil {
		r.log.Warn("bootstrap root: bad info", "rank", h.Rank, "err", err)
		c.Close()
		return
	}
	select {
	case r.arrive <- rootArrival{rank: int(h.Rank), addr: string(b), c: c}:
	case <-r.quit:
		c.Close()
	}
}

func (r *Root) serve() {
	defer close(r.done)
	conns := make([]net.Conn, r.nranks)
	addrs := make([]string, r.nranks)
	defer func() {
		close(r.quit)
		r.acc.Close()
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	timer := time.NewTimer(r.timeout)
	defer timer.Stop()
	deadline := time.Now().Add(r.timeout)
	for got := 0; got < r.nranks; {
		select {
		case a := <-r.arrive:
			if conns[a.rank] != nil {
				r.log.Warn("bootstrap root: duplicate rank refused", "rank", a.rank)
				a.c.Close()
				continue
			}
			conns[a.rank], addrs[a.rank] = a.c, a.addr
			got++
		case <-timer.C:
			r.err = fmt.Errorf("bootstrap root: %d of %d ranks arrived: timed out after %v (missing: %s)", got, r.nranks, r.timeout, missing(conns))
			return
		case <-r.stop:
			r.err = fmt.Errorf("bootstrap root: %d of %d ranks arrived: closed (missing: %s)", got, r.nranks, missing(conns))
			return
		}
	}
	table := []byte(strings.Join(addrs, "\n"))
	for rank, c := range conns {
		if err := WriteFrame(c, table, deadline); err != nil {
			r.err = fmt.Errorf("bootstrap root: send address table to rank %d: %w", rank, err)
			return
		}
	}
}

// missing lists the ranks without a connection, abbreviated past 8.
func missing(conns []net.Conn) string {
	var m []string
	for r, c := range conns {
		if c == nil {
			if len(m) == 8 {
				m = append(m, "...")
				break
			}
			m = append(m, strconv.Itoa(r))
		}
	}
	return strings.Join(m, ", ")
}

// Config describes one rank's bootstrap.
type Config struct {
	Rank, NRanks int
	ID           UniqueID
	// Host is the address to listen on ("" picks one with ListenAddr and
	// TWINCCL_SOCKET_IFNAME).
	Host string
	// Timeout bounds every operation (DefaultTimeout when 0).
	Timeout time.Duration
	// Watch opens liveness connections to every peer (jobs up to
	// MaxWatchRanks ranks; larger jobs watch their ring neighbours only).
	Watch bool
	// HeartbeatTimeout is how long a watched peer may stay silent before
	// it is named lost (a stopped or hung process keeps its sockets open,
	// so only missing heartbeats show it); when 0, TWINCCL_HEARTBEAT_TIMEOUT
	// or DefaultHeartbeatTimeout (HeartbeatTimeoutFromEnv).
	// Heartbeats go out every HeartbeatTimeout/HeartbeatsPerTimeout.
	HeartbeatTimeout time.Duration
	Log              *slog.Logger
}

// MaxWatchRanks bounds the full mesh of liveness connections.
const MaxWatchRanks = 64

// Bounds of the queue of messages received but not yet taken by Recv:
// beyond them a message is dropped (and logged), never kept.
const (
	MaxQueuedPerPeer = 1024
	MaxQueuedBytes   = 64 << 20
)

type msgKey struct {
	peer int
	tag  uint32
}

// Handler takes connections of a socket type other than the bootstrap's
// own (the net transport's data connections arrive on the same listener).
// The connection has proved the job's secret and its Hello.Rank.
type Handler func(h Hello, c net.Conn)

// Comm is one rank's bootstrap endpoint.
type Comm struct {
	rank, nranks int
	magic        uint64
	secret       auth.Secret
	timeout      time.Duration
	heartbeat    time.Duration // heartbeat timeout
	log          *slog.Logger
	ln           net.Listener
	acc          *Acceptor
	addrs        []string
	next, prev   net.Conn
	ringCh       chan net.Conn

	mu       sync.Mutex
	cond     *sync.Cond
	mailbox  map[msgKey][][]byte
	queued   map[int]int // messages queued per peer
	qbytes   int         // bytes queued
	dropped  int         // messages dropped over the bounds
	handlers map[uint32]Handler
	closed   bool
	lost     int // first lost peer, -1 while none
	lostErr  error
	lostCh   chan struct{}
	watches  []*watchConn
	watching map[int]bool // peers with a liveness connection
	barrier  uint32
	beatStop chan struct{}

	wg      sync.WaitGroup
	aborted atomic.Bool
}

// Init runs the bootstrap of one rank: listen, send the listen address to
// the root, receive every rank's address, connect the ring (send to next,
// accept from prev) and, with Config.Watch, the liveness connections.
func Init(cfg Config) (*Comm, error) {
	if cfg.NRanks < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.NRanks {
		return nil, fmt.Errorf("bootstrap: rank %d of %d out of range", cfg.Rank, cfg.NRanks)
	}
	if cfg.ID.Secret.IsZero() {
		return nil, fmt.Errorf("bootstrap rank %d: the unique id has no secret", cfg.Rank)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.HeartbeatTimeout <= 0 {
		d, err := HeartbeatTimeoutFromEnv()
		if err != nil {
			return nil, fmt.Errorf("bootstrap rank %d: %w", cfg.Rank, err)
		}
		cfg.HeartbeatTimeout = d
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	host := cfg.Host
	if host == "" {
		var err error
		if host, err = ListenAddr(""); err != nil {
			return nil, fmt.Errorf("bootstrap rank %d: %w", cfg.Rank, err)
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("bootstrap rank %d: listen on %s: %w", cfg.Rank, host, err)
	}
	c := &Comm{rank: cfg.Rank, nranks: cfg.NRanks, magic: cfg.ID.Magic, secret: cfg.ID.Secret, timeout: cfg.Timeout, heartbeat: cfg.HeartbeatTimeout,
		log: cfg.Log.With("rank", cfg.Rank), ln: ln, ringCh: make(chan net.Conn, 1),
		mailbox: map[msgKey][][]byte{}, queued: map[int]int{}, handlers: map[uint32]Handler{}, lost: -1, lostCh: make(chan struct{}),
		watching: map[int]bool{}, beatStop: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	c.acc = NewAcceptor(ln, max(MaxPending, cfg.NRanks), c.log, c.handle)
	if err := c.init(cfg); err != nil {
		c.Abort()
		return nil, err
	}
	return c, nil
}

// StartLocal bootstraps the n ranks of one job in this process over
// loopback (tests, single-process tools): a root, then every rank's Init
// at once with cfg's Timeout, Watch, HeartbeatTimeout and Log. On error
// no rank is left open.
func StartLocal(n int, cfg Config) ([]*Comm, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	root, err := StartRoot("127.0.0.1", RandomMagic(), n, cfg.Timeout, cfg.Log)
	if err != nil {
		return nil, err
	}
	comms := make([]*Comm, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc := cfg
			rc.Rank, rc.NRanks, rc.ID, rc.Host = r, n, root.ID(), "127.0.0.1"
			comms[r], errs[r] = Init(rc)
		}()
	}
	wg.Wait()
	errs = append(errs, root.Wait())
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
		return nil, err
	}
	return comms, nil
}

func (c *Comm) init(cfg Config) error {
	deadline := time.Now().Add(c.timeout)
	if c.nranks > StaggerThreshold {
		time.Sleep(time.Duration(float64(c.rank) / StaggerRate * float64(time.Second)))
	}
	// Root exchange.
	rc, err := Dial(cfg.ID.Addr, c.hello(TypeRoot), c.secret, deadline)
	if err != nil {
		return fmt.Errorf("bootstrap rank %d: root %s: %w", c.rank, cfg.ID.Addr, err)
	}
	defer rc.Close()
	if err := WriteFrame(rc, []byte(c.ln.Addr().String()), deadline); err != nil {
		return fmt.Errorf("bootstrap rank %d: send address to root %s: %w", c.rank, cfg.ID.Addr, err)
	}
	table, err := ReadFrame(rc, c.nranks*(MaxAddrLen+1), deadline)
	if err != nil {
		return fmt.Errorf("bootstrap rank %d: address table from root %s: %w", c.rank, cfg.ID.Addr, err)
	}
	c.addrs = strings.Split(string(table), "\n")
	if len(c.addrs) != c.nranks {
		return fmt.Errorf("bootstrap rank %d: root sent %d addresses for %d ranks", c.rank, len(c.addrs), c.nranks)
	}
	// Ring.
	next := (c.rank + 1) % c.nranks
	if c.next, err = Dial(c.addrs[next], c.hello(TypeRing), c.secret, deadline); err != nil {
		return fmt.Errorf("bootstrap rank %d: ring connection to next rank %d: %w", c.rank, next, err)
	}
	select {
	case c.prev = <-c.ringCh:
	case <-time.After(time.Until(deadline)):
		return fmt.Errorf("bootstrap rank %d: ring connection from previous rank %d: timed out after %v", c.rank, (c.rank+c.nranks-1)%c.nranks, c.timeout)
	}
	if cfg.Watch {
		if err := c.startWatch(deadline); err != nil {
			return err
		}
	}
	return nil
}

func (c *Comm) hello(t uint32) Hello {
	return Hello{Magic: c.magic, Type: t, Rank: uint32(c.rank), NRanks: uint32(c.nranks)}
}

// Rank is this rank; NRanks the job size.
func (c *Comm) Rank() int   { return c.rank }
func (c *Comm) NRanks() int { return c.nranks }

// Timeout is the bound of every operation.
func (c *Comm) Timeout() time.Duration { return c.timeout }

// Magic is the job's public magic (it may name things others can list).
func (c *Comm) Magic() uint64 { return c.magic }

// Secret is the job's secret, for the transports' own handshakes (never
// to be logged or put in a name).
func (c *Comm) Secret() auth.Secret { return c.secret }

// Addr is the listen address of rank r.
func (c *Comm) Addr(r int) string { return c.addrs[r] }

// Handle registers h for incoming connections of socket type t.
func (c *Comm) Handle(t uint32, h Handler) {
	c.mu.Lock()
	c.handlers[t] = h
	c.mu.Unlock()
}

// Dial opens a connection of socket type t to rank peer's listener.
func (c *Comm) Dial(peer int, t uint32) (net.Conn, error) {
	if peer < 0 || peer >= c.nranks {
		return nil, fmt.Errorf("bootstrap rank %d: peer %d out of range", c.rank, peer)
	}
	conn, err := Dial(c.addrs[peer], c.hello(t), c.secret, time.Now().Add(c.timeout))
	if err != nil {
		return nil, fmt.Errorf("bootstrap rank %d: connect to rank %d: %w", c.rank, peer, err)
	}
	return conn, nil
}

// handle serves one accepted connection: the handshake (bounded by
// HandshakeTimeout), then the socket type's handler.
func (c *Comm) handle(conn net.Conn, proven func()) {
	h, err := ReadHello(conn, c.magic, c.secret, c.nranks, handshakeDeadline(c.timeout))
	if err != nil {
		c.log.Warn("bootstrap: refused connection", "remote", conn.RemoteAddr().String(), "err", err)
		conn.Close()
		return
	}
	proven()
	prev := (c.rank + c.nranks - 1) % c.nranks
	switch h.Type {
	case TypeRing:
		if int(h.Rank) != prev {
			c.log.Warn("bootstrap: refused ring connection from a rank that is not the previous one", "from", h.Rank, "want", prev)
			conn.Close()
			return
		}
		select {
		case c.ringCh <- conn:
		default:
			c.log.Warn("bootstrap: refused second ring connection", "from", h.Rank)
			conn.Close()
		}
	case TypeP2P:
		c.recvP2P(int(h.Rank), conn)
	case TypeWatch:
		c.addWatch(int(h.Rank), conn)
	default:
		c.mu.Lock()
		hd := c.handlers[h.Type]
		c.mu.Unlock()
		if hd == nil {
			c.log.Warn("bootstrap: refused connection of unknown type", "from", h.Rank, "type", h.Type)
			conn.Close()
			return
		}
		hd(h, conn)
	}
}

// recvP2P reads one {tag, data} message and queues it for Recv.
func (c *Comm) recvP2P(peer int, conn net.Conn) {
	defer conn.Close()
	deadline := time.Now().Add(c.timeout)
	hdr, err := ReadFrame(conn, 4, deadline)
	if err == nil && len(hdr) != 4 {
		err = fmt.Errorf("tag of %d bytes", len(hdr))
	}
	var data []byte
	if err == nil {
		data, err = ReadFrame(conn, MaxMessage, deadline)
	}
	if err != nil {
		c.log.Warn("bootstrap: dropped malformed message", "from", peer, "err", err)
		return
	}
	k := msgKey{peer, le.Uint32(hdr)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.queued[peer] >= MaxQueuedPerPeer || c.qbytes+len(data) > MaxQueuedBytes {
		c.dropped++
		c.log.Warn("bootstrap: dropped a message: too many unreceived", "from", peer, "tag", k.tag,
			"queued from it", c.queued[peer], "bytes queued", c.qbytes)
		return
	}
	c.mailbox[k] = append(c.mailbox[k], data)
	c.queued[peer]++
	c.qbytes += len(data)
	c.cond.Broadcast()
}

// Queued is the number of messages and bytes received but not yet taken
// by Recv, and the number dropped over the bounds.
func (c *Comm) Queued() (msgs, bytes, dropped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.queued {
		msgs += n
	}
	return msgs, c.qbytes, c.dropped
}

// Send delivers data to rank peer under tag (bootstrapSend: a fresh
// connection per message).
func (c *Comm) Send(peer int, tag uint32, data []byte) error {
	if err := c.Err(); err != nil {
		return err
	}
	if len(data) > MaxMessage {
		return fmt.Errorf("bootstrap rank %d: message of %d bytes to rank %d exceeds the %d-byte limit", c.rank, len(data), peer, MaxMessage)
	}
	conn, err := c.Dial(peer, TypeP2P)
	if err != nil {
		return err
	}
	defer conn.Close()
	var t [4]byte
	le.PutUint32(t[:], tag)
	deadline := time.Now().Add(c.timeout)
	if err := WriteFrame(conn, t[:], deadline); err != nil {
		return fmt.Errorf("bootstrap rank %d: send tag %#x to rank %d: %w", c.rank, tag, peer, err)
	}
	if err := WriteFrame(conn, data, deadline); err != nil {
		return fmt.Errorf("bootstrap rank %d: send tag %#x to rank %d: %w", c.rank, tag, peer, err)
	}
	return nil
}

// Recv waits for the next message from rank peer under tag.
func (c *Comm) Recv(peer int, tag uint32) ([]byte, error) {
	k := msgKey{peer, tag}
	deadline := time.Now().Add(c.timeout)
	timer := time.AfterFunc(c.timeout, func() {
		c.mu.Lock()
		c.cond.Broadcast()
		c.mu.Unlock()
	})
	defer timer.Stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		if q := c.mailbox[k]; len(q) > 0 {
			c.mailbox[k] = q[1:]
			if len(q) == 1 {
				delete(c.mailbox, k)
			}
			c.queued[peer]--
			c.qbytes -= len(q[0])
			return q[0], nil
		}
		if c.closed {
			return nil, fmt.Errorf("bootstrap rank %d: receive from rank %d: closed", c.rank, peer)
		}
		if c.lostErr != nil {
			return nil, c.lostErr
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("bootstrap rank %d: receive tag %#x from rank %d: timed out after %v", c.rank, tag, peer, c.timeout)
		}
		c.cond.Wait()
	}
}

// AllGather gathers every rank's data (each may differ in size) over the
// bootstrap ring: n-1 steps, at step s sending slice (r-s) to next and
// receiving slice (r-s-1) from prev.
func (c *Comm) AllGather(data []byte) ([][]byte, error) {
	n := c.nranks
	out := make([][]byte, n)
	out[c.rank] = append([]byte(nil), data...)
	deadline := time.Now().Add(c.timeout)
	for s := 0; s < n-1; s++ {
		send := out[(c.rank-s+n)%n]
		errc := make(chan error, 1)
		go func() { errc <- WriteFrame(c.next, send, deadline) }()
		got, rerr := ReadFrame(c.prev, MaxMessage, deadline)
		werr := <-errc
		if rerr != nil {
			return nil, c.wrap(fmt.Errorf("bootstrap rank %d: allgather step %d: receive from rank %d: %w", c.rank, s, (c.rank+n-1)%n, rerr))
		}
		if werr != nil {
			return nil, c.wrap(fmt.Errorf("bootstrap rank %d: allgather step %d: send to rank %d: %w", c.rank, s, (c.rank+1)%n, werr))
		}
		out[(c.rank-s-1+2*n)%n] = got
	}
	return out, nil
}

// barrierTag marks barrier messages (round k of barrier number b).
func barrierTag(b uint32, k int) uint32 { return 1<<31 | (b&0xffffff)<<6 | uint32(k) }

// Barrier is a dissemination barrier: round k sends to r+2^k and receives
// from r-2^k.
func (c *Comm) Barrier() error {
	c.mu.Lock()
	b := c.barrier
	c.barrier++
	c.mu.Unlock()
	n := c.nranks
	for k, d := 0, 1; d < n; k, d = k+1, d*2 {
		if err := c.Send((c.rank+d)%n, barrierTag(b, k), nil); err != nil {
			return c.wrap(fmt.Errorf("barrier round %d: %w", k, err))
		}
		if _, err := c.Recv((c.rank-d+n)%n, barrierTag(b, k)); err != nil {
			return c.wrap(fmt.Errorf("barrier round %d: %w", k, err))
		}
	}
	return nil
}

// wrap prefers the lost-peer error, which names the cause.
func (c *Comm) wrap(err error) error {
	if lerr := c.Err(); lerr != nil {
		return fmt.Errorf("%w (%v)", lerr, err)
	}
	return err
}

// ErrPeerLost is wrapped by the error a Comm reports when a peer's
// process went away without closing.
var ErrPeerLost = errors.New("peer lost")

// Err is the lost-peer error, or nil while every watched peer is alive.
func (c *Comm) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostErr
}

// Lost is closed when a watched peer is lost.
func (c *Comm) Lost() <-chan struct{} { return c.lostCh }

// LostPeer is the first lost rank, or -1.
func (c *Comm) LostPeer() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lost
}

// PeerLost records that rank peer is gone (transports call it on a broken
// data connection) and wakes every waiter.
func (c *Comm) PeerLost(peer int, cause error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.lostErr != nil {
		return
	}
	c.lost = peer
	c.lostErr = fmt.Errorf("bootstrap rank %d: rank %d lost: %w: %w", c.rank, peer, ErrPeerLost, cause)
	c.log.Error("peer lost", "peer", peer, "err", cause)
	close(c.lostCh)
	c.cond.Broadcast()
}

// Close says goodbye on the liveness connections, closes every socket and
// waits for the bootstrap's goroutines.
func (c *Comm) Close() error {
	c.shutdown(true)
	return nil
}

// Abort closes everything without goodbyes: peers see this rank as lost.
func (c *Comm) Abort() {
	c.aborted.Store(true)
	c.shutdown(false)
}

func (c *Comm) shutdown(bye bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	watches := c.watches
	lost := c.lost
	close(c.beatStop)
	c.cond.Broadcast()
	c.mu.Unlock()
	for _, w := range watches {
		switch {
		case bye:
			_ = w.write([]byte{watchBye}, time.Second)
		case lost >= 0:
			// Aborting because of a lost peer: pass its rank on, so that
			// every rank names the peer that died, not this one.
			var b [5]byte
			b[0] = watchReport
			le.PutUint32(b[1:], uint32(lost))
			_ = w.write(b[:], time.Second)
		}
		w.conn.Close()
	}
	c.acc.Close()
	select {
	case x := <-c.ringCh: // arrived after Init gave up
		x.Close()
	default:
	}
	for _, x := range []net.Conn{c.next, c.prev} {
		if x != nil {
			x.Close()
		}
	}
	c.wg.Wait()
}
