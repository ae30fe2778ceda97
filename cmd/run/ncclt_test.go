package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// ntParsed is an nccl-tests table as a parser of nccl-tests' output reads
// it: the comment lines before the rows, the rows' fields (and raw lines)
// and the footer's values.
type ntParsed struct {
	head    []string
	rows    [][]string
	lines   []string
	foot    []string
	oob     int
	oobText string
	avgBus  float64
}

var (
	reOOB = regexp.MustCompile(`^# Out of bounds values : (\d+) (OK|FAILED)$`)
	reAvg = regexp.MustCompile(`^# Avg bus bandwidth    : (\S+) $`)
)

// parseNT reads stdout of run as an nccl-tests table.
func parseNT(t *testing.T, out string) ntParsed {
	t.Helper()
	var p ntParsed
	for _, l := range strings.Split(out, "\n") {
		switch {
		case len(p.rows) == 0 && strings.HasPrefix(l, "#"):
			p.head = append(p.head, l)
		case strings.HasPrefix(l, "#") || (l == "" && len(p.rows) > 0):
			p.foot = append(p.foot, l)
			if m := reOOB.FindStringSubmatch(l); m != nil {
				p.oob, _ = strconv.Atoi(m[1])
				p.oobText = m[2]
			}
			if m := reAvg.FindStringSubmatch(l); m != nil {
				v, err := strconv.ParseFloat(m[1], 64)
				require.NoError(t, err, l)
				p.avgBus = v
			}
		case l != "":
			require.Empty(t, p.foot, "a row after the footer: %q", l)
			p.rows = append(p.rows, strings.Fields(l))
			p.lines = append(p.lines, l)
		}
	}
	return p
}

// ntRowLen is the length of a table row without twinccl's columns:
// nccl-tests' "%12li  %12li  %8s  %6s  %6s" and twice "  %7s  %6s  %6s  %6g".
const ntRowLen = 12 + 2 + 12 + 2 + 8 + 2 + 6 + 2 + 6 + 2*(2+7+2+6+2+6+2+6)

// TestNCCLTestsTable runs `run -np 2 all_reduce_perf -b 8 -e 1M -f 4` and
// reads its table as an nccl-tests parser does: nccl-tests' header lines,
// device lines and two-level column header, fixed-width rows of the
// sweep's sizes with both placements checked, and the footer with the
// average of the busbw columns.
func TestNCCLTestsTable(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	code, out, errOut := runArgs("-np", "2", "all_reduce_perf", "-b", "8", "-e", "1M", "-f", "4", "-n", "2")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	p := parseNT(t, out)
	t.Log("\n" + out)

	require.GreaterOrEqual(t, len(p.head), 8)
	assert.Regexp(t, `^# twinccl run .*nccl-tests 2\.19\.6 table format`, p.head[0])
	assert.Equal(t, "# Collective test starting: all_reduce_perf", p.head[1])
	assert.Equal(t, "# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 4(factor) warmup iters: 1 iters: 2 agg iters: 1 validation: 1 graph: 0 unalign: 0", p.head[2])
	devices := 0
	for i, l := range p.head {
		if l == "# Using devices" {
			require.Equal(t, "#", p.head[i-1])
			for _, d := range p.head[i+1:] {
				if !strings.HasPrefix(d, "#  Rank ") {
					break
				}
				assert.Regexp(t, fmt.Sprintf(`^#  Rank %2d Group  0 Pid +\d+ on +\S+ device +\d+ \[0000:00:00\] \S`, devices), d)
				devices++
			}
		}
	}
	assert.Equal(t, 2, devices, "device lines")
	// The column header exactly as nccl-tests prints it (util.cu's
	// writeResultHeader, no timestamps).
	n := len(p.head)
	assert.Equal(t, "#", p.head[n-4])
	assert.Equal(t, "#                                                              out-of-place                       in-place          ", p.head[n-3])
	assert.Equal(t, "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ", p.head[n-2])
	assert.Equal(t, "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ", p.head[n-1])

	sizes := []int64{8, 32, 128, 512, 2048, 8192, 32768, 131072, 524288}
	require.Len(t, p.rows, len(sizes))
	var bus float64
	for i, f := range p.rows {
		assert.Len(t, p.lines[i], ntRowLen, "row %q", p.lines[i])
		require.Len(t, f, benchCols, "row %q", p.lines[i])
		assert.Equal(t, []string{strconv.FormatInt(sizes[i], 10), strconv.FormatInt(sizes[i]/4, 10), "float", "sum", "-1"}, f[:5])
		for _, place := range []int{5, 9} {
			tm, err := strconv.ParseFloat(f[place], 64)
			require.NoError(t, err)
			assert.Positive(t, tm)
			alg, _ := strconv.ParseFloat(f[place+1], 64)
			b, _ := strconv.ParseFloat(f[place+2], 64)
			assert.InDelta(t, float64(sizes[i])/tm/1e3, alg, 0.006, "algbw = size / time")
			assert.InDelta(t, alg, b, 0.011, "busbw = algbw x 2(n-1)/n = algbw on 2 ranks")
			assert.Equal(t, "0", f[place+3], "#wrong")
			bus += b
		}
	}
	assert.Equal(t, 0, p.oob)
	assert.Equal(t, "OK", p.oobText)
	assert.InDelta(t, bus/float64(2*len(sizes)), p.avgBus, 0.006, "Avg bus bandwidth is the mean of the busbw columns")
	assert.Equal(t, []string{"# Out of bounds values : 0 OK"}, p.foot[:1])
	assert.True(t, strings.HasSuffix(out, "\n#\n# Collective test concluded: all_reduce_perf\n#\n\n"), "nccl-tests' last lines")
}

// ntExpect is what nccl-tests' table says of one size of a collective on
// n ranks: the size and count columns (its getCollByteCount, written
// anew here) and the redop and root columns.
func ntExpect(c model.Collective, size int64, n int) (bytes, count int64, redop, root string) {
	es := int64(4) // float
	cnt := size / es
	per := (cnt / int64(n)) / 4 * 4 // rounded down to 16 bytes
	redop, root = "sum", "-1"
	switch c {
	case model.CollAllGather, model.CollAlltoAll:
		redop = "none"
		return per * int64(n) * es, per, redop, root
	case model.CollReduceScatter:
		return per * int64(n) * es, per, redop, root
	case model.CollBroadcast:
		redop, root = "none", "0"
	case model.CollReduce:
		root = "0"
	}
	return cnt * es, cnt, redop, root
}

// TestEveryOpOnTheHostDevice runs every collective run gpu and replay sim
// accept on the host device, by program name and by --op, data checked:
// every row has zero wrong elements (alltoall's and sendrecv's in-place
// columns are not checked, as in nccl-tests), and the size, count, redop
// and root columns say what nccl-tests' would.
func TestEveryOpOnTheHostDevice(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	const np = 3
	cases := []struct {
		args []string
		coll model.Collective
	}{
		{[]string{"all_reduce_perf"}, model.CollAllReduce},
		{[]string{"all_gather_perf"}, model.CollAllGather},
		{[]string{"reduce_scatter_perf"}, model.CollReduceScatter},
		{[]string{"broadcast_perf"}, model.CollBroadcast},
		{[]string{"reduce_perf"}, model.CollReduce},
		{[]string{"alltoall_perf"}, model.CollAlltoAll},
		{[]string{"sendrecv_perf"}, model.CollSendRecv},
		{[]string{"--op", "sendrecv"}, model.CollSendRecv},
		{[]string{"--coll", "alltoall", "-d", "int8"}, model.CollAlltoAll},
		{[]string{"--op", "reducescatter", "-o", "max"}, model.CollReduceScatter},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			args := append([]string{"-np", strconv.Itoa(np), "-b", "8", "-e", "64K", "-f", "32", "-n", "1", "-w", "0"}, c.args...)
			code, out, errOut := runArgs(args...)
			require.Equal(t, 0, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
			p := parseNT(t, out)
			require.Len(t, p.rows, 3, out)
			for i, f := range p.rows {
				require.Len(t, f, benchCols, p.lines[i])
				size := []int64{8, 256, 8192}[i]
				b, count, redop, root := ntExpect(c.coll, size, np)
				if c.args[len(c.args)-1] == "int8" {
					per := (size / np) / 16 * 16
					b, count = per*np, per
				}
				if c.args[len(c.args)-1] == "max" {
					redop = "max"
				}
				assert.Equal(t, []string{strconv.FormatInt(b, 10), strconv.FormatInt(count, 10), redop, root}, []string{f[0], f[1], f[3], f[4]}, p.lines[i])
				assert.Equal(t, "0", f[8], "out-of-place #wrong: %s", p.lines[i])
				wantIP := "0"
				if c.coll.IsP2P() {
					wantIP = "N/A"
				}
				assert.Equal(t, wantIP, f[12], "in-place #wrong: %s", p.lines[i])
			}
			assert.Equal(t, "OK", p.oobText)
		})
	}
}

// TestBadFlagsBeforeLaunch: every flag the launcher validates is refused
// with exit status 2, one line naming the flag and its value, nothing on
// stdout, and no rank started.
func TestBadFlagsBeforeLaunch(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-np", "2", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"-np", "2", "-b", "1Q"}, `invalid value "1Q" for flag -b: bad size "1Q"`},
		{[]string{"-np", "2", "-b8x"}, `invalid value "8x" for flag -b`},
		{[]string{"-np", "2", "-b", "1M", "-e", "1K"}, "-b 1048576 is larger than -e 1024"},
		{[]string{"-np", "2", "-f", "0"}, "-f 0: the step factor must be at least 1"},
		{[]string{"-np", "2", "-b", "8", "-e", "1G", "-i", "1"}, "-b 8 -e 1073741824 -i 1 makes more than 100000 sizes"},
		{[]string{"-np", "2", "-n", "0"}, "-n 0: the host device times at least one iteration"},
		{[]string{"-np", "2", "-n", "x"}, `invalid value "x" for flag -n`},
		{[]string{"-np", "2", "-m", "0"}, "-m 0: aggregated iterations must be at least 1"},
		{[]string{"-np", "2", "-w", "-1"}, "-w -1: warm-up iterations must not be negative"},
		{[]string{"-np", "2", "-c", "-1"}, "-c -1: check iterations must not be negative"},
		{[]string{"-np", "2", "-o", "xor"}, `--op "xor" is neither a reduction`},
		{[]string{"-np", "2", "-o", "mulsum"}, "-o mulsum: NCCL's premultiplied sum"},
		{[]string{"-np", "2", "-o", "sum", "--redop", "max"}, "-o sum and --redop max name different reductions"},
		{[]string{"-np", "2", "--op", "frob"}, `--op "frob" is neither a reduction`},
		{[]string{"-np", "2", "--op", "send"}, `--op "send": a lone Send has no partner`},
		{[]string{"-np", "2", "--coll", "recv"}, `--coll "recv": a lone Recv has no partner`},
		{[]string{"-np", "2", "all_reduce_perf", "--op", "allgather"}, "all_reduce_perf and --op allgather name different collectives"},
		{[]string{"-np", "2", "gather_perf"}, "gather_perf: twinccl does not model ncclGather"},
		{[]string{"-np", "2", "extra"}, `unexpected argument "extra"`},
		{[]string{"-np", "2", "-d", "fp7"}, `-d "fp7": unknown datatype`},
		{[]string{"-np", "2", "-r", "-2"}, "-r -2: the root is a rank"},
		{[]string{"-np", "2", "--op", "broadcast", "-r", "2"}, "-r 2 is not a rank of a job of 2"},
		{[]string{"-np", "2", "-a", "4"}, "-a 4: want 0 (rank 0), 1 (average), 2 (minimum) or 3 (maximum)"},
		{[]string{"-np", "2", "-z", "5"}, "-z 5: want 0, 1, 2 or 3"},
		{[]string{"-np", "2", "-G", "-1"}, "-G -1: graph launches must not be negative"},
		{[]string{"-np", "2", "-T", "-1"}, `invalid value "-1" for flag -T`},
		{[]string{"-np", "2", "-T", "soon"}, `invalid value "soon" for flag -T`},
		{[]string{"-np", "2", "-t", "0"}, "-t 0: threads must be at least 1"},
		{[]string{"-np", "2", "-g", "0"}, "-g 0: GPUs per thread must be at least 1"},
		{[]string{"-np", "4", "-g", "2"}, "-np 4 but -t 1 x -g 2 = 2 ranks"},
		{[]string{"-np", "-3"}, "-np -3: must not be negative"},
		{[]string{"-np", "100000"}, "-np 100000: this machine takes at most"},
		{[]string{"-g", "100000"}, "-np 100000: this machine takes at most"},
		{[]string{"-np", "2", "--algo", "nvlsx"}, `--algo: unknown algorithm "nvlsx"`},
		{[]string{"-np", "2", "--proto", "ll64"}, `--proto: unknown protocol "ll64"`},
		{[]string{"-np", "2", "--op", "allgather", "--algo", "tree"}, "--algo tree: AllGather has no Program with algorithm Tree"},
		{[]string{"-np", "2", "--algo", "tree", "--proto", "ll", "--op", "broadcast"}, "Broadcast does not run with algorithm Tree and protocol LL"},
		{[]string{"-np", "3", "--op", "allgather", "--algo", "pat"}, "--algo pat: PAT Programs run on two ranks, not 3"},
		{[]string{"-np", "2", "--op", "sendrecv", "--algo", "tree"}, "--algo tree: SendRecv runs on NCCL's p2p schedule"},
		{[]string{"-np", "2", "--op", "alltoall", "--proto", "ll128"}, "--proto ll128: AlltoAll's p2p transfers run LL or Simple"},
		{[]string{"-np", "2", "--op", "sendrecv", "--channels", "2"}, "--channels 2: SendRecv uses the plan's p2p channels"},
		{[]string{"-np", "2", "--channels", "-1"}, "--channels -1: want 0 (the tuner's) to 64 (NCCL's MAXCHANNELS)"},
		{[]string{"-np", "2", "--channels", "1000"}, "--channels 1000: want 0 (the tuner's) to 64 (NCCL's MAXCHANNELS)"},
		{[]string{"gpu", "-np", "2", "--channels", "65"}, "--channels 65: want 0 (the tuner's) to 64"},
		{[]string{"-np", "2", "--net", "rdma"}, `--net "rdma": want socket or ib`},
		{[]string{"-np", "2", "--trace", "x.parquet", "--baseline"}, "--trace and --baseline do not go together"},
		{[]string{"gpu", "-np", "2", "--passes", "101"}, "run gpu: --passes must be from 1 to 100"},
		{[]string{"gpu", "-np", "2", "--baseline", "mpi"}, `run gpu: --baseline "mpi": the only baseline is nccl`},
		{[]string{"gpu", "-np", "2", "--op", "alltoall", "--algo", "ring"}, "run gpu: --op alltoall runs the GIN all-to-all kernel"},
		{[]string{"gpu", "-np", "2", "--topo", "/no/such/topo.xml"}, "run gpu: --topo /no/such/topo.xml: no such file or directory"},
		{[]string{"gpu", "-np", "2", "-b", "1M", "-e", "1K"}, "run gpu: -b 1048576 is larger than -e 1024"},
		{[]string{"all_reduce_perf", "--gpu", "-np", "2", "-f", "0"}, "run gpu: -f 0: the step factor must be at least 1"},
	}
	// Bad environment, read once by the launcher.
	envCases := []struct {
		key, value, want string
	}{
		{"TWINCCL_HOSTID", "split:abc", `TWINCCL_HOSTID="split:abc": split:K wants K, the ranks per host, as a positive integer`},
		{"TWINCCL_HOSTID", "split:0", `TWINCCL_HOSTID="split:0"`},
	}
	for _, c := range envCases {
		cases = append(cases, struct {
			args []string
			want string
		}{[]string{"-np", "2", "env:" + c.key + "=" + c.value}, c.want})
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			marks := t.TempDir()
			t.Setenv(envRankMark, marks)
			if k, v, ok := strings.Cut(strings.TrimPrefix(c.args[len(c.args)-1], "env:"), "="); ok && strings.HasPrefix(c.args[len(c.args)-1], "env:") {
				t.Setenv(k, v)
				c.args = c.args[:len(c.args)-1]
			}
			code, out, errOut := runArgs(c.args...)
			assert.Equal(t, 2, code, "exit status; stderr %q", errOut)
			assert.Empty(t, out, "stdout")
			assert.Contains(t, errOut, c.want)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			started, _ := os.ReadDir(marks)
			assert.Empty(t, started, "ranks started")
		})
	}
}

// TestFailedRunOneLine: a rank that fails makes the run exit 1 with one
// line naming it, without the other ranks' lost-peer errors; -v adds
// every rank's error.
func TestFailedRunOneLine(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	t.Setenv(envBenchFault, "1:64")
	args := []string{"-np", "3", "-b", "8", "-e", "512", "-f", "8", "-n", "1", "-w", "0"}
	code, out, errOut := runArgs(args...)
	assert.Equal(t, 1, code)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	assert.Regexp(t, `^run bench: rank 1 failed: failing at 64 bytes as TWINCCL_BENCH_TEST_FAIL says`, errOut)
	assert.NotContains(t, errOut, "peer lost")
	assert.Len(t, parseNT(t, out).rows, 1, "the row before the failure")

	code, _, errOut = runArgs(append([]string{"-v"}, args...)...)
	assert.Equal(t, 1, code)
	for r := 0; r < 3; r++ {
		assert.Contains(t, errOut, fmt.Sprintf("[rank %d] error: ", r))
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	assert.Regexp(t, `^run bench: rank 1 failed: `, lines[len(lines)-1])
}

// TestProgramNamesAndRanks: nccl-tests' program names work as run's
// command, as bench's operand, in the bare form and as the binary's name
// (a symbolic link); without -np, -t x -g ranks run.
func TestProgramNamesAndRanks(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	flags := []string{"-b", "1K", "-e", "1K", "-n", "1", "-w", "0"}
	for _, c := range []struct {
		argv0 string
		args  []string
		prog  string
		ranks int
	}{
		{"run", append([]string{"all_gather_perf", "-np", "2"}, flags...), "all_gather_perf", 2},
		{"run", append([]string{"-np", "2", "reduce_perf"}, flags...), "reduce_perf", 2},
		{"run", append([]string{"bench", "-np", "2", "sendrecv_perf"}, flags...), "sendrecv_perf", 2},
		{"/usr/local/bin/broadcast_perf", append([]string{"-np", "2"}, flags...), "broadcast_perf", 2},
		{"./all_reduce_perf", append([]string{"-g", "3"}, flags...), "all_reduce_perf", 3},
		{"run", append([]string{"alltoall_perf", "-t", "2", "-g", "2"}, flags...), "alltoall_perf", 4},
	} {
		t.Run(c.argv0+" "+strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			code := runAs(c.argv0, c.args, &out, &errb)
			require.Equal(t, 0, code, "stderr: %s", errb.String())
			p := parseNT(t, out.String())
			assert.Contains(t, p.head, "# Collective test starting: "+c.prog)
			assert.Equal(t, c.ranks, strings.Count(out.String(), "#  Rank "), "device lines")
			assert.Len(t, p.rows, 1)
		})
	}
}

// TestVersionAndHelpEverywhere: --version prints the version and -h or
// --help the command's help, on stdout with exit status 0, for run and
// every command.
func TestVersionAndHelpEverywhere(t *testing.T) {
	for _, prefix := range [][]string{nil, {"bench"}, {"gpu"}, {"topo"}, {"netprobe"}, {"all_reduce_perf"}, {"-np", "2"}} {
		for _, flag := range []string{"--version", "-version"} {
			args := append(append([]string(nil), prefix...), flag)
			code, out, errOut := runArgs(args...)
			assert.Equal(t, 0, code, "run %v: stderr %q", args, errOut)
			assert.Regexp(t, `^run \(github\.com/twinccl/twinccl\) .*, revision .*NCCL 2\.28\.9 model`, out, "run %v", args)
		}
		for _, flag := range []string{"-h", "--help"} {
			args := append(append([]string(nil), prefix...), flag)
			code, out, errOut := runArgs(args...)
			assert.Equal(t, 0, code, "run %v", args)
			assert.Empty(t, errOut, "run %v", args)
			assert.Contains(t, out, "Usage", "run %v", args)
		}
	}
	_, out, _ := runArgs("-h")
	for _, want := range []string{"all_reduce_perf", "--gpu", "symbolic link", "-o/--op takes a reduction"} {
		assert.Contains(t, out, want)
	}
	_, out, _ = runArgs("bench", "-h")
	for _, want := range []string{"-t, --nthreads N", "-g, --ngpus N", "-b, --minbytes SIZE", "-e, --maxbytes SIZE", "-i, --stepbytes SIZE",
		"-f, --stepfactor F", "-n, --iters N", "-m, --agg_iters N", "-w, --warmup_iters N", "-c, --check N", "-o, --op OP",
		"-d, --datatype, --dtype TYPE", "-r, --root RANK", "-a, --average 0-3", "-z, --blocking 0-3", "-G, --cudagraph N",
		"-T, --timeout SECONDS", "-np N", "--twinccl-columns", "--progress", "No effect on the host device"} {
		assert.Contains(t, out, want)
	}
}

// TestAttachedShortOptions: nccl-tests' getopt forms -b8 and --minbytes=8
// read as -b 8, and names of run's own (-np) stay whole.
func TestAttachedShortOptions(t *testing.T) {
	var o benchOpts
	o.defaults()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	register(fs, benchGroups(&o))
	assert.Equal(t, []string{"-b", "8", "-np", "2", "-d", "half", "--maxbytes=1M", "--progress", "--", "-b9"},
		splitAttached(fs, []string{"-b8", "-np", "2", "-dhalf", "--maxbytes=1M", "--progress", "--", "-b9"}))
	require.NoError(t, o.parseArgs(fs, []string{"all_gather_perf", "-b8", "--maxbytes=1M", "-dhalf", "-f", "4", "-oall"}))
	require.NoError(t, o.validate())
	assert.Equal(t, int64(8), o.minB)
	assert.Equal(t, int64(1<<20), o.maxB)
	assert.Equal(t, model.CollAllGather, o.collV)
	assert.Equal(t, []model.Dtype{model.DtypeFP16}, o.dtypes)
	assert.Len(t, o.rops, model.NumRedOps)
	// AllGather takes no reduction: one case per type, redop "none".
	assert.Equal(t, []ntCase{{dt: model.DtypeFP16, rop: model.RedSum, redop: "none", root: -1}}, o.cases(2))
}

// TestNCCLTestsDefaultsAndSizes: nccl-tests' defaults (one 32 MiB size,
// 20 iterations, one warm-up, checked, float sum on rank 0's root), sizes
// stepped by -i when -f is 1 and multiplied otherwise, every type and
// reduction with -d all -o all and every root with -r -1.
func TestNCCLTestsDefaultsAndSizes(t *testing.T) {
	var o ntOpts
	o.defaults()
	require.NoError(t, o.validate())
	assert.Equal(t, []int64{32 << 20}, o.sizes())
	assert.Equal(t, 20, o.iters)
	assert.Equal(t, 1, o.warmup)
	assert.Equal(t, 1, o.check)
	assert.Equal(t, 1, o.average)
	assert.Equal(t, model.CollAllReduce, o.collV)
	assert.Equal(t, []ntCase{{dt: model.DtypeFP32, rop: model.RedSum, redop: "sum", root: -1}}, o.cases(4))

	o.minB, o.maxB, o.stepB = 1<<20, 4<<20, 1<<20
	assert.Equal(t, []int64{1 << 20, 2 << 20, 3 << 20, 4 << 20}, o.sizes())
	assert.Equal(t, "1048576(bytes)", o.stepText())
	o.minB, o.factor = 0, 2
	assert.Equal(t, []int64{0, 2 << 20, 4 << 20}[:1], o.sizes()[:1])
	assert.Equal(t, "2(factor)", o.stepText())

	o.ops, o.dtype, o.root = []string{"broadcast", "all"}, "all", -1
	require.NoError(t, o.validate())
	assert.Len(t, o.cases(3), model.NumDtypes*3, "broadcast: every type and root, no reduction")
	o.ops = []string{"reduce", "all"}
	require.NoError(t, o.validate())
	assert.Len(t, o.cases(3), model.NumDtypes*model.NumRedOps*3)
}

// TestNTFormatting: nccl-tests' number formats (getFloatStr and %g) and
// its per-rank counts.
func TestNTFormatting(t *testing.T) {
	assert.Equal(t, "  12.35", ntFloat(12.345, 7))
	assert.Equal(t, "12345.7", ntFloat(12345.67, 7))
	assert.Equal(t, "1234568", ntFloat(1234567.8, 7))
	assert.Equal(t, "1.2e+08", ntFloat(123456789, 7))
	assert.Equal(t, "  0.00", ntFloat(0.001, 6))
	assert.Equal(t, "123.45", ntFloat(123.45, 6))
	assert.Equal(t, "1234.5", ntFloat(1234.5, 6))
	assert.Equal(t, " 1e+06", ntFloat(1e6, 6))
	assert.Equal(t, "1.23457", fmt.Sprintf("%.6g", 1.23456789), "Avg bus bandwidth as C's %%g")

	param, send, recv, sOff, rOff := ntCounts(model.CollAllGather, 1000, 4, 3)
	assert.Equal(t, []int64{80, 80, 240, 80, 0}, []int64{param, send, recv, sOff, rOff}, "333 floats per rank, rounded down to 16 bytes")
	param, send, recv, sOff, rOff = ntCounts(model.CollReduceScatter, 1<<20, 2, 4)
	assert.Equal(t, []int64{1 << 17, 1 << 19, 1 << 17, 0, 1 << 17}, []int64{param, send, recv, sOff, rOff})
	param, send, recv, _, _ = ntCounts(model.CollAllReduce, 100, 8, 4)
	assert.Equal(t, []int64{12, 12, 12}, []int64{param, send, recv})

	assert.Equal(t, 2.0, rankTime(0, []float64{2, 1, 6}))
	assert.Equal(t, 3.0, rankTime(1, []float64{2, 1, 6}))
	assert.Equal(t, 1.0, rankTime(2, []float64{2, 1, 6}))
	assert.Equal(t, 6.0, rankTime(3, []float64{2, 1, 6}))
	assert.Equal(t, [3]int{0, 0x19, 0}, pciBus("0000:19:00.0"))

	n, err := parseSizeArg("1.5K")
	require.NoError(t, err)
	assert.Equal(t, int64(1536), n)
}

// TestProgress: with --progress (stderr is no terminal here) the
// launcher draws rank 0's progress on stderr, which size of how many and
// the elapsed time, and stdout keeps the bare table.
func TestProgress(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process")
	}
	code, out, errOut := runArgs("-np", "2", "-b", "8", "-e", "512", "-f", "8", "-n", "1", "-w", "0", "--progress")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "\r[")
	assert.Contains(t, errOut, "size 1 of 3 (float sum, 8 B)")
	assert.Contains(t, errOut, "size 3 of 3 (float sum, 512 B)")
	assert.Contains(t, errOut, "elapsed")
	assert.True(t, strings.HasSuffix(errOut, "\r\x1b[K"), "the bar is cleared at the end: %q", errOut)
	assert.NotContains(t, out, "\r")
	assert.Len(t, parseNT(t, out).rows, 3)
	// Without --progress and without a terminal: nothing.
	code, _, errOut = runArgs("-np", "2", "-b", "8", "-e", "8", "-n", "1", "-w", "0")
	require.Equal(t, 0, code)
	assert.Empty(t, errOut)
}
