package sim

import (
	"fmt"
	"math"

	"github.com/twinccl/twinccl/model"
)

// IBCalib are the costs of InfiniBand (RDMA) transfers: the NET
// connections of the ib plugin (a NET device that is not a socket one,
// see isSocketNet) and the puts of GPU-initiated networking (GIN) between
// hosts. Every field is optional: 0 takes the default given with it, so
// calibration files written before these fields predict with the
// defaults. The defaults describe an NVIDIA ConnectX-7 adapter on NDR
// InfiniBand (400 Gb/s); the link bandwidth itself is not here, it is the
// NET node's speed in the topology (400000 Mb/s: 50 GB/s) times
// links.NET.eff.
//
// The mechanisms (exec/hw/ib implements the same protocol):
//   - Each network message (one slice of a NET connection, one isend) is
//     cut into chunks, one per queue pair (QP) of the connection:
//     min(QPsPerConn, ceil(bytes/StripeMinBytes)) chunks, each an RDMA
//     write work request on its own QP. The QPs run in parallel; each
//     processes one work request in no less than 1/(QPMsgRateM*1e6)
//     seconds and, when QPGBps is set, moves its chunk no faster than
//     that. A message therefore takes at least the longer of the two, so
//     small messages are bound by the message rate and large ones by the
//     links they share with every other transfer.
//   - WriteLatencyUs is the NIC-to-NIC part of a route's latency: on a
//     route through ib NICs it replaces the latency of the NET links
//     (links.NET.latency_us); the PCIe links between GPU and NIC keep
//     theirs. Data (the receiver's tail) and credits travel with it.
//   - The FIFO: before a sender may write step s, the receiver posts the
//     address of its buffer for s into the sender's FIFO with an RDMA
//     write, once it has freed the slot s-NCCL_STEPS. On an ib route the
//     credit that reaches the sender (the head of the connection) is that
//     FIFO write: it crosses the route back with the same latency, so a
//     pipeline of one slot pays a full round trip per step, while eight
//     slots hide it behind the transfers.
type IBCalib struct {
	// QPMsgRateM is the number of work requests (RDMA writes, atomics,
	// no-ops) one QP processes per second, in millions. 0: 20.
	// ConnectX-7's product brief gives the whole adapter 330-370 million
	// messages per second, reached with many QPs; one QP's share is an
	// assumption (about 1/16 of it) until measured.
	QPMsgRateM float64 `json:"qp_msg_rate_M,omitempty"`
	// WriteLatencyUs is the one-way latency of a small RDMA write from
	// the sending NIC to its placement by the receiving NIC (both NICs'
	// processing, the wire and one switch). 0: 1.0, the order of the half
	// round trip perftest's ib_write_lat reports for HDR and NDR adapters
	// through one switch (about 1 us); not measured here.
	WriteLatencyUs float64 `json:"write_latency_us,omitempty"`
	// QPsPerConn is the number of QPs of one NET connection
	// (NCCL_IB_QPS_PER_CONNECTION). 0: 1, NCCL's default.
	QPsPerConn int `json:"qps_per_connection,omitempty"`
	// StripeMinBytes is the smallest chunk a message is split into over
	// the QPs. 0: 16384, exec/hw/ib's stripe size. (NCCL's own plugin
	// either keeps a message on one QP, NCCL_IB_SPLIT_DATA_ON_QPS=0, or
	// splits it evenly in 128-byte units.)
	StripeMinBytes int64 `json:"stripe_min_bytes,omitempty"`
	// QPGBps bounds the rate of one QP. 0: no bound (one QP can fill an
	// NDR link with large messages).
	QPGBps float64 `json:"qp_GBps,omitempty"`
	// ProxyUs is the latency the send and receive proxies add to every
	// network step of an ib connection together (progress-loop polling,
	// posting work requests, polling completions, the GPUDirect flush),
	// in place of net_proxy_us. 0: net_proxy_us. (The embedded
	// calibration fitted net_proxy_us on socket connections, whose proxies
	// also run TCP; NCCL's own tuning model charges a network step of
	// Simple 14 us and of LL 2.7 us on rings, wire included.)
	ProxyUs float64 `json:"proxy_us,omitempty"`
	// MaxMsgBytes is the NIC's largest RDMA write (ibv_port_attr
	// max_msg_sz; ConnectX reports 1 GiB); a GIN put is cut into work
	// requests of at most this size. 0: 1 GiB.
	MaxMsgBytes int64 `json:"max_msg_bytes,omitempty"`
}

// Defaults of IBCalib.
const (
	defaultIBMsgRateM     = 20
	defaultIBWriteLatency = 1.0
	defaultIBStripeMin    = 16 << 10
	defaultIBMaxMsg       = 1 << 30
)

// msgRate is QPMsgRateM with its default, in messages per second.
func (c *IBCalib) msgRate() float64 {
	if c.QPMsgRateM == 0 {
		return defaultIBMsgRateM * 1e6
	}
	return c.QPMsgRateM * 1e6
}

// writeLatencyUs is WriteLatencyUs with its default.
func (c *IBCalib) writeLatencyUs() float64 {
	if c.WriteLatencyUs == 0 {
		return defaultIBWriteLatency
	}
	return c.WriteLatencyUs
}

// qps is QPsPerConn with its default.
func (c *IBCalib) qps() int {
	if c.QPsPerConn == 0 {
		return 1
	}
	return c.QPsPerConn
}

// stripeMin is StripeMinBytes with its default.
func (c *IBCalib) stripeMin() int64 {
	if c.StripeMinBytes == 0 {
		return defaultIBStripeMin
	}
	return c.StripeMinBytes
}

// maxMsg is MaxMsgBytes with its default.
func (c *IBCalib) maxMsg() int64 {
	if c.MaxMsgBytes == 0 {
		return defaultIBMaxMsg
	}
	return c.MaxMsgBytes
}

// validate checks the fields' ranges (0 is always valid: the default).
func (c *IBCalib) validate(name string) error {
	for _, k := range []struct {
		name   string
		v      float64
		lo, hi float64
	}{
		{"net_ib.qp_msg_rate_M", c.QPMsgRateM, 0, 1e5},
		{"net_ib.write_latency_us", c.WriteLatencyUs, 0, 1e6},
		{"net_ib.qps_per_connection", float64(c.QPsPerConn), 0, 128},
		{"net_ib.stripe_min_bytes", float64(c.StripeMinBytes), 0, 1 << 30},
		{"net_ib.qp_GBps", c.QPGBps, 0, 1e6},
		{"net_ib.max_msg_bytes", float64(c.MaxMsgBytes), 0, 1 << 40},
		{"net_ib.proxy_us", c.ProxyUs, 0, 1e6},
	} {
		if math.IsNaN(k.v) || math.IsInf(k.v, 0) || k.v < k.lo || k.v > k.hi {
			return fmt.Errorf("calibration %q: %s = %v out of range [%g, %g]", name, k.name, k.v, k.lo, k.hi)
		}
	}
	return nil
}

// ibCost is what the ib plugin adds to the slices of a NET route.
type ibCost struct {
	msgPs  float64 // time of one work request on one QP (ps)
	qps    int64
	stripe int64
	qpBpps float64 // bytes/ps of one QP, 0: unbounded
}

// newIBCost returns the per-message costs of calibration c.
func newIBCost(c *IBCalib) *ibCost {
	ib := &ibCost{msgPs: 1e12 / c.msgRate(), qps: int64(c.qps()), stripe: c.stripeMin()}
	if c.QPGBps > 0 {
		ib.qpBpps = c.QPGBps * 1e-3
	}
	return ib
}

// chunks is the number of QPs a message of n bytes is striped over.
func (ib *ibCost) chunks(n int64) int64 {
	return min(ib.qps, max(1, (n+ib.stripe-1)/ib.stripe))
}

// msgTime is the least time (ps) a message of n bytes takes on its QPs:
// every chunk's QP needs one work request time, and moves its chunk no
// faster than the QP's bound.
func (ib *ibCost) msgTime(n int64) float64 {
	k := ib.chunks(n)
	t := ib.msgPs
	if ib.qpBpps > 0 {
		chunk := (n + k - 1) / k
		t = max(t, float64(chunk)/ib.qpBpps)
	}
	return t
}

// msgCap is the highest rate (bytes/ps) at which a message of n bytes
// can move: its bytes over msgTime. A transfer's private cap takes it, so
// a message runs at the lower of this and its share of the links.
func (ib *ibCost) msgCap(n int64) float64 {
	if n <= 0 {
		return math.Inf(1)
	}
	return float64(n) / ib.msgTime(n)
}

// applyIB turns a NET route through ib NICs into an RDMA one: the
// NIC-to-NIC latency becomes the RDMA write latency (instead of the NET
// links' own), and its messages pay the QPs' costs (ibCost). A route of
// the NET transport (proxied) has net_proxy_us in its latency already:
// proxied replaces it by ProxyUs when that is set.
func (m *Machine) applyIB(rt *route, proxied bool) {
	c := &m.calib.NetIB
	for _, id := range rt.res {
		if m.extra[id] == extraLink && m.resType[id] == model.LinkNET {
			rt.lat -= m.res[id].lat
		}
	}
	rt.lat += usToPs(c.writeLatencyUs())
	if proxied && c.ProxyUs > 0 {
		rt.lat += usToPs(c.ProxyUs) - usToPs(m.calib.NetProxyUs)
	}
	rt.ib = newIBCost(c)
}
