package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/twinccl/twinccl/exec/hw/netprobe"
)

// runNetProbe measures this host's loopback sockets (netprobe.Loopback)
// and prints the result, as text or JSON.
func runNetProbe(e *env, args []string) error {
	fs := flag.NewFlagSet("run netprobe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	version := fs.Bool("version", false, "print the version and exit")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	addr := fs.String("addr", "127.0.0.1:0", "local address to probe on")
	size := fs.Int("bytes", 32<<20, "bytes of each bulk transfer")
	reps := fs.Int("r", 3, "repetitions (the best of each measurement is kept)")
	usage := func() {
		fmt.Fprintf(e.stdout, `run netprobe: measure this host's TCP sockets as a socket network proxy
sees them: the one-way latency of an 8-byte message between two
busy-polling threads, and the throughput of a bulk transfer in one
direction and in both at once. "run gpu" records it in split-host runs
(net_probe, before and after the sweep), so that a recording says how fast
its host's sockets were; the simulator does not scale by it yet (within
one start of a machine the probe does not predict a run's socket times).

Usage: run netprobe [--json] [--addr HOST:PORT] [--bytes N] [-r N]

`)
		fs.SetOutput(e.stdout)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			return err
		}
		return &usageError{err.Error() + " (see run netprobe -h)"}
	}
	if *version {
		printVersion(e.stdout)
		return flag.ErrHelp
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	if *size < 1<<20 || *reps < 1 {
		return &usageError{"--bytes must be at least 1 MiB and -r at least 1"}
	}
	r, err := netprobe.Loopback(netprobe.Options{Addr: *addr, Bytes: *size, Repeats: *reps, Timeout: 60 * time.Second})
	if err != nil {
		return err
	}
	if *asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(e.stdout, string(b))
		return nil
	}
	fmt.Fprintf(e.stdout, "netprobe %s: %s\n", r.Addr, r)
	return nil
}
