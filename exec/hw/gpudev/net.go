package gpudev

import (
	"errors"
	"fmt"
	"os"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

// Net connections: between ranks on different hosts (their host ids,
// transport.HostID, differ; TWINCCL_HOSTID=split:K splits one machine), or
// between any two ranks when both P2P and SHM are disabled
// (NCCL_P2P_DISABLE=1 and NCCL_SHM_DISABLE=1, or the TWINCCL_ names), a
// connection goes through the ranks' proxies and their net plugin (the
// socket plugin, or the one Options.Net gives: the ib plugin for run gpu
// --net ib), the machinery of the host device (exec/hw/transport):
// Set.Connect sets it up, and the proxy's progress loop moves its steps.
//
// Each side of a net connection has its own transport.Mem (counters,
// connFifo and one slot ring per protocol) in host memory, which the device
// registers with CUDA (page-locked and mapped into the GPU), so that the
// kernel addresses it directly; it is the staging buffer of NCCL's net
// transport without GPUDirect RDMA. The sending kernel writes a slice
// into its side's ring, the slice's fifo entry, a system fence, then the
// tail (Simple and LL alike: the kernel publishes every send step of a
// connection that has a fifo). The sender's progress loop sees the tail,
// sends the slice with its entry as header over the plugin, and moves the
// head when the send completed: the credits the kernel waits on. The
// receiver's progress loop receives into its side's ring once the
// receiving kernel released the slot (the head it stores), then publishes
// the step: the tail for Simple, the flagged lines for LL (stored word by
// word, flags and data together), which the kernel polls as over P2P.
// LL128 is refused, as over SHM.
//
// The kernel moves the counters without telling the proxy, so the proxy
// runs in polled mode (transport.ProxyService.PollCounters), and every
// launch wakes it (Conn.Notify) when it is enqueued.

// Link is the transport of the connections between two ranks.
type Link int

// Links.
const (
	// LinkP2P is GPU memory mapped through CUDA IPC or peer access.
	LinkP2P Link = iota
	// LinkSHM is host shared memory (/dev/shm) mapped into both GPUs.
	LinkSHM
	// LinkNet is the proxies and the socket net plugin.
	LinkNet
	// LinkSelf is a rank's connection to itself (in its GPU memory).
	LinkSelf
)

func (l Link) String() string {
	switch l {
	case LinkP2P:
		return "P2P"
	case LinkSHM:
		return "SHM"
	case LinkNet:
		return "NET"
	case LinkSelf:
		return "SELF"
	}
	return fmt.Sprintf("Link(%d)", int(l))
}

// Link is the transport this device uses between ranks a and b (both
// ranks of the job): the model's decision (LinkFor) once SetCluster gave
// the job's topology, as the simulator decides it; before that, or for a
// device without one (LocalJob), ranks of different hosts connect over
// NET and ranks of one host over P2P, SHM or NET as NCCL_P2P_DISABLE and
// NCCL_SHM_DISABLE say. TWINCCL_P2P_DISABLE and TWINCCL_SHM_DISABLE
// override either for our executor only (NCCL's baseline keeps its
// transports), for experiments.
func (d *Device) Link(a, b int) Link {
	if a == b {
		return LinkSelf
	}
	if d.links != nil {
		return override(d.links[a*d.nlinks+b])
	}
	switch {
	case d.hosts[a] != d.hosts[b] || p2pDisabled() && shmDisabled():
		return LinkNet
	case p2pDisabled():
		return LinkSHM
	}
	return LinkP2P
}

// override applies TWINCCL_P2P_DISABLE and TWINCCL_SHM_DISABLE to the
// model's decision: P2P falls to SHM, SHM to NET.
func override(l Link) Link {
	p2p, shm := os.Getenv("TWINCCL_P2P_DISABLE") == "1", os.Getenv("TWINCCL_SHM_DISABLE") == "1"
	if l == LinkP2P && p2p {
		l = LinkSHM
	}
	if l == LinkSHM && shm {
		l = LinkNet
	}
	return l
}

// LinkFor is the transport NCCL uses between ranks a and b of the cluster
// (model.Cluster.Conn, the decision the simulator routes by), as this
// device's Link.
func LinkFor(cl *model.Cluster, a, b int) (Link, error) {
	return linkFor(cl.Planner(), a, b)
}

func linkFor(p *model.ConnPlanner, a, b int) (Link, error) {
	if a == b {
		return LinkSelf, nil
	}
	c, err := p.Conn(a, b, 0)
	if err != nil {
		return 0, err
	}
	switch c.Transport {
	case model.TransportP2P:
		return LinkP2P, nil
	case model.TransportSHM:
		return LinkSHM, nil
	}
	return LinkNet, nil
}

// SetCluster makes the job's topology decide every connection's transport
// (LinkFor). Call it on every rank before the first launch, with the same
// cluster. Ranks the cluster puts on one node must be on one host (their
// host ids equal); ranks of one host on different nodes (several ranks on
// one GPU, or a job split into hosts on one machine) connect over NET, as
// the simulator routes them.
func (d *Device) SetCluster(cl *model.Cluster) error {
	n := len(d.hosts)
	if cl.NRanks != n {
		return fmt.Errorf("gpudev: the topology plans %d ranks, the job has %d", cl.NRanks, n)
	}
	links := make([]Link, n*n)
	planner := cl.Planner()
	for a := 0; a < n; a++ {
		for b := 0; b < n; b++ {
			l, err := linkFor(planner, a, b)
			if err != nil {
				return fmt.Errorf("gpudev: %w", err)
			}
			if l != LinkNet && l != LinkSelf && d.hosts[a] != d.hosts[b] {
				return fmt.Errorf("gpudev: the topology connects ranks %d and %d over %s, but they are on different hosts (%q, %q)", a, b, l, d.hosts[a], d.hosts[b])
			}
			links[a*n+b] = l
		}
	}
	d.links, d.nlinks = links, n
	return nil
}

// startNet gathers every rank's host id and starts the proxy when a peer
// is reached through the net transport (the proxy starts later, at the
// first net connection, if the environment changes meanwhile).
func (d *Device) startNet() error {
	me := d.comm.Rank()
	ids, err := d.comm.AllGather([]byte(transport.HostID(me)))
	if err != nil {
		return fmt.Errorf("gpudev rank %d: gather host ids: %w", me, err)
	}
	d.hosts = make([]string, len(ids))
	for i, b := range ids {
		d.hosts[i] = string(b)
	}
	for r := range d.hosts {
		if d.Link(me, r) == LinkNet {
			return d.ensureSet()
		}
	}
	return nil
}

// ensureSet starts the rank's proxy (a transport.Set with every
// connection on the net transport) if it is not running.
func (d *Device) ensureSet() error {
	if d.set != nil {
		return nil
	}
	me := d.comm.Rank()
	set, err := transport.NewSet(d.comm, transport.Config{HostIDs: d.hosts, ForceNet: true, Net: d.net})
	if err != nil {
		return fmt.Errorf("gpudev rank %d: start the proxy: %w", me, err)
	}
	set.Proxy().PollCounters()
	d.set = set
	return nil
}

// connectNet sets up the net connections of keys with peer: the proxies
// connect them (both ranks call it with the same keys in the same
// order), then this rank registers its sides' memory with CUDA and writes
// their TwConn: the rings, counters and (send ends) the connFifo, all in
// that memory. Read mode is meaningless here (each side has its own
// Simple ring), so both Simple rings are the one the proxy uses.
func (d *Device) connectNet(peer int, keys []transport.Key) error {
	me := d.comm.Rank()
	if err := d.ensureSet(); err != nil {
		return err
	}
	conns, err := d.set.Connect(keys)
	if err != nil {
		return fmt.Errorf("gpudev rank %d: net connections with rank %d: %w", me, peer, err)
	}
	if len(conns) != len(keys) {
		return fmt.Errorf("gpudev rank %d: %d net connections with rank %d for %d keys", me, len(conns), peer, len(keys))
	}
	arr, err := d.ctx.MemAlloc(uint64(len(keys) * kernels.ConnSize))
	if err != nil {
		return fmt.Errorf("gpudev rank %d: connection state: %w", me, err)
	}
	d.allocs = append(d.allocs, arr)
	buf := make([]byte, 0, len(keys)*kernels.ConnSize)
	ends := make([]endKey, len(keys))
	for i, k := range keys {
		c := conns[i]
		if c == nil || c.Kind != transport.KindNet || c.Send != (k.From == me) || len(c.Mem) != transport.MemBytes {
			return fmt.Errorf("gpudev rank %d: net connection %v with rank %d is not a %d-byte net end of this rank", me, k, peer, transport.MemBytes)
		}
		h, err := d.ctx.MemHostRegister(unsafe.Pointer(&c.Mem[0]), len(c.Mem))
		if err != nil {
			return fmt.Errorf("gpudev rank %d: register net connection %v with rank %d with CUDA: %w", me, k, peer, err)
		}
		d.netMem = append(d.netMem, h)
		buf = appendNetConn(buf, uint64(h.DevicePtr()), c.Send)
		ends[i] = endKey{k, c.Send}
	}
	if err := d.ctx.MemcpyHtoD(arr, buf); err != nil {
		return fmt.Errorf("gpudev rank %d: write connection state: %w", me, err)
	}
	for i, e := range ends {
		d.ends[e] = arr.Add(uint64(i * kernels.ConnSize))
		d.netConn[e] = conns[i]
	}
	return nil
}

// appendNetConn writes the TwConn of a net connection side whose
// transport.Mem the GPU sees at base: rings LL, LL128, Simple, Simple
// (read mode uses the same one), tail, head, step 0, and the connFifo for
// a send end.
func appendNetConn(b []byte, base uint64, send bool) []byte {
	for _, p := range []model.Protocol{model.ProtoLL, model.ProtoLL128, model.ProtoSimple, model.ProtoSimple} {
		b = le.AppendUint64(b, base+uint64(transport.BufOffset(p)))
	}
	b = le.AppendUint64(b, base+transport.MemTailOffset)
	b = le.AppendUint64(b, base+transport.MemHeadOffset)
	b = le.AppendUint64(b, 0) // step
	fifo := uint64(0)
	if send {
		fifo = base + transport.MemFifoOffset
	}
	return le.AppendUint64(b, fifo)
}

// launchNetConns lists the net connection ends the lanes use.
func (d *Device) launchNetConns(p *model.Program, keys []transport.Key, lanes []int) []*transport.Conn {
	var out []*transport.Conn
	seen := map[*transport.Conn]bool{}
	add := func(conns []int32, send bool) {
		for _, ci := range conns {
			if c := d.netConn[endKey{keys[ci], send}]; c != nil && !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	for _, li := range lanes {
		add(p.Lanes[li].Recv, false)
		add(p.Lanes[li].Send, true)
	}
	return out
}

// closeNet unregisters the net connections' memory from CUDA (the
// device's work is finished) and then stops the proxy, which closes the
// connections (senders say goodbye) and unmaps their memory.
func (d *Device) closeNet() error {
	var errs []error
	for _, h := range d.netMem {
		errs = append(errs, h.Free())
	}
	d.netMem = nil
	if d.set != nil {
		if err := d.set.Close(); err != nil {
			errs = append(errs, fmt.Errorf("gpudev rank %d: stop the proxy: %w", d.comm.Rank(), err))
		}
		d.set = nil
	} else if d.net != nil {
		// The proxy never started: the plugin is still ours to close.
		errs = append(errs, d.net.Close())
	}
	d.net = nil
	d.netConn = nil
	return errors.Join(errs...)
}
