package ib_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/hostdev"
	"github.com/twinccl/twinccl/exec/hw/ib"
	"github.com/twinccl/twinccl/exec/hw/ib/soft"
	"github.com/twinccl/twinccl/exec/hw/ib/verbs"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// executor runs conformance cases on local jobs whose ranks each have
// their own host (every connection is a net one) and their own soft
// provider with devs(rank) devices.
type executor struct {
	t    *testing.T
	qps  int
	devs func(rank int) int
	// wrap, when set, wraps rank r's plugin.
	wrap  func(rank int, p transport.Plugin) transport.Plugin
	jobs  map[int]*hostdev.LocalJob
	mu    sync.Mutex // Net runs on every rank's goroutine
	provs []*soft.Provider
	// settings are every rank's IB settings (nil: the defaults).
	settings *ib.Settings
}

func (e *executor) Name() string { return "ib-soft" }

func (e *executor) Execute(p *model.Program, in [][]byte) ([][]byte, error) {
	j := e.jobs[p.NRanks]
	if j == nil {
		var err error
		j, err = hostdev.NewLocalJob(p.NRanks, hostdev.LocalOptions{
			HostsOf: func(r int) string { return fmt.Sprint("host", r) },
			Net: func(r int) transport.Plugin {
				pv, err := soft.New(soft.Options{Devices: e.devs(r)})
				if err != nil {
					e.t.Error(err)
					return nil
				}
				e.mu.Lock()
				e.provs = append(e.provs, pv)
				e.mu.Unlock()
				var pl transport.Plugin = ib.New(ib.Options{Provider: pv, QPsPerConn: e.qps, Settings: e.settings})
				if e.wrap != nil {
					pl = e.wrap(r, pl)
				}
				return pl
			},
		})
		if err != nil {
			return nil, err
		}
		e.jobs[p.NRanks] = j
	}
	return j.Execute(p, in)
}

func (e *executor) close() {
	for _, j := range e.jobs {
		if err := j.Close(); err != nil {
			e.t.Error(err)
		}
	}
	for _, p := range e.provs {
		p.Close()
	}
}

func cases(keep int) []conformance.Case {
	var out []conformance.Case
	for i, c := range conformance.Cases() {
		if c.NRanks <= 8 && i%keep == 0 {
			out = append(out, c)
		}
	}
	return out
}

// TestConformanceSoft runs every 12th conformance case over the ib
// plugin and the software provider.
func TestConformanceSoft(t *testing.T) {
	keep := 12
	if testing.Short() {
		keep = 48
	}
	e := &executor{t: t, qps: 1, devs: func(int) int { return 1 }, jobs: map[int]*hostdev.LocalJob{}}
	defer e.close()
	conformance.Run(t, e, cases(keep)...)
}

// TestMismatchedDevicesMultiQP: ranks with 1, 2 and 3 devices and 2 QPs
// per connection (so 4 or 6 QPs striped over each side's devices).
func TestMismatchedDevicesMultiQP(t *testing.T) {
	e := &executor{t: t, qps: 2, devs: func(r int) int { return 1 + r%3 }, jobs: map[int]*hostdev.LocalJob{}}
	defer e.close()
	for _, c := range []conformance.Case{
		{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: 1 << 20},
		{Coll: model.CollAllGather, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 1, Count: 4099},
	} {
		if err := conformance.Check(e, c); err != nil {
			t.Fatal(err)
		}
	}
}

// pair is two bootstrapped ranks of this process with an ib plugin each.
type pair struct {
	comms [2]*bootstrap.Comm
	plug  [2]*ib.Plugin
	provs [2]*soft.Provider
}

func newPair(t *testing.T, devs [2]int, qps int) *pair {
	t.Helper()
	return newPairWith(t, pairOpt{devs: devs, qps: qps})
}

// pairOpt shapes newPairWith: wrap, when set, wraps rank r's provider;
// gid is both plugins' GID configuration.
type pairOpt struct {
	devs [2]int
	qps  int
	wrap func(r int, p *soft.Provider) verbs.Provider
	gid  ib.GIDConfig
	// qpnBase is every soft device's first QPN (0: random).
	qpnBase uint32
	// settings are rank r's IB settings (nil: the defaults).
	settings [2]*ib.Settings
}

func newPairWith(t *testing.T, o pairOpt) *pair {
	t.Helper()
	devs, qps := o.devs, o.qps
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), 2, 5*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := &pair{}
	var wg sync.WaitGroup
	var errs [2]error
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.comms[r], errs[r] = bootstrap.Init(bootstrap.Config{Rank: r, NRanks: 2, ID: root.ID(), Host: "127.0.0.1", Timeout: 5 * time.Second})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[1], root.Wait()); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < 2; r++ {
		if p.provs[r], err = soft.New(soft.Options{Devices: devs[r], Prefix: fmt.Sprintf("r%d_", r), QPNBase: o.qpnBase}); err != nil {
			t.Fatal(err)
		}
		var pv verbs.Provider = p.provs[r]
		if o.wrap != nil {
			pv = o.wrap(r, p.provs[r])
		}
		p.plug[r] = ib.New(ib.Options{Provider: pv, QPsPerConn: qps, GID: o.gid, Settings: o.settings[r]})
		if err := p.plug[r].Init(p.comms[r]); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for r := 0; r < 2; r++ {
			p.plug[r].Close()
			p.provs[r].Close()
			p.comms[r].Close()
		}
	})
	return p
}

// connect opens rank 0 → rank 1, driving both state machines from one
// goroutine (they are non-blocking).
func (p *pair) connect(t *testing.T) (transport.SendComm, transport.RecvComm) {
	t.Helper()
	h, l, err := p.plug[1].Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := p.plug[0].StartConnect(1, h)
	if err != nil {
		t.Fatal(err)
	}
	var sc transport.SendComm
	var rc transport.RecvComm
	deadline := time.Now().Add(5 * time.Second)
	for sc == nil || rc == nil {
		if sc == nil {
			if sc, err = c.TryConnect(); err != nil {
				t.Fatal(err)
			}
		}
		if rc == nil {
			if rc, err = l.TryAccept(); err != nil {
				t.Fatal(err)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("connect timed out")
		}
		time.Sleep(100 * time.Microsecond)
	}
	return sc, rc
}

// wait tests r, and the other requests (as the proxy's loop does), until
// r completes.
func wait(t *testing.T, r transport.Request, d time.Duration, others ...transport.Request) error {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		for _, o := range others {
			if _, err := o.Test(); err != nil {
				return err
			}
		}
		done, err := r.Test()
		if err != nil || done {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatal("request did not complete")
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// TestTransfers moves messages of several sizes over 2 and 3 devices
// with 3 QPs per connection and checks the payloads.
func TestTransfers(t *testing.T) {
	p := newPair(t, [2]int{2, 3}, 3)
	sc, rc := p.connect(t)
	defer sc.Close()
	defer rc.Close()
	for i, n := range []int{0, 1, 100, 16 << 10, 1<<20 + 3} {
		hdr := bytes.Repeat([]byte{byte(i + 1)}, transport.HeaderSize)
		data := make([]byte, n)
		for k := range data {
			data[k] = byte(k*7 + i)
		}
		sr, err := sc.Isend(hdr, data)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, transport.HeaderSize)
		hr, err := rc.IrecvHeader(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(t, hr, 5*time.Second, sr); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, hdr) {
			t.Fatalf("message %d: header %v", i, got[:4])
		}
		buf := make([]byte, n)
		dr, err := rc.Irecv(buf)
		if err != nil {
			t.Fatal(err)
		}
		if err := wait(t, dr, 5*time.Second, sr); err != nil {
			t.Fatal(err)
		}
		if err := wait(t, sr, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, data) {
			t.Fatalf("message %d of %d bytes corrupted", i, n)
		}
	}
}

// TestSameQPNsOnTwoDevices: QPNs are unique per device only. With every
// device numbering its QPs from the same base, the QPs of one connection
// on two devices share QPNs, and completions must still go to the QP of
// the device whose queue reported them (keyed by QPN alone, receives were
// reposted on the wrong QP, whose queue overflowed).
func TestSameQPNsOnTwoDevices(t *testing.T) {
	p := newPairWith(t, pairOpt{devs: [2]int{2, 2}, qps: 2, qpnBase: 0x500})
	sc, rc := p.connect(t)
	defer sc.Close()
	defer rc.Close()
	data, buf := make([]byte, 256<<10), make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i * 31)
	}
	// More messages than a QP's receive queue holds.
	for i := 0; i < 100; i++ {
		message(t, sc, rc, data, buf)
	}
}

// TestPeerDies kills the receiver's provider mid-transfer: the sender's
// request fails with an error naming the peer, without hanging.
func TestPeerDies(t *testing.T) {
	p := newPair(t, [2]int{1, 1}, 2)
	sc, rc := p.connect(t)
	defer sc.Close()
	hdr := make([]byte, transport.HeaderSize)
	sr, err := sc.Isend(hdr, make([]byte, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	hr, _ := rc.IrecvHeader(make([]byte, transport.HeaderSize))
	if err := wait(t, hr, 5*time.Second, sr); err != nil {
		t.Fatal(err)
	}
	// The receiver dies before posting the payload buffer.
	p.provs[1].Close()
	rc.Close()
	start := time.Now()
	err = wait(t, sr, 5*time.Second)
	if err == nil || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("want an error naming rank 1, got %v", err)
	}
	t.Logf("after %v: %v", time.Since(start), err)
}

func TestSelectHCA(t *testing.T) {
	names := []string{"mlx5_0", "mlx5_1", "mlx5_10", "soft0"}
	for _, c := range []struct {
		spec string
		want string
	}{
		{"", "mlx5_0 mlx5_1 mlx5_10 soft0"},
		{"mlx5_1", "mlx5_1 mlx5_10"},
		{"=mlx5_1:1", "mlx5_1"},
		{"^mlx5", "soft0"},
		{"^=mlx5_0,soft0", "mlx5_1 mlx5_10"},
	} {
		if got := strings.Join(ib.SelectHCA(names, c.spec), " "); got != c.want {
			t.Errorf("%q: %q, want %q", c.spec, got, c.want)
		}
	}
}
