package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

const ginHelp = `Usage: replay gin [--topo FILE.xml] [--nodes N] [-b B] [-e B] [-f F] [--contexts C]
                  [--calib FILE.json] [--p2p] [--json OUT] [--progress]

Simulates NCCL 2.28's GPU-initiated networking (GIN) all-to-all example with the
discrete-event simulator (exec/sim RunGin): every rank's thread block b (one per
context) joins a barrier, puts its share of the slice for every peer p into p's
window at offset rank*slice with a SignalInc on signal b, waits until signal b has
counted one put from every rank, and flushes. Puts to ranks of other hosts go
through the GPUs' NICs with GPUDirect RDMA (RDMA costs from the calibration's
net_ib section: QP message rate, write latency, the signal as an atomic behind the
payload on the same QP); puts within a host take the P2P path (NVLink or PCIe)
when NCCL would use P2P, at the gin section's local copy rate. A topology whose
hosts only have socket NICs, or no GPUDirect RDMA, cannot run GIN between hosts.

It prints an nccl-tests-like table: SIZE is each rank's whole buffer (SIZE/ranks to
every rank, itself included; rounded down to whole float32 elements per rank),
count its elements, time the launch plus the kernel, algbw SIZE/time and busbw
algbw*(ranks-1)/ranks (nccl-tests' alltoall factor). --p2p adds the time of the
same all-to-all on NCCL's p2p schedule ("replay sim --op alltoall").
Every put is a transfer of its own (no symmetry folding as in "replay sim --mode
fast"): beyond a few tens of ranks a run can take minutes.
Sizes take K, M, G suffixes (powers of 1024). Without --topo the embedded default
topology is used (%s); without --calib the embedded calibration (%s).

--json OUT writes one row per size: op, bytes, count, contexts, time_us,
algbw_GBps, busbw_GBps, puts, events and, with --p2p, p2p_time_us (- for stdout).
On a terminal, or with --progress, it says on stderr which size it simulates
("gin: size 5/12, 4194304 B, 3 s"), never on stdout.

Flags:
`

// ginRow is one simulated size, as --json writes it.
type ginRow struct {
	Op        string  `json:"op"`
	Bytes     int64   `json:"bytes"`
	Count     int64   `json:"count"`
	Contexts  int     `json:"contexts"`
	TimeUs    float64 `json:"time_us"`
	AlgBW     float64 `json:"algbw_GBps"`
	BusBW     float64 `json:"busbw_GBps"`
	Puts      int     `json:"puts"`
	Events    uint64  `json:"events"`
	P2PTimeUs float64 `json:"p2p_time_us,omitempty"`
}

func runGin(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gin", flag.ContinueOnError)
	fs.SetOutput(stderr)
	topo := fs.String("topo", "", "topology XML `FILE` (default: the embedded one)")
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	minBytes := fs.String("b", "8", "smallest size (nccl-tests' -b)")
	maxBytes := fs.String("e", "1G", "largest size (nccl-tests' -e)")
	factor := fs.Int64("f", 4, "size multiplication factor between rows (nccl-tests' -f)")
	contexts := fs.Int("contexts", 4, "GIN contexts (one thread block each)")
	calibPath := fs.String("calib", "", calibFlagHelp)
	withP2P := fs.Bool("p2p", false, "also simulate the p2p-schedule AlltoAll of each size")
	jsonOut := fs.String("json", "", "also write the rows as JSON to `OUT` (- for stdout only)")
	progress := fs.Bool("progress", false, "report the size simulated on stderr even when it is not a terminal (a line a second at most)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, ginHelp, twinccl.DefaultTopology, sim.DefaultCalibName)
		fs.PrintDefaults()
	}
	pos, err := parseTopologyArgs(fs, args, topo)
	if err != nil {
		return err
	}
	lo, hi, err := parseSweep("-b", *minBytes, "-e", *maxBytes, "-f", *factor)
	if err != nil {
		return err
	}
	if *contexts < 1 || *contexts > 64 {
		return fmt.Errorf("%w: --contexts %d: want 1..64", errUsage, *contexts)
	}
	res, err := searchTopology(pos, *nodes)
	if err != nil {
		return err
	}
	n := res.Cluster.NRanks
	s, calib, calibName, bar, err := newSimulator(res, *calibPath, sim.ModeAuto, false, stderr)
	if err != nil {
		return err
	}
	defer bar.done()
	quiet := *jsonOut == "-"
	if !quiet {
		fmt.Fprintf(stdout, "# replay gin: %s, %d rank(s) on %d node(s), %d context(s), NCCL %s rules, calibration %s (%s)\n",
			res.Cluster.File, n, res.Plan.NNodes, *contexts, search.NCCLVersion, calib.Name, calibName)
		fmt.Fprintf(stdout, "# GIN all-to-all: barrier; put(slice for p -> p's window at rank*slice, SignalInc); waitSignal(ranks); flush\n#\n")
		fmt.Fprintf(stdout, "# %12s %12s %8s %4s %12s %12s %12s", "size(B)", "count", "type", "ctx", "time(us)", "algbw(GB/s)", "busbw(GB/s)")
		if *withP2P {
			fmt.Fprintf(stdout, " %12s", "p2p(us)")
		}
		fmt.Fprintln(stdout)
	}
	dt := model.DtypeFP32
	unit := int64(dt.Size()) * int64(n)
	sizes := 0
	for size := lo; size <= hi; size *= *factor {
		if size/unit > 0 {
			sizes++
		}
		if size > hi / *factor {
			break
		}
	}
	prog := newProgressLine(stderr, *progress, "gin")
	defer prog.done()
	if prog != nil {
		s.Machine.Progress = nil // the sizes are reported instead of one call's slices
	}
	var rows []ginRow
	for size := lo; size <= hi; size *= *factor {
		bytes := size / unit * unit
		if bytes > 0 {
			prog.report("size %d/%d, %d B, %s", len(rows)+1, sizes, bytes, prog.elapsed())
			row, err := simGinRow(s, bytes, n, *contexts, *withP2P)
			if err != nil {
				return err
			}
			rows = append(rows, row)
			if !quiet {
				prog.clear() // the row's line is not drawn over on a terminal
				fmt.Fprintf(stdout, "  %12d %12d %8s %4d %12.2f %12.2f %12.2f", row.Bytes, row.Count, dt, row.Contexts, row.TimeUs, row.AlgBW, row.BusBW)
				if *withP2P {
					fmt.Fprintf(stdout, " %12.2f", row.P2PTimeUs)
				}
				fmt.Fprintln(stdout)
			}
		}
		if size > hi / *factor {
			break // the next size would overflow or exceed hi
		}
	}
	prog.done()
	if *jsonOut != "" {
		return writeJSON(*jsonOut, stdout, rows)
	}
	return nil
}

// simGinRow simulates the GIN all-to-all of bytes per rank (and, with
// p2p, the p2p-schedule AlltoAll of the same size).
func simGinRow(s *sim.Simulator, bytes int64, n, contexts int, p2p bool) (ginRow, error) {
	dt := model.DtypeFP32
	count, err := sim.CountOf(model.CollAlltoAll, bytes, dt, n)
	if err != nil {
		return ginRow{}, err
	}
	p, err := sim.GinAlltoAllProgram(n, contexts, bytes/int64(n))
	if err != nil {
		return ginRow{}, err
	}
	r, err := s.Machine.RunGin(p)
	if err != nil {
		return ginRow{}, fmt.Errorf("gin all-to-all of %d bytes: %w", bytes, err)
	}
	algBW := float64(bytes) / (r.TimeUs * 1e3)
	row := ginRow{Op: "gin-alltoall", Bytes: bytes, Count: count, Contexts: contexts, TimeUs: round3(r.TimeUs),
		AlgBW: round3(algBW), BusBW: round3(algBW * sim.BusFactor(model.CollAlltoAll, n)), Puts: len(r.Puts), Events: r.Events}
	if p2p {
		cr, err := s.Run(sim.Call{Coll: model.CollAlltoAll, Count: count, Dtype: dt, Op: model.RedSum, Algo: -1, Proto: -1})
		if err != nil {
			return ginRow{}, err
		}
		row.P2PTimeUs = round3(cr.TimeUs)
	}
	return row, nil
}
