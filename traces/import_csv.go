package traces

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// maxImportRecordBytes bounds one CSV record or one JSON trace event.
const maxImportRecordBytes = 1 << 20

// csvAliases maps accepted CSV header names (lower case) to call columns.
// Besides the CallRow column names, nccl-tests style names are accepted:
// size (bytes; gives count when count is absent), type, time/time_us
// (duration in µs; gives end_ns from start_ns).
var csvAliases = map[string]string{
	"collective": "op", "coll": "op", "operation": "op", "algo": "algorithm", "proto": "protocol",
	"type": "datatype", "dtype": "datatype", "reduction": "redop", "op_reduce": "redop",
	"peer": "root", "size": "bytes", "size_bytes": "bytes", "time": "time_us", "time_us": "time_us",
	"duration_us": "time_us", "duration_ns": "duration_ns", "opcount": "call", "seq": "call",
}

// ImportCallsCSV reads call rows from CSV with a header row and calls emit
// for each. Columns are matched by name (CallRow's column names, or the
// aliases of nccl-tests style tables: size, type, time); unknown columns are
// ignored. Defaults: root -1, source "hw"; without start_ns, calls of a rank
// are laid end to end from 0. Errors name the file and line.
func ImportCallsCSV(r io.Reader, name string, emit func(CallRow) error) error {
	cr := csv.NewReader(&limitedLines{r: r})
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	header, err := cr.Read()
	if err != nil {
		return fmt.Errorf("%s: reading the header: %w", name, err)
	}
	col := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(h))
		if a, ok := csvAliases[h]; ok {
			h = a
		}
		if _, dup := col[h]; !dup {
			col[h] = i
		}
	}
	if _, ok := col["op"]; !ok {
		return fmt.Errorf("%s: header has no op (or collective) column: %q", name, strings.Join(header, ","))
	}
	clock := map[int32]int64{} // per rank, for rows without start_ns
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		row, err := csvCall(rec, col, clock)
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := emit(row); err != nil {
			return err
		}
	}
}

func csvCall(rec []string, col map[string]int, clock map[int32]int64) (CallRow, error) {
	get := func(k string) (string, bool) {
		i, ok := col[k]
		if !ok || i >= len(rec) {
			return "", false
		}
		v := strings.TrimSpace(rec[i])
		return v, v != ""
	}
	var err error
	num := func(k string, def int64) int64 {
		v, ok := get(k)
		if !ok || err != nil {
			return def
		}
		n, e := strconv.ParseInt(v, 0, 64)
		if e != nil {
			f, e2 := strconv.ParseFloat(v, 64)
			if e2 != nil || math.IsNaN(f) || math.Abs(f) > 9e18 {
				err = fmt.Errorf("column %s: %q is not a number", k, v)
				return def
			}
			n = int64(f)
		}
		return n
	}
	unum := func(k string) uint64 {
		v, ok := get(k)
		if !ok || err != nil {
			return 0
		}
		if n, e := strconv.ParseUint(v, 0, 64); e == nil {
			return n
		}
		return uint64(num(k, 0))
	}
	small := func(k string, def int64) int32 {
		n := num(k, def)
		if n < math.MinInt32 || n > math.MaxInt32 {
			if err == nil {
				err = fmt.Errorf("column %s: %d out of range", k, n)
			}
			return 0
		}
		return int32(n)
	}
	c := CallRow{Source: SourceHW}
	opS, _ := get("op")
	op, perr := model.ParseCollective(strings.TrimSuffix(opS, "_perf"))
	if perr != nil {
		return c, perr
	}
	c.Op = op.String()
	if v, ok := get("algorithm"); ok {
		a, e := model.ParseAlgorithm(v)
		if e != nil {
			return c, e
		}
		c.Algorithm = a.String()
	}
	if v, ok := get("protocol"); ok {
		p, e := model.ParseProtocol(v)
		if e != nil {
			return c, e
		}
		c.Protocol = p.String()
	}
	c.Job, _ = get("job")
	c.Host, _ = get("host")
	if v, ok := get("source"); ok {
		c.Source = v
	}
	c.Datatype, _ = get("datatype")
	c.RedOp, _ = get("redop")
	c.Comm = unum("comm")
	c.Call = num("call", 0)
	c.Rank = small("rank", 0)
	c.NRanks = small("nranks", 0)
	c.Channels = small("channels", 0)
	c.Root = small("root", -1)
	c.Stream = unum("stream")
	c.Count = num("count", -1)
	if c.Count < 0 {
		c.Count = 0
		if b := num("bytes", -1); b >= 0 {
			if size, ok := DatatypeSize(c.Datatype); ok {
				c.Count = b / int64(size)
			} else if err == nil {
				err = fmt.Errorf("bytes given but datatype %q unknown: cannot derive count", c.Datatype)
			}
		}
	}
	dur := num("duration_ns", -1)
	if t, ok := get("time_us"); ok && err == nil {
		f, e := strconv.ParseFloat(t, 64)
		if e != nil || f < 0 || f > 9e12 {
			return c, fmt.Errorf("column time: %q is not a duration in µs", t)
		}
		dur = int64(math.Round(f * 1000))
	}
	if _, ok := get("start_ns"); ok {
		c.StartNs = num("start_ns", 0)
	} else {
		c.StartNs = clock[c.Rank]
	}
	c.EnqueueNs = num("enqueue_ns", c.StartNs)
	c.EndNs = num("end_ns", c.StartNs+max(dur, 0))
	if err != nil {
		return c, err
	}
	if c.EndNs < c.StartNs {
		return c, fmt.Errorf("end_ns %d before start_ns %d", c.EndNs, c.StartNs)
	}
	clock[c.Rank] = c.EndNs
	return c, nil
}

// limitedLines fails reads once a single line grows past maxImportRecordBytes.
type limitedLines struct {
	r   io.Reader
	run int
}

func (l *limitedLines) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	for _, b := range p[:n] {
		if b == '\n' {
			l.run = 0
		} else if l.run++; l.run > maxImportRecordBytes {
			return 0, fmt.Errorf("line longer than %d bytes", maxImportRecordBytes)
		}
	}
	return n, err
}

// chromeEvent is the part of a trace event the kernel importer reads.
type chromeEvent struct {
	Name string          `json:"name"`
	Ph   string          `json:"ph"`
	Cat  string          `json:"cat"`
	Ts   float64         `json:"ts"`
	Dur  float64         `json:"dur"`
	Pid  json.RawMessage `json:"pid"`
	Tid  json.RawMessage `json:"tid"`
	Args map[string]any  `json:"args"`
}

// ImportKernelsJSON reads a Chrome/PyTorch-profiler trace (a JSON object
// with "traceEvents", or a bare array) and emits a call row for every NCCL
// kernel ("ncclKernel_AllReduce_RING_LL_Sum_float", "ncclDevKernel_...")
// with its op, algorithm, protocol, reduction and datatype when the kernel
// name carries them. The rank comes from the kernel's args ("rank"), else
// from "distributedInfo" when it precedes "traceEvents", else from args
// "device". Times are the kernel's ts/dur (µs) in ns. Events are decoded
// one at a time: memory does not grow with the file.
func ImportKernelsJSON(r io.Reader, name string, emit func(CallRow) error) error {
	dec := json.NewDecoder(io.LimitReader(r, math.MaxInt64))
	rank := int32(-1)
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	switch tok {
	case json.Delim('['):
		return kernelEvents(dec, name, rank, emit)
	case json.Delim('{'):
	default:
		return fmt.Errorf("%s: want a JSON object or array, got %v", name, tok)
	}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		key, _ := kt.(string)
		switch key {
		case "traceEvents":
			t, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			if t != json.Delim('[') {
				return fmt.Errorf("%s: traceEvents is not an array", name)
			}
			if err := kernelEvents(dec, name, rank, emit); err != nil {
				return err
			}
		case "distributedInfo":
			var di struct {
				Rank *int32 `json:"rank"`
			}
			if err := dec.Decode(&di); err != nil {
				return fmt.Errorf("%s: distributedInfo: %w", name, err)
			}
			if di.Rank != nil && *di.Rank >= 0 {
				rank = *di.Rank
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("%s: %q: %w", name, key, err)
			}
		}
	}
	return nil
}

func kernelEvents(dec *json.Decoder, name string, rank int32, emit func(CallRow) error) error {
	for i := 0; dec.More(); i++ {
		var ev chromeEvent
		if err := dec.Decode(&ev); err != nil {
			return fmt.Errorf("%s: trace event %d: %w", name, i, err)
		}
		if ev.Ph != "X" || !(strings.HasPrefix(ev.Name, "ncclKernel_") || strings.HasPrefix(ev.Name, "ncclDevKernel_")) {
			continue
		}
		if math.IsNaN(ev.Ts) || math.IsNaN(ev.Dur) || math.Abs(ev.Ts) > 9e12 || ev.Dur < 0 || ev.Dur > 9e12 {
			return fmt.Errorf("%s: trace event %d (%s): bad ts/dur", name, i, ev.Name)
		}
		c := parseKernelName(ev.Name)
		c.Rank, c.Root, c.Source = rank, -1, SourceHW
		if v, ok := argInt(ev.Args, "rank"); ok {
			c.Rank = int32(v)
		} else if c.Rank < 0 {
			if v, ok := argInt(ev.Args, "device"); ok {
				c.Rank = int32(v)
			} else {
				c.Rank = 0
			}
		}
		if v, ok := argInt(ev.Args, "stream"); ok {
			c.Stream = uint64(v)
		}
		if v, ok := argInt(ev.Args, "In msg nelems"); ok {
			c.Count = v
		}
		if v, ok := argInt(ev.Args, "Group size"); ok {
			c.NRanks = int32(v)
		}
		c.StartNs = int64(math.Round(ev.Ts * 1000))
		c.EnqueueNs = c.StartNs
		c.EndNs = c.StartNs + int64(math.Round(ev.Dur*1000))
		if err := emit(c); err != nil {
			return err
		}
	}
	return nil
}

func argInt(args map[string]any, k string) (int64, bool) {
	switch v := args[k].(type) {
	case float64:
		if v >= math.MinInt32 && v <= math.MaxInt64/2 && v == math.Trunc(v) {
			return int64(v), true
		}
	case string:
		n, err := strconv.ParseInt(v, 0, 64)
		return n, err == nil
	}
	return 0, false
}

var kernelTypes = map[string]string{
	"i8": "int8", "int8_t": "int8", "u8": "uint8", "uint8_t": "uint8", "i32": "int32", "int": "int32", "int32_t": "int32",
	"u32": "uint32", "uint32_t": "uint32", "i64": "int64", "int64_t": "int64", "u64": "uint64", "uint64_t": "uint64",
	"f16": "float16", "half": "float16", "f32": "float32", "float": "float32", "f64": "float64", "double": "float64",
	"bf16": "bfloat16", "__nv_bfloat16": "bfloat16", "e4m3": "float8e4m3", "e5m2": "float8e5m2",
	"int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
	"float16": "float16", "float32": "float32", "float64": "float64", "bfloat16": "bfloat16",
}

var kernelRedOps = map[string]string{"sum": "sum", "prod": "prod", "max": "max", "min": "min", "avg": "avg",
	"premulsum": "premulsum", "sumpostdiv": "sumpostdiv"}

// parseKernelName reads op, algorithm, protocol, reduction and datatype
// from an NCCL kernel name such as "ncclDevKernel_AllReduce_Sum_f32_RING_LL(...)".
func parseKernelName(s string) CallRow {
	var c CallRow
	if i := strings.IndexAny(s, "(<"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, "_")[1:]
	for i := 0; i < len(parts); i++ {
		p := parts[i]
		lp := strings.ToLower(p)
		if op, err := model.ParseCollective(p); err == nil && c.Op == "" {
			c.Op = op.String()
			continue
		}
		// Two-token algorithm names: COLLNET_DIRECT, COLLNET_CHAIN, NVLS_TREE.
		if i+1 < len(parts) {
			if a, err := model.ParseAlgorithm(p + parts[i+1]); err == nil && c.Algorithm == "" {
				c.Algorithm = a.String()
				i++
				continue
			}
		}
		if a, err := model.ParseAlgorithm(p); err == nil && c.Algorithm == "" {
			c.Algorithm = a.String()
			continue
		}
		if pr, err := model.ParseProtocol(p); err == nil && c.Protocol == "" {
			c.Protocol = pr.String()
			continue
		}
		if r, ok := kernelRedOps[lp]; ok && c.RedOp == "" {
			c.RedOp = r
			continue
		}
		if t, ok := kernelTypes[lp]; ok && c.Datatype == "" {
			c.Datatype = t
		}
	}
	if c.Op == "" {
		c.Op = "Unknown"
	}
	return c
}
