package model

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Binary Program encoding, little-endian, fixed-width records so that a
// GPU interpreter can index it directly:
//
//	header  88 bytes: "TWPG", version u16 (1), reserved u16,
//	        coll, algo, proto, dtype, op u8, 3 reserved bytes,
//	        root, nRanks, nChannels, stepBytes, credits u32,
//	        slicesPerChunk, stepsPerSlice u16,
//	        count, inCount, outCount u64,
//	        nConns, nLanes, nPeers, threads u32, nOps u64
//	conns   12 bytes each: channel, from, to u32
//	lanes   32 bytes each: rank, channel, peerStart u32, nRecv, nSend u16,
//	        opStart, nOps u64 (peers and ops of lane i follow those of lane i-1)
//	peers    4 bytes each: connection index (a lane's receive peers, then its send peers)
//	ops     32 bytes each: kind, flags u8, reserved u16, n i32, recvStep,
//	        sendStep u32, inOff, outOff i64
const (
	progMagic      = "TWPG"
	progVersion    = 1
	progHeaderSize = 88
	progConnSize   = 12
	progLaneSize   = 32
	progPeerSize   = 4
	progOpSize     = 32
)

// EncodedSize is the length of p's binary encoding.
func (p *Program) EncodedSize() int64 {
	peers := 0
	for i := range p.Lanes {
		peers += len(p.Lanes[i].Recv) + len(p.Lanes[i].Send)
	}
	return progHeaderSize + int64(len(p.Conns))*progConnSize + int64(len(p.Lanes))*progLaneSize +
		int64(peers)*progPeerSize + int64(p.NumOps())*progOpSize
}

// MarshalBinary encodes p in the binary form above.
func (p *Program) MarshalBinary() ([]byte, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("encode program: %w", err)
	}
	for i := range p.Lanes {
		if len(p.Lanes[i].Recv) > math.MaxUint16 || len(p.Lanes[i].Send) > math.MaxUint16 {
			return nil, fmt.Errorf("encode program: lane %d has too many peers", i)
		}
	}
	// The binary form feeds the GPU interpreter (kernels/interp.cu),
	// whose connections are point to point: an NVLS group needs multicast
	// objects and multimem instructions it does not have.
	if err := p.PointToPoint(); err != nil {
		return nil, fmt.Errorf("encode program: binary Programs carry point-to-point connections only: %w", err)
	}
	le := binary.LittleEndian
	b := make([]byte, 0, p.EncodedSize())
	b = append(b, progMagic...)
	b = le.AppendUint16(b, progVersion)
	b = le.AppendUint16(b, 0)
	b = append(b, byte(p.Coll), byte(p.Algo), byte(p.Proto), byte(p.Dtype), byte(p.Op), 0, 0, 0)
	for _, v := range []int{p.Root, p.NRanks, p.NChannels, p.StepBytes, p.Credits} {
		b = le.AppendUint32(b, uint32(v))
	}
	b = le.AppendUint16(b, uint16(p.SlicesPerChunk))
	b = le.AppendUint16(b, uint16(p.StepsPerSlice))
	b = le.AppendUint64(b, uint64(p.Count))
	b = le.AppendUint64(b, uint64(p.InCount))
	b = le.AppendUint64(b, uint64(p.OutCount))
	peers := 0
	for i := range p.Lanes {
		peers += len(p.Lanes[i].Recv) + len(p.Lanes[i].Send)
	}
	b = le.AppendUint32(b, uint32(len(p.Conns)))
	b = le.AppendUint32(b, uint32(len(p.Lanes)))
	b = le.AppendUint32(b, uint32(peers))
	b = le.AppendUint32(b, uint32(p.Threads))
	b = le.AppendUint64(b, uint64(p.NumOps()))
	for _, c := range p.Conns {
		b = le.AppendUint32(b, uint32(c.Channel))
		b = le.AppendUint32(b, uint32(c.From))
		b = le.AppendUint32(b, uint32(c.To))
	}
	peerAt, opAt := 0, 0
	for i := range p.Lanes {
		l := &p.Lanes[i]
		b = le.AppendUint32(b, uint32(l.Rank))
		b = le.AppendUint32(b, uint32(l.Channel))
		b = le.AppendUint32(b, uint32(peerAt))
		b = le.AppendUint16(b, uint16(len(l.Recv)))
		b = le.AppendUint16(b, uint16(len(l.Send)))
		b = le.AppendUint64(b, uint64(opAt))
		b = le.AppendUint64(b, uint64(len(l.Ops)))
		peerAt += len(l.Recv) + len(l.Send)
		opAt += len(l.Ops)
	}
	for i := range p.Lanes {
		for _, c := range p.Lanes[i].Recv {
			b = le.AppendUint32(b, uint32(c))
		}
		for _, c := range p.Lanes[i].Send {
			b = le.AppendUint32(b, uint32(c))
		}
	}
	for i := range p.Lanes {
		for _, op := range p.Lanes[i].Ops {
			b = append(b, byte(op.Kind), op.Flags, 0, 0)
			b = le.AppendUint32(b, uint32(op.N))
			b = le.AppendUint32(b, op.RecvStep)
			b = le.AppendUint32(b, op.SendStep)
			b = le.AppendUint64(b, uint64(op.InOff))
			b = le.AppendUint64(b, uint64(op.OutOff))
		}
	}
	return b, nil
}

// DecodeProgram reads the binary form, checking every count against the
// data length before allocating and validating the result.
func DecodeProgram(b []byte) (*Program, error) {
	le := binary.LittleEndian
	if len(b) < progHeaderSize {
		return nil, fmt.Errorf("decode program: %d bytes, shorter than the %d-byte header", len(b), progHeaderSize)
	}
	if string(b[:4]) != progMagic {
		return nil, fmt.Errorf("decode program: bad magic %q", b[:4])
	}
	if v := le.Uint16(b[4:]); v != progVersion {
		return nil, fmt.Errorf("decode program: unsupported version %d", v)
	}
	p := &Program{Coll: Collective(b[8]), Algo: Algorithm(b[9]), Proto: Protocol(b[10]), Dtype: Dtype(b[11]), Op: RedOp(b[12])}
	u32 := func(o int) int { return int(le.Uint32(b[o:])) }
	p.Root, p.NRanks, p.NChannels, p.StepBytes, p.Credits = u32(16), u32(20), u32(24), u32(28), u32(32)
	p.SlicesPerChunk, p.StepsPerSlice = int(le.Uint16(b[36:])), int(le.Uint16(b[38:]))
	p.Count, p.InCount, p.OutCount = int64(le.Uint64(b[40:])), int64(le.Uint64(b[48:])), int64(le.Uint64(b[56:]))
	nConns, nLanes, nPeers := uint64(le.Uint32(b[64:])), uint64(le.Uint32(b[68:])), uint64(le.Uint32(b[72:]))
	if t := le.Uint32(b[76:]); t <= MaxProgThreads {
		p.Threads = int(t)
	} else {
		return nil, fmt.Errorf("decode program: %d threads per block, more than %d", t, MaxProgThreads)
	}
	nOps := le.Uint64(b[80:])
	rest := uint64(len(b) - progHeaderSize)
	if nConns > rest/progConnSize || nLanes > rest/progLaneSize || nPeers > rest/progPeerSize || nOps > rest/progOpSize {
		return nil, fmt.Errorf("decode program: counts (%d connections, %d lanes, %d peers, %d ops) exceed %d bytes", nConns, nLanes, nPeers, nOps, len(b))
	}
	want := nConns*progConnSize + nLanes*progLaneSize + nPeers*progPeerSize + nOps*progOpSize
	if want != rest {
		return nil, fmt.Errorf("decode program: body has %d bytes, counts need %d", rest, want)
	}
	o := progHeaderSize
	p.Conns = make([]ProgConn, nConns)
	for i := range p.Conns {
		p.Conns[i] = ProgConn{Channel: int32(le.Uint32(b[o:])), From: int32(le.Uint32(b[o+4:])), To: int32(le.Uint32(b[o+8:]))}
		o += progConnSize
	}
	p.Lanes = make([]ProgLane, nLanes)
	laneAt := o
	peersAt := o + int(nLanes)*progLaneSize
	opsAt := peersAt + int(nPeers)*progPeerSize
	var peerNext, opNext uint64
	for i := range p.Lanes {
		lb := b[laneAt+i*progLaneSize:]
		l := &p.Lanes[i]
		l.Rank, l.Channel = int32(le.Uint32(lb)), int32(le.Uint32(lb[4:]))
		peerStart, nr, ns := uint64(le.Uint32(lb[8:])), uint64(le.Uint16(lb[12:])), uint64(le.Uint16(lb[14:]))
		opStart, no := le.Uint64(lb[16:]), le.Uint64(lb[24:])
		if peerStart != peerNext || peerStart+nr+ns > nPeers {
			return nil, fmt.Errorf("decode program: lane %d peers [%d,+%d) out of order or range", i, peerStart, nr+ns)
		}
		if opStart != opNext || no > nOps-opStart {
			return nil, fmt.Errorf("decode program: lane %d ops [%d,+%d) out of order or range", i, opStart, no)
		}
		peerNext += nr + ns
		opNext += no
		read := func(k uint64) []int32 {
			if k == 0 {
				return nil
			}
			out := make([]int32, k)
			for j := range out {
				out[j] = int32(le.Uint32(b[peersAt+int(peerStart)*progPeerSize:]))
				peerStart++
			}
			return out
		}
		l.Recv = read(nr)
		l.Send = read(ns)
		if no > 0 {
			l.Ops = make([]ProgOp, no)
		}
		for j := range l.Ops {
			ob := b[opsAt+int(opStart+uint64(j))*progOpSize:]
			l.Ops[j] = ProgOp{Kind: PrimKind(ob[0]), Flags: ob[1], N: int32(le.Uint32(ob[4:])),
				RecvStep: le.Uint32(ob[8:]), SendStep: le.Uint32(ob[12:]),
				InOff: int64(le.Uint64(ob[16:])), OutOff: int64(le.Uint64(ob[24:]))}
		}
	}
	if peerNext != nPeers || opNext != nOps {
		return nil, fmt.Errorf("decode program: lanes use %d peers and %d ops of %d and %d", peerNext, opNext, nPeers, nOps)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("decode program: %w", err)
	}
	return p, nil
}

// Text form of a Program, one line per primitive so that users can write
// custom algorithms by hand. Blank lines and '#' comments are ignored. The
// first line is the header; "conn" lines number connections from 0 in
// order; a "lane" line starts a lane whose ops follow it:
//
//	program coll=AllReduce algo=Ring proto=Simple dtype=fp32 op=sum root=0 ranks=2 channels=1 count=8 in=8 out=8 [stepbytes=524288 credits=8 slices=2 steps=2 threads=544]
//	conn ch=0 from=0 to=1 [kind=p2p|nvlsReduce|nvlsBcast]
//	conn ch=0 from=1 to=0
//	lane rank=0 ch=0 recv=1 send=0
//	send n=4 in=4 out=4 [rs=0 ss=0] [flags=post|direct|fromout]
//	recvReduceCopySend n=4 in=0 out=0 flags=post
//	recv n=4 out=4
//
// recv= and send= list connection indices separated by commas (empty for
// none). An op without rs=/ss= continues its lane's step numbering: every
// op that receives (sends) advances the receive (send) step by
// slices x steps on Simple and by one on LL and LL128. stepbytes, credits,
// slices and steps default to NCCL's values for the protocol (slices=2
// steps=2 only matter for Simple; the defaults are 1 and 1); threads
// (NCCL's block size, Program.Threads) to 0, not known.

// WriteText writes p in the text form.
func (p *Program) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# twinccl program: %d ranks, %d channels, %d lanes, %d ops\n", p.NRanks, p.NChannels, len(p.Lanes), p.NumOps())
	fmt.Fprintf(bw, "program coll=%s algo=%s proto=%s dtype=%s op=%s root=%d ranks=%d channels=%d count=%d in=%d out=%d stepbytes=%d credits=%d slices=%d steps=%d",
		p.Coll, p.Algo, p.Proto, p.Dtype, p.Op, p.Root, p.NRanks, p.NChannels, p.Count, p.InCount, p.OutCount, p.StepBytes, p.Credits, p.SlicesPerChunk, p.StepsPerSlice)
	if p.Threads != 0 {
		fmt.Fprintf(bw, " threads=%d", p.Threads)
	}
	bw.WriteByte('\n')
	for _, c := range p.Conns {
		fmt.Fprintf(bw, "conn ch=%d from=%d to=%d", c.Channel, c.From, c.To)
		if c.Kind != ConnP2P {
			fmt.Fprintf(bw, " kind=%s", c.Kind)
		}
		bw.WriteByte('\n')
	}
	list := func(cs []int32) string {
		s := make([]string, len(cs))
		for i, c := range cs {
			s[i] = strconv.Itoa(int(c))
		}
		return strings.Join(s, ",")
	}
	for i := range p.Lanes {
		l := &p.Lanes[i]
		fmt.Fprintf(bw, "lane rank=%d ch=%d recv=%s send=%s\n", l.Rank, l.Channel, list(l.Recv), list(l.Send))
		for _, op := range l.Ops {
			fmt.Fprintf(bw, "%s n=%d in=%d out=%d rs=%d ss=%d", op.Kind, op.N, op.InOff, op.OutOff, op.RecvStep, op.SendStep)
			if op.Flags != 0 {
				var f []string
				if op.Flags&PrimPostOp != 0 {
					f = append(f, "post")
				}
				if op.Flags&PrimDirect != 0 {
					f = append(f, "direct")
				}
				if op.Flags&PrimFromOutput != 0 {
					f = append(f, "fromout")
				}
				fmt.Fprintf(bw, " flags=%s", strings.Join(f, "|"))
			}
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// ParseProgramText reads the text form (see WriteText) and validates it.
// Errors name the line.
func ParseProgramText(r io.Reader) (*Program, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var p *Program
	var lane *ProgLane
	line := 0
	fail := func(format string, args ...any) error {
		return fmt.Errorf("program text line %d: %s", line, fmt.Sprintf(format, args...))
	}
	for sc.Scan() {
		line++
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		kv := map[string]string{}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fail("%q is not key=value", f)
			}
			if _, dup := kv[k]; dup {
				return nil, fail("key %q repeated", k)
			}
			kv[k] = v
		}
		num := func(k string, def int64, lo, hi int64) (int64, error) {
			v, ok := kv[k]
			delete(kv, k)
			if !ok {
				if def == math.MinInt64 {
					return 0, fail("missing %s=", k)
				}
				return def, nil
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return 0, fail("%s=%q is not an integer in [%d, %d]", k, v, lo, hi)
			}
			return n, nil
		}
		const req = math.MinInt64
		var err error
		switch fields[0] {
		case "program":
			if p != nil {
				return nil, fail("second program header")
			}
			p = &Program{}
			if p.Coll, err = ParseCollective(kv["coll"]); err != nil {
				return nil, fail("%v", err)
			}
			if p.Algo, err = ParseAlgorithm(kv["algo"]); err != nil {
				return nil, fail("%v", err)
			}
			if p.Proto, err = ParseProtocol(kv["proto"]); err != nil {
				return nil, fail("%v", err)
			}
			if p.Dtype, err = ParseDtype(kv["dtype"]); err != nil {
				return nil, fail("%v", err)
			}
			if p.Op, err = ParseRedOp(kv["op"]); err != nil {
				return nil, fail("%v", err)
			}
			for _, k := range []string{"coll", "algo", "proto", "dtype", "op"} {
				delete(kv, k)
			}
			var v [11]int64
			spec := []struct {
				k      string
				def    int64
				lo, hi int64
			}{{"root", 0, 0, 1 << 20}, {"ranks", req, 1, 1 << 20}, {"channels", req, 0, 1 << 12}, {"count", req, 0, 1 << 40},
				{"in", req, 0, 1 << 40}, {"out", req, 0, 1 << 40}, {"stepbytes", int64(ProtoStepBytes(p.Proto)), 1, 1 << 30},
				{"credits", ProgSlots, 1, 1 << 16}, {"slices", 1, 1, ProgSlots}, {"steps", 1, 1, ProgSlots}, {"threads", 0, 0, MaxProgThreads}}
			for i, s := range spec {
				if v[i], err = num(s.k, s.def, s.lo, s.hi); err != nil {
					return nil, err
				}
			}
			p.Root, p.NRanks, p.NChannels, p.Count = int(v[0]), int(v[1]), int(v[2]), v[3]
			p.InCount, p.OutCount, p.StepBytes, p.Credits = v[4], v[5], int(v[6]), int(v[7])
			p.SlicesPerChunk, p.StepsPerSlice, p.Threads = int(v[8]), int(v[9]), int(v[10])
		case "conn":
			if p == nil {
				return nil, fail("conn before the program header")
			}
			var v [3]int64
			for i, k := range []string{"ch", "from", "to"} {
				if v[i], err = num(k, req, 0, 1<<20); err != nil {
					return nil, err
				}
			}
			if len(p.Conns) >= 1<<24 {
				return nil, fail("too many connections")
			}
			kind := ConnP2P
			if k, ok := kv["kind"]; ok {
				delete(kv, "kind")
				i := lookupName(connKindNames[:], k)
				if i < 0 {
					return nil, fail("kind=%q is not a connection kind (%s)", k, strings.Join(connKindNames[:], ", "))
				}
				kind = ConnKind(i)
			}
			p.Conns = append(p.Conns, ProgConn{Channel: int32(v[0]), From: int32(v[1]), To: int32(v[2]), Kind: kind})
		case "lane":
			if p == nil {
				return nil, fail("lane before the program header")
			}
			var v [2]int64
			for i, k := range []string{"rank", "ch"} {
				if v[i], err = num(k, req, 0, 1<<20); err != nil {
					return nil, err
				}
			}
			l := ProgLane{Rank: int32(v[0]), Channel: int32(v[1])}
			for _, k := range []string{"recv", "send"} {
				s, ok := kv[k]
				delete(kv, k)
				if !ok || s == "" || s == "-" {
					continue
				}
				var cs []int32
				for _, x := range strings.Split(s, ",") {
					c, err := strconv.ParseInt(x, 10, 32)
					if err != nil || c < 0 {
						return nil, fail("%s=%q: bad connection index %q", k, s, x)
					}
					cs = append(cs, int32(c))
				}
				if k == "recv" {
					l.Recv = cs
				} else {
					l.Send = cs
				}
			}
			p.Lanes = append(p.Lanes, l)
			lane = &p.Lanes[len(p.Lanes)-1]
		default:
			kind, err := ParsePrimKind(fields[0])
			if err != nil {
				return nil, fail("%v", err)
			}
			if lane == nil {
				return nil, fail("%s before any lane", kind)
			}
			op := ProgOp{Kind: kind}
			var v [3]int64
			for i, s := range []struct {
				k   string
				def int64
			}{{"n", req}, {"in", 0}, {"out", 0}} {
				if v[i], err = num(s.k, s.def, 0, math.MaxInt64/16); err != nil {
					return nil, err
				}
			}
			if v[0] > math.MaxInt32 {
				return nil, fail("n=%d too large", v[0])
			}
			op.N, op.InOff, op.OutOff = int32(v[0]), v[1], v[2]
			// Default steps continue the lane's numbering.
			if k := len(lane.Ops); k > 0 {
				last := lane.Ops[k-1]
				per := uint32(1)
				if p.Proto == ProtoSimple {
					per = uint32(p.SlicesPerChunk * p.StepsPerSlice)
				}
				op.RecvStep, op.SendStep = last.RecvStep, last.SendStep
				if last.Kind.Receives() {
					op.RecvStep += per
				}
				if last.Kind.Sends() {
					op.SendStep += per
				}
			}
			rs, err := num("rs", int64(op.RecvStep), 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			ss, err := num("ss", int64(op.SendStep), 0, math.MaxUint32)
			if err != nil {
				return nil, err
			}
			op.RecvStep, op.SendStep = uint32(rs), uint32(ss)
			if f, ok := kv["flags"]; ok {
				delete(kv, "flags")
				for _, x := range strings.Split(f, "|") {
					switch x {
					case "post":
						op.Flags |= PrimPostOp
					case "direct":
						op.Flags |= PrimDirect
					case "fromout":
						op.Flags |= PrimFromOutput
					case "":
					default:
						return nil, fail("unknown flag %q", x)
					}
				}
			}
			if len(lane.Ops) >= 1<<26 {
				return nil, fail("too many ops in one lane")
			}
			lane.Ops = append(lane.Ops, op)
		}
		if len(kv) > 0 {
			keys := make([]string, 0, len(kv))
			for k := range kv {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return nil, fail("unknown key %q", keys[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("program text line %d: %w", line+1, err)
	}
	if p == nil {
		return nil, fmt.Errorf("program text: no program header")
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("program text: %w", err)
	}
	return p, nil
}
