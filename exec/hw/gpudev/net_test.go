package gpudev

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
)

// TestNetLayout checks what the kernel, the device and the proxy must
// agree on without a GPU: the slot strides (interp.cu's TW_SLOT_*, the
// kernels constants, model.ProtoStepBytes and transport.SlotStride), the
// TwConn of a net end as appendNetConn writes it, and the fifo entry.
func TestNetLayout(t *testing.T) {
	for p, k := range map[model.Protocol]int{model.ProtoLL: kernels.SlotLL, model.ProtoLL128: kernels.SlotLL128, model.ProtoSimple: kernels.SlotSimple} {
		if k != model.ProtoStepBytes(p) || k != transport.SlotStride(p) {
			t.Errorf("%s slot stride: kernels %d, model %d, transport %d", p, k, model.ProtoStepBytes(p), transport.SlotStride(p))
		}
		name := map[model.Protocol]string{model.ProtoLL: "LL", model.ProtoLL128: "LL128", model.ProtoSimple: "SIMPLE"}[p]
		if def := fmt.Sprintf("#define TW_SLOT_%s %d\n", name, k); !strings.Contains(kernels.Interp, def) {
			t.Errorf("interp.cu lacks %q", def)
		}
	}
	if transport.FifoEntryBytes != 32 || !strings.Contains(kernels.Interp, "  TwFifo* fifo;") {
		t.Errorf("fifo entry of %d bytes, or no TwConn.fifo in interp.cu", transport.FifoEntryBytes)
	}
	const base = 0x7f00_0000_0000
	for _, send := range []bool{false, true} {
		b := appendNetConn(nil, base, send)
		if len(b) != kernels.ConnSize {
			t.Fatalf("TwConn of %d bytes, want %d", len(b), kernels.ConnSize)
		}
		for i, p := range []model.Protocol{model.ProtoLL, model.ProtoLL128, model.ProtoSimple, model.ProtoSimple} {
			if got, want := le.Uint64(b[8*i:]), uint64(base+transport.BufOffset(p)); got != want {
				t.Errorf("send=%v ring %d at %#x, want %#x", send, i, got, want)
			}
		}
		if le.Uint64(b[32:]) != base+transport.MemTailOffset || le.Uint64(b[40:]) != base+transport.MemHeadOffset {
			t.Errorf("send=%v: tail %#x head %#x", send, le.Uint64(b[32:]), le.Uint64(b[40:]))
		}
		if le.Uint64(b[kernels.ConnStepOffset:]) != 0 {
			t.Errorf("send=%v: step not 0", send)
		}
		want := uint64(0)
		if send {
			want = base + transport.MemFifoOffset
		}
		if got := le.Uint64(b[kernels.ConnFifoOffset:]); got != want {
			t.Errorf("send=%v: fifo %#x, want %#x", send, got, want)
		}
	}
}

// TestLaneFlags: a lane is flagged for host memory on the side of each
// connection whose buffer is there (SHM, NET), per direction, and not
// over P2P.
func TestLaneFlags(t *testing.T) {
	keys := []transport.Key{{Channel: 0, From: 1, To: 0}, {Channel: 0, From: 0, To: 1}, {Channel: 0, From: 0, To: 2}}
	recvOnly := &model.ProgLane{Recv: []int32{0}}
	sendOnly := &model.ProgLane{Send: []int32{1}}
	both := &model.ProgLane{Recv: []int32{0}, Send: []int32{2}}
	cases := []struct {
		p2pOff bool
		hosts  []string
		lane   *model.ProgLane
		want   uint32
	}{
		{false, []string{"a", "a", "a"}, both, 0},
		{true, []string{"a", "a", "a"}, recvOnly, kernels.LaneHostRecv},
		{true, []string{"a", "a", "a"}, sendOnly, kernels.LaneHostSend},
		{true, []string{"a", "a", "a"}, both, kernels.LaneHostRecv | kernels.LaneHostSend},
		// Rank 1 on another host: only the connections with it are NET.
		{false, []string{"a", "b", "a"}, both, kernels.LaneHostRecv},
		{false, []string{"a", "a", "b"}, both, kernels.LaneHostSend},
	}
	for _, tc := range cases {
		allowP2P(t)
		if tc.p2pOff {
			t.Setenv("NCCL_P2P_DISABLE", "1")
		}
		d := &Device{hosts: tc.hosts}
		if got := d.laneFlags(0, tc.lane, keys); got != tc.want {
			t.Errorf("p2p off %v hosts %v lane %+v: flags %#x, want %#x", tc.p2pOff, tc.hosts, *tc.lane, got, tc.want)
		}
	}
}

// TestLink checks the transport choice (P2P, then SHM, then NET; NET
// between hosts) and which Programs checkTransport refuses.
func TestLink(t *testing.T) {
	cases := []struct {
		p2pOff, shmOff bool
		hosts          []string
		want           Link
	}{
		{false, false, []string{"a", "a"}, LinkP2P},
		{true, false, []string{"a", "a"}, LinkSHM},
		{false, true, []string{"a", "a"}, LinkP2P},
		{true, true, []string{"a", "a"}, LinkNet},
		{false, false, []string{"a", "b"}, LinkNet},
		{true, false, []string{"a", "b"}, LinkNet},
	}
	for _, tc := range cases {
		for _, names := range [][2]string{{"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE"}, {"TWINCCL_P2P_DISABLE", "TWINCCL_SHM_DISABLE"}} {
			allowP2P(t)
			if tc.p2pOff {
				t.Setenv(names[0], "1")
			}
			if tc.shmOff {
				t.Setenv(names[1], "1")
			}
			d := &Device{hosts: tc.hosts}
			if got := d.Link(0, 1); got != tc.want {
				t.Errorf("%v p2p off %v shm off %v hosts %v: %v, want %v", names, tc.p2pOff, tc.shmOff, tc.hosts, got, tc.want)
			}
			if got := d.Link(1, 1); got != LinkSelf {
				t.Errorf("self: %v", got)
			}
			conns := []model.ProgConn{{Channel: 0, From: 0, To: 1}, {Channel: 0, From: 1, To: 1}}
			ll128 := &model.Program{Proto: model.ProtoLL128, Conns: conns}
			err := d.checkTransport(ll128)
			if (err != nil) != (tc.want != LinkP2P) {
				t.Errorf("%v %v: LL128 over %v: %v", names, tc.hosts, tc.want, err)
			}
			if err != nil && !strings.Contains(err.Error(), "LL128") {
				t.Errorf("refusal does not name LL128: %v", err)
			}
			for _, p := range []model.Protocol{model.ProtoLL, model.ProtoSimple} {
				if err := d.checkTransport(&model.Program{Proto: p, Conns: conns}); err != nil {
					t.Errorf("%s over %v refused: %v", p, tc.want, err)
				}
			}
		}
	}
}

// netPair bootstraps two ranks on loopback, each with a transport Set in
// polled mode as the device runs it (every connection on the net
// transport) and the socket plugin with options opt, and connects 0->1
// and 1->0: ends[r][0] is rank r's send side, ends[r][1] its receive side.
func netPair(t testing.TB, opt transport.SocketOptions) (ends [2][2]*transport.Conn) {
	t.Helper()
	root, err := bootstrap.StartRoot("127.0.0.1", bootstrap.RandomMagic(), 2, 10*time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	keys := []transport.Key{{Channel: 0, From: 0, To: 1}, {Channel: 0, From: 1, To: 0}}
	var sets [2]*transport.Set
	var comms [2]*bootstrap.Comm
	var errs [2]error
	var wg sync.WaitGroup
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = bootstrap.Init(bootstrap.Config{Rank: r, NRanks: 2, ID: root.ID(), Host: "127.0.0.1", Timeout: 10 * time.Second, Watch: true})
			if errs[r] != nil {
				return
			}
			if sets[r], errs[r] = transport.NewSet(comms[r], transport.Config{HostIDs: []string{"a", "a"}, ForceNet: true, Net: transport.NewSocket(opt)}); errs[r] != nil {
				return
			}
			sets[r].Proxy().PollCounters()
			var cs []*transport.Conn
			if cs, errs[r] = sets[r].Connect(keys); errs[r] == nil {
				ends[r][0], ends[r][1] = cs[r], cs[1-r]
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for r := 0; r < 2; r++ {
			if sets[r] != nil {
				if err := sets[r].Close(); err != nil {
					t.Error(err)
				}
			}
			if comms[r] != nil {
				comms[r].Close()
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return ends
}

// emuSlice is one slice of an emulated launch: its data and steps.
type emuSlice struct {
	data  []byte
	steps int
}

// emuWait polls cond as the kernel spins, until the deadline.
func emuWait(cond func() bool, deadline time.Time, what string) error {
	var bo transport.Backoff
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out waiting for %s", what)
		}
		bo.Wait()
	}
	return nil
}

// emuSend does to a net send end's memory what one launch of the kernel
// does, with nothing but loads and stores (no Notify): per slice it waits
// for credits (head), writes the data (Simple raw, LL flagged lines) at
// the protocol's slot stride, the fifo entry field by field at the
// offsets TwFifo has, and the tail; at the end it moves the base to the
// next multiple of the slot count and posts the skipped steps.
func emuSend(m transport.Mem, base *uint64, proto model.Protocol, slices []emuSlice, deadline time.Time) error {
	step := uint64(0)
	for _, s := range slices {
		abs := *base + step
		end := abs + uint64(s.steps)
		if err := emuWait(func() bool { return m.Head()+model.ProgSlots >= end }, deadline, fmt.Sprintf("credit for step %d", abs)); err != nil {
			return err
		}
		slot := int(abs % model.ProgSlots)
		nb := len(s.data)
		wire := nb
		switch proto {
		case model.ProtoSimple:
			copy(m.Slot(proto, slot), s.data)
		case model.ProtoLL:
			lines := (nb + model.LLLineData - 1) / model.LLLineData
			wire = lines * model.LLLineBytes
			w := m.Slot(proto, slot)
			flag := uint64(uint32(abs+1)) << 32
			for j := 0; j < lines; j++ {
				var d [8]byte
				copy(d[:], s.data[8*j:])
				le.PutUint64(w[16*j:], uint64(le.Uint32(d[:]))|flag)
				le.PutUint64(w[16*j+8:], uint64(le.Uint32(d[4:]))|flag)
			}
		}
		o := transport.MemFifoOffset + slot*transport.FifoEntryBytes
		le.PutUint64(m[o:], uint64(nb))
		le.PutUint64(m[o+8:], uint64(wire))
		le.PutUint64(m[o+16:], abs)
		le.PutUint32(m[o+24:], uint32(s.steps))
		le.PutUint32(m[o+28:], uint32(proto))
		m.SetTail(end)
		step += uint64(s.steps)
	}
	*base = (*base + step + model.ProgSlots - 1) / model.ProgSlots * model.ProgSlots
	m.SetTail(*base)
	return nil
}

// emuRecv is the receiving kernel: Simple waits for the tail, LL for the
// flags of every line; the data must be the sender's; the slots are
// released through the head; the base moves as on the send side.
func emuRecv(m transport.Mem, base *uint64, proto model.Protocol, slices []emuSlice, deadline time.Time) error {
	step := uint64(0)
	for k, s := range slices {
		abs := *base + step
		end := abs + uint64(s.steps)
		slot := int(abs % model.ProgSlots)
		nb := len(s.data)
		got := make([]byte, nb)
		switch proto {
		case model.ProtoSimple:
			if err := emuWait(func() bool { return m.Tail() >= end }, deadline, fmt.Sprintf("tail of step %d", abs)); err != nil {
				return err
			}
			copy(got, m.Slot(proto, slot)[:nb])
			if e := m.Fifo(slot); e.Size != int64(nb) || e.Step != int64(abs) || int(e.Steps) != s.steps {
				return fmt.Errorf("slice %d: fifo entry %+v, want %d bytes at step %d over %d steps", k, e, nb, abs, s.steps)
			}
		case model.ProtoLL:
			lines := (nb + model.LLLineData - 1) / model.LLLineData
			w := m.Slot(proto, slot)
			flag := uint32(abs + 1)
			word := func(i int) uint64 { return atomic.LoadUint64((*uint64)(unsafe.Pointer(&w[8*i]))) }
			ready := func() bool {
				for j := 0; j < 2*lines; j++ {
					if uint32(word(j)>>32) != flag {
						return false
					}
				}
				return true
			}
			if err := emuWait(ready, deadline, fmt.Sprintf("LL flags of step %d", abs)); err != nil {
				return err
			}
			var d [8]byte
			for j := 0; j < lines; j++ {
				le.PutUint32(d[:], uint32(word(2*j)))
				le.PutUint32(d[4:], uint32(word(2*j+1)))
				copy(got[8*j:], d[:])
			}
		}
		if !bytes.Equal(got, s.data) {
			return fmt.Errorf("slice %d (step %d, %d bytes): wrong data", k, abs, nb)
		}
		m.SetHead(end)
		step += uint64(s.steps)
	}
	*base = (*base + step + model.ProgSlots - 1) / model.ProgSlots * model.ProgSlots
	m.SetHead(*base)
	return nil
}

// emuLaunch is the slices of launch i in one direction: Simple slices of
// two steps from empty to full, LL single steps from empty to a full
// step, a step count that leaves steps to skip at the end.
func emuLaunch(proto model.Protocol, dir, i int) []emuSlice {
	rng := rand.New(rand.NewPCG(uint64(dir), uint64(i)))
	var sizes []int
	steps := 1
	if proto == model.ProtoSimple {
		steps = 2
		sizes = []int{0, 1, 2 * transport.SlotStride(proto), 4093, 1 << 20, 12345, 517}
	} else {
		sizes = []int{8, 0, 13, transport.SlotStride(proto) / 2, 4096, 1, 24, 32760, 999, 16, 7}
	}
	var out []emuSlice
	for _, n := range sizes[:len(sizes)-i%3] {
		b := make([]byte, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		out = append(out, emuSlice{data: b, steps: steps})
	}
	return out
}

// TestNetProxyEmulated runs the net protocol of the GPU device without a
// GPU: goroutines do to the connection memory exactly what the kernel
// does (loads and stores only: no Notify, fifo entries written at the
// TwFifo offsets), in both directions at once, over several launches
// whose step counts leave steps to skip, while the real proxies (polled
// mode) and the socket plugin move the data. Then a ping-pong of
// one-step launches checks that polled mode answers without waiting for
// the idle timer.
func TestNetProxyEmulated(t *testing.T) {
	ends := netPair(t, transport.SocketOptionsFromEnv())
	var base [2][2]uint64 // [rank][send, recv]
	for _, proto := range []model.Protocol{model.ProtoSimple, model.ProtoLL} {
		deadline := time.Now().Add(30 * time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for r := 0; r < 2; r++ {
			wg.Add(2)
			go func() {
				defer wg.Done()
				for i := 0; i < 5 && errs[2*r] == nil; i++ {
					errs[2*r] = emuSend(ends[r][0].Mem, &base[r][0], proto, emuLaunch(proto, r, i), deadline)
				}
			}()
			go func() {
				defer wg.Done()
				for i := 0; i < 5 && errs[2*r+1] == nil; i++ {
					errs[2*r+1] = emuRecv(ends[r][1].Mem, &base[r][1], proto, emuLaunch(proto, 1-r, i), deadline)
				}
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("%s rank %d %s: %v", proto, i/2, [2]string{"send", "recv"}[i%2], err)
			}
		}
		for r := 0; r < 2; r++ {
			n, _ := ends[r][0].NetCounters()
			if n.Done != base[r][0] {
				t.Errorf("%s rank %d: send proxy done at step %d, the kernel at %d", proto, r, n.Done, base[r][0])
			}
		}
	}
	// Ping-pong: rank 0 sends one LL step, rank 1 answers. A polling
	// proxy holds a P while it spins, as do the emulated kernels: with
	// fewer Ps than spinners the socket helpers and the netpoller would
	// starve, which is not what this measures (the device's ranks are
	// processes of one proxy each, or few in a process of many cores).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0))))
	//
	// Polled proxies see the counters move; blocked ones would wait for
	// their idle timer (5 ms) at every hop: about 11 ms a round trip on 2
	// cores, against 0.3 ms polled. Round-trip times are only logged: on a
	// 2-core machine busy with other tests a whole run of them can stall
	// for the scheduler (a median of 9.5 ms was seen, its fastest round
	// 0.29 ms; 15 ms under three busy loops), which says nothing of the
	// proxies. What is checked is the mechanism: no progress loop woke
	// from its idle timer during the ping-pong.
	timeouts := func() (n uint64) {
		for r := range ends {
			for _, c := range ends[r] {
				nc, _ := c.NetCounters()
				n += nc.Timeouts
			}
		}
		return n
	}
	before := timeouts()
	trips := emuPingPong(t, ends, &base, 100)
	t.Logf("ping-pong round trip through the proxies: median %v, fastest %v, slowest %v", trips[len(trips)/2], trips[0], trips[len(trips)-1])
	if d := timeouts() - before; d != 0 {
		t.Errorf("the proxies woke from their idle timer %d times in 100 round trips: they do not see the counters move", d)
	}
}

// emuPingPong makes rounds round trips of one LL step from rank 0 to
// rank 1 and back through the proxies and returns their times, sorted.
func emuPingPong(t testing.TB, ends [2][2]*transport.Conn, base *[2][2]uint64, rounds int) []time.Duration {
	t.Helper()
	msg := []emuSlice{{data: []byte("ping-pong"), steps: 1}}
	deadline := time.Now().Add(30 * time.Second)
	var trips []time.Duration // rank 0's round trips
	var wg sync.WaitGroup
	var errs [2]error
	wg.Add(2)
	go func() {
		defer wg.Done()
		for i := 0; i < rounds && errs[0] == nil; i++ {
			start := time.Now()
			if errs[0] = emuSend(ends[0][0].Mem, &base[0][0], model.ProtoLL, msg, deadline); errs[0] == nil {
				errs[0] = emuRecv(ends[0][1].Mem, &base[0][1], model.ProtoLL, msg, deadline)
			}
			trips = append(trips, time.Since(start))
		}
	}()
	go func() {
		defer wg.Done()
		for i := 0; i < rounds && errs[1] == nil; i++ {
			if errs[1] = emuRecv(ends[1][1].Mem, &base[1][1], model.ProtoLL, msg, deadline); errs[1] == nil {
				errs[1] = emuSend(ends[1][0].Mem, &base[1][0], model.ProtoLL, msg, deadline)
			}
		}
	}()
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("ping-pong rank %d: %v", r, err)
		}
	}
	slices.Sort(trips)
	return trips
}

// BenchmarkNetPingPong times a round trip of one LL step through two
// proxies and the socket plugin, emulated kernels at both ends (no GPU),
// with the plugin's helper goroutines (NCCL_SOCKET_NTHREADS=1) and
// without them (NCCL's default: the proxy moves the socket); compare the
// two sub-benchmarks' ns/op. median-us is the median round trip.
func BenchmarkNetPingPong(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0))))
	for _, nt := range []int{1, 0} {
		b.Run(fmt.Sprintf("nthreads=%d", nt), func(b *testing.B) {
			ends := netPair(b, transport.SocketOptions{NThreads: nt, NSocksPerThread: 1})
			var base [2][2]uint64
			emuPingPong(b, ends, &base, 100) // warm up
			b.ResetTimer()
			trips := emuPingPong(b, ends, &base, b.N)
			b.ReportMetric(float64(trips[len(trips)/2].Nanoseconds())/1e3, "median-us")
		})
	}
}

// netCases are the conformance cases of up to maxRanks ranks except
// LL128 (refused over NET), every every-th one, and at least the first
// case of every collective, algorithm and protocol.
func netCases(maxRanks, every int) []conformance.Case {
	var out []conformance.Case
	seen := map[[3]int]bool{}
	for i, c := range conformance.Cases() {
		if c.NRanks > maxRanks || c.Proto == model.ProtoLL128 {
			continue
		}
		k := [3]int{int(c.Coll), int(c.Algo), int(c.Proto)}
		if i%every == 0 || !seen[k] && c.NRanks > 1 {
			out = append(out, c)
			seen[k] = seen[k] || c.NRanks > 1
		}
	}
	return out
}

// runNetJob runs cases over LocalJobs, checks that LL128 is refused,
// and then runs two rank processes (AllReduce in every protocol the
// transport takes, then every collective, algorithm and protocol:
// processCases).
func runNetJob(t *testing.T, cases []conformance.Case) {
	ctxs := gpus(t)
	e := &jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	t.Logf("%d conformance cases over NET", len(cases))
	start := time.Now()
	conformance.Run(t, e, cases...)
	t.Logf("ran in %v", time.Since(start).Round(time.Millisecond))
	if j := e.jobs[2]; j != nil {
		if j.Devices[0].Link(0, 1) != LinkNet {
			t.Errorf("ranks 0 and 1 linked by %v, want NET", j.Devices[0].Link(0, 1))
		}
	}
	e.close(t)
	if err := checkLL128Refused(t, ctxs, "NET"); err != nil {
		t.Error(err)
	}
	t.Setenv("TEST_OPS", "1")
	cmds, outs, errs, root := startChildren(t, 2, false)
	defer root.Close()
	for r, cmd := range cmds {
		if err := cmd.Wait(); err != nil || !strings.Contains(outs[r].String(), "ok") {
			t.Errorf("rank %d process: %v\nstdout: %s\nstderr: %s", r, err, outs[r], errs[r])
		}
	}
}

// TestNet runs connections through the proxies and the socket plugin
// (NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1): every collective in LL and
// Simple over LocalJobs of up to 4 ranks, the LL128 refusal, and two
// rank processes.
func TestNet(t *testing.T) {
	gpus(t)
	t.Setenv("NCCL_P2P_DISABLE", "1")
	t.Setenv("NCCL_SHM_DISABLE", "1")
	runNetJob(t, netCases(4, 2))
}

// allowP2P clears the variables that disable P2P and SHM for the test
// (the split-host tests choose NET by host id alone).
func allowP2P(t *testing.T) {
	for _, v := range []string{"NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "TWINCCL_P2P_DISABLE", "TWINCCL_SHM_DISABLE"} {
		t.Setenv(v, "")
	}
}

// TestNetSplitHosts puts every rank on a host of its own
// (TWINCCL_HOSTID=split:1) with P2P allowed: the net transport is chosen
// because the host ids differ.
func TestNetSplitHosts(t *testing.T) {
	gpus(t)
	allowP2P(t)
	t.Setenv("TWINCCL_HOSTID", "split:1")
	runNetJob(t, netCases(4, 7))
}

// TestNetMixed runs 4 ranks on two "hosts" of two (TWINCCL_HOSTID=split:2):
// P2P within a host and NET between them in one Program.
func TestNetMixed(t *testing.T) {
	ctxs := gpus(t)
	allowP2P(t)
	t.Setenv("TWINCCL_HOSTID", "split:2")
	e := &jobExecutor{ctxs: ctxs, jobs: map[int]*LocalJob{}}
	defer e.close(t)
	var cases []conformance.Case
	for k, cb := range append(conformance.Combos(), conformance.P2PCombos()...) {
		if model.Protocol(cb[2]) == model.ProtoLL128 {
			continue
		}
		cases = append(cases, conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
			Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 4, NChannels: 2, Count: 100_003, Root: k % 4, Permute: k%2 == 1})
	}
	t.Logf("%d 4-rank conformance cases over P2P and NET", len(cases))
	conformance.Run(t, e, cases...)
	if j := e.jobs[4]; j != nil {
		d := j.Devices[0]
		if d.Link(0, 1) != LinkP2P || d.Link(1, 2) != LinkNet {
			t.Errorf("links 0-1 %v, 1-2 %v; want P2P and NET", d.Link(0, 1), d.Link(1, 2))
		}
	}
}

// TestNetGraphReplay replays CUDA graphs of launches over NET: the
// proxies must follow steps they were not told about (no Enqueue call
// per replay).
func TestNetGraphReplay(t *testing.T) {
	ctxs := gpus(t)
	t.Setenv("NCCL_P2P_DISABLE", "1")
	t.Setenv("NCCL_SHM_DISABLE", "1")
	graphReplay(t, ctxs, model.ProtoLL, model.ProtoSimple)
}

// TestNetKilledPeer kills a rank process in the middle of a collective
// over NET: the other must fail within its timeout, naming the lost rank
// (reported by the bootstrap's liveness connections or by the proxy whose
// sockets broke).
func TestNetKilledPeer(t *testing.T) {
	gpus(t)
	t.Setenv("NCCL_P2P_DISABLE", "1")
	t.Setenv("NCCL_SHM_DISABLE", "1")
	killedPeer(t, 2)
}

// TestNetClose checks that a closed device over NET released its proxy:
// a new job of the same ranks in this process starts and runs.
func TestNetClose(t *testing.T) {
	ctxs := gpus(t)
	t.Setenv("NCCL_P2P_DISABLE", "1")
	t.Setenv("NCCL_SHM_DISABLE", "1")
	c := allReduceCase(model.ProtoSimple, 2, 1<<16)
	p, _ := c.Program()
	want, _ := conformance.Expected(c, p)
	for i := 0; i < 3; i++ {
		j, err := NewLocalJob(2, ctxs, 10*time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if j.Devices[0].set == nil {
			t.Error("no proxy started for a NET job")
		}
		got, err := j.Execute(p, conformance.Inputs(c, p))
		if err == nil && !bytes.Equal(got[1], want[1]) {
			err = fmt.Errorf("job %d: wrong result", i)
		}
		if cerr := j.Close(); cerr != nil {
			t.Error(cerr)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range j.Devices {
			if d.set != nil || d.netMem != nil {
				t.Errorf("job %d: proxy or registered memory left after Close", i)
			}
		}
	}
}

// BenchmarkNetStream moves full LL and Simple steps one way (rank 0 to
// rank 1) through the proxies and the socket plugin with emulated kernels
// at both ends (no GPU), launch after launch of 64 one-step slices; the
// bandwidth (MB/s of data) is what the host side of the net transport can
// carry on one connection, without and with the plugin's helpers.
func BenchmarkNetStream(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(max(8, runtime.GOMAXPROCS(0))))
	for _, nt := range []int{1, 0} {
		for _, proto := range []model.Protocol{model.ProtoLL, model.ProtoSimple} {
			b.Run(fmt.Sprintf("%s/nthreads=%d", proto, nt), func(b *testing.B) {
				ends := netPair(b, transport.SocketOptions{NThreads: nt, NSocksPerThread: 1})
				per := transport.SlotStride(proto)
				if proto == model.ProtoLL {
					per /= 2 // half of an LL line is its flags
				}
				launch := make([]emuSlice, 64)
				for i := range launch {
					launch[i] = emuSlice{data: bytes.Repeat([]byte{byte(i)}, per), steps: 1}
				}
				var base [2][2]uint64
				b.SetBytes(int64(len(launch) * per))
				b.ResetTimer()
				var wg sync.WaitGroup
				var errs [2]error
				wg.Add(2)
				go func() {
					defer wg.Done()
					for i := 0; i < b.N && errs[0] == nil; i++ {
						errs[0] = emuSend(ends[0][0].Mem, &base[0][0], proto, launch, time.Now().Add(30*time.Second))
					}
				}()
				go func() {
					defer wg.Done()
					for i := 0; i < b.N && errs[1] == nil; i++ {
						errs[1] = emuRecv(ends[1][1].Mem, &base[1][1], proto, launch, time.Now().Add(30*time.Second))
					}
				}()
				wg.Wait()
				for r, err := range errs {
					if err != nil {
						b.Fatalf("rank %d: %v", r, err)
					}
				}
			})
		}
	}
}
