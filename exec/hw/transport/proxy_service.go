package transport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/auth"
	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// ProxyMsg is the type of a proxy service message (NCCL's
// ncclProxyMsgType).
type ProxyMsg uint32

// Proxy messages. Every request carries an op id chosen by the client;
// the response carries it back, and responses may come in any order.
const (
	// ProxyInit creates a proxy connection for one side of a transport
	// connection (request: proxyInitReq; response: its u64 id).
	ProxyInit ProxyMsg = 1 + iota
	// ProxySharedInit initializes what the rank's connections of a
	// transport share: the network plugin (response: its name).
	ProxySharedInit
	// ProxySetup allocates a receiver's resources and returns its
	// connect info (request: id; response: the plugin's listen handle,
	// or the shm segment's token).
	ProxySetup
	// ProxyConnect connects a proxy connection (request: id and the
	// peer's connect info for a sender); asynchronous: the response comes
	// when the network connection is up.
	ProxyConnect
	// ProxyConvertFd hands the file descriptor of a receiver's shm
	// segment to the sender's process over the Unix socket (SCM_RIGHTS),
	// NCCL's ConvertFd/GetFd for cuMem handles (request: the token).
	ProxyConvertFd
	// ProxyClose releases one proxy connection (request: id).
	ProxyClose
	// ProxyStop stops the service after answering.
	ProxyStop
	proxyMsgEnd
)

func (m ProxyMsg) String() string {
	names := [...]string{"?", "Init", "SharedInit", "Setup", "Connect", "ConvertFd", "Close", "Stop"}
	if m >= 1 && m < proxyMsgEnd {
		return names[m]
	}
	return fmt.Sprintf("ProxyMsg(%d)", uint32(m))
}

// Wire format: a request is {type u32, size u32, opID u64} and size bytes;
// a response is {opID u64, status i32, size u32} and size bytes (status 0:
// the payload is the result; otherwise it is an error message).
const (
	proxyReqHeader  = 16
	proxyRespHeader = 16
	// MaxProxyRequest bounds a request's payload; a longer one is a
	// malformed message.
	MaxProxyRequest = 64 << 10
	proxyInitBytes  = 7 * 4
)

// proxySockName is the abstract Unix socket of rank's proxy service in
// the job of magic. Abstract names are listed in /proc/net/unix for every
// local user, so the name shows neither the secret nor the magic: it is a
// tag derived from the secret (unpredictable without it, so nobody can
// take the name first), and the service still checks every client's uid
// and proof.
func proxySockName(secret auth.Secret, magic uint64, rank int) string {
	return "@twinccl-proxy-" + secret.Tag(fmt.Sprintf("proxy %016x %d", magic, rank))
}

// MaxProxyClients bounds a proxy's clients (its rank and the same-host
// ranks fetching shm segments; each opens one).
func maxProxyClients(nranks int) int { return nranks + 16 }

// ProxyService is a rank's proxy (NCCL's proxy thread pair): a service
// loop on a locked OS thread answering the typed messages of its clients
// (the rank itself, and the same-host peers that fetch shm segments),
// with asynchronous operations answered when they complete, and the
// progress loop that drives the net connections. Clients reach it on an
// abstract Unix socket named by a tag of the job's secret (so only
// processes of this host can), and are served only when the kernel says
// they run as this user (SO_PEERCRED) and they prove the secret in the
// bootstrap handshake, which binds the rank they claim. Only this rank's
// own process may stop the service. A malformed message (unknown type, bad length, bad op id)
// closes that client's connection only, releasing what it owned, and is
// logged; every other client goes on.
type ProxyService struct {
	comm *bootstrap.Comm
	cfg  Config
	log  *slog.Logger
	ln   *net.UnixListener
	acc  *bootstrap.Acceptor
	prog *progress

	events chan proxyEvent
	stopCh chan struct{}
	done   chan struct{}

	// Owned by the service goroutine.
	net     Plugin
	netInit bool
	clients map[*svcClient]bool
	async   []*asyncOp

	mu       sync.Mutex // guards conns, nextID and nclients (the rank reads conns)
	conns    map[uint64]*proxyConn
	nextID   uint64
	nclients int

	// Malformed counts the connections closed for malformed messages.
	Malformed atomic.Int64
}

// proxyConn is the service's side of one transport connection.
type proxyConn struct {
	id    uint64
	owner *svcClient
	kind  Kind
	send  bool
	key   Key
	peer  int
	c     *Conn // the connection the rank uses (same process)
	ln    Listener
	shmFd int // receiver's segment until the sender took it, else -1
	ready bool
}

type svcClient struct {
	conn     *net.UnixConn
	rank     int
	pid      int32 // the client's process (SO_PEERCRED)
	inflight map[uint64]bool
	closed   bool
}

type proxyEvent struct {
	cl      *svcClient
	typ     ProxyMsg
	opID    uint64
	payload []byte
	gone    bool // the reader ended (EOF, error or malformed header)
}

// asyncOp is an operation in progress; poll is called by the service
// loop until it reports done, or until the comm's timeout, when it fails
// with what and stalled ("net connect ch0 0->1 #0 to rank 1", "rank 1
// never answered").
type asyncOp struct {
	cl            *svcClient
	opID          uint64
	pc            *proxyConn
	deadline      time.Time
	what, stalled string
	poll          func() (resp []byte, done bool, err error)
	cancel        func()
}

// NewProxyService starts the proxy of the rank comm belongs to: its Unix
// socket, service loop and progress loop.
func NewProxyService(comm *bootstrap.Comm, cfg Config) (*ProxyService, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ShmDir == "" {
		cfg.ShmDir = "/dev/shm"
	}
	name := proxySockName(comm.Secret(), comm.Magic(), comm.Rank())
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: name, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("proxy rank %d: listen on its Unix socket: %w", comm.Rank(), err)
	}
	s := &ProxyService{comm: comm, cfg: cfg, log: cfg.Log.With("proxy", comm.Rank()), ln: ln, net: cfg.Net,
		events: make(chan proxyEvent, 64), stopCh: make(chan struct{}), done: make(chan struct{}),
		clients: map[*svcClient]bool{}, conns: map[uint64]*proxyConn{}}
	if s.net == nil {
		s.net = NewSocket(SocketOptionsFromEnv())
	}
	s.prog = newProgress(comm, cfg.Log, cfg.Flush)
	s.acc = bootstrap.NewAcceptor(ln, bootstrap.MaxPending, s.log, func(c net.Conn, proven func()) {
		s.read(c.(*net.UnixConn), proven)
	})
	go s.serve()
	return s, nil
}

// Wait blocks until the service stopped (after a Stop message or Close).
func (s *ProxyService) Wait() { <-s.done }

// Close stops the service without a message (the rank's client may be
// gone) and waits for it.
func (s *ProxyService) Close() {
	select {
	case <-s.stopCh:
	default:
		close(s.stopCh)
	}
	<-s.done
}

// conn is the connection of proxy connection id once it is usable.
func (s *ProxyService) conn(id uint64) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	if pc := s.conns[id]; pc != nil && pc.ready {
		return pc.c
	}
	return nil
}

// clients counts the authenticated clients, bounded by maxProxyClients.
func (s *ProxyService) admit(delta int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if delta > 0 && s.nclients >= maxProxyClients(s.comm.NRanks()) {
		return false
	}
	s.nclients += delta
	return true
}

// read checks the client's credentials and handshake, then reads
// requests and hands them to the service loop. A header with an unknown
// type, an oversized payload or op id 0 closes the connection here.
func (s *ProxyService) read(c *net.UnixConn, proven func()) {
	uid, pid, err := peerCred(c)
	if err == nil && uid != uint32(os.Getuid()) {
		err = fmt.Errorf("client runs as uid %d, not this job's uid %d", uid, os.Getuid())
	}
	var h bootstrap.Hello
	if err == nil {
		deadline := time.Now().Add(min(s.comm.Timeout(), bootstrap.HandshakeTimeout))
		h, err = bootstrap.ReadHello(c, s.comm.Magic(), s.comm.Secret(), s.comm.NRanks(), deadline)
	}
	if err == nil && h.Type != bootstrap.TypeProxy {
		err = fmt.Errorf("socket type %d is not a proxy connection", h.Type)
	}
	if err != nil {
		s.log.Warn("proxy: refused connection", "pid", pid, "err", err)
		c.Close()
		return
	}
	proven()
	if !s.admit(1) {
		s.log.Warn("proxy: refused connection: too many clients", "client", h.Rank, "pid", pid)
		c.Close()
		return
	}
	defer s.admit(-1)
	cl := &svcClient{conn: c, rank: int(h.Rank), pid: pid, inflight: map[uint64]bool{}}
	for {
		var hdr [proxyReqHeader]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			s.post(proxyEvent{cl: cl, gone: true})
			return
		}
		typ, size, opID, bad := parseProxyHeader(hdr[:])
		if bad != "" {
			s.malformed(cl, bad)
			s.post(proxyEvent{cl: cl, gone: true})
			return
		}
		payload := make([]byte, size)
		if _, err := io.ReadFull(c, payload); err != nil {
			s.post(proxyEvent{cl: cl, gone: true})
			return
		}
		s.post(proxyEvent{cl: cl, typ: typ, opID: opID, payload: payload})
	}
}

func (s *ProxyService) post(ev proxyEvent) {
	select {
	case s.events <- ev:
	case <-s.done:
		if ev.gone {
			ev.cl.conn.Close()
		}
	}
}

// malformed logs a malformed message and closes the client's socket.
func (s *ProxyService) malformed(cl *svcClient, why string) {
	s.Malformed.Add(1)
	s.log.Warn("proxy: malformed message; closing that connection", "client", cl.rank, "err", why)
	cl.conn.Close()
}

// serve is the service loop.
func (s *ProxyService) serve() {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(s.done)
	defer s.shutdown()
	poll := time.NewTicker(100 * time.Microsecond)
	defer poll.Stop()
	for {
		var tick <-chan time.Time
		if len(s.async) > 0 {
			tick = poll.C
		}
		select {
		case ev := <-s.events:
			if s.handle(ev) {
				return
			}
		case <-tick:
		case <-s.stopCh:
			return
		}
		s.progressAsync()
	}
}

// handle serves one event; true when the service must stop.
func (s *ProxyService) handle(ev proxyEvent) bool {
	cl := ev.cl
	if !s.clients[cl] && !cl.closed {
		s.clients[cl] = true
	}
	if ev.gone {
		s.drop(cl)
		return false
	}
	if cl.closed {
		return false
	}
	if cl.inflight[ev.opID] {
		s.malformed(cl, fmt.Sprintf("%s reuses op id %d still in flight", ev.typ, ev.opID))
		s.drop(cl)
		return false
	}
	if bad := checkProxyPayload(ev.typ, ev.payload); bad != "" {
		s.malformed(cl, bad)
		s.drop(cl)
		return false
	}
	cl.inflight[ev.opID] = true
	resp, fd, op, err := s.exec(cl, ev)
	switch {
	case op != nil:
		op.cl, op.opID = cl, ev.opID
		op.deadline = time.Now().Add(s.comm.Timeout())
		s.async = append(s.async, op)
	default:
		s.respond(cl, ev.opID, resp, fd, err)
	}
	return ev.typ == ProxyStop && err == nil
}

// parseProxyHeader decodes a request header; bad says what is malformed
// (an unknown type, a payload over MaxProxyRequest, op id 0), "" when
// nothing is.
func parseProxyHeader(hdr []byte) (typ ProxyMsg, size uint32, opID uint64, bad string) {
	typ = ProxyMsg(binary.LittleEndian.Uint32(hdr[0:]))
	size = binary.LittleEndian.Uint32(hdr[4:])
	opID = binary.LittleEndian.Uint64(hdr[8:])
	switch {
	case typ < 1 || typ >= proxyMsgEnd:
		bad = fmt.Sprintf("unknown message type %d", uint32(typ))
	case size > MaxProxyRequest:
		bad = fmt.Sprintf("%s payload of %d bytes exceeds %d", typ, size, MaxProxyRequest)
	case opID == 0:
		bad = fmt.Sprintf("%s with op id 0", typ)
	}
	return typ, size, opID, bad
}

// checkProxyPayload says what is wrong with a payload of type t, "" when
// nothing is.
func checkProxyPayload(t ProxyMsg, payload []byte) string {
	if want := proxyLen(t); want >= 0 && len(payload) != want || want < 0 && len(payload) < 8 {
		return fmt.Sprintf("%s payload of %d bytes (want %d)", t, len(payload), max(want, 8))
	}
	return ""
}

// proxyLen is the payload size of a request type; -1: at least 8 bytes.
func proxyLen(t ProxyMsg) int {
	switch t {
	case ProxyInit:
		return proxyInitBytes
	case ProxySetup, ProxyConvertFd, ProxyClose:
		return 8
	case ProxyConnect:
		return -1
	}
	return 0
}

// respond sends a response (status 0 with resp, or the error's text),
// with fd attached when it is not -1; a client that cannot take it is
// dropped.
func (s *ProxyService) respond(cl *svcClient, opID uint64, resp []byte, fd int, err error) {
	delete(cl.inflight, opID)
	if cl.closed {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return
	}
	status := int32(0)
	if err != nil {
		status, resp, fd = 1, []byte(err.Error()), -1
	}
	b := make([]byte, proxyRespHeader+len(resp))
	binary.LittleEndian.PutUint64(b[0:], opID)
	binary.LittleEndian.PutUint32(b[8:], uint32(status))
	binary.LittleEndian.PutUint32(b[12:], uint32(len(resp)))
	copy(b[proxyRespHeader:], resp)
	var oob []byte
	if fd >= 0 {
		oob = syscall.UnixRights(fd)
	}
	_ = cl.conn.SetWriteDeadline(time.Now().Add(s.comm.Timeout()))
	_, _, werr := cl.conn.WriteMsgUnix(b, oob, nil)
	if fd >= 0 {
		syscall.Close(fd)
	}
	if werr != nil {
		s.log.Warn("proxy: response not delivered; dropping client", "client", cl.rank, "err", werr)
		s.drop(cl)
	}
}

// drop closes a client: its operations in progress are cancelled and the
// proxy connections it owns released.
func (s *ProxyService) drop(cl *svcClient) {
	if cl.closed {
		return
	}
	cl.closed = true
	cl.conn.Close()
	delete(s.clients, cl)
	keep := s.async[:0]
	for _, op := range s.async {
		if op.cl == cl {
			if op.cancel != nil {
				op.cancel()
			}
			continue
		}
		keep = append(keep, op)
	}
	clear(s.async[len(keep):])
	s.async = keep
	s.mu.Lock()
	var owned []*proxyConn
	for _, pc := range s.conns {
		if pc.owner == cl {
			owned = append(owned, pc)
		}
	}
	s.mu.Unlock()
	for _, pc := range owned {
		s.release(pc)
	}
}

// release frees a proxy connection's resources: the progress loop lets go
// of it, its network comm and listener close, a segment fd not taken is
// closed. The connection memory stays mapped: the rank unmaps it.
func (s *ProxyService) release(pc *proxyConn) {
	s.mu.Lock()
	delete(s.conns, pc.id)
	s.mu.Unlock()
	// An operation still in progress on it ends here.
	keep := s.async[:0]
	for _, op := range s.async {
		if op.pc != pc {
			keep = append(keep, op)
			continue
		}
		if op.cancel != nil {
			op.cancel()
		}
		s.respond(op.cl, op.opID, nil, -1, fmt.Errorf("proxy rank %d: %s: closed while in progress", s.comm.Rank(), op.what))
	}
	clear(s.async[len(keep):])
	s.async = keep
	if pc.c.net != nil {
		s.prog.detach(pc.c)
		_ = pc.c.net.close()
	}
	if pc.ln != nil {
		pc.ln.Close()
		pc.ln = nil
	}
	if pc.shmFd >= 0 {
		syscall.Close(pc.shmFd)
		pc.shmFd = -1
	}
}

// progressAsync polls the operations in progress and answers the
// finished ones, in whatever order they finish.
func (s *ProxyService) progressAsync() {
	keep := s.async[:0]
	for _, op := range s.async {
		resp, done, err := op.poll()
		if !done && err == nil && time.Now().After(op.deadline) {
			err = fmt.Errorf("proxy rank %d: %s: %s within %v", s.comm.Rank(), op.what, op.stalled, s.comm.Timeout())
		}
		if !done && err == nil {
			keep = append(keep, op)
			continue
		}
		if err != nil && op.cancel != nil {
			op.cancel()
		}
		s.respond(op.cl, op.opID, resp, -1, err)
	}
	clear(s.async[len(keep):])
	s.async = keep
}

// shutdown stops the progress loop and releases everything.
func (s *ProxyService) shutdown() {
	for _, op := range s.async {
		if op.cancel != nil {
			op.cancel()
		}
	}
	s.async = nil
	s.prog.stop()
	s.mu.Lock()
	var all []*proxyConn
	for _, pc := range s.conns {
		all = append(all, pc)
	}
	s.mu.Unlock()
	for _, pc := range all {
		s.release(pc)
	}
	for cl := range s.clients {
		cl.closed = true
		cl.conn.Close()
	}
	// Readers blocked in post give up once done is closed: close it
	// early for them by draining until they are gone.
	drained := make(chan struct{})
	go func() {
		s.acc.Close() // closes the listener and the readers' sockets, waits for them
		close(drained)
	}()
	for {
		select {
		case ev := <-s.events:
			ev.cl.conn.Close()
		case <-drained:
			if s.netInit {
				_ = s.net.Close()
			}
			return
		}
	}
}

// exec runs one request: an immediate result, or an asynchronous op.
func (s *ProxyService) exec(cl *svcClient, ev proxyEvent) (resp []byte, fd int, op *asyncOp, err error) {
	me := s.comm.Rank()
	p := ev.payload
	fd = -1
	switch ev.typ {
	case ProxyInit:
		u := func(i int) int { return int(binary.LittleEndian.Uint32(p[4*i:])) }
		kind, send := Kind(u(0)), u(1) != 0
		k := Key{Channel: u(3), From: u(4), To: u(5), Index: u(6)}
		peer := u(2)
		if kind != KindSHM && kind != KindNet || peer < 0 || peer >= s.comm.NRanks() || peer == me {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: init of a %v connection with rank %d refused", me, kind, peer)
		}
		s.mu.Lock()
		s.nextID++
		pc := &proxyConn{id: s.nextID, owner: cl, kind: kind, send: send, key: k, peer: peer, shmFd: -1,
			c: &Conn{Key: k, Kind: kind, Send: send, Peer: peer}}
		s.conns[pc.id] = pc
		s.mu.Unlock()
		return binary.LittleEndian.AppendUint64(nil, pc.id), fd, nil, nil
	case ProxySharedInit:
		if !s.netInit {
			if err := s.net.Init(s.comm); err != nil {
				return nil, fd, nil, fmt.Errorf("proxy rank %d: net plugin %s: %w", me, s.net.Name(), err)
			}
			s.netInit = true
		}
		return []byte(s.net.Name()), fd, nil, nil
	case ProxyStop:
		if cl.rank != me || cl.pid != int32(os.Getpid()) {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: stop refused: only rank %d's own process may stop its proxy (client rank %d, pid %d)", me, me, cl.rank, cl.pid)
		}
		return nil, fd, nil, nil
	}
	id := binary.LittleEndian.Uint64(p)
	s.mu.Lock()
	pc := s.conns[id]
	s.mu.Unlock()
	if pc == nil || (pc.owner != cl && ev.typ != ProxyConvertFd) {
		return nil, fd, nil, fmt.Errorf("proxy rank %d: %s: no proxy connection %d of this client", me, ev.typ, id)
	}
	switch ev.typ {
	case ProxySetup:
		if pc.send {
			return nil, fd, nil, nil
		}
		if pc.kind == KindSHM {
			f, err := shmCreate(s.cfg.ShmDir, s.comm.Magic(), pc.key)
			if err != nil {
				return nil, fd, nil, fmt.Errorf("proxy rank %d: shm setup for %v: %w", me, pc.key, err)
			}
			m, err := mapFd(int(f.Fd()))
			if err != nil {
				f.Close()
				return nil, fd, nil, fmt.Errorf("proxy rank %d: shm setup for %v: %w", me, pc.key, err)
			}
			nfd, err := syscall.Dup(int(f.Fd()))
			f.Close()
			if err != nil {
				syscall.Munmap(m)
				return nil, fd, nil, fmt.Errorf("proxy rank %d: shm setup for %v: %w", me, pc.key, err)
			}
			s.mu.Lock()
			pc.shmFd = nfd
			pc.c.mapped, pc.c.Mem = m, Mem(m)
			pc.c.Mem.Init()
			pc.ready = true
			s.mu.Unlock()
			return binary.LittleEndian.AppendUint64(nil, pc.id), fd, nil, nil
		}
		if !s.netInit {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: net setup for %v before SharedInit", me, pc.key)
		}
		h, ln, err := s.net.Listen(pc.peer)
		if err != nil {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: net setup for %v: %w", me, pc.key, err)
		}
		pc.ln = ln
		return h, fd, nil, nil
	case ProxyConvertFd:
		if pc.kind != KindSHM || pc.send || pc.peer != cl.rank || pc.shmFd < 0 {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: no shm segment %d for rank %d", me, id, cl.rank)
		}
		fd, pc.shmFd = pc.shmFd, -1
		return binary.LittleEndian.AppendUint64(nil, MemBytes), fd, nil, nil
	case ProxyClose:
		s.release(pc)
		return nil, fd, nil, nil
	case ProxyConnect:
		if pc.kind != KindNet {
			return nil, fd, nil, fmt.Errorf("proxy rank %d: connect of a %v connection", me, pc.kind)
		}
		op, err := s.connectOp(pc, p[8:])
		return nil, fd, op, err
	}
	return nil, fd, nil, fmt.Errorf("proxy rank %d: unexpected %s", me, ev.typ)
}

// connectOp is the asynchronous connect of a net proxy connection, as
// NCCL's proxy drives it: the receiver's TryAccept and the sender's
// TryConnect are called on every poll of the service loop until the
// connection is up (neither blocks), or until the comm's timeout. Once
// connected the connection gets its memory and joins the progress loop.
func (s *ProxyService) connectOp(pc *proxyConn, info []byte) (*asyncOp, error) {
	me := s.comm.Rank()
	finish := func(sc SendComm, rc RecvComm) ([]byte, bool, error) {
		if err := pc.c.netInit(sc, rc); err != nil {
			return nil, true, fmt.Errorf("proxy rank %d: connect %v with rank %d: %w", me, pc.key, pc.peer, err)
		}
		s.prog.attach(pc.c)
		s.mu.Lock()
		pc.ready = true
		s.mu.Unlock()
		return nil, true, nil
	}
	if !pc.send {
		if pc.ln == nil {
			return nil, fmt.Errorf("proxy rank %d: connect %v before setup", me, pc.key)
		}
		op := &asyncOp{pc: pc, what: fmt.Sprintf("net accept of %v from rank %d", pc.key, pc.peer), stalled: fmt.Sprintf("rank %d never connected", pc.peer)}
		op.poll = func() ([]byte, bool, error) {
			if pc.ln == nil {
				return nil, true, fmt.Errorf("proxy rank %d: net accept of %v from rank %d: listener closed", me, pc.key, pc.peer)
			}
			rc, err := pc.ln.TryAccept()
			if err != nil {
				return nil, true, fmt.Errorf("proxy rank %d: net accept of %v from rank %d: %w", me, pc.key, pc.peer, err)
			}
			if rc == nil {
				return nil, false, nil
			}
			pc.ln.Close()
			pc.ln = nil
			return finish(nil, rc)
		}
		return op, nil
	}
	c, err := s.net.StartConnect(pc.peer, append([]byte(nil), info...))
	if err != nil {
		return nil, fmt.Errorf("proxy rank %d: net connect %v to rank %d: %w", me, pc.key, pc.peer, err)
	}
	op := &asyncOp{pc: pc, what: fmt.Sprintf("net connect %v to rank %d", pc.key, pc.peer), stalled: fmt.Sprintf("rank %d never answered", pc.peer),
		cancel: func() { c.Close() }}
	op.poll = func() ([]byte, bool, error) {
		sc, err := c.TryConnect()
		if err != nil {
			return nil, true, fmt.Errorf("proxy rank %d: net connect %v to rank %d: %w", me, pc.key, pc.peer, err)
		}
		if sc == nil {
			return nil, false, nil
		}
		return finish(sc, nil)
	}
	return op, nil
}

// shmCreate creates a segment file and unlinks it at once: it lives as
// long as a descriptor or a mapping of it does, so that no process death
// can leave it behind.
func shmCreate(dir string, magic uint64, k Key) (*os.File, error) {
	name := fmt.Sprintf("%s%016x-%d-%d-%d-%d-%08x", ShmPrefix, magic, k.Channel, k.From, k.To, k.Index, uint32(bootstrap.RandomMagic()))
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	rerr := os.Remove(path)
	if err := errors.Join(rerr, f.Truncate(MemBytes)); err != nil {
		f.Close()
		return nil, fmt.Errorf("segment %s: %w", path, err)
	}
	return f, nil
}

func mapFd(fd int) ([]byte, error) {
	m, err := syscall.Mmap(fd, 0, MemBytes, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap: %w", err)
	}
	return m, nil
}

// ProxyClient is a connection to a proxy service: requests are sent with
// fresh op ids and may be awaited in any order; a response that arrives
// while another op id is awaited is queued for its own Wait (NCCL's
// ncclPollProxyResponse and its response queue). It is safe for use by
// one goroutine at a time.
type ProxyClient struct {
	conn    *net.UnixConn
	peer    int
	me      int
	timeout time.Duration
	next    uint64
	queued  map[uint64]proxyResp
	// Queued counts the responses that arrived while another op id was
	// awaited.
	Queued int
}

type proxyResp struct {
	status uint32
	data   []byte
	fd     int
}

// DialProxy connects to the proxy service of rank peer on this host.
func DialProxy(comm *bootstrap.Comm, peer int) (*ProxyClient, error) {
	name := proxySockName(comm.Secret(), comm.Magic(), peer)
	deadline := time.Now().Add(comm.Timeout())
	var c *net.UnixConn
	var err error
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		c, err = net.DialUnix("unix", nil, &net.UnixAddr{Name: name, Net: "unix"})
		if err == nil || time.Now().Add(wait).After(deadline) {
			break
		}
		time.Sleep(wait)
	}
	if err != nil {
		return nil, fmt.Errorf("proxy client rank %d: connect to the proxy of rank %d: %w", comm.Rank(), peer, err)
	}
	if uid, _, err := peerCred(c); err != nil || uid != uint32(os.Getuid()) {
		c.Close()
		return nil, fmt.Errorf("proxy client rank %d: the proxy of rank %d runs as uid %d, not uid %d (%v)", comm.Rank(), peer, uid, os.Getuid(), err)
	}
	h := bootstrap.Hello{Magic: comm.Magic(), Type: bootstrap.TypeProxy, Rank: uint32(comm.Rank()), NRanks: uint32(comm.NRanks())}
	if err := bootstrap.WriteHello(c, h, comm.Secret(), deadline); err != nil {
		c.Close()
		return nil, fmt.Errorf("proxy client rank %d: handshake with the proxy of rank %d: %w", comm.Rank(), peer, err)
	}
	return &ProxyClient{conn: c, peer: peer, me: comm.Rank(), timeout: comm.Timeout(), queued: map[uint64]proxyResp{}}, nil
}

// CallAsync sends a request and returns its op id.
func (c *ProxyClient) CallAsync(t ProxyMsg, req []byte) (uint64, error) {
	c.next++
	b := make([]byte, proxyReqHeader+len(req))
	binary.LittleEndian.PutUint32(b[0:], uint32(t))
	binary.LittleEndian.PutUint32(b[4:], uint32(len(req)))
	binary.LittleEndian.PutUint64(b[8:], c.next)
	copy(b[proxyReqHeader:], req)
	_ = c.conn.SetWriteDeadline(time.Now().Add(c.timeout))
	if _, err := c.conn.Write(b); err != nil {
		return 0, fmt.Errorf("proxy client rank %d: %s to the proxy of rank %d: %w", c.me, t, c.peer, err)
	}
	return c.next, nil
}

// Wait returns the response of op id: its payload and the descriptor
// that came with it (-1 when none; the caller owns it). The proxy bounds
// its asynchronous operations by the timeout and answers with an error
// that names what stalled; Wait gives up on the proxy itself only after
// twice that.
func (c *ProxyClient) Wait(id uint64) ([]byte, int, error) {
	deadline := time.Now().Add(2 * c.timeout)
	for {
		if r, ok := c.queued[id]; ok {
			delete(c.queued, id)
			return c.result(id, r)
		}
		got, r, err := c.readResp(deadline)
		if err != nil {
			return nil, -1, fmt.Errorf("proxy client rank %d: response %d from the proxy of rank %d: %w", c.me, id, c.peer, err)
		}
		if got == id {
			return c.result(id, r)
		}
		if _, dup := c.queued[got]; dup || got == 0 || got > c.next {
			if r.fd >= 0 {
				syscall.Close(r.fd)
			}
			return nil, -1, fmt.Errorf("proxy client rank %d: the proxy of rank %d answered unknown op id %d", c.me, c.peer, got)
		}
		c.queued[got] = r
		c.Queued++
	}
}

func (c *ProxyClient) result(id uint64, r proxyResp) ([]byte, int, error) {
	if r.status != 0 {
		if r.fd >= 0 {
			syscall.Close(r.fd)
		}
		return nil, -1, fmt.Errorf("proxy of rank %d, op %d: %s", c.peer, id, r.data)
	}
	return r.data, r.fd, nil
}

// Call is CallAsync then Wait, for requests that bring no descriptor.
func (c *ProxyClient) Call(t ProxyMsg, req []byte) ([]byte, error) {
	id, err := c.CallAsync(t, req)
	if err != nil {
		return nil, err
	}
	resp, fd, err := c.Wait(id)
	if fd >= 0 {
		syscall.Close(fd)
	}
	return resp, err
}

// readResp reads one response, with the descriptor attached to it.
func (c *ProxyClient) readResp(deadline time.Time) (uint64, proxyResp, error) {
	r := proxyResp{fd: -1}
	_ = c.conn.SetReadDeadline(deadline)
	defer c.conn.SetReadDeadline(time.Time{})
	var hdr [proxyRespHeader]byte
	oob := make([]byte, syscall.CmsgSpace(4*4))
	n, oobn, _, _, err := c.conn.ReadMsgUnix(hdr[:], oob)
	if err != nil {
		return 0, r, err
	}
	if oobn > 0 {
		msgs, perr := syscall.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			fds, _ := syscall.ParseUnixRights(&m)
			for _, fd := range fds {
				if r.fd < 0 {
					r.fd = fd
				} else {
					syscall.Close(fd)
				}
			}
		}
		if perr != nil {
			return 0, r, errors.Join(perr, closeFd(r.fd))
		}
	}
	if n == 0 {
		return 0, r, errors.Join(io.EOF, closeFd(r.fd))
	}
	if _, err := io.ReadFull(c.conn, hdr[n:]); err != nil {
		return 0, r, errors.Join(err, closeFd(r.fd))
	}
	id := binary.LittleEndian.Uint64(hdr[0:])
	r.status = binary.LittleEndian.Uint32(hdr[8:])
	size := binary.LittleEndian.Uint32(hdr[12:])
	if size > MaxProxyRequest {
		return 0, r, errors.Join(fmt.Errorf("response of %d bytes", size), closeFd(r.fd))
	}
	r.data = make([]byte, size)
	if _, err := io.ReadFull(c.conn, r.data); err != nil {
		return 0, r, errors.Join(err, closeFd(r.fd))
	}
	return id, r, nil
}

func closeFd(fd int) error {
	if fd >= 0 {
		syscall.Close(fd)
	}
	return nil
}

// Close closes the connection and the descriptors of queued responses.
func (c *ProxyClient) Close() error {
	for _, r := range c.queued {
		closeFd(r.fd)
	}
	c.queued = nil
	return c.conn.Close()
}

// initReq encodes a ProxyInit request.
func initReq(kind Kind, send bool, peer int, k Key) []byte {
	b := make([]byte, 0, proxyInitBytes)
	sendFlag := uint32(0)
	if send {
		sendFlag = 1
	}
	for _, v := range []uint32{uint32(kind), sendFlag, uint32(peer), uint32(k.Channel), uint32(k.From), uint32(k.To), uint32(k.Index)} {
		b = binary.LittleEndian.AppendUint32(b, v)
	}
	return b
}
