// Command run runs twinccl on real hardware.
//
// Usage:
//
//	run [-v] <command> [flags]
//
// Commands:
//
//	topo    discover this machine's topology and print it as NCCL topology XML
//
// Build it with lazy binding, which go-nvml needs:
//
//	go build -ldflags=-extldflags=-Wl,-z,lazy ./cmd/run
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"strings"
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
	{name: "bench", summary: "run collectives on the host device over shm and the net plugin (sockets or ib) and print an nccl-tests-like table", run: runBench},
	{name: "netprobe", summary: "measure this host's loopback TCP sockets (latency, one-way and two-way throughput) as a socket proxy sees them", run: runNetProbe},
	{name: "gpu", summary: "run an nccl-tests-like sweep on GPUs, one process per GPU, optionally side by side with NCCL", run: runGPU},
}

// env is what a command gets from main: output streams and a logger.
type env struct {
	stdout, stderr io.Writer
	log            *slog.Logger
}

// usageError marks errors that are the user's invocation (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func usage(w io.Writer) {
	fmt.Fprintf(w, `run: run twinccl on real hardware (GPUs through NVML and CUDA).

Usage:
  run [-v] -np N [--op allreduce] [-b 8] [-e 128M] [-f 2] [-n iters] [-w warmup]
         [-c check] [--dtype T] [--redop OP] [--algo A] [--proto P] [--trace OUT.parquet]
         [--net socket|ib]
  run [-v] <command> [flags]

The first form is "run bench": a sweep on the host device (see run bench -h).
--net picks the net plugin between ranks of different hosts: socket (TCP)
or ib (libibverbs where an RDMA device is found, else the software verbs
provider, which says so in a log line; TWINCCL_IB_PROVIDER=rdma|soft
forces one).

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, `
Global flags:
  -v    log diagnostics (debug level) to stderr

Run "run <command> -h" for a command's flags.
`)
}

// run is main without the process exit: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	args = bareBench(args)
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	verbose := fs.Bool("v", false, "log diagnostics (debug level) to stderr")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return 0
		}
		fmt.Fprintf(stderr, "run: %v\n\n", err)
		usage(stderr)
		return 2
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
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	e := &env{
		stdout: stdout,
		stderr: stderr,
		log:    slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})),
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
		var ue *usageError
		if errors.As(err, &ue) {
			fmt.Fprintf(stderr, "run %s: %v\n", name, err)
			return 2
		}
		fmt.Fprintf(stderr, "run %s: %s\n", name, oneLine(err.Error()))
		return 1
	}
	fmt.Fprintf(stderr, "run: unknown command %q\n\n", name)
	usage(stderr)
	return 2
}

// bareBench turns the bare form `run [-v] -np 4 --op allreduce ...`
// (the first argument after -v is a flag other than -v and -h) into
// `run [-v] bench -np 4 ...`.
func bareBench(args []string) []string {
	i := 0
	for i < len(args) && (args[i] == "-v" || args[i] == "--v") {
		i++
	}
	if i == len(args) || !strings.HasPrefix(args[i], "-") {
		return args
	}
	switch strings.TrimLeft(args[i], "-") {
	case "h", "help", "v", "":
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

// buildRevision is the twinccl commit this binary was built from: the
// Makefile's stamp (revision), else Go's own VCS stamp of a build made in
// a git checkout (12 hex digits, "+modified" where the tree had changes);
// "" where the binary carries neither (go run, -buildvcs=false, no git).
func buildRevision() string {
	if revision != "" {
		return revision
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(len(rev), 12)]
	if modified {
		rev += "+modified"
	}
	return rev
}
