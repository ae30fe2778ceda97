// Package gpudev is the CUDA device of the hardware runtime: it runs one
// rank's lanes of a model.Program on a GPU with the interpreter kernel of
// package kernels (compiled with NVRTC at first use), over connection
// buffers in GPU memory. A receiver owns each connection's slot rings and
// tail counter, the sender its head counter and a second Simple ring: a
// Program's Simple steps go either through the receiver's ring (written
// over the link: P2P write mode) or through the sender's (read over the
// link: read mode), chosen per Program (see SimpleRead). Each side maps
// the other's memory through CUDA IPC (ranks in other processes) or peer
// access (ranks of this process). Without P2P, connections go through
// host memory: SHM (shm.go) between ranks of one host, the net transport
// (net.go: the rank's proxy and the socket plugin) between hosts or when
// SHM is disabled too.
//
// A rank whose part of a Program only copies its input to its output (a
// one-rank communicator's call, as NCCL runs it) gets no kernel: its calls
// are device-to-device copies on the stream (copy.go).
//
// The kernel's semantics are model/refexec's; the conformance suite checks
// them. Connection step counters live in GPU memory, so a launch captured
// in a CUDA graph can be replayed.
package gpudev

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/exec/hw/cuda"
	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/kernels"
	"github.com/twinccl/twinccl/model"
)

var le = binary.LittleEndian

// Connection memory: every connection end has a 256-byte control block
// (tail at 0, head at 128, each on its own line); a receiving end also has
// the slot rings of the three protocols.
const (
	ctrlBytes = 256
	tailOff   = 0
	headOff   = 128
	ringAlign = 4096
)

var protoRing = [model.NumProtocols]int64{
	model.ProtoLL:     int64(model.BuffSizeLL),
	model.ProtoLL128:  int64(model.BuffSizeLL128),
	model.ProtoSimple: int64(model.BuffSizeSimple),
}

func alignUp(v, a int64) int64 { return (v + a - 1) / a * a }

// Device runs Programs for one rank on one GPU.
type Device struct {
	comm   *bootstrap.Comm
	ctx    *cuda.Context
	stream *cuda.Stream
	// Timeout bounds a launch's wait for a peer (the comm's timeout when 0).
	Timeout time.Duration

	mu      sync.Mutex
	ends    map[endKey]cuda.DevicePtr // TwConn of each connection end
	allocs  []cuda.DevicePtr          // own regions and TwConn arrays
	opened  []cuda.DevicePtr          // peers' regions opened through IPC
	shm     []*shmRegion              // host-memory regions (SHM connections)
	hosts   []string                  // every rank's host id (transport.HostID)
	links   []Link                    // the topology's transports (SetCluster), nlinks x nlinks; nil without one
	nlinks  int
	set     *transport.Set             // the proxy and the net connections; nil until needed
	net     transport.Plugin           // the net plugin of the proxy (Options.Net); nil: socket
	netMem  []*cuda.HostMem            // net connections' memory registered with CUDA
	netConn map[endKey]*transport.Conn // net connection ends
	batches map[int]uint32             // exchanges with each peer so far
	ctrl    *cuda.HostMem              // status word at 0, abort flag at 64
	stop    chan struct{}
	closed  bool
}

type endKey struct {
	key  transport.Key
	send bool
}

// New opens the device of comm's rank on ctx, with its own stream. Ranks
// of one process may share a context (one GPU) or use different ones.
// Every rank of the job calls it (it gathers the ranks' host ids) and,
// when some peer is reached through the net transport, it starts the
// rank's proxy.
func New(comm *bootstrap.Comm, ctx *cuda.Context) (*Device, error) {
	return NewWithOptions(comm, ctx, Options{})
}

// Options choose what New leaves at its default.
type Options struct {
	// Net is the net plugin the rank's proxy carries net connections
	// over (run gpu --net: the socket plugin when nil, the ib plugin of
	// exec/hw/ib for --net ib). The proxy closes it when the device
	// closes.
	Net transport.Plugin
}

// NewWithOptions is New with opt.
func NewWithOptions(comm *bootstrap.Comm, ctx *cuda.Context, opt Options) (*Device, error) {
	me := comm.Rank()
	s, err := ctx.NewStream(cuda.StreamNonBlocking)
	if err != nil {
		return nil, fmt.Errorf("gpudev rank %d: %w", me, err)
	}
	ctrl, err := ctx.MemHostAlloc(128)
	if err != nil {
		_ = s.Destroy()
		return nil, fmt.Errorf("gpudev rank %d: status memory: %w", me, err)
	}
	clear(ctrl.Bytes())
	d := &Device{comm: comm, ctx: ctx, stream: s, ends: map[endKey]cuda.DevicePtr{},
		batches: map[int]uint32{}, ctrl: ctrl, stop: make(chan struct{}), netConn: map[endKey]*transport.Conn{}, net: opt.Net}
	if err := d.startNet(); err != nil {
		_ = s.Destroy()
		_ = ctrl.Free()
		return nil, err
	}
	go d.watchLost()
	return d, nil
}

// Context is the CUDA context the device runs on.
func (d *Device) Context() *cuda.Context { return d.ctx }

// Stream is the stream launches go to unless the caller passes another.
func (d *Device) Stream() *cuda.Stream { return d.stream }

// watchLost raises the kernel's abort flag when the bootstrap reports a
// lost peer, so that a launch waiting on it ends instead of spinning.
func (d *Device) watchLost() {
	select {
	case <-d.comm.Lost():
		d.Abort()
	case <-d.stop:
	}
}

// Abort makes every running and future launch of this device stop at its
// next wait.
func (d *Device) Abort() {
	*(*uint32)(unsafe.Add(d.ctrl.Ptr(), 64)) = 1
}

func (d *Device) statusWord() *uint32 { return (*uint32)(d.ctrl.Ptr()) }

// Close releases every connection buffer, mapping and the stream, and
// stops the proxy (its net connections say goodbye to their peers).
func (d *Device) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	close(d.stop)
	var errs []error
	errs = append(errs, d.stream.Synchronize())
	for _, p := range d.opened {
		errs = append(errs, d.ctx.IpcCloseMemHandle(p))
	}
	for _, p := range d.allocs {
		errs = append(errs, d.ctx.MemFree(p))
	}
	for _, r := range d.shm {
		errs = append(errs, r.release())
	}
	errs = append(errs, d.closeNet())
	errs = append(errs, d.stream.Destroy(), d.ctrl.Free())
	d.opened, d.allocs, d.ends, d.shm = nil, nil, nil, nil
	return errors.Join(errs...)
}

// regionLayout places, in the region rank owner allocates for its new
// connections with one peer, each key's control block and the slot rings
// the owner holds: LL, LL128 and the write-mode Simple ring for keys it
// receives on, the read-mode Simple ring for keys it sends on. ring[k][i]
// is -1 for a ring the owner does not hold. Both ranks compute it from the
// same key list.
type regionLayout struct {
	ctrl map[transport.Key]int64
	ring map[transport.Key][kernels.ConnRings]int64
	size int64
}

// ringBytes is the size of ring i of a connection.
func ringBytes(i int) int64 {
	if i == readRing {
		return protoRing[model.ProtoSimple]
	}
	return protoRing[i]
}

// readRing is the index of the read-mode Simple ring in TwConn.buf.
const readRing = 3

func layoutFor(owner int, keys []transport.Key) regionLayout {
	l := regionLayout{ctrl: map[transport.Key]int64{}, ring: map[transport.Key][kernels.ConnRings]int64{}}
	off := int64(0)
	for _, k := range keys {
		l.ctrl[k] = off
		off += ctrlBytes
	}
	off = alignUp(off, ringAlign)
	for _, k := range keys {
		var r [kernels.ConnRings]int64
		for i := range r {
			r[i] = -1
			if ringHolder(k, i) == owner {
				r[i] = off
				off += alignUp(ringBytes(i), ringAlign)
			}
		}
		l.ring[k] = r
	}
	l.size = max(off, ctrlBytes)
	return l
}

// ringHolder is the rank whose memory holds ring i of k.
func ringHolder(k transport.Key, i int) int {
	if i == readRing {
		return k.From
	}
	return k.To
}

// SimpleRead reports whether a Program of collective c moves its Simple
// steps in P2P read mode (the receiver reads the sender's ring) rather
// than write mode. Measured on 2 H200 over NVLink, read mode is faster
// where a rank only sends or only receives on a connection (Broadcast,
// Reduce: 339 against 293 GB/s at 512 MiB) and slower where every rank
// alternates sending and receiving in one block (AllGather 203 against
// 236). TWINCCL_P2P_READ=1 or 0 forces one mode (like NCCL_P2P_READ_ENABLE).
func SimpleRead(c model.Collective) bool {
	switch os.Getenv("TWINCCL_P2P_READ") {
	case "1":
		return true
	case "0":
		return false
	}
	return c == model.CollBroadcast || c == model.CollReduce
}

// exchange is what a rank tells a peer about the region it made for their
// new connections: its process, the region's address (usable directly in
// the same process) and an IPC handle.
type exchange struct {
	pid  uint64
	ptr  uint64
	ipc  cuda.IpcMemHandle
	nkey uint32
}

const exchangeSize = 8 + 8 + 64 + 4

func (x exchange) marshal() []byte {
	b := make([]byte, 0, exchangeSize)
	b = le.AppendUint64(b, x.pid)
	b = le.AppendUint64(b, x.ptr)
	b = append(b, x.ipc[:]...)
	b = le.AppendUint32(b, x.nkey)
	return b
}

func unmarshalExchange(b []byte) (exchange, error) {
	var x exchange
	if len(b) != exchangeSize {
		return x, fmt.Errorf("connection info of %d bytes, want %d", len(b), exchangeSize)
	}
	x.pid = le.Uint64(b)
	x.ptr = le.Uint64(b[8:])
	copy(x.ipc[:], b[16:80])
	x.nkey = le.Uint32(b[80:])
	return x, nil
}

const gpuTag = 2 << 30

// cString is b up to its first zero byte.
func cString(b []byte) string {
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return string(b)
}

// connect sets up every connection end of keys that this rank holds and
// has not set up yet. Every rank calls it with the same keys in the same
// order (the Program's), so both ends of a connection agree on the batch.
func (d *Device) connect(keys []transport.Key, used []bool) error {
	me := d.comm.Rank()
	byPeer := map[int][]transport.Key{}
	var peers []int
	for i, k := range keys {
		if !used[i] || (k.From != me && k.To != me) {
			continue
		}
		if _, ok := d.ends[endKey{k, k.From == me}]; ok {
			continue
		}
		peer := k.To
		if peer == me {
			peer = k.From
		}
		if _, ok := byPeer[peer]; !ok {
			peers = append(peers, peer)
		}
		byPeer[peer] = append(byPeer[peer], k)
	}
	for _, peer := range peers {
		if err := d.connectPeer(peer, byPeer[peer]); err != nil {
			return err
		}
	}
	return nil
}

func (d *Device) connectPeer(peer int, keys []transport.Key) error {
	me := d.comm.Rank()
	link := d.Link(me, peer)
	if link == LinkNet {
		return d.connectNet(peer, keys)
	}
	mine := layoutFor(me, keys)
	shm := link == LinkSHM
	seq := d.batches[peer]
	d.batches[peer]++
	tag := uint32(gpuTag | seq&0xfffffff)
	var region cuda.DevicePtr
	var own *shmRegion
	if shm {
		var err error
		if own, err = d.shmCreate(mine.size, peer, seq); err != nil {
			return fmt.Errorf("gpudev rank %d: connection memory for rank %d: %w", me, peer, err)
		}
		region = own.host.DevicePtr()
	} else {
		var err error
		if region, err = d.ctx.MemAlloc(uint64(mine.size)); err != nil {
			return fmt.Errorf("gpudev rank %d: connection memory for rank %d (%d bytes): %w", me, peer, mine.size, err)
		}
		d.allocs = append(d.allocs, region)
		if err := d.ctx.MemsetD8(region, 0, uint64(mine.size)); err != nil {
			return fmt.Errorf("gpudev rank %d: clear connection memory: %w", me, err)
		}
	}
	peerRegion := region
	theirs := mine
	if peer != me {
		theirs = layoutFor(peer, keys)
		x := exchange{pid: uint64(os.Getpid()), ptr: uint64(region), nkey: uint32(len(keys))}
		if shm {
			copy(x.ipc[:], own.name())
		} else {
			var err error
			if x.ipc, err = d.ctx.IpcGetMemHandle(region); err != nil {
				return fmt.Errorf("gpudev rank %d: IPC handle for rank %d: %w", me, peer, err)
			}
		}
		if err := d.comm.Send(peer, tag, x.marshal()); err != nil {
			return fmt.Errorf("gpudev rank %d: send connection info to rank %d: %w", me, peer, err)
		}
		b, err := d.comm.Recv(peer, tag)
		if err != nil {
			return fmt.Errorf("gpudev rank %d: connection info from rank %d: %w", me, peer, err)
		}
		px, err := unmarshalExchange(b)
		if err != nil {
			return fmt.Errorf("gpudev rank %d: rank %d: %w", me, peer, err)
		}
		if px.nkey != uint32(len(keys)) {
			return fmt.Errorf("gpudev rank %d: rank %d set up %d connections where this rank set up %d (different Programs?)", me, peer, px.nkey, len(keys))
		}
		switch {
		case shm:
			pr, err := d.shmOpen(cString(px.ipc[:]), theirs.size)
			if err != nil {
				return fmt.Errorf("gpudev rank %d: memory of rank %d: %w", me, peer, err)
			}
			peerRegion = pr.host.DevicePtr()
			// Both mapped: the files can go.
			if err := d.comm.Send(peer, tag|1<<28, nil); err != nil {
				return fmt.Errorf("gpudev rank %d: acknowledge rank %d: %w", me, peer, err)
			}
			if _, err := d.comm.Recv(peer, tag|1<<28); err != nil {
				return fmt.Errorf("gpudev rank %d: acknowledgement of rank %d: %w", me, peer, err)
			}
			own.unlink()
		case px.pid == uint64(os.Getpid()):
			peerRegion = cuda.DevicePtr(px.ptr)
		default:
			if peerRegion, err = d.ctx.IpcOpenMemHandle(px.ipc); err != nil {
				return fmt.Errorf("gpudev rank %d: open the memory of rank %d: %w", me, peer, err)
			}
			d.opened = append(d.opened, peerRegion)
		}
	}
	// TwConn structs for this rank's ends.
	type end struct {
		k    transport.Key
		send bool
	}
	var ends []end
	for _, k := range keys {
		if k.To == me {
			ends = append(ends, end{k, false})
		}
		if k.From == me {
			ends = append(ends, end{k, true})
		}
	}
	arr, err := d.ctx.MemAlloc(uint64(len(ends) * kernels.ConnSize))
	if err != nil {
		return fmt.Errorf("gpudev rank %d: connection state: %w", me, err)
	}
	d.allocs = append(d.allocs, arr)
	buf := make([]byte, 0, len(ends)*kernels.ConnSize)
	for i, e := range ends {
		var tail, head uint64
		if e.send { // tail is the receiver's, head is ours
			tail = uint64(peerRegion) + uint64(theirs.ctrl[e.k]) + tailOff
			head = uint64(region) + uint64(mine.ctrl[e.k]) + headOff
		} else {
			tail = uint64(region) + uint64(mine.ctrl[e.k]) + tailOff
			head = uint64(peerRegion) + uint64(theirs.ctrl[e.k]) + headOff
		}
		for i := 0; i < kernels.ConnRings; i++ {
			base, lay := region, mine
			if ringHolder(e.k, i) != me {
				base, lay = peerRegion, theirs
			}
			buf = le.AppendUint64(buf, uint64(base)+uint64(lay.ring[e.k][i]))
		}
		buf = le.AppendUint64(buf, tail)
		buf = le.AppendUint64(buf, head)
		buf = le.AppendUint64(buf, 0) // step
		buf = le.AppendUint64(buf, 0) // fifo: no proxy in the path
		d.ends[endKey{e.k, e.send}] = arr.Add(uint64(i * kernels.ConnSize))
	}
	if err := d.ctx.MemcpyHtoD(arr, buf); err != nil {
		return fmt.Errorf("gpudev rank %d: write connection state: %w", me, err)
	}
	return nil
}
