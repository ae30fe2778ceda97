package traces

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// kinetoTrace is the part of a PyTorch profiler (Kineto) JSON trace the
// importer reads.
type kinetoTrace struct {
	DistributedInfo *struct {
		Rank      *int32 `json:"rank"`
		WorldSize int32  `json:"world_size"`
	} `json:"distributedInfo"`
	BaseTimeNanoseconds int64         `json:"baseTimeNanoseconds"`
	TraceEvents         []kinetoEvent `json:"traceEvents"`
}

type kinetoEvent struct {
	Name string         `json:"name"`
	Ph   string         `json:"ph"`
	Cat  string         `json:"cat"`
	Ts   float64        `json:"ts"`
	Dur  float64        `json:"dur"`
	Args map[string]any `json:"args"`
}

// kinetoTypes maps c10's ScalarType names, which record_param_comms
// writes as "dtype", to datatypes.
var kinetoTypes = map[string]string{
	"Float": "float32", "Half": "float16", "BFloat16": "bfloat16", "Double": "float64", "Int": "int32",
	"Long": "int64", "Byte": "uint8", "Char": "int8", "Bool": "uint8", "Float8_e4m3fn": "float8e4m3",
	"Float8_e5m2": "float8e5m2", "UInt32": "uint32", "UInt64": "uint64",
}

// kinetoColl maps PyTorch's collective names ("allreduce", "_allgather_base",
// "reduce_scatter_tensor_coalesced", "all_to_allv", "send", ...) to
// collectives; a barrier runs as an AllReduce.
func kinetoColl(name string) (model.Collective, bool) {
	n := strings.ToLower(strings.ReplaceAll(name, "_", ""))
	for _, m := range []struct {
		key  string
		coll model.Collective
	}{
		{"allreduce", model.CollAllReduce}, {"reducescatter", model.CollReduceScatter}, {"allgather", model.CollAllGather},
		{"alltoall", model.CollAlltoAll}, {"broadcast", model.CollBroadcast}, {"reduce", model.CollReduce},
		{"send", model.CollSend}, {"recv", model.CollRecv}, {"barrier", model.CollAllReduce},
	} {
		if strings.Contains(n, m.key) {
			return m.coll, true
		}
	}
	return 0, false
}

// ImportKineto reads PyTorch profiler traces (Kineto's Chrome trace JSON),
// one file per rank, and returns a row per NCCL kernel that carries
// collective metadata ("Collective name", "In msg nelems", "Out msg
// nelems", "Group size", "dtype", "Process Group Name", "Process Group
// Ranks", "Src Rank" / "Dst Rank", "stream": what Kineto copies onto a
// kernel from its record_param_comms op).
//
// The file's rank is distributedInfo.rank; a call's rank in its
// communicator is that rank's place in "Process Group Ranks"; the
// communicator's id is CommID("pg", name). NCCL's count is In msg nelems
// (Out msg nelems for ReduceScatter and Recv; over the group size for
// AlltoAll). Times are the kernel's (baseTimeNanoseconds plus ts and
// dur), the enqueue time its record_param_comms op's (same "External
// id"). A call's number is its position among its rank's calls on its
// communicator, in kernel start order. PyTorch records no root: a
// Broadcast or Reduce gets root 0.
func ImportKineto(files []NamedReader) (*Job, error) {
	job := &Job{Format: "kineto"}
	comms := map[uint64]*CommInfo{}
	var order []uint64
	byRank := map[int32]string{}
	for _, f := range files {
		var tr kinetoTrace
		if err := json.NewDecoder(io.LimitReader(f.R, 1<<34)).Decode(&tr); err != nil {
			return nil, fmt.Errorf("%s: not a Kineto JSON trace: %w", f.Name, err)
		}
		if tr.DistributedInfo == nil || tr.DistributedInfo.Rank == nil || *tr.DistributedInfo.Rank < 0 {
			return nil, fmt.Errorf("%s: no distributedInfo.rank: trace a distributed run (torch.distributed initialised before profiling)", f.Name)
		}
		rank := *tr.DistributedInfo.Rank
		if other, dup := byRank[rank]; dup {
			return nil, fmt.Errorf("%s and %s are both rank %d", other, f.Name, rank)
		}
		byRank[rank] = f.Name
		rows, err := kinetoCalls(f.Name, rank, &tr, comms, &order)
		if err != nil {
			return nil, err
		}
		job.Calls = append(job.Calls, rows...)
	}
	for _, id := range order {
		job.Comms = append(job.Comms, *comms[id])
	}
	if len(job.Calls) == 0 {
		return nil, fmt.Errorf("%s: no NCCL kernels with collective metadata (\"Collective name\")", fileNames(files))
	}
	return job, nil
}

func kinetoCalls(name string, rank int32, tr *kinetoTrace, comms map[uint64]*CommInfo, order *[]uint64) ([]CallRow, error) {
	enqueue := map[string]float64{} // External id -> record_param_comms ts
	for _, ev := range tr.TraceEvents {
		if ev.Ph == "X" && ev.Name == "record_param_comms" {
			if id, ok := ev.Args["External id"]; ok {
				enqueue[fmt.Sprint(id)] = ev.Ts
			}
		}
	}
	type kernel struct {
		ev  *kinetoEvent
		idx int
	}
	var ks []kernel
	for i := range tr.TraceEvents {
		ev := &tr.TraceEvents[i]
		if ev.Ph == "X" && ev.Cat == "kernel" && ev.Args["Collective name"] != nil {
			ks = append(ks, kernel{ev, i})
		}
	}
	slices.SortStableFunc(ks, func(a, b kernel) int { return cmp.Compare(a.ev.Ts, b.ev.Ts) })
	seq := map[uint64]int64{}
	var rows []CallRow
	for _, k := range ks {
		ev := k.ev
		where := fmt.Sprintf("%s: trace event %d (%s)", name, k.idx, ev.Name)
		str := func(key string) string { s, _ := ev.Args[key].(string); return s }
		num := func(key string) (int64, bool) { return argInt(ev.Args, key) }
		coll, ok := kinetoColl(str("Collective name"))
		if !ok {
			return nil, fmt.Errorf("%s: collective %q is not supported", where, str("Collective name"))
		}
		dt, ok := kinetoTypes[str("dtype")]
		if !ok {
			return nil, fmt.Errorf("%s: dtype %q unknown", where, str("dtype"))
		}
		pg := str("Process Group Name")
		members, err := parseKinetoRanks(str("Process Group Ranks"))
		if err != nil {
			return nil, fmt.Errorf("%s: Process Group Ranks: %w", where, err)
		}
		if size, ok := num("Group size"); ok && int(size) != len(members) {
			return nil, fmt.Errorf("%s: Group size %d but %d Process Group Ranks", where, size, len(members))
		}
		cr := slices.Index(members, rank)
		if cr < 0 {
			return nil, fmt.Errorf("%s: rank %d is not in process group %q (ranks %v)", where, rank, pg, members)
		}
		id := CommID("pg", pg)
		if c := comms[id]; c == nil {
			comms[id] = &CommInfo{ID: id, Name: pg, Ranks: members}
			*order = append(*order, id)
		} else if !slices.Equal(c.Ranks, members) {
			return nil, fmt.Errorf("%s: process group %q has ranks %v here, %v elsewhere", where, pg, members, c.Ranks)
		}
		in, ok1 := num("In msg nelems")
		out, ok2 := num("Out msg nelems")
		if !ok1 || !ok2 || in < 0 || out < 0 {
			return nil, fmt.Errorf("%s: In msg nelems / Out msg nelems missing or negative", where)
		}
		c := CallRow{Comm: id, Rank: int32(cr), NRanks: int32(len(members)), Op: coll.String(), Datatype: dt, Root: -1,
			Count: in, Source: SourceHW, Call: seq[id]}
		seq[id]++
		switch coll {
		case model.CollReduceScatter, model.CollRecv:
			c.Count = out
		case model.CollAlltoAll:
			if in%int64(len(members)) != 0 {
				return nil, fmt.Errorf("%s: AlltoAll of %d elements over %d ranks", where, in, len(members))
			}
			c.Count = in / int64(len(members))
		case model.CollBroadcast, model.CollReduce:
			c.Root = 0
		}
		switch coll {
		case model.CollAllReduce, model.CollReduce, model.CollReduceScatter:
			c.RedOp = "sum"
		case model.CollSend, model.CollRecv:
			key := map[bool]string{true: "Dst Rank", false: "Src Rank"}[coll == model.CollSend]
			p, ok := num(key)
			if !ok || p < 0 || p >= int64(len(members)) {
				return nil, fmt.Errorf("%s: %s missing or outside the group", where, key)
			}
			c.Root = int32(p)
		}
		if s, ok := num("stream"); ok && s >= 0 {
			c.Stream = uint64(s)
		}
		if math.IsNaN(ev.Ts) || math.IsNaN(ev.Dur) || math.Abs(ev.Ts) > 9e12 || ev.Dur < 0 || ev.Dur > 9e12 {
			return nil, fmt.Errorf("%s: bad ts/dur", where)
		}
		base := tr.BaseTimeNanoseconds
		c.StartNs = base + int64(math.Round(ev.Ts*1000))
		c.EndNs = c.StartNs + int64(math.Round(ev.Dur*1000))
		c.EnqueueNs = c.StartNs
		if id, ok := ev.Args["External id"]; ok {
			if ts, ok := enqueue[fmt.Sprint(id)]; ok && !math.IsNaN(ts) && math.Abs(ts) <= 9e12 {
				c.EnqueueNs = base + int64(math.Round(ts*1000))
			}
		}
		rows = append(rows, c)
	}
	return rows, nil
}

// parseKinetoRanks reads "[0, 1, 2, 3]"; a list record_param_comms
// truncated ("[0, 1, ..., 63]") is refused.
func parseKinetoRanks(s string) ([]int32, error) {
	s = strings.TrimSpace(s)
	if !strings.HasPrefix(s, "[") || !strings.HasSuffix(s, "]") {
		return nil, fmt.Errorf("%q is not a list of ranks", s)
	}
	if strings.Contains(s, "...") {
		return nil, fmt.Errorf("%q is truncated (PyTorch lists at most 30 ranks): the group's ranks are unknown", s)
	}
	var out []int32
	for _, f := range strings.Split(s[1:len(s)-1], ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q: %q is not a rank", s, f)
		}
		out = append(out, int32(v))
	}
	if err := checkCommRanks(out); err != nil {
		return nil, fmt.Errorf("%q: %w", s, err)
	}
	return out, nil
}
