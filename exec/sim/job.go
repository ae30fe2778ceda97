package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

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

// onJob returns (making it once) a copy of communicator machine cm whose
// link resources are the job's: hostOf[i] is the job host (cluster node of
// the job's machine) of cm's cluster node i. A link of the communicator's
// systems is the job's link of the same name on that host.
func (j *Job) onJob(cm *Machine, hostOf []int) (*Machine, error) {
	if sm, ok := j.byComm[cm]; ok {
		return sm, nil
	}
	if len(hostOf) != len(cm.Cluster.Nodes) {
		return nil, fmt.Errorf("sim: %d job hosts for a communicator of %d hosts", len(hostOf), len(cm.Cluster.Nodes))
	}
	byName := make(map[string]int32, len(j.m.res))
	for id, r := range j.m.res {
		if _, dup := byName[r.name]; dup {
			return nil, fmt.Errorf("sim: the job's machine has two resources named %s", r.name)
		}
		byName[r.name] = int32(id)
	}
	sm := *cm
	sm.res, sm.resType, sm.extra = j.m.res, j.m.resType, j.m.extra
	sm.linkRes = make(map[*model.Link]int32, len(cm.linkRes))
	for l, id := range cm.linkRes {
		name := cm.res[id].name
		h, rest, ok := splitHost(name)
		if !ok || h < 0 || h >= len(hostOf) || hostOf[h] < 0 || hostOf[h] >= len(j.m.Cluster.Nodes) {
			return nil, fmt.Errorf("sim: communicator resource %s is on no host of the job", name)
		}
		jid, ok := byName["h"+strconv.Itoa(hostOf[h])+":"+rest]
		if !ok {
			return nil, fmt.Errorf("sim: communicator link %s (job host %d) is not a link of the job's topology", name, hostOf[h])
		}
		if j.m.res[jid].cap != cm.res[id].cap {
			return nil, fmt.Errorf("sim: communicator link %s has %.1f GB/s, the job's %.1f GB/s", name, cm.res[id].cap*1e3, j.m.res[jid].cap*1e3)
		}
		sm.linkRes[l] = jid
	}
	sm.memRes = make([]int32, len(cm.memRes))
	for i := range cm.memRes {
		sm.memRes[i] = j.m.memRes[hostOf[i]]
	}
	sm.hostRes = nil // no folding onto one host on shared resources
	sm.routes = map[routeKey]*route{}
	sm.Progress, sm.LoopCalls, sm.EagerCalls = nil, 0, false
	j.byComm[cm] = &sm
	return &sm, nil
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

// splitHost splits a resource name "h3:GPU/0-0->NVS/0" into its host and
// the rest.
func splitHost(name string) (int, string, bool) {
	num, rest, ok := strings.Cut(strings.TrimPrefix(name, "h"), ":")
	if !ok || !strings.HasPrefix(name, "h") {
		return 0, "", false
	}
	h, err := strconv.Atoi(num)
	return h, rest, err == nil
}

// CommHosts returns, for every cluster node of a communicator, the host of
// the job it is on: members are the communicator's ranks as job ranks
// (model.LoadOptions.Ranks), job the Machine of the whole job.
func CommHosts(job *Machine, members []int, comm *model.Cluster) ([]int, error) {
	out := make([]int, len(comm.Nodes))
	for i, n := range comm.Nodes {
		if len(n.Ranks) == 0 || n.Ranks[0] >= len(members) {
			return nil, fmt.Errorf("sim: communicator node %d has no member", i)
		}
		g := members[n.Ranks[0]]
		if g < 0 || g >= len(job.rankNode) {
			return nil, fmt.Errorf("sim: communicator rank %d is job rank %d, outside the job's %d", n.Ranks[0], g, len(job.rankNode))
		}
		out[i] = job.rankNode[g]
	}
	return out, nil
}

// Traffic is the wire bytes a call moved over one resource of the job.
type Traffic struct {
	Name  string // resource name, host numbered in the job ("h3:GPU/0-f000->NVS/0")
	Bytes float64
}

// JobTraffic returns the traffic of a call simulated on a communicator's
// machine with the communicator's hosts renamed to the job's (hostOf: see
// CommHosts). A call the fast mode folded onto its first host moved that
// host's traffic on every host of the communicator.
func (r *Result) JobTraffic(hostOf []int) ([]Traffic, error) {
	var out []Traffic
	for _, l := range r.Links {
		h, rest, ok := splitHost(l.Name)
		if !ok || h < 0 || h >= len(hostOf) {
			return nil, fmt.Errorf("sim: resource %q is on no host of a communicator of %d", l.Name, len(hostOf))
		}
		hosts := hostOf[h : h+1]
		if r.Folded > 0 && h == 0 {
			hosts = hostOf
		}
		for _, jh := range hosts {
			out = append(out, Traffic{Name: "h" + strconv.Itoa(jh) + ":" + rest, Bytes: l.Bytes})
		}
	}
	return out, nil
}
