package search

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/twinccl/twinccl/model"
)

// The logs in testdata/nccl-env are NCCL 2.28.9's own INFO logs on our two
// H200 (testdata/nccl-env/record.py), each under other NCCL_* settings,
// named on the file's first line.

var (
	logLine      = regexp.MustCompile(`^\S+ \[(\d+)\] NCCL INFO (.*)$`)
	commPointer  = regexp.MustCompile(`^comm 0x[0-9a-f]+ `)
	decisionLine = regexp.MustCompile(`^(Pattern |\s?\d+ : (NET|GPU)/|rank \d+ nRanks |Tree \d+ : |Channel \d+/\d+ :[^>]*$|Ring \d+ : |Trees|  Algorithm   \||  Protocol    \|| Max NThreads \||\s*(Broadcast|Reduce|AllGather|ReduceScatter|AllReduce) \||threadThresholds |\d+ coll channels)`)
	callLine     = regexp.MustCompile(`^(\w+): (\d+) Bytes -> Algo (\w+) proto (\w+) channel\{Lo\.\.Hi\}=\{(\d+)\.\.(\d+)\}`)
)

// envLog is one recorded NCCL log: its settings and, per rank, the lines
// that carry NCCL's init decisions and per-call choices.
type envLog struct {
	name      string
	env       map[string]string
	decisions map[int][]string
	calls     []string // rank 0's per-call lines, first occurrence of each
}

func readEnvLog(t *testing.T, file string) envLog {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	lines := strings.Split(string(data), "\n")
	l := envLog{name: filepath.Base(file), env: map[string]string{}, decisions: map[int][]string{}}
	head, ok := strings.CutPrefix(lines[0], "# NCCL settings:")
	require.True(t, ok, "%s: no settings line", file)
	for _, kv := range strings.Fields(head) {
		k, v, _ := strings.Cut(kv, "=")
		l.env[k] = v
	}
	// Every log was recorded with NCCL_NVLS_ENABLE=0 (the README; NCCL
	// echoes it in some): our default, NCCL's, is NVLS on.
	if _, ok := l.env["NCCL_NVLS_ENABLE"]; !ok {
		l.env["NCCL_NVLS_ENABLE"] = "0"
	}
	// NCCL_THREAD_THRESHOLDS holds spaces: take it from NCCL's own echo.
	seen := map[string]bool{}
	for _, line := range lines[1:] {
		m := logLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		rank, _ := strconv.Atoi(m[1])
		msg := commPointer.ReplaceAllString(m[2], "")
		if v, ok := strings.CutPrefix(msg, "NCCL_THREAD_THRESHOLDS set by environment to "); ok {
			l.env["NCCL_THREAD_THRESHOLDS"] = v
		}
		if callLine.MatchString(msg) {
			if rank == 0 && !seen[msg] {
				seen[msg] = true
				l.calls = append(l.calls, msg)
			}
			continue
		}
		if decisionLine.MatchString(msg) {
			l.decisions[rank] = append(l.decisions[rank], msg)
		}
	}
	return l
}

// TestDecisionsMatchNCCLUnderSettings runs the search, wiring and tuner
// with the settings of every recorded log and checks, rank by rank, every
// graph, channel, ring, tree and tuning line NCCL logged, then every
// collective call's algorithm, protocol and channel range.
func TestDecisionsMatchNCCLUnderSettings(t *testing.T) {
	checkDecisionLogs(t, filepath.Join("..", "testdata", "nccl-env"), 2, 10)
}

// TestDecisionsMatchNCCLOnFourH200 does the same on the four H200 of the
// nvidia-h200-x4 machine (testdata/nccl-env/h200x4, NCCL's default settings).
func TestDecisionsMatchNCCLOnFourH200(t *testing.T) {
	checkDecisionLogs(t, filepath.Join("..", "testdata", "nccl-env", "h200x4"), 4, 1)
}

// checkDecisionLogs replays every log in dir (at least minLogs, each from
// nranks ranks) on dir's topo.xml.
func checkDecisionLogs(t *testing.T, dir string, nranks, minLogs int) {
	files, err := filepath.Glob(filepath.Join(dir, "*.log"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(files), minLogs)
	root, _, err := model.ReadTopologyFile(filepath.Join(dir, "topo.xml"))
	require.NoError(t, err)
	for _, file := range files {
		l := readEnvLog(t, file)
		t.Run(l.name, func(t *testing.T) {
			lookup := func(k string) (string, bool) { v, ok := l.env[k]; return v, ok }
			params, err := model.ParamsFromEnv(lookup)
			require.NoError(t, err)
			opts, err := OptionsFromEnv(lookup)
			require.NoError(t, err)
			cl, err := model.LoadCluster(root, "topo.xml", model.LoadOptions{Params: params})
			require.NoError(t, err)
			res, err := Run(cl, opts)
			require.NoError(t, err)

			var b bytes.Buffer
			require.NoError(t, res.WriteLog(&b, true))
			ours := map[int][]string{}
			for _, line := range strings.Split(b.String(), "\n") {
				m := regexp.MustCompile(`^\[(\d+)\] NCCL INFO (.*)$`).FindStringSubmatch(line)
				if m != nil && decisionLine.MatchString(m[2]) {
					rank, _ := strconv.Atoi(m[1])
					ours[rank] = append(ours[rank], m[2])
				}
			}
			require.Len(t, l.decisions, nranks, "ranks in the log")
			for rank, want := range l.decisions {
				got := ours[rank]
				if rank != 0 {
					// Only rank 0's graph search and tuning table are
					// printed by WriteLog; NCCL logs them on every rank.
					want = filterOut(want, ours[0])
				}
				require.Equal(t, want, got, "rank %d", rank)
			}

			require.NotEmpty(t, l.calls)
			for _, call := range l.calls {
				m := callLine.FindStringSubmatch(call)
				coll, err := model.ParseCollective(m[1])
				require.NoError(t, err)
				nBytes, _ := strconv.ParseInt(m[2], 10, 64)
				count := nBytes / 4 // float32 throughout
				ch, err := res.Tuning.Choose(coll, count, 4)
				require.NoError(t, err, call)
				sp, err := model.SplitChannels(coll, ch.Proto, count, 4, res.Plan.NRanks, ch.NChannels, res.Plan.NChannels)
				require.NoError(t, err)
				got := strings.ToUpper(ch.Algo.String()) + "/" + strings.ToUpper(ch.Proto.String()) +
					" " + strconv.Itoa(sp.ChannelLo) + ".." + strconv.Itoa(sp.ChannelHi)
				require.Equal(t, m[3]+"/"+m[4]+" "+m[5]+".."+m[6], got, call)
			}
		})
	}
}

// filterOut drops from lines the graph-search and tuning lines (those
// WriteLog prints for rank 0 only) that also appear in rank0.
func filterOut(lines, rank0 []string) []string {
	shared := map[string]bool{}
	for _, l := range rank0 {
		if !strings.HasPrefix(l, "rank ") && !strings.HasPrefix(l, "Tree ") && !strings.HasPrefix(l, "Ring ") &&
			!strings.HasPrefix(l, "Trees") && !strings.HasPrefix(l, "Channel ") {
			shared[l] = true
		}
	}
	var out []string
	for _, l := range lines {
		if !shared[l] {
			out = append(out, l)
		}
	}
	return out
}
