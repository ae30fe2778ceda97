package model

import "fmt"

// CheckPathInvariants verifies every computed path of s: a path of n hops
// is a walk of n existing links from its source to its destination, and
// its bandwidth is that of its narrowest link (LOC_BW for the source
// itself). It returns the first violation found.
func CheckPathInvariants(s *System) error {
	for t := range s.Nodes {
		for _, src := range s.Nodes[t] {
			for pt := range src.Paths {
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
		case src != dst && p.Type != PathDIS:
			return fmt.Errorf("path %s -> %s has no hops but type %s", src.Name(), dst.Name(), p.Type)
		}
		return nil
	}
	at, narrowest := src, p.Links[0].BW
	for k, l := range p.Links {
		if !containsLink(at.Links, l) {
			return fmt.Errorf("path %s -> %s: hop %d is not a link of %s", src.Name(), dst.Name(), k, at.Name())
		}
		narrowest = min(narrowest, l.BW)
		at = l.Remote
	}
	if at != dst {
		return fmt.Errorf("path %s -> %s ends at %s", src.Name(), dst.Name(), at.Name())
	}
	if p.BW != narrowest {
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
