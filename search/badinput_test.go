package search

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// captureWarnings runs f with the default logger writing to a buffer and
// returns what was logged.
func captureWarnings(t *testing.T, f func()) string {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey && len(groups) == 0 {
				return slog.Attr{}
			}
			return a
		},
	})))
	defer slog.SetDefault(old)
	f()
	return buf.String()
}

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// TestEnvBadValues: the NCCL_* settings the search, wiring and tuner read
// behave as NCCL 2.28.9 does with each bad value, with an error where
// NCCL fails (NCCL_PROTO, NCCL_ALGO: parseList returns ncclInvalidUsage)
// or would go on with a number the user did not write (a value that is
// not an integer, or that its C int truncates), and a warning naming the
// variable and value where NCCL logs that it ignores or corrects it.
func TestEnvBadValues(t *testing.T) {
	for _, tc := range []struct {
		kv   []string
		want string // the error, whole
	}{
		{[]string{"NCCL_PROTO", "foo"}, `NCCL_PROTO="foo": unknown name "foo" (valid: LL, LL128, Simple)`},
		{[]string{"NCCL_ALGO", "foo"}, `NCCL_ALGO="foo": unknown name "foo" (valid: Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT)`},
		{[]string{"NCCL_NTHREADS", "abc"}, `NCCL_NTHREADS="abc": not an integer`},
		{[]string{"NCCL_NTHREADS", "256 "}, ""},
		{[]string{"NCCL_NTHREADS", "0b100"}, `NCCL_NTHREADS="0b100": not an integer`}, // strtoll reads 0
		{[]string{"NCCL_LL128_NTHREADS", "1_024"}, `NCCL_LL128_NTHREADS="1_024": not an integer`},
		{[]string{"NCCL_MIN_NCHANNELS", "4x"}, `NCCL_MIN_NCHANNELS="4x": not an integer`},
		{[]string{"NCCL_MAX_NCHANNELS", "4294967297"}, `NCCL_MAX_NCHANNELS="4294967297": out of range for a 32-bit integer`},
		{[]string{"NCCL_CROSS_NIC", "3"}, `NCCL_CROSS_NIC="3": out of range 0..2`},
		{[]string{"NCCL_THREAD_THRESHOLDS", "1 2 3"}, `NCCL_THREAD_THRESHOLDS="1 2 3": want 6 integers (Tree LL/LL128/Simple, Ring LL/LL128/Simple), got 3`},
		{[]string{"NCCL_PAT_ENABLE", "yes"}, `NCCL_PAT_ENABLE="yes": not an integer`},
	} {
		_, err := OptionsFromEnv(envOf(tc.kv...))
		if tc.want == "" {
			require.NoError(t, err, "%v", tc.kv)
			continue
		}
		require.EqualError(t, err, tc.want, "%v", tc.kv)
	}

	// Beyond 64 bits: NCCL's ncclLoadParam sees ERANGE and keeps the
	// default, with "Invalid value ... using default".
	var o Options
	var err error
	logged := captureWarnings(t, func() {
		o, err = OptionsFromEnv(envOf("NCCL_NET_OVERHEAD", "99999999999999999999", "NCCL_NTHREADS", "-99999999999999999999"))
	})
	require.NoError(t, err)
	require.Equal(t, DefaultTuneOptions().NetOverheadNs, o.Tune.NetOverheadNs)
	require.Equal(t, DefaultTuneOptions().NThreads, o.Tune.NThreads)
	require.Contains(t, logged, `level=WARN msg="Invalid value 99999999999999999999 for NCCL_NET_OVERHEAD, using default (beyond 64 bits: NCCL 2.28.9 ignores it, src/misc/param.cc ncclLoadParam)"`)
	require.Contains(t, logged, `Invalid value -99999999999999999999 for NCCL_NTHREADS, using default`)

	// Values NCCL corrects, logging it: the same corrections, with a
	// warning naming the variable and value.
	for _, tc := range []struct {
		kv    []string
		check func(o Options)
		want  string
	}{
		{[]string{"NCCL_MIN_NCHANNELS", "1000"}, func(o Options) { require.Equal(t, 64, o.Connect.minNChannels()) },
			`NCCL_MIN_NCHANNELS=1000: User asked for a minimum of 1000 channels, limiting to 64 (NCCL 2.28.9 src/graph/connect.cc ncclMinNchannels)`},
		{[]string{"NCCL_MIN_NRINGS", "-3"}, func(o Options) { require.Equal(t, 0, o.Connect.minNChannels()) },
			`NCCL_MIN_NRINGS=-3: a negative minimum is taken as 0`},
		{[]string{"NCCL_MAX_NCHANNELS", "0"}, func(o Options) { require.Equal(t, 1, o.Connect.maxNChannels()) },
			`NCCL_MAX_NCHANNELS=0: User asked for a maximum of 0 channels, setting it to 1 (NCCL 2.28.9 src/graph/connect.cc ncclMaxNchannels)`},
		{[]string{"NCCL_MAX_NCHANNELS", "1000"}, func(o Options) { require.Equal(t, 64, o.Connect.maxNChannels()) },
			`NCCL_MAX_NCHANNELS=1000: a maximum of 1000 channels is limited to 64 (MAXCHANNELS)`},
		{[]string{"NCCL_WORK_ARGS_BYTES", "40"}, func(o Options) { require.Equal(t, 1, o.Connect.maxNChannels()) },
			`NCCL_WORK_ARGS_BYTES=40: User asked for a maximum of 0 channels, setting it to 1`},
		{[]string{"NCCL_MIN_CTAS", "0"}, func(o Options) { require.Equal(t, 1, o.Connect.MinCTAs) },
			`NCCL_MIN_CTAS=0: NCCL_MIN_CTAS 0 is too low, leaving minCTAs at its default (NCCL 2.28.9 src/init.cc envConfigOverride)`},
		{[]string{"NCCL_MAX_CTAS", "100"}, func(o Options) { require.Equal(t, 64, o.Connect.MaxCTAs) },
			`NCCL_MAX_CTAS=100: maxCTAs 100 is larger than #channels upper limit 64, cap it to 64`},
		{[]string{"NCCL_MIN_CTAS", "9", "NCCL_MAX_CTAS", "4"}, func(o Options) { require.Equal(t, [2]int{4, 4}, [2]int{o.Connect.MinCTAs, o.Connect.MaxCTAs}) },
			`NCCL_MIN_CTAS=9: minCTAs 9 is larger than maxCTAs 4, set both to 4`},
		{[]string{"NCCL_NCHANNELS_PER_NET_PEER", "-1"}, func(o Options) { require.Zero(t, o.Connect.NChannelsPerNetPeer) },
			`NCCL_NCHANNELS_PER_NET_PEER=-1: NCCL_NCHANNELS_PER_NET_PEER -1 is too low`},
		{[]string{"NCCL_NVLS_NCHANNELS", "-5"}, func(o Options) { require.Zero(t, o.Connect.NVLSCTAs) },
			`NCCL_NVLS_NCHANNELS=-5: nvlsCTAs -5 is not a valid value, NCCL will decide the default value automatically`},
	} {
		var o Options
		var err error
		logged := captureWarnings(t, func() { o, err = OptionsFromEnv(envOf(tc.kv...)) })
		require.NoError(t, err, "%v", tc.kv)
		tc.check(o)
		require.Contains(t, logged, "level=WARN", "%v", tc.kv)
		require.Contains(t, logged, tc.want, "%v", tc.kv)
	}

	// Good values log nothing.
	logged = captureWarnings(t, func() {
		_, err = OptionsFromEnv(envOf("NCCL_MIN_NCHANNELS", "4", "NCCL_MAX_NCHANNELS", "0x10", "NCCL_PROTO", "simple", "NCCL_MIN_CTAS", "2"))
	})
	require.NoError(t, err)
	require.Empty(t, strings.TrimSpace(logged))
}
