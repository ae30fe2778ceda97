package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
)

// netInit gives a connected net connection its private memory.
func (c *Conn) netInit(sc SendComm, rc RecvComm) error {
	m, err := anonMem()
	if err != nil {
		if sc != nil {
			sc.Close()
		}
		if rc != nil {
			rc.Close()
		}
		return fmt.Errorf("allocate connection memory: %w", err)
	}
	c.mapped, c.Mem = m, Mem(m)
	c.Mem.Init()
	c.net = &netConn{send: sc, recv: rc}
	return nil
}

// Plugin is the network plugin interface of the net transport (a reduced
// form of NCCL's ncclNet_t: listen/connect/accept, and asynchronous
// transfers isend/irecv completed by test). Nothing in it blocks: as in
// NCCL, connect and accept report "in progress" and the proxy's service
// loop calls them again on its next poll, so that one slow or silent
// peer holds up neither the loop nor the other connections. The proxy's
// progress loop drives transfers from one goroutine; they move when it
// tests them (the socket plugin by default, as NCCL's) or in the plugin's
// own helpers (the socket plugin with NCCL_SOCKET_NTHREADS set, the IB
// plugin).
type Plugin interface {
	Name() string
	// Init binds the plugin to the rank's bootstrap (its listener carries
	// the plugin's connections with the job's magic handshake).
	Init(comm *bootstrap.Comm) error
	// Listen prepares to accept one connection from rank peer and returns
	// the handle the peer connects with.
	Listen(peer int) (handle []byte, l Listener, err error)
	// StartConnect begins opening the send side of a connection to rank
	// peer with the handle of the peer's Listen; the Connector finishes
	// it.
	StartConnect(peer int, handle []byte) (Connector, error)
	Close() error
}

// Connector is the send side of a connection being opened (NCCL's
// connect, called again while it returns no comm).
type Connector interface {
	// TryConnect advances the connection without blocking: nil (and no
	// error) while it is in progress, the SendComm once it is up. After
	// an error the connector is spent.
	TryConnect() (SendComm, error)
	// Close abandons a connection that TryConnect has not returned; it
	// does not block.
	Close() error
}

// Listener accepts the connection a Listen handle announced.
type Listener interface {
	// TryAccept advances the accept without blocking: the receive side
	// once the peer connected, nil (and no error) while it has not yet.
	TryAccept() (RecvComm, error)
	Close() error
}

// Request is an asynchronous transfer; Test reports its completion. As
// with NCCL's net plugins, the Test that reports a request done (with or
// without an error) ends it: the plugin may reuse it for a later transfer,
// so the caller must not Test it again.
type Request interface {
	Test() (done bool, err error)
}

// WakeArmer is implemented by comms that call their wake function (see
// SendComm.SetWake) only once armed: a caller that polls Test needs no
// wake-up, and arming one for every Test that found nothing would cost a
// goroutine wake-up per message. A caller that is about to block arms its
// comms first; the next completion, or one that happened already, then
// calls the wake function once.
type WakeArmer interface {
	ArmWake()
}

// SendComm sends messages: a fixed HeaderSize header and a payload.
type SendComm interface {
	// Isend starts sending hdr then data; both must stay untouched until
	// the request is done.
	Isend(hdr, data []byte) (Request, error)
	// SetWake registers a function called whenever a request completes
	// other than in a Test of the progress loop (in a helper, or while
	// the loop sleeps: the loop sleeps on it when idle).
	SetWake(func())
	Close() error
}

// RecvComm receives what a SendComm sent: the header, then the payload
// into a buffer of the size the header announced. Requests complete in
// the order they were posted.
type RecvComm interface {
	IrecvHeader(hdr []byte) (Request, error)
	Irecv(data []byte) (Request, error)
	SetWake(func())
	Close() error
}

// HeaderSize is the size of a message header.
const HeaderSize = 32

// SocketOptions tune the socket plugin.
type SocketOptions struct {
	// NThreads is NCCL_SOCKET_NTHREADS (TWINCCL_SOCKET_NTHREADS): helper
	// goroutines per connection. 0, NCCL's default, means none: one
	// socket per connection, moved by the proxy itself (inlineComm).
	NThreads int
	// NSocksPerThread is NCCL_NSOCKS_PERTHREAD (TWINCCL_NSOCKS_PERTHREAD).
	NSocksPerThread int
	// MinChunk is the smallest part of a message put on one socket.
	MinChunk int
	// Gather sends a message's header and payload with one system call
	// (sendmsg of both buffers) on connections without helper threads;
	// off (TWINCCL_SOCKET_GATHER=0), each buffer gets a call of its own.
	// NCCL's plugin joins only payloads of up to NCCL_SOCKET_INLINE (128)
	// bytes to their header; one call for every message also keeps
	// larger ones from costing more after a run of small ones.
	Gather bool
	// ReadAhead is the read-ahead buffer of the receive side of a
	// connection without helper threads (TWINCCL_SOCKET_READAHEAD, bytes;
	// 0, the default: none). A read for a header fills it as far as the
	// socket has bytes, so that a payload that arrived with its header
	// (Gather) costs no read of its own. Measured on the H100 pair's
	// split-host sockets (testdata/hw/h100x2/readahead-ab): AllGather and
	// AllReduce LL of 8 B-4 KiB mostly 1-12% faster (a few rows up to 4%
	// slower), but 32 KiB calls up to 1.16x (4096 bytes) and 1.46x (256)
	// slower in one A/B each, against run-to-run moves of 10% there; so
	// it stays off.
	ReadAhead int
}

// maxReadAhead bounds SocketOptions.ReadAhead.
const maxReadAhead = 1 << 20

// SocketOptionsFromEnv reads TWINCCL_SOCKET_NTHREADS and
// TWINCCL_NSOCKS_PERTHREAD (NCCL_* names are read when ours are unset),
// TWINCCL_SOCKET_GATHER and TWINCCL_SOCKET_READAHEAD; the default is
// NCCL's (no helper thread, one socket), with every header and payload
// gathered into one call, and no read-ahead.
func SocketOptionsFromEnv() SocketOptions {
	get := func(def int, names ...string) int {
		for _, n := range names {
			if v, err := strconv.Atoi(os.Getenv(n)); err == nil && v >= 0 {
				return v
			}
		}
		return def
	}
	o := SocketOptions{
		NThreads:        get(0, "TWINCCL_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS"),
		NSocksPerThread: get(1, "TWINCCL_NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD"),
		MinChunk:        64 << 10,
		Gather:          get(1, "TWINCCL_SOCKET_GATHER") != 0,
		ReadAhead:       min(get(0, "TWINCCL_SOCKET_READAHEAD"), maxReadAhead),
	}
	o.NThreads, o.NSocksPerThread = min(o.NThreads, 16), min(o.NSocksPerThread, 16)
	return o
}

// Socket is the TCP network plugin.
type Socket struct {
	opt     SocketOptions
	comm    *bootstrap.Comm
	mu      sync.Mutex
	next    uint64
	pending map[uint64]*sockListener
}

// NewSocket returns the socket plugin.
func NewSocket(opt SocketOptions) *Socket {
	opt.NThreads, opt.NSocksPerThread = max(0, opt.NThreads), max(1, opt.NSocksPerThread)
	if opt.MinChunk <= 0 {
		opt.MinChunk = 64 << 10
	}
	return &Socket{opt: opt, pending: map[uint64]*sockListener{}}
}

// Name is "Socket".
func (s *Socket) Name() string { return "Socket" }

// nsocks is the number of sockets of a connection: NThreads ×
// NSocksPerThread, or one without helper threads.
func (s *Socket) nsocks() int { return max(1, s.opt.NThreads*s.opt.NSocksPerThread) }

// Init registers the plugin's handler on the bootstrap listener.
func (s *Socket) Init(comm *bootstrap.Comm) error {
	s.comm = comm
	comm.Handle(bootstrap.TypeNet, s.handle)
	return nil
}

// handle takes a data socket: {key u64, index u32} then it belongs to the
// listener of that key, which acknowledges it with one byte; anything
// else is refused (closed without the byte).
func (s *Socket) handle(h bootstrap.Hello, c net.Conn) {
	var b [12]byte
	_ = c.SetReadDeadline(time.Now().Add(s.comm.Timeout()))
	_, err := io.ReadFull(c, b[:])
	_ = c.SetReadDeadline(time.Time{})
	key, idx := binary.LittleEndian.Uint64(b[:]), int(binary.LittleEndian.Uint32(b[8:]))
	s.mu.Lock()
	l := s.pending[key]
	s.mu.Unlock()
	if err != nil || l == nil || l.peer != int(h.Rank) || idx >= len(l.socks) || !l.deliver(idx, c) {
		slog.Default().Debug("socket plugin: refused data connection", "from", h.Rank, "key", key, "err", err)
		c.Close()
		return
	}
	_ = c.SetWriteDeadline(time.Now().Add(s.comm.Timeout()))
	if _, err := c.Write([]byte{sockAck}); err != nil {
		slog.Default().Debug("socket plugin: acknowledgement not sent", "to", h.Rank, "err", err)
	}
	_ = c.SetWriteDeadline(time.Time{})
}

// sockAck is the byte a listener answers each data socket with.
const sockAck = 0x5a

// Listen registers a listener for one connection from peer.
func (s *Socket) Listen(peer int) ([]byte, Listener, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next++
	l := &sockListener{s: s, key: s.next, peer: peer, socks: make([]net.Conn, s.nsocks()), ready: make(chan struct{})}
	s.pending[l.key] = l
	h := make([]byte, 12)
	binary.LittleEndian.PutUint64(h, l.key)
	binary.LittleEndian.PutUint32(h[8:], uint32(s.nsocks()))
	return h, l, nil
}

// StartConnect dials the peer's sockets of a Listen handle, each in a
// helper goroutine: dial, send {key, index}, wait for the listener's
// acknowledgement; TryConnect collects them.
func (s *Socket) StartConnect(peer int, handle []byte) (Connector, error) {
	if len(handle) != 12 {
		return nil, fmt.Errorf("socket plugin: handle of %d bytes from rank %d", len(handle), peer)
	}
	n := int(binary.LittleEndian.Uint32(handle[8:]))
	if n < 1 || n > 256 {
		return nil, fmt.Errorf("socket plugin: rank %d asks for %d sockets", peer, n)
	}
	c := &sockConnector{s: s, peer: peer, socks: make([]net.Conn, n), dialed: make(chan sockDialed, n), live: map[net.Conn]bool{}}
	for i := range n {
		var hello [12]byte
		copy(hello[:8], handle[:8])
		binary.LittleEndian.PutUint32(hello[8:], uint32(i))
		go c.dial(i, hello)
	}
	return c, nil
}

// sockConnector is the send side of a socket connection being opened.
type sockConnector struct {
	s      *Socket
	peer   int
	socks  []net.Conn
	got    int
	dialed chan sockDialed

	mu    sync.Mutex // guards live and spent against the helpers
	live  map[net.Conn]bool
	spent bool // returned, failed or closed
}

type sockDialed struct {
	i   int
	c   net.Conn
	err error
}

// dial opens socket i: connection, hello, acknowledgement (all bounded by
// the comm's timeout; Close interrupts the wait for the acknowledgement).
func (c *sockConnector) dial(i int, hello [12]byte) {
	conn, err := c.s.comm.Dial(c.peer, bootstrap.TypeNet)
	if err != nil {
		c.dialed <- sockDialed{i: i, err: err}
		return
	}
	c.mu.Lock()
	if c.spent {
		c.mu.Unlock()
		conn.Close()
		c.dialed <- sockDialed{i: i, err: errors.New("abandoned")}
		return
	}
	c.live[conn] = true
	c.mu.Unlock()
	_ = conn.SetDeadline(time.Now().Add(c.s.comm.Timeout()))
	_, err = conn.Write(hello[:])
	var ack [1]byte
	if err == nil {
		_, err = io.ReadFull(conn, ack[:])
		switch {
		case err == io.EOF:
			err = fmt.Errorf("rank %d refused it (no listener for this handle)", c.peer)
		case bootstrap.IsTimeout(err):
			err = fmt.Errorf("rank %d never answered within %v: %w", c.peer, c.s.comm.Timeout(), err)
		case err == nil && ack[0] != sockAck:
			err = fmt.Errorf("rank %d acknowledged with %#x", c.peer, ack[0])
		}
	}
	_ = conn.SetDeadline(time.Time{})
	c.mu.Lock()
	delete(c.live, conn)
	if err == nil && c.spent {
		err = errors.New("abandoned")
	}
	if err != nil {
		conn.Close()
		conn = nil
	}
	c.mu.Unlock()
	c.dialed <- sockDialed{i: i, c: conn, err: err}
}

// TryConnect collects the sockets dialled so far: the connection once
// every one is up.
func (c *sockConnector) TryConnect() (SendComm, error) {
	if c.spent {
		return nil, fmt.Errorf("socket plugin: connection to rank %d already returned, failed or closed", c.peer)
	}
	for c.got < len(c.socks) {
		select {
		case d := <-c.dialed:
			if d.err != nil {
				c.Close()
				return nil, fmt.Errorf("socket plugin: socket %d to rank %d: %w", d.i, c.peer, d.err)
			}
			c.socks[d.i] = d.c
			c.got++
		default:
			return nil, nil
		}
	}
	c.mu.Lock()
	c.spent = true
	c.mu.Unlock()
	return openSockComm(c.socks, c.s.opt, c.peer, true)
}

// Close abandons the connection: sockets up or waiting for their
// acknowledgement close now, helpers still dialling close theirs when
// they get them.
func (c *sockConnector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.spent && c.got == len(c.socks) {
		return nil // returned: the comm owns the sockets
	}
	c.spent = true
	for conn := range c.live {
		conn.Close()
	}
	for i, conn := range c.socks {
		if conn != nil {
			conn.Close()
			c.socks[i] = nil
		}
	}
	return nil
}

// Close releases pending listeners.
func (s *Socket) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, l := range s.pending {
		l.closeSocks()
		delete(s.pending, k)
	}
	return nil
}

type sockListener struct {
	s     *Socket
	key   uint64
	peer  int
	mu    sync.Mutex
	socks []net.Conn
	got   int
	ready chan struct{}
	taken bool
}

// deliver gives socket i to the listener; false when it cannot take it.
func (l *sockListener) deliver(i int, c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken || l.socks[i] != nil {
		return false
	}
	l.socks[i] = c
	l.got++
	if l.got == len(l.socks) {
		close(l.ready)
	}
	return true
}

// TryAccept returns the connection once every socket of it arrived.
func (l *sockListener) TryAccept() (RecvComm, error) {
	select {
	case <-l.ready:
	default:
		return nil, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken {
		return nil, fmt.Errorf("socket plugin: connection from rank %d already taken or closed", l.peer)
	}
	l.taken = true
	l.s.mu.Lock()
	delete(l.s.pending, l.key)
	l.s.mu.Unlock()
	return openSockComm(l.socks, l.s.opt, l.peer, false)
}

func (l *sockListener) closeSocks() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken {
		return
	}
	l.taken = true
	for _, c := range l.socks {
		if c != nil {
			c.Close()
		}
	}
}

func (l *sockListener) Close() error {
	l.s.mu.Lock()
	delete(l.s.pending, l.key)
	l.s.mu.Unlock()
	l.closeSocks()
	return nil
}

// openSockComm makes the comm of a connection's sockets: the proxy moves
// a single socket itself unless helper threads were asked for
// (NThreads > 0); several sockets always have helpers. Either way the
// bytes on one socket are the header then the payload, message after
// message, so the two sides of a one-socket connection need not agree
// on the mode.
func openSockComm(socks []net.Conn, opt SocketOptions, peer int, send bool) (sockConn, error) {
	if len(socks) == 1 && opt.NThreads == 0 {
		c, err := newInlineComm(socks[0], peer, send)
		if err != nil {
			socks[0].Close()
			return nil, err
		}
		c.gather = opt.Gather
		if !send && opt.ReadAhead > 0 {
			c.ahead = make([]byte, max(opt.ReadAhead, HeaderSize))
		}
		return c, nil
	}
	return newSockComm(socks, opt, peer), nil
}

// sockConn is a socket connection, either end of it.
type sockConn interface {
	SendComm
	IrecvHeader(hdr []byte) (Request, error)
	Irecv(data []byte) (Request, error)
}

// sockComm is a connection over several sockets. Transfers are
// asynchronous: Isend/Irecv queue a job per helper goroutine
// (NCCL_SOCKET_NTHREADS of them, at least one), each moving the parts of
// the message that fall on its sockets; the request is done when every
// helper finished its parts. Socket i is always served by helper
// i%nthreads, so parts on one socket keep their order across messages.
type sockComm struct {
	socks []net.Conn
	opt   SocketOptions
	peer  int
	jobs  []chan sockJob
	wg    sync.WaitGroup

	mu     sync.Mutex // guards closed against submissions
	closed bool
	broken atomic.Bool
	wake   atomic.Pointer[func()]
}

type sockJob struct {
	send  bool
	parts []sockPart
	req   *sockReq
}

type sockPart struct {
	sock int
	buf  []byte
}

// sockReq is a request of the socket plugin.
type sockReq struct {
	pending atomic.Int32
	mu      sync.Mutex
	err     error
}

// Test reports whether every part was moved, and the first error.
func (r *sockReq) Test() (bool, error) {
	if r.pending.Load() > 0 {
		return false, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return true, r.err
}

func (r *sockReq) finish(err error) {
	if err != nil {
		r.mu.Lock()
		if r.err == nil {
			r.err = err
		}
		r.mu.Unlock()
	}
	r.pending.Add(-1)
}

// sockQueue bounds the jobs queued per helper: the progress loop has at
// most ProgSlots transfers and one header in flight per direction.
const sockQueue = 4 * model.ProgSlots

func newSockComm(socks []net.Conn, opt SocketOptions, peer int) *sockComm {
	c := &sockComm{socks: socks, opt: opt, peer: peer}
	nt := max(1, min(opt.NThreads, len(socks)))
	c.jobs = make([]chan sockJob, nt)
	for t := range c.jobs {
		c.jobs[t] = make(chan sockJob, sockQueue)
		c.wg.Add(1)
		go c.worker(c.jobs[t])
	}
	return c
}

func (c *sockComm) worker(jobs chan sockJob) {
	defer c.wg.Done()
	for j := range jobs {
		var err error
		if c.broken.Load() {
			err = fmt.Errorf("socket plugin: connection with rank %d broken by an earlier error", c.peer)
		}
		for _, p := range j.parts {
			if err != nil {
				break
			}
			if j.send {
				_, err = c.socks[p.sock].Write(p.buf)
			} else {
				_, err = io.ReadFull(c.socks[p.sock], p.buf)
			}
		}
		if err != nil {
			c.broken.Store(true)
		}
		j.req.finish(err)
		if w := c.wake.Load(); w != nil {
			(*w)()
		}
	}
}

// SetWake registers the completion callback.
func (c *sockComm) SetWake(f func()) { c.wake.Store(&f) }

// split cuts buf into consecutive parts, one per socket, each at least
// MinChunk, grouped by helper.
func (c *sockComm) split(per [][]sockPart, buf []byte) [][]sockPart {
	ns := len(c.socks)
	chunk := max(c.opt.MinChunk, (len(buf)+ns-1)/ns)
	for i, off := 0, 0; off < len(buf); i, off = i+1, off+chunk {
		end := min(off+chunk, len(buf))
		t := i % len(c.jobs)
		per[t] = append(per[t], sockPart{sock: i, buf: buf[off:end]})
	}
	return per
}

// submit queues the parts of one message on their helpers.
func (c *sockComm) submit(send bool, hdr, data []byte) (Request, error) {
	per := make([][]sockPart, len(c.jobs))
	if hdr != nil {
		per[0] = append(per[0], sockPart{sock: 0, buf: hdr})
	}
	per = c.split(per, data)
	r := &sockReq{}
	n := 0
	for _, parts := range per {
		if len(parts) > 0 {
			n++
		}
	}
	r.pending.Store(int32(n))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("socket plugin: connection with rank %d closed", c.peer)
	}
	for t, parts := range per {
		if len(parts) > 0 {
			c.jobs[t] <- sockJob{send: send, parts: parts, req: r}
		}
	}
	return r, nil
}

// Isend queues hdr (on socket 0) and data (split over the sockets).
func (c *sockComm) Isend(hdr, data []byte) (Request, error) { return c.submit(true, hdr, data) }

// IrecvHeader queues the read of the next header.
func (c *sockComm) IrecvHeader(hdr []byte) (Request, error) { return c.submit(false, hdr, nil) }

// Irecv queues the read of a payload.
func (c *sockComm) Irecv(data []byte) (Request, error) { return c.submit(false, nil, data) }

// Close closes the sockets (helpers blocked on them fail) and waits for
// the helpers.
func (c *sockComm) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	c.broken.Store(true)
	for _, s := range c.socks {
		s.Close()
	}
	for _, j := range c.jobs {
		close(j)
	}
	c.wg.Wait()
	return nil
}
