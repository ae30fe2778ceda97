package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twinccl/twinccl/traces"
)

// importFormats are the formats "trace import" reads.
var importFormats = []string{"chakra", "kineto", "nccl-log"}

// traceImport is "replay trace import": it reads other tools' traces into
// one call trace, written atomically.
func traceImport(fs *flag.FlagSet, args []string, stdout io.Writer) error {
	format := fs.String("format", "", "input `format`: chakra, kineto or nccl-log")
	out := fs.String("o", "", "write the call trace to `OUT.parquet`")
	dtype := fs.String("dtype", "", "chakra: element `type` of nodes whose inputs name none (default bfloat16)")
	groups := fs.String("comm-groups", "", "chakra: ASTRA-sim's communicator group `FILE` (comm_group.json: {\"PG\": [RANK, ...]})")
	ranks := fs.Int("ranks", 0, "map the job onto `N` ranks, a multiple of its own (docs/guide/trace-import.md); 0: as recorded")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	switch {
	case *format == "":
		return fmt.Errorf("%w: trace import needs --format (%s)", errUsage, strings.Join(importFormats, ", "))
	case !strings.Contains(" "+strings.Join(importFormats, " ")+" ", " "+*format+" "):
		return fmt.Errorf("%w: --format %q: want %s", errUsage, *format, strings.Join(importFormats, ", "))
	case *out == "" || !strings.HasSuffix(*out, ".parquet"):
		return fmt.Errorf("%w: trace import needs -o OUT.parquet", errUsage)
	case len(pos) == 0:
		return fmt.Errorf("%w: trace import needs the files to import", errUsage)
	case *ranks < 0:
		return fmt.Errorf("%w: --ranks %d: want 0 or more", errUsage, *ranks)
	case (*dtype != "" || *groups != "") && *format != "chakra":
		return fmt.Errorf("%w: --dtype and --comm-groups apply to --format chakra", errUsage)
	}
	if err := traces.CheckDistinctFiles(pos); err != nil {
		return err
	}
	files := make([]traces.NamedReader, len(pos))
	for i, p := range pos {
		if p == *out {
			return fmt.Errorf("%w: %s is both an input and the output", errUsage, p)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[i] = traces.NamedReader{Name: p, R: bytes.NewReader(data)}
	}
	var job *traces.Job
	switch *format {
	case "chakra":
		opt := traces.ChakraOptions{Datatype: *dtype}
		if *groups != "" {
			f, err := os.Open(*groups)
			if err != nil {
				return fmt.Errorf("--comm-groups: %w", err)
			}
			opt.CommGroups, err = traces.ReadCommGroups(f, *groups)
			f.Close()
			if err != nil {
				return err
			}
		}
		job, err = traces.ImportChakra(files, opt)
	case "kineto":
		job, err = traces.ImportKineto(files)
	case "nccl-log":
		job, err = traces.ImportNCCLLog(files)
	}
	if err != nil {
		return err
	}
	recorded := job.NRanks()
	if *ranks > 0 && *ranks != recorded {
		if job, err = job.Widen(*ranks); err != nil {
			return fmt.Errorf("--ranks: %w", err)
		}
	}
	if err := writeOutput(*out, stdout, func(w io.Writer) error { return job.Write(w, traces.WriterOptions{}) }); err != nil {
		return fmt.Errorf("import %s: %w", *out, err)
	}
	fmt.Fprintf(stdout, "imported %d call row(s) of %d rank(s) and %d communicator(s) from %d %s file(s)", len(job.Calls), job.NRanks(), len(job.Comms), len(files), *format)
	if job.NRanks() != recorded {
		fmt.Fprintf(stdout, ", recorded on %d rank(s)", recorded)
	}
	fmt.Fprintf(stdout, "\nwrote %s\n", *out)
	return nil
}
