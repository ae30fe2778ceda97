package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/model"
)

// Plugin is the network plugin interface of the net transport (a reduced
// form of NCCL's ncclNet_t: listen/connect/accept and message transfers;
// the proxy goroutines that call it make the transfers asynchronous).
type Plugin interface {
	Name() string
	// Init binds the plugin to the rank's bootstrap (its listener carries
	// the plugin's connections with the job's magic handshake).
	Init(comm *bootstrap.Comm) error
	// Listen prepares to accept one connection from rank peer and returns
	// the handle the peer connects with.
	Listen(peer int) (handle []byte, l Listener, err error)
	// Connect opens the send side of a connection to rank peer.
	Connect(peer int, handle []byte) (SendComm, error)
	Close() error
}

// Listener accepts the connection a Listen handle announced.
type Listener interface {
	Accept(timeout time.Duration) (RecvComm, error)
	Close() error
}

// SendComm sends messages: a fixed HeaderSize header and a payload.
type SendComm interface {
	Send(hdr, data []byte) error
	Close() error
}

// RecvComm receives what a SendComm sent: the header, then the payload
// into a buffer of the size the header announced.
type RecvComm interface {
	RecvHeader(hdr []byte) error
	Recv(data []byte) error
	Close() error
}

// HeaderSize is the size of a message header.
const HeaderSize = 32

// SocketOptions tune the socket plugin.
type SocketOptions struct {
	// NThreads is NCCL_SOCKET_NTHREADS (TWINCCL_SOCKET_NTHREADS): helper
	// goroutines per connection.
	NThreads int
	// NSocksPerThread is NCCL_NSOCKS_PERTHREAD (TWINCCL_NSOCKS_PERTHREAD).
	NSocksPerThread int
	// MinChunk is the smallest part of a message put on one socket.
	MinChunk int
}

// SocketOptionsFromEnv reads TWINCCL_SOCKET_NTHREADS and
// TWINCCL_NSOCKS_PERTHREAD (NCCL_* names are read when ours are unset);
// the default is one thread with one socket.
func SocketOptionsFromEnv() SocketOptions {
	get := func(names ...string) int {
		for _, n := range names {
			if v, err := strconv.Atoi(os.Getenv(n)); err == nil && v > 0 {
				return v
			}
		}
		return 1
	}
	o := SocketOptions{
		NThreads:        get("TWINCCL_SOCKET_NTHREADS", "NCCL_SOCKET_NTHREADS"),
		NSocksPerThread: get("TWINCCL_NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD"),
		MinChunk:        64 << 10,
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
	opt.NThreads, opt.NSocksPerThread = max(1, opt.NThreads), max(1, opt.NSocksPerThread)
	if opt.MinChunk <= 0 {
		opt.MinChunk = 64 << 10
	}
	return &Socket{opt: opt, pending: map[uint64]*sockListener{}}
}

// Name is "Socket".
func (s *Socket) Name() string { return "Socket" }

func (s *Socket) nsocks() int { return s.opt.NThreads * s.opt.NSocksPerThread }

// Init registers the plugin's handler on the bootstrap listener.
func (s *Socket) Init(comm *bootstrap.Comm) error {
	s.comm = comm
	comm.Handle(bootstrap.TypeNet, s.handle)
	return nil
}

// handle takes a data socket: {key u64, index u32} then it belongs to the
// listener of that key; anything else is refused.
func (s *Socket) handle(h bootstrap.Hello, c net.Conn) {
	var b [12]byte
	_ = c.SetReadDeadline(time.Now().Add(s.comm.Timeout()))
	_, err := io.ReadFull(c, b[:])
	_ = c.SetReadDeadline(time.Time{})
	key, idx := binary.LittleEndian.Uint64(b[:]), int(binary.LittleEndian.Uint32(b[8:]))
	s.mu.Lock()
	l := s.pending[key]
	s.mu.Unlock()
	if err != nil || l == nil || l.peer != int(h.Rank) || idx >= len(l.socks) {
		slog.Default().Debug("socket plugin: refused data connection", "from", h.Rank, "key", key, "err", err)
		c.Close()
		return
	}
	l.deliver(idx, c)
}

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

// Connect dials the peer's sockets of a Listen handle.
func (s *Socket) Connect(peer int, handle []byte) (SendComm, error) {
	if len(handle) != 12 {
		return nil, fmt.Errorf("socket plugin: handle of %d bytes from rank %d", len(handle), peer)
	}
	n := int(binary.LittleEndian.Uint32(handle[8:]))
	if n < 1 || n > 256 {
		return nil, fmt.Errorf("socket plugin: rank %d asks for %d sockets", peer, n)
	}
	socks := make([]net.Conn, n)
	for i := range socks {
		c, err := s.comm.Dial(peer, bootstrap.TypeNet)
		if err == nil {
			var b [12]byte
			copy(b[:8], handle[:8])
			binary.LittleEndian.PutUint32(b[8:], uint32(i))
			_, err = c.Write(b[:])
			if err != nil {
				c.Close()
			}
		}
		if err != nil {
			for _, x := range socks[:i] {
				x.Close()
			}
			return nil, fmt.Errorf("socket plugin: socket %d to rank %d: %w", i, peer, err)
		}
		socks[i] = c
	}
	return newSockComm(socks, s.opt, peer), nil
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

func (l *sockListener) deliver(i int, c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken || l.socks[i] != nil {
		c.Close()
		return
	}
	l.socks[i] = c
	l.got++
	if l.got == len(l.socks) {
		close(l.ready)
	}
}

func (l *sockListener) Accept(timeout time.Duration) (RecvComm, error) {
	select {
	case <-l.ready:
	case <-time.After(timeout):
		return nil, fmt.Errorf("socket plugin: accept from rank %d: timed out after %v", l.peer, timeout)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.taken = true
	l.s.mu.Lock()
	delete(l.s.pending, l.key)
	l.s.mu.Unlock()
	return newSockComm(l.socks, l.s.opt, l.peer), nil
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

// sockComm is a connection over several sockets, each message's payload
// split into parts moved by NThreads helper goroutines.
type sockComm struct {
	socks []net.Conn
	opt   SocketOptions
	peer  int
	jobs  []chan sockJob
	wg    sync.WaitGroup
	once  sync.Once
}

type sockJob struct {
	send  bool
	parts []sockPart
	done  chan error
}

type sockPart struct {
	sock int
	buf  []byte
}

func newSockComm(socks []net.Conn, opt SocketOptions, peer int) *sockComm {
	c := &sockComm{socks: socks, opt: opt, peer: peer}
	if len(socks) > 1 {
		nt := min(opt.NThreads, len(socks))
		c.jobs = make([]chan sockJob, nt)
		for t := range c.jobs {
			c.jobs[t] = make(chan sockJob, 1)
			c.wg.Add(1)
			go c.worker(c.jobs[t])
		}
	}
	return c
}

func (c *sockComm) worker(jobs chan sockJob) {
	defer c.wg.Done()
	for j := range jobs {
		var err error
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
		j.done <- err
	}
}

// split cuts n bytes into consecutive parts, one per socket, each at least
// MinChunk.
func (c *sockComm) split(buf []byte) [][]sockPart {
	ns := len(c.socks)
	chunk := max(c.opt.MinChunk, (len(buf)+ns-1)/ns)
	per := make([][]sockPart, len(c.jobs))
	for i, off := 0, 0; off < len(buf); i, off = i+1, off+chunk {
		end := min(off+chunk, len(buf))
		t := i % len(c.jobs)
		per[t] = append(per[t], sockPart{sock: i, buf: buf[off:end]})
	}
	return per
}

func (c *sockComm) transfer(buf []byte, send bool) error {
	if len(c.jobs) == 0 {
		var err error
		if send {
			_, err = c.socks[0].Write(buf)
		} else {
			_, err = io.ReadFull(c.socks[0], buf)
		}
		return err
	}
	per := c.split(buf)
	done := make(chan error, len(per))
	n := 0
	for t, parts := range per {
		if len(parts) > 0 {
			c.jobs[t] <- sockJob{send: send, parts: parts, done: done}
			n++
		}
	}
	var errs []error
	for ; n > 0; n-- {
		if err := <-done; err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *sockComm) Send(hdr, data []byte) error {
	if _, err := c.socks[0].Write(hdr); err != nil {
		return err
	}
	return c.transfer(data, true)
}

func (c *sockComm) RecvHeader(hdr []byte) error {
	_, err := io.ReadFull(c.socks[0], hdr)
	return err
}

func (c *sockComm) Recv(data []byte) error { return c.transfer(data, false) }

func (c *sockComm) Close() error {
	c.once.Do(func() {
		for _, s := range c.socks {
			s.Close()
		}
		for _, j := range c.jobs {
			close(j)
		}
		c.wg.Wait()
	})
	return nil
}

// netConn is the proxy state of one side of a net connection: NCCL's
// posted/transmitted/received/done counters.
type netConn struct {
	send    SendComm
	recv    RecvComm
	kick    chan struct{}
	closing atomic.Bool
	// Counters (absolute steps), for traces and tests.
	Posted, Transmitted, Received, Done atomic.Uint64
}

func (n *netConn) notify() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

func (n *netConn) close() error {
	n.closing.Store(true)
	n.notify()
	if n.send != nil {
		return n.send.Close()
	}
	return n.recv.Close()
}

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
	c.net = &netConn{send: sc, recv: rc, kick: make(chan struct{}, 1)}
	return nil
}

// proxy runs the progress goroutines of a rank's net connections, each on
// a locked OS thread.
type proxy struct {
	comm *bootstrap.Comm
	log  *slog.Logger
	wg   sync.WaitGroup
	mu   sync.Mutex
	all  []*Conn
}

func newProxy(comm *bootstrap.Comm, log *slog.Logger) *proxy {
	return &proxy{comm: comm, log: log}
}

func (p *proxy) add(c *Conn) {
	p.mu.Lock()
	p.all = append(p.all, c)
	p.mu.Unlock()
	p.wg.Add(1)
	if c.Send {
		go p.sendLoop(c)
	} else {
		go p.recvLoop(c)
	}
}

func (p *proxy) stop() {
	p.mu.Lock()
	all := p.all
	p.all = nil
	p.mu.Unlock()
	// Stop the loops first, then say goodbye on the send sides (a header
	// with step -1) so that receivers close without reporting a loss.
	for _, c := range all {
		c.net.closing.Store(true)
		c.net.notify()
	}
	var bye [HeaderSize]byte
	binary.LittleEndian.PutUint64(bye[16:], ^uint64(0))
	for _, c := range all {
		if c.net.send != nil {
			_ = c.net.send.Send(bye[:], nil)
		}
		c.net.close()
	}
	p.wg.Wait()
}

// wait waits once with bo; past its yield phase it blocks until kicked,
// for at most 1 ms.
func (n *netConn) wait(bo *Backoff) {
	if !bo.Sleeping() {
		bo.Wait()
		return
	}
	t := time.NewTimer(time.Millisecond)
	select {
	case <-n.kick:
		bo.Reset()
	case <-t.C:
	}
	t.Stop()
}

// lossGrace is how long a broken data connection waits for the liveness
// connections before it blames its peer: a peer that aborts because a
// third rank died reports that rank on them, and the report may still be
// in flight when its sockets close.
const lossGrace = 100 * time.Millisecond

func (p *proxy) fail(c *Conn, what string, err error) {
	if c.net.closing.Load() {
		return
	}
	t := time.NewTimer(lossGrace)
	defer t.Stop()
	select {
	case <-p.comm.Lost():
		return // already attributed
	case <-t.C:
	}
	if c.net.closing.Load() {
		return
	}
	p.comm.PeerLost(c.Peer, fmt.Errorf("net %v %s: %w", c.Key, what, err))
}

// sendLoop is the send proxy: a step posted by the device (tail) is
// transmitted with its fifo entry as header; when the transfer is done the
// credit goes back to the device (head). Steps the device skipped when it
// rounded its step counter are passed over.
func (p *proxy) sendLoop(c *Conn) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, m := c.net, c.Mem
	var hdr [HeaderSize]byte
	var bo Backoff
	var tx uint64
	for !n.closing.Load() {
		tail := m.Tail()
		if tx >= tail {
			n.wait(&bo)
			continue
		}
		bo.Reset()
		slot := int(tx % model.ProgSlots)
		e := m.Fifo(slot)
		if e.Step != int64(tx) || e.Size < 0 {
			tx++ // a step skipped by rounding
			n.Done.Store(tx)
			m.SetHead(tx)
			continue
		}
		n.Posted.Store(tx + uint64(e.Steps))
		binary.LittleEndian.PutUint64(hdr[0:], uint64(e.Size))
		binary.LittleEndian.PutUint64(hdr[8:], uint64(e.Wire))
		binary.LittleEndian.PutUint64(hdr[16:], uint64(e.Step))
		binary.LittleEndian.PutUint32(hdr[24:], uint32(e.Steps))
		binary.LittleEndian.PutUint32(hdr[28:], uint32(e.Proto))
		pr := model.Protocol(e.Proto)
		if pr < 0 || pr >= model.NumProtocols || e.Wire > int64(model.ProtoBuffSize(pr)-slot*SlotStride(pr)) {
			p.fail(c, "send", fmt.Errorf("corrupt fifo entry %+v", e))
			return
		}
		if err := n.send.Send(hdr[:], m.Slot(pr, slot)[:e.Wire]); err != nil {
			p.fail(c, fmt.Sprintf("send to rank %d", c.Peer), err)
			return
		}
		tx += uint64(e.Steps)
		n.Transmitted.Store(tx)
		m.SetFifo(slot, FifoEntry{Size: -1, Step: -1})
		n.Done.Store(tx)
		m.SetHead(tx)
	}
}

// recvLoop is the receive proxy: it reads a header, waits until the
// device released the slots (head), receives the payload into them, and
// posts the steps to the device (fifo entry, then tail).
func (p *proxy) recvLoop(c *Conn) {
	defer p.wg.Done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, m := c.net, c.Mem
	var hdr [HeaderSize]byte
	var bo Backoff
	for !n.closing.Load() {
		if err := n.recv.RecvHeader(hdr[:]); err != nil {
			p.fail(c, fmt.Sprintf("receive from rank %d", c.Peer), err)
			return
		}
		e := FifoEntry{
			Size:  int64(binary.LittleEndian.Uint64(hdr[0:])),
			Wire:  int64(binary.LittleEndian.Uint64(hdr[8:])),
			Step:  int64(binary.LittleEndian.Uint64(hdr[16:])),
			Steps: int32(binary.LittleEndian.Uint32(hdr[24:])),
			Proto: int32(binary.LittleEndian.Uint32(hdr[28:])),
		}
		if e.Step == -1 {
			n.closing.Store(true) // the sender said goodbye
			return
		}
		pr := model.Protocol(e.Proto)
		slot := int(uint64(e.Step) % model.ProgSlots)
		if pr < 0 || pr >= model.NumProtocols || e.Step < 0 || e.Steps < 1 || e.Steps > model.ProgSlots ||
			e.Wire < 0 || e.Wire > int64(model.ProtoBuffSize(pr)-slot*SlotStride(pr)) {
			p.fail(c, fmt.Sprintf("receive from rank %d", c.Peer), fmt.Errorf("malformed header %+v", e))
			return
		}
		n.Posted.Store(uint64(e.Step + int64(e.Steps)))
		for m.Head()+model.ProgSlots < uint64(e.Step)+uint64(e.Steps) {
			if n.closing.Load() {
				return
			}
			n.wait(&bo)
		}
		bo.Reset()
		if err := n.recv.Recv(m.Slot(pr, slot)[:e.Wire]); err != nil {
			p.fail(c, fmt.Sprintf("receive from rank %d", c.Peer), err)
			return
		}
		end := uint64(e.Step) + uint64(e.Steps)
		n.Received.Store(end)
		m.SetFifo(slot, e)
		n.Transmitted.Store(end)
		m.SetTail(end)
		n.Done.Store(end)
	}
}
