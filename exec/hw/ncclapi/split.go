package ncclapi

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"
)

// NoColor is NCCL_SPLIT_NOCOLOR: the rank joins no new communicator.
const NoColor = -1

// Split is ncclCommSplit: every rank of c calls it; ranks of one color
// form a communicator, ordered by key, then by their rank in c. The
// lowest rank of each color makes the new job's id and hands it to the
// others through c's bootstrap. A rank with NoColor gets nil.
func (c *Comm) Split(color, key int, cfg Config) (*Comm, error) {
	if color < NoColor {
		return nil, errorf(InvalidArgument, "%s: split color %d: want a non-negative color or NCCL_SPLIT_NOCOLOR", c, color)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, errorf(InvalidUsage, "%s: communicator destroyed", c)
	}
	c.mu.Unlock()
	if c.NRanks == 1 {
		if color == NoColor {
			return nil, nil
		}
		return InitRank(UniqueID{Addr: "127.0.0.1:0"}, 1, 0, c.Dev, cfg)
	}
	msg := binary.LittleEndian.AppendUint64(nil, uint64(int64(color)))
	msg = binary.LittleEndian.AppendUint64(msg, uint64(int64(key)))
	all, err := c.boot.AllGather(msg)
	if err != nil {
		return nil, fmt.Errorf("%s: split: gather colors: %w", c, err)
	}
	type member struct{ color, key, rank int }
	var group []member
	for r, b := range all {
		if len(b) != 16 {
			return nil, errorf(InternalError, "%s: split: rank %d sent %d bytes", c, r, len(b))
		}
		m := member{int(int64(binary.LittleEndian.Uint64(b))), int(int64(binary.LittleEndian.Uint64(b[8:]))), r}
		if m.color == color && color != NoColor {
			group = append(group, m)
		}
	}
	slices.SortStableFunc(group, func(a, b member) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.rank, b.rank))
	})
	newRank := slices.IndexFunc(group, func(m member) bool { return m.rank == c.Rank })
	// Second round: each group's first rank hands out its new id.
	var idMsg []byte
	var id UniqueID
	if newRank == 0 && len(group) > 1 {
		if id, err = GetUniqueID(); err != nil {
			c.boot.AllGather(nil)
			return nil, err
		}
		b, err := id.Encode()
		if err != nil {
			c.boot.AllGather(nil)
			return nil, err
		}
		idMsg = b[:]
	}
	ids, err := c.boot.AllGather(idMsg)
	if err != nil {
		return nil, fmt.Errorf("%s: split: gather ids: %w", c, err)
	}
	if color == NoColor {
		return nil, nil
	}
	if len(group) == 1 {
		return InitRank(UniqueID{Addr: "127.0.0.1:0"}, 1, 0, c.Dev, cfg)
	}
	if id, err = DecodeUniqueID(ids[group[0].rank]); err != nil {
		return nil, fmt.Errorf("%s: split: id from rank %d: %w", c, group[0].rank, err)
	}
	return InitRank(id, len(group), newRank, c.Dev, cfg)
}
