package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// ranksFlagHelp is the help of every --ranks flag.
const ranksFlagHelp = "one communicator of the job: its members as job ranks, in the order of their ranks in it (`LIST` of ranks and ranges, e.g. 0,2,4-7); " +
	"its hosts see only their members' GPUs, renumbered, as NCCL's init of that communicator does (default: every rank)"

// ranksHelp is the paragraph the help of topo, search, tune and sim share.
const ranksHelp = `--ranks LIST makes the topology one communicator of the job (the ranks of a
tensor-parallel group, of an ncclCommSplit color): its members are job ranks of the
file (after --nodes), listed in the order of their ranks in the communicator, which
for ncclCommSplit is by key, then by job rank. Each host keeps the GPUs of its
members (renumbered 0..n-1 in that order) and its NICs; hosts without a member
drop out; the search, wiring and tuning then run over those ranks only.
`

// ranksFlag is --ranks: a communicator's members, nil when not given.
type ranksFlag struct{ ranks []int }

func (f *ranksFlag) String() string {
	if f == nil || f.ranks == nil {
		return ""
	}
	s := make([]string, len(f.ranks))
	for i, r := range f.ranks {
		s[i] = strconv.Itoa(r)
	}
	return strings.Join(s, ",")
}

func (f *ranksFlag) Set(v string) error {
	r, err := model.ParseRanks(v)
	if err != nil {
		return fmt.Errorf("--ranks %w", err)
	}
	f.ranks = r
	return nil
}
