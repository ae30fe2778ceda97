package main

// nccl-tests compatibility: the flags, defaults, program names and table
// format of NVIDIA's nccl-tests (src/common.cu and src/util.cu of
// nccl-tests 2.19.6), shared by `run` (the host device) and `run gpu`, so
// that scripts and parsers written for all_reduce_perf and friends work on
// our tables.

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twinccl/twinccl/exec/hw/transport"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// ntVersion is the nccl-tests release whose output format the tables
// follow; ncclVersionCode is NCCL_VERSION_CODE of the NCCL we model.
const (
	ntVersion       = "2.19.6"
	ncclVersionCode = 22809
)

// ntPerf maps nccl-tests' program names to collectives.
var ntPerf = []struct {
	name string
	coll model.Collective
}{
	{"all_reduce_perf", model.CollAllReduce},
	{"all_gather_perf", model.CollAllGather},
	{"reduce_scatter_perf", model.CollReduceScatter},
	{"broadcast_perf", model.CollBroadcast},
	{"reduce_perf", model.CollReduce},
	{"alltoall_perf", model.CollAlltoAll},
	{"sendrecv_perf", model.CollSendRecv},
}

// ntUnsupported are nccl-tests programs we have no collective for.
var ntUnsupported = map[string]string{
	"gather_perf":    "ncclGather",
	"scatter_perf":   "ncclScatter",
	"hypercube_perf": "the hypercube exchange",
	"alltoallv_perf": "ncclAlltoAllv",
}

// perfCollective is the collective of nccl-tests program name (a base
// name such as all_reduce_perf); ok is false when name is no nccl-tests
// program, and err says when it is one we cannot run.
func perfCollective(name string) (c model.Collective, ok bool, err error) {
	for _, p := range ntPerf {
		if p.name == name {
			return p.coll, true, nil
		}
	}
	if what, bad := ntUnsupported[name]; bad {
		return 0, true, &usageError{fmt.Sprintf("%s: twinccl does not model %s; it runs %s", name, what, perfNames())}
	}
	return 0, false, nil
}

// perfNames lists the program names we run.
func perfNames() string {
	var s []string
	for _, p := range ntPerf {
		s = append(s, p.name)
	}
	return strings.Join(s, ", ")
}

// perfName is nccl-tests' program name of collective c.
func perfName(c model.Collective) string {
	for _, p := range ntPerf {
		if p.coll == c {
			return p.name
		}
	}
	return strings.ToLower(c.String()) + "_perf"
}

// ntTypeName is nccl-tests' name of a datatype (test_typenames).
func ntTypeName(d model.Dtype) string {
	switch d {
	case model.DtypeFP16:
		return "half"
	case model.DtypeFP32:
		return "float"
	case model.DtypeFP64:
		return "double"
	case model.DtypeBF16:
		return "bfloat16"
	}
	return d.String()
}

// reduces reports whether collective c takes a reduction operation in
// nccl-tests' tables (the others print "none"). SendRecv does not reduce,
// but sendrecv_perf loops over -o and prints it all the same.
func reduces(c model.Collective) bool {
	switch c {
	case model.CollAllReduce, model.CollReduceScatter, model.CollReduce, model.CollSendRecv:
		return true
	}
	return false
}

// rooted reports whether collective c has a root.
func rooted(c model.Collective) bool {
	return c == model.CollBroadcast || c == model.CollReduce
}

// ntCounts is nccl-tests' getCollByteCount for a sweep size of size bytes
// of elements of es bytes on n ranks, in elements: param is the count
// passed to NCCL (the table's count column), send and recv the buffers'
// counts (the size column is the larger, in bytes), sendOff and recvOff
// the in-place offsets of the send and receive buffers per rank (the rank
// times it) inside the one in-place buffer. AllGather, ReduceScatter and
// AlltoAll round the per-rank count down to 16 bytes, as nccl-tests does.
func ntCounts(c model.Collective, size, es int64, n int) (param, send, recv, sendOff, recvOff int64) {
	count := size / es
	base := func() int64 { return (count / int64(n)) &^ (16/es - 1) }
	switch c {
	case model.CollAllGather:
		b := base()
		return b, b, b * int64(n), b, 0
	case model.CollReduceScatter:
		b := base()
		return b, b * int64(n), b, 0, b
	case model.CollAlltoAll:
		b := base()
		return b, b * int64(n), b * int64(n), 0, 0
	}
	return count, count, count, 0, 0
}

// ntOpts are the options run (the host device) and run gpu share: nccl-tests'
// flags with their meaning and defaults, and twinccl's.
type ntOpts struct {
	np                int
	nthreads, ngpus   int
	minB, maxB        int64
	stepB, factor     int64
	iters, aggIters   int
	warmup, check     int
	ops               []string // each --op/-o: a collective or a reduction
	coll              string   // --coll
	dtype, redop      string   // -d/--datatype/--dtype, --redop
	root              int
	average           int
	blocking          int
	graph             int
	timeout           time.Duration
	algo, proto       string
	channels          int
	trace             string
	progress          bool
	columns           bool // --twinccl-columns
	inPlace           bool // --inplace: run the in-place half too
	version           bool
	perf              string // the nccl-tests program name given as an argument
	visited           map[string]bool
	usageHint         string
	collV             model.Collective
	dtypes            []model.Dtype
	rops              []model.RedOp
	algoV             model.Algorithm
	protoV            model.Protocol
	algoSet, protoSet bool
}

// Value types that let one variable take several flag names (-b and
// --minbytes) with nccl-tests' number syntax (strtol base 0).

type intVal struct{ p *int }

func (v intVal) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v intVal) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 32)
	if err != nil {
		return errors.New("not an integer")
	}
	*v.p = int(n)
	return nil
}

type int64Val struct{ p *int64 }

func (v int64Val) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v int64Val) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return errors.New("not an integer")
	}
	*v.p = n
	return nil
}

// sizeVal reads a byte count as nccl-tests' parsesize does: a number,
// fractions allowed, with an optional K, M or G (powers of 1024).
type sizeVal struct{ p *int64 }

func (v sizeVal) String() string {
	if v.p == nil {
		return "0"
	}
	return strconv.FormatInt(*v.p, 10)
}

func (v sizeVal) Set(s string) error {
	n, err := parseSizeArg(s)
	if err != nil {
		return err
	}
	*v.p = n
	return nil
}

// parseSizeArg is model.ParseSize, with fractions ("1.5G") as nccl-tests
// takes them.
func parseSizeArg(s string) (int64, error) {
	if n, err := model.ParseSize(s); err == nil {
		return n, nil
	}
	t := strings.TrimSpace(s)
	mult := 1.0
	if k := len(t); k > 0 {
		switch t[k-1] {
		case 'K', 'k':
			mult, t = 1<<10, t[:k-1]
		case 'M', 'm':
			mult, t = 1<<20, t[:k-1]
		case 'G', 'g':
			mult, t = 1<<30, t[:k-1]
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f*mult > 1<<62 {
		return 0, fmt.Errorf("bad size %q (want bytes with an optional K, M or G: 1024, 64K, 1.5G)", s)
	}
	return int64(f * mult), nil
}

// listVal collects every value of a flag given several times.
type listVal struct{ p *[]string }

func (v listVal) String() string {
	if v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}
func (v listVal) Set(s string) error { *v.p = append(*v.p, s); return nil }

type strVal struct{ p *string }

func (v strVal) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}
func (v strVal) Set(s string) error { *v.p = s; return nil }

type boolVal struct{ p *bool }

func (v boolVal) String() string   { return strconv.FormatBool(v.p != nil && *v.p) }
func (v boolVal) IsBoolFlag() bool { return true }
func (v boolVal) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("want true or false")
	}
	*v.p = b
	return nil
}

// durVal is a timeout: a Go duration (30s, 2m) or whole seconds as
// nccl-tests' -T takes them.
type durVal struct{ p *time.Duration }

func (v durVal) String() string {
	if v.p == nil {
		return "0s"
	}
	return v.p.String()
}

func (v durVal) Set(s string) error {
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		if n < 0 || n > 1<<31 {
			return errors.New("seconds out of range")
		}
		*v.p = time.Duration(n) * time.Second
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("want seconds or a duration such as 30s")
	}
	*v.p = d
	return nil
}

// optSpec is one option: its names (single letters are nccl-tests' short
// forms, the others long forms; every name works with one or two dashes),
// its argument's placeholder ("" for a boolean) and its help.
type optSpec struct {
	names []string
	arg   string
	help  string
	val   flag.Value
}

// optGroup is a titled list of options for the help text.
type optGroup struct {
	title string
	opts  []optSpec
}

// register adds every option of groups to fs under each of its names.
func register(fs *flag.FlagSet, groups []optGroup) {
	for _, g := range groups {
		for _, o := range g.opts {
			for _, n := range o.names {
				fs.Var(o.val, n, o.help)
			}
		}
	}
}

// printOpts writes the groups' options as help text: names, argument and
// help wrapped below them.
func printOpts(w io.Writer, groups []optGroup) {
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, o := range g.opts {
			var names []string
			for _, n := range o.names {
				if len(n) == 1 || n == "np" {
					names = append(names, "-"+n)
				} else {
					names = append(names, "--"+n)
				}
			}
			head := "  " + strings.Join(names, ", ")
			if o.arg != "" {
				head += " " + o.arg
			}
			fmt.Fprintln(w, head)
			for _, l := range wrap(o.help, 72) {
				fmt.Fprintf(w, "        %s\n", l)
			}
		}
	}
}

// wrap breaks s into lines of at most width characters at spaces.
func wrap(s string, width int) []string {
	var lines []string
	cur := ""
	for _, word := range strings.Fields(s) {
		if cur != "" && len(cur)+1+len(word) > width {
			lines = append(lines, cur)
			cur = ""
		}
		if cur != "" {
			cur += " "
		}
		cur += word
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// ntGroups are the options both commands share; exec names the executor
// ("host" or "gpu") for what a flag does or does not do there.
func (o *ntOpts) ntGroups(exec string) []optGroup {
	gpu := exec == "gpu"
	threads := "Threads per process in nccl-tests. Ranks here are processes (one rank each), so -t only counts ranks: without -np, t x g ranks are launched on this host."
	gpus := "GPUs per thread in nccl-tests. Without -np, t x g ranks are launched on this host (-g 8: eight ranks)."
	if gpu {
		gpus += " Rank r runs on GPU r mod (visible GPUs)."
	} else {
		gpus += " On the host device every rank is a CPU process."
	}
	graph := "nccl-tests' CUDA graph launches: 0 times eager loops of launches; N >= 1 captures each timed loop of -n calls in a CUDA graph (run gpu times 5 launches of it, whatever N)."
	if !gpu {
		graph = "nccl-tests' CUDA graph launches. No effect on the host device (no CUDA); the header shows it."
	}
	blocking := "nccl-tests' blocking mode (0-3). No effect on run gpu: its loops are timed with CUDA events on the rank's stream (see -G)."
	if !gpu {
		blocking = "nccl-tests' blocking mode: 1 or 3 put a barrier after every iteration (1 inside the timed loop, 3 outside it); 0 and 2 need nothing, since the host device finishes every call before the next starts."
	}
	iters := "Timed iterations per size and placement."
	if gpu {
		iters = "Calls per timed loop; 0: 50, or 10 from 64 MiB on (twinccl's sweeps)."
	}
	warm := "Warm-up calls before each size is timed (nccl-tests warms every size of a x2 sweep up front; here each size is warmed just before it is timed)."
	return []optGroup{{"nccl-tests options (same names, meanings and defaults as nccl-tests; -b8 and --minbytes=8 work too)", []optSpec{
		{[]string{"t", "nthreads"}, "N", threads + " Default 1.", intVal{&o.nthreads}},
		{[]string{"g", "ngpus"}, "N", gpus + " Default 1.", intVal{&o.ngpus}},
		{[]string{"b", "minbytes"}, "SIZE", "Smallest size in bytes (K, M, G suffixes). Default 32M.", sizeVal{&o.minB}},
		{[]string{"e", "maxbytes"}, "SIZE", "Largest size in bytes. Default 32M.", sizeVal{&o.maxB}},
		{[]string{"i", "stepbytes"}, "SIZE", "Size increment when -f is 1. Default 1M.", sizeVal{&o.stepB}},
		{[]string{"f", "stepfactor"}, "F", "Size multiplication factor; 1 steps by -i instead. Default 1.", int64Val{&o.factor}},
		{[]string{"n", "iters"}, "N", iters + " Default 20.", intVal{&o.iters}},
		{[]string{"m", "agg_iters"}, "N", "Calls per iteration (nccl-tests groups them; here they run back to back). Default 1.", intVal{&o.aggIters}},
		{[]string{"w", "warmup_iters"}, "N", warm + " Default 1.", intVal{&o.warmup}},
		{[]string{"c", "check"}, "N", "Check the results N times per size and placement (0: not at all, #wrong shows N/A). A wrong element makes the exit status non-zero. Default 1.", intVal{&o.check}},
		{[]string{"o", "op"}, "OP", "A reduction, as in nccl-tests: sum, prod, max, min, avg, or all (each in turn). Or a collective, as twinccl's --op has always taken it: allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv. The two sets of names never overlap, so both may be given (--op reducescatter -o max); --redop and --coll say which explicitly. Default: sum and allreduce.", listVal{&o.ops}},
		{[]string{"d", "datatype", "dtype"}, "TYPE", "int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, or all (each in turn); fp16, fp32, fp64, bf16 are accepted too. Default float.", strVal{&o.dtype}},
		{[]string{"r", "root"}, "RANK", "Root of broadcast and reduce; -1: every rank in turn. Default 0.", intVal{&o.root}},
		{[]string{"a", "average"}, "0-3", "Time reported per size, over the ranks: 0 rank 0's, 1 the average, 2 the minimum, 3 the maximum. Default 1.", intVal{&o.average}},
		{[]string{"z", "blocking"}, "0-3", blocking + " Default 0.", intVal{&o.blocking}},
		{[]string{"G", "cudagraph"}, "N", graph + " Default 0.", intVal{&o.graph}},
		{[]string{"T", "timeout"}, "SECONDS", "Bound of every wait, in seconds or as a duration (30s, 2m): a lost or stuck peer ends the run within it. nccl-tests' 0 (no timeout) means the default here, since a lost rank must end the run. Default 30s.", durVal{&o.timeout}},
	}}}
}

// twincclGroup are the twinccl options both commands share.
func (o *ntOpts) twincclGroup(exec string) optGroup {
	trace := "Write the call trace to OUT.parquet (one row per out-of-place call per rank) and the event trace (one row per executed slice) to OUT.events.parquet."
	return optGroup{"twinccl options", []optSpec{
		{[]string{"np"}, "N", "Launch N local rank processes (this binary again). Without -np: t x g ranks when not inside a Slurm, Open MPI or torchrun job, else this process is one rank of that job.", intVal{&o.np}},
		{[]string{"coll"}, "NAME", "The collective, by name (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv), when a program name or --op does not give it.", strVal{&o.coll}},
		{[]string{"redop"}, "OP", "The reduction, by name (sum, prod, max, min, avg, all), as -o does.", strVal{&o.redop}},
		{[]string{"algo"}, "ALGO", "Force the algorithm (ring, tree, pat) instead of NCCL's tuner's choice. Not for alltoall and sendrecv: p2p transfers have no algorithm. NVLS, NVLSTree and CollNet are refused: they need multicast objects or a SHARP network this executor does not create, so where NCCL would pick them a call runs NCCL's next choice (one line says so).", strVal{&o.algo}},
		{[]string{"proto"}, "PROTO", "Force the protocol (ll, ll128, simple) instead of the tuner's (for alltoall and sendrecv: NCCL's per-transfer choice, LL up to the p2p LL threshold, else Simple; they take ll or simple).", strVal{&o.proto}},
		{[]string{"channels"}, "N", "Force the number of channels (0: the tuner's). Not for alltoall and sendrecv, which use the plan's p2p channels.", intVal{&o.channels}},
		{[]string{"trace"}, "OUT.parquet", trace, strVal{&o.trace}},
		{[]string{"twinccl-columns"}, "", "Add twinccl's columns after nccl-tests' ones: the algorithm, protocol and channels each size ran with (and, with run gpu --baseline nccl, NCCL's time, busbw and the ratio for each placement; --baseline nccl turns them on unless --twinccl-columns=false).", boolVal{&o.columns}},
		{[]string{"inplace"}, "", "Run every size in place too (nccl-tests' in-place columns: one buffer, the input at the rank's offset of an allgather's output, the output at the rank's offset of a reducescatter's input). --inplace=false skips that half, which halves a long sweep, and prints N/A in its columns. Default true.", boolVal{&o.inPlace}},
		{[]string{"progress"}, "", "Show the sweep's progress on stderr (which size of how many, elapsed time) even when stderr is not a terminal; on a terminal it is shown anyway.", boolVal{&o.progress}},
		{[]string{"version"}, "", "Print the version and exit.", boolVal{&o.version}},
	}}
}

// defaults sets nccl-tests' defaults (and twinccl's for the rest).
func (o *ntOpts) defaults() {
	o.nthreads, o.ngpus = 1, 1
	o.minB, o.maxB, o.stepB, o.factor = 32<<20, 32<<20, 1<<20, 1
	o.iters, o.aggIters, o.warmup, o.check = 20, 1, 1, 1
	o.average = 1
	o.timeout = 30 * time.Second
	o.inPlace = true
}

// splitAttached turns nccl-tests' attached short options ("-b8", "-dfloat")
// into separate arguments ("-b", "8") for the flag package, leaving every
// name fs knows ("-np") alone.
func splitAttached(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if len(a) > 2 && a[0] == '-' && a[1] != '-' && !strings.Contains(a, "=") && fs.Lookup(a[1:]) == nil {
			if f := fs.Lookup(a[1:2]); f != nil {
				if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); !ok || !bf.IsBoolFlag() {
					out = append(out, a[:2], a[2:])
					continue
				}
			}
		}
		out = append(out, a)
	}
	return out
}

// parseArgs parses args with fs, GNU style: flags and operands in any
// order, as nccl-tests' getopt_long takes them. The only operand is an
// nccl-tests program name (all_reduce_perf ...), which o.perf records.
func (o *ntOpts) parseArgs(fs *flag.FlagSet, args []string) error {
	args = splitAttached(fs, args)
	for {
		if err := fs.Parse(args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		a := fs.Arg(0)
		if _, ok, err := perfCollective(a); err != nil {
			return err
		} else if !ok {
			return &usageError{fmt.Sprintf("unexpected argument %q (an nccl-tests program name such as all_reduce_perf, or a flag; see %s)", a, o.usageHint)}
		}
		if o.perf != "" && o.perf != a {
			return &usageError{fmt.Sprintf("two programs: %s and %s", o.perf, a)}
		}
		o.perf = a
		args = fs.Args()[1:]
	}
	o.visited = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { o.visited[f.Name] = true })
	return nil
}

// set reports whether any of names was given.
func (o *ntOpts) set(names ...string) bool {
	for _, n := range names {
		if o.visited[n] {
			return true
		}
	}
	return false
}

// validate reads and checks the shared options: the collective, types,
// reductions, sizes and counts. Everything a rank would refuse is refused
// here, before any rank starts.
func (o *ntOpts) validate() error {
	bad := func(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }
	// The collective: the program name, --coll, or --op naming one.
	var from []string
	var colls []model.Collective
	addColl := func(what, name string) error {
		c, err := parseColl(name)
		if err != nil {
			return bad("%s %s", what, err)
		}
		from, colls = append(from, what+" "+name), append(colls, c)
		return nil
	}
	if o.perf != "" {
		c, _, _ := perfCollective(o.perf)
		from, colls = append(from, o.perf), append(colls, c)
	}
	if o.coll != "" {
		if err := addColl("--coll", o.coll); err != nil {
			return err
		}
	}
	// --op (-o): a reduction name, else a collective name.
	var ropNames, ropFrom []string
	for _, op := range o.ops {
		switch {
		case isRedOpName(op):
			ropNames, ropFrom = append(ropNames, op), append(ropFrom, "-o "+op)
		case isCollName(op):
			if err := addColl("--op", op); err != nil {
				return err
			}
		default:
			return bad("--op %q is neither a reduction (sum, prod, max, min, avg, all) nor a collective (allreduce, allgather, reducescatter, broadcast, reduce, alltoall, sendrecv): unknown collective or reduction", op)
		}
	}
	o.collV = model.CollAllReduce
	for i, c := range colls {
		if c != colls[0] {
			return bad("%s and %s name different collectives", from[0], from[i])
		}
		o.collV = c
	}
	if o.redop != "" {
		ropNames, ropFrom = append(ropNames, o.redop), append(ropFrom, "--redop "+o.redop)
	}
	for i := range ropNames {
		if !strings.EqualFold(ropNames[i], ropNames[0]) {
			return bad("%s and %s name different reductions", ropFrom[0], ropFrom[i])
		}
	}
	o.rops = []model.RedOp{model.RedSum}
	if len(ropNames) > 0 {
		switch r := strings.ToLower(ropNames[0]); r {
		case "all":
			o.rops = nil
			for i := 0; i < model.NumRedOps; i++ {
				o.rops = append(o.rops, model.RedOp(i))
			}
		case "mulsum":
			return bad("-o mulsum: NCCL's premultiplied sum (ncclRedOpCreatePreMulSum) is not modelled; use sum, prod, max, min or avg")
		default:
			rop, err := model.ParseRedOp(r)
			if err != nil {
				return bad("%v", err)
			}
			o.rops = []model.RedOp{rop}
		}
	}
	o.dtypes = []model.Dtype{model.DtypeFP32}
	if o.dtype != "" {
		if strings.EqualFold(o.dtype, "all") {
			o.dtypes = nil
			for i := 0; i < model.NumDtypes; i++ {
				o.dtypes = append(o.dtypes, model.Dtype(i))
			}
		} else {
			d, err := model.ParseDtype(o.dtype)
			if err != nil {
				return bad("-d %q: unknown datatype (want int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, or all)", o.dtype)
			}
			o.dtypes = []model.Dtype{d}
		}
	}
	switch {
	case o.minB > o.maxB:
		return bad("-b %d is larger than -e %d (minBytes must not exceed maxBytes)", o.minB, o.maxB)
	case o.factor < 1:
		return bad("-f %d: the step factor must be at least 1 (1: step by -i bytes)", o.factor)
	case o.factor == 1 && o.stepB <= 0 && o.minB < o.maxB:
		return bad("-i %d: with -f 1 the sizes step by -i bytes, which must be positive", o.stepB)
	case o.iters < 0:
		return bad("-n %d: iterations must not be negative", o.iters)
	case o.aggIters < 1:
		return bad("-m %d: aggregated iterations must be at least 1", o.aggIters)
	case o.warmup < 0:
		return bad("-w %d: warm-up iterations must not be negative", o.warmup)
	case o.check < 0:
		return bad("-c %d: check iterations must not be negative", o.check)
	case o.average < 0 || o.average > 3:
		return bad("-a %d: want 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)", o.average)
	case o.blocking < 0 || o.blocking > 3:
		return bad("-z %d: want 0, 1, 2 or 3", o.blocking)
	case o.graph < 0:
		return bad("-G %d: graph launches must not be negative", o.graph)
	case o.nthreads < 1:
		return bad("-t %d: threads must be at least 1", o.nthreads)
	case o.ngpus < 1:
		return bad("-g %d: GPUs per thread must be at least 1", o.ngpus)
	case o.np < 0:
		return bad("-np %d: must not be negative", o.np)
	case o.timeout < 0:
		return bad("-T %v: the timeout must not be negative", o.timeout)
	case o.root < -1:
		return bad("-r %d: the root is a rank, or -1 for every rank in turn", o.root)
	case o.channels < 0 || o.channels > model.MaxChannels:
		return bad("--channels %d: want 0 (the tuner's) to %d (NCCL's MAXCHANNELS)", o.channels, model.MaxChannels)
	}
	if _, err := transport.HostIDFromEnv(0); err != nil {
		// Every rank would read the same value: refuse it once, here.
		return bad("%v", err)
	}
	if o.timeout == 0 {
		o.timeout = 30 * time.Second
	}
	if v := os.Getenv("NCCL_TESTS_MIN_BW"); v != "" {
		if _, err := strconv.ParseFloat(v, 64); err != nil {
			return bad("NCCL_TESTS_MIN_BW=%q: want a bandwidth in GB/s", v)
		}
	}
	if n := len(o.sizes()); n > maxSizes {
		step := fmt.Sprintf("-f %d", o.factor)
		if o.factor == 1 {
			step = fmt.Sprintf("-i %d", o.stepB)
		}
		return bad("-b %d -e %d %s makes more than %d sizes", o.minB, o.maxB, step, maxSizes)
	}
	if o.np > 0 && o.set("t", "nthreads", "g", "ngpus") && o.nthreads*o.ngpus != o.np {
		return bad("-np %d but -t %d x -g %d = %d ranks: give one or the other", o.np, o.nthreads, o.ngpus, o.nthreads*o.ngpus)
	}
	if o.algo != "" {
		a, err := model.ParseAlgorithm(o.algo)
		if err != nil {
			return bad("--algo: %v", err)
		}
		o.algoV, o.algoSet = a, true
	}
	if o.proto != "" {
		p, err := model.ParseProtocol(o.proto)
		if err != nil {
			return bad("--proto: %v", err)
		}
		o.protoV, o.protoSet = p, true
	}
	c := o.collV
	if c.IsP2P() {
		switch {
		case o.algoSet && o.algoV != model.AlgoRing:
			return bad("--algo %s: %s runs on NCCL's p2p schedule, which has no algorithm choice", o.algo, c)
		case o.protoSet && o.protoV == model.ProtoLL128:
			return bad("--proto ll128: %s's p2p transfers run LL or Simple", c)
		case o.channels > 0:
			return bad("--channels %d: %s uses the plan's p2p channels", o.channels, c)
		}
		return nil
	}
	anyProto := func(a model.Algorithm) bool {
		for p := model.Protocol(0); p < model.NumProtocols; p++ {
			if model.CollAllowed(c, a, p) {
				return true
			}
		}
		return false
	}
	switch {
	case o.algoSet && o.protoSet && !model.CollAllowed(c, o.algoV, o.protoV):
		return bad("%s does not run with algorithm %s and protocol %s", c, o.algoV, o.protoV)
	case o.algoSet && !anyProto(o.algoV):
		return bad("--algo %s: %s has no Program with algorithm %s (ring for every collective, tree for allreduce, pat for allgather and reducescatter on two ranks; NVLS and NVLSTree Programs exist, for replay sim, but need multicast objects this executor does not create)", o.algo, c, o.algoV)
	case o.algoSet && (o.algoV == model.AlgoNVLS || o.algoV == model.AlgoNVLSTree):
		return bad("--algo %s: NVLS needs multicast objects, which twinccl's executor does not create (replay sim runs NVLS Programs); without --algo a call NCCL would run on NVLS runs NCCL's next choice", o.algo)
	}
	return nil
}

// checkRanks checks what depends on the number of ranks n.
func (o *ntOpts) checkRanks(n int) error {
	if o.root >= n {
		return &usageError{fmt.Sprintf("-r %d is not a rank of a job of %d", o.root, n)}
	}
	if o.algoSet && o.algoV == model.AlgoPAT && n != 2 {
		return &usageError{fmt.Sprintf("--algo pat: PAT Programs run on two ranks, not %d", n)}
	}
	return nil
}

// maxSizes bounds the number of sizes of a sweep.
const maxSizes = 100000

// isRedOpName reports whether s names a reduction of -o (or "all").
func isRedOpName(s string) bool {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "sum", "prod", "max", "min", "avg", "mulsum", "all":
		return true
	}
	return false
}

// isCollName reports whether s names a collective (or a lone send or
// receive, which parseColl refuses saying why).
func isCollName(s string) bool {
	_, err := model.ParseCollective(s)
	return err == nil
}

// parseColl reads a collective name of --op or --coll: those run gpu
// and replay sim take (lone sends and receives are refused, saying why).
func parseColl(s string) (model.Collective, error) {
	c, err := model.ParseCollective(s)
	if err != nil {
		return 0, fmt.Errorf("%q: unknown collective (want allreduce, allgather, reducescatter, broadcast, reduce, alltoall or sendrecv)", s)
	}
	switch c {
	case model.CollSend, model.CollRecv:
		return 0, fmt.Errorf("%q: a lone %s has no partner to time; sendrecv (sendrecv_perf) pairs every rank's send to the next rank with a receive from the previous one", s, c)
	}
	return c, nil
}

// sizes lists the sweep's sizes: -b to -e, times -f, or plus -i when -f
// is 1 (a zero start goes on at the factor).
func (o *ntOpts) sizes() []int64 {
	var s []int64
	for size := o.minB; size <= o.maxB && len(s) <= maxSizes; {
		s = append(s, size)
		if o.factor > 1 {
			if size == 0 {
				size = 1
			}
			if size > math.MaxInt64/o.factor {
				break
			}
			size *= o.factor
		} else {
			if o.stepB <= 0 {
				break
			}
			size += o.stepB
		}
	}
	return s
}

// stepText is the header's step: "4(factor)" or "1048576(bytes)".
func (o *ntOpts) stepText() string {
	if o.factor > 1 {
		return fmt.Sprintf("%d(factor)", o.factor)
	}
	return fmt.Sprintf("%d(bytes)", o.stepB)
}

// ntCase is one sweep of the sizes: nccl-tests' runTest loops over types,
// reductions (collectives that take one) and roots (rooted ones, -r -1:
// all).
type ntCase struct {
	dt    model.Dtype
	rop   model.RedOp
	redop string // the table's redop column: the reduction, or "none"
	root  int    // the table's root column: the root, or -1
}

// cases lists the sweeps of a job of n ranks in nccl-tests' order.
func (o *ntOpts) cases(n int) []ntCase {
	var out []ntCase
	c := o.collV
	rops := o.rops
	if !reduces(c) {
		rops = []model.RedOp{model.RedSum}
	}
	roots := []int{-1}
	if rooted(c) {
		roots = []int{o.root}
		if o.root == -1 {
			roots = nil
			for r := 0; r < n; r++ {
				roots = append(roots, r)
			}
		}
	}
	for _, dt := range o.dtypes {
		for _, rop := range rops {
			for _, root := range roots {
				name := "none"
				if reduces(c) {
					name = rop.String()
				}
				out = append(out, ntCase{dt: dt, rop: rop, redop: name, root: root})
			}
		}
	}
	return out
}

// ranksToLaunch is the number of local ranks to start: -np, else t x g
// outside a job of another launcher (0: this process is a rank of one).
func (o *ntOpts) ranksToLaunch() (int, error) {
	if o.np > 0 {
		return o.np, nil
	}
	_, _, _, inJob, err := jobEnv()
	if err != nil {
		return 0, &usageError{err.Error()}
	}
	if inJob {
		if o.nthreads*o.ngpus != 1 {
			return 0, &usageError{fmt.Sprintf("-t %d -g %d: in a Slurm, Open MPI or torchrun job every process is one rank; start t x g processes instead", o.nthreads, o.ngpus)}
		}
		return 0, nil
	}
	return o.nthreads * o.ngpus, nil
}

// hostRankLimit is the most ranks of the host device one machine takes:
// 8 per CPU (ranks are processes that poll for their peers' data: beyond
// that they starve each other until waits time out) and a quarter of the
// open-files limit (each rank's shm and socket connections and the
// launcher's pipes take descriptors). why says which bound it is.
func hostRankLimit() (n int, why string) {
	cpus := runtime.NumCPU()
	n, why = 8*cpus, fmt.Sprintf("8 per CPU, %d CPUs", cpus)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Max > 0 {
		if f := int(min(lim.Max, 1<<30) / 4); f < n {
			n, why = f, fmt.Sprintf("a quarter of the open-files limit %d", lim.Max)
		}
	}
	return max(n, 1), why
}

// ntFloat is nccl-tests' getFloatStr: value in width characters, with two
// decimals, else fewer, else in exponent form.
func ntFloat(v float64, width int) string {
	for _, prec := range []int{2, 1, 0} {
		if s := fmt.Sprintf("%*.*f", width, prec, v); len(s) <= width {
			return s
		}
	}
	if width >= 7 {
		return fmt.Sprintf("%*.1e", width, v)
	}
	return fmt.Sprintf("%*.0e", width, v)
}

// ntPlace is one placement's half of a table row (out-of-place or in-place).
type ntPlace struct {
	ran     bool // false: not run (every column N/A)
	timeUs  float64
	algbw   float64
	busbw   float64
	checked bool // #wrong is reported (else N/A)
	wrong   int64
	badRank int // ranks with wrong elements (nccl-tests' out-of-bounds count)
	// NCCL's column of run gpu --baseline nccl.
	ncclRan     bool
	ncclUs      float64
	ncclBus     float64
	ratio       float64
	ncclChecked bool
	ncclWrong   int64
}

// ntRow is one size of the table.
type ntRow struct {
	bytes, count int64
	typ, redop   string
	root         int
	oop, ip      ntPlace
	algo, proto  string
	nch          int
}

// ntTable writes nccl-tests' table: header, rows, footer.
type ntTable struct {
	w        io.Writer
	prog     string
	columns  bool // twinccl's columns
	baseline bool // NCCL's columns (with columns)
	busSum   float64
	busN     int
	oob      int
}

// ntDevice is a "Using devices" line.
type ntDevice struct {
	rank, pid, dev int
	host           string
	bus            [3]int
	name           string
}

// header writes nccl-tests' header: the version line (ours), the
// parameters, notes (twinccl's lines), the devices and the column header.
func (t *ntTable) header(o *ntOpts, notes []string, devs []ntDevice) {
	w := t.w
	rev := buildRevision()
	if rev == "" {
		rev = "unknown revision"
	}
	fmt.Fprintf(w, "# twinccl run %s: nccl-tests %s table format, NCCL %d.%d.%d model\n", rev, ntVersion, ncclVersionCode/10000, ncclVersionCode/100%100, ncclVersionCode%100)
	fmt.Fprintf(w, "# Collective test starting: %s\n", t.prog)
	fmt.Fprintf(w, "# nThread %d nGpus %d minBytes %d maxBytes %d step: %s warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		o.nthreads, o.ngpus, o.minB, o.maxB, o.stepText(), o.warmup, o.iters, o.aggIters, o.check, o.graph, 0)
	switch o.blocking {
	case 1:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n")
	case 2:
		fmt.Fprintf(w, "# Blocking Enabled: wait after each inner iteration (-m), no barrier \n")
	case 3:
		fmt.Fprintf(w, "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n")
	}
	for _, n := range notes {
		fmt.Fprintf(w, "# %s\n", n)
	}
	fmt.Fprintf(w, "#\n# Using devices\n")
	for _, d := range devs {
		fmt.Fprintf(w, "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s\n", d.rank, 0, d.pid, d.host, d.dev, d.bus[0], d.bus[1], d.bus[2], d.name)
	}
	fmt.Fprintf(w, "#\n")
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n", "", "", "", "", "")
	ex, exU := t.extraHeader()
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s\n", "size", "count", "type", "redop", "root",
		"time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", ex)
	fmt.Fprintf(w, "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %s\n", "(B)", "(elements)", "", "", "",
		"(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", exU)
}

// extraHeader are the headers of twinccl's columns ("" without them).
func (t *ntTable) extraHeader() (string, string) {
	if !t.columns {
		return "", ""
	}
	h := fmt.Sprintf(" %6s  %6s  %3s", "algo", "proto", "nch")
	u := fmt.Sprintf(" %6s  %6s  %3s", "", "", "")
	if t.baseline {
		h += fmt.Sprintf("  %7s  %6s  %6s  %7s  %6s  %6s", "nccl", "nccl", "ratio", "nccl", "nccl", "ratio")
		u += fmt.Sprintf("  %7s  %6s  %6s  %7s  %6s  %6s", "oop(us)", "busbw", "", "ip(us)", "busbw", "")
	}
	return h, u
}

// row writes one size.
func (t *ntTable) row(r ntRow) {
	var b strings.Builder
	fmt.Fprintf(&b, "%12d  %12d  %8s  %6s  %6d", r.bytes, r.count, r.typ, r.redop, r.root)
	for _, p := range []ntPlace{r.oop, r.ip} {
		switch {
		case !p.ran:
			fmt.Fprintf(&b, "  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A")
		case p.checked:
			fmt.Fprintf(&b, "  %7s  %6s  %6s  %6.6g", ntFloat(p.timeUs, 7), ntFloat(p.algbw, 6), ntFloat(p.busbw, 6), float64(p.wrong))
		default:
			fmt.Fprintf(&b, "  %7s  %6s  %6s    N/A", ntFloat(p.timeUs, 7), ntFloat(p.algbw, 6), ntFloat(p.busbw, 6))
		}
		if p.ran {
			t.busSum += p.busbw
			t.busN++
			if p.checked {
				t.oob += p.badRank
			}
		}
	}
	if t.columns {
		fmt.Fprintf(&b, "  %6s  %6s  %3d", r.algo, r.proto, r.nch)
		if t.baseline {
			for _, p := range []ntPlace{r.oop, r.ip} {
				if !p.ncclRan {
					fmt.Fprintf(&b, "  %7s  %6s  %6s", "N/A", "N/A", "N/A")
					continue
				}
				fmt.Fprintf(&b, "  %7s  %6s  %6s", ntFloat(p.ncclUs, 7), ntFloat(p.ncclBus, 6), ntFloat(p.ratio, 6))
			}
		}
	}
	b.WriteByte('\n')
	io.WriteString(t.w, b.String())
}

// footer writes nccl-tests' footer: rows with wrong elements (per rank,
// as nccl-tests counts them per process) and the average bus bandwidth of
// every placement run, checked against NCCL_TESTS_MIN_BW as nccl-tests
// does (below 90% of it fails the run: the error says so).
func (t *ntTable) footer() error {
	w := t.w
	status := "OK"
	if t.oob > 0 {
		status = "FAILED"
	}
	avg := 0.0
	if t.busN > 0 {
		avg = t.busSum / float64(t.busN)
	}
	bwStatus, err := "", error(nil)
	if v := os.Getenv("NCCL_TESTS_MIN_BW"); v != "" {
		minBW, perr := strconv.ParseFloat(v, 64)
		switch {
		case perr != nil:
			err = fmt.Errorf("NCCL_TESTS_MIN_BW=%q is not a number", v)
		case avg < 0.9*minBW:
			bwStatus = "FAILED"
			err = fmt.Errorf("average bus bandwidth %.6g GB/s is below 90%% of NCCL_TESTS_MIN_BW=%s", avg, v)
		default:
			bwStatus = "OK"
		}
	}
	fmt.Fprintf(w, "# %-20s : %d %s\n", "Out of bounds values", t.oob, status)
	fmt.Fprintf(w, "# %-20s : %.6g %s\n", "Avg bus bandwidth", avg, bwStatus)
	fmt.Fprintf(w, "#\n# Collective test concluded: %s\n#\n\n", t.prog)
	return err
}

// rankTime combines the ranks' times of one measurement as -a says.
func rankTime(average int, ts []float64) float64 {
	if len(ts) == 0 {
		return 0
	}
	switch average {
	case 0:
		return ts[0]
	case 2:
		v := ts[0]
		for _, t := range ts {
			v = min(v, t)
		}
		return v
	case 3:
		v := ts[0]
		for _, t := range ts {
			v = max(v, t)
		}
		return v
	}
	s := 0.0
	for _, t := range ts {
		s += t
	}
	return s / float64(len(ts))
}

// averageName names -a's combination for the header.
func averageName(a int) string {
	return [...]string{"rank 0's time", "the average over the ranks", "the minimum over the ranks", "the maximum over the ranks"}[a]
}

// pciBus reads a PCI bus id ("0000:19:00.0") as nccl-tests prints it
// (domain, bus, device).
func pciBus(s string) [3]int {
	var b [3]int
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == ':' || r == '.' })
	for i := 0; i < 3 && i < len(parts); i++ {
		v, _ := strconv.ParseInt(parts[i], 16, 64)
		b[i] = int(v)
	}
	return b
}

// shortHost is the host name up to its first dot, as nccl-tests prints it.
func shortHost() string {
	h, _ := os.Hostname()
	h, _, _ = strings.Cut(h, ".")
	return h
}

// programName is the table's program: nccl-tests' name of the collective.
func (o *ntOpts) programName() string {
	if o.perf != "" {
		return o.perf
	}
	return perfName(o.collV)
}

// hwTunerChoice is NCCL's choice for a call among what twinccl's hardware
// executor runs. NVLS and NVLS trees need multicast objects and CollNet a
// SHARP network plugin, which it does not create (nor may our GPU
// machines): where NCCL would pick one of them, the call runs NCCL's next
// choice, what NCCL picks when neither is available (the tuner without
// them, channels and threads included). note says so in one line; it is
// empty when NCCL's own choice runs.
func hwTunerChoice(t *search.Tuning, coll model.Collective, count int64, typeSize int) (search.Choice, string, error) {
	ch, err := t.Choose(coll, count, typeSize)
	if err != nil {
		return ch, "", err
	}
	switch ch.Algo {
	case model.AlgoNVLS, model.AlgoNVLSTree, model.AlgoCollNetDirect, model.AlgoCollNetChain:
	default:
		return ch, "", nil
	}
	without := *t
	without.NVLS, without.CollNet = false, false
	next, err := without.Choose(coll, count, typeSize)
	if err != nil {
		return ch, "", err
	}
	what := "NVLS multicast objects"
	if ch.Algo == model.AlgoCollNetDirect || ch.Algo == model.AlgoCollNetChain {
		what = "a CollNet (SHARP) network"
	}
	note := fmt.Sprintf("NCCL %s would run %s of %d bytes with %s/%s, which needs %s that twinccl's executor does not create: running NCCL's next choice, %s/%s, there and wherever else it would",
		search.NCCLVersion, coll, ch.NBytes, ch.Algo, ch.Proto, what, next.Algo, next.Proto)
	return next, note, nil
}
