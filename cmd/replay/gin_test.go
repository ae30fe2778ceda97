package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGinTable runs "replay gin" on the default topology: the table and
// the JSON rows agree, busbw is algbw*(n-1)/n, and the p2p column is
// there.
func TestGinTable(t *testing.T) {
	out, stderr, code := runReplay(t, "gin", "-b", "1K", "-e", "16M", "-f", "16", "--contexts", "2", "--p2p")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"# replay gin: embedded:h200x2-nvswitch.xml, 2 rank(s) on 1 node(s), 2 context(s)", "busbw(GB/s)", "p2p(us)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	var rows []ginRow
	var so, se bytes.Buffer
	if err := runGin([]string{"-b", "1K", "-e", "16M", "-f", "16", "--contexts", "2", "--p2p", "--json", "-"}, &so, &se); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(so.Bytes(), &rows); err != nil {
		t.Fatalf("--json -: %v\n%s", err, so.String())
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (1K, 16K, 256K, 4M)", len(rows))
	}
	prev := 0.0
	for _, r := range rows {
		if r.Op != "gin-alltoall" || r.Contexts != 2 || r.Count != r.Bytes/4/2 {
			t.Errorf("row %+v", r)
		}
		if want := r.AlgBW / 2; math.Abs(r.BusBW-want) > 0.002 {
			t.Errorf("%d B: busbw %.3f, want algbw*(n-1)/n = %.3f", r.Bytes, r.BusBW, want)
		}
		if r.TimeUs <= prev || r.P2PTimeUs <= 0 || r.Puts != 2*2*(2+1) {
			t.Errorf("%d B: time %.3f (previous %.3f), p2p %.3f, %d puts", r.Bytes, r.TimeUs, prev, r.P2PTimeUs, r.Puts)
		}
		prev = r.TimeUs
		if !strings.Contains(out, fmt.Sprintf(" %d %12d ", r.Bytes, r.Count)) {
			t.Errorf("table lacks the %d B row:\n%s", r.Bytes, out)
		}
	}
}

// TestGinTopologies: two hosts with RDMA NICs run; two hosts with socket
// NICs cannot run GIN between them and say why.
func TestGinTopologies(t *testing.T) {
	xml := filepath.Join("..", "..", "testdata", "xml", "edge-bcm-gen5-two-level.xml")
	var so, se bytes.Buffer
	if err := runGin([]string{"--topo", xml, "--nodes", "2", "-b", "64K", "-e", "64K", "--json", "-"}, &so, &se); err != nil {
		t.Fatal(err)
	}
	var rows []ginRow
	// 4 ranks x 4 contexts (lanes) x (4 puts + 3 barrier signals)
	if err := json.Unmarshal(so.Bytes(), &rows); err != nil || len(rows) != 1 || rows[0].Puts != 4*4*(4+3) {
		t.Errorf("rows %+v (%v)", rows, err)
	}
	so.Reset()
	err := runGin([]string{"--nodes", "2", "-b", "1K", "-e", "1K"}, &so, &se)
	if err == nil || !strings.Contains(err.Error(), "socket") {
		t.Errorf("socket NICs: want an error naming the socket device, got %v", err)
	}
	for _, args := range [][]string{{"-b", "8", "-e", "4"}, {"-f", "1"}, {"--contexts", "0"}, {"-b", "x"}} {
		if err := runGin(args, &so, &se); !errors.Is(err, errUsage) {
			t.Errorf("%v: want a usage error, got %v", args, err)
		}
	}
}

// TestGinProgress: --progress reports the sizes simulated on stderr
// ("gin: size I/N, B B, T s"); stdout is the same as without it, and
// without it (stderr no terminal) stderr stays empty.
func TestGinProgress(t *testing.T) {
	args := []string{"-b", "1K", "-e", "16K", "-f", "4", "--contexts", "1"}
	var quietOut, quietErr, so, se bytes.Buffer
	require.NoError(t, runGin(args, &quietOut, &quietErr))
	assert.Empty(t, quietErr.String())
	require.NoError(t, runGin(append(args, "--progress"), &so, &se))
	assert.Equal(t, quietOut.String(), so.String())
	lines := strings.Split(strings.TrimSuffix(se.String(), "\n"), "\n")
	require.NotEmpty(t, lines)
	assert.Regexp(t, `^gin: size 1/3, 1024 B, \d+ s$`, lines[0])
	for _, l := range lines {
		assert.Regexp(t, `^gin: size [1-3]/3, \d+ B, \d+ s$`, l)
	}
}
