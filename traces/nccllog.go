package traces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twinccl/twinccl/model"
)

// Limits of the NCCL log importer: a log may claim anything, memory stays
// proportional to the log's size and bounded by these.
const (
	// MaxLogRanks bounds the rank numbers accepted in a log.
	MaxLogRanks = 1 << 16
	// MaxLogChannels bounds the channel numbers accepted in a log.
	MaxLogChannels = 128
	// MaxLogLineBytes bounds one log line; longer lines are skipped with a warning.
	MaxLogLineBytes = 1 << 20
	// maxLogWarnings bounds the warnings kept.
	maxLogWarnings = 100
	// maxLogChoices bounds the distinct per-call choices kept.
	maxLogChoices = 1 << 16
	// maxLogGraphs bounds the graph search results kept.
	maxLogGraphs = 64
)

// Unknown marks a ring or tree neighbour the log does not mention.
const Unknown = -2

// NCCLLog is what an NCCL_DEBUG=INFO log says about a communicator: the
// rings, trees and tuning table NCCL chose and the algorithm/protocol of
// each logged call. Fields the log does not show are zero, nil or Unknown.
//
// A log holding several communicators is read as one: the first value seen
// for a rank and channel wins and conflicts are reported in Warnings.
type NCCLLog struct {
	Name        string // file name, for messages
	Version     string // NCCL version, "2.28.9"
	VersionFull string // as printed, "2.28.9+cuda13.0"
	NRanks      int    // communicator size (from init lines, else highest rank seen + 1)
	NNodes      int    // from "nNodes" lines, else distinct hosts; 0 if unknown
	Ranks       []LogRank
	NChannels   int // highest ring or tree channel seen + 1
	// Rings[c] is channel c's ring order starting at rank 0, from the
	// "Channel c/N : ..." lines of rank 0 or, without them, rebuilt from the
	// per-rank "Ring" lines; nil where the log does not give the whole ring.
	Rings [][]int
	// Ring[r][c] and Tree[r][c] are rank r's neighbours on channel c (the
	// "Ring" and "Tree"/"Trees" lines); Ring[r] is nil for a rank that
	// printed none; entries for channels it did not print are Unknown.
	Ring [][]model.RingLinks
	Tree [][]model.TreeLinks
	// Graphs are the graph search results ("Pattern ..." and channel lines)
	// printed by the first rank that printed any.
	Graphs []LogGraph
	// Tuning is the tuning table (latency µs, bandwidth GB/s per collective,
	// algorithm and protocol), as printed by rank 0, in table order.
	Tuning     []TuningEntry
	MaxThreads []MaxThreadsEntry
	// Choices count the logged per-call decisions ("AllReduce: 8 Bytes ->
	// Algo RING proto LL channel{Lo..Hi}={0..0}"), sorted.
	Choices  []CallChoice
	Warnings []string
}

// LogRank is what the log says about one rank's process.
type LogRank struct {
	Rank      int
	Host      string // from the "host:pid:tid [dev]" line prefix
	PID       int
	CudaDev   int    // -1 if unknown
	BusID     string // as printed ("70", "0000:07:00.0"), "" if unknown
	LocalRank int    // -1 if unknown
}

// LogGraph is one graph search result line and its channels.
type LogGraph struct {
	Pattern      int
	CrossNic     int
	NChannels    int
	BWIntra      float64
	BWInter      float64
	TypeIntra    string
	TypeInter    string
	SameChannels int
	Channels     [][]string // per channel: "NET/0", "GPU/0-60", ...
}

// TuningEntry is one cell of NCCL's tuning table.
type TuningEntry struct {
	Coll      model.Collective
	Algo      model.Algorithm
	Proto     model.Protocol
	Latency   float64 // µs
	Bandwidth float64 // GB/s
}

// MaxThreadsEntry is the "Max NThreads" row of the tuning table.
type MaxThreadsEntry struct {
	Algo    model.Algorithm
	Proto   model.Protocol
	Threads int
}

// CallChoice is one distinct per-call decision and how often it was logged.
type CallChoice struct {
	Coll      model.Collective
	Bytes     int64
	Algo      model.Algorithm
	Proto     model.Protocol
	ChannelLo int // -1 if not logged
	ChannelHi int
	Calls     int
}

// ReadNCCLLogFile parses the NCCL log at path.
func ReadNCCLLogFile(path string) (*NCCLLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseNCCLLog(f, path)
}

// ParseNCCLLog reads an NCCL_DEBUG=INFO log (any NCCL version from 2.12 on,
// with or without "host:pid:tid" prefixes, ranks interleaved). It fails only
// on read errors and on logs with nothing NCCL in them; lines it cannot use
// are skipped, suspicious ones noted in Warnings.
func ParseNCCLLog(r io.Reader, name string) (*NCCLLog, error) {
	p := &logParser{
		log:      &NCCLLog{Name: name},
		ring:     map[[2]int]model.RingLinks{},
		tree:     map[[2]int]model.TreeLinks{},
		ranks:    map[int]*LogRank{},
		tune:     map[string]*tuneState{},
		choices:  map[CallChoice]int{},
		tuneSet:  map[[3]int]bool{},
		chanRing: map[int][]int{},
		maxRank:  -1,
		maxChan:  -1,
		graph:    -1,
	}
	br := bufio.NewReaderSize(r, 64<<10)
	var long []byte
	tooLong := false
	lineNo := 0
	sawNCCL := false
	for {
		chunk, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			if !tooLong {
				if len(long)+len(chunk) > MaxLogLineBytes {
					tooLong, long = true, long[:0]
				} else {
					long = append(long, chunk...)
				}
			}
			continue
		}
		if len(chunk) > 0 || len(long) > 0 || tooLong {
			lineNo++
			if tooLong {
				p.warn(lineNo, "line longer than %d bytes skipped", MaxLogLineBytes)
			} else {
				line := chunk
				if len(long) > 0 {
					long = append(long, chunk...)
					line = long
				}
				if bytes.Contains(line, []byte("NCCL")) {
					sawNCCL = true
				}
				p.line(lineNo, string(bytes.TrimRight(line, "\r\n")))
			}
			long, tooLong = long[:0], false
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: line %d: %w", name, lineNo+1, err)
		}
	}
	if !sawNCCL {
		return nil, fmt.Errorf("%s: no NCCL log lines found", name)
	}
	p.finish()
	return p.log, nil
}

type tuneState struct {
	algos  []model.Algorithm
	protos []model.Protocol
	line   int
}

type logParser struct {
	log      *NCCLLog
	ring     map[[2]int]model.RingLinks // (rank, channel)
	tree     map[[2]int]model.TreeLinks
	chanRing map[int][]int // channel -> ring order from "Channel" lines
	ranks    map[int]*LogRank
	tune     map[string]*tuneState // by line prefix
	tuneSet  map[[3]int]bool
	tuneSrc  string // prefix of the first table printed
	choices  map[CallChoice]int
	graphSrc string // prefix of the rank whose graphs are kept
	graph    int    // index in Graphs of the graph being read, -1 if none
	maxRank  int
	maxChan  int
	nRanks   int // from init lines
	nNodes   int
}

func (p *logParser) warn(line int, format string, args ...any) {
	if len(p.log.Warnings) < maxLogWarnings {
		p.log.Warnings = append(p.log.Warnings, fmt.Sprintf("%s:%d: %s", p.log.Name, line, fmt.Sprintf(format, args...)))
	} else if len(p.log.Warnings) == maxLogWarnings {
		p.log.Warnings = append(p.log.Warnings, fmt.Sprintf("%s: more warnings not shown", p.log.Name))
	}
}

// prefix is the part of a line before "NCCL INFO".
type prefix struct {
	raw  string
	host string
	pid  int
	dev  int
}

func parsePrefix(s string) prefix {
	p := prefix{raw: s, pid: -1, dev: -1}
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '['); i >= 0 && strings.HasSuffix(s, "]") {
		if d, err := strconv.Atoi(s[i+1 : len(s)-1]); err == nil {
			p.dev = d
		}
		s = strings.TrimSpace(s[:i])
	}
	// host:pid:tid
	if parts := strings.Split(s, ":"); len(parts) >= 3 {
		p.host = strings.Join(parts[:len(parts)-2], ":")
		if v, err := strconv.Atoi(parts[len(parts)-2]); err == nil {
			p.pid = v
		}
	}
	return p
}

func (p *logParser) line(n int, s string) {
	const info = "NCCL INFO "
	i := strings.Index(s, info)
	if i < 0 {
		if j := strings.Index(s, "NCCL version "); j >= 0 {
			p.version(s[j+len("NCCL version "):])
		}
		return
	}
	pre := parsePrefix(s[:i])
	msg := s[i+len(info):]
	switch {
	case strings.HasPrefix(msg, "NCCL version "):
		p.version(msg[len("NCCL version "):])
	case strings.HasPrefix(msg, "Channel "):
		p.channelLine(n, msg)
	case strings.HasPrefix(msg, "Ring "):
		p.ringLine(n, pre, msg)
	case strings.HasPrefix(msg, "Trees "):
		p.treesLine(n, pre, msg)
	case strings.HasPrefix(msg, "Tree "):
		p.treeLine(n, pre, msg)
	case strings.HasPrefix(msg, "Pattern "):
		p.patternLine(n, pre, msg)
	case strings.Contains(msg, " Bytes -> Algo "):
		p.choiceLine(n, msg)
	case strings.Contains(msg, "|"):
		p.tuneLine(n, pre, msg)
	case strings.Contains(msg, "comm 0x") && strings.Contains(msg, " rank "):
		p.commLine(n, pre, msg)
	default:
		p.graphChannelLine(pre, msg)
	}
}

func (p *logParser) version(v string) {
	v = strings.TrimSpace(v)
	if f := strings.Fields(v); len(f) > 0 {
		v = f[0]
	}
	if p.log.VersionFull == "" && v != "" {
		p.log.VersionFull = v
		p.log.Version, _, _ = strings.Cut(v, "+")
	}
}

func (p *logParser) okRank(n, r int) bool {
	if r < 0 || r >= MaxLogRanks {
		p.warn(n, "rank %d out of range [0, %d)", r, MaxLogRanks)
		return false
	}
	return true
}

func (p *logParser) okChan(n, c int) bool {
	if c < 0 || c >= MaxLogChannels {
		p.warn(n, "channel %d out of range [0, %d)", c, MaxLogChannels)
		return false
	}
	return true
}

// neighbour reads a neighbour rank: -1 or a rank in range.
func (p *logParser) neighbour(n int, s string) (int, bool) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < -1 || v >= MaxLogRanks {
		return 0, false
	}
	if v > p.maxRank {
		p.maxRank = v
	}
	return v, true
}

// seeRank records the process behind rank r from a line prefix.
func (p *logParser) seeRank(r int, pre prefix) *LogRank {
	lr := p.ranks[r]
	if lr == nil {
		lr = &LogRank{Rank: r, PID: -1, CudaDev: -1, LocalRank: -1}
		p.ranks[r] = lr
	}
	if lr.Host == "" && pre.host != "" {
		lr.Host, lr.PID = pre.host, pre.pid
	}
	if lr.CudaDev < 0 && pre.host != "" && pre.dev >= 0 {
		lr.CudaDev = pre.dev
	}
	if r > p.maxRank {
		p.maxRank = r
	}
	return lr
}

func (p *logParser) seeChan(c int) {
	if c > p.maxChan {
		p.maxChan = c
	}
}

// channelLine: "Channel 00/24 : 0 1 2 3" (rank 0's ring order). Connection
// lines ("Channel 00/0 : 0[60] -> 1[70] via P2P/CUMEM") are ignored.
func (p *logParser) channelLine(n int, msg string) {
	head, rest, ok := strings.Cut(msg[len("Channel "):], " : ")
	if !ok {
		return
	}
	cs, _, _ := strings.Cut(head, "/")
	c, err := strconv.Atoi(strings.TrimSpace(cs))
	if err != nil || !strings.Contains(head, "/") {
		return
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 || len(fields) > MaxLogRanks {
		return
	}
	ring := make([]int, 0, len(fields))
	for _, f := range fields {
		v, err := strconv.Atoi(f)
		if err != nil {
			return // a connection line
		}
		if !p.okRank(n, v) {
			return
		}
		ring = append(ring, v)
	}
	if !p.okChan(n, c) {
		return
	}
	if old, dup := p.chanRing[c]; dup {
		if !slices.Equal(old, ring) {
			p.warn(n, "channel %d ring %v differs from the earlier %v; keeping the first", c, ring, old)
		}
		return
	}
	p.chanRing[c] = ring
	p.seeChan(c)
	for _, v := range ring {
		if v > p.maxRank {
			p.maxRank = v
		}
	}
}

// ringLine: "Ring 00 : 1 -> 0 -> 1" (prev -> rank -> next).
func (p *logParser) ringLine(n int, pre prefix, msg string) {
	cs, rest, ok := strings.Cut(msg[len("Ring "):], " : ")
	if !ok {
		return
	}
	c, err := strconv.Atoi(strings.TrimSpace(cs))
	parts := strings.Split(rest, "->")
	if err != nil || len(parts) != 3 {
		return
	}
	prev, ok1 := p.neighbour(n, parts[0])
	r, ok2 := p.neighbour(n, parts[1])
	next, ok3 := p.neighbour(n, parts[2])
	if !ok1 || !ok2 || !ok3 || r < 0 || !p.okChan(n, c) {
		p.warn(n, "unreadable ring line %q", msg)
		return
	}
	p.seeRank(r, pre)
	p.seeChan(c)
	l := model.RingLinks{Prev: prev, Next: next}
	key := [2]int{r, c}
	if old, dup := p.ring[key]; dup {
		if old != l {
			p.warn(n, "rank %d channel %d ring %d->%d differs from the earlier %d->%d; keeping the first", r, c, prev, next, old.Prev, old.Next)
		}
		return
	}
	p.ring[key] = l
}

// parseTree reads "up -> r -> d0/d1/d2" or, reversed ("Trees" form),
// "d0/d1/d2->r->up".
func (p *logParser) parseTree(n int, s string, reversed bool) (r int, l model.TreeLinks, ok bool) {
	parts := strings.Split(s, "->")
	if len(parts) != 3 {
		return 0, l, false
	}
	ups, downs := parts[0], parts[2]
	if reversed {
		ups, downs = downs, ups
	}
	up, ok1 := p.neighbour(n, ups)
	r, ok2 := p.neighbour(n, parts[1])
	ds := strings.Split(strings.TrimSpace(downs), "/")
	if !ok1 || !ok2 || r < 0 || len(ds) == 0 || len(ds) > model.TreeArity {
		return 0, l, false
	}
	l.Up = up
	for i := range l.Down {
		l.Down[i] = -1
	}
	for i, d := range ds {
		v, okd := p.neighbour(n, d)
		if !okd {
			return 0, l, false
		}
		l.Down[i] = v
	}
	return r, l, true
}

func (p *logParser) setTree(n int, pre prefix, r, c int, l model.TreeLinks) {
	if !p.okChan(n, c) {
		return
	}
	p.seeRank(r, pre)
	p.seeChan(c)
	key := [2]int{r, c}
	if old, dup := p.tree[key]; dup {
		if old != l {
			p.warn(n, "rank %d channel %d tree %v differs from the earlier %v; keeping the first", r, c, l, old)
		}
		return
	}
	p.tree[key] = l
}

// treeLine: "Tree 0 : -1 -> 0 -> 1/-1/-1".
func (p *logParser) treeLine(n int, pre prefix, msg string) {
	cs, rest, ok := strings.Cut(msg[len("Tree "):], " : ")
	if !ok {
		return
	}
	c, err := strconv.Atoi(strings.TrimSpace(cs))
	if err != nil {
		return
	}
	r, l, ok := p.parseTree(n, rest, false)
	if !ok {
		p.warn(n, "unreadable tree line %q", msg)
		return
	}
	p.setTree(n, pre, r, c, l)
}

// treesLine: "Trees [0] 1/-1/-1->0->-1 [1] ..." (down->rank->up per channel).
func (p *logParser) treesLine(n int, pre prefix, msg string) {
	rest := msg[len("Trees "):]
	for len(rest) > 0 {
		rest = strings.TrimSpace(rest)
		if !strings.HasPrefix(rest, "[") {
			return
		}
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return
		}
		c, err := strconv.Atoi(rest[1:end])
		rest = rest[end+1:]
		spec := strings.TrimSpace(rest)
		if k := strings.IndexByte(spec, '['); k >= 0 {
			rest, spec = spec[k:], spec[:k]
		} else {
			rest = ""
		}
		if err != nil {
			p.warn(n, "unreadable trees entry")
			return
		}
		r, l, ok := p.parseTree(n, spec, true)
		if !ok {
			p.warn(n, "unreadable trees entry %q", spec)
			return
		}
		p.setTree(n, pre, r, c, l)
	}
}

// patternLine: "Pattern 4, crossNic 0, nChannels 12, bw 30.000000/30.000000, type NVL/PIX, sameChannels 1".
func (p *logParser) patternLine(n int, pre prefix, msg string) {
	if p.graphSrc == "" {
		p.graphSrc = pre.raw
	}
	p.graph = -1
	if pre.raw != p.graphSrc || len(p.log.Graphs) >= maxLogGraphs {
		return
	}
	g := LogGraph{}
	for _, kv := range strings.Split(msg, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), " ")
		v = strings.TrimSpace(v)
		switch k {
		case "Pattern":
			g.Pattern, _ = strconv.Atoi(v)
		case "crossNic":
			g.CrossNic, _ = strconv.Atoi(v)
		case "nChannels":
			g.NChannels, _ = strconv.Atoi(v)
		case "sameChannels":
			g.SameChannels, _ = strconv.Atoi(v)
		case "bw":
			a, b, _ := strings.Cut(v, "/")
			g.BWIntra, _ = strconv.ParseFloat(a, 64)
			g.BWInter, _ = strconv.ParseFloat(b, 64)
		case "type":
			g.TypeIntra, g.TypeInter, _ = strings.Cut(v, "/")
		}
	}
	p.log.Graphs = append(p.log.Graphs, g)
	p.graph = len(p.log.Graphs) - 1
}

// graphChannelLine: " 0 : GPU/0-60 GPU/0-70" after a Pattern line.
func (p *logParser) graphChannelLine(pre prefix, msg string) {
	if p.graph < 0 || pre.raw != p.graphSrc {
		return
	}
	g := &p.log.Graphs[p.graph]
	idx, rest, ok := strings.Cut(msg, " : ")
	if !ok {
		return
	}
	c, err := strconv.Atoi(strings.TrimSpace(idx))
	if err != nil || c != len(g.Channels) || c >= MaxLogChannels {
		return
	}
	g.Channels = append(g.Channels, strings.Fields(rest))
}

// choiceLine: "AllReduce: 8 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}"
// or (older NCCL) "AllReduce: 8 Bytes -> Algo 1 proto 0 time 12.5".
func (p *logParser) choiceLine(n int, msg string) {
	collS, rest, ok := strings.Cut(msg, ": ")
	if !ok {
		return
	}
	coll, err := model.ParseCollective(strings.TrimSpace(collS))
	if err != nil {
		return
	}
	f := strings.Fields(rest)
	// f: N Bytes -> Algo A proto P ...
	if len(f) < 7 || f[1] != "Bytes" || f[3] != "Algo" || f[5] != "proto" {
		p.warn(n, "unreadable call line %q", msg)
		return
	}
	nbytes, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || nbytes < 0 {
		return
	}
	algo, err1 := parseAlgoName(f[4])
	proto, err2 := parseProtoName(f[6])
	if err1 != nil || err2 != nil {
		p.warn(n, "call line %q: %v", msg, errors.Join(err1, err2))
		return
	}
	ch := CallChoice{Coll: coll, Bytes: nbytes, Algo: algo, Proto: proto, ChannelLo: -1, ChannelHi: -1}
	if i := strings.Index(rest, "={"); i >= 0 {
		lo, hi, _ := strings.Cut(strings.TrimSuffix(rest[i+2:], "}"), "..")
		a, e1 := strconv.Atoi(lo)
		b, e2 := strconv.Atoi(hi)
		if e1 == nil && e2 == nil && a >= 0 && b >= a && b < MaxLogChannels {
			ch.ChannelLo, ch.ChannelHi = a, b
		}
	}
	if _, seen := p.choices[ch]; !seen && len(p.choices) >= maxLogChoices {
		p.warn(n, "more than %d distinct call choices; ignoring new ones", maxLogChoices)
		return
	}
	p.choices[ch]++
}

func parseAlgoName(s string) (model.Algorithm, error) {
	if v, err := strconv.Atoi(s); err == nil {
		if v < 0 || v >= model.NumAlgorithms {
			return 0, fmt.Errorf("algorithm %d out of range", v)
		}
		return model.Algorithm(v), nil
	}
	return model.ParseAlgorithm(s)
}

func parseProtoName(s string) (model.Protocol, error) {
	if v, err := strconv.Atoi(s); err == nil {
		if v < 0 || v >= model.NumProtocols {
			return 0, fmt.Errorf("protocol %d out of range", v)
		}
		return model.Protocol(v), nil
	}
	return model.ParseProtocol(s)
}

// tuneLine handles the rows of the tuning table.
func (p *logParser) tuneLine(n int, pre prefix, msg string) {
	cells := strings.Split(msg, "|")
	head := strings.TrimSpace(cells[0])
	vals := cells[1:]
	for len(vals) > 0 && strings.TrimSpace(vals[len(vals)-1]) == "" {
		vals = vals[:len(vals)-1]
	}
	st := p.tune[pre.raw]
	switch head {
	case "Algorithm":
		if p.tuneSrc == "" {
			p.tuneSrc = pre.raw
		}
		if len(p.tune) >= 1024 && st == nil {
			return
		}
		st = &tuneState{line: n}
		p.tune[pre.raw] = st
		for _, v := range vals {
			a, err := model.ParseAlgorithm(strings.TrimSpace(v))
			if err != nil {
				p.warn(n, "tuning table: %v", err)
				delete(p.tune, pre.raw)
				return
			}
			st.algos = append(st.algos, a)
		}
		return
	case "Protocol":
		if st == nil {
			return
		}
		st.protos = st.protos[:0]
		for _, v := range vals {
			pr, err := model.ParseProtocol(strings.TrimSpace(v))
			if err != nil {
				p.warn(n, "tuning table: %v", err)
				delete(p.tune, pre.raw)
				return
			}
			st.protos = append(st.protos, pr)
		}
		return
	}
	if st == nil || len(st.algos) == 0 || len(st.protos) == 0 || len(vals)%len(st.algos) != 0 {
		return
	}
	keep := pre.raw == p.tuneSrc
	per := len(vals) / len(st.algos)
	cell := func(j int) (model.Algorithm, model.Protocol, bool) {
		if j >= len(st.protos) {
			return 0, 0, false
		}
		return st.algos[j/per], st.protos[j], true
	}
	if head == "Max NThreads" {
		for j, v := range vals {
			t, err := strconv.Atoi(strings.TrimSpace(v))
			a, pr, ok := cell(j)
			if err != nil || !ok {
				p.warn(n, "tuning table: bad thread count %q", v)
				return
			}
			key := [3]int{-1, int(a), int(pr)}
			if keep && !p.tuneSet[key] {
				p.tuneSet[key] = true
				p.log.MaxThreads = append(p.log.MaxThreads, MaxThreadsEntry{a, pr, t})
			}
		}
		return
	}
	coll, err := model.ParseCollective(head)
	if err != nil {
		return
	}
	for j, v := range vals {
		ls, bs, ok := strings.Cut(v, "/")
		lat, err1 := strconv.ParseFloat(strings.TrimSpace(ls), 64)
		bw, err2 := strconv.ParseFloat(strings.TrimSpace(bs), 64)
		a, pr, okc := cell(j)
		if !ok || !okc || err1 != nil || err2 != nil {
			p.warn(n, "tuning table: bad cell %q", v)
			return
		}
		key := [3]int{int(coll), int(a), int(pr)}
		if keep && !p.tuneSet[key] {
			p.tuneSet[key] = true
			p.log.Tuning = append(p.log.Tuning, TuningEntry{coll, a, pr, lat, bw})
		}
	}
}

// commLine: "comm 0x.. rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0"
// and "ncclCommInitRankConfig comm 0x.. rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 70 commId 0x.. - Init START".
func (p *logParser) commLine(n int, pre prefix, msg string) {
	f := strings.Fields(msg)
	kv := map[string]string{}
	for i := 0; i+1 < len(f); i++ {
		kv[f[i]] = f[i+1]
	}
	r, err := strconv.Atoi(kv["rank"])
	if err != nil || !p.okRank(n, r) {
		return
	}
	lr := p.seeRank(r, pre)
	atoi := func(k string) (int, bool) {
		v, err := strconv.Atoi(kv[k])
		return v, err == nil
	}
	for _, k := range []string{"nRanks", "nranks"} {
		if v, ok := atoi(k); ok && v > 0 && v <= MaxLogRanks && p.nRanks == 0 {
			p.nRanks = v
		}
	}
	if v, ok := atoi("nNodes"); ok && v > 0 && v <= MaxLogRanks && p.nNodes == 0 {
		p.nNodes = v
	}
	if v, ok := atoi("localRank"); ok && v >= 0 && v < MaxLogRanks {
		lr.LocalRank = v
	}
	if v, ok := atoi("cudaDev"); ok && v >= 0 {
		lr.CudaDev = v
	}
	if b, ok := kv["busId"]; ok && lr.BusID == "" && len(b) <= 32 {
		lr.BusID = b
	}
}

func (p *logParser) finish() {
	l := p.log
	nr := p.maxRank + 1
	if p.nRanks > nr {
		nr = p.nRanks
	}
	l.NRanks = nr
	l.NChannels = p.maxChan + 1
	if nr == 0 {
		return
	}
	// Per-rank neighbours: only ranks that printed lines get rows.
	l.Ring = make([][]model.RingLinks, nr)
	l.Tree = make([][]model.TreeLinks, nr)
	for key, v := range p.ring {
		r, c := key[0], key[1]
		if l.Ring[r] == nil {
			l.Ring[r] = make([]model.RingLinks, l.NChannels)
			for i := range l.Ring[r] {
				l.Ring[r][i] = model.RingLinks{Prev: Unknown, Next: Unknown}
			}
		}
		l.Ring[r][c] = v
	}
	for key, v := range p.tree {
		r, c := key[0], key[1]
		if l.Tree[r] == nil {
			l.Tree[r] = make([]model.TreeLinks, l.NChannels)
			for i := range l.Tree[r] {
				l.Tree[r][i] = model.TreeLinks{Up: Unknown, Down: [3]int{Unknown, Unknown, Unknown}}
			}
		}
		l.Tree[r][c] = v
	}
	// Rings per channel.
	if len(p.chanRing) > 0 || len(p.ring) > 0 {
		l.Rings = make([][]int, l.NChannels)
		for c := range l.Rings {
			if ring, ok := p.chanRing[c]; ok {
				l.Rings[c] = ring
				continue
			}
			l.Rings[c] = p.rebuildRing(c, nr)
		}
	}
	// Ranks.
	l.Ranks = make([]LogRank, 0, len(p.ranks))
	for _, r := range p.ranks {
		l.Ranks = append(l.Ranks, *r)
	}
	slices.SortFunc(l.Ranks, func(a, b LogRank) int { return a.Rank - b.Rank })
	hosts := map[string]bool{}
	for _, r := range l.Ranks {
		if r.Host != "" {
			hosts[r.Host] = true
		}
	}
	l.NNodes = p.nNodes
	if l.NNodes == 0 {
		l.NNodes = len(hosts)
	}
	// Choices.
	for ch, k := range p.choices {
		ch.Calls = k
		l.Choices = append(l.Choices, ch)
	}
	slices.SortFunc(l.Choices, func(a, b CallChoice) int {
		switch {
		case a.Coll != b.Coll:
			return int(a.Coll) - int(b.Coll)
		case a.Bytes != b.Bytes:
			return cmp3(a.Bytes, b.Bytes)
		case a.Algo != b.Algo:
			return int(a.Algo) - int(b.Algo)
		case a.Proto != b.Proto:
			return int(a.Proto) - int(b.Proto)
		case a.ChannelLo != b.ChannelLo:
			return a.ChannelLo - b.ChannelLo
		}
		return a.ChannelHi - b.ChannelHi
	})
}

// rebuildRing follows the per-rank "Ring" lines of channel c from rank 0.
// Coming back to rank 0 for the first time after exactly nr steps means
// every rank was visited once.
func (p *logParser) rebuildRing(c, nr int) []int {
	var ring []int
	r := 0
	for {
		l, ok := p.ring[[2]int{r, c}]
		if !ok || len(ring) == nr {
			return nil
		}
		ring = append(ring, r)
		r = l.Next
		if r == 0 {
			break
		}
	}
	if len(ring) != nr {
		return nil
	}
	return ring
}

// RankChannels converts the per-rank ring and tree neighbours into model's
// form, for comparison with a model.Plan. Nodes are numbered in order of
// first appearance by rank, from the logged localRank values (a rank with
// localRank 0 starts a node), else from the host names, else (only nNodes
// logged) as equal nodes with ranks node-major. Ranks that printed nothing
// get Unknown neighbours.
func (l *NCCLLog) RankChannels() []model.RankChannels {
	out := make([]model.RankChannels, l.NRanks)
	byRank := map[int]LogRank{}
	allLocal := len(l.Ranks) == l.NRanks
	for _, r := range l.Ranks {
		byRank[r.Rank] = r
		if r.LocalRank < 0 {
			allLocal = false
		}
	}
	nodeOfHost := map[string]int{}
	localCount := map[int]int{}
	node := -1
	for r := range out {
		rc := model.RankChannels{Rank: r, Node: -1, LocalRank: -1}
		lr, ok := byRank[r]
		switch {
		case allLocal:
			if lr.LocalRank == 0 || node < 0 {
				node++
			}
			rc.Node, rc.LocalRank = node, lr.LocalRank
		case ok && lr.Host != "":
			n, seen := nodeOfHost[lr.Host]
			if !seen {
				n = len(nodeOfHost)
				nodeOfHost[lr.Host] = n
			}
			rc.Node, rc.LocalRank = n, localCount[n]
			localCount[n]++
		case len(nodeOfHost) == 0 && l.NNodes > 0 && l.NRanks%l.NNodes == 0:
			// No per-rank placement logged: assume equal nodes, ranks node-major.
			per := l.NRanks / l.NNodes
			rc.Node, rc.LocalRank = r/per, r%per
		}
		rc.Ring = make([]model.RingLinks, l.NChannels)
		rc.Tree = make([]model.TreeLinks, l.NChannels)
		for c := 0; c < l.NChannels; c++ {
			rc.Ring[c] = model.RingLinks{Prev: Unknown, Next: Unknown}
			rc.Tree[c] = model.TreeLinks{Up: Unknown, Down: [3]int{Unknown, Unknown, Unknown}}
			if l.Ring[r] != nil {
				rc.Ring[c] = l.Ring[r][c]
			}
			if l.Tree[r] != nil {
				rc.Tree[c] = l.Tree[r][c]
			}
		}
		out[r] = rc
	}
	return out
}

// TuningOf returns the table entry for (coll, algo, proto).
func (l *NCCLLog) TuningOf(coll model.Collective, algo model.Algorithm, proto model.Protocol) (TuningEntry, bool) {
	for _, e := range l.Tuning {
		if e.Coll == coll && e.Algo == algo && e.Proto == proto {
			return e, true
		}
	}
	return TuningEntry{}, false
}
