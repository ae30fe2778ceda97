package hwcmp

import (
	"fmt"
	"math"
	"sort"

	"github.com/twinccl/twinccl/exec/sim"
	"github.com/twinccl/twinccl/internal/stats"
	"github.com/twinccl/twinccl/traces"
)

// MaxEvents bounds the event rows read from one event trace.
const MaxEvents = 20_000_000

// StepKey groups steps: a primitive and a protocol.
type StepKey struct {
	Primitive string
	Protocol  string
}

// StepStat summarises matched steps of one primitive and protocol (or of
// one channel of one call).
type StepStat struct {
	StepKey
	// Call and Channel are set for per-channel rows (-1 otherwise).
	Call    int64
	Channel int32
	Steps   int
	Bytes   int64
	// HwStepUs and SimStepUs are the median durations of a step (start
	// to end) on hardware and in the simulation.
	HwStepUs, SimStepUs float64
	// HwWaitUs and SimWaitUs are the median waits of a step for its data
	// and send credits (start to data start): nil on the hardware side
	// where the trace has no data stamps (schema 1.0 files).
	HwWaitUs, SimWaitUs *float64
	// LateUs is the median lateness of the steps' ends relative to the
	// kernel start: positive when the simulator ends them later than the
	// hardware did, negative when early. EndLateUs is the lateness of
	// the last step (per-channel rows; 0 in per-primitive rows).
	LateUs, EndLateUs float64
	// FirstStartHwUs and FirstStartSimUs are when the first step started
	// after the kernel start (per-channel rows; 0 in per-primitive rows):
	// the kernel's set-up.
	FirstStartHwUs, FirstStartSimUs float64
	// Why takes EndLateUs apart into its causes (per-channel rows; nil in
	// per-primitive rows).
	Why *Lateness `json:",omitempty"`
}

// Lateness takes the lateness of a channel's last step (sim end - hw end,
// from the kernel start) apart: it is the sum of the simulation's excess
// over the hardware in the kernel's set-up before the first step
// (LaunchUs), in the steps' waits for their data and send credits
// (WaitUs: the link, and the peer's progress), in the steps' own work
// once their data came (WorkUs: the protocol's copies, flags and fences)
// and in the gaps between one step's end and the next one's start
// (BetweenUs: the lane's cost of a primitive call). A trace without data
// stamps (schema 1.0) splits no step: WaitUs and WorkUs are nil and
// StepsUs, their sum, stands alone.
type Lateness struct {
	LaunchUs       float64
	WaitUs, WorkUs *float64 `json:",omitempty"`
	StepsUs        float64
	BetweenUs      float64
	// Cause names the term that moves the last step most in the
	// direction of its lateness: CauseLaunch, CauseLink, CauseProtocol,
	// CauseBetween or CauseSteps, or CauseOnTime when the last step ends
	// within OnTimeUs of the hardware's.
	Cause string
}

// The causes a Lateness names.
const (
	CauseLaunch   = "launch"   // the kernel's set-up before the first step
	CauseLink     = "link"     // the steps' waits for data and credits
	CauseProtocol = "protocol" // the steps' own work
	CauseBetween  = "between"  // the gaps between steps
	CauseSteps    = "steps"    // the steps, where no data stamp splits them
	CauseOnTime   = "on time"
)

// OnTimeUs is how close (us) a last step's end must be to the hardware's
// for its Lateness to name no cause.
const OnTimeUs = 0.1

// lateness takes the lateness of the last of the steps h (hardware) and s
// (simulated), matched one to one and in order, apart (see Lateness).
func lateness(h, s []stepTimes) *Lateness {
	n := min(len(h), len(s))
	if n == 0 {
		return nil
	}
	l := &Lateness{LaunchUs: (s[0].start - h[0].start) / 1e3}
	split := true
	var wait, work float64
	for i := 0; i < n; i++ {
		l.StepsUs += ((s[i].end - s[i].start) - (h[i].end - h[i].start)) / 1e3
		if i > 0 {
			l.BetweenUs += ((s[i].start - s[i-1].end) - (h[i].start - h[i-1].end)) / 1e3
		}
		if !h[i].hasData {
			split = false
			continue
		}
		wait += ((s[i].data - s[i].start) - (h[i].data - h[i].start)) / 1e3
		work += ((s[i].end - s[i].data) - (h[i].end - h[i].data)) / 1e3
	}
	if split {
		l.WaitUs, l.WorkUs = &wait, &work
	}
	total := (s[n-1].end - h[n-1].end) / 1e3
	if math.Abs(total) < OnTimeUs {
		l.Cause = CauseOnTime
		return l
	}
	type term struct {
		cause string
		us    float64
	}
	terms := []term{{CauseLaunch, l.LaunchUs}, {CauseBetween, l.BetweenUs}}
	if split {
		terms = append(terms, term{CauseLink, wait}, term{CauseProtocol, work})
	} else {
		terms = append(terms, term{CauseSteps, l.StepsUs})
	}
	best := 0.0
	for _, t := range terms {
		v := t.us
		if total < 0 {
			v = -v
		}
		if v > best {
			best, l.Cause = v, t.cause
		}
	}
	return l
}

// StepReport is the step-level comparison of an event trace.
type StepReport struct {
	Path string
	// Rank is "the rank that started last" per call, whose steps are
	// compared (the others' first receives include waiting for it to
	// launch, which the simulation, with all ranks starting together,
	// does not have).
	Ranks []int
	// ByPrim summarises the steps per primitive and protocol.
	ByPrim []StepStat
	// ByChannel has one row per call and channel.
	ByChannel []StepStat
	// Matched counts the steps found on both sides; Mismatched names
	// the (call, channel) pairs whose step counts differ.
	Matched    int
	Mismatched []string
}

// stepTimes is one step as either side saw it (ns from the kernel start).
type stepTimes struct {
	prim, proto      string
	step, bytes      int64
	start, data, end float64
	hasData          bool // data is stamped
}

// CompareEvents compares the event trace at path (a hardware trace of
// the calls of rep's input, which must be a call trace) with the
// simulation of every call, step by step.
func (cp *Comparer) CompareEvents(rep *Report, path string) (*StepReport, error) {
	cp = cp.oursComparer() // the events are our executor's
	in := rep.Input
	if in.Kind != KindTrace {
		return nil, fmt.Errorf("%s: step comparison needs a call trace input, not %s", path, in.Kind)
	}
	r, err := traces.OpenEventFile(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	type ck struct {
		comm uint64
		call int64
	}
	type lk struct {
		ck
		rank, ch int32
	}
	calls := map[ck]int{}
	for i, c := range in.Calls {
		calls[ck{c.Comm, c.Index}] = i
	}
	want := func(c *Call) int { return c.LastRank() }
	hw := map[lk][]stepTimes{}
	nrows := 0
	err = r.Scan(traces.Filter{}, func(rows []traces.EventRow) error {
		for _, e := range rows {
			nrows++
			if nrows > MaxEvents {
				return fmt.Errorf("more than %d events", MaxEvents)
			}
			i, ok := calls[ck{e.Comm, e.Call}]
			if !ok {
				continue
			}
			c := &in.Calls[i]
			if int(e.Rank) != want(c) {
				continue
			}
			if e.Channel < 0 || e.Channel >= 1<<16 || e.Step < 0 || e.Step >= 1<<40 || e.EndNs < e.StartNs {
				return fmt.Errorf("call %d rank %d: bad event (channel %d, step %d, %d..%d ns)", e.Call, e.Rank, e.Channel, e.Step, e.StartNs, e.EndNs)
			}
			if e.DataNs != 0 && (e.DataNs < e.StartNs || e.DataNs > e.EndNs) {
				return fmt.Errorf("call %d rank %d: bad event (channel %d, step %d): data_ns %d outside %d..%d", e.Call, e.Rank, e.Channel, e.Step, e.DataNs, e.StartNs, e.EndNs)
			}
			base := c.RankStartNs[e.Rank]
			k := lk{ck{e.Comm, e.Call}, e.Rank, e.Channel}
			hw[k] = append(hw[k], stepTimes{prim: e.Primitive, proto: e.Protocol, step: e.Step, bytes: e.Bytes,
				start: float64(e.StartNs - base), data: float64(e.DataNs - base), end: float64(e.EndNs - base), hasData: e.DataNs != 0})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(hw) == 0 {
		return nil, fmt.Errorf("%s: no events of the calls of %s", path, in.Path)
	}
	sr := &StepReport{Path: path}
	type acc struct {
		hwDur, simDur, late, hwWait, simWait []float64
		bytes                                int64
	}
	byPrim := map[StepKey]*acc{}
	var primKeys []StepKey
	for ci := range in.Calls {
		c := &in.Calls[ci]
		rank := want(c)
		sr.Ranks = append(sr.Ranks, rank)
		sc := c.simCall()
		if sc.NChannels > cp.Sim.Search.Plan.NChannels {
			sc.NChannels = cp.Sim.Search.Plan.NChannels
		}
		sim0 := map[int32][]stepTimes{}
		saved := cp.Sim.Mode
		cp.Sim.Mode = sim.ModeAccurate // every lane, for the step pairs
		_, err := cp.Sim.RunRecord(sc, func(e *sim.SliceEvent) {
			if int(e.Rank) != rank {
				return
			}
			sim0[e.Channel] = append(sim0[e.Channel], stepTimes{prim: e.Prim.String(), proto: e.Proto.String(), step: e.Step, bytes: e.Bytes,
				start: float64(e.Start) / 1e3, data: float64(e.Data) / 1e3, end: float64(e.End) / 1e3, hasData: true})
		})
		cp.Sim.Mode = saved
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.label(), err)
		}
		var chans []int32
		for k := range hw {
			if k.comm == c.Comm && k.call == c.Index && k.rank == int32(rank) {
				chans = append(chans, k.ch)
			}
		}
		sort.Slice(chans, func(i, j int) bool { return chans[i] < chans[j] })
		for _, ch := range chans {
			h := hw[lk{ck{c.Comm, c.Index}, int32(rank), ch}]
			sort.SliceStable(h, func(i, j int) bool { return h[i].step < h[j].step })
			s := sim0[ch]
			if len(h) != len(s) {
				sr.Mismatched = append(sr.Mismatched, fmt.Sprintf("call %d channel %d: %d hw steps, %d simulated", c.Index, ch, len(h), len(s)))
			}
			n := min(len(h), len(s))
			if n == 0 {
				continue
			}
			cs := StepStat{Call: c.Index, Channel: ch, StepKey: StepKey{h[0].prim, h[0].proto}, Steps: n,
				FirstStartHwUs: h[0].start / 1e3, FirstStartSimUs: s[0].start / 1e3,
				EndLateUs: (s[n-1].end - h[n-1].end) / 1e3, Why: lateness(h, s)}
			var late, hd, sd, hw, sw []float64
			for i := 0; i < n; i++ {
				sr.Matched++
				k := StepKey{h[i].prim, h[i].proto}
				a := byPrim[k]
				if a == nil {
					a = &acc{}
					byPrim[k] = a
					primKeys = append(primKeys, k)
				}
				dh, ds, l := (h[i].end-h[i].start)/1e3, (s[i].end-s[i].start)/1e3, (s[i].end-h[i].end)/1e3
				a.hwDur, a.simDur, a.late = append(a.hwDur, dh), append(a.simDur, ds), append(a.late, l)
				a.bytes += h[i].bytes
				hd, sd, late = append(hd, dh), append(sd, ds), append(late, l)
				if h[i].hasData {
					w := (h[i].data - h[i].start) / 1e3
					a.hwWait, hw = append(a.hwWait, w), append(hw, w)
				}
				w := (s[i].data - s[i].start) / 1e3
				a.simWait, sw = append(a.simWait, w), append(sw, w)
				cs.Bytes += h[i].bytes
			}
			cs.HwStepUs, cs.SimStepUs, cs.LateUs = stats.Median(hd), stats.Median(sd), stats.Median(late)
			cs.HwWaitUs, cs.SimWaitUs = medianOf(hw, n), medianOf(sw, n)
			sr.ByChannel = append(sr.ByChannel, cs)
		}
	}
	sort.Slice(primKeys, func(i, j int) bool {
		if primKeys[i].Protocol != primKeys[j].Protocol {
			return primKeys[i].Protocol < primKeys[j].Protocol
		}
		return primKeys[i].Primitive < primKeys[j].Primitive
	})
	for _, k := range primKeys {
		a := byPrim[k]
		sr.ByPrim = append(sr.ByPrim, StepStat{StepKey: k, Call: -1, Channel: -1, Steps: len(a.hwDur), Bytes: a.bytes,
			HwStepUs: stats.Median(a.hwDur), SimStepUs: stats.Median(a.simDur), LateUs: stats.Median(a.late),
			HwWaitUs: medianOf(a.hwWait, len(a.hwDur)), SimWaitUs: medianOf(a.simWait, len(a.simDur))})
	}
	return sr, nil
}

// medianOf is the median of v when every one of the n steps has a value
// in it, nil otherwise (a trace without data stamps, or with some).
func medianOf(v []float64, n int) *float64 {
	if n == 0 || len(v) != n {
		return nil
	}
	m := stats.Median(v)
	return &m
}
