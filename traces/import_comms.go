package traces

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
)

// MetaComms is the metadata key of a call trace's communicators (a JSON
// array of CommInfo): which process (global rank) holds each rank of each
// communicator. A trace without it has communicators over all ranks, each
// rank its own global rank.
const MetaComms = "twinccl.comms"

// CommInfo is one communicator of a job.
type CommInfo struct {
	ID uint64 // CallRow.Comm
	// Name is the communicator's name where the format has one: the
	// PyTorch process group name, Chakra's pg_name.
	Name string
	// Ranks[r] is the global rank of the communicator's rank r.
	Ranks []int32
}

type commJSON struct {
	ID    string  `json:"comm"`
	Name  string  `json:"name,omitempty"`
	Ranks []int32 `json:"ranks"`
}

// EncodeComms writes comms as MetaComms holds them, sorted by id.
func EncodeComms(comms []CommInfo) (string, error) {
	out := make([]commJSON, len(comms))
	for i, c := range comms {
		out[i] = commJSON{ID: fmt.Sprintf("%#x", c.ID), Name: c.Name, Ranks: c.Ranks}
	}
	slices.SortFunc(out, func(a, b commJSON) int { return cmp.Compare(mustHex(a.ID), mustHex(b.ID)) })
	b, err := json.Marshal(out)
	return string(b), err
}

func mustHex(s string) uint64 {
	v, _ := strconv.ParseUint(s, 0, 64)
	return v
}

// DecodeComms reads MetaComms and checks it: ids distinct, each
// communicator's global ranks distinct and not negative.
func DecodeComms(s string) ([]CommInfo, error) {
	var in []commJSON
	if err := json.Unmarshal([]byte(s), &in); err != nil {
		return nil, fmt.Errorf("%s: %w", MetaComms, err)
	}
	out := make([]CommInfo, len(in))
	seen := map[uint64]bool{}
	for i, c := range in {
		id, err := strconv.ParseUint(c.ID, 0, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: communicator %d: id %q is not a number", MetaComms, i, c.ID)
		}
		if seen[id] {
			return nil, fmt.Errorf("%s: communicator %#x listed twice", MetaComms, id)
		}
		seen[id] = true
		if err := checkCommRanks(c.Ranks); err != nil {
			return nil, fmt.Errorf("%s: communicator %#x: %w", MetaComms, id, err)
		}
		out[i] = CommInfo{ID: id, Name: c.Name, Ranks: c.Ranks}
	}
	return out, nil
}

func checkCommRanks(ranks []int32) error {
	if len(ranks) == 0 {
		return fmt.Errorf("no ranks")
	}
	seen := map[int32]int{}
	for r, g := range ranks {
		if g < 0 {
			return fmt.Errorf("rank %d: global rank %d", r, g)
		}
		if o, dup := seen[g]; dup {
			return fmt.Errorf("ranks %d and %d are both global rank %d", o, r, g)
		}
		seen[g] = r
	}
	return nil
}

// CommID is the communicator id importers give a communicator known by
// name only (a process group): FNV-1a of the kind of name and the name,
// so that the same job imported from Kineto and from Chakra gets the same
// ids.
func CommID(kind, name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	h.Write([]byte{0})
	h.Write([]byte(name))
	return h.Sum64()
}

// commIDOf derives a communicator id from numbers (a split's parent id,
// split count and color).
func commIDOf(kind string, vals ...uint64) uint64 {
	h := fnv.New64a()
	h.Write([]byte(kind))
	var b [8]byte
	for _, v := range vals {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	return h.Sum64()
}
