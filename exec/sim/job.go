package sim

import (
	"errors"
	"fmt"

	"github.com/twinccl/twinccl/model"
)

// Job runs the calls of a job's communicators in one engine: calls in
// flight at the same time, on one communicator's streams or on several
// communicators, put their slices on the same link resources (NVLink,
// PCIe, NICs, the network, host memory) as the channels of one call do,
// with the same flow-level max-min sharing; the calls of one communicator
// also share its socket proxy threads. Each call runs its own
// communicator's Program, routes and calibration; only the resources are
// the job's (those of the Machine of the whole job, every host once).
// Times are the job's virtual time. A Job is not safe for concurrent use.
type Job struct {
	m    *Machine
	q    queue
	fab  fabric
	now  Time
	base int32
	// runs are the calls in flight, by increasing base
	runs []*jobRun
	// byComm caches each communicator machine's copy on the job's resources
	byComm map[*Machine]*Machine
	// proxies are each communicator's socket proxy threads, one per rank:
	// NCCL runs a proxy thread per communicator and GPU (unless split
	// communicators share their parent's, splitShare), which serves the
	// operations of all the communicator's calls in flight one at a time
	proxies map[*Machine]*jobProxies
}

// jobProxies are the socket proxy threads of one communicator (see
// runner.proxyFree).
type jobProxies struct {
	free       []Time
	sent, rcvd []bool
}

// jobRun is a call in flight.
type jobRun struct {
	x     *runner
	tag   int
	start Time
	span  int32
}

// Finished is a call of a Job that ended.
type Finished struct {
	// Tag is the caller's tag of the call (Job.Start).
	Tag int
	// Start and End are when its lanes began and when the last ended, in
	// the job's time (ps).
	Start, End Time
	// RankEnd is, per rank of its communicator, when the rank's last lane
	// ended.
	RankEnd []Time
	// Slices is the number of slices it executed.
	Slices int64
	// LaunchUs is the launch cost of the call (Result.TimeUs less
	// KernelUs): its stream is free that long after its end.
	LaunchUs float64
}

// NewJob returns a Job on the resources of the whole job's machine (every
// rank of the job, every host).
func NewJob(m *Machine) *Job {
	j := &Job{m: m, byComm: map[*Machine]*Machine{}, proxies: map[*Machine]*jobProxies{}}
	j.fab.res = make([]resource, len(m.res))
	copy(j.fab.res, m.res)
	for i := range j.fab.res {
		j.fab.res[i].flows = nil
	}
	j.fab.batch = !m.unbatched
	return j
}

// Now is the job's current virtual time (ps).
func (j *Job) Now() Time { return j.now }

// InFlight is the number of calls in flight.
func (j *Job) InFlight() int { return len(j.runs) }

// Moved returns the wire bytes every resource of the job carried so far
// (calls ended), by resource name.
func (j *Job) Moved() map[string]float64 {
	out := map[string]float64{}
	for i := range j.fab.res {
		if b := j.fab.res[i].bytes; b > 0 {
			out[j.fab.res[i].name] += b
		}
	}
	return out
}

// Start puts a call in flight now: Program p of the communicator whose
// machine is cm (hostOf: see onJob), reporting its slices to rec (nil:
// none) with times in the job's time. tag names it in Finished.
func (j *Job) Start(cm *Machine, hostOf []int, p *model.Program, tag int, rec func(*SliceEvent)) error {
	if p == nil {
		return errors.New("sim: nil program")
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	return j.start(cm, hostOf, p, nil, tag, rec)
}

// StartGen is Start on the Program of a generator, its lanes streamed (a
// window of each in memory at a time, as Machine.RunGen runs them).
func (j *Job) StartGen(cm *Machine, hostOf []int, g *model.ProgGen, tag int, rec func(*SliceEvent)) error {
	sm, err := j.onJob(cm, hostOf)
	if err != nil {
		return err
	}
	h, st, err := sm.streamOf(g)
	if err != nil {
		return err
	}
	return j.start(cm, hostOf, h, st, tag, rec)
}

func (j *Job) start(cm *Machine, hostOf []int, p *model.Program, st *streamed, tag int, rec func(*SliceEvent)) error {
	sm, err := j.onJob(cm, hostOf)
	if err != nil {
		return err
	}
	x, err := sm.newRunner(p, nil, rec, st, &j.q, &j.fab)
	if err != nil {
		return err
	}
	span := int32(max(len(x.actors), len(x.rc)))
	if int64(j.base)+int64(span) > 1<<31-1 {
		return errors.New("sim: job: too many lanes and connections in one run")
	}
	x.base, x.now = j.base, j.now
	j.base += span
	if x.proxyFree != nil { // the communicator's proxy threads serve all its calls
		if ps := j.proxies[cm]; ps != nil {
			x.proxyFree, x.proxySent, x.proxyRcvd = ps.free, ps.sent, ps.rcvd
		} else {
			j.proxies[cm] = &jobProxies{free: x.proxyFree, sent: x.proxySent, rcvd: x.proxyRcvd}
		}
	}
	jr := &jobRun{x: x, tag: tag, start: j.now, span: span}
	j.runs = append(j.runs, jr)
	x.begin()
	return nil
}

// runOf returns the call in flight whose ids hold global id g.
func (j *Job) runOf(g int32) *jobRun {
	lo, hi := 0, len(j.runs)
	for lo < hi {
		mid := (lo + hi) / 2
		if r := j.runs[mid]; g < r.x.base {
			hi = mid
		} else if g >= r.x.base+r.span {
			lo = mid + 1
		} else {
			return r
		}
	}
	return nil
}

// Advance runs the job's events up to time limit (ps; included) and
// stops after the first time at which calls end, returning them. With
// no call ending by then, it returns none and the job's time is limit;
// when nothing is in flight it returns at once (time limit).
func (j *Job) Advance(limit Time) ([]Finished, error) {
	var out []Finished
	for {
		if len(j.fab.pending) > 0 && (j.q.empty() || j.q.nextTime() != j.now) {
			j.fab.flush(&j.q, j.now)
		}
		if len(out) > 0 && (j.q.empty() || j.q.nextTime() != j.now) {
			return out, nil
		}
		if j.q.empty() || j.q.nextTime() > limit {
			if len(j.runs) > 0 && j.q.empty() {
				return nil, j.runs[0].x.deadlock()
			}
			j.now = max(j.now, limit)
			return out, nil
		}
		ev := j.q.pop()
		j.now = ev.t
		var jr *jobRun
		if ev.kind == evFlow {
			if !j.fab.current(ev.id, ev.val) {
				continue
			}
			jr = j.runOf(j.fab.flows[ev.id].owner)
		} else if jr = j.runOf(ev.id); jr != nil {
			ev.id -= jr.x.base
		}
		if jr == nil {
			continue // a post or credit reaching a call that ended
		}
		x := jr.x
		x.now = ev.t
		x.events++
		x.handle(ev)
		if x.left == 0 {
			out = append(out, j.finish(jr))
		}
	}
}

// finish takes an ended call out of flight.
func (j *Job) finish(jr *jobRun) Finished {
	x := jr.x
	f := Finished{Tag: jr.tag, Start: jr.start, RankEnd: make([]Time, x.p.NRanks), Slices: x.slices, LaunchUs: x.c.launchUs(x.p.NChannels)}
	for i := range x.cold {
		ac := &x.cold[i]
		f.End = max(f.End, ac.finish)
		if r := int(ac.lane.Rank); r >= 0 && r < len(f.RankEnd) {
			f.RankEnd[r] = max(f.RankEnd[r], ac.finish)
		}
	}
	for i, r := range j.runs {
		if r == jr {
			j.runs = append(j.runs[:i], j.runs[i+1:]...)
			break
		}
	}
	return f
}
