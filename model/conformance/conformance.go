// Package conformance is the test suite every Program executor must pass
// (the reference interpreter model/refexec, exec/sim's data mode and
// exec/hw): it generates Programs for every collective, algorithm and
// protocol over hand-built Plans, runs them on deterministic inputs and
// compares every output byte with a direct computation.
//
// An executor's test calls
//
//	conformance.Run(t, myExecutor{})
//
// which runs Cases(): a default subset that stays fast, or the full sweep
// when TWINCCL_CONFORMANCE=full.
package conformance

import (
	"fmt"
	"math"
	"os"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/refexec"
)

// Executor runs a Program over one input buffer per rank (each
// p.InCount elements of p.Dtype, little-endian) and returns one output
// buffer per rank (p.OutCount elements).
type Executor interface {
	Name() string
	Execute(p *model.Program, inputs [][]byte) ([][]byte, error)
}

// Case is one conformance check.
type Case struct {
	Coll      model.Collective
	Algo      model.Algorithm
	Proto     model.Protocol
	Dtype     model.Dtype
	Op        model.RedOp
	NRanks    int
	NChannels int
	Count     int64 // per rank for AllGather and ReduceScatter
	Root      int
	Permute   bool // use permuted ring orders on channels > 0
	// PerPeer is the p2p channel count per peer of SendRecv and AlltoAll
	// cases (p2pnChannelsPerPeer, a power of two); 0 uses the Plan's.
	PerPeer int
}

func (c Case) String() string {
	s := fmt.Sprintf("%s/%s/%s/%s/%s/n%d/c%d/k%d", c.Coll, c.Algo, c.Proto, c.Dtype, c.Op, c.NRanks, c.NChannels, c.Count)
	if c.Coll == model.CollBroadcast || c.Coll == model.CollReduce {
		s += fmt.Sprintf("/root%d", c.Root)
	}
	if c.Permute {
		s += "/perm"
	}
	if c.PerPeer != 0 {
		s += fmt.Sprintf("/pp%d", c.PerPeer)
	}
	return s
}

// IsP2P reports whether the case runs on the p2p path (SendRecv, AlltoAll).
func (c Case) IsP2P() bool { return c.Coll.IsP2P() }

// Plan is the hand-built Plan the case runs on (see TestPlan).
func (c Case) Plan() *model.Plan {
	p := TestPlan(c.NRanks, c.NChannels, c.Permute)
	if c.PerPeer != 0 {
		p.P2PChannelsPerPeer = c.PerPeer
	}
	return p
}

// Program generates the case's Program with model.GenerateProgram, or
// model.GenerateP2PProgram over P2PTasks for SendRecv.
func (c Case) Program() (*model.Program, error) {
	if c.Coll == model.CollSendRecv {
		return model.GenerateP2PProgram(c.Plan(), c.P2PTasks(), c.Proto, c.Dtype, model.P2POptions{})
	}
	return model.GenerateProgram(c.Plan(), c.Coll, c.Algo, c.Proto, c.Count, c.Dtype, c.Op, model.ProgOptions{NChannels: c.NChannels, Root: c.Root})
}

// p2pShifts are the peer distances of SendRecv cases: next, previous,
// self and opposite (distances may coincide on few ranks, which queues
// several transfers between the same pair).
func (c Case) p2pShifts() []int {
	n := c.NRanks
	return []int{1 % n, (n - 1) % n, 0, (n / 2) % n}
}

// p2pCount is the element count of the j-th transfer of SendRecv cases.
func (c Case) p2pCount(j int) int64 { return max(0, c.Count-int64(j)*c.Count/3) }

// P2PTasks is the group of sends and receives of a SendRecv case: for
// every shift s of p2pShifts in order, every rank r sends p2pCount(j)
// elements to (r+s) mod n, which receives them; each rank's transfers sit
// back to back in its input and output buffers in that order.
func (c Case) P2PTasks() []model.P2PTask {
	n := c.NRanks
	var tasks []model.P2PTask
	off := int64(0)
	for j, s := range c.p2pShifts() {
		cnt := c.p2pCount(j)
		for r := 0; r < n; r++ {
			peer := (r + s) % n
			tasks = append(tasks,
				model.P2PTask{Rank: r, Peer: peer, Send: true, Count: cnt, Offset: off},
				model.P2PTask{Rank: peer, Peer: r, Send: false, Count: cnt, Offset: off})
		}
		off += cnt
	}
	return tasks
}

// TestPlan is model.SyntheticPlan: the Plan the conformance cases run on.
func TestPlan(n, nch int, permute bool) *model.Plan { return model.SyntheticPlan(n, nch, permute) }

// value is the deterministic input element of rank r at index i, chosen
// so that every reduction is exact in every datatype whatever the order of
// evaluation: small integers, few factors of two for products.
func value(c Case, r int, i int64) int64 {
	h := uint64(r)*0x9e3779b97f4a7c15 ^ uint64(i)*0xbf58476d1ce4e5b9 ^ uint64(c.Count)*0x94d049bb133111eb
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	signed := c.Dtype != model.DtypeUint8 && c.Dtype != model.DtypeUint32 && c.Dtype != model.DtypeUint64
	switch c.Op {
	case model.RedProd:
		v := int64(1)
		if r < 6 && h%3 == 0 {
			v = 2
		}
		if signed && h%5 == 0 {
			v = -v
		}
		return v
	}
	if c.Dtype == model.DtypeInt8 {
		return int64(h%3) - 1
	}
	if signed {
		return int64(h%7) - 3
	}
	return int64(h % 4)
}

func isFloat(d model.Dtype) bool {
	return d == model.DtypeFP16 || d == model.DtypeBF16 || d == model.DtypeFP32 || d == model.DtypeFP64
}

// put stores the exact value v (an integer, or for averages of floats the
// quotient) into b as element i of type d.
func put(d model.Dtype, b []byte, i int64, v int64, f float64) {
	es := int64(d.Size())
	w := b[i*es:]
	switch d {
	case model.DtypeInt8, model.DtypeUint8:
		w[0] = byte(v)
	case model.DtypeInt32, model.DtypeUint32:
		le32(w, uint32(v))
	case model.DtypeInt64, model.DtypeUint64:
		le64(w, uint64(v))
	case model.DtypeFP32:
		le32(w, math.Float32bits(float32(f)))
	case model.DtypeFP64:
		le64(w, math.Float64bits(f))
	case model.DtypeFP16:
		le16(w, refexec.F32ToF16(float32(f)))
	case model.DtypeBF16:
		le16(w, refexec.F32ToBF16(float32(f)))
	}
}

func le16(b []byte, v uint16) { b[0], b[1] = byte(v), byte(v>>8) }
func le32(b []byte, v uint32) {
	for k := 0; k < 4; k++ {
		b[k] = byte(v >> (8 * k))
	}
}
func le64(b []byte, v uint64) {
	for k := 0; k < 8; k++ {
		b[k] = byte(v >> (8 * k))
	}
}

// Inputs are the case's per-rank input buffers.
func Inputs(c Case, p *model.Program) [][]byte {
	in := make([][]byte, c.NRanks)
	for r := range in {
		in[r] = make([]byte, p.InCount*int64(c.Dtype.Size()))
		for i := int64(0); i < p.InCount; i++ {
			v := value(c, r, i)
			put(c.Dtype, in[r], i, v, float64(v))
		}
	}
	return in
}

// reduceExact combines the inputs of all ranks at element index i.
func reduceExact(c Case, i int64) (int64, float64) {
	n := c.NRanks
	acc := value(c, 0, i)
	for r := 1; r < n; r++ {
		v := value(c, r, i)
		switch c.Op {
		case model.RedProd:
			acc *= v
		case model.RedMax:
			acc = max(acc, v)
		case model.RedMin:
			acc = min(acc, v)
		default:
			acc += v
		}
	}
	if c.Op != model.RedAvg {
		return acc, float64(acc)
	}
	if isFloat(c.Dtype) {
		// sum exact in the type, then one division in the type's arithmetic
		switch c.Dtype {
		case model.DtypeFP64:
			return 0, float64(acc) / float64(n)
		default:
			return 0, float64(float32(acc) / float32(n))
		}
	}
	switch c.Dtype {
	case model.DtypeUint8, model.DtypeUint32, model.DtypeUint64:
		return int64(uint64(acc) / uint64(n)), 0
	}
	return acc / int64(n), 0
}

// Expected computes the outputs directly; the second result says which
// ranks' outputs are defined (Reduce defines only the root's).
func Expected(c Case, p *model.Program) ([][]byte, []bool) {
	n := c.NRanks
	es := int64(c.Dtype.Size())
	out := make([][]byte, n)
	defined := make([]bool, n)
	for r := range out {
		out[r] = make([]byte, p.OutCount*es)
		defined[r] = true
	}
	cnt := c.Count
	switch c.Coll {
	case model.CollAllReduce, model.CollReduce:
		for i := int64(0); i < cnt; i++ {
			v, f := reduceExact(c, i)
			for r := 0; r < n; r++ {
				put(c.Dtype, out[r], i, v, f)
			}
		}
		if c.Coll == model.CollReduce {
			for r := range defined {
				defined[r] = r == c.Root
			}
		}
	case model.CollBroadcast:
		for i := int64(0); i < cnt; i++ {
			v := value(c, c.Root, i)
			for r := 0; r < n; r++ {
				put(c.Dtype, out[r], i, v, float64(v))
			}
		}
	case model.CollAllGather:
		for k := 0; k < n; k++ {
			for i := int64(0); i < cnt; i++ {
				v := value(c, k, i)
				for r := 0; r < n; r++ {
					put(c.Dtype, out[r], int64(k)*cnt+i, v, float64(v))
				}
			}
		}
	case model.CollReduceScatter:
		for r := 0; r < n; r++ {
			for i := int64(0); i < cnt; i++ {
				v, f := reduceExact(c, int64(r)*cnt+i)
				put(c.Dtype, out[r], i, v, f)
			}
		}
	case model.CollAlltoAll:
		for r := 0; r < n; r++ {
			for src := 0; src < n; src++ {
				for i := int64(0); i < cnt; i++ {
					v := value(c, src, int64(r)*cnt+i)
					put(c.Dtype, out[r], int64(src)*cnt+i, v, float64(v))
				}
			}
		}
	case model.CollSendRecv:
		off := int64(0)
		for j, s := range c.p2pShifts() {
			m := c.p2pCount(j)
			for r := 0; r < n; r++ {
				src := (r - s + n) % n
				for i := int64(0); i < m; i++ {
					v := value(c, src, off+i)
					put(c.Dtype, out[r], off+i, v, float64(v))
				}
			}
			off += m
		}
	}
	return out, defined
}

// Check generates the case's Program, runs it on exec and compares the
// outputs with the direct computation.
func Check(exec Executor, c Case) error {
	p, err := c.Program()
	if err != nil {
		return fmt.Errorf("%s: generate: %w", c, err)
	}
	return CheckProgram(exec, c, p)
}

// CheckProgram runs an already generated (or modified) Program for case c.
func CheckProgram(exec Executor, c Case, p *model.Program) error {
	in := Inputs(c, p)
	got, err := exec.Execute(p, in)
	if err != nil {
		return fmt.Errorf("%s on %s: %w", c, exec.Name(), err)
	}
	want, defined := Expected(c, p)
	if len(got) != len(want) {
		return fmt.Errorf("%s on %s: %d outputs, want %d", c, exec.Name(), len(got), len(want))
	}
	es := c.Dtype.Size()
	for r := range want {
		if !defined[r] {
			continue
		}
		if len(got[r]) != len(want[r]) {
			return fmt.Errorf("%s on %s: rank %d output has %d bytes, want %d", c, exec.Name(), r, len(got[r]), len(want[r]))
		}
		for i := 0; i < len(want[r]); i += es {
			if string(got[r][i:i+es]) != string(want[r][i:i+es]) {
				return fmt.Errorf("%s on %s: rank %d element %d = % x, want % x", c, exec.Name(), r, i/es, got[r][i:i+es], want[r][i:i+es])
			}
		}
	}
	return nil
}

// Run checks every case (Cases() when none are given) as a subtest.
func Run(t *testing.T, exec Executor, cases ...Case) {
	t.Helper()
	if len(cases) == 0 {
		cases = Cases()
	}
	for _, c := range cases {
		if err := Check(exec, c); err != nil {
			t.Errorf("%v", err)
		}
	}
}

// Combos are the collective, algorithm and protocol triples Programs cover.
func Combos() [][3]int {
	var out [][3]int
	for _, c := range []model.Collective{model.CollAllReduce, model.CollAllGather, model.CollReduceScatter, model.CollBroadcast, model.CollReduce} {
		for _, a := range []model.Algorithm{model.AlgoRing, model.AlgoTree} {
			for p := model.Protocol(0); p < model.NumProtocols; p++ {
				if model.CollAllowed(c, a, p) {
					out = append(out, [3]int{int(c), int(a), int(p)})
				}
			}
		}
	}
	return out
}

// NVLSCombos are the collective and algorithm pairs of NVLS Programs
// (Simple only): NVLS for AllReduce, AllGather and ReduceScatter on one
// node, NVLSTree for AllReduce across nodes.
func NVLSCombos() [][2]int {
	return [][2]int{
		{int(model.CollAllReduce), int(model.AlgoNVLS)},
		{int(model.CollAllGather), int(model.AlgoNVLS)},
		{int(model.CollReduceScatter), int(model.AlgoNVLS)},
		{int(model.CollAllReduce), int(model.AlgoNVLSTree)},
	}
}

// nvlsPairs are the (datatype, reduction) pairs NVLS runs a collective
// with: every pair the NVSwitch reduces (model.NVLSSupported), every
// datatype for AllGather (which reduces nothing).
func nvlsPairs(c model.Collective) [][2]int {
	var out [][2]int
	for d := model.Dtype(0); d < model.NumDtypes; d++ {
		for op := model.RedOp(0); op < model.NumRedOps; op++ {
			if c == model.CollAllGather && op != model.RedSum {
				continue
			}
			if c == model.CollAllGather || model.NVLSSupported(op, d) {
				out = append(out, [2]int{int(d), int(op)})
			}
		}
	}
	return out
}

// nvlsSweep covers every NVLS combination over every (datatype,
// reduction) pair NCCL allows it, rotating through counts and channels:
// NVLS on one node of nodeRanks ranks, NVLSTree on treeRanks ranks (8 per
// node: 12 gives a node of 4 whose heads bound the other's).
func nvlsSweep(nodeRanks, treeRanks []int, counts []int64, channels []int) []Case {
	var out []Case
	k := 0
	for _, cb := range NVLSCombos() {
		c, a := model.Collective(cb[0]), model.Algorithm(cb[1])
		ranks := nodeRanks
		if a == model.AlgoNVLSTree {
			ranks = treeRanks
		}
		pairs := nvlsPairs(c)
		for _, n := range ranks {
			for _, cnt := range counts {
				for _, nch := range channels {
					pr := pairs[k%len(pairs)]
					out = append(out, Case{Coll: c, Algo: a, Proto: model.ProtoSimple, Dtype: model.Dtype(pr[0]), Op: model.RedOp(pr[1]),
						NRanks: n, NChannels: nch, Count: cnt})
					k++
				}
			}
		}
		// every pair once on the fewest ranks, with several loops of
		// chunks per channel, and one large case on the most ranks
		for _, pr := range pairs {
			out = append(out, Case{Coll: c, Algo: a, Proto: model.ProtoSimple, Dtype: model.Dtype(pr[0]), Op: model.RedOp(pr[1]),
				NRanks: ranks[0], NChannels: 2, Count: 30_001})
		}
		out = append(out, Case{Coll: c, Algo: a, Proto: model.ProtoSimple, Dtype: model.DtypeBF16, Op: model.RedSum,
			NRanks: ranks[len(ranks)-1], NChannels: 2, Count: 100_003})
	}
	return out
}

// Cases is DefaultCases, or FullCases when TWINCCL_CONFORMANCE=full.
func Cases() []Case {
	if os.Getenv("TWINCCL_CONFORMANCE") == "full" {
		return FullCases()
	}
	return DefaultCases()
}

func sweep(ranks []int, counts []int64, channels []int, extra func(Case) []Case) []Case {
	var out []Case
	k := 0
	for _, cb := range Combos() {
		for _, n := range ranks {
			for _, cnt := range counts {
				for _, nch := range channels {
					c := Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
						Dtype: model.Dtype(k % model.NumDtypes), Op: model.RedOp((k / 3) % model.NumRedOps),
						NRanks: n, NChannels: nch, Count: cnt, Root: (k * 7) % n, Permute: k%2 == 1}
					k++
					out = append(out, c)
					if extra != nil {
						out = append(out, extra(c)...)
					}
				}
			}
		}
	}
	return out
}

// P2PCombos are the collective, algorithm and protocol triples of the p2p
// path (SendRecv and AlltoAll with Simple and LL).
func P2PCombos() [][3]int {
	var out [][3]int
	for _, c := range []model.Collective{model.CollSendRecv, model.CollAlltoAll} {
		for _, p := range []model.Protocol{model.ProtoSimple, model.ProtoLL} {
			out = append(out, [3]int{int(c), int(model.AlgoRing), int(p)})
		}
	}
	return out
}

// p2pSweep is sweep over P2PCombos, the p2p channels per peer rotating
// through 1, 2, 4 and 8 (at most the p2p channel count).
func p2pSweep(ranks []int, counts []int64, channels []int) []Case {
	var out []Case
	k := 0
	for _, cb := range P2PCombos() {
		for _, n := range ranks {
			for _, cnt := range counts {
				for _, nch := range channels {
					p2p := TestPlan(1, nch, false).P2PChannels
					out = append(out, Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
						Dtype: model.Dtype(k % model.NumDtypes), Op: model.RedSum, NRanks: n, NChannels: nch, Count: cnt,
						PerPeer: min(p2p, 1<<(k%4))})
					k++
				}
			}
		}
	}
	return out
}

// BufferBytes is the memory a case's buffers take over all ranks (input
// and output).
func (c Case) BufferBytes() int64 {
	n, cnt := int64(c.NRanks), c.Count
	in, out := cnt, cnt
	switch c.Coll {
	case model.CollAllGather:
		out = n * cnt
	case model.CollReduceScatter:
		in = n * cnt
	case model.CollAlltoAll:
		in, out = n*cnt, n*cnt
	case model.CollSendRecv:
		in = 0
		for j := range c.p2pShifts() {
			in += c.p2pCount(j)
		}
		out = in
	}
	return n * (in + out) * int64(c.Dtype.Size())
}

// DefaultCases is the fast subset: every collective x algorithm x protocol
// over ranks {1,2,3,5,8,16}, counts {0,1,7,1021,4099} and channels
// {1,2,3,8} with datatypes and reductions rotating; every datatype x
// reduction on 5 ranks; a few multi-loop sizes; and SendRecv and AlltoAll
// (Simple, LL) over ranks {1,2,3,5,8,12,16,24} (12 and 24: uneven nodes of
// 8), the same counts and channels, plus multi-part, multi-chunk sizes.
func DefaultCases() []Case {
	out := sweep([]int{1, 2, 3, 5, 8, 16}, []int64{0, 1, 7, 1021, 4099}, []int{1, 2, 3, 8}, nil)
	for _, cb := range Combos() {
		for d := model.Dtype(0); d < model.NumDtypes; d++ {
			for op := model.RedOp(0); op < model.NumRedOps; op++ {
				out = append(out, Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
					Dtype: d, Op: op, NRanks: 5, NChannels: 2, Count: 997, Root: 3, Permute: true})
			}
		}
		// Several loops of chunks on one channel (LL and LL128 chunks are
		// small; Simple needs megabytes).
		big := int64(300_001)
		if model.Protocol(cb[2]) == model.ProtoSimple {
			big = 1<<20 + 12345
		}
		out = append(out, Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
			Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: 3, NChannels: 2, Count: big, Root: 1})
	}
	out = append(out, p2pSweep([]int{1, 2, 3, 5, 8, 12, 16, 24}, []int64{0, 1, 7, 1021, 4099}, []int{1, 2, 3, 8})...)
	out = append(out, nvlsSweep([]int{3, 2, 8}, []int{12, 16}, []int64{0, 1, 7, 4099, 65537}, []int{1, 3, 16})...)
	for _, cb := range P2PCombos() {
		for _, n := range []int{3, 12} {
			// Several parts, several chunks per part (512 KiB Simple chunks
			// on one node, 128 KiB on two; 32 KiB LL chunks).
			out = append(out, Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
				Dtype: model.DtypeFP32, Op: model.RedSum, NRanks: n, NChannels: 8, Count: 300_001, PerPeer: 4})
		}
	}
	return out
}

// FullCaseBytes bounds the buffers (all ranks, input and output) of a
// FullCases case: larger combinations of rank count, count and datatype
// are left out so that the sweep fits in minutes on two cores. Every
// count still runs on the rank counts that fit.
const FullCaseBytes = 24 << 20

// FullCases is the long sweep: ranks 1-64 with non-powers of two, counts up
// to a million elements, 1-32 channels, for every collective and for
// SendRecv and AlltoAll, without the cases above FullCaseBytes.
func FullCases() []Case {
	all := sweep([]int{1, 2, 3, 4, 5, 7, 8, 13, 16, 31, 32, 64},
		[]int64{0, 1, 2, 3, 17, 97, 1021, 4099, 65537, 1<<20 + 3},
		[]int{1, 2, 3, 4, 8, 16, 32}, nil)
	all = append(all, p2pSweep([]int{1, 2, 3, 4, 5, 7, 8, 12, 13, 16, 24, 31, 32, 64},
		[]int64{0, 1, 2, 3, 17, 97, 1021, 4099, 65537},
		[]int{1, 2, 4, 8, 16, 32})...)
	all = append(all, nvlsSweep([]int{3, 2, 4, 5, 7, 8, 13, 32}, []int{12, 9, 16, 24, 40},
		[]int64{0, 1, 2, 3, 17, 97, 1021, 4099, 65537, 1<<20 + 3}, []int{1, 2, 3, 16, 32})...)
	var out []Case
	for _, c := range all {
		if c.BufferBytes() <= FullCaseBytes {
			out = append(out, c)
		}
	}
	return out
}
