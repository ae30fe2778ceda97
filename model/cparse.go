package model

import (
	"math"
	"strconv"
	"strings"
)

// NCCL reads numeric attributes with C's strtol/strtoull/strtof: leading
// spaces skipped, an optional sign, base prefix (0x hex, 0 octal, else
// decimal), the longest valid prefix parsed, and 0 when nothing parses. The
// helpers below reproduce that so that odd files load exactly as in NCCL.

// cStrtoll parses like strtoll(s, NULL, 0), saturating on overflow.
func cStrtoll(s string) int64 {
	v, _ := cStrtollRange(s)
	return v
}

// cStrtollOverflows reports whether strtoll(s, NULL, 0) overflows (sets
// errno to ERANGE).
func cStrtollOverflows(s string) bool {
	_, overflow := cStrtollRange(s)
	return overflow
}

// cStrtollRange is strtoll(s, NULL, 0): the value, saturated, and whether
// it overflowed.
func cStrtollRange(s string) (int64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	u, overflow := cParseUint(s, 0)
	if neg {
		if overflow || u > 1<<63 {
			return math.MinInt64, true
		}
		return -int64(u), false
	}
	if overflow || u > math.MaxInt64 {
		return math.MaxInt64, true
	}
	return int64(u), false
}

// Strtol parses s as C's strtoll(s, NULL, 0) does (the way NCCL reads
// numbers from XML, sysfs and the environment): base from the prefix, the
// longest valid prefix, 0 when nothing parses, saturation on overflow.
func Strtol(s string) int64 { return cStrtoll(s) }

// cStrtol parses like NCCL's xmlGetAttrInt: strtol(s, NULL, 0) truncated to
// a C int.
func cStrtol(s string) int {
	return int(int32(cStrtoll(s)))
}

// cStrtoull parses like strtoull(s, NULL, base) (base 0 or 16).
func cStrtoull(s string, base int) uint64 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	u, overflow := cParseUint(s, base)
	if overflow {
		return math.MaxUint64
	}
	if neg {
		return -u
	}
	return u
}

func cParseUint(s string, base int) (uint64, bool) {
	if (base == 0 || base == 16) && len(s) >= 3 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && isHexDigit(s[2]) {
		s, base = s[2:], 16
	} else if base == 0 && len(s) >= 1 && s[0] == '0' {
		base = 8
	} else if base == 0 {
		base = 10
	}
	var u uint64
	overflow := false
	for i := 0; i < len(s); i++ {
		d := digitVal(s[i])
		if d < 0 || d >= base {
			break
		}
		if u > (math.MaxUint64-uint64(d))/uint64(base) {
			overflow = true
		}
		u = u*uint64(base) + uint64(d)
	}
	return u, overflow
}

func isHexDigit(c byte) bool { return digitVal(c) >= 0 && digitVal(c) < 16 }

func digitVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'z':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'Z':
		return int(c-'A') + 10
	}
	return -1
}

// cStrtof parses like strtof(s, NULL): the longest prefix that is a decimal
// or hexadecimal (0x) float, inf, infinity or nan; 0 if none.
func cStrtof(s string) float32 {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	sign := s[:len(s)-len(body)]
	switch {
	case hasPrefixFold(body, "inf"):
		if sign == "-" {
			return float32(math.Inf(-1))
		}
		return float32(math.Inf(1))
	case hasPrefixFold(body, "nan"):
		return float32(math.NaN())
	case len(body) >= 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X'):
		if hex, ok := cHexFloat(body[2:]); ok {
			f, _ := strconv.ParseFloat(sign+hex, 32) // +-Inf on overflow, like strtof
			return float32(f)
		}
	}
	end := 0
	seenDigit, seenDot, seenExp := false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			seenDigit = true
			end = i + 1
		case (c == '+' || c == '-') && (i == 0 || s[i-1] == 'e' || s[i-1] == 'E'):
		case c == '.' && !seenDot && !seenExp:
			seenDot = true
			if seenDigit {
				end = i + 1
			}
		case (c == 'e' || c == 'E') && seenDigit && !seenExp:
			seenExp = true
		default:
			i = len(s)
		}
	}
	if !seenDigit {
		return 0
	}
	f, err := strconv.ParseFloat(strings.TrimRight(s[:end], "eE+-"), 32)
	if err != nil {
		// Out of range: strtof saturates to +-HUGE_VALF.
		return float32(f)
	}
	return float32(f)
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// cHexFloat returns the longest hexadecimal float at the start of s (the
// part after "0x") in a form strconv.ParseFloat accepts, and false when s
// starts with no hex digit.
func cHexFloat(s string) (string, bool) {
	i, digits := 0, 0
	for ; i < len(s) && isHexDigit(s[i]); i++ {
		digits++
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && isHexDigit(s[i]); i++ {
			digits++
		}
	}
	if digits == 0 {
		return "", false
	}
	mant, exp := s[:i], "p0"
	if i < len(s) && (s[i] == 'p' || s[i] == 'P') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		k := j
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k > j {
			exp = s[i:k]
		}
	}
	return "0x" + mant + exp, true
}
