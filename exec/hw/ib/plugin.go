// Package ib is the InfiniBand net plugin of the transport layer, written
// against the small verbs interface of exec/hw/ib/verbs so that it runs
// over real HCAs (exec/hw/ib/rdma, cgo) or the software provider
// (exec/hw/ib/soft, the CI test vehicle).
//
// It follows NCCL's IB plugin: the receiver listens (the handle in the
// connect info is a key its bootstrap listener knows), the sender
// connects; both exchange their device counts, compute the QP count (QPs
// per connection × the larger device count), create QPs striped across
// their devices, exchange metadata (QPNs, device indexes, GID/LID, MTU,
// the sender's FIFO address and rkey), move the QPs INIT → RTR → RTS and
// finish with a ready message. The receiver posts the addresses and rkeys
// of its buffers into the sender's FIFO (an RDMA write with immediate);
// the sender writes the header, then the payload striped over the QPs,
// by RDMA write with immediate; both sides poll their completion queues
// in Test. Connect and accept are non-blocking state machines that the
// proxy advances poll by poll. The control socket of the setup stays
// open: its loss is how a dead peer is noticed even when no work request
// is outstanding.
//
// Each port's GID index is chosen as NCCL chooses it (SelectGID:
// NCCL_IB_GID_INDEX, else the GID of the configured address family and
// RoCE version on RoCE, index 0 on InfiniBand), and the queue pairs use
// it as their source GID. Data buffers are registered through a cache
// per connection (NCCL's MR cache): a buffer inside a region already
// registered with the access it needs reuses it, so the proxy's repeated
// transfers from and into the same connection memory register it once;
// the regions are deregistered when the connection closes.
//
// NCCL's IB settings (settings.go: traffic class, service level, timeout,
// retry count, adaptive routing, ECE, relaxed ordering, striping over
// QPs) reach the QPs, registrations and data path as in NCCL. GPU buffers
// register with the NICs for GPUDirect RDMA (gdrcomm.go: dma-buf or
// nvidia-peermem on an HCA, CUDA copies in the software provider), and a
// receiving end flushes a GPUDirect receive by an RDMA read on its flush
// QP where NCCL's rule asks for it (gdr.go).
package ib

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// Options tune the plugin.
type Options struct {
	// Provider supplies the devices.
	Provider verbs.Provider
	// QPsPerConn is NCCL_IB_QPS_PER_CONNECTION
	// (TWINCCL_IB_QPS_PER_CONNECTION), default 1.
	QPsPerConn int
	// HCA selects devices like NCCL_IB_HCA (TWINCCL_IB_HCA): a comma
	// list of name prefixes, each optionally ":port"; a leading "="
	// makes them exact names, a leading "^" excludes them.
	HCA string
	// GID chooses each port's GID index; the zero value stands for
	// DefaultGIDConfig, and a zero Family or RoCEVersion for its
	// default.
	GID GIDConfig
	// Settings are NCCL's IB tunables (SettingsFromEnv); nil stands for
	// DefaultSettings.
	Settings *Settings
}

// OptionsFromEnv reads TWINCCL_IB_QPS_PER_CONNECTION, TWINCCL_IB_HCA and
// the GID variables (GIDConfigFromEnv; the NCCL_* names when ours are
// unset) for provider p; a value that does not parse is an error naming
// the variable.
func OptionsFromEnv(p verbs.Provider) (Options, error) {
	o := Options{Provider: p, QPsPerConn: 1, HCA: HCAFromEnv()}
	if v, name, ok := envLookup(os.LookupEnv, "IB_QPS_PER_CONNECTION"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return o, fmt.Errorf("ib plugin: %s=%q is not a positive count", name, v)
		}
		o.QPsPerConn = min(n, 128)
	}
	var err error
	if o.GID, err = GIDConfigFromEnv(nil); err != nil {
		return o, err
	}
	st, err := SettingsFromEnv(nil)
	o.Settings = &st
	return o, err
}

// HCAFromEnv is the device filter TWINCCL_IB_HCA, or NCCL_IB_HCA when
// ours is unset (see SelectHCA).
func HCAFromEnv() string {
	v, _, _ := envLookup(os.LookupEnv, "IB_HCA")
	return v
}

// SelectHCA filters device names by an NCCL_IB_HCA-style spec.
func SelectHCA(names []string, spec string) []string {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return names
	}
	exclude, exact := false, false
	if strings.HasPrefix(spec, "^") {
		exclude, spec = true, spec[1:]
	}
	if strings.HasPrefix(spec, "=") {
		exact, spec = true, spec[1:]
	}
	var pats []string
	for _, p := range strings.Split(spec, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pats = append(pats, strings.SplitN(p, ":", 2)[0])
		}
	}
	var out []string
	for _, n := range names {
		hit := false
		for _, p := range pats {
			if exact && n == p || !exact && strings.HasPrefix(n, p) {
				hit = true
			}
		}
		if hit != exclude {
			out = append(out, n)
		}
	}
	return out
}

type device struct {
	ctx  verbs.Context
	pd   verbs.PD
	port verbs.PortAttr
	// gidIndex is the chosen entry of port 1's GID table, gid its GID.
	gidIndex int
	gid      [16]byte
	// relaxed: data buffers are registered with relaxed ordering
	// (Settings.RelaxedOrdering and the device's support).
	relaxed bool
}

// Plugin is the ib net plugin.
type Plugin struct {
	opt  Options
	comm *bootstrap.Comm
	devs []*device

	mu      sync.Mutex
	next    uint64
	pending map[uint64]*listener
}

// New returns the plugin; Init opens the devices.
func New(opt Options) *Plugin {
	if opt.QPsPerConn <= 0 {
		opt.QPsPerConn = 1
	}
	def := DefaultGIDConfig()
	if opt.GID == (GIDConfig{}) {
		opt.GID = def
	}
	if opt.GID.Family == 0 {
		opt.GID.Family = def.Family
	}
	if opt.GID.RoCEVersion == 0 {
		opt.GID.RoCEVersion = def.RoCEVersion
	}
	if opt.Settings == nil {
		st := DefaultSettings()
		opt.Settings = &st
	}
	return &Plugin{opt: opt, pending: map[uint64]*listener{}}
}

// Name is "IB".
func (p *Plugin) Name() string { return "IB" }

// Devices names the devices in use.
func (p *Plugin) Devices() []string {
	var n []string
	for _, d := range p.devs {
		n = append(n, d.ctx.Name())
	}
	return n
}

// Init opens the selected devices with an active port 1, chooses the
// GID index of each (SelectGID) and registers the plugin's handler on the
// bootstrap listener.
func (p *Plugin) Init(comm *bootstrap.Comm) error {
	if p.opt.Provider == nil {
		return errors.New("ib plugin: no verbs provider")
	}
	names, err := p.opt.Provider.Devices()
	if err != nil {
		return fmt.Errorf("ib plugin: list devices: %w", err)
	}
	for _, n := range SelectHCA(names, p.opt.HCA) {
		ctx, err := p.opt.Provider.Open(n)
		if err != nil {
			p.Close()
			return fmt.Errorf("ib plugin: %w", err)
		}
		pa, err := ctx.QueryPort(1)
		if err != nil || !pa.Active {
			ctx.Close()
			continue
		}
		d := &device{ctx: ctx, port: pa}
		table, err := readGIDTable(ctx, 1, pa.GIDTableLen)
		if err == nil {
			d.gidIndex, err = SelectGID(pa.LinkLayer, table, p.opt.GID)
		}
		if err == nil {
			d.gid = table[d.gidIndex].GID
			d.relaxed, err = relaxedOrdering(ctx, p.opt.Settings.RelaxedOrdering)
		}
		if err == nil {
			d.pd, err = ctx.AllocPD()
		}
		if err != nil {
			ctx.Close()
			p.Close()
			return fmt.Errorf("ib plugin: %s port 1: %w", n, err)
		}
		slog.Default().Debug("ib plugin: device", "name", n, "link", pa.LinkLayer, "gid_index", d.gidIndex,
			"gid", net.IP(d.gid[:]).String(), "gid_type", table[d.gidIndex].Type)
		p.devs = append(p.devs, d)
		if len(p.devs) == maxDevs {
			break
		}
	}
	if len(p.devs) == 0 {
		return fmt.Errorf("ib plugin: no active device among %v (HCA filter %q): %w", names, p.opt.HCA, verbs.ErrNoDevice)
	}
	p.comm = comm
	comm.Handle(bootstrap.TypeNet, p.handle)
	return nil
}

// relaxedOrdering decides whether ctx registers data buffers with
// relaxed ordering for NCCL_IB_PCI_RELAXED_ORDERING=mode: 0 never, 2
// where the device supports it, 1 always (an error where it cannot).
func relaxedOrdering(ctx verbs.Context, mode int) (bool, error) {
	ro, ok := ctx.(verbs.RelaxedOrderer)
	can := ok && ro.RelaxedOrdering()
	switch mode {
	case 0:
		return false, nil
	case 1:
		if !can {
			return false, fmt.Errorf("NCCL_IB_PCI_RELAXED_ORDERING=1: device %s cannot register memory with relaxed ordering", ctx.Name())
		}
	}
	return can, nil
}

// Close releases pending listeners and the devices.
func (p *Plugin) Close() error {
	p.mu.Lock()
	ls := p.pending
	p.pending = map[uint64]*listener{}
	p.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, d := range p.devs {
		d.pd.Close()
		d.ctx.Close()
	}
	p.devs = nil
	return nil
}

// handle takes a control connection: {key u64} names its listener.
func (p *Plugin) handle(h bootstrap.Hello, c net.Conn) {
	b, err := bootstrap.ReadFrame(c, 8, time.Now().Add(p.comm.Timeout()))
	var l *listener
	if err == nil && len(b) == 8 {
		p.mu.Lock()
		l = p.pending[binary.LittleEndian.Uint64(b)]
		p.mu.Unlock()
	}
	if l == nil || l.peer != int(h.Rank) || !l.deliver(c) {
		slog.Default().Debug("ib plugin: refused control connection", "from", h.Rank, "err", err)
		c.Close()
	}
}

// Listen registers a listener for one connection from peer; the handle
// is its key.
func (p *Plugin) Listen(peer int) ([]byte, transport.Listener, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.next++
	l := &listener{p: p, key: p.next, peer: peer}
	p.pending[l.key] = l
	return binary.LittleEndian.AppendUint64(nil, l.key), l, nil
}

// StartConnect begins a connection to peer: it dials the peer's
// listener in a helper goroutine and returns at once; TryConnect advances
// the handshake.
func (p *Plugin) StartConnect(peer int, handle []byte) (transport.Connector, error) {
	if len(handle) != 8 {
		return nil, fmt.Errorf("ib plugin: handle of %d bytes from rank %d", len(handle), peer)
	}
	c := &connector{ep: newEndpoint(p, peer, true), dialed: make(chan dialResult, 1)}
	key := append([]byte(nil), handle...)
	go func() {
		nc, err := p.comm.Dial(peer, bootstrap.TypeNet)
		if err == nil {
			if err = bootstrap.WriteFrame(nc, key, time.Now().Add(p.comm.Timeout())); err != nil {
				nc.Close()
			}
		}
		c.dialed <- dialResult{nc, err}
	}()
	return c, nil
}

type dialResult struct {
	c   net.Conn
	err error
}

// connector is the sender's connect state machine.
type connector struct {
	ep       *endpoint
	dialed   chan dialResult
	state    int
	returned bool
}

// Sender states.
const (
	cDial = iota
	cHello
	cMeta
	cDone
)

// TryConnect advances the connection: nil and no error while it is in
// progress, the SendComm once it is ready.
func (c *connector) TryConnect() (transport.SendComm, error) {
	ep := c.ep
	switch c.state {
	case cDial:
		select {
		case r := <-c.dialed:
			c.state = cHello // the dial is consumed: Close need not wait for it
			if r.err != nil {
				return nil, c.fail(fmt.Errorf("ib plugin: connect to rank %d: %w", ep.peer, r.err))
			}
			ep.attach(r.c)
			if err := ep.sendCtl(ctlMsg{NDev: len(ep.p.devs)}); err != nil {
				return nil, c.fail(err)
			}
		default:
			return nil, nil
		}
		fallthrough
	case cHello:
		m, err := ep.recvCtl()
		if err != nil || m == nil {
			return nil, c.fail(err)
		}
		if err := ep.setup(m.NDev); err != nil {
			return nil, c.fail(err)
		}
		if err := ep.sendCtl(ep.localMeta()); err != nil {
			return nil, c.fail(err)
		}
		c.state = cMeta
		fallthrough
	case cMeta:
		m, err := ep.recvCtl()
		if err != nil || m == nil {
			return nil, c.fail(err)
		}
		if err := ep.connectQPs(m); err != nil {
			return nil, c.fail(err)
		}
		if err := ep.sendCtl(ctlMsg{Ready: true}); err != nil {
			return nil, c.fail(err)
		}
		c.state, c.returned = cDone, true
		return &sendComm{ep}, nil
	}
	return nil, fmt.Errorf("ib plugin: connect to rank %d: already returned, failed or closed", ep.peer)
}

func (c *connector) fail(err error) error {
	if err == nil {
		return nil
	}
	c.Close()
	return err
}

// Close abandons the connection (once TryConnect returned it, the
// SendComm owns it and Close does nothing).
func (c *connector) Close() error {
	if c.returned {
		return nil
	}
	if c.state == cDial {
		go func() {
			if r := <-c.dialed; r.c != nil {
				r.c.Close()
			}
		}()
	}
	c.state = cDone
	return c.ep.close()
}

// listener is the receiver's accept state machine.
type listener struct {
	p     *Plugin
	key   uint64
	peer  int
	mu    sync.Mutex
	ep    *endpoint
	state int
	taken bool
}

// Receiver states.
const (
	aWaitConn = iota
	aHello
	aMeta
	aReady
	aDone
)

func (l *listener) deliver(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken || l.ep != nil {
		return false
	}
	l.ep = newEndpoint(l.p, l.peer, false)
	l.ep.attach(c)
	l.state = aHello
	return true
}

// TryAccept advances the accept: nil and no error while in progress.
func (l *listener) TryAccept() (transport.RecvComm, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taken {
		return nil, fmt.Errorf("ib plugin: connection from rank %d already taken or closed", l.peer)
	}
	ep := l.ep
	fail := func(err error) (transport.RecvComm, error) {
		if err == nil {
			return nil, nil
		}
		l.taken = true
		ep.close()
		return nil, err
	}
	switch l.state {
	case aWaitConn:
		return nil, nil
	case aHello:
		m, err := ep.recvCtl()
		if err != nil || m == nil {
			return fail(err)
		}
		if err := ep.sendCtl(ctlMsg{NDev: len(l.p.devs)}); err != nil {
			return fail(err)
		}
		if err := ep.setup(m.NDev); err != nil {
			return fail(err)
		}
		l.state = aMeta
		fallthrough
	case aMeta:
		m, err := ep.recvCtl()
		if err != nil || m == nil {
			return fail(err)
		}
		if err := ep.connectQPs(m); err != nil {
			return fail(err)
		}
		if err := ep.sendCtl(ep.localMeta()); err != nil {
			return fail(err)
		}
		l.state = aReady
		fallthrough
	case aReady:
		m, err := ep.recvCtl()
		if err != nil || m == nil {
			return fail(err)
		}
		if !m.Ready {
			return fail(fmt.Errorf("ib plugin: rank %d: expected the ready message", l.peer))
		}
		l.state, l.taken = aDone, true
		l.p.mu.Lock()
		delete(l.p.pending, l.key)
		l.p.mu.Unlock()
		return &recvComm{ep}, nil
	}
	return nil, fmt.Errorf("ib plugin: connection from rank %d already taken", l.peer)
}

// Close drops the listener (and a connection not yet taken).
func (l *listener) Close() error {
	l.p.mu.Lock()
	delete(l.p.pending, l.key)
	l.p.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.taken {
		l.taken = true
		if l.ep != nil {
			l.ep.close()
		}
	}
	return nil
}

// ctlMsg is a control message of the connection setup.
type ctlMsg struct {
	NDev  int       `json:",omitempty"`
	Meta  *metadata `json:",omitempty"`
	Ready bool      `json:",omitempty"`
}

// metadata describes one side's queue pairs.
type metadata struct {
	QPN  []uint32
	Dev  []int // device index of each QP
	LID  []uint16
	GID  [][16]byte
	MTU  []int
	Fifo uint64 // sender: FIFO address
	RKey uint32 // sender: FIFO rkey
	// TC and SL: the sender's NCCL_IB_TC and NCCL_IB_SL, echoed by the
	// receiver; both ends' QPs use them.
	TC, SL int
	// Split is the sender's NCCL_IB_SPLIT_DATA_ON_QPS, which the
	// receiver adopts (both ends must count the same stripes).
	Split bool `json:",omitempty"`
	// ECE of each QP where its provider supports it (ECEOK), the
	// sender's own, the receiver's reduced by the sender's.
	ECE   []verbs.ECE `json:",omitempty"`
	ECEOK []bool      `json:",omitempty"`
}

// Protocol constants.
const (
	fifoDepth = 4 * model.ProgSlots
	entBytes  = 24 + 4*maxDevs
	maxDevs   = 8
	qDepth    = 2*fifoDepth + 8
	// sendDepth bounds a QP's outstanding sends: a header and, with
	// adaptive routing, two work requests per data stripe for each
	// message in flight (NCCL likewise doubles its send queue).
	sendDepth = 3*fifoDepth + 8
	stripeMin = 16 << 10
	kindFifo  = 1
	kindHdr   = 2
	kindData  = 3
	maxCtl    = 1 << 20
)

// Compile-time checks.
var (
	_ transport.Plugin    = (*Plugin)(nil)
	_ transport.Listener  = (*listener)(nil)
	_ transport.Connector = (*connector)(nil)
)

func encodeCtl(m ctlMsg) []byte {
	b, _ := json.Marshal(m)
	return b
}
