package model

import "fmt"

// CheckPathInvariants verifies every computed path of s: a path of n hops
// is a walk of n existing links from its source to its destination whose
// bandwidth is its bottleneck, measured as NCCL does on the reverse links;
// a path of no hops is the node itself (LOC, LOC_BW) or unreachable (DIS,
// NET). It returns the first violation found.
func CheckPathInvariants(s *System) error {
	for t := range s.Nodes {
		for _, src := range s.Nodes[t] {
			for pt := range src.Paths {
				if ps := src.Paths[pt]; ps != nil && len(ps) != len(s.Nodes[pt]) {
					return fmt.Errorf("%s has %d paths to %s nodes, the system %d", src.Name(), len(ps), NodeType(pt), len(s.Nodes[pt]))
				}
				for i, p := range src.Paths[pt] {
					if err := checkPath(src, s.Nodes[pt][i], &p); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

func checkPath(src, dst *Node, p *Path) error {
	if p.Count() == 0 {
		switch {
		case src == dst && (p.Type != PathLOC || p.BW != LocBW):
			return fmt.Errorf("path %s -> itself is %s/%v, want LOC/%v", src.Name(), p.Type, p.BW, LocBW)
		case src != dst && p.Type != PathDIS && p.Type != PathNET:
			return fmt.Errorf("path %s -> %s has no hops but type %s", src.Name(), dst.Name(), p.Type)
		}
		return nil
	}
	// NCCL measures a path's bandwidth on the links walked from the
	// destination outward, i.e. the reverse of each stored hop. Links need
	// not be symmetric, and Broadcom flattening can leave parallel links, so
	// the bandwidth must be that of one of the reverse links of some hop,
	// and no wider than the narrowest choice allows.
	at := src
	lo, hi := float32(LocBW), float32(LocBW)
	matched := false
	// With symmetric links of at most LOC_BW, the simple rule holds too.
	symmetric, narrowest := true, float32(LocBW)
	for k, l := range p.Links {
		if !containsLink(at.Links, l) {
			return fmt.Errorf("path %s -> %s: hop %d is not a link of %s", src.Name(), dst.Name(), k, at.Name())
		}
		var revMin, revMax float32 = -1, -1
		reverse := 0
		for _, r := range l.Remote.Links {
			if r.Remote == at && r.Type == l.Type {
				reverse++
				if revMin < 0 || r.BW < revMin {
					revMin = r.BW
				}
				revMax = max(revMax, r.BW)
				matched = matched || r.BW == p.BW
			}
		}
		if revMin < 0 {
			return fmt.Errorf("path %s -> %s: hop %d (%s -> %s) has no reverse link", src.Name(), dst.Name(), k, at.Name(), l.Remote.Name())
		}
		lo, hi = min(lo, revMin), min(hi, revMax)
		symmetric = symmetric && reverse == 1 && revMin == l.BW && l.BW <= LocBW
		narrowest = min(narrowest, l.BW)
		at = l.Remote
	}
	if at != dst {
		return fmt.Errorf("path %s -> %s ends at %s", src.Name(), dst.Name(), at.Name())
	}
	if p.BW < lo || p.BW > hi || !(matched || p.BW == LocBW) {
		return fmt.Errorf("path %s -> %s has bandwidth %v, not the narrowest of its links (between %v and %v)", src.Name(), dst.Name(), p.BW, lo, hi)
	}
	if symmetric && p.BW != narrowest {
		return fmt.Errorf("path %s -> %s has bandwidth %v, its narrowest link %v", src.Name(), dst.Name(), p.BW, narrowest)
	}
	return nil
}

func containsLink(links []*Link, l *Link) bool {
	for _, x := range links {
		if x == l {
			return true
		}
	}
	return false
}
