// Command replay inspects recorded NCCL topologies offline and, as the
// simulator lands, replays collectives on them. It never needs a GPU.
//
// Usage:
//
//	replay topo [FILE.xml] [--nodes N] [--json OUT]
//	replay search [FILE.xml] [--nodes N] [--json OUT] [--graph-out G.xml]
//	replay tune [FILE.xml] --op allreduce --bytes 64M [--nodes N]
//	replay sim [FILE.xml] --op allreduce --minbytes 8 --maxbytes 1G
//	replay gin [--topo FILE.xml] [--nodes N] -b 8 -e 1G -f 4 [--contexts C]
//	replay calibrate TABLE.tsv --out CALIB.json
//	replay run CALLS.parquet [--topo FILE.xml] [--out PREFIX]
//	replay trace info|cat|export FILE...
//
// Run "replay help" for the full text.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/twinccl/twinccl/internal/atomicfile"
	"github.com/twinccl/twinccl/internal/version"
)

// command is one subcommand of replay.
type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"topo", "print a topology's system graph and paths as NCCL does (and as JSON)", runTopo},
	{"search", "run NCCL's channel search, ring/tree wiring and tuning model on a topology", runSearch},
	{"tune", "predict NCCL's algorithm, protocol, channels and time for one collective call", runTune},
	{"sim", "simulate collectives on a topology and print an nccl-tests-like table", runSim},
	{"gin", "simulate the GPU-initiated networking (GIN) all-to-all on a topology", runGin},
	{"run", "replay a recorded call trace on a topology and write predicted traces", runReplayRun},
	{"compare", "compare hardware timings (call trace or run gpu --json) with the simulator", runCompare},
	{"calibrate", "fit the simulator's calibration to measured timings", runCalibrate},
	{"accuracy", "regenerate docs/accuracy.md: the simulator's errors on the manifest's eval recordings", runAccuracy},
	{"trace", "inspect, print, export, merge and import call and event traces (info, cat, export, merge, import)", runTrace},
}

const usageHeader = `replay: inspect and replay NCCL topologies offline (no GPU needed).

Usage:
  replay <command> [arguments]

Commands:
`

const usageFooter = `
Run "replay <command> -h" or "replay help <command>" for a command's flags,
"replay --version" for the build.
Environment: NCCL_P2P_LEVEL, NCCL_P2P_DISABLE, NCCL_NET_GDR_LEVEL, NCCL_NET_GDR_READ,
NCCL_NET_GDR_C2C, NCCL_NVB_DISABLE, NCCL_PXN_DISABLE, NCCL_PXN_C2C,
NCCL_NET_DISABLE_INTRA and NCCL_SHM_DISABLE change path decisions as in NCCL 2.28.9.
NCCL_MNNVL_ENABLE=0 splits a multi-host NVLink dump into hosts joined by the network;
NCCL_MNNVL_ENABLE=1 with --nodes N makes the N copies of a single-host file one NVLink
domain (MNNVL clique), e.g. the 18 trays of a GB200 NVL72 rack; TWINCCL_MNNVL_HOSTS=K
cuts them into cliques of K hosts (racks) joined by the network.
`

func usage(w io.Writer) {
	fmt.Fprint(w, usageHeader)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, usageFooter)
}

// errUsage marks a command-line mistake: the message is printed with a hint.
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{} // a CLI's messages need no timestamp
			}
			return a
		},
	})))
	switch {
	case len(args) == 0:
		usage(stderr)
		return 2
	case args[0] == "--version" || args[0] == "-version" || args[0] == "version":
		fmt.Fprintln(stdout, version.Line("replay", revision))
		return 0
	case args[0] == "help" && len(args) > 1:
		// "replay help CMD" is "replay CMD -h".
		args = []string{args[1], "-h"}
	case args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		errw := stderr
		if asksHelp(args[1:]) {
			// Help that was asked for is the output: stdout, exit 0.
			errw = stdout
		}
		err := c.run(args[1:], stdout, errw)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			fmt.Fprintf(stderr, "replay %s: %v\nRun \"replay %s -h\" for help.\n", c.name, err, c.name)
			return 2
		default:
			fmt.Fprintf(stderr, "replay %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "replay: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

// asksHelp reports whether args ask for a command's help (-h, -help or
// --help before any "--").
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// revision is the commit this binary was built from, as the Makefile
// stamps it (-X main.revision); see version.Revision.
var revision string

// parseInterspersed parses flags that may come before or after the
// positional arguments, and returns the positionals.
//
// A bad flag is one line (the caller prints it with a hint to -h), not the
// flag package's echo of it followed by the whole help; -h prints the help.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = usage; fs.SetOutput(out) }()
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.Usage = usage
				fs.SetOutput(out)
				fs.Usage()
				return nil, err
			}
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// writeOutput writes what fill produces to path atomically (see
// atomicfile), or to stdout when path is "-".
func writeOutput(path string, stdout io.Writer, fill func(io.Writer) error) error {
	if path == "-" {
		return fill(stdout)
	}
	return atomicfile.Write(path, fill)
}

// writeJSON writes v as indented JSON to path as writeOutput does.
func writeJSON(path string, stdout io.Writer, v any) error {
	return writeOutput(path, stdout, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", " ")
		return enc.Encode(v)
	})
}
