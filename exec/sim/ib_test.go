package sim

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// ibTopo is two hosts of two H100s and one 400 Gb/s ConnectX NIC (an ib
// device: maxconn 131072, GPUDirect RDMA) behind a PCIe Gen5 switch.
func ibTopo(t testing.TB) *search.Result {
	return loadSearch(t, filepath.Join(repoRoot(), "testdata", "xml", "edge-bcm-gen5-two-level.xml"), 2)
}

// ibSend simulates rank 0 sending bytes to rank 2 (the other host) on one
// p2p channel with the given flow-control window, and returns the result
// and the stats of the network connection.
func ibSend(t *testing.T, res *search.Result, c *Calib, bytes int64, credits int) (*Result, ConnStats) {
	t.Helper()
	s := newSim(t, res, c)
	tasks := []model.P2PTask{{Rank: 0, Peer: 2, Send: true, Count: bytes / 4}, {Rank: 2, Peer: 0, Send: false, Count: bytes / 4}}
	p, err := model.GenerateP2PProgram(res.Plan, tasks, model.ProtoSimple, model.DtypeFP32,
		model.P2POptions{P2PChannels: 1, ChannelsPerPeer: 1, Credits: credits})
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.Machine.Run(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range r.Conns {
		if cs.From == 0 && cs.To == 2 && cs.Bytes > 0 {
			if cs.Transport != "NET" {
				t.Fatalf("0->2 is %s, want NET", cs.Transport)
			}
			return r, cs
		}
	}
	t.Fatal("no 0->2 connection carried the data")
	return nil, ConnStats{}
}

// ibCalib is the default calibration with changes.
func ibCalib(t *testing.T, change func(c *Calib)) *Calib {
	t.Helper()
	c, err := DefaultCalib(90)
	if err != nil {
		t.Fatal(err)
	}
	c = c.Clone()
	if change != nil {
		change(c)
	}
	return c
}

// netOnly makes the GPU side free (copy rate, per-slice costs) and the
// proxies quick, so that what is left is the network's own costs.
func netOnly(c *Calib) {
	c.NetIB.ProxyUs = 1
	c.Simple.CopyGBps = 1000
	c.Simple.SliceOverheadUs = 0
	c.Simple.OpOverheadUs = 0
	c.Simple.FirstOpUs, c.Simple.ThreadOpUs, c.Simple.DirectUs, c.Simple.RateThreads, c.Simple.P2PSliceOverheadUs = 0, 0, 0, 0, 0
}

// netLinkGBps is the effective capacity of the NIC's network port, from
// the topology and the calibration (not from the simulator).
func netLinkGBps(t *testing.T, res *search.Result, c *Calib) float64 {
	t.Helper()
	nets := res.Cluster.Nodes[0].System.Nodes[model.NET]
	if len(nets) != 1 {
		t.Fatalf("%d NET nodes, want 1", len(nets))
	}
	return float64(nets[0].NET.BW) * c.Link(model.LinkNET).Eff
}

// TestIBRoute checks which routes get RDMA costs and what their latency
// is made of: the GPU-NIC PCIe hops, the RDMA write latency instead of
// the NET links' latency, and the proxies.
func TestIBRoute(t *testing.T) {
	res := ibTopo(t)
	for _, tc := range []struct {
		name  string
		proxy float64 // net_ib.proxy_us
	}{{"net_proxy_us", 0}, {"proxy_us", 2.5}} {
		c := ibCalib(t, func(c *Calib) {
			c.NetIB.WriteLatencyUs = 1.75
			c.NetIB.ProxyUs = tc.proxy
		})
		s := newSim(t, res, c)
		rt, err := s.Machine.route(0, 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rt.transport != TransportNET || rt.ib == nil || !rt.gdr {
			t.Fatalf("%s: 0->2 route %s: want NET with RDMA costs and GDR", tc.name, rt.desc)
		}
		var pci Time
		nNet := 0
		for _, id := range rt.res {
			switch s.Machine.resType[id] {
			case model.LinkPCI:
				pci += s.Machine.res[id].lat
			case model.LinkNET:
				nNet++
			}
		}
		if nNet != 2 {
			t.Errorf("%s: route crosses %d NET links, want 2 (tx and rx ports)", tc.name, nNet)
		}
		proxy := c.NetProxyUs
		if tc.proxy > 0 {
			proxy = tc.proxy
		}
		want := pci + usToPs(1.75) + usToPs(proxy)
		if d := rt.lat - want; d < -2 || d > 2 {
			t.Errorf("%s: route latency %d ps, want PCIe %d + write 1.75 us + proxy %.3f us = %d", tc.name, rt.lat, pci, proxy, want)
		}
		// Within a host the GPUs talk P2P: no RDMA costs.
		if rt, err := s.Machine.route(0, 1, 0); err != nil || rt.ib != nil {
			t.Errorf("%s: 0->1 route (%v) has RDMA costs", tc.name, err)
		}
	}
	// Socket NICs are not the ib plugin.
	s := newSim(t, loadSearch(t, "", 2), nil)
	rt, err := s.Machine.route(0, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rt.transport != TransportNET || rt.ib != nil {
		t.Errorf("socket route %s has RDMA costs", rt.desc)
	}
}

// TestIBMessageRate: when a QP's work-request time dominates, a stream of
// messages takes one work-request time per message.
func TestIBMessageRate(t *testing.T) {
	res := ibTopo(t)
	const bytes = 4 << 20
	base, _ := ibSend(t, res, ibCalib(t, nil), bytes, 8)
	var prev float64
	for _, rate := range []float64{0.05, 0.025} { // 20 and 40 us per message
		r, cs := ibSend(t, res, ibCalib(t, func(c *Calib) { c.NetIB.QPMsgRateM = rate }), bytes, 8)
		per := 1 / rate // us
		lo := float64(cs.Slices) * per
		if r.KernelUs < lo || r.KernelUs > lo+base.KernelUs {
			t.Errorf("rate %g M/s: %.2f us for %d messages, want within [%.2f, %.2f]", rate, r.KernelUs, cs.Slices, lo, lo+base.KernelUs)
		}
		if prev > 0 {
			// halving the rate adds one more work-request time per message
			if d, want := r.KernelUs-prev, float64(cs.Slices)*20; math.Abs(d-want) > 0.01*want {
				t.Errorf("halving the message rate added %.2f us over %d messages, want %.2f", d, cs.Slices, want)
			}
		}
		prev = r.KernelUs
	}
	if base.KernelUs >= prev/4 {
		t.Errorf("default message rate: %.2f us, not far below the rate-bound %.2f us", base.KernelUs, prev)
	}
}

// TestIBLatencyAndFIFO: a message's data reaches the receiver one write
// latency after it left; the receiver's buffer address (the FIFO entry)
// reaches the sender one write latency after the receiver freed the slot.
// With one slot every step pays the whole round trip; with eight, a
// stream pays it once per window at most.
func TestIBLatencyAndFIFO(t *testing.T) {
	res := ibTopo(t)
	const delta = 4.0 // us added to the write latency
	for _, tc := range []struct {
		bytes   int64
		credits int
	}{{1 << 10, 1}, {1 << 10, 8}, {4 << 20, 1}, {4 << 20, 8}} {
		r0, cs := ibSend(t, res, ibCalib(t, func(c *Calib) { c.NetIB.WriteLatencyUs = 1 }), tc.bytes, tc.credits)
		r1, _ := ibSend(t, res, ibCalib(t, func(c *Calib) { c.NetIB.WriteLatencyUs = 1 + delta }), tc.bytes, tc.credits)
		d := r1.KernelUs - r0.KernelUs
		steps := float64(cs.Steps)
		switch {
		case tc.credits == 1:
			// every step but the last waits for its FIFO entry: 2S-1 crossings
			if want := delta * (2*steps - 1); math.Abs(d-want) > 1e-3 {
				t.Errorf("%d B, one slot: +%.3f us for %g steps, want +%.3f (one round trip per step)", tc.bytes, d, steps, want)
			}
		case steps <= 8:
			// no step waits for a FIFO entry: only the data's one way
			if math.Abs(d-delta) > 1e-3 {
				t.Errorf("%d B, 8 slots, %g steps: +%.3f us, want +%.3f (one way)", tc.bytes, d, steps, delta)
			}
		default:
			if hi := delta * 2 * math.Ceil(steps/8); d > hi+1e-3 || d < delta {
				t.Errorf("%d B, 8 slots, %g steps: +%.3f us, want between %.3f and %.3f (a round trip per window)", tc.bytes, d, steps, delta, hi)
			}
			if one := delta * (2*steps - 1); d > one/3 {
				t.Errorf("%d B: 8 slots pay %.3f us of FIFO latency, one slot %.3f: not hidden", tc.bytes, d, one)
			}
		}
	}
}

// TestIBLinkBandwidth: large messages run at the network port's rate
// once the proxies and the GPU's copies are not in the way.
func TestIBLinkBandwidth(t *testing.T) {
	res := ibTopo(t)
	c := ibCalib(t, netOnly)
	link := netLinkGBps(t, res, c)
	const bytes = 256 << 20
	r, _ := ibSend(t, res, c, bytes, 8)
	bw := float64(bytes) / (r.KernelUs * 1e3)
	if bw < 0.97*link || bw > link*(1+1e-9) {
		t.Errorf("256 MiB: %.2f GB/s, want the NET port's %.2f GB/s (within 3%%)", bw, link)
	}
	for _, l := range r.Links {
		if l.Type == "NET" && math.Abs(l.PeakGBps-link) > 1e-6*link {
			t.Errorf("%s peaked at %.3f GB/s, want its capacity %.3f", l.Name, l.PeakGBps, link)
		}
	}
	// A small message is bound by latency, not bandwidth.
	small, _ := ibSend(t, res, c, 1<<10, 8)
	if bw := 1024 / (small.KernelUs * 1e3); bw > 0.01*link {
		t.Errorf("1 KiB at %.3f GB/s: not latency-bound", bw)
	}
}

// TestIBMoreQPs: striping a message over more QPs is never slower, and
// is faster when one QP cannot fill the link.
func TestIBMoreQPs(t *testing.T) {
	res := ibTopo(t)
	for _, qpGBps := range []float64{0, 15} {
		times := map[int64][]float64{}
		for _, q := range []int{1, 2, 4, 8} {
			c := ibCalib(t, func(c *Calib) {
				netOnly(c)
				c.NetIB.QPsPerConn = q
				c.NetIB.QPGBps = qpGBps
			})
			for _, bytes := range []int64{1 << 10, 64 << 10, 16 << 20, 256 << 20} {
				r, _ := ibSend(t, res, c, bytes, 8)
				if ts := times[bytes]; len(ts) > 0 && r.KernelUs > ts[len(ts)-1]*(1+1e-12) {
					t.Errorf("qp_GBps %g, %d B: %d QPs take %.3f us, fewer took %.3f", qpGBps, bytes, q, r.KernelUs, ts[len(ts)-1])
				}
				times[bytes] = append(times[bytes], r.KernelUs)
			}
		}
		if ts := times[1<<10]; ts[0] != ts[3] {
			t.Errorf("qp_GBps %g: a 1 KiB message is one chunk, yet 1 and 8 QPs differ: %v", qpGBps, ts)
		}
		ts := times[256<<20]
		if qpGBps > 0 {
			// one QP: 15 GB/s; four: the 45 GB/s port
			if ts[0]/ts[2] < 2.5 {
				t.Errorf("qp_GBps %g: 256 MiB in %.1f us on 1 QP, %.1f on 4: want about 3x faster", qpGBps, ts[0], ts[2])
			}
		} else if ts[0] != ts[3] {
			t.Errorf("unbounded QPs: 256 MiB takes %.3f us on 1 QP, %.3f on 8: the link should bind both", ts[0], ts[3])
		}
	}
}

// TestIBCalibFields: the net_ib and gin sections are optional, read,
// written back and range-checked.
func TestIBCalibFields(t *testing.T) {
	c, err := ParseCalib(strings.NewReader(`{"version": 2, "simple": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5},
		"ll": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5}, "ll128": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5},
		"shm_copy_GBps": 1}`), "min.json")
	if err != nil {
		t.Fatal(err)
	}
	ib := &c.NetIB
	if ib.msgRate() != 20e6 || ib.writeLatencyUs() != 1 || ib.qps() != 1 || ib.stripeMin() != 16384 || ib.maxMsg() != 1<<30 ||
		c.GIN.issueUs() != 0.3 {
		t.Errorf("defaults: rate %g latency %g qps %d stripe %d maxmsg %d issue %g", ib.msgRate(), ib.writeLatencyUs(), ib.qps(),
			ib.stripeMin(), ib.maxMsg(), c.GIN.issueUs())
	}
	var b strings.Builder
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "net_ib") || strings.Contains(b.String(), `"gin"`) {
		t.Errorf("absent sections written back:\n%s", b.String())
	}
	c.NetIB = IBCalib{QPMsgRateM: 5, WriteLatencyUs: 2, QPsPerConn: 4, StripeMinBytes: 4096, QPGBps: 12, MaxMsgBytes: 1 << 20, ProxyUs: 3}
	c.GIN = GINCalib{IssueUs: 0.7, LocalCopyGBps: 80}
	b.Reset()
	if err := c.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	d, err := ParseCalib(strings.NewReader(b.String()), "rt.json")
	if err != nil {
		t.Fatal(err)
	}
	if d.NetIB != c.NetIB || d.GIN != c.GIN {
		t.Errorf("round trip: %+v %+v, want %+v %+v", d.NetIB, d.GIN, c.NetIB, c.GIN)
	}
	for _, tc := range []struct{ json, want string }{
		{`"net_ib": {"qps_per_connection": 129}`, "net_ib.qps_per_connection"},
		{`"net_ib": {"write_latency_us": -1}`, "net_ib.write_latency_us"},
		{`"net_ib": {"qp_msg_rate_M": -3}`, "net_ib.qp_msg_rate_M"},
		{`"net_ib": {"bogus": 1}`, "unknown field"},
		{`"gin": {"issue_us": -0.1}`, "gin.issue_us"},
	} {
		_, err := ParseCalib(strings.NewReader(`{"version": 2, "simple": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5},
			"ll": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5}, "ll128": {"copy_GBps": 10, "link_eff": 1, "reduce_frac": 0.5},
			"shm_copy_GBps": 1, `+tc.json+`}`), "x.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error with %q, got %v", tc.json, tc.want, err)
		}
	}
}
