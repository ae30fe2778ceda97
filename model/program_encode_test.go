package model_test

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/twinccl/twinccl/model"
	"github.com/twinccl/twinccl/model/conformance"
	"github.com/twinccl/twinccl/model/refexec"
)

func encodeCases() []conformance.Case {
	var out []conformance.Case
	for i, cb := range conformance.Combos() {
		out = append(out, conformance.Case{Coll: model.Collective(cb[0]), Algo: model.Algorithm(cb[1]), Proto: model.Protocol(cb[2]),
			Dtype: model.Dtype(i % model.NumDtypes), Op: model.RedOp(i % model.NumRedOps), NRanks: 2 + i%5, NChannels: 1 + i%3,
			Count: int64(97 + 1000*i), Root: 1, Permute: true})
	}
	return out
}

// caseThreads is a block size for a case's Program (NCCL's Program.Threads):
// 0 (not known) or a multiple of a warp, varying with the case.
func caseThreads(c conformance.Case) int { return int(c.Count%7) * 96 }

func TestProgramBinaryRoundTrip(t *testing.T) {
	for _, c := range encodeCases() {
		p, err := c.Program()
		if err != nil {
			t.Fatal(err)
		}
		p.Threads = caseThreads(c) // carried in the header and on the text form's header line
		b, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if int64(len(b)) != p.EncodedSize() {
			t.Fatalf("%s: %d bytes, EncodedSize %d", c, len(b), p.EncodedSize())
		}
		q, err := model.DecodeProgram(b)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: binary round trip differs", c)
		}
		// Every truncation is an error, never a panic.
		for _, n := range []int{0, 3, 87, 88, len(b) - 1} {
			if n < len(b) {
				if _, err := model.DecodeProgram(b[:n]); err == nil {
					t.Fatalf("%s: truncated to %d bytes decoded", c, n)
				}
			}
		}
	}
}

func TestProgramTextRoundTrip(t *testing.T) {
	for _, c := range encodeCases() {
		p, err := c.Program()
		if err != nil {
			t.Fatal(err)
		}
		p.Threads = caseThreads(c) // carried in the header and on the text form's header line
		var buf bytes.Buffer
		if err := p.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := model.ParseProgramText(&buf)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if !reflect.DeepEqual(p, q) {
			t.Fatalf("%s: text round trip differs", c)
		}
	}
}

// A hand-written 2-rank ring AllReduce of 8 floats: each rank owns half,
// reduces the half it receives, and sends the result back. Steps are left
// to the default numbering. It runs through the reference interpreter and
// the conformance comparison like a generated Program.
const customAllReduce = `
# custom 2-rank AllReduce, one chunk of 4 floats per rank
program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8 slices=1 steps=1
conn ch=0 from=0 to=1
conn ch=0 from=1 to=0
lane rank=0 ch=0 recv=1 send=0
send n=4 in=4 out=4              # my copy of chunk 1 goes to its owner
recvReduceCopySend n=4 in=0 out=0 flags=post
recv n=4 out=4
lane rank=1 ch=0 recv=0 send=1
send n=4 in=0 out=0
recvReduceCopySend n=4 in=4 out=4 flags=post
recv n=4 out=0
`

func TestCustomTextProgram(t *testing.T) {
	p, err := model.ParseProgramText(strings.NewReader(customAllReduce))
	if err != nil {
		t.Fatal(err)
	}
	if p.Lanes[0].Ops[1].SendStep != 1 || p.Lanes[0].Ops[2].RecvStep != 1 {
		t.Fatalf("default step numbering: %+v", p.Lanes[0].Ops)
	}
	c := conformance.Case{Coll: model.CollAllReduce, Algo: model.AlgoRing, Proto: model.ProtoSimple, Dtype: model.DtypeFP32,
		Op: model.RedSum, NRanks: 2, NChannels: 1, Count: 8}
	if err := conformance.CheckProgram(refexec.Executor{}, c, p); err != nil {
		t.Fatal(err)
	}
	// The same program with rank 1's final receive forgotten is caught.
	broken := strings.Replace(customAllReduce, "recv n=4 out=0\n", "", 1)
	// Parsing refuses it already: the connection's sender ends a step
	// after its receiver.
	q, err := model.ParseProgramText(strings.NewReader(broken))
	if err == nil || !strings.Contains(err.Error(), "ends at step") {
		t.Fatalf("missing receive not detected: %v (program %v)", err, q != nil)
	}
}

func TestProgramTextErrors(t *testing.T) {
	for _, bad := range []string{
		"",
		"conn ch=0 from=0 to=1",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp99 op=sum ranks=2 channels=1 count=8 in=8 out=8",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8 bogus=1",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8 threads=2048",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8\nsend n=1",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8\nconn ch=0 from=0 to=5",
		"program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum ranks=2 channels=1 count=8 in=8 out=8\nconn ch=0 from=0 to=1\nlane rank=0 ch=0 send=0\nsend n=9",
	} {
		if _, err := model.ParseProgramText(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func FuzzDecodeProgram(f *testing.F) {
	for _, c := range encodeCases()[:4] {
		c.Count = 33
		p, err := c.Program()
		if err != nil {
			f.Fatal(err)
		}
		b, err := p.MarshalBinary()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("TWPG"))
	f.Add(make([]byte, 88))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := model.DecodeProgram(b)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		again, err := p.MarshalBinary()
		if err != nil {
			t.Fatalf("decoded program does not encode: %v", err)
		}
		if !bytes.Equal(again, b) {
			// Reserved bytes may differ; the decoded programs must agree.
			q, err := model.DecodeProgram(again)
			if err != nil || !reflect.DeepEqual(p, q) {
				t.Fatalf("re-encoding changed the program")
			}
		}
	})
}

func FuzzParseProgramText(f *testing.F) {
	f.Add(customAllReduce)
	f.Add("program coll=Broadcast algo=Ring proto=LL dtype=int8 op=max ranks=1 channels=1 count=0 in=0 out=0")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := model.ParseProgramText(strings.NewReader(s))
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := p.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		q, err := model.ParseProgramText(&buf)
		if err != nil || !reflect.DeepEqual(p, q) {
			t.Fatalf("text round trip failed: %v", err)
		}
	})
}
