// Command run runs twinccl on real hardware: nccl-tests sweeps on the
// host device (ranks are CPU processes, no GPU needed) or on GPUs, with
// nccl-tests' flags, defaults and table, and this machine's topology.
//
// Usage:
//
//	run [-v] [-np N] [PROGRAM] [nccl-tests flags]   (run bench: the host device)
//	run [-v] gpu [-np N] [PROGRAM] [flags]          (GPUs)
//	run [-v] <command> [flags]
//	all_reduce_perf [flags]                         (a symbolic link to run)
//
// PROGRAM is an nccl-tests program name (all_reduce_perf, ...); see
// "run -h" and "run <command> -h".
//
// Build it with lazy binding, which go-nvml needs:
//
//	go build -ldflags=-extldflags=-Wl,-z,lazy ./cmd/run
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/twinccl/twinccl/exec/hw/bootstrap"
	"github.com/twinccl/twinccl/internal/version"
)

// command is one subcommand of run.
type command struct {
	name    string
	summary string
	// run executes the command with its own arguments (after the name).
	run func(env *env, args []string) error
}

// commands lists the subcommands in the order the help text shows them.
// Add new ones here.
var commands = []command{
	{name: "topo", summary: "discover this machine's topology and print or dump it as NCCL topology XML", run: runTopo},
	{name: "bench", summary: "an nccl-tests sweep on the host device (CPU processes over shm and the net plugin, sockets or ib); the default command", run: runBench},
	{name: "netprobe", summary: "measure this host's loopback TCP sockets (latency, one-way and two-way throughput) as a socket proxy sees them", run: runNetProbe},
	{name: "gpu", summary: "an nccl-tests sweep on GPUs, one process per GPU, optionally side by side with NCCL", run: runGPU},
	{name: "grid", summary: "a job of split communicators on the host device (tensor- and data-parallel groups running at once), data-checked, traced for replay run", run: runGrid},
}

// env is what a command gets from main: output streams and a logger.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
	verbose        bool // -v
}

// usageError marks errors that are the user's invocation (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	os.Exit(runAs(os.Args[0], os.Args[1:], os.Stdout, os.Stderr))
}

// runAs is main for a binary invoked as argv0: under an nccl-tests
// program's name (a symbolic link all_reduce_perf -> run) it runs that
// program on the host device, as "run all_reduce_perf ARGS" does.
func runAs(argv0 string, args []string, stdout, stderr io.Writer) int {
	name := filepath.Base(argv0)
	if _, ok, _ := perfCollective(name); ok {
		args = append([]string{name}, args...)
	}
	return run(args, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `run: run twinccl on real hardware: nccl-tests sweeps on the host device
(CPU processes, no GPU needed) or on GPUs, and this machine's topology.

Usage:
  run [-v] [-np N] [PROGRAM] [nccl-tests flags]     the host device (run bench)
  run [-v] gpu [-np N] [PROGRAM] [nccl-tests flags] GPUs (also: --gpu)
  run [-v] <command> [flags]
  run --version

PROGRAM is an nccl-tests program name: all_reduce_perf, all_gather_perf,
reduce_scatter_perf, broadcast_perf, reduce_perf, alltoall_perf or
sendrecv_perf; a symbolic link to this binary with one of those names
runs it too (ln -s run all_reduce_perf; ./all_reduce_perf -b 8 -e 1M),
on the host device, or on GPUs with --gpu. The flags are nccl-tests'
(-b -e -f -i -n -m -w -c -o -d -r -a -z -G -T -t -g, short or long), with
its defaults (-b 32M -e 32M -f 1 -i 1M -n 20 -w 1 -c 1), and the table is
nccl-tests' (out-of-place and in-place columns, "Avg bus bandwidth").
-o/--op takes a reduction (sum ...) as in nccl-tests or a collective
(allreduce ...) as it always has here: the names never overlap.

Examples:
  run -np 2 all_reduce_perf -b 8 -e 1M -f 4
  run -np 4 --op sendrecv -b 8 -e 64K -f 8
  run gpu -np 2 all_gather_perf -b 8 -e 1G -f 4 --baseline nccl

The first form is "run bench" (see run bench -h). --net picks the net
plugin between ranks of different hosts: socket (TCP) or ib (libibverbs
where an RDMA device is found, else the software verbs provider, which
says so in a log line; TWINCCL_IB_PROVIDER=rdma|soft forces one).

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Global flags:
  -v          log diagnostics (debug level) to stderr; a failed run of
              launched ranks prints every rank's error, not just the first
  --version   print the version and exit

Run "run <command> -h" for a command's flags.
`)
}

// printVersion writes the version: the module's, the commit this binary
// was built from, and the table format it prints.
func printVersion(w io.Writer) {
	fmt.Fprintf(w, "%s, nccl-tests %s table format\n", version.Line("run", revision), ntVersion)
}

// run is main without the process exit: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	args = bareBench(args)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	verbose := fs.Bool("v", false, "log diagnostics (debug level) to stderr")
	version := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "run: %v\n\n", err)
		usage(stderr)
		return 2
	}
	if *version {
		printVersion(stdout)
		return 0
	}
	if fs.NArg() == 0 {
		usage(stderr)
		return 2
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		usage(stdout)
		return 0
	}
	if _, ok, _ := perfCollective(name); ok {
		// run all_reduce_perf ...: the program is bench's operand.
		name, rest = "bench", fs.Args()
	}
	if name == "bench" {
		// --gpu: the same sweep on GPUs.
		for i, a := range rest {
			if a == "--gpu" || a == "-gpu" || a == "--gpu=true" || a == "-gpu=true" {
				name, rest = "gpu", append(append([]string(nil), rest[:i]...), rest[i+1:]...)
				break
			}
		}
	}
	launched := os.Getenv(envUID) != "" // a rank of the local launcher
	*verbose = *verbose || os.Getenv(envVerbose) == "1"
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})
	if launched && !*verbose {
		// The launcher names the rank that failed; each rank's note of
		// the peers it lost after that is noise without -v.
		h = quietLost{h}
	}
	e := &env{
		stdout:  stdout,
		stderr:  stderr,
		log:     slog.New(h),
		verbose: *verbose,
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		err := c.run(e, rest)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		}
		code := 1
		var ue *usageError
		if errors.As(err, &ue) {
			code = 2
		}
		msg := oneLine(err.Error())
		if launched {
			// For the launcher, which prints one line for the job.
			lost := 0
			if peerGone(err) {
				lost = 1
			}
			fmt.Fprintf(stderr, "%serror %d %d %s\n", ctlPrefix, code, lost, msg)
			return code
		}
		fmt.Fprintf(stderr, "run %s: %s\n", name, msg)
		return code
	}
	fmt.Fprintf(stderr, "run: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// peerGone reports whether err is the consequence of another rank going
// away: a lost peer, or a connection to it that broke.
func peerGone(err error) bool {
	for _, e := range []error{bootstrap.ErrPeerLost, io.EOF, io.ErrUnexpectedEOF, syscall.ECONNRESET, syscall.EPIPE} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// quietLost drops the "peer lost" records of a rank's log.
type quietLost struct{ slog.Handler }

func (q quietLost) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "peer lost" {
		return nil
	}
	return q.Handler.Handle(ctx, r)
}

func (q quietLost) WithAttrs(a []slog.Attr) slog.Handler { return quietLost{q.Handler.WithAttrs(a)} }
func (q quietLost) WithGroup(g string) slog.Handler      { return quietLost{q.Handler.WithGroup(g)} }

// bareBench turns the bare form `run [-v] -np 4 --op allreduce ...`
// (the first argument after -v is a flag other than -v, -h and
// --version) into `run [-v] bench -np 4 ...`.
func bareBench(args []string) []string {
	i := 0
	for i < len(args) && (args[i] == "-v" || args[i] == "--v") {
		i++
	}
	if i == len(args) || !strings.HasPrefix(args[i], "-") {
		return args
	}
	switch strings.TrimLeft(args[i], "-") {
	case "h", "help", "v", "", "version":
		return args
	}
	out := append([]string(nil), args[:i]...)
	out = append(out, "bench")
	return append(out, args[i:]...)
}

// oneLine folds a multi-line message onto one line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// revision is the twinccl commit this binary was built from as the
// Makefile stamps it (-X main.revision: 12 hex digits, "+modified"
// where tracked files had changes); "" in other builds.
var revision string

// buildRevision is the twinccl commit this binary was built from (see
// version.Revision); "" where the binary carries no stamp.
func buildRevision() string { return version.Revision(revision) }
