package sim

import (
	"math"
	"testing"

	"github.com/twinccl/twinccl/model"
)

// socketCalib is the default calibration with a free GPU side and the
// given socket proxy costs: what is left of a transfer is its proxies'
// operations.
func socketCalib(t *testing.T, sendUs, recvUs, gbps float64) *Calib {
	return ibCalib(t, func(c *Calib) {
		c.Simple.CopyGBps = 1000
		c.Simple.StartUs, c.Simple.SliceOverheadUs, c.Simple.OpOverheadUs = 0, 0, 0
		c.Simple.HostLoadCost, c.Simple.HostStoreCost = 0.05, 0.05
		c.HostMemGBps = 2000
		c.NetProxyUs, c.NoGDRPenaltyUs = 0, 0
		c.NetSocket = SocketCalib{ProxyGBps: gbps, SendOpUs: sendUs, RecvOpUs: recvUs}
	})
}

// socketRun runs p2p tasks on the H200 pair under the net-socket table's
// settings (P2P and SHM disabled, sockets over loopback: every connection
// goes through the two ranks' proxy threads) on one channel, and returns
// the kernel time and the slices of every connection that carried data.
func socketRun(t *testing.T, c *Calib, tasks []model.P2PTask) (float64, map[[2]int]int64) {
	t.Helper()
	tb, res := loadTable(t, "net-socket")
	s := newSim(t, res, c)
	st, err := SettingsFromEnv(tb.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	s.Machine.SetSettings(st)
	p, err := model.GenerateP2PProgram(res.Plan, tasks, model.ProtoSimple, model.DtypeFP32,
		model.P2POptions{P2PChannels: 1, ChannelsPerPeer: 1})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Machine.Run(p)
	if err != nil {
		t.Fatal(err)
	}
	slices := map[[2]int]int64{}
	for _, cs := range r.Conns {
		if cs.Bytes > 0 {
			if cs.Transport != "NET" {
				t.Fatalf("%d->%d is %s, want NET", cs.From, cs.To, cs.Transport)
			}
			slices[[2]int{cs.From, cs.To}] += cs.Slices
		}
	}
	return r.KernelUs, slices
}

func sendTasks(from, to int, bytes int64) []model.P2PTask {
	return []model.P2PTask{{Rank: from, Peer: to, Send: true, Count: bytes / 4}, {Rank: to, Peer: from, Count: bytes / 4}}
}

// TestSocketProxySerialises: each proxy thread serves its operations one
// at a time, so k slices cost the sender's k operations and the receiver's
// k, pipelined: the slower side's k operations plus one of the other.
func TestSocketProxySerialises(t *testing.T) {
	const op = 100.0 // us, far above every other cost
	for _, tc := range []struct {
		name         string
		send, recv   float64
		bottleneckUs func(k float64) float64
	}{
		{"receiver slower", op / 2, op, func(k float64) float64 { return op/2 + k*op }},
		{"sender slower", op, op / 2, func(k float64) float64 { return k*op + op/2 }},
	} {
		got, slices := socketRun(t, socketCalib(t, tc.send, tc.recv, 1e6), sendTasks(0, 1, 8<<20))
		k := float64(slices[[2]int{0, 1}])
		if k < 2 {
			t.Fatalf("%s: %v slices, want several", tc.name, k)
		}
		want := tc.bottleneckUs(k)
		if math.Abs(got-want) > 0.02*want {
			t.Errorf("%s: %v slices took %.1f us, want %.1f (pipelined proxy operations)", tc.name, k, got, want)
		}
	}
}

// TestSocketProxyBothDirections: a proxy thread serves its rank's sends
// and receives alike, so two opposite transfers take twice as long as one
// when the operations dominate.
func TestSocketProxyBothDirections(t *testing.T) {
	const op = 100.0
	c := socketCalib(t, op, op, 1e6)
	one, s1 := socketRun(t, c, sendTasks(0, 1, 8<<20))
	both, s2 := socketRun(t, c, append(sendTasks(0, 1, 8<<20), sendTasks(1, 0, 8<<20)...))
	k := float64(s1[[2]int{0, 1}])
	if s2[[2]int{0, 1}] != s1[[2]int{0, 1}] || s2[[2]int{1, 0}] != s1[[2]int{0, 1}] {
		t.Fatalf("slices %v and %v: the two directions should match the single transfer", s1, s2)
	}
	// one: k+1 operations in a row; both: each proxy serves 2k.
	if want := (k + 1) * op; math.Abs(one-want) > 0.02*want {
		t.Errorf("one direction: %.1f us, want %.1f", one, want)
	}
	if want := 2 * k * op; both < 0.98*want || both > 1.02*(want+op) {
		t.Errorf("both directions: %.1f us, want %.1f-%.1f", both, want, want+op)
	}
}

// TestSocketProxyCopies: with no fixed costs, a proxy operation lasts its
// bytes at the proxy's rate; over loopback the sender copies every byte
// twice (it runs TCP's receive path too), so the sender is the bottleneck
// at 2 bytes per byte: k slices of S bytes take (2k+1)·S/rate.
func TestSocketProxyCopies(t *testing.T) {
	const gbps = 2.0 // far below every link
	const bytes = 8 << 20
	got, slices := socketRun(t, socketCalib(t, 0, 0, gbps), sendTasks(0, 1, bytes))
	k := float64(slices[[2]int{0, 1}])
	slice := bytes / k
	want := (2*k + 1) * slice / (gbps * 1e3) // us
	if math.Abs(got-want) > 0.02*want {
		t.Errorf("%v slices of %.0f B at %v GB/s: %.1f us, want %.1f", k, slice, gbps, got, want)
	}
}

// TestSocketFlagCheck: with flag_check_GBps set, a send proxy reads an LL
// slice's lines before it sends it: a 1 MiB LL Broadcast over sockets,
// whose 2 MiB of lines all pass rank 0's proxy, takes their reading at
// that rate longer; a Simple one, which has no flags, takes as long; and
// without the constant nothing changes. The fit frees the constant only
// for tables with LL rows over sockets.
func TestSocketFlagCheck(t *testing.T) {
	tb, res := loadTable(t, "net-socket")
	run := func(proto model.Protocol, gbps float64) float64 {
		t.Helper()
		c := socketCalib(t, 1, 1, 10)
		c.NetSocket.FlagCheckGBps = gbps
		one := &Table{Name: "t.tsv", Env: tb.Env, Harness: HarnessNCCLTests,
			Rows: []Measurement{{Coll: model.CollBroadcast, Bytes: 1 << 20, MeanUs: 1, Line: 1,
				Recorded: &Recorded{Algo: model.AlgoRing, Proto: proto, NChannels: 1}}}}
		ft := NewFitTable(one, res)
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		return rows[0].SimUs
	}
	const gbps = 1.0
	want := float64(2<<20) / (gbps * 1e3) // us: LL's 16-byte lines carry 8 bytes each
	if d := run(model.ProtoLL, gbps) - run(model.ProtoLL, 0); math.Abs(d-want) > 0.1*want {
		t.Errorf("LL Broadcast 1 MiB: %+.1f us with flag checks at %g GB/s, want %+.1f", d, gbps, want)
	}
	if a, b := run(model.ProtoSimple, gbps), run(model.ProtoSimple, 0); a != b {
		t.Errorf("Simple Broadcast 1 MiB: %.2f us with flag checks, %.2f without: want equal", a, b)
	}
	base, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	fitted := func(tb *Table) bool {
		return fitsParam(t, base, "net_socket.flag_check_GBps", NewFitTable(tb, res))
	}
	ll := &Table{Name: "ll.tsv", Env: tb.Env, Rows: []Measurement{{Coll: model.CollBroadcast, Bytes: 1 << 20, MeanUs: 1, Line: 1,
		Recorded: &Recorded{Algo: model.AlgoRing, Proto: model.ProtoLL}}}}
	simple := &Table{Name: "simple.tsv", Env: tb.Env, Rows: []Measurement{{Coll: model.CollBroadcast, Bytes: 1 << 20, MeanUs: 1, Line: 1,
		Recorded: &Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple}}}}
	if !fitted(ll) || fitted(simple) {
		t.Error("flag_check_GBps should be fitted for LL rows over sockets and only then")
	}
}

// socketRowUs simulates one Broadcast over sockets on one channel (the
// net-socket table's settings) under c, as the fit and "replay compare"
// do, with the recording host's probed loopback latency hostUs, as an
// isolated call (in a loop, a Broadcast's next call hides latencies).
func socketRowUs(t *testing.T, c *Calib, proto model.Protocol, bytes int64, hostUs float64) float64 {
	t.Helper()
	return socketLoopUs(t, c, proto, bytes, hostUs, 0)
}

// socketLoopUs is socketRowUs for a back-to-back loop of loop timed calls
// (0: one isolated call): the time per call.
func socketLoopUs(t *testing.T, c *Calib, proto model.Protocol, bytes int64, hostUs float64, loop int) float64 {
	t.Helper()
	tb, res := loadTable(t, "net-socket")
	one := &Table{Name: "t.tsv", Env: tb.Env, Harness: HarnessNCCLTests, Host: HostProbe{LatencyUs: hostUs},
		Rows: []Measurement{{Coll: model.CollBroadcast, Bytes: bytes, MeanUs: 1, Line: 1,
			Recorded: &Recorded{Algo: model.AlgoRing, Proto: proto, NChannels: 1}}}}
	ft := NewFitTable(one, res)
	ft.Loop = loop
	rows, err := ft.Compare(c)
	if err != nil {
		t.Fatal(err)
	}
	return rows[0].SimUs
}

// TestSocketPayloadAndSimple: a message whose payload is larger than
// inline_bytes costs each of its two proxies payload_op_us more (the
// sender's then the receiver's: twice on a one-message Broadcast's path)
// and its sender's payload_send_op_us more (once);
// one within it costs nothing more; and simple_us delays a Simple slice
// only.
func TestSocketPayloadAndSimple(t *testing.T) {
	const op = 50.0 // us, far above every other cost
	run := func(proto model.Protocol, bytes, inline int64, payload, simple float64) float64 {
		c := socketCalib(t, 1, 1, 10)
		c.NetSocket.InlineBytes, c.NetSocket.PayloadOpUs, c.NetSocket.SimpleUs = inline, payload, simple
		return socketRowUs(t, c, proto, bytes, 0)
	}
	for _, tc := range []struct {
		name   string
		proto  model.Protocol
		bytes  int64
		inline int64
		want   float64 // added by payload_op_us
	}{
		// 48 B of LL is 96 B of lines on the wire: within NCCL's 128.
		{"LL 48 B, inline 128", model.ProtoLL, 48, 128, 0},
		{"LL 48 B, inline 0", model.ProtoLL, 48, 0, 2 * op},
		{"LL 512 B, inline 128", model.ProtoLL, 512, 128, 2 * op},
		{"Simple 64 B, inline 128", model.ProtoSimple, 64, 128, 0},
		{"Simple 256 B, inline 128", model.ProtoSimple, 256, 128, 2 * op},
	} {
		d := run(tc.proto, tc.bytes, tc.inline, op, 0) - run(tc.proto, tc.bytes, tc.inline, 0, 0)
		if math.Abs(d-tc.want) > 0.02*op {
			t.Errorf("%s: payload_op_us %g adds %.2f us, want %.0f", tc.name, op, d, tc.want)
		}
		// payload_send_op_us: the sender's proxy only, once.
		c := socketCalib(t, 1, 1, 10)
		c.NetSocket.InlineBytes, c.NetSocket.PayloadSendOpUs = tc.inline, op
		if d := socketRowUs(t, c, tc.proto, tc.bytes, 0) - run(tc.proto, tc.bytes, tc.inline, 0, 0); math.Abs(d-tc.want/2) > 0.02*op {
			t.Errorf("%s: payload_send_op_us %g adds %.2f us, want %.0f", tc.name, op, d, tc.want/2)
		}
	}
	if d := run(model.ProtoSimple, 64, 128, 0, op) - run(model.ProtoSimple, 64, 128, 0, 0); math.Abs(d-op) > 0.02*op {
		t.Errorf("Simple 64 B: simple_us %g adds %.2f us, want %g (one slice)", op, d, op)
	}
	if a, b := run(model.ProtoLL, 64, 128, 0, op), run(model.ProtoLL, 64, 128, 0, 0); a != b {
		t.Errorf("LL 64 B: %.2f us with simple_us, %.2f without: want equal", a, b)
	}
}

// TestSocketRecvPost: recv_post_us is the part of a receive operation an
// idle proxy does before its message arrives. One isolated Broadcast,
// whose receiving proxy idles while the root's sends (a send operation
// longer than the receive), gains all of it, and no more than the receive
// operation; a loop whose receiving proxy is never idle (receive
// operations longer than the root's sends) gains nothing, with
// serial_calls or without.
func TestSocketRecvPost(t *testing.T) {
	const recvOp = 50.0 // us, far above every other cost but the send
	run := func(sendOp, post float64, serial bool, loop int) float64 {
		c := socketCalib(t, sendOp, recvOp, 10)
		c.NetSocket.RecvPostUs, c.NetSocket.SerialCalls = post, serial
		return socketLoopUs(t, c, model.ProtoLL, 64, 0, loop)
	}
	for _, serial := range []bool{false, true} {
		base := run(100, 0, serial, 0)
		for _, tc := range []struct{ post, want float64 }{{30, 30}, {80, recvOp}} {
			if d := base - run(100, tc.post, serial, 0); math.Abs(d-tc.want) > 0.5 {
				t.Errorf("serial_calls %v, one call: recv_post_us %g saves %.2f us, want %g", serial, tc.post, d, tc.want)
			}
		}
		if d := run(1, 0, serial, 4) - run(1, 30, serial, 4); math.Abs(d) > 0.5 {
			t.Errorf("serial_calls %v, receiver-bound loop: recv_post_us 30 saves %.2f us per call, want 0", serial, d)
		}
	}
}

// TestSocketSerialCalls: with serial_calls, the receive proxy takes the
// next call's slice of a one-channel Broadcast loop only once its GPU
// consumed the previous one, so a call costs the receive operation plus
// the Simple slice's hand-off (simple_us) and the GPU's receive, instead
// of the receive operation alone (the root running ahead); one isolated
// call is the same either way.
func TestSocketSerialCalls(t *testing.T) {
	const recvOp, simple = 50.0, 20.0 // us, far above every other cost
	run := func(serial bool, loop int) float64 {
		c := socketCalib(t, 1, recvOp, 10)
		c.NetSocket.SimpleUs, c.NetSocket.SerialCalls = simple, serial
		return socketLoopUs(t, c, model.ProtoSimple, 64, 0, loop)
	}
	piped, serial := run(false, 4), run(true, 4)
	if piped < recvOp || piped > recvOp+0.1*simple {
		t.Errorf("without serial_calls: %.2f us per call, want the receive operation's %g", piped, recvOp)
	}
	if d := serial - piped; d < simple || d > 1.25*simple {
		t.Errorf("serial_calls adds %.2f us per call (%.2f against %.2f), want simple_us %g and the GPU's receive", d, serial, piped, simple)
	}
	if a, b := run(true, 0), run(false, 0); a != b {
		t.Errorf("one call: %.3f us with serial_calls, %.3f without: want equal", a, b)
	}
}

// TestCalibForHost: a recording's probed loopback latency scales the
// socket proxies' costs by (latency/host_latency_us)^host_exp (their
// duplex factors, ratios, stay), without touching the calibration it came
// from; unprobed recordings and calibrations without a reference host
// keep the constants.
func TestCalibForHost(t *testing.T) {
	c := socketCalib(t, 4, 8, 10)
	c.NetSocket.LatencyUs, c.NetSocket.PayloadOpUs, c.NetSocket.SimpleUs, c.NetSocket.FlagCheckGBps = 1, 2, 3, 20
	c.NetSocket.PayloadSendOpUs = 7
	c.NetSocket.DuplexCost, c.NetSocket.SimpleDuplexCost, c.NetSocket.RecvConnUs = 1.5, 1.25, 1
	if c.ForHost(HostProbe{LatencyUs: 9}) != c {
		t.Errorf("no reference host: ForHost should return the calibration itself")
	}
	c.NetSocket.HostLatencyUs, c.NetSocket.HostExp = 4, 0.5
	if c.ForHost(HostProbe{BothWaysGBps: 3}) != c {
		t.Errorf("unprobed recording: ForHost should return the calibration itself")
	}
	s := c.ForHost(HostProbe{LatencyUs: 16, BothWaysGBps: 1}) // (16/4)^0.5 = 2: no reference throughput
	ns := s.NetSocket
	for _, v := range []struct {
		name      string
		got, want float64
	}{{"send_op_us", ns.SendOpUs, 8}, {"recv_op_us", ns.RecvOpUs, 16}, {"latency_us", ns.LatencyUs, 2},
		{"payload_op_us", ns.PayloadOpUs, 4}, {"payload_send_op_us", ns.PayloadSendOpUs, 14}, {"simple_us", ns.SimpleUs, 6},
		{"proxy_GBps", ns.ProxyGBps, 5}, {"flag_check_GBps", ns.FlagCheckGBps, 10}, {"recv_conn_us", ns.RecvConnUs, 2},
		{"duplex_cost (a ratio)", ns.DuplexCost, 1.5}, {"simple_duplex_cost", ns.SimpleDuplexCost, 1.25}} {
		if math.Abs(v.got-v.want) > 1e-9 {
			t.Errorf("probe 16 us on a 4 us host, exponent 0.5: %s %g, want %g", v.name, v.got, v.want)
		}
	}
	// With a reference throughput, the base is the geometric mean of the
	// latency ratio and the inverse throughput ratio; a probe without a
	// throughput scales by its latency alone.
	c.NetSocket.HostGBps = 2
	for _, v := range []struct {
		h    HostProbe
		want float64 // the scaled send_op_us
	}{
		{HostProbe{LatencyUs: 16, BothWaysGBps: 2}, 4 * math.Sqrt(2)},  // sqrt(4 * 1)^0.5
		{HostProbe{LatencyUs: 4, BothWaysGBps: 0.5}, 4 * math.Sqrt(2)}, // sqrt(1 * 4)^0.5
		{HostProbe{LatencyUs: 16, BothWaysGBps: 0.5}, 8},               // sqrt(4 * 4)^0.5
		{HostProbe{LatencyUs: 16}, 8},                                  // 4^0.5
		{HostProbe{LatencyUs: 4, BothWaysGBps: 2}, 4},                  // the reference host
	} {
		if got := c.ForHost(v.h).NetSocket.SendOpUs; math.Abs(got-v.want) > 1e-9 {
			t.Errorf("probe %+v on a 4 us, 2 GB/s host, exponent 0.5: send_op_us %g, want %g", v.h, got, v.want)
		}
	}
	c.NetSocket.HostGBps = 0
	// HostFixedRecv keeps the receive operation's costs as they are and
	// scales the rest.
	c.NetSocket.HostFixedRecv = true
	fixed := c.ForHost(HostProbe{LatencyUs: 16}).NetSocket
	if fixed.RecvOpUs != c.NetSocket.RecvOpUs || fixed.RecvConnUs != c.NetSocket.RecvConnUs || fixed.RecvPostUs != c.NetSocket.RecvPostUs {
		t.Errorf("host_fixed_recv: receive costs %g, %g, %g scaled, want %g, %g, %g", fixed.RecvOpUs, fixed.RecvPostUs, fixed.RecvConnUs,
			c.NetSocket.RecvOpUs, c.NetSocket.RecvPostUs, c.NetSocket.RecvConnUs)
	}
	if fixed.SendOpUs != 8 || fixed.ProxyGBps != 5 {
		t.Errorf("host_fixed_recv: send_op_us %g, proxy_GBps %g, want 8 and 5 (scaled)", fixed.SendOpUs, fixed.ProxyGBps)
	}
	c.NetSocket.HostFixedRecv = false
	if c.NetSocket.SendOpUs != 4 || c.NetSocket.ProxyGBps != 10 {
		t.Errorf("ForHost changed the calibration it scaled: %+v", c.NetSocket)
	}
	// The fit and compare simulate a probed table under its host.
	ref := socketRowUs(t, c, model.ProtoSimple, 1<<20, 4)
	if u := socketRowUs(t, c, model.ProtoSimple, 1<<20, 0); u != ref {
		t.Errorf("1 MiB: %.2f us unprobed, %.2f on the reference host: want equal", u, ref)
	}
	if slow := socketRowUs(t, c, model.ProtoSimple, 1<<20, 16); !(slow > 1.5*ref) {
		t.Errorf("1 MiB: %.2f us on a host four times slower to answer, %.2f on the reference host: want about twice", slow, ref)
	}
}

// TestSocketPostFence: post_fence_us delays an LL slice sent through a
// socket proxy by the fence before the proxy sees it (one slice on an
// isolated Broadcast's path: once), and a Simple slice not at all; it is
// fitted on our executor's LL rows over sockets (a table naming its
// kernel) and on no others: NCCL's LL senders post no fence.
func TestSocketPostFence(t *testing.T) {
	const fence = 50.0 // us, far above every other cost
	run := func(proto model.Protocol, bytes int64, f float64) float64 {
		c := socketCalib(t, 1, 1, 10)
		c.NetSocket.PostFenceUs = f
		return socketRowUs(t, c, proto, bytes, 0)
	}
	if d := run(model.ProtoLL, 48, fence) - run(model.ProtoLL, 48, 0); math.Abs(d-fence) > 0.02*fence {
		t.Errorf("LL 48 B: post_fence_us %g adds %.2f us, want %g (one slice)", fence, d, fence)
	}
	if a, b := run(model.ProtoSimple, 64, fence), run(model.ProtoSimple, 64, 0); a != b {
		t.Errorf("Simple 64 B: %.2f us with post_fence_us, %.2f without: want equal", a, b)
	}
	tb, res := loadTable(t, "net-socket")
	base, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	table := func(proto model.Protocol, kernel string) FitTable {
		return NewFitTable(&Table{Name: "t.tsv", Env: tb.Env, Kernel: kernel, Rows: []Measurement{{Coll: model.CollBroadcast,
			Bytes: 1 << 20, MeanUs: 1, Line: 1, Recorded: &Recorded{Algo: model.AlgoRing, Proto: proto}}}}, res)
	}
	const ours = "interp.cu a6a13e53b6fb520e line_threads=640"
	for _, tc := range []struct {
		name string
		ft   FitTable
		want bool
	}{
		{"our LL", table(model.ProtoLL, ours), true},
		{"NCCL's LL", table(model.ProtoLL, ""), false},
		{"our Simple", table(model.ProtoSimple, ours), false},
	} {
		if got := fitsParam(t, base, "net_socket.post_fence_us", tc.ft); got != tc.want {
			t.Errorf("%s over sockets: post_fence_us fitted %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestSocketDuplex: a proxy whose rank has both sent and received through
// sockets copies its bytes duplex_cost (Simple: simple_duplex_cost) times
// slower. Copy-bound (no fixed costs), one direction alone never pays it;
// two opposite transfers pay it on every slice but the first of each
// direction, so they take nearly that factor longer; and the LL factor
// leaves Simple slices alone. The fit frees each factor only where the
// start sets one and rows of its protocol cross sockets.
func TestSocketDuplex(t *testing.T) {
	const gbps, bytes, factor = 2.0, 8 << 20, 2.0
	run := func(ll, simple float64, tasks []model.P2PTask) (float64, float64) {
		c := socketCalib(t, 0, 0, gbps)
		c.NetSocket.DuplexCost, c.NetSocket.SimpleDuplexCost = ll, simple
		us, slices := socketRun(t, c, tasks)
		return us, float64(slices[[2]int{0, 1}])
	}
	one := sendTasks(0, 1, bytes)
	both := append(sendTasks(0, 1, bytes), sendTasks(1, 0, bytes)...)
	alone, _ := run(0, 0, one)
	if a, _ := run(0, factor, one); a != alone {
		t.Errorf("one direction: %.1f us with simple_duplex_cost %g, %.1f without: want equal", a, factor, alone)
	}
	plain, k := run(0, 0, both)
	if k < 4 {
		t.Fatalf("%v slices a direction, want several", k)
	}
	if ll, _ := run(factor, 0, both); ll != plain {
		t.Errorf("Simple both ways: %.1f us with duplex_cost (LL's) %g, %.1f without: want equal", ll, factor, plain)
	}
	// every slice but each direction's first copies factor times slower
	slow, _ := run(0, factor, both)
	if lo, hi := plain*(1+(factor-1)*(k-1)/k)*0.98, plain*factor*1.02; slow < lo || slow > hi {
		t.Errorf("both ways, %v slices: %.1f us with simple_duplex_cost %g (%.1f without), want %.1f-%.1f", k, slow, factor, plain, lo, hi)
	}

	tb, res := loadTable(t, "net-socket")
	table := func(proto model.Protocol) FitTable {
		return NewFitTable(&Table{Name: "t.tsv", Env: tb.Env, Rows: []Measurement{{Coll: model.CollAllGather,
			Bytes: 1 << 20, MeanUs: 1, Line: 1, Recorded: &Recorded{Algo: model.AlgoRing, Proto: proto}}}}, res)
	}
	withDuplex, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	plainCalib := *withDuplex
	withDuplex.NetSocket.DuplexCost = 1.2
	for _, tc := range []struct {
		c     *Calib
		proto model.Protocol
		param string
		want  bool
	}{
		{withDuplex, model.ProtoLL, "net_socket.duplex_cost", true},
		{withDuplex, model.ProtoLL, "net_socket.simple_duplex_cost", false},
		{withDuplex, model.ProtoSimple, "net_socket.simple_duplex_cost", true},
		{withDuplex, model.ProtoSimple, "net_socket.duplex_cost", false},
		{&plainCalib, model.ProtoLL, "net_socket.duplex_cost", false},
	} {
		if got := fitsParam(t, tc.c, tc.param, table(tc.proto)); got != tc.want {
			t.Errorf("%v rows, duplex_cost %g: %s fitted %v, want %v", tc.proto, tc.c.NetSocket.DuplexCost, tc.param, got, tc.want)
		}
	}
}

// TestSocketRecvConn: recv_conn_us, the end of a receive operation that
// holds its connection but not its proxy, lets the receives of two
// channels overlap there: a two-channel Broadcast of one slice a channel,
// bound by 100 us receive operations, takes one operation plus the
// second's proxy part (100 + 40 us with recv_conn_us 60) instead of two;
// in a back-to-back loop each connection's operations still follow one
// another, so a call costs one operation (100 us) instead of two; on one
// channel nothing overlaps and it changes nothing. Fitted only where the
// start sets it.
func TestSocketRecvConn(t *testing.T) {
	const op, conn = 100.0, 60.0
	run := func(nch, loop int, recvConn float64) float64 {
		c := socketCalib(t, 0, op, 1e6)
		c.NetSocket.RecvConnUs = recvConn
		tb, res := loadTable(t, "net-socket")
		ft := NewFitTable(&Table{Name: "t.tsv", Env: tb.Env, Harness: HarnessNCCLTests, Rows: []Measurement{{Coll: model.CollBroadcast,
			Bytes: 64 << 10, MeanUs: 1, Line: 1, Recorded: &Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple, NChannels: nch}}}}, res)
		ft.Loop = loop
		rows, err := ft.Compare(c)
		if err != nil {
			t.Fatal(err)
		}
		return rows[0].SimUs
	}
	whole, overlapped := run(2, 0, 0), run(2, 0, conn)
	if d := whole - overlapped; math.Abs(d-conn) > 0.05*conn {
		t.Errorf("two channels, one call: %.1f us without recv_conn_us, %.1f with %g: want %g us less", whole, overlapped, conn, conn)
	}
	whole, overlapped = run(2, DefaultLoopCalls, 0), run(2, DefaultLoopCalls, conn)
	if math.Abs(whole-2*op) > 0.05*op || math.Abs(overlapped-op) > 0.05*op {
		t.Errorf("two channels, a loop: %.1f us a call without recv_conn_us, %.1f with: want %g and %g", whole, overlapped, 2*op, op)
	}
	for _, loop := range []int{0, DefaultLoopCalls} {
		if a, b := run(1, loop, conn), run(1, loop, 0); math.Abs(a-b) > 0.01 {
			t.Errorf("one channel, loop %d: %.2f us with recv_conn_us, %.2f without: want equal", loop, a, b)
		}
	}
	tb, res := loadTable(t, "net-socket")
	ft := NewFitTable(&Table{Name: "t.tsv", Env: tb.Env, Rows: []Measurement{{Coll: model.CollBroadcast,
		Bytes: 1 << 20, MeanUs: 1, Line: 1, Recorded: &Recorded{Algo: model.AlgoRing, Proto: model.ProtoSimple}}}}, res)
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	if fitsParam(t, c, "net_socket.recv_conn_us", ft) {
		t.Errorf("recv_conn_us fitted from a start without it")
	}
	c.NetSocket.RecvConnUs = 1
	if !fitsParam(t, c, "net_socket.recv_conn_us", ft) {
		t.Errorf("recv_conn_us not fitted from a start with it")
	}
}
