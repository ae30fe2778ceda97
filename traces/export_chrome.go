package traces

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
)

// maxChromeTracks bounds the process and thread names the Chrome exporter
// remembers; tracks beyond it are still exported, without names.
const maxChromeTracks = 1 << 20

// maxChromeConns bounds the connections whose flows the exporter tracks.
const maxChromeConns = 1 << 21

type connKey struct {
	comm     uint64
	call     int64
	channel  int32
	src, dst int32
}

// WriteChrome writes a Chrome/Perfetto trace (JSON object format) of the
// calls and events read from calls and events (either may be nil). Each
// rank is a process; its calls are thread 0 ("calls") and channel c is
// thread c+1, so every rank × channel has its own track. The k-th step
// that sends from rank a to rank b on a channel of a call starts a flow
// arrow that the k-th step of b receiving from a on that channel ends (the
// connection's FIFO order, as NCCL's step counters). Output is streamed:
// memory is bounded by the track names and one pair of counters per
// connection and call (at most maxChromeConns; flows beyond are omitted).
func WriteChrome(w io.Writer, calls *CallReader, events *EventReader) error {
	cw := &chromeWriter{w: bufio.NewWriterSize(w, 256<<10), named: map[[2]int64]bool{}, quoted: map[string][]byte{},
		conns: map[connKey]*[2]int64{}}
	cw.w.WriteString(`{"displayTimeUnit":"ns","traceEvents":[`)
	if calls != nil {
		err := calls.Scan(Filter{}, func(rows []CallRow) error {
			for i := range rows {
				cw.call(&rows[i])
			}
			return cw.err
		})
		if err != nil {
			return err
		}
	}
	if events != nil {
		err := events.Scan(Filter{}, func(rows []EventRow) error {
			for i := range rows {
				cw.event(&rows[i])
			}
			return cw.err
		})
		if err != nil {
			return err
		}
	}
	cw.w.WriteString("\n]}\n")
	return cw.w.Flush()
}

type chromeWriter struct {
	w      *bufio.Writer
	n      int
	named  map[[2]int64]bool
	quoted map[string][]byte
	buf    []byte
	err    error
	conns  map[connKey]*[2]int64 // steps sent, steps received
}

// seq returns the next send (dir 0) or receive (dir 1) number on k.
func (c *chromeWriter) seq(k connKey, dir int) (int64, bool) {
	v := c.conns[k]
	if v == nil {
		if len(c.conns) >= maxChromeConns {
			return 0, false
		}
		v = new([2]int64)
		c.conns[k] = v
	}
	n := v[dir]
	v[dir]++
	return n, true
}

func (c *chromeWriter) begin() {
	if c.n > 0 {
		c.buf = append(c.buf, ",\n"...)
	} else {
		c.buf = append(c.buf, '\n')
	}
	c.n++
}

func (c *chromeWriter) flush() {
	if _, err := c.w.Write(c.buf); err != nil && c.err == nil {
		c.err = err
	}
	c.buf = c.buf[:0]
}

// str appends s as a JSON string (cached for the few distinct names).
func (c *chromeWriter) str(s string) {
	if q, ok := c.quoted[s]; ok {
		c.buf = append(c.buf, q...)
		return
	}
	q, _ := json.Marshal(s)
	if len(c.quoted) < 4096 {
		c.quoted[s] = q
	}
	c.buf = append(c.buf, q...)
}

// us appends ns as microseconds with three decimals.
func us(b []byte, ns int64) []byte {
	if ns < 0 {
		b = append(b, '-')
		ns = -ns
	}
	b = strconv.AppendInt(b, ns/1000, 10)
	frac := ns % 1000
	b = append(b, '.', byte('0'+frac/100), byte('0'+frac/10%10), byte('0'+frac%10))
	return b
}

func (c *chromeWriter) name(pid int64, tid int64, label string) {
	key := [2]int64{pid, tid}
	if c.named[key] || len(c.named) >= maxChromeTracks {
		return
	}
	c.named[key] = true
	if !c.named[[2]int64{pid, -1}] {
		c.named[[2]int64{pid, -1}] = true
		c.begin()
		c.buf = append(c.buf, `{"name":"process_name","ph":"M","pid":`...)
		c.buf = strconv.AppendInt(c.buf, pid, 10)
		c.buf = append(c.buf, `,"args":{"name":"rank `...)
		c.buf = strconv.AppendInt(c.buf, pid, 10)
		c.buf = append(c.buf, `"}}`...)
		c.begin()
		c.buf = append(c.buf, `{"name":"process_sort_index","ph":"M","pid":`...)
		c.buf = strconv.AppendInt(c.buf, pid, 10)
		c.buf = append(c.buf, `,"args":{"sort_index":`...)
		c.buf = strconv.AppendInt(c.buf, pid, 10)
		c.buf = append(c.buf, `}}`...)
	}
	c.begin()
	c.buf = append(c.buf, `{"name":"thread_name","ph":"M","pid":`...)
	c.buf = strconv.AppendInt(c.buf, pid, 10)
	c.buf = append(c.buf, `,"tid":`...)
	c.buf = strconv.AppendInt(c.buf, tid, 10)
	c.buf = append(c.buf, `,"args":{"name":`...)
	c.str(label)
	c.buf = append(c.buf, `}}`...)
	c.begin()
	c.buf = append(c.buf, `{"name":"thread_sort_index","ph":"M","pid":`...)
	c.buf = strconv.AppendInt(c.buf, pid, 10)
	c.buf = append(c.buf, `,"tid":`...)
	c.buf = strconv.AppendInt(c.buf, tid, 10)
	c.buf = append(c.buf, `,"args":{"sort_index":`...)
	c.buf = strconv.AppendInt(c.buf, tid, 10)
	c.buf = append(c.buf, `}}`...)
}

func (c *chromeWriter) slice(name, cat string, pid, tid, start, end int64) {
	c.begin()
	c.buf = append(c.buf, `{"name":`...)
	c.str(name)
	c.buf = append(c.buf, `,"cat":"`...)
	c.buf = append(c.buf, cat...)
	c.buf = append(c.buf, `","ph":"X","pid":`...)
	c.buf = strconv.AppendInt(c.buf, pid, 10)
	c.buf = append(c.buf, `,"tid":`...)
	c.buf = strconv.AppendInt(c.buf, tid, 10)
	c.buf = append(c.buf, `,"ts":`...)
	c.buf = us(c.buf, start)
	c.buf = append(c.buf, `,"dur":`...)
	c.buf = us(c.buf, max(end-start, 0))
}

func (c *chromeWriter) call(r *CallRow) {
	pid := int64(r.Rank)
	c.name(pid, 0, "calls")
	c.slice(r.Op, "call", pid, 0, r.StartNs, r.EndNs)
	c.buf = append(c.buf, `,"args":{"comm":"`...)
	c.buf = append(c.buf, fmt.Sprintf("%#x", r.Comm)...)
	c.buf = append(c.buf, `","call":`...)
	c.buf = strconv.AppendInt(c.buf, r.Call, 10)
	c.buf = append(c.buf, `,"algorithm":`...)
	c.str(r.Algorithm)
	c.buf = append(c.buf, `,"protocol":`...)
	c.str(r.Protocol)
	c.buf = append(c.buf, `,"count":`...)
	c.buf = strconv.AppendInt(c.buf, r.Count, 10)
	c.buf = append(c.buf, `,"datatype":`...)
	c.str(r.Datatype)
	if r.RedOp != "" {
		c.buf = append(c.buf, `,"redop":`...)
		c.str(r.RedOp)
	}
	if r.Root >= 0 {
		c.buf = append(c.buf, `,"root":`...)
		c.buf = strconv.AppendInt(c.buf, int64(r.Root), 10)
	}
	c.buf = append(c.buf, `,"channels":`...)
	c.buf = strconv.AppendInt(c.buf, int64(r.Channels), 10)
	c.buf = append(c.buf, `,"enqueue_us":`...)
	c.buf = us(c.buf, r.EnqueueNs)
	c.buf = append(c.buf, `,"source":`...)
	c.str(r.Source)
	c.buf = append(c.buf, `}}`...)
	c.flush()
}

// flowID identifies the n-th transfer on connection k.
func flowID(k connKey, n int64) uint64 {
	h := fnv.New64a()
	var b [44]byte
	binary.LittleEndian.PutUint64(b[0:], k.comm)
	binary.LittleEndian.PutUint64(b[8:], uint64(k.call))
	binary.LittleEndian.PutUint32(b[16:], uint32(k.channel))
	binary.LittleEndian.PutUint32(b[20:], uint32(k.src))
	binary.LittleEndian.PutUint32(b[24:], uint32(k.dst))
	binary.LittleEndian.PutUint64(b[28:], uint64(n))
	h.Write(b[:36])
	return h.Sum64()
}

func (c *chromeWriter) flow(ph string, id uint64, pid, tid, ts int64) {
	c.begin()
	c.buf = append(c.buf, `{"name":"step","cat":"flow","ph":"`...)
	c.buf = append(c.buf, ph...)
	c.buf = append(c.buf, `","id":"`...)
	c.buf = strconv.AppendUint(c.buf, id, 16)
	c.buf = append(c.buf, `","pid":`...)
	c.buf = strconv.AppendInt(c.buf, pid, 10)
	c.buf = append(c.buf, `,"tid":`...)
	c.buf = strconv.AppendInt(c.buf, tid, 10)
	c.buf = append(c.buf, `,"ts":`...)
	c.buf = us(c.buf, ts)
	if ph == "f" {
		c.buf = append(c.buf, `,"bp":"e"`...)
	}
	c.buf = append(c.buf, '}')
}

func (c *chromeWriter) event(r *EventRow) {
	pid, tid := int64(r.Rank), int64(r.Channel)+1
	if c.named[[2]int64{pid, tid}] == false && len(c.named) < maxChromeTracks {
		c.name(pid, tid, fmt.Sprintf("channel %02d", r.Channel))
	}
	c.slice(r.Primitive, "step", pid, tid, r.StartNs, r.EndNs)
	c.buf = append(c.buf, `,"args":{"call":`...)
	c.buf = strconv.AppendInt(c.buf, r.Call, 10)
	c.buf = append(c.buf, `,"step":`...)
	c.buf = strconv.AppendInt(c.buf, r.Step, 10)
	c.buf = append(c.buf, `,"bytes":`...)
	c.buf = strconv.AppendInt(c.buf, r.Bytes, 10)
	c.buf = append(c.buf, `,"protocol":`...)
	c.str(r.Protocol)
	if r.SendPeer >= 0 {
		c.buf = append(c.buf, `,"send_peer":`...)
		c.buf = strconv.AppendInt(c.buf, int64(r.SendPeer), 10)
	}
	if r.RecvPeer >= 0 {
		c.buf = append(c.buf, `,"recv_peer":`...)
		c.buf = strconv.AppendInt(c.buf, int64(r.RecvPeer), 10)
	}
	if r.DataNs != 0 { // the step's wait for its data and credits
		c.buf = append(c.buf, `,"wait_us":`...)
		c.buf = us(c.buf, max(r.DataNs-r.StartNs, 0))
	}
	c.buf = append(c.buf, `}}`...)
	if r.SendPeer >= 0 {
		k := connKey{r.Comm, r.Call, r.Channel, r.Rank, r.SendPeer}
		if n, ok := c.seq(k, 0); ok {
			c.flow("s", flowID(k, n), pid, tid, r.StartNs)
		}
	}
	if r.RecvPeer >= 0 {
		k := connKey{r.Comm, r.Call, r.Channel, r.RecvPeer, r.Rank}
		if n, ok := c.seq(k, 1); ok {
			// Bind inside the receiving slice (a zero-length one binds at its start).
			c.flow("f", flowID(k, n), pid, tid, r.StartNs+max(r.EndNs-r.StartNs, 0)/2)
		}
	}
	c.flush()
}
