package search

// This file holds NCCL's double binary tree over nodes (trees.cc): the
// first tree is a binary tree in which every other position is a leaf, the
// second one is that tree mirrored (even node count) or shifted by one
// (odd node count), so that a node which is a leaf in one tree is usually
// an inner node of the other.

// treeSide is one node's place in one binary tree: its parent, its two
// children (-1 where absent) and, for a node with a parent, on which side
// of that parent it hangs (0: it is the parent's first child, reached
// through the parent's child-0 GPU; 1: the second).
type treeSide struct {
	Up, Down0, Down1 int
	ChildType        int
}

// btree returns the place of rank in NCCL's binary tree over nranks
// positions rooted at 0 (ncclGetBtree). The root has only a second child;
// its ChildType stays 0, as the caller's default in NCCL.
func btree(nranks, rank int) treeSide {
	bit := 1
	for bit < nranks && bit&rank == 0 {
		bit <<= 1
	}
	if rank == 0 {
		t := treeSide{Up: -1, Down0: -1, Down1: -1}
		if nranks > 1 {
			t.Down1 = bit >> 1
		}
		return t
	}
	t := treeSide{}
	up := (rank ^ bit) | (bit << 1)
	if up >= nranks {
		up = rank ^ bit
	}
	t.Up = up
	if rank >= up {
		t.ChildType = 1
	}
	low := bit >> 1
	t.Down0, t.Down1 = -1, -1
	if low != 0 {
		t.Down0 = rank - low
		t.Down1 = rank + low
	}
	// Bring the second child into range: the loop recomputes it with the
	// current low bit, then halves the bit, as NCCL's loop does.
	for t.Down1 >= nranks {
		if low == 0 {
			t.Down1 = -1
		} else {
			t.Down1 = rank + low
		}
		low >>= 1
	}
	return t
}

// dtree returns the places of rank in NCCL's two trees (ncclGetDtree):
// tree 0 is btree; tree 1 is btree shifted by one position when nranks is
// odd, mirrored (x -> nranks-1-x) when it is even.
func dtree(nranks, rank int) (t0, t1 treeSide) {
	t0 = btree(nranks, rank)
	if nranks%2 == 1 {
		s := btree(nranks, (rank-1+nranks)%nranks)
		shift := func(x int) int {
			if x == -1 {
				return -1
			}
			return (x + 1) % nranks
		}
		t1 = treeSide{Up: shift(s.Up), Down0: shift(s.Down0), Down1: shift(s.Down1), ChildType: s.ChildType}
		return t0, t1
	}
	m := btree(nranks, nranks-1-rank)
	mirror := func(x int) int {
		if x == -1 {
			return -1
		}
		return nranks - 1 - x
	}
	t1 = treeSide{Up: mirror(m.Up), Down0: mirror(m.Down0), Down1: mirror(m.Down1), ChildType: m.ChildType}
	return t0, t1
}

// log2Floor is NCCL's log2i: the position of the highest set bit (0 for
// n <= 1).
func log2Floor(n int) int {
	l := 0
	for n >>= 1; n > 0; n >>= 1 {
		l++
	}
	return l
}
