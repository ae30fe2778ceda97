package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/twinccl/twinccl"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

const tuneHelp = `Usage: replay tune [FILE.xml] --op OP --bytes SIZE [--dtype T] [--nodes N] [--ranks LIST]

Predicts what NCCL 2.28.9 does for one collective call on a topology: it runs the
same search, wiring and tuning model as "replay search", then NCCL's per-call choice
(ncclGetAlgoInfo): the algorithm, protocol, channel and thread counts, and the
predicted time, with the predicted time of every other algorithm/protocol pair.

SIZE is the buffer size as nccl-tests counts it: the buffer of AllReduce, Broadcast
and Reduce, the total output of AllGather, the total input of ReduceScatter. It takes
the suffixes K, M, G (powers of 1024), e.g. 64M. OP is one of broadcast, reduce,
allgather, reducescatter, allreduce. T is one of int8, uint8, int32, uint32, int64,
uint64, float16, bfloat16, float32, float64, fp8e4m3, fp8e5m2 (default float32).

Without FILE the embedded default topology is used (%s). NCCL_ALGO, NCCL_PROTO and
the other settings listed by "replay search -h" apply.

` + ranksHelp + `
Flags:
`

// dtypeSizes are NCCL's datatypes and their sizes in bytes.
var dtypeSizes = []struct {
	name string
	size int
	fp8  bool
}{
	{"int8", 1, false}, {"uint8", 1, false}, {"int32", 4, false}, {"uint32", 4, false},
	{"int64", 8, false}, {"uint64", 8, false}, {"float16", 2, false}, {"bfloat16", 2, false},
	{"float32", 4, false}, {"float64", 8, false}, {"fp8e4m3", 1, true}, {"fp8e5m2", 1, true},
}

func runTune(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("tune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 1, "number of identical hosts the file stands for (single-host files)")
	op := fs.String("op", "", "collective: broadcast, reduce, allgather, reducescatter or allreduce (required)")
	size := fs.String("bytes", "", "buffer size in bytes, nccl-tests style, with optional K/M/G suffix (required)")
	dtype := fs.String("dtype", "float32", "datatype")
	ranks := &ranksFlag{}
	fs.Var(ranks, "ranks", ranksFlagHelp)
	fs.Usage = func() {
		fmt.Fprintf(stderr, tuneHelp, twinccl.DefaultTopology)
		fs.PrintDefaults()
	}
	// Check the call's own flags before the (slower) search.
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *op == "" || *size == "" {
		return fmt.Errorf("%w: --op and --bytes are required", errUsage)
	}
	coll, err := model.ParseCollective(*op)
	if err != nil || int(coll) >= model.NumTunedCollectives {
		return fmt.Errorf("%w: --op %q: want one of broadcast, reduce, allgather, reducescatter, allreduce", errUsage, *op)
	}
	nBytes, err := parseSize(*size)
	if err != nil {
		return fmt.Errorf("%w: --bytes: %v", errUsage, err)
	}
	if nBytes == 0 {
		// NCCL 2.28.9 discards a collective of count 0 before the tuner
		// sees it (src/enqueue.cc taskAppend: "Empty collectives can be
		// discarded"): there is no choice to predict.
		return fmt.Errorf("%w: --bytes 0: NCCL discards an empty collective without choosing an algorithm; give at least one element", errUsage)
	}
	dt := -1
	for i, d := range dtypeSizes {
		if strings.EqualFold(d.name, *dtype) {
			dt = i
		}
	}
	if dt < 0 {
		names := make([]string, len(dtypeSizes))
		for i, d := range dtypeSizes {
			names[i] = d.name
		}
		return fmt.Errorf("%w: --dtype %q: want one of %s", errUsage, *dtype, strings.Join(names, ", "))
	}
	res, err := searchTopologyRanks(pos, *nodes, ranks.ranks, nil)
	if err != nil {
		return err
	}
	d := dtypeSizes[dt]
	count, err := callCount(coll, nBytes, d.size, res.Cluster.NRanks)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	ch, err := res.Tuning.ChooseCall(search.Call{Coll: coll, Count: count, TypeSize: d.size, FP8: d.fp8})
	if err != nil {
		return err
	}
	return printChoice(stdout, res, coll, nBytes, count, d.name, d.size, ch)
}

// parseSweep reads the smallest size, largest size and factor of a size
// sweep, each error naming its flag (loFlag, hiFlag, fFlag).
func parseSweep(loFlag, lo, hiFlag, hi, fFlag string, factor int64) (int64, int64, error) {
	l, err := parseSize(lo)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s: %v", errUsage, loFlag, err)
	}
	h, err := parseSize(hi)
	if err != nil {
		return 0, 0, fmt.Errorf("%w: %s: %v", errUsage, hiFlag, err)
	}
	if l < 1 || h < l {
		return 0, 0, fmt.Errorf("%w: sizes must satisfy 1 <= %s (%d) <= %s (%d)", errUsage, loFlag, l, hiFlag, h)
	}
	if factor < 2 {
		return 0, 0, fmt.Errorf("%w: %s %d: must be at least 2", errUsage, fFlag, factor)
	}
	return l, h, nil
}

// parseSize reads a byte count with an optional K, M or G suffix
// (model.ParseSize).
func parseSize(s string) (int64, error) { return model.ParseSize(s) }

// callCount turns an nccl-tests buffer size into NCCL's count argument.
func callCount(coll model.Collective, nBytes int64, typeSize, nRanks int) (int64, error) {
	if nBytes%int64(typeSize) != 0 {
		return 0, fmt.Errorf("%d bytes is not a whole number of %d-byte elements", nBytes, typeSize)
	}
	count := nBytes / int64(typeSize)
	if coll == model.CollAllGather || coll == model.CollReduceScatter {
		if count%int64(nRanks) != 0 {
			return 0, fmt.Errorf("%s: %d elements do not split evenly over %d ranks", coll, count, nRanks)
		}
		count /= int64(nRanks)
	}
	return count, nil
}

// busFactor is nccl-tests' bus bandwidth factor for a collective.
func busFactor(coll model.Collective, n int) float64 {
	switch coll {
	case model.CollAllReduce:
		return 2 * float64(n-1) / float64(n)
	case model.CollAllGather, model.CollReduceScatter:
		return float64(n-1) / float64(n)
	}
	return 1
}

func printChoice(w io.Writer, res *search.Result, coll model.Collective, nBytes, count int64, dtype string, typeSize int, ch search.Choice) error {
	n := res.Cluster.NRanks
	fmt.Fprintf(w, "# %s: %d rank(s) on %d node(s), NCCL %s rules\n", res.Cluster.File, n, res.Plan.NNodes, search.NCCLVersion)
	fmt.Fprintf(w, "%s of %d bytes (NCCL count %d of %s)\n", coll, nBytes, count, dtype)
	fmt.Fprintf(w, "choice: %s/%s, %d channel(s) x %d threads\n", ch.Algo, ch.Proto, ch.NChannels, ch.NThreads)
	if ch.Algo == model.AlgoRing || ch.Algo == model.AlgoTree {
		sp, err := model.SplitChannels(coll, ch.Proto, count, typeSize, n, ch.NChannels, res.Plan.NChannels)
		if err != nil {
			return err
		}
		unit := "elements"
		if coll == model.CollAllGather || coll == model.CollBroadcast {
			unit = "bytes" // NCCL moves these as bytes
		}
		fmt.Fprintf(w, "work: channels %d..%d, %s per channel first/middle/last %d/%d/%d\n",
			sp.ChannelLo, sp.ChannelHi, unit, sp.CountLo, sp.CountMid, sp.CountHi)
	}
	fmt.Fprintf(w, "predicted time: %.2f us", ch.TimeUs)
	if ch.TimeUs > 0 {
		algBW := float64(nBytes) / (float64(ch.TimeUs) * 1e3) // GB/s
		fmt.Fprintf(w, " (algbw %.2f GB/s, busbw %.2f GB/s)", algBW, algBW*busFactor(coll, n))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\npredicted time of every pair (us; - = not used):\n%-14s", "")
	for p := 0; p < model.NumProtocols; p++ {
		fmt.Fprintf(w, " %12s", model.Protocol(p))
	}
	fmt.Fprintln(w)
	var unused []string
	for a := 0; a < model.NumAlgorithms; a++ {
		used := false
		for p := 0; p < model.NumProtocols; p++ {
			used = used || ch.Costs[a][p] >= 0
		}
		if !used {
			// An algorithm the tuner cannot use here gets one line for all.
			unused = append(unused, model.Algorithm(a).String())
			continue
		}
		fmt.Fprintf(w, "%-14s", model.Algorithm(a))
		for p := 0; p < model.NumProtocols; p++ {
			if c := ch.Costs[a][p]; c >= 0 {
				fmt.Fprintf(w, " %12.2f", c)
			} else {
				fmt.Fprintf(w, " %12s", "-")
			}
		}
		fmt.Fprintln(w)
	}
	if len(unused) > 0 {
		fmt.Fprintf(w, "not available for this call: %s\n", strings.Join(unused, ", "))
	}
	for _, s := range res.Tuning.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	return nil
}
