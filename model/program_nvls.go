package model

import (
	"fmt"
)

// This file holds the Programs of NCCL 2.28.9's NVLS kernels
// (src/device/all_reduce.h, all_gather.h, reduce_scatter.h: RunWorkColl
// for NCCL_ALGO_NVLS and NCCL_ALGO_NVLS_TREE with Simple, buffers not
// registered). Every NVLS channel carries one multicast group per head:
// each rank has a unicast buffer that the group's reduce side reads
// (ConnNVLSReduce: "Reduce UC -> MC") and one the group's broadcast side
// writes (ConnNVLSBcast: "Broadcast MC -> UC"). A block's threads split
// into a scatter group (own data into the reduce buffer of every head),
// a gather group (every head's broadcast buffer into the output), and, on
// a head, a reduce group (multimem.ld_reduce of the head's share over all
// members, then multimem.st to all, or to the network tree) and on an
// NVLS tree a broadcast group (from the tree parent to the members and
// the children). A Program gives the scatter and gather groups one lane
// per head: every lane drives one connection, with the same steps and
// bytes as NCCL's group drives it.

// NVLSChunkBytes is NCCL_NVLS_CHUNKSIZE's default: the step size of NVLS
// connections and the largest NVLS chunk (src/transport/nvls.cc).
const NVLSChunkBytes = 128 << 10

// NVLSSupported is ncclNvlsSupported (src/include/device.h): the
// reductions the NVSwitch's multimem.ld_reduce performs. Sum for 32- and
// 64-bit integers, fp16, bf16, fp32 and fp64; min and max for the
// integers, fp16 and bf16. Products, averages (a pre-multiplied sum or a
// sum divided after) and 8-bit types are not: NCCL never picks NVLS for
// them. AllGather reduces nothing and runs on NVLS for every type.
func NVLSSupported(op RedOp, d Dtype) bool {
	switch d {
	case DtypeInt32, DtypeUint32, DtypeInt64, DtypeUint64, DtypeFP16, DtypeBF16:
		return op == RedSum || op == RedMin || op == RedMax
	case DtypeFP32, DtypeFP64:
		return op == RedSum
	}
	return false
}

// nvlsChunkBytes is calcCollChunking (src/enqueue.cc) for NVLS and
// NVLS_TREE on one channel share of nBytes global bytes, with nHeads
// heads per channel: the chunk shrinks when the share gives too few
// chunks to keep every head busy. simpleStep is the Simple step size
// (NCCL_BUFFSIZE/8); multi-node NVLS (with CollNet only) is not
// generated.
func nvlsChunkBytes(a Algorithm, nBytes int64, nHeads, nNodes, simpleStep int) int64 {
	ops := int64(nHeads) // one channel at a time, as scheduleCollTasksToPlan asks
	var chunk int64
	if a == AlgoNVLS {
		chunk = min(int64(simpleStep), NVLSChunkBytes)
		if nBytes < 64*ops*chunk && chunk > 65536 {
			chunk = 65536
		}
		if nBytes < 8*ops*chunk && chunk > 32768 {
			chunk = 32768
		}
		if nBytes < 2*ops*chunk && chunk > 16384 {
			chunk = 16384
		}
	} else {
		chunk = NVLSChunkBytes
		if nNodes >= 4 { // NCCL_NVLS_TREE_MAX_CHUNKSIZE's default
			chunk = min(chunk, 65536)
		}
		for _, s := range [...]struct{ mul, to int64 }{{32, 262144}, {16, 131072}, {4, 65536}, {1, 32768}} {
			if nBytes < s.mul*ops*chunk && chunk > s.to {
				chunk = s.to
			}
		}
	}
	g := int64(ProtoGrainSize(ProtoSimple))
	return chunk / g * g
}

// NVLSHeads are the NVLS heads of every NCCL node (connectNvls's
// nvlsHeads): the head ranks of the node's NVLS graph channels in channel
// order, each once, cut to the fewest any node has. A Plan without
// graphs (SyntheticPlan) takes every local rank as a head in local-rank
// order, as NCCL's NVLS search does on an NVSwitch node (the head of
// channel c is GPU c), at most NCCL_MAX_NVLS_ARITY (32).
func (p *Plan) NVLSHeads() ([][]int, error) {
	t, err := newP2PTopo(p)
	if err != nil {
		return nil, fmt.Errorf("nvls heads: %w", err)
	}
	heads := make([][]int, t.nNodes)
	for nd, ranks := range t.nodeRanks {
		if len(p.NodeAlignedGraphs) == 0 {
			heads[nd] = append([]int(nil), ranks[:min(len(ranks), nvlsMaxArity)]...)
			continue
		}
		for _, gs := range p.NodeAlignedGraphs {
			g := gs[GraphNVLS]
			if g == nil || len(g.Channels) == 0 || len(g.Channels[0].Intra) == 0 {
				continue
			}
			if h := g.Channels[0].Intra[0]; h < 0 || h >= p.NRanks || t.node[h] != nd {
				continue
			}
			for _, ch := range g.Channels {
				if len(ch.Intra) == 0 || ch.Intra[0] < 0 || ch.Intra[0] >= p.NRanks || t.node[ch.Intra[0]] != nd {
					return nil, fmt.Errorf("nvls heads: node %d: an NVLS channel's head is not a rank of the node", nd)
				}
				if connIndexOf(heads[nd], ch.Intra[0]) < 0 {
					heads[nd] = append(heads[nd], ch.Intra[0])
				}
			}
			break
		}
		if len(heads[nd]) == 0 {
			return nil, fmt.Errorf("nvls heads: node %d (rank %d) has no NVLS channel: NVLS needs NVSwitches and compute capability 9.0 (NCCL_NVLS_ENABLE)", nd, ranks[0])
		}
	}
	n := len(heads[0])
	for _, h := range heads {
		n = min(n, len(h))
	}
	for nd := range heads {
		heads[nd] = heads[nd][:n]
	}
	return heads, nil
}

// nvlsMaxArity is NCCL_MAX_NVLS_ARITY.
const nvlsMaxArity = 32

func connIndexOf(list []int, x int) int {
	for i, v := range list {
		if v == x {
			return i
		}
	}
	return -1
}

// nvlsGen is the layout of an NVLS or NVLS tree Program: the nodes, their
// heads and where every connection sits. Per channel, node nd holds a
// block of connections: the reduce group (if used) then the broadcast
// group (if used), each H x L (head h, member l: index h*L + l); after
// every node's block come the tree connections (NVLS_TREE), two per node
// and head: up (to the parent node's same head) and down (back).
type nvlsGen struct {
	topo       *p2pTopo
	heads      [][]int
	nHeads     int
	headIx     []int // per rank: its head index on its node, -1 if none
	useRed     bool
	useBc      bool
	tree       bool
	nodeBase   []int32    // per node: first connection of its block in a channel
	perChannel int32      // connections per channel
	treeBase   int32      // first tree connection in a channel
	align      int64      // last-loop chunk alignment, elements
	parentOf   [2][]int   // per tree (channel parity), per node
	childrenOf [2][][]int // per tree, per node
}

// initNVLS prepares g for an NVLS or NVLS_TREE Program on nch channels.
func (g *ProgGen) initNVLS(nch int) error {
	p, c, a := g.plan, g.hdr.Coll, g.hdr.Algo
	if c != CollAllGather && !NVLSSupported(g.hdr.Op, g.hdr.Dtype) {
		return fmt.Errorf("the NVSwitch cannot reduce %s with %s (ncclNvlsSupported: sum of 32/64-bit integers and fp16/bf16/fp32/fp64, min and max of integers and fp16/bf16)", g.hdr.Dtype, g.hdr.Op)
	}
	heads, err := p.NVLSHeads()
	if err != nil {
		return err
	}
	t, _ := newP2PTopo(p)
	nv := &nvlsGen{topo: t, heads: heads, nHeads: len(heads[0]), headIx: make([]int, p.NRanks)}
	for r := range nv.headIx {
		nv.headIx[r] = -1
	}
	for _, hs := range heads {
		for h, r := range hs {
			nv.headIx[r] = h
		}
	}
	switch {
	case a == AlgoNVLSTree && t.nNodes < 2:
		return fmt.Errorf("NVLSTree runs across nodes; this plan has one (NCCL disables it on a single node)")
	case a == AlgoNVLS && t.nNodes > 1:
		return fmt.Errorf("NVLS across %d nodes needs CollNet (NVLS+SHARP), which has no Program; NCCL runs NVLSTree there", t.nNodes)
	}
	if c != CollAllReduce {
		for r, h := range nv.headIx {
			if h < 0 {
				return fmt.Errorf("NVLS %s needs every rank to be a head; rank %d is not (%d heads on a node of %d ranks)", c, r, nv.nHeads, len(t.nodeRanks[t.node[r]]))
			}
		}
	}
	nv.useRed = c != CollAllGather
	nv.useBc = c != CollReduceScatter
	nv.tree = a == AlgoNVLSTree
	nv.align = int64(16384 / g.hdr.Dtype.Size())
	if nv.tree {
		nv.align = int64(max(1, 16/g.hdr.Dtype.Size()))
		for tr := 0; tr < 2; tr++ {
			nv.parentOf[tr] = make([]int, t.nNodes)
			nv.childrenOf[tr] = make([][]int, t.nNodes)
			for nd := 0; nd < t.nNodes; nd++ {
				up, d0, d1 := dtree(t.nNodes, nd, tr)
				nv.parentOf[tr][nd] = up
				for _, d := range [2]int{d0, d1} {
					if d >= 0 {
						nv.childrenOf[tr][nd] = append(nv.childrenOf[tr][nd], d)
					}
				}
			}
		}
	}
	groups := int32(0)
	if nv.useRed {
		groups++
	}
	if nv.useBc {
		groups++
	}
	nv.nodeBase = make([]int32, t.nNodes)
	off := int32(0)
	for nd, ranks := range t.nodeRanks {
		nv.nodeBase[nd] = off
		off += groups * int32(nv.nHeads*len(ranks))
	}
	nv.treeBase = off
	if nv.tree {
		off += int32(2 * t.nNodes * nv.nHeads)
	}
	nv.perChannel = off
	g.nv = nv

	nNodes := t.nNodes
	simpleStep := g.simpleStep
	g.parts = collPartsChunked(c, ProtoSimple, g.hdr.Dtype, g.hdr.Count, nch, p.NRanks, func(nBytes int64) int64 {
		return nvlsChunkBytes(a, nBytes, nv.nHeads, nNodes, simpleStep)
	})
	if len(g.parts) == 0 {
		return nil
	}
	g.chLo = g.parts[0].Channel
	g.hdr.Conns = make([]ProgConn, 0, len(g.parts)*int(nv.perChannel))
	for _, part := range g.parts {
		g.hdr.Conns = nv.appendConns(g.hdr.Conns, part.Channel)
	}
	return nil
}

// appendConns appends the connections of channel ch in layout order.
func (nv *nvlsGen) appendConns(conns []ProgConn, ch int) []ProgConn {
	c32 := int32(ch)
	for nd, ranks := range nv.topo.nodeRanks {
		if nv.useRed {
			for _, hr := range nv.heads[nd] {
				for _, r := range ranks {
					conns = append(conns, ProgConn{Channel: c32, From: int32(r), To: int32(hr), Kind: ConnNVLSReduce})
				}
			}
		}
		if nv.useBc {
			for _, hr := range nv.heads[nd] {
				for _, r := range ranks {
					conns = append(conns, ProgConn{Channel: c32, From: int32(hr), To: int32(r), Kind: ConnNVLSBcast})
				}
			}
		}
	}
	if nv.tree {
		tr := ch % 2
		for nd := range nv.topo.nodeRanks {
			for h, hr := range nv.heads[nd] {
				parent := hr // the root's pair stays unused
				if up := nv.parentOf[tr][nd]; up >= 0 {
					parent = nv.heads[up][h]
				}
				conns = append(conns,
					ProgConn{Channel: c32, From: int32(hr), To: int32(parent)},
					ProgConn{Channel: c32, From: int32(parent), To: int32(hr)})
			}
		}
	}
	return conns
}

// Connection indices within channel block k (the k-th part).
func (nv *nvlsGen) red(k, nd, h, l int) int32 {
	return int32(k)*nv.perChannel + nv.nodeBase[nd] + int32(h*len(nv.topo.nodeRanks[nd])+l)
}

func (nv *nvlsGen) bc(k, nd, h, l int) int32 {
	base := nv.nodeBase[nd]
	if nv.useRed {
		base += int32(nv.nHeads * len(nv.topo.nodeRanks[nd]))
	}
	return int32(k)*nv.perChannel + base + int32(h*len(nv.topo.nodeRanks[nd])+l)
}

func (nv *nvlsGen) treeUp(k, nd, h int) int32 {
	return int32(k)*nv.perChannel + nv.treeBase + int32(2*(nd*nv.nHeads+h))
}

func (nv *nvlsGen) treeDown(k, nd, h int) int32 { return nv.treeUp(k, nd, h) + 1 }

// NVLS lane roles, in NCCL's thread order.
const (
	nvlsScatter = iota // one lane per head
	nvlsGather         // one lane per head
	nvlsReduce         // heads only
	nvlsBcast          // AllGather: the multicast store; NVLS tree: from the parent
)

type nvlsRole struct{ kind, head int }

// roles lists the lanes rank r runs on channel ch.
func (nv *nvlsGen) roles(c Collective, r, ch int) []nvlsRole {
	var out []nvlsRole
	hr := nv.headIx[r]
	if c != CollAllGather {
		for h := 0; h < nv.nHeads; h++ {
			out = append(out, nvlsRole{nvlsScatter, h})
		}
	}
	if c != CollReduceScatter {
		for h := 0; h < nv.nHeads; h++ {
			out = append(out, nvlsRole{nvlsGather, h})
		}
	}
	if hr < 0 {
		return out
	}
	switch {
	case c == CollAllGather:
		out = append(out, nvlsRole{nvlsBcast, hr})
	default:
		out = append(out, nvlsRole{nvlsReduce, hr})
		if nv.tree && nv.parentOf[ch%2][nv.topo.node[r]] >= 0 {
			out = append(out, nvlsRole{nvlsBcast, hr})
		}
	}
	return out
}

// nvlsLane generates lane i of rank r on channel part k.
func (g *ProgGen) nvlsLane(l ProgLane, part CollPart, k, i int, ops []ProgOp) ProgLane {
	nv := g.nv
	r := int(l.Rank)
	roles := nv.roles(g.hdr.Coll, r, part.Channel)
	if i < 0 || i >= len(roles) {
		return l
	}
	role := roles[i]
	nd, loc := nv.topo.node[r], nv.topo.local[r]
	members := len(nv.topo.nodeRanks[nd])
	h := role.head
	tr := part.Channel % 2
	switch role.kind {
	case nvlsScatter:
		l.Send = []int32{nv.red(k, nd, h, loc)}
	case nvlsGather:
		l.Recv = []int32{nv.bc(k, nd, h, loc)}
	case nvlsReduce:
		for m := 0; m < members; m++ {
			l.Recv = append(l.Recv, nv.red(k, nd, h, m))
		}
		var kids []int
		if nv.tree {
			kids = nv.childrenOf[tr][nd]
			for _, kid := range kids {
				l.Recv = append(l.Recv, nv.treeUp(k, kid, h))
			}
		}
		switch {
		case g.hdr.Coll == CollReduceScatter:
		case nv.tree && nv.parentOf[tr][nd] >= 0:
			l.Send = []int32{nv.treeUp(k, nd, h)}
		default:
			for m := 0; m < members; m++ {
				l.Send = append(l.Send, nv.bc(k, nd, h, m))
			}
			for _, kid := range kids {
				l.Send = append(l.Send, nv.treeDown(k, kid, h))
			}
		}
	case nvlsBcast:
		if nv.tree {
			l.Recv = []int32{nv.treeDown(k, nd, h)}
		}
		for m := 0; m < members; m++ {
			l.Send = append(l.Send, nv.bc(k, nd, h, m))
		}
		if nv.tree {
			for _, kid := range nv.childrenOf[tr][nd] {
				l.Send = append(l.Send, nv.treeDown(k, kid, h))
			}
		}
	}
	l.Ops = g.nvlsOps(role, part, nv.heads[nd][h], ops[:0])
	return l
}

// nvlsOps are the primitive calls of one lane over a channel share; head
// is the rank of the lane's head.
func (g *ProgGen) nvlsOps(role nvlsRole, part CollPart, head int, ops []ProgOp) []ProgOp {
	nv := g.nv
	h := int64(role.head)
	cnt := g.hdr.Count
	clip := func(n int64) int64 { return max(0, n) }
	switch g.hdr.Coll {
	case CollAllGather: // loops of one chunk: each head multicasts its own
		for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
			m := min(part.ChunkCount, part.Count-eo)
			d := part.Offset + eo
			if role.kind == nvlsBcast {
				ops = g.add(ops, PrimSend, 0, d, 0, m)
			} else {
				ops = g.add(ops, PrimRecv, 0, 0, int64(head)*cnt+d, m)
			}
		}
		return ops
	case CollReduceScatter:
		for eo := int64(0); eo < part.Count; eo += part.ChunkCount {
			m := min(part.ChunkCount, part.Count-eo)
			d := part.Offset + eo
			if role.kind == nvlsScatter {
				ops = g.add(ops, PrimSend, 0, int64(head)*cnt+d, 0, m)
			} else {
				ops = g.add(ops, PrimMultimemReduceCopy, 0, 0, d, m)
			}
		}
		return ops
	}
	// AllReduce: loops of one chunk per head.
	nh := int64(nv.nHeads)
	cc := part.ChunkCount
	loop := nh * cc
	last := progAlignUp(progDivUp(part.Count%loop, nh), nv.align)
	for eo := int64(0); eo < part.Count; eo += loop {
		if part.Count-eo < loop {
			cc = last
		}
		nelem := min(nh*cc, part.Count-eo)
		o := part.Offset + eo + h*cc
		m := clip(min(cc, nelem-h*cc))
		switch role.kind {
		case nvlsScatter:
			ops = g.add(ops, PrimSend, 0, o, 0, m)
		case nvlsGather:
			ops = g.add(ops, PrimRecv, 0, 0, o, m)
		case nvlsReduce:
			ops = g.add(ops, PrimMultimemReduceSend, PrimDirect, o, o, m)
		case nvlsBcast:
			ops = g.add(ops, PrimRecvSend, PrimDirect, o, o, m)
		}
	}
	return ops
}
