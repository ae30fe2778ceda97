package sim

import (
	"fmt"
	"math"
)

// Back-to-back loops.
//
// nccl-tests, run gpu and PyTorch's CUDA graphs time a collective as a loop
// of calls issued back to back on every rank's stream, after an untimed
// call that lines the ranks up: rank r's timer covers its own kernels
// from the end of that aligning call to the end of the last timed one, and
// the table reports the slowest rank's time divided by the calls.
//
// Nothing synchronises the ranks between two calls but the data itself:
// a rank's next kernel starts as soon as its previous one ended (plus the
// launch), and its connections keep their step counters, so a rank runs
// ahead of its peers as far as the NCCL_STEPS credits of its send
// connections let it. A pipeline (Broadcast and Reduce chains, a send to
// a proxy far away) then overlaps successive calls: each call costs the
// busiest rank's share, not the chain's latency. One isolated call cannot
// show that; a loop of them does.
//
// The loop runs the same Program calls+1 times: each lane starts its next
// call when every lane of its rank has ended the previous one (one kernel
// per call and rank) and the launch has passed, with its step numbers
// offset by what one call consumes on its connections.
//
// Outside a CUDA graph (nccl-tests without -G: Machine.EagerCalls) the
// host issues each call, one every Calib.HostCallUs: a call also waits for
// its issue, so calls shorter than the host's cost take the host's time.

// loopState is the progress of a back-to-back loop of one Program.
type loopState struct {
	// calls is the number of calls, the aligning one included
	calls int
	// lanes holds every rank's lanes; left the lanes of each rank still
	// running its current call, call that call's index and ends the times
	// each of the rank's calls ended
	lanes [][]int32
	left  []int
	call  []int
	ends  [][]Time
	// next is the delay from a rank's kernel end to its next call's lanes
	// starting: the launch plus the lanes' start cost
	next Time
	// issue is, in an eager loop, the host's time between two calls
	// (Calib.HostCallUs; 0: graph-timed), first when the lanes of the
	// first call start: call k starts no earlier than first + k*issue.
	issue, first Time
}

// maxLoopCalls bounds Machine.LoopCalls.
const maxLoopCalls = 1000

// newLoop prepares a loop of timed calls after the aligning one, checking
// that every connection's sender posts as many steps per call as its
// receiver consumes (else the calls would not line up).
func (x *runner) newLoop(timed int) (*loopState, error) {
	if timed > maxLoopCalls {
		return nil, fmt.Errorf("sim: a loop of %d calls is over the limit of %d", timed, maxLoopCalls)
	}
	lp := &loopState{
		calls: timed + 1,
		lanes: make([][]int32, x.p.NRanks),
		left:  make([]int, x.p.NRanks),
		call:  make([]int, x.p.NRanks),
		ends:  make([][]Time, x.p.NRanks),
		next:  usToPs(x.c.launchUs(x.p.NChannels)) + usToPs(x.pc.StartUs),
	}
	if x.m.EagerCalls {
		lp.issue, lp.first = usToPs(x.c.HostCallUs), usToPs(x.pc.StartUs)
	}
	for i := range x.cold {
		r := x.cold[i].lane.Rank
		if r < 0 || int(r) >= x.p.NRanks {
			return nil, fmt.Errorf("sim: lane %d has rank %d outside %d", i, r, x.p.NRanks)
		}
		lp.lanes[r] = append(lp.lanes[r], int32(i))
		lp.left[r]++
		ac := &x.cold[i]
		if uint64(max(ac.spanR, ac.spanS))*uint64(lp.calls) > math.MaxUint32 {
			return nil, fmt.Errorf("sim: a loop of %d calls of %d steps overflows the step counters", lp.calls, max(ac.spanR, ac.spanS))
		}
	}
	for c := range x.p.Conns {
		s, r := x.sc[c].sender, x.rc[c].recver
		if s < 0 || r < 0 {
			continue
		}
		if sp, rp := x.cold[s].spanS, x.cold[r].spanR; sp != rp {
			cn := x.p.Conns[c]
			return nil, fmt.Errorf("sim: loop: connection %d (rank %d -> %d, channel %d): its sender posts %d steps per call, its receiver consumes %d",
				c, cn.From, cn.To, cn.Channel, sp, rp)
		}
	}
	return lp, nil
}

// laneEnded notes that lane ai ended its current call; when it was its
// rank's last, the rank's kernel ends and, unless that was the last call,
// every lane of the rank starts the next one after the launch.
func (x *runner) laneEnded(ai int32) {
	lp := x.loop
	r := x.cold[ai].lane.Rank
	lp.left[r]--
	if lp.left[r] > 0 {
		return
	}
	lp.ends[r] = append(lp.ends[r], x.now)
	if lp.call[r]+1 >= lp.calls {
		return
	}
	lp.call[r]++
	lp.left[r] = len(lp.lanes[r])
	at := max(x.now+lp.next, lp.first+Time(lp.call[r])*lp.issue)
	for _, li := range lp.lanes[r] {
		a, ac := &x.actors[li], &x.cold[li]
		ac.offR += ac.spanR
		ac.offS += ac.spanS
		ac.op, ac.opBase = 0, 0
		if x.gen != nil {
			ac.winEnd = 0
			x.slide(ac)
		}
		a.rep, a.reps, a.sl = 0, 0, 0
		a.phase = phOpStart
		x.push(at, evWake, li, 0)
	}
}

// finish turns the result of the whole loop into one call's as the
// harness measures it: the slowest rank's time from the end of its
// aligning call to the end of its last call, divided by the timed calls;
// traffic is per call.
func (lp *loopState) finish(r *Result, launchUs float64) {
	timed := lp.calls - 1
	r.LoopCalls = timed
	per := 0.0
	for rk, e := range lp.ends {
		if len(e) != lp.calls || rk >= len(r.RankKernelUs) {
			continue
		}
		us := float64(e[len(e)-1]-e[0]) / psPerUs / float64(timed)
		per = max(per, us)
		r.RankKernelUs[rk] = max(0, us-launchUs)
	}
	r.TimeUs = per
	r.KernelUs = max(0, per-launchUs)
	n := int64(lp.calls)
	for i := range r.Conns {
		c := &r.Conns[i]
		c.Bytes /= n
		c.WireBytes /= n
		c.Slices /= n
		c.Steps /= uint64(n)
	}
	for i := range r.Links {
		r.Links[i].Bytes /= float64(n)
	}
}
