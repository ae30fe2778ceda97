package model

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected values below are what glibc returns on LP64 (long = 64 bit);
// cparse_xcheck_test.go (build tag cgo_xcheck) checks them, and many more
// inputs, against the C library.

var strtollCases = []struct {
	in   string
	want int64
}{
	{"", 0},
	{"0", 0},
	{"42", 42},
	{"-5", -5},
	{"+7", 7},
	{"0x1f", 31},
	{"0X1F", 31},
	{"0x1fz", 31},
	{"-0x10", -16},
	{"010", 8},
	{"-010", -8},
	{"09", 0},
	{"0778", 63},
	{"  12abc", 12},
	{"\t\n\v\f\r 3", 3},
	{"abc", 0},
	{"0x", 0},
	{"0xg", 0},
	{"-0x", 0},
	{"+", 0},
	{"-", 0},
	{"+-1", 0},
	{"- 1", 0},
	{"1 2", 1},
	{"1e3", 1},
	{"1.9", 1},
	{"00x1", 0},
	{"9223372036854775807", math.MaxInt64},
	{"9223372036854775808", math.MaxInt64},
	{"99999999999999999999999", math.MaxInt64},
	{"0xffffffffffffffff", math.MaxInt64},
	{"0x10000000000000000", math.MaxInt64},
	{"-9223372036854775808", math.MinInt64},
	{"-9223372036854775809", math.MinInt64},
	{"-99999999999999999999999", math.MinInt64},
	{"2147483648", 2147483648},
	{"0xffffffff", 0xffffffff},
}

func TestCStrtoll(t *testing.T) {
	for _, c := range strtollCases {
		require.Equal(t, c.want, cStrtoll(c.in), "strtoll(%q)", c.in)
	}
}

func TestCStrtol(t *testing.T) {
	// NCCL stores strtol's long in an int: the low 32 bits survive.
	cases := []struct {
		in   string
		want int
	}{
		{"0x1f", 31},
		{"010", 8},
		{"  12abc", 12},
		{"-5", -5},
		{"abc", 0},
		{"0x", 0},
		{"2147483647", math.MaxInt32},
		{"2147483648", math.MinInt32},
		{"-2147483648", math.MinInt32},
		{"-2147483649", math.MaxInt32},
		{"4294967296", 0},
		{"4294967297", 1},
		{"0xffffffff", -1},
		{"0x100000005", 5},
		{"9223372036854775807", -1},           // LONG_MAX
		{"99999999999999999999", -1},          // saturates to LONG_MAX
		{"-9223372036854775808", 0},           // LONG_MIN
		{"-99999999999999999999", 0},          // saturates to LONG_MIN
		{"9999999999", 1410065407},            // 0x2540BE3FF
		{"-9999999999", -1410065407},          //
		{"0x7fffffff80000000", math.MinInt32}, // low half only
	}
	for _, c := range cases {
		require.Equal(t, c.want, cStrtol(c.in), "(int)strtol(%q)", c.in)
	}
	for _, c := range strtollCases {
		require.Equal(t, int(int32(c.want)), cStrtol(c.in), "(int)strtol(%q)", c.in)
	}
}

func TestCStrtoull(t *testing.T) {
	cases := []struct {
		in   string
		base int
		want uint64
	}{
		{"", 0, 0},
		{"0x1f", 0, 31},
		{"010", 0, 8},
		{"  12abc", 0, 12},
		{"abc", 0, 0},
		{"0x", 0, 0},
		{"-1", 0, math.MaxUint64},
		{"-5", 0, math.MaxUint64 - 4},
		{"18446744073709551615", 0, math.MaxUint64},
		{"18446744073709551616", 0, math.MaxUint64},
		{"-18446744073709551616", 0, math.MaxUint64},
		{"0xffffffffffffffff", 0, math.MaxUint64},
		{"0x1ffffffffffffffff", 0, math.MaxUint64},
		{"ff", 16, 255},
		{"0xff", 16, 255},
		{"0XFF", 16, 255},
		{"abc", 16, 0xabc},
		{"0x", 16, 0},
		{"0xg", 16, 0},
		{"010", 16, 16},
		{"g", 16, 0},
		{"  -1", 16, math.MaxUint64},
		{"-0x10", 16, math.MaxUint64 - 15},
		{"fffffffffffffffff", 16, math.MaxUint64},
		{"a0b1c2d3e4f50617", 16, 0xa0b1c2d3e4f50617},
		{"1234abcd:5678", 16, 0x1234abcd},
	}
	for _, c := range cases {
		require.Equal(t, c.want, cStrtoull(c.in, c.base), "strtoull(%q, %d)", c.in, c.base)
	}
}

var strtofCases = []struct {
	in   string
	want float32
}{
	{"", 0},
	{"0.000000", 0},
	{"0", 0},
	{"1e3", 1000},
	{"1E3", 1000},
	{"1e+3", 1000},
	{"1e-3", 0.001},
	{"-2.5x", -2.5},
	{".5", 0.5},
	{"5.", 5},
	{"+.5", 0.5},
	{"-.5e1", -5},
	{"  3.25", 3.25},
	{"1.5e3.2", 1500},
	{"1e", 1},
	{"1e+", 1},
	{"1e-x", 1},
	{"1ee3", 1},
	{"5-3", 5},
	{"abc", 0},
	{"-", 0},
	{".", 0},
	{".e1", 0},
	{"e1", 0},
	{"+-1", 0},
	{"0.1", 0.1},
	{"16777217", 16777216}, // rounded to float directly
	{"3.4028235e38", math.MaxFloat32},
	{"1e50", float32(math.Inf(1))},
	{"-1e50", float32(math.Inf(-1))},
	{"1e-50", 0},
	{"1e-40", 1e-40}, // subnormal
	{"0x10", 16},
	{"0X1p3", 8},
	{"-0x1.8p1", -3},
	{"0x.8", 0.5},
	{"0x1.", 1},
	{"0x1p", 1},
	{"0x1p+", 1},
	{"0x1p-2z", 0.25},
	{"0x", 0},
	{"0x.", 0},
	{"0xg", 0},
	{"0x1e3", 0x1e3},
	{"inf", float32(math.Inf(1))},
	{"-INF", float32(math.Inf(-1))},
	{"Infinity", float32(math.Inf(1))},
	{"infinit", float32(math.Inf(1))},
	{"info", float32(math.Inf(1))},
	{"in", 0},
	{"na", 0},
}

func TestCStrtof(t *testing.T) {
	for _, c := range strtofCases {
		require.Equal(t, c.want, cStrtof(c.in), "strtof(%q)", c.in)
	}
	for _, s := range []string{"nan", "NaN", "-nan", "nan(123)", "nanx", " NAN"} {
		require.True(t, math.IsNaN(float64(cStrtof(s))), "strtof(%q) = %v", s, cStrtof(s))
	}
}
