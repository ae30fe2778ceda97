package traces

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/pprof/profile"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// goldenTraces is a small deterministic job: 2 ranks, AllReduce on a ring
// over 2 channels, 3 steps per channel, each step sending to the next rank
// and receiving from the previous one.
func goldenTraces(t *testing.T) (*CallReader, *EventReader) {
	var calls []CallRow
	var events []EventRow
	for r := int32(0); r < 2; r++ {
		calls = append(calls, CallRow{Job: "golden", Comm: 0xa62b7a58480480ae, Call: 0, Rank: r, NRanks: 2, Op: "AllReduce",
			Algorithm: "Ring", Protocol: "Simple", Channels: 2, Count: 262144, Datatype: "float32", RedOp: "sum", Root: -1,
			Stream: 7, EnqueueNs: 1000, StartNs: 2000 + int64(r)*150, EndNs: 9000 + int64(r)*100, Source: SourceHW, Host: "vm"})
		calls = append(calls, CallRow{Job: "golden", Comm: 0xa62b7a58480480ae, Call: 1, Rank: r, NRanks: 2, Op: "Broadcast",
			Algorithm: "Ring", Protocol: "LL", Channels: 1, Count: 1024, Datatype: "bfloat16", Root: 0,
			Stream: 7, EnqueueNs: 9500, StartNs: 10000, EndNs: 12500, Source: SourceHW, Host: "vm"})
		for ch := int32(0); ch < 2; ch++ {
			for step := int64(0); step < 3; step++ {
				prim := "recvReduceSend"
				send, recv := 1-r, 1-r
				if step == 0 {
					prim, recv = "send", -1
				} else if step == 2 {
					prim, send = "recvReduceCopy", -1
				}
				start := 2000 + step*2000 + int64(ch)*100 + int64(r)*300
				events = append(events, EventRow{Comm: 0xa62b7a58480480ae, Call: 0, Rank: r, Channel: ch, SendPeer: send, RecvPeer: recv,
					Primitive: prim, Protocol: "Simple", Step: step, Bytes: 131072, StartNs: start, EndNs: start + 1500 + step*10, Source: SourceHW})
				if step%2 == 1 { // data stamps (schema 1.1) on some steps: the wait shows in the Chrome args
					events[len(events)-1].DataNs = start + 250
				}
			}
		}
	}
	cdata := writeCalls(t, calls, WriterOptions{})
	edata := writeEvents(t, events, WriterOptions{})
	cr, err := NewCallReader(bytes.NewReader(cdata), int64(len(cdata)), "golden.calls.parquet")
	require.NoError(t, err)
	er, err := NewEventReader(bytes.NewReader(edata), int64(len(edata)), "golden.events.parquet")
	require.NoError(t, err)
	return cr, er
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./traces -run %s -update to create it", t.Name())
	require.Equal(t, string(want), string(got), "golden file %s (regenerate with -update)", path)
}

func TestChromeGolden(t *testing.T) {
	cr, er := goldenTraces(t)
	var buf bytes.Buffer
	require.NoError(t, WriteChrome(&buf, cr, er))
	// Valid JSON with flows that pair up.
	var doc struct {
		TraceEvents []map[string]any `json:"traceEvents"`
	}
	require.NoError(t, json.Unmarshal(buf.Bytes(), &doc))
	starts, ends := map[string]int{}, map[string]int{}
	for _, e := range doc.TraceEvents {
		switch e["ph"] {
		case "s":
			starts[e["id"].(string)]++
		case "f":
			ends[e["id"].(string)]++
		}
	}
	require.Len(t, starts, 8)
	require.Equal(t, starts, ends, "every send flow ends at a receive")
	waits := 0
	for _, e := range doc.TraceEvents {
		if args, ok := e["args"].(map[string]any); ok && e["cat"] == "step" && args["wait_us"] != nil {
			require.InDelta(t, 0.25, args["wait_us"], 1e-9, "a step's wait: its data stamp 250 ns after its start")
			waits++
		}
	}
	require.Positive(t, waits, "no step shows its wait")
	golden(t, "small.chrome.json", buf.Bytes())
}

func TestPprofGolden(t *testing.T) {
	_, er := goldenTraces(t)
	var buf bytes.Buffer
	require.NoError(t, WritePprof(&buf, er))
	p, err := profile.Parse(bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	var total int64
	for _, s := range p.Sample {
		total += s.Value[0]
	}
	require.EqualValues(t, 2*2*(1500+1510+1520), total)
	golden(t, "small.pprof.txt", []byte(p.String()))
	// Byte-for-byte deterministic.
	var buf2 bytes.Buffer
	_, er2 := goldenTraces(t)
	require.NoError(t, WritePprof(&buf2, er2))
	require.Equal(t, buf.Bytes(), buf2.Bytes())
}

func TestSummaryGolden(t *testing.T) {
	cr, er := goldenTraces(t)
	var buf bytes.Buffer
	require.NoError(t, WriteSummary(&buf, cr, er))
	golden(t, "small.summary.txt", buf.Bytes())
}
