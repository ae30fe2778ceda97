package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/twinccl/twinccl/exec/hw/profiler"
	"github.com/twinccl/twinccl/traces"
)

const traceHelp = `Usage:
  replay trace info FILE...
  replay trace cat FILE [--rank R] [--call COMM:CALL] [--limit N]
  replay trace export FILE... [--format chrome|pprof|summary] [-o OUT]
  replay trace merge -o OUT.parquet PART.parquet...
  replay trace import --format chakra|kineto|nccl-log FILE... -o OUT.parquet
                      [--ranks N] [--dtype T] [--comm-groups FILE]

Inspects twinccl trace files (parquet; call traces and event traces, schema
version %s; files of another major version are refused).

  info    prints each file's kind, schema version, rows, compression, sort
          order, metadata and row-group index (rank and call ranges).
  cat     prints rows as tab-separated values, one per line, with a header;
          --rank and --call select rows using the row-group index.
  export  converts one call trace and/or one event trace:
            chrome   Chrome/Perfetto trace JSON (open in ui.perfetto.dev):
                     one track per rank and channel, calls on their own
                     track, flow arrows from each send to its receive;
            pprof    a pprof profile of step time per rank, channel, link
                     and primitive (needs an event trace; go tool pprof);
            summary  tables of calls and steps.
  merge   joins the call traces that the ranks of one job wrote under a
          launcher other than "run -np" (OUT.rankR.parquet) into
          OUT.parquet, and their event traces (PART.events.parquet beside
          each part, where every part has one) into OUT.events.parquet;
          written atomically, both or neither. A part given twice, or
          two parts holding the same rank of a communicator, is refused.
          Parts the NCCL profiler plugin wrote (one per process) also give
          the job's communicators (twinccl.comms), so that replay run
          replays communicators of fewer than all ranks.
  import  reads other tools' traces of one job into a call trace, written
          atomically, with each communicator's global ranks in its
          metadata (twinccl.comms):
            chakra    Chakra execution traces (ASTRA-sim's input), one
                      PREFIX.RANK.et per rank: collective, send and receive
                      nodes, their process groups (pg_name; --comm-groups
                      gives ASTRA-sim's comm_group.json) and dependencies
                      (compute nodes between calls become host gaps);
            kineto    PyTorch profiler JSON traces, one per rank: the NCCL
                      kernels that carry collective metadata;
            nccl-log  NCCL_DEBUG=INFO logs with NCCL_DEBUG_SUBSYS=INIT,COLL
                      (every rank's, one file or several).
          --ranks N maps a job recorded on fewer ranks onto N (see
          docs/guide/trace-import.md). A record that cannot be imported
          is an error naming its file and record (or line).

Flags:
`

func runTrace(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, traceHelp, traces.CurrentVersion)
		if len(args) == 0 {
			return fmt.Errorf("%w: missing subcommand (info, cat, export, merge or import)", errUsage)
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("trace "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, traceHelp, traces.CurrentVersion)
		fs.PrintDefaults()
	}
	switch sub {
	case "info":
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			return fmt.Errorf("%w: trace info needs at least one FILE", errUsage)
		}
		for i, p := range pos {
			if i > 0 {
				fmt.Fprintln(stdout)
			}
			if err := traceInfo(stdout, p); err != nil {
				return err
			}
		}
		return nil
	case "cat":
		rank := fs.Int("rank", -1, "only rows of rank `R`")
		call := fs.String("call", "", "only rows of call `COMM:CALL` (communicator id, hex with 0x or decimal, and call number)")
		limit := fs.Int64("limit", 0, "print at most `N` rows (0: all)")
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return fmt.Errorf("%w: trace cat needs exactly one FILE, got %d", errUsage, len(pos))
		}
		filter := traces.Filter{}
		rankSet := false
		fs.Visit(func(f *flag.Flag) { rankSet = rankSet || f.Name == "rank" })
		if rankSet && *rank < 0 {
			return fmt.Errorf("%w: --rank %d: want a rank, 0 or more", errUsage, *rank)
		}
		if *rank >= 0 {
			if *rank > 1<<30 {
				return fmt.Errorf("%w: --rank %d out of range", errUsage, *rank)
			}
			filter = filter.Rank(int32(*rank))
		}
		if *call != "" {
			c, n, ok := strings.Cut(*call, ":")
			comm, err1 := strconv.ParseUint(c, 0, 64)
			seq, err2 := strconv.ParseInt(n, 10, 64)
			if !ok || err1 != nil || err2 != nil || seq < 0 {
				return fmt.Errorf("%w: --call %q: want COMM:CALL, e.g. 0xa62b7a58480480ae:12", errUsage, *call)
			}
			filter = filter.Call(comm, seq)
		}
		if *limit < 0 {
			return fmt.Errorf("%w: --limit %d: must be >= 0", errUsage, *limit)
		}
		return traceCat(stdout, pos[0], filter, *limit)
	case "export":
		format := fs.String("format", "chrome", "output `format`: chrome, pprof or summary")
		out := fs.String("o", "-", "write to `OUT` (- for stdout)")
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if len(pos) == 0 || len(pos) > 2 {
			return fmt.Errorf("%w: trace export needs one call trace and/or one event trace, got %d files", errUsage, len(pos))
		}
		if !slices.Contains([]string{"chrome", "pprof", "summary"}, *format) {
			return fmt.Errorf("%w: --format %q: want chrome, pprof or summary", errUsage, *format)
		}
		return traceExport(stdout, pos, *format, *out)
	case "import":
		return traceImport(fs, args, stdout)
	case "merge":
		out := fs.String("o", "", "write the merged call trace to `OUT.parquet` (and its event trace to OUT.events.parquet)")
		pos, err := parseInterspersed(fs, args)
		if err != nil {
			return err
		}
		if *out == "" || !strings.HasSuffix(*out, ".parquet") || strings.HasSuffix(*out, ".events.parquet") {
			return fmt.Errorf("%w: trace merge needs -o OUT.parquet (a call trace's name)", errUsage)
		}
		if len(pos) == 0 {
			return fmt.Errorf("%w: trace merge needs the call traces to merge", errUsage)
		}
		return traceMerge(stdout, pos, *out)
	}
	return fmt.Errorf("%w: unknown trace subcommand %q (want info, cat, export, merge or import)", errUsage, sub)
}

// traceMerge merges the call traces parts into out and, where every part
// has an event trace beside it, those into out's event trace.
func traceMerge(w io.Writer, parts []string, out string) error {
	if err := traces.CheckDistinctFiles(parts); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	var events []string
	for _, p := range parts {
		kind, err := traces.ReadKind(p)
		if err != nil {
			return err
		}
		if kind != traces.KindCall {
			return fmt.Errorf("%w: %s is not a call trace (give the call traces; their event traces are found beside them)", errUsage, p)
		}
		if p == out {
			return fmt.Errorf("%w: %s is both a part and the output", errUsage, p)
		}
		ev := strings.TrimSuffix(p, ".parquet") + ".events.parquet"
		if _, err := os.Stat(ev); err == nil {
			events = append(events, ev)
		}
	}
	if len(events) != 0 && len(events) != len(parts) {
		return fmt.Errorf("%d of %d parts have an event trace beside them: all or none must", len(events), len(parts))
	}
	extra, err := profiledComms(parts)
	if err != nil {
		return fmt.Errorf("merge %s: %w", out, err)
	}
	if err := writeOutput(out, w, func(f io.Writer) error { return traces.MergeCallFilesMeta(f, parts, extra) }); err != nil {
		return fmt.Errorf("merge %s: %w", out, err)
	}
	fmt.Fprintf(w, "wrote %s (%d parts)\n", out, len(parts))
	if len(events) == 0 {
		return nil
	}
	evOut := strings.TrimSuffix(out, ".parquet") + ".events.parquet"
	if err := writeOutput(evOut, w, func(f io.Writer) error { return traces.MergeEventFiles(f, events) }); err != nil {
		os.Remove(out) // both or neither
		return fmt.Errorf("merge %s: %w", evOut, err)
	}
	fmt.Fprintf(w, "wrote %s\n", evOut)
	return nil
}

// profiledComms is the merged trace's communicators (traces.MetaComms)
// when every part was written by the NCCL profiler plugin, each knowing
// only its own process's ranks (profiler.MetaComms): the job's
// communicators, which replay run needs for communicators that span
// fewer than all ranks. nil when no part is a profiler trace.
func profiledComms(parts []string) (map[string]string, error) {
	metas := make([]map[string]string, len(parts))
	profiled := 0
	for i, p := range parts {
		r, err := traces.OpenCallFile(p)
		if err != nil {
			return nil, err
		}
		metas[i] = r.Info().Metadata
		r.Close()
		if _, ok := metas[i][profiler.MetaComms]; ok {
			profiled++
		}
	}
	switch {
	case profiled == 0:
		return nil, nil
	case profiled < len(parts):
		return nil, fmt.Errorf("%d of %d parts were written by the profiler plugin: merge all of a job's parts or none", profiled, len(parts))
	}
	jc, err := profiler.JobComms(parts, metas)
	if err != nil {
		return nil, err
	}
	comms := make([]traces.CommInfo, len(jc))
	for i, c := range jc {
		comms[i] = traces.CommInfo{ID: c.Comm, Name: c.Name, Ranks: c.Ranks}
	}
	enc, err := traces.EncodeComms(comms)
	if err != nil {
		return nil, err
	}
	return map[string]string{traces.MetaComms: enc}, nil
}

// openTraces opens each path with the reader its kind needs.
func openTraces(paths []string) (*traces.CallReader, *traces.EventReader, func(), error) {
	var (
		calls  *traces.CallReader
		events *traces.EventReader
	)
	closeAll := func() {
		if calls != nil {
			calls.Close()
		}
		if events != nil {
			events.Close()
		}
	}
	for _, p := range paths {
		kind, err := traces.ReadKind(p)
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
		switch kind {
		case traces.KindCall:
			if calls != nil {
				closeAll()
				return nil, nil, nil, fmt.Errorf("%w: two call traces given (%s and %s)", errUsage, calls.Info().Name, p)
			}
			calls, err = traces.OpenCallFile(p)
		case traces.KindEvent:
			if events != nil {
				closeAll()
				return nil, nil, nil, fmt.Errorf("%w: two event traces given (%s and %s)", errUsage, events.Info().Name, p)
			}
			events, err = traces.OpenEventFile(p)
		}
		if err != nil {
			closeAll()
			return nil, nil, nil, err
		}
	}
	return calls, events, closeAll, nil
}

func traceInfo(w io.Writer, path string) error {
	calls, events, closeAll, err := openTraces([]string{path})
	if err != nil {
		return err
	}
	defer closeAll()
	var info traces.FileInfo
	if calls != nil {
		info = calls.Info()
	} else {
		info = events.Info()
	}
	fmt.Fprintf(w, "file:        %s\n", info.Name)
	fmt.Fprintf(w, "kind:        %s trace\n", info.Kind)
	fmt.Fprintf(w, "schema:      %s\n", info.Version)
	fmt.Fprintf(w, "size:        %d bytes\n", info.Size)
	fmt.Fprintf(w, "rows:        %d in %d row group(s)\n", info.Rows, len(info.RowGroups))
	fmt.Fprintf(w, "compression: %s\n", info.Compression)
	fmt.Fprintf(w, "sorted by:   %s\n", orDash(info.SortOrder))
	fmt.Fprintf(w, "created by:  %s\n", orDash(info.CreatedBy))
	keys := make([]string, 0, len(info.Metadata))
	for k := range info.Metadata {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "metadata:    %s = %s\n", k, info.Metadata[k])
	}
	if !info.Indexed {
		fmt.Fprintln(w, "index:       none (lookups scan every row group)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "row group\trows\tranks\tcalls\tstart_ns\t")
	for i, g := range info.RowGroups {
		fmt.Fprintf(tw, "%d\t%d\t%d..%d\t%d..%d\t%d..%d\t\n", i, g.Rows, g.Rank[0], g.Rank[1], g.Call[0], g.Call[1], g.StartNs[0], g.StartNs[1])
	}
	return tw.Flush()
}

func traceCat(w io.Writer, path string, filter traces.Filter, limit int64) error {
	calls, events, closeAll, err := openTraces([]string{path})
	if err != nil {
		return err
	}
	defer closeAll()
	bw := bufio.NewWriter(w)
	var n int64
	errLimit := fmt.Errorf("limit reached")
	done := func() bool { return limit > 0 && n >= limit }
	if calls != nil {
		fmt.Fprintln(bw, "job\tcomm\tcall\trank\tnranks\top\talgorithm\tprotocol\tchannels\tcount\tdatatype\tredop\troot\tstream\tenqueue_ns\tstart_ns\tend_ns\tsource\thost")
		err = calls.Scan(filter, func(rows []traces.CallRow) error {
			for _, r := range rows {
				if done() {
					return errLimit
				}
				n++
				fmt.Fprintf(bw, "%s\t%#x\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t%#x\t%d\t%d\t%d\t%s\t%s\n",
					r.Job, r.Comm, r.Call, r.Rank, r.NRanks, r.Op, r.Algorithm, r.Protocol, r.Channels, r.Count, r.Datatype,
					r.RedOp, r.Root, r.Stream, r.EnqueueNs, r.StartNs, r.EndNs, r.Source, r.Host)
			}
			return nil
		})
	} else {
		fmt.Fprintln(bw, "comm\tcall\trank\tchannel\tsend_peer\trecv_peer\tprimitive\tprotocol\tstep\tbytes\tstart_ns\tend_ns\tsource\tdata_ns")
		err = events.Scan(filter, func(rows []traces.EventRow) error {
			for _, r := range rows {
				if done() {
					return errLimit
				}
				n++
				fmt.Fprintf(bw, "%#x\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d\n",
					r.Comm, r.Call, r.Rank, r.Channel, r.SendPeer, r.RecvPeer, r.Primitive, r.Protocol, r.Step, r.Bytes,
					r.StartNs, r.EndNs, r.Source, r.DataNs)
			}
			return nil
		})
	}
	if err != nil && err != errLimit {
		bw.Flush()
		return err
	}
	return bw.Flush()
}

func traceExport(stdout io.Writer, paths []string, format, out string) error {
	calls, events, closeAll, err := openTraces(paths)
	if err != nil {
		return err
	}
	defer closeAll()
	if format == "pprof" && events == nil {
		return fmt.Errorf("%w: --format pprof needs an event trace", errUsage)
	}
	err = writeOutput(out, stdout, func(w io.Writer) error {
		switch format {
		case "chrome":
			return traces.WriteChrome(w, calls, events)
		case "pprof":
			return traces.WritePprof(w, events)
		default:
			return traces.WriteSummary(w, calls, events)
		}
	})
	if err == nil && out != "-" {
		// The file is the output: say where it went and what opens it.
		switch format {
		case "chrome":
			fmt.Fprintf(stdout, "wrote %s: open it in ui.perfetto.dev or chrome://tracing\n", out)
		case "pprof":
			fmt.Fprintf(stdout, "wrote %s: go tool pprof -top %s\n", out, out)
		default:
			fmt.Fprintf(stdout, "wrote %s\n", out)
		}
	}
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
