package hwcmp

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/internal/stats"
	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/search"
)

// SmallBytes is the boundary of the size buckets: calls below it are
// latency-bound ("small"), the others bandwidth-bound ("large").
const SmallBytes = 1 << 20

// Comparer replays measured calls in the simulator.
type Comparer struct {
	Sim *sim.Simulator
	// Topology names the topology file, Settings the NCCL_* settings the
	// search ran under ("K=V ..."), CalibName the calibration.
	Topology, Settings, CalibName string
	calib                         *sim.Calib
	// ours, when set, simulates our executor's column with a calibration
	// of its own (WithOursCalib); nil: Sim's.
	ours *Comparer
}

// WithOursCalib returns a copy of cp that simulates our executor's
// column (the recorded decisions) with calibration c, named name, and
// NCCL's column (the tuner's decisions) with cp's: one comparison then
// holds each column against the constants fitted to it (NCCL's kernels
// and our executor's differ).
func (cp *Comparer) WithOursCalib(c *sim.Calib, name string) (*Comparer, error) {
	if c == nil {
		return nil, fmt.Errorf("hwcmp: no calibration for our executor's column")
	}
	s, err := cp.Sim.WithCalib(c)
	if err != nil {
		return nil, err
	}
	out := *cp
	out.ours = &Comparer{Sim: s, Topology: cp.Topology, Settings: cp.Settings, CalibName: name, calib: c}
	return &out, nil
}

// oursComparer is the comparer of our executor's column.
func (cp *Comparer) oursComparer() *Comparer {
	if cp.ours != nil {
		return cp.ours
	}
	return cp
}

// calibNames names the calibration of each column.
func (cp *Comparer) calibNames() string {
	if cp.ours == nil {
		return cp.CalibName
	}
	return cp.CalibName + " (NCCL's column), " + cp.ours.CalibName + " (ours)"
}

// NewComparer searches the topology root (read from file) under the
// NCCL_* settings env, as the measured run did, and builds its simulator
// with calibration c.
func NewComparer(root *model.Element, file string, env map[string]string, c *sim.Calib, calibName string) (*Comparer, error) {
	return NewComparerNodes(root, file, 1, env, c, calibName)
}

// NewComparerNodes is NewComparer for a job over nodes identical hosts,
// each described by root (e.g. one rank per host, over the net
// transport).
func NewComparerNodes(root *model.Element, file string, nodes int, env map[string]string, c *sim.Calib, calibName string) (*Comparer, error) {
	if c == nil {
		return nil, fmt.Errorf("hwcmp: no calibration")
	}
	if nodes < 1 {
		return nil, fmt.Errorf("hwcmp: %d nodes", nodes)
	}
	t := &sim.Table{Name: "compare", Env: env, Harness: sim.HarnessNCCLTests}
	res, err := sim.SearchTable(root, file, nodes, t)
	if err != nil {
		return nil, err
	}
	return NewComparerFor(res, t, c, calibName)
}

// NewComparerFor builds a Comparer on a search result res that ran under
// t's settings.
func NewComparerFor(res *search.Result, t *sim.Table, c *sim.Calib, calibName string) (*Comparer, error) {
	s, err := sim.NewSimulator(res, c)
	if err != nil {
		return nil, err
	}
	st, err := sim.SettingsFromEnv(t.Lookup)
	if err != nil {
		return nil, err
	}
	s.Machine.SetSettings(st)
	s.Harness = t.Harness
	return &Comparer{Sim: s, Topology: res.Cluster.File, Settings: t.Settings(), CalibName: calibName, calib: c}, nil
}

// Row is a measured call next to its simulation.
type Row struct {
	Call
	// SimAlgo, SimProto and SimChannels are what the simulation ran (the
	// recorded decisions, forced); Tuner* the tuner's own choice.
	SimAlgo, SimProto string
	SimChannels       int
	TunerAlgo         string
	TunerProto        string
	TunerChannels     int
	// SimUs is the predicted time at the recorded decisions: as graph
	// timing measures it for JSON rows (launch included), the kernel time
	// for traced calls. SimNCCLUs is the predicted time at the tuner's
	// decisions (NCCL's), which NCCL's column is compared with, plus for
	// JSON rows the calibration's cost of the run gpu harness
	// (sim.HarnessRunGPU).
	SimUs, SimNCCLUs float64
	// Notes say where the simulation could not follow the recording.
	Notes []string
	// NotAsRecorded says why the simulation did not run the call as it
	// was recorded ("" when it did): it was recorded on more channels
	// than the simulated plan has (e.g. a one-host recording of 24
	// channels simulated across hosts). The simulated machine is then
	// not the recorded one, for NCCL's column too: Pool leaves both
	// columns of such a row out (Row.Invalid).
	NotAsRecorded string
	// SimRankKernelUs is, per rank, the simulated kernel time.
	SimRankKernelUs []float64
	// Err is (SimUs - HwUs) / HwUs; NCCLErr (SimUs - NCCLUs) / NCCLUs,
	// NaN without an NCCL time.
	Err, NCCLErr float64
}

// Report is the comparison of one input.
type Report struct {
	Input    *Input
	Topology string
	Settings string
	Calib    string
	// KernelNote says that our executor's rows were recorded with a
	// kernel other than those the calibration's last fit used ("" when
	// they match or either side does not say).
	KernelNote string
	// Transport is how the recording's ranks reach each other in the
	// simulation ("P2P", "SHM", "NET/Socket", "NET/IB"; see
	// Comparer.transport): the transport of Pool's statistics.
	Transport string
	Rows      []Row
	Groups    []Group
	Stats     []Stat
}

// kernelNote compares the kernel in was recorded with to those of the
// recordings the calibration's last fit used (FitReport.Tables).
func (cp *Comparer) kernelNote(in *Input) string {
	if in.Kernel == "" || cp.calib == nil || cp.calib.Fit == nil {
		return ""
	}
	var fitted []string
	for _, tf := range cp.calib.Fit.Tables {
		if !tf.Fitted || tf.Kernel == "" || slices.Contains(fitted, tf.Kernel) {
			continue
		}
		if tf.Kernel == in.Kernel {
			return ""
		}
		fitted = append(fitted, tf.Kernel)
	}
	if len(fitted) == 0 {
		return ""
	}
	return fmt.Sprintf("our executor's rows were recorded with kernel %s; %s was fitted on %s", in.Kernel, cp.CalibName, strings.Join(fitted, " and "))
}

// Timing describes what the measured times of a report are.
func (r *Report) Timing() string {
	if r.Input.Kind == KindJSON && r.Input.Eager {
		return "mean per call of eager loops, the host issuing every launch (run gpu -G 0: time_us, nccl_time_us) vs simulated eager loop (a call issued every host_call_us)"
	}
	if r.Input.Kind == KindJSON && r.Input.Medians {
		return "CUDA-graph-timed median repetition per call (reps_us, nccl_reps_us; a row without them: its mean time_us) vs simulated call time (launch included)"
	}
	if r.Input.Kind == KindJSON {
		return "CUDA-graph-timed mean per call (time_us, nccl_time_us) vs simulated call time (launch included)"
	}
	return "one traced run per call: kernel time of the rank that started last (%globaltimer) vs simulated kernel time"
}

// Compare simulates every call of in as it was timed (an eager loop for
// Input.Eager), with the calibration's socket costs scaled to in's host
// where in carries loopback probes (Input.Host, sim.Calib.ForHost).
func (cp *Comparer) Compare(in *Input) (*Report, error) {
	if n := cp.Sim.Machine.Cluster.NRanks; n != in.NRanks {
		return nil, fmt.Errorf("%s: %d rank(s), the topology %s has %d", in.Path, in.NRanks, cp.Topology, n)
	}
	cp, err := cp.forInput(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", in.Path, err)
	}
	rep := &Report{Input: in, Topology: cp.Topology, Settings: cp.Settings, Calib: cp.calibNames(), KernelNote: cp.oursComparer().kernelNote(in)}
	if rep.Transport, err = cp.transport(); err != nil {
		return nil, fmt.Errorf("%s: %w", in.Path, err)
	}
	for _, c := range in.Calls {
		row, err := cp.compareCall(c, in.Kind)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", in.Path, c.label(), err)
		}
		rep.Rows = append(rep.Rows, row)
	}
	rep.Groups = groupRows(rep.Rows)
	rep.Stats = statsOf(rep.Rows)
	rep.SetBusBW()
	return rep, nil
}

// transport names how the recording's ranks reach each other
// (sim.Machine.TransportName): rank 0 and the first rank of the next
// host where the run spanned several, else ranks 0 and 1 ("self" for a
// single rank).
func (cp *Comparer) transport() (string, error) {
	cl := cp.Sim.Machine.Cluster
	if cl.NRanks < 2 {
		return "self", nil
	}
	peer := 1
	if nodes := len(cl.Nodes); nodes > 1 {
		peer = cl.NRanks / nodes
	}
	return cp.Sim.Machine.TransportName(0, peer)
}

// forInput is cp as in was timed, and so is the comparer of our column:
// its calibration scaled to in's host (sim.Calib.ForHost on
// Input.Host), and simulating eager loops for an eager recording
// (Input.Eager). cp itself stays as it is for the next input.
func (cp *Comparer) forInput(in *Input) (*Comparer, error) {
	out := *cp
	if hc := cp.calib.ForHost(in.Host); hc != cp.calib {
		s, err := cp.Sim.WithCalib(hc)
		if err != nil {
			return nil, err
		}
		out.Sim, out.calib = s, hc
	}
	if in.Eager && !out.Sim.Eager {
		s := *out.Sim
		s.Eager = true
		out.Sim = &s
	}
	if cp.ours != nil {
		ours, err := cp.ours.forInput(in)
		if err != nil {
			return nil, err
		}
		out.ours = ours
	}
	return &out, nil
}

// compareCall simulates one call twice where the recorded decisions
// differ from the tuner's: at the recorded algorithm, protocol and
// channels (our executor's run), and at the tuner's (NCCL's run: the
// tuner follows NCCL's rules under the same settings).
//
// A traced call whose ranks' kernels differ by more than skewedKernels
// says so: the rank that started last (the trace's time: the GPUs'
// clocks are not aligned) may find its peers' data already sent, over
// sockets, where a hop costs tens of microseconds, most of the call.
func (cp *Comparer) compareCall(c Call, kind string) (Row, error) {
	row := Row{Call: c, NCCLErr: math.NaN()}
	if err := c.notProgram(); err != nil {
		return row, fmt.Errorf("%w: %v", errNoSim, err)
	}
	sc := c.simCall()
	tuned := sim.Call{Coll: c.Coll, Count: c.Count, Dtype: c.Dtype, Op: c.RedOp, Root: c.Root, Algo: -1, Proto: -1}
	if _, tc, err := cp.Sim.Generator(tuned); err == nil {
		row.TunerAlgo, row.TunerProto, row.TunerChannels = tc.Algo.String(), tc.Proto.String(), tc.NChannels
	}
	if plan := cp.Sim.Search.Plan.NChannels; sc.NChannels > plan {
		row.NotAsRecorded = fmt.Sprintf("recorded %d channels, the plan has %d: simulated on %d", sc.NChannels, plan, plan)
		row.Notes = append(row.Notes, row.NotAsRecorded)
		sc.NChannels = plan
	}
	oc := cp.oursComparer()
	cr, err := oc.Sim.RunTimed(sc, kind == KindTrace)
	if err != nil {
		return row, fmt.Errorf("%w: %v", errNoSim, err)
	}
	row.SimAlgo, row.SimProto, row.SimChannels = cr.Algo.String(), cr.Proto.String(), cr.NChannels
	if c.NChannels > 0 && cr.NChannels != c.NChannels && len(row.Notes) == 0 {
		row.Notes = append(row.Notes, fmt.Sprintf("recorded %d channels, %d with data", c.NChannels, cr.NChannels))
	}
	if k := c.RankKernelUs; len(k) > 1 && slices.Min(k) < skewedKernels*slices.Max(k) {
		row.Notes = append(row.Notes, fmt.Sprintf("ranks' kernels %.1f-%.1f us: started apart, the last found its data sent", slices.Min(k), slices.Max(k)))
	}
	row.SimRankKernelUs = cr.RankKernelUs
	row.SimUs = oc.timeOf(cr, kind)
	row.Err = (row.SimUs - c.HwUs) / c.HwUs
	// NCCL's column: at the tuner's decisions where they differ from the
	// recorded ones, with NCCL's constants where our column has its own.
	row.SimNCCLUs = row.SimUs
	nccl, again := sc, cp.ours != nil
	if row.TunerAlgo != "" && (row.TunerAlgo != row.SimAlgo || row.TunerProto != row.SimProto || row.TunerChannels != row.SimChannels) {
		nccl, again = tuned, true
	}
	if again {
		tr, err := cp.Sim.RunTimed(nccl, kind == KindTrace)
		if err != nil {
			return row, fmt.Errorf("%w: %v", errNoSim, err)
		}
		row.SimNCCLUs = cp.timeOf(tr, kind)
	}
	if kind != KindTrace {
		// NCCL's column ran on the device's libnccl in run gpu's loop.
		row.SimNCCLUs += cp.calib.HarnessUs[sim.HarnessRunGPU]
	}
	if c.NCCLUs > 0 {
		row.NCCLErr = (row.SimNCCLUs - c.NCCLUs) / c.NCCLUs
	}
	for _, col := range []string{ColOurs, ColNCCL} {
		if row.Disturbed(col) {
			us, best := row.measured(col)
			row.Notes = append(row.Notes, fmt.Sprintf("%s disturbed: median repetition %.2fx the best", col, us/best))
		}
		if n := row.wrong(col); n > 0 {
			row.Notes = append(row.Notes, fmt.Sprintf("%s wrong: %d wrong elements in its result", col, n))
		}
	}
	return row, nil
}

// wrong is the count of wrong elements in column col's result.
func (r *Row) wrong(col string) int64 {
	if col == ColNCCL {
		return r.NCCLWrong
	}
	return r.Wrong
}

// Why Row.Invalid leaves a row's column out of Pool's statistics.
const (
	// InvalidWrong: the column's result had wrong elements (run gpu's
	// #wrong: wrong, nccl_wrong).
	InvalidWrong = "wrong"
	// InvalidNotAsRecorded: the simulation could not run the call as
	// recorded (Row.NotAsRecorded).
	InvalidNotAsRecorded = "not as recorded"
	// InvalidDisturbed: the column's median repetition is more than
	// sim.DisturbedRatio times its best (Row.Disturbed).
	InvalidDisturbed = "disturbed"
)

// ValidRule states which rows' columns Pool keeps, for help texts and
// output headers.
var ValidRule = fmt.Sprintf("a row's column is left out where its result had wrong elements (#wrong > 0), "+
	"where the simulation could not run the call as recorded (more channels than the plan has), "+
	"or where it was disturbed (its median repetition over %gx its best)", sim.DisturbedRatio)

// Invalid says why column col of the row is left out of pooled
// statistics (ValidRule): InvalidWrong, InvalidNotAsRecorded or
// InvalidDisturbed, the first that applies; "" for a valid one.
func (r *Row) Invalid(col string) string {
	switch {
	case r.wrong(col) > 0:
		return InvalidWrong
	case r.NotAsRecorded != "":
		return InvalidNotAsRecorded
	case r.Disturbed(col):
		return InvalidDisturbed
	}
	return ""
}

// measured is the measured time of column col and its best repetition
// (0 when unknown).
func (r *Row) measured(col string) (us, best float64) {
	if col == ColNCCL {
		return r.NCCLUs, r.NCCLBestUs
	}
	return r.HwUs, r.HwBestUs
}

// Disturbed reports whether column col's measured time is more than
// sim.DisturbedRatio above its best repetition: the host slowed most of
// the row's repetitions, and its error says more about the host than
// about the simulation. The "steady" statistics leave such rows out.
func (r *Row) Disturbed(col string) bool {
	us, best := r.measured(col)
	return sim.Disturbed(us, best)
}

// timeOf is the simulated time comparable to a measurement of kind.
func (cp *Comparer) timeOf(cr sim.CallResult, kind string) float64 {
	if kind == KindTrace {
		return cr.KernelUs
	}
	return cr.TimeUs + cp.calib.HarnessCostUs(cp.Sim.Harness)
}

// Group is the calls of one (op, size, protocol).
type Group struct {
	Op    string
	Bytes int64
	Proto string
	Calls int
	// HwUs, NCCLUs and SimUs are means over the calls (NCCLUs 0 when
	// absent); Err and NCCLErr the errors of the means.
	HwUs, NCCLUs, SimUs, SimNCCLUs float64
	Err, NCCLErr                   float64
	// BusBW and NCCLBusBW are the measured busbw (GB/s), SimBusBW and
	// SimNCCLBusBW the simulated ones (SetBusBW).
	BusBW, NCCLBusBW, SimBusBW, SimNCCLBusBW float64
	// Disturbed and NCCLDisturbed say that a call of the group was
	// disturbed in our executor's or NCCL's column (Row.Disturbed).
	Disturbed, NCCLDisturbed bool
}

// groupRows groups rows by (op, bytes, protocol), in op then size order.
func groupRows(rows []Row) []Group {
	type key struct {
		op    model.Collective
		bytes int64
		proto string
	}
	idx := map[key]int{}
	var gs []Group
	var keys []key
	var n []int
	for _, r := range rows {
		k := key{r.Coll, r.Bytes, r.SimProto}
		i, ok := idx[k]
		if !ok {
			i = len(gs)
			idx[k] = i
			gs = append(gs, Group{Op: r.Coll.String(), Bytes: r.Bytes, Proto: r.SimProto})
			keys = append(keys, k)
			n = append(n, 0)
		}
		g := &gs[i]
		g.Calls++
		g.Disturbed = g.Disturbed || r.Disturbed(ColOurs)
		g.NCCLDisturbed = g.NCCLDisturbed || r.Disturbed(ColNCCL)
		g.HwUs += r.HwUs
		g.SimUs += r.SimUs
		if r.NCCLUs > 0 {
			g.NCCLUs += r.NCCLUs
			g.SimNCCLUs += r.SimNCCLUs
			n[i]++
		}
	}
	for i := range gs {
		g := &gs[i]
		g.HwUs /= float64(g.Calls)
		g.SimUs /= float64(g.Calls)
		g.Err = (g.SimUs - g.HwUs) / g.HwUs
		g.NCCLErr = math.NaN()
		if n[i] > 0 {
			g.NCCLUs /= float64(n[i])
			g.SimNCCLUs /= float64(n[i])
			g.NCCLErr = (g.SimNCCLUs - g.NCCLUs) / g.NCCLUs
		}
	}
	order := make([]int, len(gs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		ka, kb := keys[order[a]], keys[order[b]]
		if ka.op != kb.op {
			return ka.op < kb.op
		}
		if ka.bytes != kb.bytes {
			return ka.bytes < kb.bytes
		}
		return ka.proto < kb.proto
	})
	out := make([]Group, len(gs))
	for i, j := range order {
		out[i] = gs[j]
	}
	return out
}

// SetBusBW fills the groups' busbw columns for n ranks.
func (r *Report) SetBusBW() {
	for i := range r.Groups {
		g := &r.Groups[i]
		c, err := model.ParseCollective(g.Op)
		if err != nil {
			continue
		}
		f := sim.BusFactor(c, r.Input.NRanks)
		bw := func(us float64) float64 {
			if !(us > 0) {
				return 0
			}
			return float64(g.Bytes) / (us * 1e3) * f
		}
		g.BusBW, g.NCCLBusBW, g.SimBusBW, g.SimNCCLBusBW = bw(g.HwUs), bw(g.NCCLUs), bw(g.SimUs), bw(g.SimNCCLUs)
	}
}

// Columns of the statistics.
const (
	ColOurs = "ours" // our executor (time_us, or the traced kernel)
	ColNCCL = "nccl" // NCCL (nccl_time_us)
)

// Buckets of the statistics.
const (
	BucketAll   = "all"
	BucketSmall = "small" // below SmallBytes
	BucketLarge = "large"
	// BucketSteady is every size less the rows whose column was
	// disturbed (Row.Disturbed); reported only where some were.
	BucketSteady = "steady"
)

// Stat is the error of the simulation over some rows: against one
// measured column, for one protocol (or "all") and size bucket.
type Stat struct {
	Column string
	Proto  string
	Bucket string
	N      int
	// MedianAbs and MaxAbs are the median and maximum absolute relative
	// errors; Bias the median signed error (positive: the simulator
	// predicts slower than measured).
	MedianAbs, MaxAbs, Bias float64
	// Worst names the row of MaxAbs.
	Worst string
}

// statRow is a row of a statistic, with the name it has as the worst;
// validOnly leaves out its invalid columns (Row.Invalid).
type statRow struct {
	*Row
	name      string
	validOnly bool
}

// statsOf computes the statistics per column, protocol and bucket.
func statsOf(rows []Row) []Stat {
	sr := make([]statRow, len(rows))
	for i := range rows {
		sr[i] = statRow{Row: &rows[i], name: fmt.Sprintf("%s %d B", rows[i].Coll, rows[i].Bytes)}
	}
	return statsOfRows(sr)
}

// statsOfRows computes the statistics of rows per column, protocol and
// bucket: BucketAll, BucketSmall and BucketLarge, and BucketSteady,
// each only where it differs from BucketAll.
func statsOfRows(rows []statRow) []Stat {
	protos := []string{"all"}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, p := range []string{r.SimProto, r.ncclProto()} {
			if !seen[p] {
				seen[p] = true
				protos = append(protos, p)
			}
		}
	}
	sort.Strings(protos[1:])
	var out []Stat
	for _, col := range []string{ColOurs, ColNCCL} {
		for _, p := range protos {
			for _, b := range []string{BucketAll, BucketSmall, BucketLarge, BucketSteady} {
				var errs []float64
				var names []string
				for _, r := range rows {
					e, rp := r.colErr(col)
					if p != "all" && rp != p {
						continue
					}
					if b == BucketSmall && r.Bytes >= SmallBytes || b == BucketLarge && r.Bytes < SmallBytes ||
						b == BucketSteady && r.Disturbed(col) || r.validOnly && r.Invalid(col) != "" {
						continue
					}
					if math.IsNaN(e) {
						continue
					}
					errs = append(errs, e)
					names = append(names, r.name)
				}
				if len(errs) == 0 {
					continue
				}
				st := Stat{Column: col, Proto: p, Bucket: b, N: len(errs)}
				abs := make([]float64, len(errs))
				for i, e := range errs {
					abs[i] = math.Abs(e)
					if abs[i] >= st.MaxAbs {
						st.MaxAbs, st.Worst = abs[i], names[i]
					}
				}
				st.MedianAbs = stats.Median(abs)
				st.Bias = stats.Median(errs)
				if all := allStat(out, col, p); b != BucketAll && all != nil && all.N == st.N {
					continue // the same rows as the protocol's "all"
				}
				out = append(out, st)
			}
		}
	}
	return out
}

// PoolStat is a statistic over the rows of several reports that share
// a transport: the measure the simulator's accuracy is judged by, per
// transport and protocol over a start's recordings.
type PoolStat struct {
	Stat
	// Transport is the reports' Report.Transport; Files how many
	// reports had rows in the statistic's transport.
	Transport string
	Files     int
}

// LeftOut counts the rows' columns that Pool left out, by why
// (Row.Invalid): a column of a row counts once, under the first reason
// that applies; only columns with a measurement count.
type LeftOut struct {
	Wrong, NotAsRecorded, Disturbed int
	// Columns counts every column with a measurement, left out or not.
	Columns int
}

// Total is the columns left out.
func (l LeftOut) Total() int { return l.Wrong + l.NotAsRecorded + l.Disturbed }

// add counts column col of row r.
func (l *LeftOut) add(r *Row, col string) {
	if e, _ := r.colErr(col); math.IsNaN(e) {
		return
	}
	l.Columns++
	switch r.Invalid(col) {
	case InvalidWrong:
		l.Wrong++
	case InvalidNotAsRecorded:
		l.NotAsRecorded++
	case InvalidDisturbed:
		l.Disturbed++
	}
}

// Pool computes the statistics of several reports' valid rows together
// (ValidRule: every bucket leaves out the columns Row.Invalid names, so
// that BucketSteady, the same rows, does not appear), per transport
// (Report.Transport), column, protocol and bucket, in transport order;
// the worst row is named with its report's input. It returns with them
// the columns it left out.
func Pool(reps []*Report) ([]PoolStat, LeftOut) {
	byTransport := map[string][]statRow{}
	files := map[string]int{}
	var transports []string
	var left LeftOut
	for _, rep := range reps {
		t := rep.Transport
		if files[t] == 0 {
			transports = append(transports, t)
		}
		files[t]++
		for i := range rep.Rows {
			r := &rep.Rows[i]
			left.add(r, ColOurs)
			left.add(r, ColNCCL)
			byTransport[t] = append(byTransport[t], statRow{r, fmt.Sprintf("%s: %s %d B", rep.Input.Path, r.Coll, r.Bytes), true})
		}
	}
	sort.Strings(transports)
	var out []PoolStat
	for _, t := range transports {
		for _, st := range statsOfRows(byTransport[t]) {
			out = append(out, PoolStat{Stat: st, Transport: t, Files: files[t]})
		}
	}
	return out, left
}

// allStat is the "all" bucket's statistic of column col and protocol p
// among out (nil when there is none).
func allStat(out []Stat, col, p string) *Stat {
	for i := len(out) - 1; i >= 0; i-- {
		if s := &out[i]; s.Column == col && s.Proto == p && s.Bucket == BucketAll {
			return s
		}
	}
	return nil
}

// colErr is column col's error (Err, or NCCLErr for ColNCCL) and the
// protocol that column ran (SimProto, or ncclProto).
func (r *Row) colErr(col string) (err float64, proto string) {
	if col == ColNCCL {
		return r.NCCLErr, r.ncclProto()
	}
	return r.Err, r.SimProto
}

// ncclProto is the protocol NCCL's run used as the simulation has it:
// the tuner's.
func (r *Row) ncclProto() string {
	if r.TunerProto != "" {
		return r.TunerProto
	}
	return r.SimProto
}

// Stat returns the statistic of a column, protocol and bucket, if any.
func (r *Report) Stat(col, proto, bucket string) (Stat, bool) {
	for _, s := range r.Stats {
		if s.Column == col && s.Proto == proto && s.Bucket == bucket {
			return s, true
		}
	}
	return Stat{}, false
}

// skewedKernels is the ratio of a traced call's shortest rank kernel to
// its longest below which the call is noted as started apart.
const skewedKernels = 0.6

// Describe is a one-line summary of the input and its settings.
func (r *Report) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s, %d calls, %d ranks) on %s", r.Input.Path, r.Input.Kind, len(r.Input.Calls), r.Input.NRanks, r.Topology)
	if r.Settings != "" {
		fmt.Fprintf(&b, ", settings %s", r.Settings)
	}
	if r.Input.EnvFrom != "" {
		fmt.Fprintf(&b, " (from %s, the --json file of the same run)", r.Input.EnvFrom)
	}
	fmt.Fprintf(&b, ", calibration %s", r.Calib)
	return b.String()
}
