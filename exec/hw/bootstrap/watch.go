package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Liveness connections carry one byte at a time: a heartbeat, the
// peer's goodbye, or a report that names the rank the peer lost (followed
// by that rank as a u32).
const (
	watchBeat   byte = 0
	watchBye    byte = 1
	watchReport byte = 2
)

// DefaultHeartbeatTimeout is Config.HeartbeatTimeout when 0: a watched
// peer silent this long is named lost, so every survivor names a stopped
// rank within it (plus at most one heartbeat period when the news
// travels through another rank).
const DefaultHeartbeatTimeout = 10 * time.Second

// HeartbeatsPerTimeout is how many heartbeats a peer sends within one
// heartbeat timeout.
const HeartbeatsPerTimeout = 5

// watchConn is one liveness connection.
type watchConn struct {
	peer     int
	conn     net.Conn
	wmu      sync.Mutex   // one writer at a time
	lastBeat atomic.Int64 // unix ns of the last byte from the peer
	broken   atomic.Bool
}

func (w *watchConn) write(b []byte, d time.Duration) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	_ = w.conn.SetWriteDeadline(time.Now().Add(d))
	_, err := w.conn.Write(b)
	return err
}

func (c *Comm) interval() time.Duration { return c.heartbeat / HeartbeatsPerTimeout }

// fullMesh reports whether every rank watches every other.
func (c *Comm) fullMesh() bool { return c.nranks <= MaxWatchRanks }

func (c *Comm) startWatch(deadline time.Time) error {
	n := c.nranks
	var peers []int
	if c.fullMesh() {
		for p := c.rank + 1; p < n; p++ {
			peers = append(peers, p)
		}
	} else {
		peers = append(peers, (c.rank+1)%n)
	}
	c.wg.Add(1)
	go c.beat()
	for _, p := range peers {
		conn, err := Dial(c.addrs[p], c.hello(TypeWatch), c.secret, deadline)
		if err != nil {
			return fmt.Errorf("bootstrap rank %d: liveness connection to rank %d: %w", c.rank, p, err)
		}
		w := c.registerWatch(p, conn)
		if w == nil {
			return fmt.Errorf("bootstrap rank %d: closed while connecting liveness", c.rank)
		}
		c.wg.Add(1)
		go func() { defer c.wg.Done(); c.watch(w) }()
	}
	return nil
}

// beat sends a heartbeat on every liveness connection each interval.
func (c *Comm) beat() {
	defer c.wg.Done()
	t := time.NewTicker(c.interval())
	defer t.Stop()
	for {
		select {
		case <-c.beatStop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		ws := append([]*watchConn(nil), c.watches...)
		c.mu.Unlock()
		for _, w := range ws {
			_ = w.write([]byte{watchBeat}, c.interval())
		}
	}
}

// addWatch serves a liveness connection a peer opened (it proved its
// rank); a second one from the same rank is refused, so that nobody can
// speak for a rank that already has one.
func (c *Comm) addWatch(peer int, conn net.Conn) {
	if w := c.registerWatch(peer, conn); w != nil {
		c.watch(w)
	}
}

// registerWatch keeps conn for Close and the heartbeats; nil (conn
// closed) when closing or when peer already has one.
func (c *Comm) registerWatch(peer int, conn net.Conn) *watchConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		conn.Close()
		return nil
	}
	if c.watching[peer] {
		c.log.Warn("bootstrap: refused a second liveness connection", "from", peer)
		conn.Close()
		return nil
	}
	c.watching[peer] = true
	w := &watchConn{peer: peer, conn: conn}
	w.lastBeat.Store(time.Now().UnixNano())
	c.watches = append(c.watches, w)
	return w
}

// watch reads a liveness connection until the peer's goodbye. EOF or an
// error before it, or silence longer than the heartbeat timeout, means
// the peer is lost; a report names another rank, and is checked first.
func (c *Comm) watch(w *watchConn) {
	var b [1]byte
	var err error
	for {
		_ = w.conn.SetReadDeadline(time.Now().Add(c.heartbeat))
		if _, err = w.conn.Read(b[:]); err != nil {
			break
		}
		w.lastBeat.Store(time.Now().UnixNano())
		if b[0] == watchBeat {
			continue
		}
		if b[0] == watchBye {
			return
		}
		if b[0] == watchReport {
			var r [4]byte
			_ = w.conn.SetReadDeadline(time.Now().Add(time.Second))
			if _, err = io.ReadFull(w.conn, r[:]); err == nil {
				c.report(w.peer, le.Uint32(r[:]))
				return
			}
			break
		}
		err = fmt.Errorf("unexpected byte %d", b[0])
		break
	}
	w.broken.Store(true)
	if c.isClosed() {
		return
	}
	if IsTimeout(err) {
		err = fmt.Errorf("no heartbeat for %v (the process is stopped or hung): %w", c.heartbeat, ErrNoHeartbeat)
	} else {
		err = fmt.Errorf("liveness connection broke: %w", err)
	}
	c.PeerLost(w.peer, err)
}

// ErrNoHeartbeat is wrapped by the loss of a peer that went silent.
var ErrNoHeartbeat = errors.New("no heartbeat")

func (c *Comm) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// report handles rank from's news that it lost rank x. A report about
// this rank, about the reporter itself or out of range is refused, and
// the reporter is named instead. Where this rank watches x itself (a
// full mesh), the report must agree with what it sees: x's connection
// broken or silent for half the heartbeat timeout, or failing within one
// heartbeat timeout; a rank reported lost that keeps beating is alive,
// and the reporter is named.
func (c *Comm) report(from int, x uint32) {
	bad := func(why string) {
		if !c.isClosed() {
			c.PeerLost(from, fmt.Errorf("it reported rank %d lost, %s", x, why))
		}
	}
	switch {
	case int64(x) >= int64(c.nranks):
		bad("which is out of range")
		return
	case int(x) == c.rank:
		bad("but this is that rank, alive")
		return
	case int(x) == from:
		bad("naming itself")
		return
	}
	xw := c.watchOf(int(x))
	if xw == nil { // not watched here: the report relays a neighbour's loss
		c.PeerLost(int(x), fmt.Errorf("reported by rank %d", from))
		return
	}
	deadline := time.Now().Add(c.heartbeat)
	for {
		// Beats arrive every interval; silence of half the timeout is
		// no scheduling hiccup (a hung rank is silent for the whole
		// timeout by the time its neighbour reports it).
		silent := time.Since(time.Unix(0, xw.lastBeat.Load()))
		if xw.broken.Load() || silent >= c.heartbeat/2 {
			c.PeerLost(int(x), fmt.Errorf("reported by rank %d", from))
			return
		}
		if c.isClosed() || c.Err() != nil {
			return
		}
		if time.Now().After(deadline) {
			bad(fmt.Sprintf("but rank %d kept its heartbeat", x))
			return
		}
		time.Sleep(min(c.interval()/4, 10*time.Millisecond))
	}
}

// watchOf is the liveness connection with peer, nil when none.
func (c *Comm) watchOf(peer int) *watchConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.watches {
		if w.peer == peer {
			return w
		}
	}
	return nil
}

// EnvHeartbeatTimeout overrides DefaultHeartbeatTimeout where
// Config.HeartbeatTimeout is 0: a Go duration ("3s") or seconds ("3").
const EnvHeartbeatTimeout = "TWINCCL_HEARTBEAT_TIMEOUT"

// HeartbeatTimeoutFromEnv is the heartbeat timeout EnvHeartbeatTimeout
// gives, else DefaultHeartbeatTimeout.
func HeartbeatTimeoutFromEnv() (time.Duration, error) {
	v := os.Getenv(EnvHeartbeatTimeout)
	if v == "" {
		return DefaultHeartbeatTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		s, serr := strconv.ParseFloat(v, 64)
		if serr != nil {
			return 0, fmt.Errorf("%s=%q: want a duration (3s) or seconds", EnvHeartbeatTimeout, v)
		}
		d = time.Duration(s * float64(time.Second))
	}
	if d < 50*time.Millisecond {
		return 0, fmt.Errorf("%s=%q: below 50ms every scheduling hiccup would name a rank lost", EnvHeartbeatTimeout, v)
	}
	return d, nil
}
