package traces

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// NamedReader is one input of an importer: its contents and the name
// errors give it.
type NamedReader struct {
	Name string
	R    io.Reader
}

// ncclDatatypes names ncclDataType_t values as CallRow.Datatype does.
var ncclDatatypes = []string{"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64",
	"bfloat16", "float8e4m3", "float8e5m2"}

// ncclRedOps names ncclRedOp_t values; ops from ncclRedOpCreatePreMulSum
// (ncclNumOps and up) are "premulsum".
var ncclRedOps = []string{"sum", "prod", "max", "min", "avg"}

// logComm is one communicator as one process's init lines show it.
type logComm struct {
	rank, nranks int
	commID       uint64 // from "commId 0x..."; 0 for a split
	hasID        bool
	parent       string // parent's pointer, for "ncclCommSplit" lines
	split, color int64
	where        string // file:line of its first init line
	id           uint64 // resolved communicator id
	resolving    bool
}

// logCall is one "COLL" line.
type logCall struct {
	proc, ptr string
	row       CallRow
	where     string
}

// logProc is one process of the logs (host:pid).
type logProc struct {
	comms map[string]*logComm // by comm pointer
	order []string            // comm pointers in order of first init line
	host  string
}

// ImportNCCLLog reads NCCL_DEBUG=INFO logs written with
// NCCL_DEBUG_SUBSYS including INIT and COLL (every rank's, in one file or
// several, lines of ranks interleaved or not) and returns their calls: one
// row per "AllReduce: opCount ... comm 0x... [nranks=N] stream 0x..."
// line.
//
// Processes are told apart by the "host:pid:tid" line prefix (by file
// without it). A communicator is known by its init line: "commId 0x..."
// (ncclCommInitRank*) is its id on every rank; a "ncclCommSplit" child's
// id is derived from its parent's id, split count and color. A process's
// global rank is its rank in the largest communicator it initialised with
// a commId. A call's number is its position among its rank's calls on its
// communicator (NCCL's opCount counts kernel launches, which calls of one
// group share). The log holds no times: they are 0.
func ImportNCCLLog(files []NamedReader) (*Job, error) {
	procs := map[string]*logProc{}
	var procOrder []string
	var calls []logCall
	for _, f := range files {
		if err := readNCCLLogCalls(f, procs, &procOrder, &calls); err != nil {
			return nil, err
		}
	}
	if len(calls) == 0 {
		return nil, fmt.Errorf("%s: no call lines (\"AllReduce: opCount ...\"): log with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL", fileNames(files))
	}
	return assembleNCCLLog(procs, procOrder, calls)
}

func fileNames(files []NamedReader) string {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

func readNCCLLogCalls(f NamedReader, procs map[string]*logProc, procOrder *[]string, calls *[]logCall) error {
	sc := bufio.NewScanner(f.R)
	sc.Buffer(make([]byte, 64<<10), MaxLogLineBytes)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		const info = "NCCL INFO "
		i := strings.Index(line, info)
		if i < 0 {
			continue
		}
		pre := parsePrefix(line[:i])
		msg := line[i+len(info):]
		proc := f.Name
		if pre.host != "" {
			proc = pre.host + ":" + strconv.Itoa(pre.pid)
		}
		p := procs[proc]
		if p == nil {
			p = &logProc{comms: map[string]*logComm{}, host: pre.host}
			procs[proc] = p
			*procOrder = append(*procOrder, proc)
		}
		where := fmt.Sprintf("%s:%d", f.Name, n)
		if c, ok, err := parseCollLine(msg); ok {
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			c.Host = pre.host
			ptr := msg[strings.Index(msg, " comm ")+6:]
			ptr, _, _ = strings.Cut(ptr, " ")
			*calls = append(*calls, logCall{proc: proc, ptr: ptr, row: c, where: where})
			continue
		}
		if strings.Contains(msg, " - Init ") && strings.Contains(msg, "comm ") {
			if err := p.initLine(msg, where); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s: a line longer than %d bytes", f.Name, MaxLogLineBytes)
		}
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}

// initLine reads "ncclCommInitRankConfig comm 0x.. rank 1 nranks 2 cudaDev
// 1 nvmlDev 1 busId 70 commId 0x.. - Init START" and "ncclCommSplit comm
// 0x.. rank 0 nranks 2 ... parent 0x.. splitCount 1 color 0 key 0 - Init
// COMPLETE".
func (p *logProc) initLine(msg, where string) error {
	f := strings.Fields(msg[:strings.Index(msg, " - Init ")])
	kv := map[string]string{}
	for i := 0; i+1 < len(f); i++ {
		if _, seen := kv[f[i]]; !seen {
			kv[f[i]] = f[i+1]
		}
	}
	ptr, okp := kv["comm"]
	rank, err1 := strconv.Atoi(kv["rank"])
	nranks, err2 := strconv.Atoi(kv["nranks"])
	if !okp || err1 != nil || err2 != nil {
		return nil // another line that mentions a comm
	}
	if nranks < 1 || nranks > MaxLogRanks || rank < 0 || rank >= nranks {
		return fmt.Errorf("init line of comm %s: rank %d of %d ranks", ptr, rank, nranks)
	}
	c := &logComm{rank: rank, nranks: nranks, where: where}
	if id, ok := kv["commId"]; ok {
		v, err := strconv.ParseUint(id, 0, 64)
		if err != nil {
			return fmt.Errorf("init line of comm %s: commId %q is not a number", ptr, id)
		}
		c.commID, c.hasID = v, true
	} else if parent, ok := kv["parent"]; ok {
		split, ok1 := kv["splitCount"]
		if !ok1 {
			split, ok1 = kv["childCount"]
		}
		s, err1 := strconv.ParseInt(split, 10, 64)
		color, err2 := strconv.ParseInt(kv["color"], 10, 64)
		if !ok1 || err1 != nil || err2 != nil {
			return fmt.Errorf("split init line of comm %s: want splitCount (or childCount) and color", ptr)
		}
		c.parent, c.split, c.color = parent, s, color
	} else {
		return fmt.Errorf("init line of comm %s has neither commId nor parent", ptr)
	}
	if old, seen := p.comms[ptr]; seen {
		if old.rank != c.rank || old.nranks != c.nranks || old.commID != c.commID || old.parent != c.parent {
			return fmt.Errorf("comm %s: init line differs from the one at %s (a pointer reused after ncclCommDestroy is not supported)", ptr, old.where)
		}
		return nil
	}
	p.comms[ptr] = c
	p.order = append(p.order, ptr)
	return nil
}

// parseCollLine reads "AllReduce: opCount 3 sendbuff 0x.. recvbuff 0x..
// count 1024 datatype 7 op 0 root 0 comm 0x.. [nranks=4] stream 0x..";
// ok is false for other lines.
func parseCollLine(msg string) (c CallRow, ok bool, err error) {
	name, rest, found := strings.Cut(msg, ": opCount ")
	if !found || strings.ContainsAny(name, " \t") {
		return c, false, nil
	}
	f := strings.Fields(rest)
	// opCount sendbuff S recvbuff R count N datatype D op O root T comm C [nranks=N] stream S
	if len(f) < 18 || f[1] != "sendbuff" || f[3] != "recvbuff" || f[5] != "count" || f[7] != "datatype" ||
		f[9] != "op" || f[11] != "root" || f[13] != "comm" || !strings.HasPrefix(f[15], "[nranks=") || f[16] != "stream" {
		return c, true, fmt.Errorf("unreadable call line %q", msg)
	}
	coll, err := model.ParseCollective(name)
	if err != nil {
		return c, true, fmt.Errorf("call line: %w", err)
	}
	count, err := strconv.ParseInt(f[6], 10, 64)
	if err != nil || count < 0 {
		return c, true, fmt.Errorf("call line: count %q", f[6])
	}
	dt, err := strconv.Atoi(f[8])
	if err != nil || dt < 0 || dt >= len(ncclDatatypes) {
		return c, true, fmt.Errorf("call line: datatype %q is not an ncclDataType_t", f[8])
	}
	op, err1 := strconv.Atoi(f[10])
	root, err2 := strconv.Atoi(f[12])
	nranks, err3 := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(f[15], "[nranks="), "]"))
	if err1 != nil || err2 != nil || err3 != nil || op < 0 || nranks < 1 || nranks > MaxLogRanks || root < -1 || root >= nranks {
		return c, true, fmt.Errorf("call line: op %q, root %q or nranks %q out of range", f[10], f[12], f[15])
	}
	c = CallRow{Op: coll.String(), Count: count, Datatype: ncclDatatypes[dt], NRanks: int32(nranks), Root: -1, Source: SourceHW}
	switch coll {
	case model.CollAllReduce, model.CollReduce, model.CollReduceScatter:
		c.RedOp = "premulsum"
		if op < len(ncclRedOps) {
			c.RedOp = ncclRedOps[op]
		}
	}
	switch coll {
	case model.CollBroadcast, model.CollReduce, model.CollSend, model.CollRecv:
		c.Root = int32(root) // the peer, for Send and Recv
	}
	if s := f[17]; s != "(nil)" {
		v, err := strconv.ParseUint(s, 0, 64)
		if err != nil {
			return c, true, fmt.Errorf("call line: stream %q is not a pointer", s)
		}
		c.Stream = v
	}
	return c, true, nil
}

// resolve gives a communicator its id: its commId, or for a split child
// a hash of its parent's id, split count and color.
func (p *logProc) resolve(proc, ptr string) (uint64, error) {
	c := p.comms[ptr]
	if c == nil {
		return 0, fmt.Errorf("process %s: comm %s has no init line (log with NCCL_DEBUG_SUBSYS=INIT,COLL from the start)", proc, ptr)
	}
	if c.hasID || c.id != 0 {
		if c.hasID {
			return c.commID, nil
		}
		return c.id, nil
	}
	if c.resolving {
		return 0, fmt.Errorf("%s: comm %s is its own ancestor", c.where, ptr)
	}
	c.resolving = true
	parent, err := p.resolve(proc, c.parent)
	c.resolving = false
	if err != nil {
		return 0, fmt.Errorf("%s: parent of comm %s: %w", c.where, ptr, err)
	}
	c.id = commIDOf("nccl-split", parent, uint64(c.split), uint64(c.color))
	return c.id, nil
}

func assembleNCCLLog(procs map[string]*logProc, procOrder []string, calls []logCall) (*Job, error) {
	// Each process's global rank: its rank in its largest commId communicator.
	global := map[string]int32{}
	byGlobal := map[int32]string{}
	for _, proc := range procOrder {
		p := procs[proc]
		best := (*logComm)(nil)
		for _, ptr := range p.order {
			if c := p.comms[ptr]; c.hasID && (best == nil || c.nranks > best.nranks) {
				best = c
			}
		}
		if best == nil {
			continue // a process that printed no init line: its calls fail below
		}
		g := int32(best.rank)
		if other, dup := byGlobal[g]; dup {
			return nil, fmt.Errorf("%s: processes %s and %s both have global rank %d (their largest communicators' ranks)", best.where, other, proc, g)
		}
		global[proc], byGlobal[g] = g, proc
	}
	comms := map[uint64]*CommInfo{}
	var commOrder []uint64
	for _, proc := range procOrder {
		p := procs[proc]
		if _, ok := global[proc]; !ok && len(p.order) > 0 {
			return nil, fmt.Errorf("%s: process %s initialised no communicator with a commId (ncclCommInitRank*): its global rank is unknown", p.comms[p.order[0]].where, proc)
		}
		for _, ptr := range p.order {
			c := p.comms[ptr]
			id, err := p.resolve(proc, ptr)
			if err != nil {
				return nil, err
			}
			ci := comms[id]
			if ci == nil {
				ci = &CommInfo{ID: id, Ranks: slices.Repeat([]int32{-1}, c.nranks)}
				comms[id] = ci
				commOrder = append(commOrder, id)
			}
			if len(ci.Ranks) != c.nranks {
				return nil, fmt.Errorf("%s: communicator %#x has %d ranks here, %d on another process", c.where, id, c.nranks, len(ci.Ranks))
			}
			if ci.Ranks[c.rank] >= 0 && ci.Ranks[c.rank] != global[proc] {
				return nil, fmt.Errorf("%s: communicator %#x rank %d is held by global ranks %d and %d", c.where, id, c.rank, ci.Ranks[c.rank], global[proc])
			}
			ci.Ranks[c.rank] = global[proc]
		}
	}
	job := &Job{Format: "nccl-log"}
	for _, id := range commOrder {
		ci := comms[id]
		if i := slices.Index(ci.Ranks, -1); i >= 0 {
			return nil, fmt.Errorf("communicator %#x: no log of its rank %d (give every rank's log, e.g. NCCL_DEBUG_FILE=log.%%h.%%p)", id, i)
		}
		job.Comms = append(job.Comms, *ci)
	}
	type seqKey struct {
		proc string
		comm uint64
	}
	seq := map[seqKey]int64{}
	for _, lc := range calls {
		p := procs[lc.proc]
		c := p.comms[lc.ptr]
		if c == nil {
			return nil, fmt.Errorf("%s: comm %s has no init line before it (log with NCCL_DEBUG_SUBSYS=INIT,COLL from the start)", lc.where, lc.ptr)
		}
		id, err := p.resolve(lc.proc, lc.ptr)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lc.where, err)
		}
		if int(lc.row.NRanks) != c.nranks {
			return nil, fmt.Errorf("%s: [nranks=%d] but comm %s was initialised with %d ranks", lc.where, lc.row.NRanks, lc.ptr, c.nranks)
		}
		r := lc.row
		r.Comm, r.Rank = id, int32(c.rank)
		k := seqKey{lc.proc, id}
		r.Call = seq[k]
		seq[k]++
		job.Calls = append(job.Calls, r)
	}
	return job, nil
}
