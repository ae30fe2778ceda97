package search

import (
	"fmt"
	"math"

	"github.com/twinccl/twinccl/model"
)

// subRound subtracts b from a and rounds to 1e-3, in float32 as NCCL's
// SUB_ROUND does, so that reservations undo cleanly.
func subRound(a, b float32) float32 {
	d := float32(a - b)
	return float32(roundHalfAway(float64(float32(d*1000)))) / 1000
}

// roundHalfAway is C's round (halves away from zero). For the values of a
// float32 it is exact: adding 0.5 in float64 does not round.
func roundHalfAway(x float64) float64 {
	if x >= 0 {
		return math.Floor(x + 0.5)
	}
	return -math.Floor(-x + 0.5)
}

// intelP2POverhead is the PCI bandwidth a GPU-to-GPU transfer through an
// Intel root complex consumes (INTEL_P2P_OVERHEAD).
func intelP2POverhead(bw float32) float32 {
	return float32(bw*6) / 5
}

// reverseLink returns the link of to that leads back to from with the same
// type (findRevLink).
func reverseLink(from, to *model.Node, t model.LinkType) (*model.Link, error) {
	for _, l := range to.Links {
		if l.Remote == from && l.Type == t {
			return l, nil
		}
	}
	return nil, fmt.Errorf("no reverse link %s -> %s of type %s", to.Name(), from.Name(), t)
}

// reserveLinks subtracts bw along the first maxSteps links of path (which
// starts at start), and returns how many links it could take before one
// lacked the bandwidth (followPath). A negative bw gives bandwidth back.
func reserveLinks(path *model.Path, start *model.Node, maxSteps int, bw float32) (int, error) {
	pciBW := bw
	if path.Type == model.PathPHB && start.Type == model.GPU {
		for _, l := range path.Links {
			n := l.Remote
			if n.Type == model.CPU && n.CPU.Arch == model.CPUArchX86 && n.CPU.Vendor == model.CPUVendorIntel {
				pciBW = intelP2POverhead(bw)
			}
		}
	}
	node := start
	for step := 0; step < maxSteps; step++ {
		l := path.Links[step]
		rem := l.Remote
		fwBW := bw
		if l.Type == model.LinkPCI {
			fwBW = pciBW
		}
		var rev *model.Link
		var revBW float32
		var err error
		if start.Type != model.GPU && rem.Type == model.GPU && rem.GPU.SM < 80 {
			if rev, err = reverseLink(node, rem, l.Type); err != nil {
				return step, err
			}
			revBW += fwBW / 8
		}
		if l.Type == model.LinkNVL && rem.Type == model.CPU && rem.CPU.Arch == model.CPUArchPower {
			if rev == nil {
				if rev, err = reverseLink(node, rem, l.Type); err != nil {
					return step, err
				}
			}
			revBW += fwBW
		}
		if l.BW < fwBW || (revBW != 0 && rev.BW < revBW) {
			return step, nil
		}
		l.BW = subRound(l.BW, fwBW)
		if revBW != 0 {
			rev.BW = subRound(rev.BW, revBW)
		}
		node = rem
	}
	return maxSteps, nil
}

// followPath reserves (mult > 0) or releases (mult < 0) the graph's
// bandwidth on the path from -> to, and reports whether the reservation
// held (ncclTopoFollowPath). from == nil is the start of an intra-node
// channel and always succeeds. GPU/NVS pairs use the intra-node bandwidth
// and type limit, anything involving a NET the inter-node ones.
func (c *chanSearch) followPath(g *chanGraph, from, to *model.Node, mult float32) (bool, error) {
	if from == nil {
		return true, nil
	}
	path := from.Path(to)
	intra := (from.Type == model.GPU || from.Type == model.NVS) && (to.Type == model.GPU || to.Type == model.NVS)
	bw, limit := g.bwInter, g.typeInter
	if intra {
		bw, limit = g.bwIntra, g.typeIntra
	}
	if path.Type >= model.PathDIS {
		return false, nil
	}
	if mult == 1 && path.Type > limit {
		return false, nil
	}
	if mult == 1 && isTreePattern(g.pattern) && to.Path(from).Type > limit {
		return false, nil
	}
	bw *= mult
	count := path.Count()
	step, err := reserveLinks(path, from, count, bw)
	if err != nil {
		return false, err
	}
	if step < count {
		_, err := reserveLinks(path, from, step, -bw)
		return false, err
	}
	// nHops is an int incremented by a float in NCCL.
	g.nHops = int(float32(g.nHops) + float32(mult*float32(count)))
	return true, nil
}
