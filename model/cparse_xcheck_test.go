//go:build cgo_xcheck

// Cross-check of the C-style number parsers against the C library. Go does
// not allow cgo in test files, so the test compiles a small C program with
// the system C compiler ($CC, else cc) and compares its answers with
// cStrtol/cStrtoll/cStrtoull/cStrtof on the table inputs and on many
// generated strings. Run with:
//
//	go test ./model -tags cgo_xcheck -run CrossCheck
package model

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const xcheckC = `
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *h, char *out) {
	size_t n = strlen(h) / 2;
	for (size_t i = 0; i < n; i++) {
		unsigned v;
		if (sscanf(h + 2 * i, "%2x", &v) != 1) return -1;
		out[i] = (char)v;
	}
	out[n] = 0;
	return 0;
}

int main(void) {
	static char line[1 << 16], s[1 << 15];
	while (fgets(line, sizeof line, stdin)) {
		line[strcspn(line, "\n")] = 0;
		if (unhex(line, s)) return 2;
		long l = strtol(s, NULL, 0);
		int i = (int)l; /* NCCL: int value = strtol(...) */
		long long ll = strtoll(s, NULL, 0);
		unsigned long long u0 = strtoull(s, NULL, 0);
		unsigned long long u16 = strtoull(s, NULL, 16);
		float f = strtof(s, NULL);
		unsigned bits;
		memcpy(&bits, &f, sizeof bits);
		printf("%d %lld %llu %llu %u\n", i, ll, u0, u16, bits);
	}
	return 0;
}
`

func TestCParseCrossCheck(t *testing.T) {
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "cc"
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
	dir := t.TempDir()
	src, bin := filepath.Join(dir, "x.c"), filepath.Join(dir, "x")
	require.NoError(t, os.WriteFile(src, []byte(xcheckC), 0o644))
	out, err := exec.Command(cc, "-O1", "-o", bin, src).CombinedOutput()
	require.NoError(t, err, "%s", out)

	inputs := map[string]bool{}
	for _, c := range strtollCases {
		inputs[c.in] = true
	}
	for _, c := range strtofCases {
		inputs[c.in] = true
	}
	for _, s := range []string{"nan", "-nan", "nan(12)", "INFINITY", "-0", "-0x", "1e-45", "1e-46", "0x1p-149", "0x1p-150",
		"0x1p128", "0x1.fffffep127", "340282356779733661637539395458142568448", strings.Repeat("9", 400), "0." + strings.Repeat("0", 400) + "1",
		"0x" + strings.Repeat("f", 40), "0x" + strings.Repeat("0", 40) + "1", strings.Repeat("0", 50) + "17"} {
		inputs[s] = true
	}
	rng := rand.New(rand.NewSource(1))
	const alphabet = "0123456789abcdefxXpPeE+-. \tinftyaINFT\n\x00g"
	for len(inputs) < 30000 {
		n := 1 + rng.Intn(14)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rng.Intn(len(alphabet))]
		}
		inputs[string(b)] = true
	}

	var list []string
	var stdin strings.Builder
	for s := range inputs {
		if strings.IndexByte(s, 0) >= 0 {
			continue // C strings end at NUL; attribute values never hold one.
		}
		list = append(list, s)
		stdin.WriteString(hex.EncodeToString([]byte(s)) + "\n")
	}
	cmd := exec.Command(bin)
	cmd.Stdin = strings.NewReader(stdin.String())
	res, err := cmd.Output()
	require.NoError(t, err)
	sc := bufio.NewScanner(strings.NewReader(string(res)))
	mismatches := 0
	for i := 0; sc.Scan(); i++ {
		require.Less(t, i, len(list))
		s := list[i]
		f := strings.Fields(sc.Text())
		require.Len(t, f, 5)
		wantL, _ := strconv.ParseInt(f[0], 10, 64)
		wantLL, _ := strconv.ParseInt(f[1], 10, 64)
		wantU0, _ := strconv.ParseUint(f[2], 10, 64)
		wantU16, _ := strconv.ParseUint(f[3], 10, 64)
		bits, _ := strconv.ParseUint(f[4], 10, 32)
		wantF := math.Float32frombits(uint32(bits))
		gotF := cStrtof(s)
		var diffs []string
		if got := cStrtol(s); int64(got) != wantL {
			diffs = append(diffs, fmt.Sprintf("strtol %d, C %d", got, wantL))
		}
		if got := cStrtoll(s); got != wantLL {
			diffs = append(diffs, fmt.Sprintf("strtoll %d, C %d", got, wantLL))
		}
		if got := cStrtoull(s, 0); got != wantU0 {
			diffs = append(diffs, fmt.Sprintf("strtoull0 %d, C %d", got, wantU0))
		}
		if got := cStrtoull(s, 16); got != wantU16 {
			diffs = append(diffs, fmt.Sprintf("strtoull16 %d, C %d", got, wantU16))
		}
		sameF := math.Float32bits(gotF) == uint32(bits) ||
			(math.IsNaN(float64(gotF)) && math.IsNaN(float64(wantF)))
		if !sameF {
			diffs = append(diffs, fmt.Sprintf("strtof %g (%#x), C %g (%#x)", gotF, math.Float32bits(gotF), wantF, bits))
		}
		if len(diffs) > 0 {
			mismatches++
			if mismatches <= 30 {
				t.Errorf("%q: %s", s, strings.Join(diffs, "; "))
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Zero(t, mismatches, "of %d inputs", len(list))
	t.Logf("%d inputs agree with the C library", len(list))
}
