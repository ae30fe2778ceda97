// Package gpudev is the CUDA device of the hardware runtime: it runs one
// rank's lanes of a model.Program on a GPU with the interpreter kernel of
// package kernels (compiled with NVRTC at first use), over connection
// buffers in GPU memory. A receiver owns each connection's slot rings and
// its tail counter; the sender owns the head counter; each side maps the
// other's memory through CUDA IPC (ranks in other processes) or peer
// access (ranks of this process), so that senders write straight into the
// receiver's slots over NVLink or PCIe, as NCCL's P2P transport does in
// write mode.
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

// ringBytes is the slot memory of one receiving end.
func ringBytes() int64 {
	n := int64(0)
	for _, b := range protoRing {
		n += alignUp(b, ringAlign)
	}
	return n
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
	batches map[int]uint32            // exchanges with each peer so far
	ctrl    *cuda.HostMem             // status word at 0, abort flag at 64
	stop    chan struct{}
	closed  bool
}

type endKey struct {
	key  connKey
	send bool
}

// New opens the device of comm's rank on ctx, with its own stream. Ranks
// of one process may share a context (one GPU) or use different ones.
func New(comm *bootstrap.Comm, ctx *cuda.Context) (*Device, error) {
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
		batches: map[int]uint32{}, ctrl: ctrl, stop: make(chan struct{})}
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

// Close releases every connection buffer, mapping and the stream.
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
	errs = append(errs, d.stream.Destroy(), d.ctrl.Free())
	d.opened, d.allocs, d.ends = nil, nil, nil
	return errors.Join(errs...)
}

// connKey names a connection: the Index-th one from rank From to rank To
// on Channel.
type connKey struct{ Channel, From, To, Index int }

// connKeys names p's connections: the k-th connection from a to b on
// channel c is Key{c, a, b, k} (hostdev numbers them the same way).
func connKeys(p *model.Program) []connKey {
	seen := map[[3]int32]int{}
	keys := make([]connKey, len(p.Conns))
	for i, c := range p.Conns {
		t := [3]int32{c.Channel, c.From, c.To}
		keys[i] = connKey{Channel: int(c.Channel), From: int(c.From), To: int(c.To), Index: seen[t]}
		seen[t]++
	}
	return keys
}

// regionLayout places, in the region rank owner allocates for its new
// connections with one peer, each key's control block and (for keys it
// receives on) slot rings. Both ranks compute it from the same key list.
type regionLayout struct {
	ctrl, ring map[connKey]int64
	size       int64
}

func layoutFor(owner int, keys []connKey) regionLayout {
	l := regionLayout{ctrl: map[connKey]int64{}, ring: map[connKey]int64{}}
	off := int64(0)
	for _, k := range keys {
		l.ctrl[k] = off
		off += ctrlBytes
	}
	off = alignUp(off, ringAlign)
	for _, k := range keys {
		if k.To == owner {
			l.ring[k] = off
			off += ringBytes()
		}
	}
	l.size = max(off, ctrlBytes)
	return l
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

// connect sets up every connection end of keys that this rank holds and
// has not set up yet. Every rank calls it with the same keys in the same
// order (the Program's), so both ends of a connection agree on the batch.
func (d *Device) connect(keys []connKey, used []bool) error {
	me := d.comm.Rank()
	byPeer := map[int][]connKey{}
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

func (d *Device) connectPeer(peer int, keys []connKey) error {
	me := d.comm.Rank()
	mine := layoutFor(me, keys)
	region, err := d.ctx.MemAlloc(uint64(mine.size))
	if err != nil {
		return fmt.Errorf("gpudev rank %d: connection memory for rank %d (%d bytes): %w", me, peer, mine.size, err)
	}
	d.allocs = append(d.allocs, region)
	if err := d.ctx.MemsetD8(region, 0, uint64(mine.size)); err != nil {
		return fmt.Errorf("gpudev rank %d: clear connection memory: %w", me, err)
	}
	peerRegion := region
	theirs := mine
	if peer != me {
		theirs = layoutFor(peer, keys)
		x := exchange{pid: uint64(os.Getpid()), ptr: uint64(region), nkey: uint32(len(keys))}
		if x.ipc, err = d.ctx.IpcGetMemHandle(region); err != nil {
			return fmt.Errorf("gpudev rank %d: IPC handle for rank %d: %w", me, peer, err)
		}
		tag := uint32(gpuTag | d.batches[peer]&0xfffffff)
		d.batches[peer]++
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
		if px.pid == uint64(os.Getpid()) {
			peerRegion = cuda.DevicePtr(px.ptr)
		} else {
			if peerRegion, err = d.ctx.IpcOpenMemHandle(px.ipc); err != nil {
				return fmt.Errorf("gpudev rank %d: open the memory of rank %d: %w", me, peer, err)
			}
			d.opened = append(d.opened, peerRegion)
		}
	}
	// TwConn structs for this rank's ends.
	type end struct {
		k    connKey
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
		var rings, tail, head uint64
		if e.send { // rings and tail are the receiver's, head is ours
			rings = uint64(peerRegion) + uint64(theirs.ring[e.k])
			tail = uint64(peerRegion) + uint64(theirs.ctrl[e.k]) + tailOff
			head = uint64(region) + uint64(mine.ctrl[e.k]) + headOff
		} else {
			rings = uint64(region) + uint64(mine.ring[e.k])
			tail = uint64(region) + uint64(mine.ctrl[e.k]) + tailOff
			head = uint64(peerRegion) + uint64(theirs.ctrl[e.k]) + headOff
		}
		off := uint64(0)
		for p := range model.NumProtocols {
			buf = le.AppendUint64(buf, rings+off)
			off += uint64(alignUp(protoRing[p], ringAlign))
		}
		buf = le.AppendUint64(buf, tail)
		buf = le.AppendUint64(buf, head)
		buf = le.AppendUint64(buf, 0) // step
		d.ends[endKey{e.k, e.send}] = arr.Add(uint64(i * kernels.ConnSize))
	}
	if err := d.ctx.MemcpyHtoD(arr, buf); err != nil {
		return fmt.Errorf("gpudev rank %d: write connection state: %w", me, err)
	}
	return nil
}
