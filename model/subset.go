package model

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// SplitNoColor is NCCL_SPLIT_NOCOLOR: a rank that passes it to
// ncclCommSplit joins no communicator.
const SplitNoColor = -1

// SplitComms returns the communicators ncclCommSplit makes when job rank r
// passes colors[r] and keys[r]: one per color, in increasing color order,
// each listing its members' job ranks in the order of their new ranks
// (key, then old rank, as NCCL's commGetSplitInfo inserts them). Ranks
// passing SplitNoColor are in none; any other color, negative ones too,
// makes a communicator (NCCL checks no other value).
func SplitComms(colors, keys []int) ([][]int, error) {
	if len(colors) != len(keys) {
		return nil, fmt.Errorf("split: %d colors for %d keys", len(colors), len(keys))
	}
	byColor := map[int][]int{}
	var order []int
	for r, c := range colors {
		if c == SplitNoColor {
			continue
		}
		if _, ok := byColor[c]; !ok {
			order = append(order, c)
		}
		byColor[c] = append(byColor[c], r)
	}
	sort.Ints(order)
	out := make([][]int, 0, len(order))
	for _, c := range order {
		m := byColor[c]
		sort.SliceStable(m, func(i, j int) bool {
			if keys[m[i]] != keys[m[j]] {
				return keys[m[i]] < keys[m[j]]
			}
			return m[i] < m[j]
		})
		out = append(out, m)
	}
	return out, nil
}

// maxCommRanks bounds a rank list: every GPU a topology of the largest
// job holds (MaxClusterNodes hosts of at most MaxTopologyXMLNodes
// elements).
const maxCommRanks = MaxClusterNodes * MaxTopologyXMLNodes

// ParseRanks reads a communicator's members as job ranks in the order of
// their communicator ranks: a comma-separated list of ranks and
// increasing ranges ("0,2,4-7" is 0 2 4 5 6 7). A rank may not repeat.
func ParseRanks(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty rank list")
	}
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		lo, hi, isRange := strings.Cut(f, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q: %q is not a rank (a number from 0) or a range A-B", s, f)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q: %q is not an increasing range A-B", s, f)
			}
		}
		if b-a >= maxCommRanks-len(out) {
			return nil, fmt.Errorf("%q: more than %d ranks", s, maxCommRanks)
		}
		for r := a; r <= b; r++ {
			if seen[r] {
				return nil, fmt.Errorf("%q: rank %d appears twice", s, r)
			}
			seen[r] = true
			out = append(out, r)
		}
	}
	return out, nil
}

// commRanks maps the job ranks of a communicator to their ranks in it,
// after checking them against a job of n ranks.
func commRanks(file string, ranks []int, n int) (map[int]int, error) {
	if len(ranks) == 0 {
		return nil, fmt.Errorf("%s: the communicator has no rank", file)
	}
	m := make(map[int]int, len(ranks))
	for i, r := range ranks {
		if r < 0 || r >= n {
			return nil, fmt.Errorf("%s: communicator rank %d is job rank %d, outside the job's ranks 0..%d", file, i, r, n-1)
		}
		if _, dup := m[r]; dup {
			return nil, fmt.Errorf("%s: job rank %d appears twice in the communicator", file, r)
		}
		m[r] = i
	}
	return m, nil
}

// subsetXML returns a copy of one host's topology as the ranks of a
// communicator see it (ncclTopoGetSystem then ncclTopoTrimXml): every GPU
// of a member keeps its place with its communicator rank; other GPUs, and
// the PCI switches and CPUs left without a GPU or NIC below them, are gone;
// NICs stay, as NCCL's network plugin still reports them. It also returns
// how many members the host has.
func subsetXML(root *Element, newRank map[int]int) (*Element, int) {
	out := root.Clone()
	members := 0
	var keep func(e *Element) bool
	keep = func(e *Element) bool {
		if e.Name == "gpu" {
			v, ok := e.Get("rank")
			if !ok {
				return false
			}
			r, in := newRank[cStrtol(v)]
			if in {
				e.Set("rank", strconv.Itoa(r))
				members++
			}
			return in
		}
		if e.Name == "nic" || e.Name == "net" {
			return true
		}
		kids := e.Children[:0]
		for _, c := range e.Children {
			k := keep(c)
			switch {
			case k:
				kids = append(kids, c)
			case c.Name == "pci" || c.Name == "cpu" || c.Name == "gpu":
				// removed, like ncclTopoTrimXml's branches without keep="1"
			default:
				kids = append(kids, c) // attributes-only children (nvlink, c2c, pcilink) of kept nodes
			}
		}
		e.Children = kids
		for _, c := range kids {
			if c.Name == "pci" || c.Name == "cpu" || c.Name == "gpu" || c.Name == "nic" || c.Name == "net" {
				return true
			}
		}
		return false
	}
	keep(out)
	return out, members
}
