package gpurecord

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelString: a build names its LL and LL128 block limit, a recording
// of the builds before it (0) does not, and a limit that is no block size is
// refused.
func TestKernelString(t *testing.T) {
	for _, c := range []struct {
		k    Kernel
		want string
	}{
		{Kernel{Source: "ab12"}, "interp.cu ab12"},
		{Kernel{Source: "ab12", LineThreads: 640}, "interp.cu ab12 line_threads=640"},
		{Kernel{Source: "ab12", LineThreads: 640, Options: []string{"-DTW_UNROLL=8"}}, "interp.cu ab12 line_threads=640 -DTW_UNROLL=8"},
	} {
		assert.Equal(t, c.want, c.k.String())
		assert.NoError(t, c.k.Validate())
	}
	for _, n := range []int{32, 100, 2048, -64} {
		assert.Error(t, Kernel{Source: "ab12", LineThreads: n}.Validate(), "line_threads %d", n)
	}
	assert.Error(t, Kernel{Source: "xyz"}.Validate())
	assert.Error(t, Kernel{Source: "ab", Options: []string{"two words"}}.Validate())
}

// TestRoundTrip: what the writer encodes, the reader decodes to the same
// report, in-place half and probes included.
func TestRoundTrip(t *testing.T) {
	graph := true
	rep := &Report{NRanks: 2, Collective: "AllReduce", Graph: &graph, Repetitions: 5, Topology: "live", GPUs: []string{"H100", "H100"},
		NCCLVersion: "2.28.3", NCCLEnv: map[string]string{"NCCL_NVLS_ENABLE": "0"}, Hosts: 2,
		NetProbe: []NetProbe{{LatencyUs: 9.5, OneWayGBps: 3, BothWaysGBps: 2.5, Addr: "127.0.0.1"}},
		Kernel:   &Kernel{Source: "ab12", LineThreads: 640}, Revision: "0123456789ab+modified",
		Rows: []Row{{Op: "AllReduce", Bytes: 1024, Count: 256, Dtype: "fp32", RedOp: "sum", Algo: "Ring", Proto: "LL", NChannels: 2,
			TimeUs: 6.5, BestUs: 6.1, RepsUs: []float64{6.5, 6.1}, NCCLTime: 5.5, NetProbe: &NetProbe{LatencyUs: 10}, Checked: true,
			InPlace: &Row{Op: "AllReduce", Bytes: 1024, Count: 256, TimeUs: 6.1, Checked: true}}}}
	var buf bytes.Buffer
	require.NoError(t, Encode(&buf, rep))
	got, err := Decode(&buf, "x.json")
	require.NoError(t, err)
	assert.Equal(t, rep, got)

	buf.Reset()
	require.NoError(t, Encode(&buf, &Report{NRanks: 1}))
	assert.Contains(t, buf.String(), `"rows": []`, "rows are never null")
}

// TestDecodeRefuses: each way a file can be wrong is named, with the file.
func TestDecodeRefuses(t *testing.T) {
	row := `{"op":"AllReduce","bytes":8,"count":2,"time_us":5}`
	for _, c := range []struct{ doc, want string }{
		{`{"nranks":2,"rows":[` + row + `]`, "not a \"run gpu --json\" file"},
		{`{"nranks":0,"rows":[` + row + `]}`, "nranks 0"},
		{`{"nranks":2,"rows":[]}`, "no rows"},
		{`{"nranks":2,"rows":[{"op":"AllReduce","bytes":8,"count":2}]}`, "row 0: want op, bytes, count and time_us"},
		{`{"nranks":2,"rows":[{"op":"AllReduce","count":2,"time_us":5}]}`, "row 0: want op, bytes"},
		{`{"nranks":2,"kernel":{"source_sha256":"zz"},"rows":[` + row + `]}`, "kernel: source_sha256"},
		{`{"nranks":2,"twinccl_revision":"a\nb","rows":[` + row + `]}`, "twinccl_revision"},
		{`{"nranks":2,"nccl_env":{"PATH":"/"},"rows":[` + row + `]}`, `nccl_env: "PATH"`},
		{`{"nranks":2,"gpus":["a","b","c"],"rows":[` + row + `]}`, "gpus: 3 GPUs for 2 ranks"},
		{`{"nranks":4,"hosts":3,"rows":[` + row + `]}`, "hosts 3"},
		{`{"nranks":2,"net_probe":[{"latency_us":-1}],"rows":[` + row + `]}`, "net_probe 0: latency_us -1"},
		{`{"nranks":2,"rows":[{"op":"AllReduce","bytes":8,"count":2,"time_us":5,"net_probe":{"latency_us":0}}]}`, "row 0: net_probe"},
		{`{"nranks":2,"rows":[{"op":"AllReduce","bytes":8,"count":2,"time_us":5,"wrong":-1}]}`, "row 0: wrong -1"},
	} {
		_, err := Decode(strings.NewReader(c.doc), "bad.json")
		if assert.Error(t, err, c.doc) {
			assert.Contains(t, err.Error(), "bad.json: ")
			assert.Contains(t, err.Error(), c.want)
		}
	}
	big := strings.NewReader(`{"nranks":2,"topology":"` + strings.Repeat("x", MaxBytes) + `"}`)
	_, err := Decode(big, "big.json")
	assert.ErrorContains(t, err, "larger than 64 MiB")
}
