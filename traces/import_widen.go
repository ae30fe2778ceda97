package traces

import (
	"fmt"
	"slices"
)

// MaxWidenRanks bounds the ranks Widen maps a job onto.
const MaxWidenRanks = 1 << 16

// Widen maps a job recorded on W ranks (W = j.NRanks()) onto n ranks, n a
// multiple of W, by the rule docs/guide/trace-import.md states: the n
// ranks are n/W tiles of W, tile t holding global ranks t*W..t*W+W-1.
//
//   - A communicator over all W ranks (data parallelism, a world
//     communicator) becomes one over all n: its rank t*W+r is tile t's
//     copy of rank r. Counts are per rank, so they stay: an AllReduce
//     reduces the same buffer over more ranks, an AllGather gathers n/W
//     times as much.
//   - A communicator over fewer ranks (tensor or pipeline parallelism, a
//     node's group) is copied into every tile, same size and ranks
//     relative to the tile; tile 0's copy keeps the recorded id.
//
// Roots, peers and dependencies stay inside their tile; times are copied.
// W must be a multiple of a node's GPUs for node-local groups to stay
// inside nodes.
func (j *Job) Widen(n int) (*Job, error) {
	w := j.NRanks()
	if w == 0 {
		return nil, fmt.Errorf("the job has no ranks")
	}
	if n < w || n%w != 0 || n > MaxWidenRanks {
		return nil, fmt.Errorf("cannot map a job of %d ranks onto %d: want a multiple of %d, at most %d", w, n, w, MaxWidenRanks)
	}
	tiles := n / w
	out := &Job{Format: j.Format}
	full := map[uint64]bool{}
	// copies[id][t] is tile t's communicator id.
	copies := map[uint64][]uint64{}
	for _, c := range j.Comms {
		if len(c.Ranks) == w {
			full[c.ID] = true
			ranks := make([]int32, 0, n)
			for t := range tiles {
				for _, g := range c.Ranks {
					ranks = append(ranks, int32(t*w)+g)
				}
			}
			out.Comms = append(out.Comms, CommInfo{ID: c.ID, Name: c.Name, Ranks: ranks})
			copies[c.ID] = slices.Repeat([]uint64{c.ID}, tiles)
			continue
		}
		ids := make([]uint64, tiles)
		for t := range tiles {
			ids[t] = c.ID
			name := c.Name
			if t > 0 {
				ids[t] = commIDOf("widen", c.ID, uint64(t))
				name = fmt.Sprintf("%s/tile%d", c.Name, t)
			}
			ranks := make([]int32, len(c.Ranks))
			for i, g := range c.Ranks {
				ranks[i] = int32(t*w) + g
			}
			out.Comms = append(out.Comms, CommInfo{ID: ids[t], Name: name, Ranks: ranks})
		}
		copies[c.ID] = ids
	}
	out.Calls = make([]CallRow, 0, len(j.Calls)*tiles)
	for t := range tiles {
		for _, r := range j.Calls {
			ids, ok := copies[r.Comm]
			if !ok {
				return nil, fmt.Errorf("call %d names communicator %#x, which the job does not list", r.Call, r.Comm)
			}
			c := r
			c.Comm = ids[t]
			if full[r.Comm] {
				c.Rank = int32(t*w) + r.Rank
				c.NRanks = int32(n)
				if r.Root >= 0 && (r.Op == "Send" || r.Op == "Recv") {
					c.Root = int32(t*w) + r.Root
				}
			}
			if r.Deps != "" {
				deps, err := ParseDeps(r.Deps)
				if err != nil {
					return nil, fmt.Errorf("communicator %#x call %d rank %d: %w", r.Comm, r.Call, r.Rank, err)
				}
				for i := range deps {
					if ids, ok := copies[deps[i].Comm]; ok {
						deps[i].Comm = ids[t]
					}
				}
				c.Deps = FormatDeps(deps)
			}
			out.Calls = append(out.Calls, c)
		}
	}
	return out, nil
}
