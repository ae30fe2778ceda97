package traces

import (
	"cmp"
	"container/heap"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// ChakraOptions configure ImportChakra.
type ChakraOptions struct {
	// Datatype is the element type of nodes whose inputs do not name one
	// (ASTRA-sim's synthetic traces give bytes only): "bfloat16" if "".
	Datatype string
	// CommGroups is ASTRA-sim's communicator group file (comm_group.json:
	// pg_name -> global ranks). Without it a process group's ranks are
	// the files that have nodes of it.
	CommGroups map[string][]int32
}

// chakraColls maps et_def.proto's CollectiveCommType to collectives.
var chakraColls = map[int64]model.Collective{
	0: model.CollAllReduce, 1: model.CollReduce, 2: model.CollAllGather, 5: model.CollBroadcast,
	6: model.CollAlltoAll, 7: model.CollReduceScatter,
}

var chakraCollNames = map[int64]string{3: "GATHER", 4: "SCATTER", 8: "REDUCE_SCATTER_BLOCK", 9: "BARRIER"}

// ReadCommGroups reads ASTRA-sim's comm_group.json: {"1": [0, 1], ...}.
func ReadCommGroups(r io.Reader, name string) (map[string][]int32, error) {
	var g map[string][]int32
	if err := json.NewDecoder(io.LimitReader(r, 64<<20)).Decode(&g); err != nil {
		return nil, fmt.Errorf("%s: want {\"PG_NAME\": [RANK, ...], ...}: %w", name, err)
	}
	for pg, ranks := range g {
		if err := checkCommRanks(ranks); err != nil {
			return nil, fmt.Errorf("%s: group %q: %w", name, pg, err)
		}
	}
	return g, nil
}

// ChakraRank reads the rank of a Chakra trace from its file name,
// PREFIX.RANK.et as ASTRA-sim names them.
func ChakraRank(name string) (int32, error) {
	base := strings.TrimSuffix(filepath.Base(name), ".et")
	i := strings.LastIndexByte(base, '.')
	r, err := strconv.ParseInt(base[i+1:], 10, 32)
	if i < 0 || err != nil || r < 0 || r >= MaxLogRanks {
		return 0, fmt.Errorf("%s: cannot tell the rank from the name: Chakra traces are named PREFIX.RANK.et", name)
	}
	return int32(r), nil
}

// chakraFile is one rank's decoded trace.
type chakraFile struct {
	name  string
	rank  int32
	nodes []chakraNode
	order []int // nodes in dependency order
}

// ImportChakra reads Chakra execution traces, one file per rank (named
// PREFIX.RANK.et), and returns one row per communication node:
// COMM_COLL_NODE (comm_type, comm_size), COMM_SEND_NODE and
// COMM_RECV_NODE (comm_size, comm_dst / comm_src, global ranks).
//
// comm_size is read as ASTRA-sim reads it: the bytes of a rank's input
// (AllReduce, Broadcast, Reduce and AllGather: NCCL's count; ReduceScatter
// and AlltoAll: the whole buffer, so NCCL's count is that over the group
// size). The element type is the first tensor type of the node's inputs,
// else opt.Datatype. A node's pg_name is its communicator ("" and "0":
// every rank, as ASTRA-sim takes them). Nodes run in dependency order
// (data and control deps; file order among independent ones): a call's
// number is its position among its rank's calls of its communicator, its
// dependencies (CallRow.Deps) the nearest communication nodes before it
// with the longest chain of compute durations in between, and its times
// the node's start_time_micros, else the trace's durations laid end to
// end along the dependencies.
func ImportChakra(files []NamedReader, opt ChakraOptions) (*Job, error) {
	if opt.Datatype == "" {
		opt.Datatype = "bfloat16"
	}
	if _, ok := DatatypeSize(opt.Datatype); !ok {
		return nil, fmt.Errorf("datatype %q unknown", opt.Datatype)
	}
	var fs []*chakraFile
	byRank := map[int32]string{}
	for _, f := range files {
		rank, err := ChakraRank(f.Name)
		if err != nil {
			return nil, err
		}
		if other, dup := byRank[rank]; dup {
			return nil, fmt.Errorf("%s and %s are both rank %d", other, f.Name, rank)
		}
		byRank[rank] = f.Name
		_, nodes, err := readChakraFile(f.R, f.Name)
		if err != nil {
			return nil, err
		}
		cf := &chakraFile{name: f.Name, rank: rank, nodes: nodes}
		if err := cf.sort(); err != nil {
			return nil, err
		}
		fs = append(fs, cf)
	}
	slices.SortFunc(fs, func(a, b *chakraFile) int { return cmp.Compare(a.rank, b.rank) })
	world := make([]int32, len(fs))
	for i, f := range fs {
		world[i] = f.rank
	}
	groups, err := chakraGroups(fs, world, opt.CommGroups)
	if err != nil {
		return nil, err
	}
	job := &Job{Format: "chakra"}
	for _, pg := range slices.Sorted(mapsKeys(groups)) {
		job.Comms = append(job.Comms, CommInfo{ID: CommID("pg", pg), Name: pg, Ranks: groups[pg]})
	}
	for _, f := range fs {
		rows, err := f.calls(groups, opt.Datatype)
		if err != nil {
			return nil, err
		}
		job.Calls = append(job.Calls, rows...)
	}
	return job, nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func isChakraComm(t int64) bool {
	return t == chakraCollNode || t == chakraSendNode || t == chakraRecvNode
}

// pgName is a node's communicator name: "0" (PyTorch's default group)
// and "" are the whole job.
func (n *chakraNode) pgName() string {
	a := n.Attrs["pg_name"]
	if !a.IsStr || a.Str == "0" {
		return ""
	}
	return a.Str
}

// chakraGroups gives every process group its global ranks, sorted.
func chakraGroups(fs []*chakraFile, world []int32, given map[string][]int32) (map[string][]int32, error) {
	groups := map[string][]int32{}
	users := map[string][]int32{}
	for _, f := range fs {
		for i := range f.nodes {
			n := &f.nodes[i]
			if !isChakraComm(n.Type) {
				continue
			}
			pg := n.pgName()
			if l := users[pg]; len(l) == 0 || l[len(l)-1] != f.rank {
				users[pg] = append(users[pg], f.rank)
			}
		}
	}
	inWorld := map[int32]bool{}
	for _, r := range world {
		inWorld[r] = true
	}
	for pg, used := range users {
		if pg == "" {
			groups[pg] = world
			continue
		}
		ranks, ok := given[pg]
		if !ok {
			groups[pg] = used
			continue
		}
		ranks = slices.Sorted(slices.Values(ranks))
		for _, r := range used {
			if !slices.Contains(ranks, r) {
				return nil, fmt.Errorf("rank %d has nodes of process group %q, which the communicator groups give ranks %v", r, pg, ranks)
			}
		}
		for _, r := range ranks {
			if !inWorld[r] {
				return nil, fmt.Errorf("process group %q has rank %d, which no file is", pg, r)
			}
		}
		groups[pg] = ranks
	}
	return groups, nil
}

// nodeHeap orders ready nodes by file position.
type nodeHeap []int

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h nodeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// deps returns the positions of a node's dependencies (data and control,
// each once; dependencies on nodes the file lacks are left out, as
// Chakra's converter leaves them after removing dangling nodes).
func (f *chakraFile) deps(i int, index map[uint64]int) []int {
	n := &f.nodes[i]
	var out []int
	for _, d := range slices.Concat(n.DataDeps, n.CtrlDeps) {
		if j, ok := index[d]; ok && !slices.Contains(out, j) {
			out = append(out, j)
		}
	}
	return out
}

// sort orders the nodes by their dependencies, file order among ready ones.
func (f *chakraFile) sort() error {
	index := make(map[uint64]int, len(f.nodes))
	for i, n := range f.nodes {
		if j, dup := index[n.ID]; dup {
			return fmt.Errorf("%s: nodes %d and %d both have id %d", f.name, j, i, n.ID)
		}
		index[n.ID] = i
	}
	waiting := make([]int, len(f.nodes))
	next := make([][]int, len(f.nodes))
	h := &nodeHeap{}
	for i := range f.nodes {
		ds := f.deps(i, index)
		waiting[i] = len(ds)
		for _, d := range ds {
			next[d] = append(next[d], i)
		}
		if len(ds) == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		f.order = append(f.order, i)
		for _, j := range next[i] {
			if waiting[j]--; waiting[j] == 0 {
				heap.Push(h, j)
			}
		}
	}
	if len(f.order) != len(f.nodes) {
		for i, w := range waiting {
			if w > 0 {
				return fmt.Errorf("%s: node %d (%q) is on a dependency cycle or waits for one", f.name, f.nodes[i].ID, f.nodes[i].Name)
			}
		}
	}
	return nil
}

// chakraTypes maps the tensor types of Chakra's inputs.types to datatypes.
var chakraTypes = map[string]string{
	"float": "float32", "float32": "float32", "double": "float64", "float64": "float64", "half": "float16",
	"float16": "float16", "c10::half": "float16", "bfloat16": "bfloat16", "c10::bfloat16": "bfloat16",
	"int": "int32", "int32": "int32", "long": "int64", "long int": "int64", "int64": "int64",
	"unsigned char": "uint8", "uint8": "uint8", "signed char": "int8", "int8": "int8",
}

// inputDatatype is the first tensor type of a node's inputs ("Tensor(c10::BFloat16)").
func (n *chakraNode) inputDatatype() (string, bool) {
	i := strings.Index(n.InputTypes, "Tensor(")
	if i < 0 {
		return "", false
	}
	t, _, ok := strings.Cut(n.InputTypes[i+len("Tensor("):], ")")
	if !ok {
		return "", false
	}
	dt, ok := chakraTypes[strings.ToLower(strings.TrimSpace(t))]
	return dt, ok
}

// calls converts the file's communication nodes into call rows.
func (f *chakraFile) calls(groups map[string][]int32, defType string) ([]CallRow, error) {
	index := make(map[uint64]int, len(f.nodes))
	for i, n := range f.nodes {
		index[n.ID] = i
	}
	recorded := false // the trace has start times
	for _, n := range f.nodes {
		recorded = recorded || n.StartMicros > 0
	}
	end := make([]int64, len(f.nodes))              // ns
	frontier := make([]map[int]int64, len(f.nodes)) // compute nodes: comm node -> gap
	callOf := make([]int64, len(f.nodes))
	rowOf := make([]int, len(f.nodes))
	seq := map[string]int64{}
	var rows []CallRow
	for _, i := range f.order {
		n := &f.nodes[i]
		where := fmt.Sprintf("%s: node %d (%q)", f.name, n.ID, n.Name)
		ready := int64(0)
		reach := map[int]int64{}
		for _, d := range f.deps(i, index) {
			ready = max(ready, end[d])
			if isChakraComm(f.nodes[d].Type) {
				reach[d] = max(reach[d], 0)
				continue
			}
			for c, g := range frontier[d] {
				reach[c] = max(reach[c], g)
			}
		}
		if n.DurMicros > math.MaxInt64/4000 || n.StartMicros > math.MaxInt64/4000 {
			return nil, fmt.Errorf("%s: time out of range", where)
		}
		dur := int64(n.DurMicros) * 1000
		start := ready
		if recorded {
			start = int64(n.StartMicros) * 1000
		}
		end[i] = start + dur
		if !isChakraComm(n.Type) {
			fr := make(map[int]int64, len(reach))
			for c, g := range reach {
				fr[c] = g + dur
			}
			frontier[i] = fr
			continue
		}
		row, err := f.row(n, groups, defType)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		pg := n.pgName()
		row.Call = seq[pg]
		seq[pg]++
		row.EnqueueNs, row.StartNs, row.EndNs = start, start, start+dur
		var deps []Dep
		for _, c := range slices.Sorted(func(yield func(int) bool) {
			for c := range reach {
				if !yield(c) {
					return
				}
			}
		}) {
			deps = append(deps, Dep{Comm: rows[rowOf[c]].Comm, Call: callOf[c], GapNs: reach[c]})
		}
		row.Deps = FormatDeps(deps)
		callOf[i], rowOf[i] = row.Call, len(rows)
		rows = append(rows, row)
	}
	return rows, nil
}

// row reads one communication node.
func (f *chakraFile) row(n *chakraNode, groups map[string][]int32, defType string) (CallRow, error) {
	pg := n.pgName()
	members := groups[pg]
	rank := slices.Index(members, f.rank)
	if rank < 0 {
		return CallRow{}, fmt.Errorf("rank %d is not in process group %q (ranks %v)", f.rank, pg, members)
	}
	c := CallRow{Comm: CommID("pg", pg), Rank: int32(rank), NRanks: int32(len(members)), Root: -1, Source: SourceHW}
	if s, ok, err := n.intAttr("stream"); err != nil {
		return c, err
	} else if ok && s >= 0 {
		c.Stream = uint64(s)
	}
	if dt, ok := n.inputDatatype(); ok {
		c.Datatype = dt
	} else {
		c.Datatype = defType
	}
	size, ok, err := n.intAttr("comm_size")
	if err != nil {
		return c, err
	}
	if !ok || size < 0 {
		return c, fmt.Errorf("no comm_size (bytes)")
	}
	if l := n.Attrs["involved_dim"]; l.IsList && slices.Contains(l.List, 0) {
		return c, fmt.Errorf("involved_dim %v leaves network dimensions out: not supported (give the collective a process group)", l.List)
	}
	elems := int64(1)
	switch n.Type {
	case chakraCollNode:
		t, ok, err := n.intAttr("comm_type")
		if err != nil || !ok {
			return c, fmt.Errorf("no comm_type")
		}
		coll, known := chakraColls[t]
		if !known {
			if name, ok := chakraCollNames[t]; ok {
				return c, fmt.Errorf("comm_type %s is not supported", name)
			}
			return c, fmt.Errorf("comm_type %d unknown", t)
		}
		c.Op = coll.String()
		switch coll {
		case model.CollAllReduce, model.CollReduce, model.CollReduceScatter:
			c.RedOp = "sum"
		}
		if coll == model.CollReduce || coll == model.CollBroadcast {
			c.Root = 0
		}
		if coll == model.CollReduceScatter || coll == model.CollAlltoAll {
			elems = int64(len(members))
		}
	case chakraSendNode, chakraRecvNode:
		peerAttr, defPeer := "comm_dst", int64(-1)
		c.Op = model.CollSend.String()
		if n.Type == chakraRecvNode {
			peerAttr, c.Op = "comm_src", model.CollRecv.String()
		}
		peer, ok, err := n.intAttr(peerAttr)
		if err != nil {
			return c, err
		}
		if !ok {
			peer = defPeer
		}
		p := slices.Index(members, int32(peer))
		if p < 0 || peer > math.MaxInt32 {
			return c, fmt.Errorf("%s %d is not a rank of process group %q (ranks %v)", peerAttr, peer, pg, members)
		}
		c.Root = int32(p)
	}
	es, _ := DatatypeSize(c.Datatype)
	unit := int64(es) * elems
	if size%unit != 0 {
		return c, fmt.Errorf("comm_size %d is not a whole number of %s elements for each of %d rank(s)", size, c.Datatype, elems)
	}
	c.Count = size / unit
	return c, nil
}
