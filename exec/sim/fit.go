package sim

import (
	"cmp"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// FitParam is one calibration constant the fitter may move: how to read
// it from and write it to a Calib. Values are fitted in log space, so they
// stay positive; Floor is added before the logarithm so that a constant
// may approach zero.
type FitParam struct {
	Name   string
	Floor  float64
	Lo, Hi float64
	get    func(*Calib) float64
	set    func(*Calib, float64)
}

// fitUse is what a set of tables exercises: the protocols (all, and over
// host memory), the link types, the transports and the harnesses.
type fitUse struct {
	protos, hostProtos []model.Protocol
	links              []model.LinkType
	shm, net, socket   bool
	// socketFlags says LL or LL128 rows cross a socket proxy (its flag
	// check can be fitted)
	socketFlags bool
	// socketFence says LL or LL128 rows of our executor (a table naming
	// its kernel) cross a socket proxy (net_socket.post_fence_us)
	socketFence bool
	// socketSimple says Simple rows cross a socket proxy (its Simple
	// latency, net_socket.simple_us)
	socketSimple bool
	// socketHost says socket rows come from probed hosts and the
	// calibration has a reference host (net_socket.host_exp)
	socketHost bool
	// socketDuplex says socket rows are fitted with a calibration that
	// prices a proxy serving both directions (net_socket.duplex_cost or
	// simple_duplex_cost set)
	socketDuplex bool
	// socketRecvConn says socket rows are fitted with a calibration that
	// lets a receive operation's end hold its connection alone
	// (net_socket.recv_conn_us set)
	socketRecvConn bool
	noGDR          bool
	harnesses      []string
	// eager says some table was timed outside CUDA graphs (HostCallUs)
	eager bool
	// fenceProtos are the protocols of rows recorded on twinccl's own
	// executor (decisions forced: Measurement.Recorded) that store into a
	// peer's memory, readProtos those that load from one (P2P read mode):
	// their remote fence and remote load cost can be fitted.
	fenceProtos, readProtos []model.Protocol
	// forwardProtos are the protocols of rows with P2P routes between
	// GPUs, whose steps that receive and send pay ForwardUs
	forwardProtos []model.Protocol
	// relayProtos are the protocols of rows of three or more ranks with
	// P2P routes between GPUs, whose relaying lanes' posts are seen
	// RelayUs late, after RelayHoldUs
	relayProtos []model.Protocol
	// colls are the collectives (not p2p) of the rows of each protocol
	// (CollUs)
	colls [model.NumProtocols][]model.Collective
	// p2pProtos are the protocols of AlltoAll and SendRecv rows (p2p
	// channels, their lanes sharing a block: P2PLaneShare).
	p2pProtos []model.Protocol
	// gpuProtos are the protocols of rows run on several channel counts
	// (GPUCopyGBps: what a GPU's blocks share shows only when the same
	// calls run on few and on many channels, e.g. under
	// NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS).
	gpuProtos []model.Protocol
	// launchChannel says the start prices a call's further channels
	// (LaunchChannelUs set): its fit keeps every other search as it was
	launchChannel bool
	// direct says there are Simple collectives (DirectUs)
	direct bool
	// threadCall are the protocols whose start prices a call's threads
	// (ThreadCallUs set): their fit keeps every other search as it was
	threadCall []model.Protocol
}

// protoUs is the fitted parameter PROTO.NAME, a cost of protocol p in
// microseconds (0-20 us, 0.01 us its smallest step) that field points to.
func protoUs(p model.Protocol, name string, field func(*ProtoCalib) *float64) FitParam {
	return FitParam{Name: strings.ToLower(p.String()) + "." + name, Floor: 0.01, Lo: 0, Hi: 20,
		get: func(c *Calib) float64 { return *field(c.Proto(p)) }, set: func(c *Calib, v float64) { *field(c.Proto(p)) = v }}
}

// fitParams are the constants that measurements of what u describes can
// identify. Protocols, link types and transports absent from the
// measurements keep their values.
func fitParams(u fitUse) []FitParam {
	ps := []FitParam{{Name: "launch_us", Floor: 0.01, Lo: 0, Hi: 50,
		get: func(c *Calib) float64 { return c.LaunchUs }, set: func(c *Calib, v float64) { c.LaunchUs = v }}}
	if u.eager {
		// Unset, it starts from twice the launch: below the GPU's time of
		// every call it changes nothing, and the search would not move.
		ps = append(ps, FitParam{Name: "host_call_us", Floor: 1, Lo: 0, Hi: 1000,
			get: func(c *Calib) float64 {
				if c.HostCallUs == 0 {
					return 2 * c.LaunchUs
				}
				return c.HostCallUs
			},
			set: func(c *Calib, v float64) { c.HostCallUs = v }})
	}
	for _, h := range u.harnesses {
		h := h
		ps = append(ps, FitParam{Name: "harness_us." + h, Floor: 1, Lo: 0, Hi: 50,
			get: func(c *Calib) float64 { return c.HarnessCostUs(h) },
			set: func(c *Calib, v float64) {
				if c.HarnessUs == nil {
					c.HarnessUs = map[string]float64{}
				}
				c.HarnessUs[h] = v
			}})
	}
	for _, p := range u.protos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps,
			FitParam{Name: n + ".start_us", Floor: 1, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Proto(p).StartUs }, set: func(c *Calib, v float64) { c.Proto(p).StartUs = v }},
			protoUs(p, "op_overhead_us", func(pc *ProtoCalib) *float64 { return &pc.OpOverheadUs }),
			protoUs(p, "slice_overhead_us", func(pc *ProtoCalib) *float64 { return &pc.SliceOverheadUs }),
			FitParam{Name: n + ".copy_GBps", Floor: 0, Lo: 1, Hi: 1000,
				get: func(c *Calib) float64 { return c.Proto(p).CopyGBps }, set: func(c *Calib, v float64) { c.Proto(p).CopyGBps = v }},
			FitParam{Name: n + ".reduce_cost", Floor: 0.01, Lo: 0, Hi: 4,
				get: func(c *Calib) float64 { return c.Proto(p).ReduceCost }, set: func(c *Calib, v float64) { c.Proto(p).ReduceCost = v }},
			FitParam{Name: n + ".remote_store_cost", Floor: 0, Lo: 0.25, Hi: 8,
				get: func(c *Calib) float64 { return c.Proto(p).remoteStoreCost() }, set: func(c *Calib, v float64) { c.Proto(p).RemoteStoreCost = v }},
			FitParam{Name: n + ".load_cost", Floor: 0, Lo: 0.02, Hi: 2,
				get: func(c *Calib) float64 { return c.Proto(p).loadCost() }, set: func(c *Calib, v float64) { c.Proto(p).LoadCost = v }},
			FitParam{Name: n + ".recv_load_cost", Floor: 0, Lo: 0.02, Hi: 4,
				get: func(c *Calib) float64 { return c.Proto(p).recvLoadCost() }, set: func(c *Calib, v float64) { c.Proto(p).RecvLoadCost = v }},
		)
		if p != model.ProtoSimple {
			// A line protocol's wire traffic moves at its own efficiency
			// of the links' (ProtoCalib.LinkEff), up to MaxProtoLinkEff.
			ps = append(ps, FitParam{Name: n + ".link_eff", Floor: 0, Lo: 0.5, Hi: MaxProtoLinkEff,
				get: func(c *Calib) float64 { return cmp.Or(c.Proto(p).LinkEff, 1) }, set: func(c *Calib, v float64) { c.Proto(p).LinkEff = v }},
				FitParam{Name: n + ".host_link_eff", Floor: 0, Lo: 0.5, Hi: MaxProtoLinkEff,
					get: func(c *Calib) float64 { return cmp.Or(c.Proto(p).HostLinkEff, c.Proto(p).LinkEff, 1) },
					set: func(c *Calib, v float64) { c.Proto(p).HostLinkEff = v }})
		}
	}
	for _, p := range u.gpuProtos {
		p := p
		n := strings.ToLower(p.String())
		// Unset (no limit), it starts where 24 blocks at the copy rate
		// would just meet it.
		ps = append(ps, FitParam{Name: n + ".gpu_copy_GBps", Floor: 0, Lo: 10, Hi: 1e5,
			get: func(c *Calib) float64 {
				if pc := c.Proto(p); pc.GPUCopyGBps > 0 {
					return pc.GPUCopyGBps
				}
				return 24 * c.Proto(p).CopyGBps
			},
			set: func(c *Calib, v float64) { c.Proto(p).GPUCopyGBps = v }})
	}
	for _, p := range u.protos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps, protoUs(p, "first_op_us", func(pc *ProtoCalib) *float64 { return &pc.FirstOpUs }),
			protoUs(p, "thread_op_us", func(pc *ProtoCalib) *float64 { return &pc.ThreadOpUs }),
			FitParam{Name: n + ".rate_threads", Floor: 32, Lo: 32, Hi: 4096,
				get: func(c *Calib) float64 { return c.Proto(p).RateThreads }, set: func(c *Calib, v float64) { c.Proto(p).RateThreads = v }})
	}
	// after every protocol's per-call constants: the order of the search's
	// coordinates is part of a fit's result
	for _, p := range u.protos {
		for _, coll := range u.colls[p] {
			p, k := p, coll.String()
			ps = append(ps, FitParam{Name: strings.ToLower(p.String()) + ".coll_us." + k, Floor: 0.01, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Proto(p).CollUs[k] },
				set: func(c *Calib, v float64) {
					pc := c.Proto(p)
					if pc.CollUs == nil {
						pc.CollUs = map[string]float64{}
					}
					pc.CollUs[k] = v
				}})
		}
	}
	if u.direct {
		ps = append(ps, FitParam{Name: "simple.direct_us", Floor: 0.01, Lo: 0, Hi: 20,
			get: func(c *Calib) float64 { return c.Simple.DirectUs }, set: func(c *Calib, v float64) { c.Simple.DirectUs = v }})
	}
	for _, p := range u.fenceProtos {
		ps = append(ps, protoUs(p, "remote_fence_us", func(pc *ProtoCalib) *float64 { return &pc.RemoteFenceUs }))
	}
	for _, p := range u.forwardProtos {
		ps = append(ps, protoUs(p, "forward_us", func(pc *ProtoCalib) *float64 { return &pc.ForwardUs }))
	}
	for _, p := range u.relayProtos {
		ps = append(ps, protoUs(p, "relay_us", func(pc *ProtoCalib) *float64 { return &pc.RelayUs }),
			protoUs(p, "relay_hold_us", func(pc *ProtoCalib) *float64 { return &pc.RelayHoldUs }))
	}
	for _, p := range u.p2pProtos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps, FitParam{Name: n + ".p2p_lane_share", Floor: 0, Lo: 0.25, Hi: 1,
			get: func(c *Calib) float64 { return c.Proto(p).p2pLaneShare() }, set: func(c *Calib, v float64) { c.Proto(p).P2PLaneShare = v }})
	}
	for _, p := range u.readProtos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps, FitParam{Name: n + ".remote_load_cost", Floor: 0, Lo: 0.02, Hi: 8,
			get: func(c *Calib) float64 { return c.Proto(p).remoteLoadCost() }, set: func(c *Calib, v float64) { c.Proto(p).RemoteLoadCost = v }})
	}
	for _, p := range u.hostProtos {
		p := p
		n := strings.ToLower(p.String())
		ps = append(ps,
			FitParam{Name: n + ".host_load_cost", Floor: 0, Lo: 0.05, Hi: 100,
				get: func(c *Calib) float64 { return c.Proto(p).hostLoadCost() }, set: func(c *Calib, v float64) { c.Proto(p).HostLoadCost = v }},
			FitParam{Name: n + ".host_store_cost", Floor: 0, Lo: 0.05, Hi: 100,
				get: func(c *Calib) float64 { return c.Proto(p).hostStoreCost() }, set: func(c *Calib, v float64) { c.Proto(p).HostStoreCost = v }},
			protoUs(p, "host_load_us", func(pc *ProtoCalib) *float64 { return &pc.HostLoadUs }),
			FitParam{Name: n + ".host_reduce_cost", Floor: 0.01, Lo: 0, Hi: 100,
				get: func(c *Calib) float64 { return c.Proto(p).HostReduceCost }, set: func(c *Calib, v float64) { c.Proto(p).HostReduceCost = v }},
		)
		if p == model.ProtoLL || p == model.ProtoSimple {
			ps = append(ps, protoUs(p, "host_round_us", func(pc *ProtoCalib) *float64 { return &pc.HostRoundUs }))
		}
		if u.shm {
			ps = append(ps, protoUs(p, "host_start_us", func(pc *ProtoCalib) *float64 { return &pc.HostStartUs }),
				protoUs(p, "host_turn_us", func(pc *ProtoCalib) *float64 { return &pc.HostTurnUs }))
		}
		if p == model.ProtoSimple && u.shm {
			ps = append(ps, protoUs(p, "host_fence_us", func(pc *ProtoCalib) *float64 { return &pc.HostFenceUs }),
				protoUs(p, "empty_slice_us", func(pc *ProtoCalib) *float64 { return &pc.EmptySliceUs }),
				protoUs(p, "host_post_us", func(pc *ProtoCalib) *float64 { return &pc.HostPostUs }))
		}
	}
	if u.shm || u.noGDR {
		ps = append(ps, FitParam{Name: "host_mem_GBps", Floor: 0, Lo: 5, Hi: 2000,
			get: func(c *Calib) float64 { return c.hostMemGBps() }, set: func(c *Calib, v float64) { c.HostMemGBps = v }},
			FitParam{Name: "host_cache_MiB", Floor: 1, Lo: 0, Hi: 4096,
				get: func(c *Calib) float64 { return c.HostCacheMiB }, set: func(c *Calib, v float64) { c.HostCacheMiB = v }},
			FitParam{Name: "host_cache_GBps", Floor: 0, Lo: 5, Hi: 5000,
				get: func(c *Calib) float64 { return cmp.Or(c.HostCacheGBps, c.hostMemGBps()) },
				set: func(c *Calib, v float64) { c.HostCacheGBps = v }})
	}
	if u.shm {
		ps = append(ps,
			FitParam{Name: "shm_latency_us", Floor: 0.01, Lo: 0, Hi: 50,
				get: func(c *Calib) float64 { return c.SHMLatencyUs }, set: func(c *Calib, v float64) { c.SHMLatencyUs = v }},
			FitParam{Name: "shm_copy_GBps", Floor: 0, Lo: 1, Hi: 1000,
				get: func(c *Calib) float64 { return c.SHMCopyGBps }, set: func(c *Calib, v float64) { c.SHMCopyGBps = v }})
	}
	if u.net {
		ps = append(ps, FitParam{Name: "net_proxy_us", Floor: 0.01, Lo: 0, Hi: 100,
			get: func(c *Calib) float64 { return c.NetProxyUs }, set: func(c *Calib, v float64) { c.NetProxyUs = v }})
	}
	if u.noGDR {
		ps = append(ps, FitParam{Name: "nogdr_penalty_us", Floor: 0.01, Lo: 0, Hi: 100,
			get: func(c *Calib) float64 { return c.NoGDRPenaltyUs }, set: func(c *Calib, v float64) { c.NoGDRPenaltyUs = v }})
	}
	if u.socket {
		ps = append(ps,
			FitParam{Name: "net_socket.proxy_GBps", Floor: 0, Lo: 0.1, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.proxyGBps() }, set: func(c *Calib, v float64) { c.NetSocket.ProxyGBps = v }},
			FitParam{Name: "net_socket.latency_us", Floor: 0.01, Lo: 0, Hi: 100,
				get: func(c *Calib) float64 { return c.NetSocket.LatencyUs }, set: func(c *Calib, v float64) { c.NetSocket.LatencyUs = v }},
			FitParam{Name: "net_socket.send_op_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.SendOpUs }, set: func(c *Calib, v float64) { c.NetSocket.SendOpUs = v }},
			FitParam{Name: "net_socket.recv_op_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.RecvOpUs }, set: func(c *Calib, v float64) { c.NetSocket.RecvOpUs = v }},
			FitParam{Name: "net_socket.recv_post_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.RecvPostUs }, set: func(c *Calib, v float64) { c.NetSocket.RecvPostUs = v }},
			FitParam{Name: "net_socket.payload_op_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.PayloadOpUs }, set: func(c *Calib, v float64) { c.NetSocket.PayloadOpUs = v }},
			FitParam{Name: "net_socket.payload_send_op_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.PayloadSendOpUs }, set: func(c *Calib, v float64) { c.NetSocket.PayloadSendOpUs = v }})
		if u.socketRecvConn {
			ps = append(ps, FitParam{Name: "net_socket.recv_conn_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.RecvConnUs }, set: func(c *Calib, v float64) { c.NetSocket.RecvConnUs = v }})
		}
		if u.socketDuplex && u.socketFlags {
			ps = append(ps, FitParam{Name: "net_socket.duplex_cost", Floor: 0, Lo: 1, Hi: 4,
				get: func(c *Calib) float64 { return c.NetSocket.duplexCost(model.ProtoLL) }, set: func(c *Calib, v float64) { c.NetSocket.DuplexCost = v }})
		}
		if u.socketDuplex && u.socketSimple {
			ps = append(ps, FitParam{Name: "net_socket.simple_duplex_cost", Floor: 0, Lo: 1, Hi: 4,
				get: func(c *Calib) float64 { return c.NetSocket.duplexCost(model.ProtoSimple) }, set: func(c *Calib, v float64) { c.NetSocket.SimpleDuplexCost = v }})
		}
		if u.socketHost {
			ps = append(ps, FitParam{Name: "net_socket.host_exp", Floor: 0.1, Lo: 0, Hi: 10,
				get: func(c *Calib) float64 { return c.NetSocket.HostExp }, set: func(c *Calib, v float64) { c.NetSocket.HostExp = v }})
		}
		if u.socketSimple {
			ps = append(ps, FitParam{Name: "net_socket.simple_us", Floor: 1, Lo: 0, Hi: 1000,
				get: func(c *Calib) float64 { return c.NetSocket.SimpleUs }, set: func(c *Calib, v float64) { c.NetSocket.SimpleUs = v }})
		}
		if u.socketFence {
			ps = append(ps, FitParam{Name: "net_socket.post_fence_us", Floor: 0.01, Lo: 0, Hi: 100,
				get: func(c *Calib) float64 { return c.NetSocket.PostFenceUs }, set: func(c *Calib, v float64) { c.NetSocket.PostFenceUs = v }})
		}
		if u.socketFlags {
			// Unset (no cost), it starts at ten times the proxy's copy rate.
			ps = append(ps, FitParam{Name: "net_socket.flag_check_GBps", Floor: 0, Lo: 0.1, Hi: 1000,
				get: func(c *Calib) float64 {
					if g := c.NetSocket.FlagCheckGBps; g > 0 {
						return g
					}
					return 10 * c.NetSocket.proxyGBps()
				},
				set: func(c *Calib, v float64) { c.NetSocket.FlagCheckGBps = v }})
		}
	}
	for _, t := range u.links {
		k := t.String()
		ps = append(ps,
			FitParam{Name: "links." + k + ".eff", Floor: 0, Lo: 0.2, Hi: MaxLinkEff(t),
				get: func(c *Calib) float64 { return c.Links[k].Eff },
				set: func(c *Calib, v float64) { l := c.Links[k]; l.Eff = v; c.Links[k] = l }},
			FitParam{Name: "links." + k + ".latency_us", Floor: 0.01, Lo: 0, Hi: 20,
				get: func(c *Calib) float64 { return c.Links[k].LatencyUs },
				set: func(c *Calib, v float64) { l := c.Links[k]; l.LatencyUs = v; c.Links[k] = l }},
		)
	}
	if u.launchChannel {
		ps = append(ps, FitParam{Name: "launch_channel_us", Floor: 0.001, Lo: 0, Hi: 5,
			get: func(c *Calib) float64 { return c.LaunchChannelUs }, set: func(c *Calib, v float64) { c.LaunchChannelUs = v }})
	}
	for _, p := range u.threadCall {
		ps = append(ps, protoUs(p, "thread_call_us", func(pc *ProtoCalib) *float64 { return &pc.ThreadCallUs }))
	}
	return ps
}

// FitOptions control Fit.
type FitOptions struct {
	// MaxEvals bounds the evaluations of the loss of each start (0:
	// 3000): every simulation of the tables counts once.
	MaxEvals int
	// Restarts is the number of runs of the method per start, each from
	// the best point yet with a smaller initial step, MaxEvals split
	// between them (those MethodCoordinate's coordinate search leaves:
	// its Nelder–Mead runs) (0: 3).
	Restarts int
	// Method is the optimiser (MethodCoordinate when zero).
	Method FitMethod
	// Only, when set, restricts the fit to the constants it accepts (by
	// FitParam name); the others keep their values.
	Only func(name string) bool
	// Progress, when set, is called after every run of the method
	// (Restarts per start) with its index from 0, the evaluations so far
	// (Step's count) and the errors of the best point of the start.
	Progress func(restart, evals int, median, maxErr float64)
	// Step, when set, is called after every evaluation of the loss with
	// the count of evaluations so far and the lowest loss yet (+Inf
	// before a valid point): for progress reports between restarts,
	// which can be minutes apart.
	Step func(evaluated int, lowest float64)
	// Loss is what the fit minimises (LossSquares when zero).
	Loss FitLoss
	// Starts is the number of further starting points (0: none). The
	// search stops at a local minimum: each further start moves every
	// constant of the first by a factor of 1.25 or 0.8 (a pattern of its
	// own, the same on every run), is searched as the first is, with
	// MaxEvals evaluations of its own, and the lowest loss wins.
	Starts int
}

// startFactor is the factor, in log space, by which a further starting
// point (FitOptions.Starts) moves each constant.
var startFactor = math.Log(1.25)

// startPoint is further starting point k (from 1) around x0: every
// coordinate moved up or down by startFactor, the signs drawn from a
// generator seeded with k, so that a fit is reproducible.
func startPoint(x0 []float64, k int) []float64 {
	r := rand.New(rand.NewSource(int64(k)))
	x := append([]float64(nil), x0...)
	for i := range x {
		if r.Intn(2) == 0 {
			x[i] += startFactor
		} else {
			x[i] -= startFactor
		}
	}
	return x
}

// FitLoss is the quantity a fit minimises over its tables.
type FitLoss int

const (
	// LossSquares is, over tables, the mean of each table's mean squared
	// log error plus worstWeight times its worst row's: no table and no
	// size range is sacrificed to the others.
	LossSquares FitLoss = iota
	// LossAbs is the mean of each table's mean absolute log error, with
	// no worst-row term: for recordings whose rows move from one start of
	// the machine to the next far more than the model's error (sockets
	// over a shared host's loopback: 20-50% on some rows), where squares
	// and the worst row pull the constants after the noise.
	LossAbs
)

// String is the loss's name on the command line.
func (l FitLoss) String() string {
	if l == LossAbs {
		return "abs"
	}
	return "squares"
}

// ParseFitLoss reads a loss's name (squares or abs).
func ParseFitLoss(s string) (FitLoss, error) {
	switch s {
	case "squares":
		return LossSquares, nil
	case "abs":
		return LossAbs, nil
	}
	return 0, fmt.Errorf("unknown loss %q (squares or abs)", s)
}

// FitTable is one measured table to fit or to predict: the search result
// under the table's settings, the run's Settings, the timing harness and
// the rows.
type FitTable struct {
	Name     string
	Res      *search.Result
	Settings Settings
	Harness  string
	Rows     []Measurement
	// Loop is the number of timed calls of the loop each row is simulated
	// as (Simulator.Loop; 0: one isolated call).
	Loop int
	// Eager says the rows were timed outside CUDA graphs (Simulator.Eager).
	Eager bool
	// Host is what the recording host's loopback probes measured
	// (Table.Host): the rows are simulated under Calib.ForHost(Host).
	Host HostProbe
	// Ours says the rows are our executor's (Table.Kernel names its
	// build): they may fit constants of its kernel alone
	// (net_socket.post_fence_us).
	Ours bool
}

// NewFitTable prepares a Table for fitting: res is the search result under
// the table's settings (SearchTable).
func NewFitTable(t *Table, res *search.Result) FitTable {
	// SearchTable, which made res, has checked the settings.
	st, _ := SettingsFromEnv(t.Lookup)
	return FitTable{Name: t.Name, Res: res, Settings: st, Harness: t.Harness, Rows: t.Rows, Loop: DefaultLoopCalls, Eager: t.Eager,
		Host: t.Host, Ours: t.Kernel != ""}
}

// simulator builds the table's simulator with calibration c.
func (ft *FitTable) simulator(c *Calib) (*Simulator, error) {
	s, err := NewSimulator(ft.Res, c.ForHost(ft.Host))
	if err != nil {
		return nil, err
	}
	s.Machine.SetSettings(ft.Settings)
	s.Harness = ft.Harness
	s.Loop = ft.Loop
	s.Eager = ft.Eager
	return s, nil
}

// Compare simulates the table's rows with calibration c.
func (ft *FitTable) Compare(c *Calib) ([]Comparison, error) {
	s, err := ft.simulator(c)
	if err != nil {
		return nil, err
	}
	rows, err := s.Compare(ft.Rows)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ft.Name, err)
	}
	for i := range rows {
		rows[i].Table = ft.Name
	}
	return rows, nil
}

// FitResult is a fitted calibration and its comparison table.
type FitResult struct {
	Calib  *Calib
	Params []string
	Rows   []Comparison
	Median float64
	Max    float64
	Evals  int
	// Loss is what the fit minimised (FitOptions.Loss over the fitted
	// tables, fitLoss) at Calib: fits of the same tables from different
	// starting points compare by it.
	Loss float64
	// Tables are the per-table errors of the fitted tables.
	Tables []TableFit
}

// Fit adjusts the constants of start that the measurements can identify
// (launch cost, per-op and per-slice overheads, copy throughput and
// reduction cost of the protocols the tuner picks for them, efficiency and
// latency of the link types their routes cross) to minimise the squared
// log error of the simulated times, with a penalty on the worst row
// (worstWeight), by a search in log space run by gonum's optimize
// (FitOptions.Method: by default a coordinate search, then Nelder–Mead;
// optimize.go), its points kept within each constant's bounds. The
// mechanisms stay as they are: only these few constants move.
func Fit(res *search.Result, start *Calib, ms []Measurement, opt FitOptions) (*FitResult, error) {
	return FitTables([]FitTable{{Name: "table", Res: res, Rows: ms, Loop: DefaultLoopCalls}}, start, opt)
}

// FitTables is Fit over several tables at once, each with its own
// settings (transports, protocols) and harness: the constants that any
// table identifies move (host memory costs and SHM latency for tables
// with SHM connections, proxy and socket costs for NET ones, the harness's
// cost for tables timed by one), to minimise fitLoss.
func FitTables(tables []FitTable, start *Calib, opt FitOptions) (*FitResult, error) {
	if len(tables) == 0 {
		return nil, fmt.Errorf("fit: no tables")
	}
	if opt.MaxEvals <= 0 {
		opt.MaxEvals = 3000
	}
	if opt.Restarts <= 0 {
		opt.Restarts = 3
	}
	base := start.Clone()
	if base.Version < CalibVersion {
		base.Version = CalibVersion
	}
	u, err := usage(tables, base)
	if err != nil {
		return nil, err
	}
	for _, t := range u.links {
		if _, ok := base.Links[t.String()]; !ok {
			base.Links[t.String()] = LinkCalib{Eff: 1}
		}
	}
	var params []FitParam
	for _, p := range fitParams(u) {
		if opt.Only == nil || opt.Only(p.Name) {
			params = append(params, p)
		}
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("fit: no constant to fit")
	}
	x0 := make([]float64, len(params))
	lo, hi := make([]float64, len(params)), make([]float64, len(params))
	for i, p := range params {
		x0[i] = math.Log(max(p.get(base), p.Lo) + p.Floor)
		lo[i], hi[i] = math.Log(p.Lo+p.Floor), math.Log(p.Hi+p.Floor)
	}
	decode := func(x []float64) *Calib {
		c := base.Clone()
		for i, p := range params {
			v := math.Exp(x[i]) - p.Floor
			v = min(max(v, p.Lo), p.Hi)
			p.set(c, v)
		}
		return c
	}
	var evalErr error
	// score is the loss at a point within the bounds (+Inf where the
	// calibration is invalid or a table cannot be simulated).
	score := func(x []float64) float64 {
		c := decode(x)
		if err := c.Validate(); err != nil {
			return math.Inf(1)
		}
		rows, err := compareTables(tables, c)
		if err != nil {
			evalErr = err
			return math.Inf(1)
		}
		return fitLoss(rows, opt.Loss)
	}
	// The search (optimize.go) keeps its points within the bounds and
	// counts every evaluation of score once.
	bs := newBoxSearch(score, lo, hi, opt.Method, opt.Restarts)
	bs.step = opt.Step
	if opt.Progress != nil {
		bs.restarted = func(r, evals int, best []float64) {
			if rows, err := compareTables(tables, decode(best)); err == nil {
				med, mx := ErrorStats(flatten(rows))
				opt.Progress(r, evals, med, mx)
			}
		}
	}
	best, bestF := bs.search(x0, opt.MaxEvals, 0)
	for k := 1; k <= opt.Starts; k++ {
		if x, f := bs.search(startPoint(x0, k), opt.MaxEvals, uint64(k)); f < bestF {
			best, bestF = x, f
		}
	}
	if math.IsInf(bestF, 1) {
		if evalErr != nil {
			return nil, fmt.Errorf("fit: %w", evalErr)
		}
		return nil, fmt.Errorf("fit: no valid calibration found")
	}
	c := decode(best)
	per, err := compareTables(tables, c)
	if err != nil {
		return nil, err
	}
	rows := flatten(per)
	med, mx := ErrorStats(rows)
	names := make([]string, len(params))
	for i, p := range params {
		names[i] = p.Name
	}
	fr := &FitResult{Calib: c, Params: names, Rows: rows, Median: med, Max: mx, Evals: bs.evals, Loss: fitLoss(per, opt.Loss)}
	for i := range tables {
		fr.Tables = append(fr.Tables, tableFit(tables[i].Name, true, per[i]))
	}
	return fr, nil
}

// tableFit summarises the errors of one table.
func tableFit(name string, fitted bool, rows []Comparison) TableFit {
	med, mx := ErrorStats(rows)
	return TableFit{Table: name, Fitted: fitted, Rows: len(rows), MedianErr: med, MaxErr: mx}
}

// PredictTables compares held-out tables with calibration c.
func PredictTables(tables []FitTable, c *Calib) ([]Comparison, []TableFit, error) {
	per, err := compareTables(tables, c)
	if err != nil {
		return nil, nil, err
	}
	out := make([]TableFit, len(tables))
	for i := range tables {
		out[i] = tableFit(tables[i].Name, false, per[i])
	}
	return flatten(per), out, nil
}

// compareTables simulates every table with c: its rows' comparisons, per
// table.
func compareTables(tables []FitTable, c *Calib) ([][]Comparison, error) {
	per := make([][]Comparison, len(tables))
	for i := range tables {
		rows, err := tables[i].Compare(c)
		if err != nil {
			return nil, err
		}
		per[i] = rows
	}
	return per, nil
}

// TablesLoss is loss over the tables simulated with c: what FitTables
// would minimise on them (FitResult.Loss), for comparing calibrations,
// e.g. fits of the same tables from different starting points.
func TablesLoss(tables []FitTable, c *Calib, loss FitLoss) (float64, error) {
	per, err := compareTables(tables, c)
	if err != nil {
		return 0, err
	}
	return fitLoss(per, loss), nil
}

func flatten(per [][]Comparison) []Comparison {
	var out []Comparison
	for _, r := range per {
		out = append(out, r...)
	}
	return out
}

// usage finds what the tables exercise under calibration c.
func usage(tables []FitTable, c *Calib) (fitUse, error) {
	u := fitUse{launchChannel: c.LaunchChannelUs > 0}
	protoSet := map[model.Protocol]bool{}
	hostSet := map[model.Protocol]bool{}
	var collSet [model.NumProtocols][model.NumTunedCollectives]bool
	fenceSet := map[model.Protocol]bool{}
	readSet := map[model.Protocol]bool{}
	forwardSet := map[model.Protocol]bool{}
	relaySet := map[model.Protocol]bool{}
	p2pSet := map[model.Protocol]bool{}
	// A call (protocol, collective, size) seen on two channel counts
	// identifies the protocol's GPUCopyGBps.
	type chanKey struct {
		proto model.Protocol
		coll  model.Collective
		bytes int64
	}
	chans := map[chanKey]int{}
	gpuSet := map[model.Protocol]bool{}
	linkSet := map[model.LinkType]bool{}
	harn := map[string]bool{}
	for i := range tables {
		ft := &tables[i]
		s, err := ft.simulator(c)
		if err != nil {
			return u, err
		}
		// nccl-tests costs nothing by definition; on another machine
		// ("nccl-tests@MACHINE") it has a cost of its own to fit
		if ft.Harness != "" && ft.Harness != HarnessNCCLTests {
			harn[ft.Harness] = true
		}
		u.eager = u.eager || ft.Eager
		for _, m := range ft.Rows {
			call, err := m.call(s.Machine.Cluster.NRanks, s.Search.Plan.NChannels)
			if err != nil {
				return u, fmt.Errorf("%s line %d: %w", ft.Name, m.Line, err)
			}
			p, _, err := s.Program(call)
			if err != nil {
				return u, fmt.Errorf("%s line %d: %w", ft.Name, m.Line, err)
			}
			protoSet[p.Proto] = true
			if p.Coll.IsP2P() {
				p2pSet[p.Proto] = true
			} else {
				collSet[p.Proto][p.Coll] = true
			}
			k := chanKey{p.Proto, p.Coll, m.Bytes}
			if seen, ok := chans[k]; ok && seen != p.NChannels {
				gpuSet[p.Proto] = true
			}
			chans[k] = p.NChannels
			u.direct = u.direct || (len(p.Conns) > 0 && p.Proto == model.ProtoSimple && !p.Coll.IsP2P())
			for _, cn := range p.Conns {
				rt, err := s.Machine.route(int(cn.From), int(cn.To), int(cn.Channel))
				if err != nil {
					return u, err
				}
				for _, r := range slices.Concat(rt.res, rt.recvRes) {
					if s.Machine.extra[r] == extraLink {
						linkSet[s.Machine.resType[r]] = true
					}
				}
				switch rt.transport {
				case TransportSHM:
					u.shm = true
				case TransportNET:
					u.net = true
					u.noGDR = u.noGDR || !rt.gdr
					u.socket = u.socket || rt.proxyCopies > 0
					u.socketFlags = u.socketFlags || (rt.proxyCopies > 0 && p.Proto != model.ProtoSimple)
					u.socketFence = u.socketFence || (rt.proxyCopies > 0 && p.Proto != model.ProtoSimple && ft.Ours)
					u.socketSimple = u.socketSimple || (rt.proxyCopies > 0 && p.Proto == model.ProtoSimple)
					u.socketHost = u.socketHost || (rt.proxyCopies > 0 && ft.Host.LatencyUs > 0 && c.NetSocket.HostLatencyUs > 0)
					u.socketRecvConn = u.socketRecvConn || (rt.proxyCopies > 0 && c.NetSocket.RecvConnUs > 0)
					u.socketDuplex = u.socketDuplex || (rt.proxyCopies > 0 && (c.NetSocket.DuplexCost > 0 || c.NetSocket.SimpleDuplexCost > 0))
				}
				if rt.hostSend || rt.hostRecv {
					hostSet[p.Proto] = true
				}
				if rt.transport == TransportP2P && len(rt.res) > 0 {
					forwardSet[p.Proto] = true
					if p.NRanks > 2 {
						relaySet[p.Proto] = true
					}
					if p.Proto == model.ProtoSimple && c.p2pRead(p.Coll) {
						readSet[p.Proto] = true
					} else if m.Recorded != nil && m.Recorded.Algo >= 0 && p.Proto == model.ProtoSimple {
						fenceSet[p.Proto] = true
					}
				}
			}
		}
	}
	for p := model.Protocol(0); p < model.NumProtocols; p++ {
		if protoSet[p] {
			u.protos = append(u.protos, p)
			if c.Proto(p).ThreadCallUs > 0 {
				u.threadCall = append(u.threadCall, p)
			}
		}
		if hostSet[p] {
			u.hostProtos = append(u.hostProtos, p)
		}
		for c := model.Collective(0); c < model.NumTunedCollectives; c++ {
			if collSet[p][c] {
				u.colls[p] = append(u.colls[p], c)
			}
		}
		if fenceSet[p] {
			u.fenceProtos = append(u.fenceProtos, p)
		}
		if readSet[p] {
			u.readProtos = append(u.readProtos, p)
		}
		if forwardSet[p] {
			u.forwardProtos = append(u.forwardProtos, p)
		}
		if relaySet[p] {
			u.relayProtos = append(u.relayProtos, p)
		}
		if p2pSet[p] {
			u.p2pProtos = append(u.p2pProtos, p)
		}
		if gpuSet[p] {
			u.gpuProtos = append(u.gpuProtos, p)
		}
	}
	for t := range linkSet {
		u.links = append(u.links, t)
	}
	sort.Slice(u.links, func(i, j int) bool { return u.links[i] < u.links[j] })
	for h := range harn {
		u.harnesses = append(u.harnesses, h)
	}
	sort.Strings(u.harnesses)
	return u, nil
}

// fitLoss is loss (LossSquares or LossAbs) over the tables' rows. Rows aim
// at their target (disturbed means are replaced by NoisyRatio times the
// best repetition).
func fitLoss(per [][]Comparison, loss FitLoss) float64 {
	var total float64
	n := 0
	for _, rows := range per {
		if len(rows) == 0 {
			continue
		}
		var sum, worst float64
		for _, r := range rows {
			e := math.Log(r.SimUs / r.target())
			if loss == LossAbs {
				sum += math.Abs(e)
				continue
			}
			sum += e * e
			worst = max(worst, e*e)
		}
		total += sum/float64(len(rows)) + worstWeight*worst
		n++
	}
	if n == 0 {
		return 0
	}
	return total / float64(n)
}

// MaxLinkEff bounds the fitted efficiency of a link type: a link cannot
// carry more data than NCCL's bandwidth rating of it, except PCIe, which
// NCCL rates below what a Gen4/Gen5 x16 link moves (it rates Gen5 x16 at
// 48 GB/s of its 64).
func MaxLinkEff(t model.LinkType) float64 {
	if t == model.LinkPCI {
		return 1.3
	}
	return 1.0
}

// MaxProtoLinkEff bounds the fitted efficiency of a line protocol's wire
// traffic on the links (ProtoCalib.LinkEff, LL and LL128), which
// multiplies theirs: NCCL rates a link of NVLink 2 to 4 at 20-20.6 GB/s
// (SM90: 20.6) where it moves 25 GB/s each way, 1.21 times that, and
// NCCL's link-bound LL Broadcast of 12 MiB on two H200 moved its 25 MB of
// lines 8% faster than the links at NCCL's rating let the simulation.
const MaxProtoLinkEff = 1.25

// worstWeight is the weight of the worst row's squared log error in the
// fit's loss, next to the mean over all rows.
const worstWeight = 1.0
