package search

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// This file is NCCL 2.28.9's tuning model (src/graph/tuning.cc,
// ncclTopoTuneModel): thread counts, the latency and bandwidth of every
// (collective, algorithm, protocol), the rules that enable or disable them,
// and the per-thread work thresholds. Arithmetic follows NCCL's C types:
// float where NCCL stores or computes in float, double where an expression
// is promoted to double (the tuner constants are doubles), so that the
// tables match NCCL bit for bit.

// Thread limits (device.h).
const (
	tuneWarpSize          = 32
	tuneMaxNThreads       = 640 // NCCL_MAX_NTHREADS
	tuneSimpleMaxNThreads = 512 // NCCL_SIMPLE_MAX_NTHREADS
	tuneLLMaxNThreads     = 512 // NCCL_LL_MAX_NTHREADS
	tuneLL128MaxNThreads  = 640 // NCCL_LL128_MAX_NTHREADS
)

// Default per-thread byte thresholds (NCCL_*_THREAD_THRESHOLD).
const (
	tuneLLThreadThreshold     = 8
	tuneLL128ThreadThreshold  = 8
	tuneSimpleThreadThreshold = 64
	tuneCollNetThreadThresh   = 512
)

// Hardware link classes of the latency table (NCCL_HW_*).
const (
	tuneHWNVLink = 0
	tuneHWPCI    = 1
	tuneHWNet    = 2
)

// Compute-capability rows of the bandwidth caps (NCCL_*_COMPCAP_IDX).
const (
	tuneVoltaIdx     = 0
	tuneAmpereIdx    = 1
	tuneHopperIdx    = 2
	tuneBlackwellIdx = 3
)

// CPU architecture and vendor "mixed" markers set when ranks disagree.
const (
	tuneCPUArchMixed   = 4
	tuneCPUVendorMixed = 4
)

const (
	nAlgo  = model.NumAlgorithms
	nProto = model.NumProtocols
	nColl  = model.NumTunedCollectives
)

// tuneConstants are NCCL's default tuner constants (ncclTunerConstants_t,
// all doubles), in µs and GB/s.
type tuneConstants struct {
	baseLat [nAlgo][nProto]float64
	hwLat   [3][nAlgo][nProto]float64
	// The caps below are indexed [compCapIndex][index2], index2 being 0 for
	// one node, 1 for two and 2 for more (llMaxBws uses index1 as its row).
	llMaxBws             [4][3]float64
	perChMaxRingLL128Bws [4][3]float64
	perChMaxTreeLL128Bws [4][3]float64
	perChMaxTreeBws      [4][3]float64
	perChMaxNVLSTreeBws  [4][3]float64
}

func tuneDefaultConstants() tuneConstants {
	return tuneConstants{
		baseLat: [nAlgo][nProto]float64{
			{6.8, 14.0, 8.4}, // Tree
			{6.6, 14.0, 8.4}, // Ring
			{0, 0, 0},        // CollNetDirect
			{0, 0, 0},        // CollNetChain
			{0, 0, 0},        // NVLS
			{0, 0, 0},        // NVLSTree
			{8.0, 8.0, 8.0},  // PAT
		},
		hwLat: [3][nAlgo][nProto]float64{
			{ // NVLink
				{0.6, 1.25, 4.0}, {0.6, 1.9, 3.4}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 25}, {0, 0, 25}, {0, 0, 4.0},
			},
			{ // PCI
				{1.0, 1.9, 4.0}, {1.0, 2.5, 5.7}, {0, 0, 3.7}, {0, 0, 2.8}, {0, 0, 0}, {0, 0, 0}, {0, 0, 4.0},
			},
			{ // network
				{5.0, 8.5, 14}, {2.7, 4.0, 14.0}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 20.9}, {0, 0, 14},
			},
		},
		llMaxBws: [4][3]float64{
			{39.0, 39.0, 20.4},
			{87.7, 22.5, 19.0},
			{141.0, 45.0, 35.0},
			{2 * 141.0, 2 * 45.0, 2 * 35.0},
		},
		perChMaxRingLL128Bws: [4][3]float64{
			// Blackwell: 2*36.7, 34.6, 2*36.7 in 2.28.9 (2.29 made it 40 everywhere).
			{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}, {2 * 36.7, 34.6, 2 * 36.7},
		},
		perChMaxTreeLL128Bws: [4][3]float64{
			{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}, {55.6, 31.67, 20.0},
		},
		perChMaxTreeBws: [4][3]float64{
			{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {70.0, 42.8, 24.0},
		},
		perChMaxNVLSTreeBws: [4][3]float64{
			{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {0.0, 57.7, 45.5}, {0.0, 96.0, 43.8},
		},
	}
}

// tuneNVLSEfficiency is the NVLS efficiency factor per compute-capability
// row (a float table in NCCL).
var tuneNVLSEfficiency = [4]float32{0, 0, 0.85, 0.74}

// NVLSEfficiency is nvlsEfficiency for GPUs of compute capability sm: the
// share of the NVLink bandwidth NCCL's tuner credits NVLS with (exec/sim
// sizes the NVSwitch's reduction and multicast by it).
func NVLSEfficiency(sm int) float64 {
	i := tuneVoltaIdx
	switch {
	case sm >= 100:
		i = tuneBlackwellIdx
	case sm >= 90:
		i = tuneHopperIdx
	case sm >= 80:
		i = tuneAmpereIdx
	}
	return float64(tuneNVLSEfficiency[i])
}

// tuneTreeCorrection is NCCL 2.28.9's empirical Tree bandwidth correction
// per protocol, indexed by log2(nBytes/64) (64 B .. 256 MB); float in NCCL
// (tuning.cc, treeCorrectionFactor: 23 entries; 2.29 added a 24th).
var tuneTreeCorrection = [nProto][23]float32{
	{1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
	{1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
	{.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
}

// tuneAlgoGraph is the graph NCCL hands the tuner for each algorithm: PAT
// reuses the tree graph, NVLS Tree the NVLS graph.
var tuneAlgoGraph = [nAlgo]model.GraphID{
	model.GraphTree, model.GraphRing, model.GraphCollNetDirect, model.GraphCollNetChain,
	model.GraphNVLS, model.GraphNVLS, model.GraphTree,
}

// TuneOptions are the NCCL_* settings the tuning model reads and the facts
// about the run that a topology does not say.
//
// Environment settings: Algo (NCCL_ALGO), Proto (NCCL_PROTO), NThreads
// (NCCL_NTHREADS), LL128NThreads (NCCL_LL128_NTHREADS), ThreadThresholds
// (NCCL_THREAD_THRESHOLDS), NetOverheadNs (NCCL_NET_OVERHEAD), PATEnable
// (NCCL_PAT_ENABLE) and LL128C2C (NCCL_LL128_C2C).
//
// Assumed facts: the CUDA runtime version NCCL was built with, whether NVLS
// (NVLink SHARP) is supported, whether CollNet is enabled and what the
// CollNet plugin offers, and whether the network plugin offloads to the
// device. The defaults match the reference runs (NVLS and CollNet off, a
// host network plugin).
type TuneOptions struct {
	// Algo and Proto restrict algorithms and protocols in NCCL's syntax
	// "[^]a,b;func:[^]c,..." (see ParseAlgoList); "" leaves all enabled.
	Algo, Proto string
	// NThreads overrides the LL and Simple thread counts and LL128NThreads
	// the LL128 one; 0 or less keeps NCCL's defaults. Like NCCL, a value
	// that is not a multiple of 32 becomes the maximum (512, or 640 for
	// LL128) and out-of-range values are clamped to [64, 512] (LL128:
	// [160, 640]); Tuning.Warnings records each such correction.
	NThreads, LL128NThreads int
	// ThreadThresholds are the bytes per thread below which the channel
	// and thread counts shrink, for Tree LL/LL128/Simple then Ring
	// LL/LL128/Simple; a negative entry keeps NCCL's default.
	ThreadThresholds [6]int64
	// NetOverheadNs replaces the CPU-dependent network overhead of ring
	// latencies (nanoseconds); negative (NCCL's -2) means unset.
	NetOverheadNs int64
	// PATEnable is NCCL_PAT_ENABLE: 0 off, 1 on (sm60+ only), 2 auto (one
	// GPU per node and a host network plugin).
	PATEnable int
	// LL128C2C lets LL128 run over PXN paths by default on sm90+.
	LL128C2C bool

	// CUDARuntimeVersion is the CUDART_VERSION NCCL was compiled with
	// (e.g. 12090); only 11080 changes anything (no LL128 for 2-rank Ring
	// AllReduce on sm90).
	CUDARuntimeVersion int
	// NVLSSupport is comm->nvlsSupport before the NVLS graph is searched;
	// it is dropped when the NVLS graph has no channel.
	NVLSSupport bool
	// CollNetEnable is comm->config.collnetEnable (NCCL_COLLNET_ENABLE and
	// a CollNet plugin); it is dropped when the CollNet chain graph has no
	// channel or the job has fewer than CollNetNodeThreshold nodes.
	CollNetEnable bool
	// CollNetNodeThreshold is NCCL_COLLNET_NODE_THRESHOLD (default 2).
	CollNetNodeThreshold int
	// CollNetChainSupport is comm->collNetChainSupport.
	CollNetChainSupport bool
	// CollNetHeads is the number of CollNet heads per node
	// (comm->collNetHeadsNum, channels[0].collnetDirect.nHeads).
	CollNetHeads int
	// CollNetAllGather and CollNetReduceScatter say whether the CollNet
	// plugin implements iallgather and ireducescatter.
	CollNetAllGather, CollNetReduceScatter bool
	// NetDeviceOffload is set when the network plugin is not a host plugin
	// (netDeviceType != NCCL_NET_DEVICE_HOST); it turns PAT's auto mode off.
	NetDeviceOffload bool
}

// DefaultTuneOptions returns NCCL 2.28.9's defaults with the reference
// runs' assumptions (no NVLS, no CollNet, host network plugin, CUDA 12.9).
func DefaultTuneOptions() TuneOptions {
	return TuneOptions{
		ThreadThresholds:     [6]int64{-2, -2, -2, -2, -2, -2},
		NetOverheadNs:        -2,
		PATEnable:            2,
		LL128C2C:             true,
		CUDARuntimeVersion:   12090,
		CollNetNodeThreshold: 2,
	}
}

// TuneEnvNames lists the environment variables TuneOptionsFromEnv reads.
var TuneEnvNames = []string{
	"NCCL_ALGO", "NCCL_PROTO", "NCCL_NTHREADS", "NCCL_LL128_NTHREADS", "NCCL_THREAD_THRESHOLDS",
	"NCCL_NET_OVERHEAD", "NCCL_PAT_ENABLE", "NCCL_LL128_C2C",
}

// TuneOptionsFromEnv reads the tuning settings from lookup (os.LookupEnv
// when nil), starting from DefaultTuneOptions. Errors name the variable.
//
// NCCL_ALGO and NCCL_PROTO are checked as NCCL does (an unknown name or
// function prefix is an error). Integer variables must be integers (NCCL
// would silently read a malformed value as 0, i.e. "unset").
// NCCL_THREAD_THRESHOLDS must hold exactly six integers: NCCL's sscanf
// would silently take only the leading ones; write -1 for an entry that
// should keep its default. NCCL_NTHREADS and NCCL_LL128_NTHREADS are
// accepted as NCCL accepts them and corrected by Tune (see TuneOptions).
func TuneOptionsFromEnv(lookup func(string) (string, bool)) (TuneOptions, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	o := DefaultTuneOptions()
	if v, ok := lookup("NCCL_ALGO"); ok {
		if _, err := ParseAlgoList(v); err != nil {
			return o, fmt.Errorf("NCCL_ALGO=%q: %w", v, err)
		}
		o.Algo = v
	}
	if v, ok := lookup("NCCL_PROTO"); ok {
		if _, err := ParseProtoList(v); err != nil {
			return o, fmt.Errorf("NCCL_PROTO=%q: %w", v, err)
		}
		o.Proto = v
	}
	intVar := func(name string, set func(int64)) error {
		n, ok, err := model.LookupEnvInt(lookup, name, 64)
		if ok {
			set(n)
		}
		return err
	}
	toInt := func(n int64) int {
		if n > math.MaxInt32 || n < math.MinInt32 {
			return int(int32(n)) // NCCL keeps the low 32 bits
		}
		return int(n)
	}
	if err := intVar("NCCL_NTHREADS", func(n int64) { o.NThreads = toInt(n) }); err != nil {
		return o, err
	}
	if err := intVar("NCCL_LL128_NTHREADS", func(n int64) { o.LL128NThreads = toInt(n) }); err != nil {
		return o, err
	}
	if err := intVar("NCCL_NET_OVERHEAD", func(n int64) { o.NetOverheadNs = n }); err != nil {
		return o, err
	}
	if err := intVar("NCCL_PAT_ENABLE", func(n int64) { o.PATEnable = toInt(n) }); err != nil {
		return o, err
	}
	if err := intVar("NCCL_LL128_C2C", func(n int64) { o.LL128C2C = n != 0 }); err != nil {
		return o, err
	}
	if v, ok := lookup("NCCL_THREAD_THRESHOLDS"); ok {
		t, err := ParseThreadThresholds(v)
		if err != nil {
			return o, fmt.Errorf("NCCL_THREAD_THRESHOLDS=%q: %w", v, err)
		}
		o.ThreadThresholds = t
	}
	return o, nil
}

// ParseThreadThresholds reads NCCL_THREAD_THRESHOLDS: six integers
// separated by blanks (Tree LL, LL128, Simple, then Ring LL, LL128,
// Simple). Negative entries keep NCCL's defaults.
func ParseThreadThresholds(s string) ([6]int64, error) {
	var t [6]int64
	f := strings.Fields(s)
	if len(f) != len(t) {
		return t, fmt.Errorf("want 6 integers (Tree LL/LL128/Simple, Ring LL/LL128/Simple), got %d", len(f))
	}
	for i, x := range f {
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return t, fmt.Errorf("entry %d %q is not an integer", i+1, x)
		}
		t[i] = n
	}
	return t, nil
}

// tuneFuncNames are the prefixes NCCL accepts in NCCL_ALGO/NCCL_PROTO
// (ncclFuncStr, first NCCL_NUM_FUNCTIONS entries).
var tuneFuncNames = [nColl]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}

// ParseAlgoList reads NCCL_ALGO into an enable mask per collective and
// algorithm, with NCCL's syntax: entries separated by ';', each an optional
// function prefix ("allreduce:") and a ','-separated list of names, all
// matched case-insensitively. Only the first entry may omit the prefix; it
// then applies to every function. An entry replaces the mask of the
// functions it covers: only the listed names, or with a leading '^' all
// but them. Functions no entry covers keep everything enabled. Unknown
// names or prefixes are errors that list the valid ones. For example
// "ring,tree;allreduce:^ring" enables Ring and Tree everywhere except
// AllReduce, which gets everything but Ring.
func ParseAlgoList(s string) ([model.NumTunedCollectives][model.NumAlgorithms]bool, error) {
	var out [nColl][nAlgo]bool
	names := make([]string, nAlgo)
	for a := range names {
		names[a] = model.Algorithm(a).String()
	}
	list, _, err := tuneParseList(s, names)
	if err != nil {
		return out, err
	}
	for c := range out {
		for a := range out[c] {
			out[c][a] = list[c][a]
		}
	}
	return out, nil
}

// ParseProtoList reads NCCL_PROTO (LL, LL128, Simple) into an enable mask
// per collective and protocol, with ParseAlgoList's syntax. A true LL128
// entry of a function no entry covers still goes through NCCL's LL128
// auto rule in Tune.
func ParseProtoList(s string) ([model.NumTunedCollectives][model.NumProtocols]bool, error) {
	var out [nColl][nProto]bool
	names := make([]string, nProto)
	for p := range names {
		names[p] = model.Protocol(p).String()
	}
	list, _, err := tuneParseList(s, names)
	if err != nil {
		return out, err
	}
	for c := range out {
		for p := range out[c] {
			out[c][p] = list[c][p]
		}
	}
	return out, nil
}

// tuneToken is one token of a strtok split and its offset in the string.
type tuneToken struct {
	s   string
	off int
}

// tuneStrtok splits s at any of delims the way repeated strtok calls do:
// empty tokens are skipped.
func tuneStrtok(s, delims string) []tuneToken {
	var out []tuneToken
	start := -1
	for i := 0; i <= len(s); i++ {
		if i == len(s) || strings.IndexByte(delims, s[i]) >= 0 {
			if start >= 0 {
				out = append(out, tuneToken{s[start:i], start})
				start = -1
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	return out
}

// tuneParseList is NCCL's parseList: "[^]a,b;func:[^]c,d;..." where the
// first entry may omit the function prefix (it then applies to every
// function) and later entries must carry one. Each entry resets the listed
// functions: with '^' everything but the listed names is enabled, without
// it only the listed names. Names and prefixes match case-insensitively
// and exactly; an unknown one is an error that lists the valid names.
// Unset rows keep their default (everything enabled); covered reports the
// functions some entry applied to.
func tuneParseList(s string, elems []string) (list [nColl][]bool, covered [nColl]bool, err error) {
	for c := range list {
		list[c] = make([]bool, len(elems))
		for e := range list[c] {
			list[c][e] = true
		}
	}
	for _, full := range tuneStrtok(s, ";") {
		parts := tuneStrtok(full.s, ":")
		var prefix, elemList string
		hasPrefix := false
		switch {
		case len(parts) >= 2:
			prefix, elemList, hasPrefix = parts[0].s, parts[1].s, true
		case full.off != 0:
			return list, covered, fmt.Errorf("entry %q has no function prefix; every entry except the first needs one (e.g. allreduce:%s)", full.s, full.s)
		case len(parts) == 1:
			elemList = parts[0].s
		default:
			return list, covered, fmt.Errorf("entry %q names nothing", full.s)
		}
		unset, set := false, true
		if strings.HasPrefix(elemList, "^") {
			unset, set = true, false
			elemList = elemList[1:]
		}
		found := false
		for c := range list {
			if hasPrefix && !strings.EqualFold(prefix, tuneFuncNames[c]) {
				continue
			}
			found = true
			covered[c] = true
			for e := range list[c] {
				list[c][e] = unset
			}
			for _, tok := range tuneStrtok(elemList, ",") {
				e := 0
				for e < len(elems) && !strings.EqualFold(tok.s, elems[e]) {
					e++
				}
				if e == len(elems) {
					return list, covered, fmt.Errorf("unknown name %q (valid: %s)", tok.s, strings.Join(elems, ", "))
				}
				list[c][e] = set
			}
		}
		if !found {
			return list, covered, fmt.Errorf("unknown function prefix %q (valid: %s)", prefix, strings.Join(tuneFuncNames[:], ", "))
		}
	}
	return list, covered, nil
}

// Tuning is NCCL's tuning state of a communicator after ncclTopoTuneModel,
// as rank 0 computes it, plus the facts the per-call choice needs.
type Tuning struct {
	NRanks, NNodes int
	// Latency (µs) and Bandwidth (GB/s of algorithm bandwidth) per
	// collective, algorithm and protocol (comm->latencies, bandwidths). A
	// zero bandwidth means the combination is not used; NCCL still fills
	// some latencies of disabled combinations and so does this table.
	Latency, Bandwidth [model.NumTunedCollectives][model.NumAlgorithms][model.NumProtocols]float32
	// MaxThreads is comm->maxThreads (0 where NCCL leaves it unset).
	MaxThreads [model.NumAlgorithms][model.NumProtocols]int
	// ThreadThresholds is comm->threadThresholds: bytes per thread below
	// which the channel and thread counts are reduced (all zero with one
	// rank, where NCCL returns before setting them).
	ThreadThresholds [model.NumAlgorithms][model.NumProtocols]int64
	// AlgoEnabled and ProtoEnabled are the enable masks after NCCL_ALGO,
	// NCCL_PROTO, the disable rules and the LL128 auto rule (ProtoEnabled
	// is per algorithm because the LL128 rule looks at each one's graph).
	AlgoEnabled  [model.NumTunedCollectives][model.NumAlgorithms]bool
	ProtoEnabled [model.NumTunedCollectives][model.NumAlgorithms][model.NumProtocols]bool

	// Facts used by the per-call choice.
	NChannels     int  // comm->nChannels
	NVLSChannels  int  // comm->nvlsChannels
	MinCompCap    int  // smallest sm
	CPUArch       int  // comm->cpuArch (4: mixed)
	CPUVendor     int  // comm->cpuVendor (4: mixed)
	CollNet       bool // CollNet enabled after init
	NVLS          bool // NVLS supported after init
	LocalRanks    int  // ranks on rank 0's node
	MaxLocalRanks int  // most ranks on one node
	CollNetHeads  int  // CollNet Direct heads
	// AlgoEnv and ProtoEnv are the NCCL_ALGO/NCCL_PROTO strings, for error
	// messages when nothing can be chosen.
	AlgoEnv, ProtoEnv string
	// Warnings are the corrections NCCL would log (e.g. an NCCL_NTHREADS
	// value it replaced).
	Warnings []string
}

// tuneGetNthreads is NCCL's getNthreads: an env value > 0 replaces def,
// corrected to max when not a multiple of the warp size and clamped to
// [min, max].
func tuneGetNthreads(name string, env, min, max, def int, warn *[]string) int {
	if env <= 0 {
		return def
	}
	nt, msg := env, ""
	switch {
	case env%tuneWarpSize != 0:
		nt, msg = max, fmt.Sprintf("%s %d is not a multiple of %d: using %d", name, env, tuneWarpSize, max)
	case env > max:
		nt, msg = max, fmt.Sprintf("%s %d is above the maximum %d: using %d", name, env, max, max)
	case env < min:
		nt, msg = min, fmt.Sprintf("%s %d is below the minimum %d: using %d", name, env, min, min)
	}
	if msg != "" && !slices.Contains(*warn, msg) {
		*warn = append(*warn, msg)
	}
	return nt
}

// tuneLog2i is NCCL's log2i: floor(log2(n)) for n > 0, -1 otherwise.
func tuneLog2i(n int64) int {
	if n <= 0 {
		return -1
	}
	l := -1
	for ; n > 0; n >>= 1 {
		l++
	}
	return l
}

// tuneMinD and tuneMaxF are std::min / std::max: (b < a) ? b : a and
// (a < b) ? b : a.
func tuneMinD(a, b float64) float64 {
	if b < a {
		return b
	}
	return a
}

func tuneMinF(a, b float32) float32 {
	if b < a {
		return b
	}
	return a
}

func tuneMaxF(a, b float32) float32 {
	if a < b {
		return b
	}
	return a
}

// tuneCPU returns comm->cpuArch and comm->cpuVendor: each node's first CPU,
// "mixed" (4) where nodes disagree.
func tuneCPU(c *model.Cluster) (arch, vendor int, err error) {
	for i, n := range c.Nodes {
		cpus := n.System.Nodes[model.CPU]
		if len(cpus) == 0 {
			return 0, 0, fmt.Errorf("node %d has no CPU", i)
		}
		a, v := cpus[0].CPU.Arch, cpus[0].CPU.Vendor
		if i == 0 {
			arch, vendor = a, v
			continue
		}
		if a != arch {
			arch = tuneCPUArchMixed
		}
		if v != vendor {
			vendor = tuneCPUVendorMixed
		}
	}
	return arch, vendor, nil
}

// tuneNodeRanks returns the number of ranks on each of NCCL's nodes: from
// the plan's rank layout when it has one, else from the cluster's hosts
// when they are NCCL's nodes, else an even split.
func tuneNodeRanks(p *model.Plan, c *model.Cluster) []int {
	out := make([]int, p.NNodes)
	switch {
	case len(p.Ranks) == p.NRanks && p.NRanks > 0:
		for _, r := range p.Ranks {
			if r.Node >= 0 && r.Node < len(out) {
				out[r.Node]++
			}
		}
	case len(c.Nodes) == p.NNodes:
		for i, n := range c.Nodes {
			out[i] = len(n.Ranks)
		}
	default:
		for i := range out {
			out[i] = p.NRanks / p.NNodes
		}
	}
	return out
}

// tuneCompCaps returns the smallest and largest sm of the ranked GPUs.
func tuneCompCaps(c *model.Cluster) (minCC, maxCC int) {
	for _, n := range c.Nodes {
		for _, r := range n.Ranks {
			g := n.System.GPUByRank(r)
			if g == nil {
				continue
			}
			if minCC == 0 || g.GPU.SM < minCC {
				minCC = g.GPU.SM
			}
			if g.GPU.SM > maxCC {
				maxCC = g.GPU.SM
			}
		}
	}
	return minCC, maxCC
}

// Tune computes NCCL's tuning tables (ncclTopoTuneModel) for plan p of
// cluster c. It reads p's aligned graphs (Graphs, as rank 0 holds them),
// NRanks, NNodes, MaxTreePattern, NChannels, NVLSChannels and
// Min/MaxCompCap (taken from c's GPUs when zero), and from c the CPU of
// every node, rank 0's NVSwitch count and the ranks per node.
func Tune(p *model.Plan, c *model.Cluster, opts TuneOptions) (*Tuning, error) {
	if p == nil || c == nil || len(c.Nodes) == 0 {
		return nil, fmt.Errorf("tune: need a plan and a cluster with nodes")
	}
	var graphs [nAlgo]*model.Graph
	for a := range graphs {
		g := p.Graphs[tuneAlgoGraph[a]]
		if g == nil {
			return nil, fmt.Errorf("tune: plan lacks the aligned %s graph (id %d)", model.Algorithm(a), tuneAlgoGraph[a])
		}
		graphs[a] = g
	}
	if p.NRanks < 1 || p.NNodes < 1 {
		return nil, fmt.Errorf("tune: plan has %d ranks on %d nodes", p.NRanks, p.NNodes)
	}
	protoNames := make([]string, nProto)
	for pi := range protoNames {
		protoNames[pi] = model.Protocol(pi).String()
	}
	protoEnv, protoSet, err := tuneParseList(opts.Proto, protoNames)
	if err != nil {
		return nil, fmt.Errorf("tune: NCCL_PROTO=%q: %w", opts.Proto, err)
	}
	algoEnv, err := ParseAlgoList(opts.Algo)
	if err != nil {
		return nil, fmt.Errorf("tune: NCCL_ALGO=%q: %w", opts.Algo, err)
	}
	cpuArch, cpuVendor, err := tuneCPU(c)
	if err != nil {
		return nil, fmt.Errorf("tune: %w", err)
	}
	minCC, maxCC := p.MinCompCap, p.MaxCompCap
	if minCC == 0 || maxCC == 0 {
		minCC, maxCC = tuneCompCaps(c)
	}

	nRanks, nNodes := p.NRanks, p.NNodes
	t := &Tuning{
		NRanks: nRanks, NNodes: nNodes, NChannels: p.NChannels, NVLSChannels: p.NVLSChannels,
		MinCompCap: minCC, CPUArch: cpuArch, CPUVendor: cpuVendor,
		AlgoEnv: opts.Algo, ProtoEnv: opts.Proto, CollNetHeads: opts.CollNetHeads,
	}
	nodeRanks := tuneNodeRanks(p, c)
	for _, n := range nodeRanks {
		t.MaxLocalRanks = max(t.MaxLocalRanks, n)
	}
	t.LocalRanks = nodeRanks[0]
	// Init drops CollNet without a chain graph or below the node threshold,
	// and NVLS without an NVLS graph.
	t.CollNet = opts.CollNetEnable && graphs[model.AlgoCollNetChain].NChannels() > 0 && nNodes >= opts.CollNetNodeThreshold
	t.NVLS = opts.NVLSSupport && graphs[model.AlgoNVLS].NChannels() > 0
	if !t.NVLS {
		t.NVLSChannels = 0
	}

	// Threads per algorithm and protocol.
	ring := graphs[model.AlgoRing]
	simpleDefault := tuneSimpleMaxNThreads
	if float64(ring.BWIntra*float32(ring.NChannels())) <= model.PCIBW {
		simpleDefault = 256
	}
	w := &t.Warnings
	t.MaxThreads[model.AlgoRing][model.ProtoSimple] = tuneGetNthreads("NCCL_NTHREADS", opts.NThreads, 2*tuneWarpSize, tuneSimpleMaxNThreads, simpleDefault, w)
	t.MaxThreads[model.AlgoTree][model.ProtoSimple] = tuneGetNthreads("NCCL_NTHREADS", opts.NThreads, 2*tuneWarpSize, tuneSimpleMaxNThreads, tuneSimpleMaxNThreads, w)
	for _, a := range []model.Algorithm{model.AlgoCollNetDirect, model.AlgoCollNetChain, model.AlgoNVLS, model.AlgoNVLSTree} {
		t.MaxThreads[a][model.ProtoSimple] = tuneMaxNThreads
	}
	ll := tuneGetNthreads("NCCL_NTHREADS", opts.NThreads, 2*tuneWarpSize, tuneLLMaxNThreads, tuneLLMaxNThreads, w)
	t.MaxThreads[model.AlgoRing][model.ProtoLL], t.MaxThreads[model.AlgoTree][model.ProtoLL] = ll, ll
	ll128 := tuneGetNthreads("NCCL_LL128_NTHREADS", opts.LL128NThreads, tuneLL128MaxNThreads/4, tuneLL128MaxNThreads, tuneLL128MaxNThreads, w)
	t.MaxThreads[model.AlgoRing][model.ProtoLL128], t.MaxThreads[model.AlgoTree][model.ProtoLL128] = ll128, ll128

	if nRanks <= 1 {
		return t, nil
	}

	k := tuneDefaultConstants()
	compCapIndex := tuneVoltaIdx
	switch {
	case minCC >= 100:
		compCapIndex = tuneBlackwellIdx
	case minCC >= 90:
		compCapIndex = tuneHopperIdx
	case minCC >= 80:
		compCapIndex = tuneAmpereIdx
	}
	index2 := 2
	if nNodes <= 2 {
		index2 = nNodes - 1
	}
	index1 := compCapIndex
	if nNodes > 1 {
		index1 = 0
		if cpuVendor == model.CPUVendorAMD || cpuVendor == tuneCPUVendorMixed {
			index1 = 1
		}
	}
	llMaxBw := k.llMaxBws[index1][index2]
	perChMaxTreeBw := k.perChMaxTreeBws[compCapIndex][index2]
	perChMaxRingLL128Bw := k.perChMaxRingLL128Bws[compCapIndex][index2]
	perChMaxTreeLL128Bw := k.perChMaxTreeLL128Bws[compCapIndex][index2]
	perChMaxNVLSTreeBw := k.perChMaxNVLSTreeBws[compCapIndex][index2]
	// POWER: make Tree/Simple over PCI as cheap as Ring/Simple.
	if cpuArch == model.CPUArchPower {
		k.hwLat[tuneHWPCI][model.AlgoTree][model.ProtoSimple] = k.hwLat[tuneHWPCI][model.AlgoRing][model.ProtoSimple]
	}
	ppn := float32(nRanks) / float32(nNodes)
	ppnInt := nRanks / nNodes
	patEnabled := tunePATEnabled(opts, minCC, nNodes, nRanks)

	var intraHw, hw [nAlgo]int
	for a, g := range graphs {
		intraHw[a] = tuneHWPCI
		if g.TypeIntra == model.PathNVL {
			intraHw[a] = tuneHWNVLink
		}
		hw[a] = tuneHWNet
		if nNodes == 1 {
			hw[a] = intraHw[a]
		}
	}

	for coll := 0; coll < nColl; coll++ {
		cl := model.Collective(coll)
		agrs := cl == model.CollAllGather || cl == model.CollReduceScatter
		nsteps := nRanks
		switch {
		case cl == model.CollAllReduce:
			nsteps = 2 * (nRanks - 1)
		case agrs:
			nsteps = nRanks - 1
		}
		for ai := 0; ai < nAlgo; ai++ {
			a := model.Algorithm(ai)
			if (cl == model.CollBroadcast || cl == model.CollReduce) && a != model.AlgoRing {
				continue
			}
			if agrs && a != model.AlgoPAT && a != model.AlgoRing && a != model.AlgoNVLS && a != model.AlgoCollNetDirect {
				continue
			}
			if cl == model.CollAllReduce && a == model.AlgoPAT {
				continue
			}
			g := graphs[a]
			nCh := g.NChannels()
			for pi := 0; pi < nProto; pi++ {
				pr := model.Protocol(pi)
				if (a == model.AlgoNVLS || a == model.AlgoNVLSTree) && pr != model.ProtoSimple {
					continue
				}
				if agrs && a == model.AlgoPAT && (pr != model.ProtoSimple || !patEnabled) {
					continue
				}
				collnet := a == model.AlgoCollNetDirect || a == model.AlgoCollNetChain
				bw := g.BWInter
				if nNodes <= 2 || collnet {
					bw = g.BWIntra
				}
				if a == model.AlgoNVLS || a == model.AlgoNVLSTree {
					if nCh < 2 {
						continue
					}
					intraBw := float32(float32(g.BWIntra*tuneNVLSEfficiency[compCapIndex])*float32(nCh-1)) / float32(nCh)
					if cl == model.CollAllReduce {
						intraBw *= 2
					} else {
						intraBw *= (ppn - 1) / ppn
					}
					mult := float32(1)
					if nNodes <= 2 && a == model.AlgoNVLSTree {
						mult = 2
					}
					interBw := g.BWInter * mult
					capBw := float32(math.MaxFloat32)
					if a == model.AlgoNVLSTree {
						capBw = float32(perChMaxNVLSTreeBw)
					}
					bw = tuneMinF(tuneMinF(intraBw, interBw), capBw)
				}
				busBw := float32(nCh) * bw

				// Model refinements.
				if a == model.AlgoRing && pr == model.ProtoLL {
					busBw = float32(tuneMinD(llMaxBw, float64(busBw)*.5))
				}
				if a == model.AlgoRing && pr == model.ProtoLL128 {
					busBw = float32(tuneMinD(float64(busBw)*0.92, float64(nCh)*perChMaxRingLL128Bw))
				}
				if a == model.AlgoTree && cl == model.CollAllReduce {
					busBw = float32(tuneMinD(float64(busBw)*.92, float64(nCh)*perChMaxTreeBw))
				}
				if a == model.AlgoTree && pr == model.ProtoLL {
					busBw = float32(tuneMinD(float64(busBw)*1.0/3.8, llMaxBw))
				}
				if a == model.AlgoTree && pr == model.ProtoLL128 {
					f := 120.0 / 128.0
					if nNodes == 1 {
						f = 7.0 / 9.0
					}
					busBw = float32(tuneMinD(float64(busBw)*f, float64(nCh)*perChMaxTreeLL128Bw))
				}
				if a == model.AlgoTree && p.MaxTreePattern == model.PatternTree {
					busBw = float32(float64(busBw) * .85)
				}
				if a == model.AlgoPAT {
					busBw = float32(float64(busBw) * .75)
				}
				if collnet && pr != model.ProtoSimple {
					busBw = 0
				}
				if a == model.AlgoCollNetDirect && pr == model.ProtoSimple {
					if agrs {
						busBw = ppn * tuneMinF(g.BWIntra, float32(g.BWInter*0.9))
					} else {
						// GPU/NIC ratio: full speed needs a NIC per GPU.
						factor := float32(float64(ppn) / (1.0 * float64(nCh)))
						factor -= (factor - 1) / 2
						busBw /= factor
						if minCC >= 90 {
							busBw = float32(float64(busBw) * .85)
						}
					}
				}
				// Multi-node AllGather/ReduceScatter over NVLS or CollNet
				// needs the CollNet plugin's collectives and a head per
				// local rank.
				if (a == model.AlgoNVLS || a == model.AlgoCollNetDirect) && pr == model.ProtoSimple && agrs && nNodes > 1 {
					if cl == model.CollAllGather && !opts.CollNetAllGather {
						busBw = 0
					}
					if cl == model.CollReduceScatter && !opts.CollNetReduceScatter {
						busBw = 0
					}
					nHeads := 0
					if t.CollNet {
						nHeads = opts.CollNetHeads
					} else {
						busBw = 0
					}
					if busBw > 0 {
						for _, n := range nodeRanks {
							if n > nHeads {
								busBw = 0
								break
							}
						}
					}
				}

				// Bus bandwidth to algorithm bandwidth.
				if !(a != model.AlgoRing && agrs) {
					ratio := float32(1)
					if a == model.AlgoRing || a == model.AlgoNVLS || a == model.AlgoNVLSTree {
						ratio = float32(float64(ratio) * (1.0 * float64(nRanks) / float64(nsteps)))
					} else {
						ratio = float32(float64(ratio) * .5)
					}
					busBw *= ratio
				}
				t.Bandwidth[coll][a][pr] = busBw

				lat := float32(k.baseLat[a][pr])
				intraLat := float32(k.hwLat[intraHw[a]][a][pr])
				interLat := float32(k.hwLat[tuneHWNet][a][pr])
				if ppn == 1 {
					interLat = float32(k.hwLat[tuneHWNet][model.AlgoTree][pr])
				}
				interLat += g.LatencyInter
				if pr == model.ProtoSimple {
					interLat += g.LatencyInter // flush
				}
				switch a {
				case model.AlgoRing:
					if cl == model.CollReduce || cl == model.CollBroadcast {
						l := float32(k.hwLat[hw[a]][a][pr])
						if g.SameChannels != 0 {
							lat += l
						} else {
							if pr == model.ProtoSimple {
								l = float32(k.hwLat[hw[a]][model.AlgoTree][pr])
							}
							lat += float32(float32(nsteps) * l)
						}
					} else {
						var netOverhead float32
						if nNodes > 1 {
							netOverhead = tuneNetOverhead(opts, cpuArch, cpuVendor)
							if pr == model.ProtoSimple {
								netOverhead *= 3
							}
						}
						intraLat = tuneMaxF(intraLat, netOverhead)
						nInter := 0
						if nNodes > 1 {
							nInter = nNodes - 1
							if cl == model.CollAllReduce {
								nInter = 2 * (nNodes - 1)
							}
						}
						lat += float32(float32(nsteps-nInter)*intraLat) + float32(float32(nInter)*interLat)
					}
				case model.AlgoTree:
					if cl == model.CollAllReduce {
						lat += float32(2 * (float32(float32(ppnInt-1)*intraLat) + float32(float32(tuneLog2i(int64(nNodes)))*interLat)))
					}
				case model.AlgoCollNetDirect:
					arity := float64(float32(min(1, ppnInt-1)) * intraLat)
					lat = float32(float64(lat) + (2*(arity+float64(ppnInt-1)*0.4) + float64(interLat)))
				case model.AlgoCollNetChain:
					lat += float32(float32(2*(ppnInt-1))*intraLat) + interLat
				case model.AlgoNVLS:
					lat = intraLat
					if nNodes > 1 {
						lat += interLat
					}
				case model.AlgoNVLSTree:
					lat += intraLat + float32(float32(2*tuneLog2i(int64(nNodes)))*interLat)
				case model.AlgoPAT:
					if agrs {
						lat = float32(float64(lat) + (float64(tuneLog2i(int64(nNodes)))*(float64(interLat)/3.5) + float64(nRanks)*2.8))
					}
				}
				t.Latency[coll][a][pr] = lat
			}
		}
	}

	// Enable masks: NCCL_PROTO/NCCL_ALGO, then the disable rules.
	nvsCount := len(c.Nodes[0].System.Nodes[model.NVS])
	for f := 0; f < nColl; f++ {
		for a := 0; a < nAlgo; a++ {
			en := algoEnv[f][a]
			alg := model.Algorithm(a)
			if nNodes == 1 && alg == model.AlgoNVLSTree {
				en = false
			}
			if !t.CollNet && (alg == model.AlgoCollNetDirect || alg == model.AlgoCollNetChain || (alg == model.AlgoNVLS && nNodes > 1)) {
				en = false
			}
			if t.CollNet && alg == model.AlgoCollNetChain && !opts.CollNetChainSupport {
				en = false
			}
			if nvsCount == 0 && alg == model.AlgoCollNetDirect {
				en = false
			}
			t.AlgoEnabled[f][a] = en
		}
	}
	for f := 0; f < nColl; f++ {
		for a := 0; a < nAlgo; a++ {
			for pi := 0; pi < nProto; pi++ {
				en := protoEnv[f][pi]
				// LL128 stays "auto" unless an NCCL_PROTO entry covered f.
				if pi == int(model.ProtoLL128) && !protoSet[f] {
					en = tuneLL128Auto(opts, graphs[a], minCC, maxCC, model.Collective(f), model.Algorithm(a), nRanks)
				}
				t.ProtoEnabled[f][a][pi] = en
				if !en || !t.AlgoEnabled[f][a] {
					t.Bandwidth[f][a][pi] = 0
				}
			}
		}
	}

	// Per-thread work before more threads and channels are used.
	for a := 0; a < nAlgo; a++ {
		t.ThreadThresholds[a] = [nProto]int64{tuneLLThreadThreshold, tuneLL128ThreadThreshold, tuneSimpleThreadThreshold}
	}
	t.ThreadThresholds[model.AlgoRing][model.ProtoLL] *= int64(nRanks)
	t.ThreadThresholds[model.AlgoCollNetDirect][model.ProtoSimple] = tuneCollNetThreadThresh
	t.ThreadThresholds[model.AlgoCollNetChain][model.ProtoSimple] = tuneCollNetThreadThresh
	for i, v := range opts.ThreadThresholds {
		if v >= 0 {
			t.ThreadThresholds[i/nProto][i%nProto] = v // rows 0 and 1: Tree, Ring
		}
	}
	return t, nil
}

// tunePATEnabled is ncclPatEnable: sm60+, then NCCL_PAT_ENABLE, whose auto
// mode needs one GPU per node and a host network plugin.
func tunePATEnabled(o TuneOptions, minCC, nNodes, nRanks int) bool {
	if minCC < 60 {
		return false
	}
	if o.PATEnable != 2 {
		return o.PATEnable != 0
	}
	return nNodes == nRanks && !o.NetDeviceOffload
}

// tuneNetOverhead is getNetOverhead in µs: NCCL_NET_OVERHEAD (ns) when
// set, else 2 on AMD x86 and 1 elsewhere.
func tuneNetOverhead(o TuneOptions, arch, vendor int) float32 {
	if o.NetOverheadNs != -2 {
		return float32(float64(o.NetOverheadNs) * .001)
	}
	if arch == model.CPUArchX86 && vendor == model.CPUVendorAMD {
		return 2.0
	}
	return 1.0
}

// tuneLL128Auto is NCCL's default LL128 rule for one algorithm's graph.
func tuneLL128Auto(o TuneOptions, g *model.Graph, minCC, maxCC int, f model.Collective, a model.Algorithm, nRanks int) bool {
	en := true
	if o.LL128C2C && minCC >= 90 {
		en = en && g.TypeInter <= model.PathPXN
	} else {
		en = en && g.TypeInter <= model.PathPXB
	}
	en = en && g.TypeIntra <= model.PathNVB
	en = en && (minCC == maxCC || minCC >= 90)
	en = en && !(minCC < 70 || (minCC == 90 && o.CUDARuntimeVersion == 11080 && f == model.CollAllReduce && a == model.AlgoRing && nRanks == 2))
	return en
}

// ThreadThresholdsString formats the thresholds as NCCL logs them:
// "Tree LL/LL128/Simple | Ring LL/LL128/Simple | CollNetDirect Simple |
// CollNetChain Simple", e.g. "8/8/64 | 16/8/64 | 512 | 512".
func (t *Tuning) ThreadThresholdsString() string {
	th := t.ThreadThresholds
	return fmt.Sprintf("%d/%d/%d | %d/%d/%d | %d | %d",
		th[model.AlgoTree][0], th[model.AlgoTree][1], th[model.AlgoTree][2],
		th[model.AlgoRing][0], th[model.AlgoRing][1], th[model.AlgoRing][2],
		th[model.AlgoCollNetDirect][model.ProtoSimple], th[model.AlgoCollNetChain][model.ProtoSimple])
}

// Doc returns the JSON form of the tables: every (collective, algorithm,
// protocol) in NCCL's order and the thread counts per algorithm.
func (t *Tuning) Doc() TuningDoc {
	d := TuningDoc{Table: make([]TuneEntryDoc, 0, nColl*nAlgo*nProto), MaxThreads: make([]MaxThreadsDoc, 0, nAlgo)}
	for c := 0; c < nColl; c++ {
		for a := 0; a < nAlgo; a++ {
			for p := 0; p < nProto; p++ {
				d.Table = append(d.Table, TuneEntryDoc{
					Coll: model.Collective(c).String(), Algo: model.Algorithm(a).String(), Proto: model.Protocol(p).String(),
					Latency: model.F32(t.Latency[c][a][p]), Bandwidth: model.F32(t.Bandwidth[c][a][p]),
				})
			}
		}
	}
	for a := 0; a < nAlgo; a++ {
		m := t.MaxThreads[a]
		d.MaxThreads = append(d.MaxThreads, MaxThreadsDoc{Algo: model.Algorithm(a).String(),
			LL: m[model.ProtoLL], LL128: m[model.ProtoLL128], Simple: m[model.ProtoSimple]})
	}
	return d
}
