package traces

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
)

// MetaImport is the metadata key naming the format a call trace was
// imported from ("chakra", "kineto", "nccl-log").
const MetaImport = "twinccl.import.format"

// Job is a job imported from another tool's trace: one call row per call
// and rank, and the communicators the rows name.
type Job struct {
	Format string // "chakra", "kineto", "nccl-log"
	Calls  []CallRow
	Comms  []CommInfo
}

// NRanks is the number of processes (global ranks) of the job: the
// highest global rank plus one.
func (j *Job) NRanks() int {
	n := 0
	for _, c := range j.Comms {
		for _, g := range c.Ranks {
			n = max(n, int(g)+1)
		}
	}
	return n
}

// Check verifies that every row names a listed communicator with its size
// and a rank inside it, that no call appears twice on a rank, and that
// the dependencies parse and name calls of the same process.
func (j *Job) Check() error {
	comms := map[uint64]*CommInfo{}
	for i := range j.Comms {
		c := &j.Comms[i]
		if _, dup := comms[c.ID]; dup {
			return fmt.Errorf("communicator %#x listed twice", c.ID)
		}
		if err := checkCommRanks(c.Ranks); err != nil {
			return fmt.Errorf("communicator %#x (%s): %w", c.ID, c.Name, err)
		}
		comms[c.ID] = c
	}
	type key struct {
		comm       uint64
		call       int64
		globalRank int32
	}
	seen := make(map[key]bool, len(j.Calls))
	for _, r := range j.Calls {
		c, ok := comms[r.Comm]
		switch {
		case !ok:
			return fmt.Errorf("call %d names communicator %#x, which the job does not list", r.Call, r.Comm)
		case int(r.NRanks) != len(c.Ranks):
			return fmt.Errorf("communicator %#x call %d: %d ranks, but the communicator has %d", r.Comm, r.Call, r.NRanks, len(c.Ranks))
		case r.Rank < 0 || int(r.Rank) >= len(c.Ranks):
			return fmt.Errorf("communicator %#x call %d: rank %d outside the communicator's %d", r.Comm, r.Call, r.Rank, len(c.Ranks))
		}
		g := c.Ranks[r.Rank]
		k := key{r.Comm, r.Call, g}
		if seen[k] {
			return fmt.Errorf("communicator %#x call %d appears twice on rank %d", r.Comm, r.Call, r.Rank)
		}
		seen[k] = true
	}
	for _, r := range j.Calls {
		deps, err := ParseDeps(r.Deps)
		if err != nil {
			return fmt.Errorf("communicator %#x call %d rank %d: %w", r.Comm, r.Call, r.Rank, err)
		}
		g := comms[r.Comm].Ranks[r.Rank]
		for _, d := range deps {
			if !seen[key{d.Comm, d.Call, g}] {
				return fmt.Errorf("communicator %#x call %d rank %d depends on communicator %#x call %d, which global rank %d does not make",
					r.Comm, r.Call, r.Rank, d.Comm, d.Call, g)
			}
		}
	}
	return nil
}

// Sort orders the rows by communicator, call and rank and the
// communicators by id: the written file does not depend on the order the
// inputs were given or read in.
func (j *Job) Sort() {
	slices.SortStableFunc(j.Calls, func(a, b CallRow) int {
		return cmp.Or(cmp.Compare(a.Comm, b.Comm), cmp.Compare(a.Call, b.Call), cmp.Compare(a.Rank, b.Rank))
	})
	slices.SortFunc(j.Comms, func(a, b CommInfo) int { return cmp.Compare(a.ID, b.ID) })
}

// Write checks the job and writes it as a call trace, its communicators
// in MetaComms and its format in MetaImport, after opt.Metadata.
func (j *Job) Write(w io.Writer, opt WriterOptions) error {
	if err := j.Check(); err != nil {
		return err
	}
	if len(j.Calls) == 0 {
		return fmt.Errorf("no calls to write")
	}
	j.Sort()
	comms, err := EncodeComms(j.Comms)
	if err != nil {
		return err
	}
	meta := maps.Clone(opt.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[MetaComms] = comms
	meta[MetaImport] = j.Format
	opt.Metadata = meta
	cw, err := NewCallWriter(w, opt)
	if err != nil {
		return err
	}
	for i := 0; i < len(j.Calls); i += 4096 {
		if err := cw.Append(j.Calls[i:min(i+4096, len(j.Calls))]...); err != nil {
			cw.Close()
			return err
		}
	}
	return cw.Close()
}
