package profiler

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
)

// JobComm is one communicator of a job: Ranks[r] is the global rank of the
// process that held its rank r (the form of the call trace's job-level
// communicator list, traces.CommInfo).
type JobComm struct {
	Comm  uint64
	Name  string
	Ranks []int32
}

// JobComms gathers the communicators of a job from the metadata of its
// processes' call traces (MetaComms of each part, in the order of names,
// which name the parts in errors): every rank of every communicator must
// be held by exactly one process, and every process must know its global
// rank. A merged trace keeps only its first part's metadata, so this is
// what a merge adds to give the job's communicators.
func JobComms(names []string, metas []map[string]string) ([]JobComm, error) {
	if len(names) != len(metas) {
		return nil, fmt.Errorf("%d part names for %d parts", len(names), len(metas))
	}
	byComm := map[uint64]*JobComm{}
	for i, md := range metas {
		raw, ok := md[MetaComms]
		if !ok {
			return nil, fmt.Errorf("%s: no %s metadata: not written by the profiler plugin", names[i], MetaComms)
		}
		var comms []CommMeta
		if err := json.Unmarshal([]byte(raw), &comms); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", names[i], MetaComms, err)
		}
		for _, c := range comms {
			id, err := strconv.ParseUint(c.Comm, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: communicator %q is not a number", names[i], MetaComms, c.Comm)
			}
			if c.GlobalRank < 0 {
				return nil, fmt.Errorf("%s: communicator %#x: the process's global rank is not known (its launcher set none of RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK, SLURM_PROCID)", names[i], id)
			}
			if c.NRanks <= 0 || c.Rank < 0 || c.Rank >= c.NRanks {
				return nil, fmt.Errorf("%s: communicator %#x: rank %d of %d", names[i], id, c.Rank, c.NRanks)
			}
			jc := byComm[id]
			if jc == nil {
				jc = &JobComm{Comm: id, Name: c.Name, Ranks: slices.Repeat([]int32{-1}, int(c.NRanks))}
				byComm[id] = jc
			}
			if len(jc.Ranks) != int(c.NRanks) {
				return nil, fmt.Errorf("%s: communicator %#x has %d ranks, another part says %d", names[i], id, c.NRanks, len(jc.Ranks))
			}
			if g := jc.Ranks[c.Rank]; g >= 0 && g != c.GlobalRank {
				return nil, fmt.Errorf("%s: communicator %#x rank %d is held by global ranks %d and %d", names[i], id, c.Rank, g, c.GlobalRank)
			}
			jc.Ranks[c.Rank] = c.GlobalRank
			if jc.Name == "" {
				jc.Name = c.Name
			}
		}
	}
	out := make([]JobComm, 0, len(byComm))
	for _, jc := range byComm {
		for r, g := range jc.Ranks {
			if g < 0 {
				return nil, fmt.Errorf("communicator %#x: no part holds its rank %d (of %d): a process's trace is missing", jc.Comm, r, len(jc.Ranks))
			}
		}
		out = append(out, *jc)
	}
	slices.SortFunc(out, func(a, b JobComm) int { return cmp.Compare(a.Comm, b.Comm) })
	return out, nil
}
