// Package commsmeta reads and writes a call trace's communicators: which
// global rank (process) holds each rank of each communicator, in the
// trace's metadata under "twinccl.comms", a JSON array of
// {"comm": "0x..", "name": "...", "ranks": [global rank of rank 0, ...]}
// sorted by communicator id. The trace importers define the same key and
// format in package traces (MetaComms, EncodeComms, DecodeComms); this
// package stands in for them where those are not yet available and goes
// once they are.
package commsmeta

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// Key is the metadata key.
const Key = "twinccl.comms"

// Comm is one communicator: its id (the call rows' comm) and the global
// rank of each of its ranks.
type Comm struct {
	ID    uint64
	Name  string
	Ranks []int32
}

type commJSON struct {
	ID    string  `json:"comm"`
	Name  string  `json:"name,omitempty"`
	Ranks []int32 `json:"ranks"`
}

// Encode writes comms as the metadata holds them, sorted by id.
func Encode(comms []Comm) (string, error) {
	sorted := slices.Clone(comms)
	slices.SortFunc(sorted, func(a, b Comm) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]commJSON, len(sorted))
	for i, c := range sorted {
		out[i] = commJSON{ID: fmt.Sprintf("%#x", c.ID), Name: c.Name, Ranks: c.Ranks}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// Decode reads the metadata value and checks it: ids distinct, each
// communicator's global ranks distinct and not negative.
func Decode(s string) ([]Comm, error) {
	var in []commJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("%s: %w", Key, err)
	}
	out := make([]Comm, len(in))
	seen := map[uint64]bool{}
	for i, c := range in {
		id, err := strconv.ParseUint(c.ID, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: communicator %d: id %q is not a number", Key, i, c.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: communicator %#x listed twice", Key, id)
		}
		seen[id] = true
		if len(c.Ranks) == 0 {
			return nil, fmt.Errorf("%s: communicator %#x: no ranks", Key, id)
		}
		ranks := map[int32]int{}
		for r, g := range c.Ranks {
			if g < 0 {
				return nil, fmt.Errorf("%s: communicator %#x: rank %d: global rank %d", Key, id, r, g)
			}
			if o, dup := ranks[g]; dup {
				return nil, fmt.Errorf("%s: communicator %#x: ranks %d and %d are both global rank %d", Key, id, o, r, g)
			}
			ranks[g] = r
		}
		out[i] = Comm{ID: id, Name: c.Name, Ranks: c.Ranks}
	}
	return out, nil
}
