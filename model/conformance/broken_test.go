package conformance_test

import (
	"errors"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

// mutating wraps refexec with a deliberately broken generator: it edits
// every Program before running it.
type mutating struct {
	name   string
	mutate func(p *model.Program)
}

func (m mutating) Name() string { return "refexec+" + m.name }

func (m mutating) Execute(p *model.Program, in [][]byte) ([][]byte, error) {
	q := *p
	q.Lanes = make([]model.ProgLane, len(p.Lanes))
	for i, l := range p.Lanes {
		l.Ops = append([]model.ProgOp(nil), l.Ops...)
		q.Lanes[i] = l
	}
	m.mutate(&q)
	return refexec.Executor{}.Execute(&q, in)
}

// laneOf finds the first lane of rank r on channel ch with at least k ops.
func laneOf(p *model.Program, r, ch, k int) *model.ProgLane {
	for i := range p.Lanes {
		l := &p.Lanes[i]
		if int(l.Rank) == r && int(l.Channel) == ch && len(l.Ops) >= k {
			return l
		}
	}
	return nil
}

func TestBrokenGeneratorsAreCaught(t *testing.T) {
	ar := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 4, NChannels: 1, Count: 40_000}
	bcast := conformance.Case{Coll: model.CollBroadcast, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 3, NChannels: 1, Count: 20 * 131072, Root: 0}
	treeLL := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoTree, Proto: model.ProtoLL, Dtype: model.DtypeInt32,
		Op: model.RedMax, NRanks: 5, NChannels: 2, Count: 30_000}
	tests := []struct {
		name string
		c    conformance.Case
		m    func(p *model.Program)
		kind refexec.ViolationKind // "" when a wrong result is enough
	}{
		{"swap-first-two-ops-with-steps", ar, func(p *model.Program) {
			l := laneOf(p, 1, 0, 2)
			l.Ops[0], l.Ops[1] = l.Ops[1], l.Ops[0]
		}, refexec.VStepOrder},
		{"swap-first-two-ops-renumbered", ar, func(p *model.Program) {
			// A plausible generator bug: ops in the wrong order, steps
			// numbered consistently. The data goes to the wrong chunks.
			l := laneOf(p, 1, 0, 2)
			a, b := l.Ops[0], l.Ops[1]
			l.Ops[0] = model.ProgOp{Kind: b.Kind, Flags: b.Flags, N: b.N, InOff: b.InOff, OutOff: b.OutOff, RecvStep: a.RecvStep, SendStep: a.SendStep}
			l.Ops[1] = model.ProgOp{Kind: a.Kind, Flags: a.Flags, N: a.N, InOff: a.InOff, OutOff: a.OutOff, RecvStep: a.RecvStep + 4, SendStep: a.SendStep + 4}
		}, ""},
		{"skipped-step", ar, func(p *model.Program) {
			// A call's steps skipped in the middle of the lane (its last
			// call keeps its step, so both ends of the connection still
			// end at the same step and Program.Validate passes it on).
			l := laneOf(p, 2, 0, 3)
			l.Ops[2].SendStep += 4
		}, refexec.VStepOrder},
		{"credits-too-many", bcast, func(p *model.Program) { p.Credits = 2 * model.ProgSlots }, refexec.VOverrun},
		{"credits-too-few", ar, func(p *model.Program) { p.Credits = 1 }, refexec.VDeadlock},
		{"receiver-size-wrong", treeLL, func(p *model.Program) {
			for i := range p.Lanes {
				l := &p.Lanes[i]
				if len(l.Ops) > 0 && l.Ops[0].Kind == model.PrimRecv {
					l.Ops[0].N--
					return
				}
			}
		}, refexec.VSizeMismatch},
		{"dropped-op", treeLL, func(p *model.Program) {
			l := &p.Lanes[len(p.Lanes)-1]
			l.Ops = l.Ops[:len(l.Ops)-1]
		}, ""},
		{"offset-off-by-one", ar, func(p *model.Program) {
			l := laneOf(p, 3, 0, 2)
			l.Ops[1].InOff++
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// The unbroken generator passes.
			if err := conformance.Check(refexec.Executor{}, tc.c); err != nil {
				t.Fatalf("unbroken: %v", err)
			}
			err := conformance.Check(mutating{tc.name, tc.m}, tc.c)
			if err == nil {
				t.Fatalf("broken generator %s not detected", tc.name)
			}
			t.Logf("detected: %v", err)
			if tc.kind != "" {
				var v *refexec.Violation
				if !errors.As(err, &v) || v.Kind != tc.kind {
					t.Fatalf("want a %s violation, got %v", tc.kind, err)
				}
			}
		})
	}
}

// p2pLane finds the first lane of rank r that sends (or receives) and
// holds at least k ops, the first of them non-empty.
func p2pLane(p *model.Program, r int, send bool, k int) *model.ProgLane {
	for i := range p.Lanes {
		l := &p.Lanes[i]
		if int(l.Rank) == r && len(l.Ops) >= k && l.Ops[0].N > 1 && (len(l.Send) > 0) == send && (len(l.Recv) > 0) == !send {
			return l
		}
	}
	return nil
}

func TestBrokenP2PGeneratorsAreCaught(t *testing.T) {
	a2a := conformance.Case{Coll: model.CollAlltoAll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		NRanks: 4, NChannels: 4, Count: 400_000, PerPeer: 2}
	sr := conformance.Case{Coll: model.CollSendRecv, Algo: model.AlgoRing, Proto: model.ProtoLL, Dtype: model.DtypeInt32,
		NRanks: 5, NChannels: 2, Count: 30_001, PerPeer: 2}
	tests := []struct {
		name string
		c    conformance.Case
		m    func(p *model.Program)
		kind refexec.ViolationKind
	}{
		{"recv-chunks-swapped", a2a, func(p *model.Program) {
			l := p2pLane(p, 2, false, 2)
			l.Ops[0].OutOff, l.Ops[1].OutOff = l.Ops[1].OutOff, l.Ops[0].OutOff
		}, ""},
		{"send-from-wrong-peer-block", a2a, func(p *model.Program) {
			l := p2pLane(p, 1, true, 1)
			l.Ops[0].InOff = (l.Ops[0].InOff + a2a.Count) % (4 * a2a.Count)
		}, ""},
		{"recv-size-wrong", sr, func(p *model.Program) {
			l := p2pLane(p, 3, false, 1)
			l.Ops[0].N--
		}, refexec.VSizeMismatch},
		{"send-op-dropped", sr, func(p *model.Program) {
			// Program.Validate refuses it: the sender's lane ends a step
			// before its receiver's.
			l := p2pLane(p, 0, true, 2)
			l.Ops = l.Ops[:len(l.Ops)-1]
		}, ""},
		{"send-step-reused", a2a, func(p *model.Program) {
			l := p2pLane(p, 3, true, 2)
			l.Ops[1].SendStep = l.Ops[0].SendStep
		}, refexec.VStepOrder},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := conformance.Check(refexec.Executor{}, tc.c); err != nil {
				t.Fatalf("unbroken: %v", err)
			}
			err := conformance.Check(mutating{tc.name, tc.m}, tc.c)
			if err == nil {
				t.Fatalf("broken generator %s not detected", tc.name)
			}
			t.Logf("detected: %v", err)
			if tc.kind != "" {
				var v *refexec.Violation
				if !errors.As(err, &v) || v.Kind != tc.kind {
					t.Fatalf("want a %s violation, got %v", tc.kind, err)
				}
			}
		})
	}
}

// TestBrokenP2PScheduleIsCaught runs AlltoAll over deliberately broken
// peer schedules: one rank visits two peers in each other's rounds (so
// its parts land on channels its peers do not use), and one rank sends
// to its receive peers (a schedule that is not a pairing).
func TestBrokenP2PScheduleIsCaught(t *testing.T) {
	c := conformance.Case{Coll: model.CollAlltoAll, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		NRanks: 6, NChannels: 8, Count: 5000, PerPeer: 2}
	plan := c.Plan()
	good, _, err := model.P2PSchedule(plan, 0)
	if err != nil {
		t.Fatal(err)
	}
	copySched := func() [][]model.P2PRound {
		s := make([][]model.P2PRound, len(good))
		for r := range good {
			s[r] = append([]model.P2PRound(nil), good[r]...)
		}
		return s
	}
	run := func(s [][]model.P2PRound) error {
		p, err := model.GenerateAlltoAllProgram(plan, c.Proto, c.Count, c.Dtype, model.P2POptions{Schedule: s})
		if err != nil {
			return err
		}
		return conformance.CheckProgram(refexec.Executor{}, c, p)
	}
	if err := run(good); err != nil {
		t.Fatalf("NCCL's schedule: %v", err)
	}
	swapped := copySched()
	swapped[1][1], swapped[1][2] = swapped[1][2], swapped[1][1]
	crossed := copySched()
	for i := range crossed[4] {
		crossed[4][i].Send = crossed[4][i].Recv
	}
	for name, s := range map[string][][]model.P2PRound{"swapped-rounds": swapped, "sends-to-recv-peers": crossed} {
		err := run(s)
		if err == nil {
			t.Fatalf("broken schedule %s not detected", name)
		}
		t.Logf("%s detected: %v", name, err)
	}
}
