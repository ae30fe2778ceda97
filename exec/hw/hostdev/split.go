package hostdev

import (
	"encoding/binary"
	"fmt"

	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
)

// maxComms bounds the communicators of one job: a communicator's
// connections are those of its Programs with their channels shifted by
// its index times model.MaxChannels (so that communicators over the same
// ranks never share a connection, as NCCL's do not), and connection keys
// carry 20 bits of channel.
const maxComms = 1<<20/model.MaxChannels - 1

// commView is a communicator over a subset of the job's ranks, as one of
// its ranks sees it.
type commView struct {
	rank     int   // this rank's rank in the communicator
	members  []int // job ranks, by rank in the communicator
	chanBase int   // index times model.MaxChannels
}

// Communicator is one communicator of a job on one of its ranks: what
// ncclCommSplit returns there. Its Device runs the communicator's
// Programs (their ranks are the communicator's) over the job's
// transports; each Communicator has a Device of its own, so that the
// communicators of a rank run at the same time (streams).
type Communicator struct {
	// Rank is this rank's rank in the communicator, Members the job ranks
	// of its ranks.
	Rank    int
	Members []int
	// Index numbers the job's communicators (the job itself is 0) in the
	// order the ranks split them; Hash identifies the communicator in
	// traces, the same on every member.
	Index  int
	Hash   uint64
	Device *Device
}

// SplitComm is one communicator split from a job, as every rank knows it
// (its members need not include the rank).
type SplitComm struct {
	Index   int
	Hash    uint64
	Members []int // job ranks, by rank in the communicator
}

// Communicators lists every communicator split from the job so far, on
// every rank the same, in the order they were made (each split's by
// color).
func (r *Rank) Communicators() []SplitComm { return r.split }

// NRanks is the number of ranks of the communicator.
func (c *Communicator) NRanks() int { return len(c.Members) }

// Split is ncclCommSplit on this rank: every rank of the job calls it,
// in the same order, with its color and key; the ranks of a color form a
// communicator, ranked by key then job rank (model.SplitComms). A rank
// passing model.SplitNoColor gets nil.
func (r *Rank) Split(color, key int) (*Communicator, error) {
	me := r.Comm.Rank()
	msg := binary.LittleEndian.AppendUint64(nil, uint64(int64(color)))
	msg = binary.LittleEndian.AppendUint64(msg, uint64(int64(key)))
	all, err := r.Comm.AllGather(msg)
	if err != nil {
		return nil, fmt.Errorf("hostdev rank %d: split: %w", me, err)
	}
	colors, keys := make([]int, len(all)), make([]int, len(all))
	for i, b := range all {
		if len(b) != 16 {
			return nil, fmt.Errorf("hostdev rank %d: split: rank %d sent %d bytes, want 16", me, i, len(b))
		}
		colors[i] = int(int64(binary.LittleEndian.Uint64(b)))
		keys[i] = int(int64(binary.LittleEndian.Uint64(b[8:])))
	}
	comms, err := model.SplitComms(colors, keys)
	if err != nil {
		return nil, fmt.Errorf("hostdev rank %d: %w", me, err)
	}
	first := r.comms + 1
	if r.comms+len(comms) > maxComms {
		return nil, fmt.Errorf("hostdev rank %d: split: %d communicators, at most %d per job", me, r.comms+len(comms), maxComms)
	}
	r.comms += len(comms)
	for i, members := range comms {
		r.split = append(r.split, SplitComm{Index: first + i, Hash: commHash(r.Comm.Magic(), first+i), Members: members})
	}
	for i, members := range comms {
		for cr, g := range members {
			if g != me {
				continue
			}
			idx := first + i
			dev := New(r.Comm, r.Set)
			dev.Workers = r.Device.Workers
			dev.view = &commView{rank: cr, members: members, chanBase: idx * model.MaxChannels}
			return &Communicator{Rank: cr, Members: members, Index: idx, Hash: commHash(r.Comm.Magic(), idx), Device: dev}, nil
		}
	}
	return nil, nil
}

// Connect sets up the connections of p on this rank (Device.Run does it
// too, on first use). Ranks that run several communicators at once set
// each one's connections up first, one communicator after the other in
// the same order on every rank: a rank connects with its peers in turn,
// and two communicators connecting at once on two ranks could each wait
// for the other.
func (c *Communicator) Connect(p *model.Program) error {
	if p.NRanks != len(c.Members) {
		return fmt.Errorf("hostdev rank %d: program for %d ranks in a communicator of %d", c.Rank, p.NRanks, len(c.Members))
	}
	_, err := c.Device.set.Connect(c.Device.keys(p))
	return err
}

// keys names p's connections on the job's transports: the communicator's
// ranks become job ranks and its channels move to its own range.
func (d *Device) keys(p *model.Program) []transport.Key {
	keys := transport.ProgramKeys(p)
	if v := d.view; v != nil {
		for i := range keys {
			k := &keys[i]
			k.From, k.To, k.Channel = v.members[k.From], v.members[k.To], v.chanBase+k.Channel
		}
	}
	return keys
}

// commHash derives a communicator's hash from the job's magic and its
// index (splitmix64), the same on every rank.
func commHash(magic uint64, index int) uint64 {
	z := magic + uint64(index)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
