package sim

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twinccl/twinccl/internal/stats"
	"github.com/twinccl/twinccl/model"
)

// Measurement is one row of a measured timing table: an nccl-tests-style
// buffer size of a collective and its time.
type Measurement struct {
	Coll   model.Collective
	Bytes  int64   // nccl-tests size: AllGather output, ReduceScatter input, else the buffer
	MeanUs float64 // mean time per call
	BestUs float64 // best repetition (0 when the table has none)
	// EagerUs is the time per call of the same loop issued eagerly, not
	// captured in a CUDA graph (the fifth column of the tables recorded
	// like shared/baselines; 0 when the table has none)
	EagerUs float64
	Line    int
	// Recorded, when set, forces the decisions the row was measured with
	// (a row of our executor's "run gpu --json" or call trace): the
	// algorithm and protocol (negative: the tuner's) and the channels (0:
	// the tuner's, capped at the plan's), the root and the datatype
	// (hardware rows; nil: the tuner's choice, float32, root 0, as
	// nccl-tests).
	Recorded *Recorded
}

// Recorded are the decisions and the timing kind of a hardware row.
type Recorded struct {
	Algo      model.Algorithm
	Proto     model.Protocol
	NChannels int
	Root      int
	Dtype     model.Dtype
	// Count is NCCL's count argument (0: from the bytes and Dtype).
	Count int64
	// Kernel says the time is a traced kernel time (no launch cost, no
	// harness): it is compared with the simulated kernel time.
	Kernel bool
}

// ReadMeasurements reads a whitespace-separated timing table: lines
// "coll bytes mean_us [best_us ...]", '#' comments, coll as nccl-tests
// names it (all_reduce, all_gather, reduce_scatter, broadcast, reduce,
// alltoall, sendrecv) or as model.ParseCollective reads it.
func ReadMeasurements(r io.Reader, name string) ([]Measurement, error) {
	var out []Measurement
	sc := bufio.NewScanner(r)
	ln := 0
	for sc.Scan() {
		ln++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		f := strings.Fields(t)
		if len(f) < 3 {
			return nil, fmt.Errorf("%s:%d: want \"coll bytes mean_us [best_us]\", got %d field(s)", name, ln, len(f))
		}
		c, err := model.ParseCollective(f[0])
		if err != nil || int(c) >= model.NumTunedCollectives && !c.IsP2P() {
			return nil, fmt.Errorf("%s:%d: unknown collective %q", name, ln, f[0])
		}
		b, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil || b < 0 {
			return nil, fmt.Errorf("%s:%d: bad byte count %q", name, ln, f[1])
		}
		mean, err := strconv.ParseFloat(f[2], 64)
		if err != nil || !(mean > 0) || math.IsInf(mean, 0) {
			return nil, fmt.Errorf("%s:%d: bad time %q", name, ln, f[2])
		}
		m := Measurement{Coll: c, Bytes: b, MeanUs: mean, Line: ln}
		if len(f) > 3 {
			if v, err := strconv.ParseFloat(f[3], 64); err == nil && v > 0 {
				m.BestUs = v
			}
		}
		if len(f) > 4 {
			if v, err := strconv.ParseFloat(f[4], 64); err == nil && v > 0 && !math.IsInf(v, 0) {
				m.EagerUs = v
			}
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no measurements", name)
	}
	return out, nil
}

// ReadMeasurementsFile reads a timing table from disk.
func ReadMeasurementsFile(path string) ([]Measurement, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadMeasurements(f, path)
}

// CountOf turns an nccl-tests byte size into NCCL's count argument
// (AlltoAll: elements per peer; SendRecv: elements sent).
func CountOf(c model.Collective, bytes int64, d model.Dtype, nRanks int) (int64, error) {
	es := int64(d.Size())
	if es == 0 {
		return 0, fmt.Errorf("unknown datatype %d", int(d))
	}
	if bytes%es != 0 {
		return 0, fmt.Errorf("%d bytes is not a whole number of %d-byte %s elements", bytes, es, d)
	}
	n := bytes / es
	if c == model.CollAllGather || c == model.CollReduceScatter || c == model.CollAlltoAll {
		if n%int64(nRanks) != 0 {
			return 0, fmt.Errorf("%s: %d elements do not split evenly over %d ranks", c, n, nRanks)
		}
		n /= int64(nRanks)
	}
	return n, nil
}

// BusFactor is nccl-tests' bus bandwidth factor.
func BusFactor(c model.Collective, n int) float64 {
	switch c {
	case model.CollAllReduce:
		return 2 * float64(n-1) / float64(n)
	case model.CollAllGather, model.CollReduceScatter, model.CollAlltoAll:
		return float64(n-1) / float64(n)
	}
	return 1
}

// Comparison is a simulated row next to its measurement.
type Comparison struct {
	Measurement
	// Table names the table of the row (fits over several tables).
	Table     string
	Algo      model.Algorithm
	Proto     model.Protocol
	NChannels int
	SimUs     float64
	Err       float64 // (sim - measured) / measured
}

// Compare simulates every measurement (float32, sum, root 0, the tuner's
// choices) as its timing loop ran it (RunTimed; traced kernel rows as one
// call) and returns the rows with their relative errors, in the order of
// ms. The rows are independent calls: up to GOMAXPROCS of them run at
// once, each worker on a Machine of its own, so the result is the same
// whatever the number of workers.
func (s *Simulator) Compare(ms []Measurement) ([]Comparison, error) {
	out := make([]Comparison, len(ms))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(ms)))
	sims := make([]*Simulator, workers)
	sims[0] = s
	for w := 1; w < workers; w++ {
		c, err := s.clone()
		if err != nil {
			return nil, err
		}
		sims[w] = c
	}
	// Largest rows first, so that no long row starts last.
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return ms[order[a]].Bytes > ms[order[b]].Bytes })
	// Every row runs, so that the error returned is the first row's in
	// the table's order, whatever the workers met first.
	errs := make([]error, len(ms))
	var next atomic.Int64
	var wg sync.WaitGroup
	for _, sim := range sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= len(order) {
					return
				}
				i := order[k]
				out[i], errs[i] = sim.compareRow(&ms[i])
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// compareRow simulates one measurement as Compare does.
func (s *Simulator) compareRow(m *Measurement) (Comparison, error) {
	n := s.Machine.Cluster.NRanks
	call, err := m.call(n, s.Search.Plan.NChannels)
	if err != nil {
		return Comparison{}, fmt.Errorf("line %d: %w", m.Line, err)
	}
	if m.Recorded == nil {
		call.InPlace = harnessInPlace(s.Harness, m.Coll)
	}
	kernel := m.Recorded != nil && m.Recorded.Kernel
	cr, err := s.RunTimed(call, kernel)
	if err != nil {
		return Comparison{}, fmt.Errorf("line %d: %w", m.Line, err)
	}
	t := cr.TimeUs + s.Machine.calib.HarnessCostUs(s.Harness)
	if kernel {
		t = cr.KernelUs
	}
	return Comparison{Measurement: *m, Algo: cr.Algo, Proto: cr.Proto, NChannels: cr.NChannels,
		SimUs: t, Err: (t - m.MeanUs) / m.MeanUs}, nil
}

// harnessInPlace reports whether a timing harness calls collective c in
// place: PyTorch's broadcast, all_reduce and reduce take one tensor;
// nccl-tests' tables (their out-of-place column) and run gpu use two
// buffers.
func harnessInPlace(harness string, c model.Collective) bool {
	if HarnessBase(harness) != HarnessPyTorch {
		return false
	}
	switch c {
	case model.CollBroadcast, model.CollAllReduce, model.CollReduce:
		return true
	}
	return false
}

// call is the simulator's call for a row on n ranks with a plan of
// planCh channels: the tuner's decisions, float32, sum and root 0, or the
// recorded ones.
func (m *Measurement) call(n, planCh int) (Call, error) {
	d := model.DtypeFP32
	if m.Recorded != nil && m.Recorded.Dtype.Size() > 0 {
		d = m.Recorded.Dtype
	}
	c := Call{Coll: m.Coll, Dtype: d, Op: model.RedSum, Algo: -1, Proto: -1}
	if r := m.Recorded; r != nil {
		c.Algo, c.Proto, c.Root, c.Count = r.Algo, r.Proto, r.Root, r.Count
		c.NChannels = min(max(r.NChannels, 0), planCh)
	}
	if c.Count == 0 {
		cnt, err := CountOf(m.Coll, m.Bytes, d, n)
		if err != nil {
			return c, err
		}
		c.Count = cnt
	}
	return c, nil
}

// NoisyRatio is how far above the best repetition a row's mean may be
// before the fit treats the mean as disturbed (other work on the machine,
// clock changes) and aims at NoisyRatio times the best instead.
const NoisyRatio = 1.1

// target is the time the fit aims at: the mean, or NoisyRatio times the
// best repetition where the mean is further above it.
func (m *Measurement) target() float64 {
	if m.BestUs > 0 && m.MeanUs > NoisyRatio*m.BestUs {
		return NoisyRatio * m.BestUs
	}
	return m.MeanUs
}

// DisturbedRatio is stats.DisturbedRatio: one rule for a disturbed
// measurement everywhere.
const DisturbedRatio = stats.DisturbedRatio

// Disturbed is stats.Disturbed.
func Disturbed(us, best float64) bool { return stats.Disturbed(us, best) }

// DisturbedReps is stats.DisturbedReps.
func DisturbedReps(reps []float64) bool { return stats.DisturbedReps(reps) }

// Median is the median of v (the mean of the middle two for an even
// count; 0 for none), v left as it is: stats.Median.
func Median(v []float64) float64 { return stats.Median(v) }

// Noisy reports whether the row's mean is more than 25% above its best
// repetition: a disturbed measurement (Disturbed).
func (m *Measurement) Noisy() bool { return Disturbed(m.MeanUs, m.BestUs) }

// ErrorStats returns the median and the maximum absolute relative error.
func ErrorStats(cs []Comparison) (median, maxAbs float64) {
	if len(cs) == 0 {
		return 0, 0
	}
	a := make([]float64, len(cs))
	for i, c := range cs {
		a[i] = math.Abs(c.Err)
	}
	return stats.Median(a), slices.Max(a)
}
