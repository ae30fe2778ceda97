package ib_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// pollPlugin wraps a plugin and counts how the proxy drives its connects
// and accepts: polls that found them in progress, and completions. With
// stall set, its accepts never advance and closing a listener leaves the
// connection it holds open until the plugin closes (a receiver that hangs
// without a word).
type pollPlugin struct {
	transport.Plugin
	stall                     bool
	connectPolls, acceptPolls atomic.Int64
	connects, accepts         atomic.Int64
}

func (p *pollPlugin) Listen(peer int) ([]byte, transport.Listener, error) {
	h, l, err := p.Plugin.Listen(peer)
	if err != nil {
		return nil, nil, err
	}
	return h, &pollListener{Listener: l, p: p}, nil
}

func (p *pollPlugin) StartConnect(peer int, h []byte) (transport.Connector, error) {
	c, err := p.Plugin.StartConnect(peer, h)
	if err != nil {
		return nil, err
	}
	return &pollConnector{Connector: c, p: p}, nil
}

type pollListener struct {
	transport.Listener
	p *pollPlugin
}

func (l *pollListener) Close() error {
	if l.p.stall {
		return nil // the plugin's Close closes it
	}
	return l.Listener.Close()
}

func (l *pollListener) TryAccept() (transport.RecvComm, error) {
	if l.p.stall {
		l.p.acceptPolls.Add(1)
		return nil, nil
	}
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
	transport.Connector
	p *pollPlugin
}

func (c *pollConnector) TryConnect() (transport.SendComm, error) {
	sc, err := c.Connector.TryConnect()
	switch {
	case sc != nil:
		c.p.connects.Add(1)
	case err == nil:
		c.p.connectPolls.Add(1)
	}
	return sc, err
}

// TestProxyConnectOverSeveralPolls: the proxy drives the ib plugin's
// connect and accept state machines poll by poll. Their handshake (hello,
// metadata, ready) needs the other side's answer at each step, so they
// are found in progress on several polls (a connection could finish
// within one poll only if the peer answered twice while that poll ran);
// every one completes once, and the connections then carry an AllReduce.
func TestProxyConnectOverSeveralPolls(t *testing.T) {
	var mu sync.Mutex
	plugs := make([]*pollPlugin, 2)
	e := &executor{t: t, qps: 2, devs: func(r int) int { return 1 + r }, jobs: map[int]*hostdev.LocalJob{},
		wrap: func(r int, p transport.Plugin) transport.Plugin {
			pp := &pollPlugin{Plugin: p}
			mu.Lock()
			plugs[r] = pp
			mu.Unlock()
			return pp
		}}
	defer e.close()
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 2, NChannels: 2, Count: 1 << 16}
	if err := conformance.Check(e, c); err != nil {
		t.Fatal(err)
	}
	for r, p := range plugs {
		cn, cp, an, ap := p.connects.Load(), p.connectPolls.Load(), p.accepts.Load(), p.acceptPolls.Load()
		t.Logf("rank %d: %d connects (%d polls in progress), %d accepts (%d polls in progress)", r, cn, cp, an, ap)
		if cn != 2 || an != 2 || cp < 1 || ap < 1 || cp+ap < cn+an {
			t.Errorf("rank %d: want 2 connects and 2 accepts, found in progress on at least as many polls", r)
		}
	}
}

// TestProxyConnectPeerNeverAnswers: rank 1's accepts never advance, so
// rank 0's connects to it never get an answer: the collective fails after
// the timeout, with errors that name the silent peer.
func TestProxyConnectPeerNeverAnswers(t *testing.T) {
	const timeout = 500 * time.Millisecond
	var provs []*soft.Provider
	var mu sync.Mutex
	j, err := hostdev.NewLocalJob(2, hostdev.LocalOptions{
		HostsOf: func(r int) string { return string(rune('a' + r)) },
		Timeout: timeout,
		Net: func(r int) transport.Plugin {
			pv, err := soft.New(soft.Options{})
			if err != nil {
				t.Error(err)
				return nil
			}
			mu.Lock()
			provs = append(provs, pv)
			mu.Unlock()
			return &pollPlugin{Plugin: ib.New(ib.Options{Provider: pv}), stall: r == 1}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		j.Close()
		for _, p := range provs {
			p.Close()
		}
	}()
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 2, NChannels: 1, Count: 1024}
	prog, err := c.Program()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = j.Execute(prog, conformance.Inputs(c, prog))
	el := time.Since(start)
	t.Logf("after %v: %v", el, err)
	if err == nil || !strings.Contains(err.Error(), "0->1 #0 to rank 1: rank 1 never answered within 500ms") {
		t.Errorf("want rank 0's connect to time out naming rank 1, got %v", err)
	}
	if el > 6*timeout {
		t.Errorf("took %v with a %v timeout", el, timeout)
	}
}
