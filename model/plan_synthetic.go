package model

// SyntheticPlan builds a Plan for n ranks and nch channels without a
// topology, for executors and tests that run Programs with no machine to
// search (the host device, the conformance suite): ring 0 is
// 0,1,...,n-1; with permute, channel c > 0 uses a deterministic shuffle
// that still starts at rank 0. Trees are NCCL's double binary tree over
// the ranks (ncclGetDtree, nccl-facts §5.4): even channels use tree 0,
// odd channels tree 1. Ranks are grouped 8 per node. p2p channels are the
// channel count rounded up to a power of two, two per peer.
func SyntheticPlan(n, nch int, permute bool) *Plan {
	p := &Plan{NRanks: n, NNodes: (n + 7) / 8, NChannels: nch, TreeChannels: (nch + 1) / 2}
	// p2p channels: the channel count rounded up to a power of two, at
	// most 64, and two per peer (NVLink peers get at least two).
	p.P2PChannels = 1
	for p.P2PChannels < min(nch, 64) {
		p.P2PChannels *= 2
	}
	p.P2PChannelsPerPeer = min(2, p.P2PChannels)
	p.Rings = make([][]int, nch)
	p.Ranks = make([]RankChannels, n)
	for r := range p.Ranks {
		p.Ranks[r] = RankChannels{Rank: r, Node: r / 8, LocalRank: r % 8,
			Ring: make([]RingLinks, nch), Tree: make([]TreeLinks, nch)}
	}
	seed := uint64(0x9e3779b97f4a7c15)
	for c := 0; c < nch; c++ {
		ring := make([]int, n)
		for i := range ring {
			ring[i] = i
		}
		if permute && c > 0 {
			for i := n - 1; i > 1; i-- {
				seed = seed*6364136223846793005 + 1442695040888963407
				j := 1 + int((seed>>33)%uint64(i))
				ring[i], ring[j] = ring[j], ring[i]
			}
		}
		p.Rings[c] = ring
		for i, r := range ring {
			p.Ranks[r].Ring[c] = RingLinks{Prev: ring[(i+n-1)%n], Next: ring[(i+1)%n]}
		}
		for r := 0; r < n; r++ {
			up, d0, d1 := dtree(n, r, c%2)
			p.Ranks[r].Tree[c] = TreeLinks{Up: up, Down: [TreeArity]int{d0, d1, -1}}
		}
	}
	return p
}

// btree is ncclGetBtree (nccl-facts §5.4).
func btree(n, r int) (up, d0, d1 int) {
	bit := 1
	for bit < n {
		if bit&r != 0 {
			break
		}
		bit <<= 1
	}
	if r == 0 {
		if n == 1 {
			return -1, -1, -1
		}
		return -1, -1, bit >> 1
	}
	up = (r ^ bit) | (bit << 1)
	if up >= n {
		up = r ^ bit
	}
	low := bit >> 1
	d0, d1 = -1, -1
	if low != 0 {
		d0 = r - low
	}
	for low != 0 && r+low >= n {
		low >>= 1
	}
	if low != 0 {
		d1 = r + low
	}
	return up, d0, d1
}

// dtree is tree t (0 or 1) of ncclGetDtree.
func dtree(n, r, t int) (up, d0, d1 int) {
	if t == 0 || n == 1 {
		return btree(n, r)
	}
	var m func(int) int
	var inv int
	if n%2 == 1 {
		inv = (r - 1 + n) % n
		m = func(x int) int { return (x + 1) % n }
	} else {
		inv = n - 1 - r
		m = func(x int) int { return n - 1 - x }
	}
	u, a, b := btree(n, inv)
	f := func(x int) int {
		if x < 0 {
			return x
		}
		return m(x)
	}
	return f(u), f(a), f(b)
}
