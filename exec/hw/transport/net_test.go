package transport

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
)

// pollPlugin wraps a plugin and counts how the proxy drives its
// connects and accepts: polls that found them in progress, and
// completions. With silent set, the connections peers open to this
// rank's plugin are held and never answered (a peer that hangs).
type pollPlugin struct {
	Plugin
	silent                    bool
	connectPolls, acceptPolls atomic.Int64
	connects, accepts         atomic.Int64
	mu                        sync.Mutex
	held                      []net.Conn
}

func (p *pollPlugin) Init(comm *bootstrap.Comm) error {
	if err := p.Plugin.Init(comm); err != nil {
		return err
	}
	if p.silent {
		comm.Handle(bootstrap.TypeNet, func(_ bootstrap.Hello, c net.Conn) {
			p.mu.Lock()
			p.held = append(p.held, c)
			p.mu.Unlock()
		})
	}
	return nil
}

func (p *pollPlugin) Listen(peer int) ([]byte, Listener, error) {
	h, l, err := p.Plugin.Listen(peer)
	if err != nil {
		return nil, nil, err
	}
	return h, &pollListener{Listener: l, p: p}, nil
}

func (p *pollPlugin) StartConnect(peer int, h []byte) (Connector, error) {
	c, err := p.Plugin.StartConnect(peer, h)
	if err != nil {
		return nil, err
	}
	return &pollConnector{Connector: c, p: p}, nil
}

func (p *pollPlugin) Close() error {
	p.mu.Lock()
	for _, c := range p.held {
		c.Close()
	}
	p.mu.Unlock()
	return p.Plugin.Close()
}

type pollListener struct {
	Listener
	p *pollPlugin
}

func (l *pollListener) TryAccept() (RecvComm, error) {
	rc, err := l.Listener.TryAccept()
	switch {
	case rc != nil:
		l.p.accepts.Add(1)
	case err == nil:
		l.p.acceptPolls.Add(1)
	}
	return rc, err
}

type pollConnector struct {
	Connector
	p *pollPlugin
}

func (c *pollConnector) TryConnect() (SendComm, error) {
	sc, err := c.Connector.TryConnect()
	switch {
	case sc != nil:
		c.p.connects.Add(1)
	case err == nil:
		c.p.connectPolls.Add(1)
	}
	return sc, err
}

// connectEach runs Set.Connect(keys) on the given ranks, rank i of them
// after delays[i], and returns each one's connections and error.
func connectEach(sets []*Set, keys []Key, ranks []int, delays []time.Duration) ([][]*Conn, []error) {
	conns := make([][]*Conn, len(sets))
	errs := make([]error, len(sets))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(delays[i])
			conns[r], errs[r] = sets[r].Connect(keys)
		}()
	}
	wg.Wait()
	return conns, errs
}

// TestNetConnectOverSeveralPolls: the proxy drives the socket plugin's
// connect and accept without blocking: the side that comes first is found
// in progress on several polls until its peer comes 30 ms later (the
// receiver's accept when the sender is late; the sender's connect, which
// needs the receiver's acknowledgement, when the receiver is late), each
// completes once, and the connection then moves data. (Whether the late
// side also polls in vain depends on the scheduler, so it is not checked.)
func TestNetConnectOverSeveralPolls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		first int // the rank that starts 30 ms before the other
	}{{"sender late", 1}, {"receiver late", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			checkGoroutines(t)
			plugs := make([]*pollPlugin, 2)
			sets := startSetsWith(t, 2, setsOpt{net: func(r int) Plugin {
				plugs[r] = &pollPlugin{Plugin: NewSocket(SocketOptions{NThreads: 2, NSocksPerThread: 2})}
				return plugs[r]
			}})
			keys := []Key{{0, 0, 1, 0}}
			conns, errs := connectEach(sets, keys, []int{tc.first, 1 - tc.first}, []time.Duration{0, 30 * time.Millisecond})
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			s, r := plugs[0], plugs[1]
			t.Logf("sender: %d polls in progress, %d connects; receiver: %d polls in progress, %d accepts",
				s.connectPolls.Load(), s.connects.Load(), r.acceptPolls.Load(), r.accepts.Load())
			early := r.acceptPolls.Load()
			if tc.first == 0 {
				early = s.connectPolls.Load()
			}
			if early < 2 || r.accepts.Load() != 1 || s.connects.Load() != 1 {
				t.Errorf("want the early side in progress on several polls and one connect and one accept")
			}
			transfer(t, conns[0][0], conns[1][0], 20)
		})
	}
}

// TestNetConnectPeerNeverAnswers: a connect whose peer never answers,
// and an accept whose peer never connects, fail after the comm's timeout
// with an error naming that peer, and release what they held.
func TestNetConnectPeerNeverAnswers(t *testing.T) {
	const timeout = 500 * time.Millisecond
	keys := []Key{{0, 0, 1, 0}}
	t.Run("peer holds the connection", func(t *testing.T) {
		checkGoroutines(t)
		sets := startSetsWith(t, 2, setsOpt{timeout: timeout, net: func(r int) Plugin {
			return &pollPlugin{Plugin: NewSocket(SocketOptions{}), silent: r == 1}
		}})
		// While rank 0's connect waits, its proxy keeps answering.
		answered := make(chan time.Duration, 1)
		go func() {
			time.Sleep(timeout / 5)
			c, err := DialProxy(sets[0].comm, 0)
			if err != nil {
				answered <- -1
				return
			}
			defer c.Close()
			t0 := time.Now()
			if _, err := c.Call(ProxySharedInit, nil); err != nil {
				answered <- -1
				return
			}
			answered <- time.Since(t0)
		}()
		start := time.Now()
		_, errs := connectEach(sets, keys, []int{0, 1}, []time.Duration{0, 0})
		el := time.Since(start)
		t.Logf("after %v: %v | %v", el, errs[0], errs[1])
		if d := <-answered; d < 0 || d > timeout/5 {
			t.Errorf("a request to the proxy during the pending connect took %v", d)
		}
		if errs[0] == nil || !strings.Contains(errs[0].Error(), "net connect ch0 0->1 #0 to rank 1") ||
			!strings.Contains(errs[0].Error(), "rank 1 never answered within 500ms") {
			t.Errorf("sender: %v; want the connect to rank 1 to time out naming rank 1", errs[0])
		}
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "rank 0 never connected") {
			t.Errorf("receiver: %v; want its accept to time out naming rank 0", errs[1])
		}
		if el > 4*timeout {
			t.Errorf("took %v with a %v timeout", el, timeout)
		}
	})
	t.Run("peer never connects", func(t *testing.T) {
		checkGoroutines(t)
		sets := startSetsWith(t, 2, setsOpt{timeout: timeout})
		start := time.Now()
		_, errs := connectEach(sets, keys, []int{1}, []time.Duration{0})
		el := time.Since(start)
		if errs[1] == nil || !strings.Contains(errs[1].Error(), "net accept of ch0 0->1 #0 from rank 0: rank 0 never connected within 500ms") {
			t.Errorf("receiver: %v; want its accept to time out naming rank 0", errs[1])
		}
		if el > 4*timeout {
			t.Errorf("took %v with a %v timeout", el, timeout)
		}
		sets[1].svc.mu.Lock()
		left := len(sets[1].svc.conns)
		sets[1].svc.mu.Unlock()
		if left != 0 {
			t.Errorf("%d proxy connections left after the failed connect", left)
		}
		sock := sets[1].svc.net.(*Socket)
		sock.mu.Lock()
		pending := len(sock.pending)
		sock.mu.Unlock()
		if pending != 0 {
			t.Errorf("%d socket listeners left after the failed connect", pending)
		}
	})
}
