package fabric

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadShippedFabrics(t *testing.T) {
	f, err := ReadFile(filepath.Join("..", "..", "testdata", "fabric", "rail-1024-dgx-h100.yaml"))
	require.NoError(t, err)
	require.Equal(t, 128, f.Hosts)
	require.Equal(t, Leaf{Kind: KindRail, Hosts: 32, Uplinks: 32, Oversubscription: 1, LatencyUs: 0.3}, f.Leaf)
	require.Equal(t, &Spine{LatencyUs: 0.3}, f.Spine)
	require.True(t, f.AdaptiveRouting)
	require.NoError(t, f.Check(128))
	require.ErrorContains(t, f.Check(64), "written for 128 hosts, the cluster has 64")

	g, err := ReadFile(filepath.Join("..", "..", "testdata", "fabric", "tor-2to1-ecmp.yaml"))
	require.NoError(t, err)
	require.Equal(t, Leaf{Kind: KindToR, Hosts: 4, Uplinks: 8, Oversubscription: 2, LatencyUs: 0.5}, g.Leaf)
	require.False(t, g.AdaptiveRouting)
	require.NoError(t, g.Check(16))
}

// TestRouteRail: on a rail level NICs of the same index of one group share
// a leaf; another rail or another group goes through the spine, with two
// more switch passes.
func TestRouteRail(t *testing.T) {
	f := &Fabric{File: "f.yaml", Leaf: Leaf{Kind: KindRail, Hosts: 32, Uplinks: 32, Oversubscription: 1, LatencyUs: 0.3},
		Spine: &Spine{LatencyUs: 0.2}, AdaptiveRouting: true}
	h, err := f.Route(Port{0, 3}, Port{31, 3}, 0)
	require.NoError(t, err)
	require.Equal(t, Hop{Up: LeafID{0, 3}, Down: LeafID{0, 3}, Uplink: -1}, h)
	h, err = f.Route(Port{0, 3}, Port{1, 4}, 0)
	require.NoError(t, err)
	require.True(t, h.ViaSpine)
	require.Equal(t, [2]LeafID{{0, 3}, {0, 4}}, [2]LeafID{h.Up, h.Down})
	require.InDelta(t, 0.5, h.ExtraLatencyUs, 1e-12)
	require.Equal(t, -1, h.Uplink, "adaptive routing takes every uplink")
	h, err = f.Route(Port{0, 3}, Port{32, 3}, 0)
	require.NoError(t, err)
	require.Equal(t, [2]LeafID{{0, 3}, {1, 3}}, [2]LeafID{h.Up, h.Down})

	// A ToR level puts all NICs of a group under one leaf.
	f.Leaf.Kind = KindToR
	h, err = f.Route(Port{0, 3}, Port{1, 4}, 0)
	require.NoError(t, err)
	require.False(t, h.ViaSpine)
	require.Equal(t, LeafID{0, 0}, h.Up)
}

// TestRouteECMP: without adaptive routing a transfer keeps one uplink,
// the same every time, and the hash spreads many transfers over all of
// them, each getting a share near 1/n (a broken hash, e.g. always 0 or
// ignoring the channel, fails).
func TestRouteECMP(t *testing.T) {
	f := &Fabric{File: "f.yaml", Leaf: Leaf{Kind: KindToR, Hosts: 4, Uplinks: 8, Oversubscription: 2}, Spine: &Spine{}}
	count := make([]int, 8)
	for ch := 0; ch < 64; ch++ {
		for b := 4; b < 68; b++ {
			h, err := f.Route(Port{0, 0}, Port{b, 0}, ch)
			require.NoError(t, err)
			again, _ := f.Route(Port{0, 0}, Port{b, 0}, ch)
			require.Equal(t, h, again)
			require.True(t, h.ViaSpine)
			count[h.Uplink]++
		}
	}
	for k, c := range count {
		require.InDelta(t, 64*64/8, c, 64*64/8*0.2, "uplink %d", k)
	}
	byCh := map[int]bool{}
	for ch := 0; ch < 16; ch++ {
		h, _ := f.Route(Port{0, 0}, Port{4, 0}, ch)
		byCh[h.Uplink] = true
	}
	require.Greater(t, len(byCh), 1, "channels of one NIC pair spread over uplinks")
}

func TestRouteErrors(t *testing.T) {
	f := &Fabric{File: "f.yaml", Hosts: 8, Leaf: Leaf{Kind: KindToR, Hosts: 4, Uplinks: 1, Oversubscription: 1}}
	_, err := f.Route(Port{0, 0}, Port{4, 0}, 0)
	require.EqualError(t, err, "f.yaml: NICs 0.0 and 4.0 are under different leaves (leaf0.0, leaf1.0) and the fabric has no spine")
	_, err = f.Route(Port{0, 0}, Port{9, 0}, 0)
	require.EqualError(t, err, "f.yaml: host 9 is outside the fabric's 8 hosts")
	f.Hosts = 0
	require.ErrorContains(t, f.Check(5), "5 hosts fill 2 leaf groups of 4 and the fabric has no spine")
	require.NoError(t, f.Check(4))
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", "", "x.yaml: empty fabric file"},
		{"syntax", "leaf: [", "x.yaml: yaml: line 1"},
		{"not a mapping", "- 1\n", "x.yaml:1: the file must be a mapping"},
		{"unknown key", "leaf:\n  kind: tor\n  hosts: 4\nspine: {}\nrails: 8\n", `x.yaml:5: unknown key "rails" in the file (known: adaptive_routing, hosts, leaf, name, spine)`},
		{"missing leaf", "name: a\n", `x.yaml:1: the file lacks the required key "leaf"`},
		{"missing hosts", "leaf:\n  kind: tor\n", `x.yaml:2: leaf lacks the required key "hosts"`},
		{"bad kind", "leaf:\n  kind: fat\n  hosts: 4\n", `x.yaml:2: leaf.kind "fat": want rail or tor`},
		{"zero hosts", "leaf:\n  kind: tor\n  hosts: 0\n", `x.yaml:3: leaf.hosts "0": want an integer in 1..1048576`},
		{"bad oversubscription", "leaf:\n  kind: tor\n  hosts: 4\n  oversubscription: 0.5\nspine: {}\n", `x.yaml:4: leaf.oversubscription "0.5": want a number in 1..1024`},
		{"nan latency", "leaf:\n  kind: tor\n  hosts: 4\n  latency_us: .nan\n", `x.yaml:4: leaf.latency_us ".nan"`},
		{"bad bool", "leaf:\n  kind: tor\n  hosts: 4\nadaptive_routing: yes\n", `x.yaml:4: adaptive_routing "yes": want true or false`},
		{"duplicate", "leaf:\n  kind: tor\n  kind: rail\n  hosts: 4\n", `x.yaml:3: key "kind" given twice in leaf`},
		{"rail without spine", "leaf:\n  kind: rail\n  hosts: 4\n", "x.yaml:2: a rail leaf level needs a spine"},
		{"uplinks without spine", "leaf:\n  kind: tor\n  hosts: 4\n  uplinks: 2\n", "x.yaml:1: leaf.uplinks and leaf.oversubscription describe links to a spine"},
		{"hosts without spine", "hosts: 8\nleaf:\n  kind: tor\n  hosts: 4\n", "x.yaml:1: 8 hosts fill 2 leaf groups of 4"},
		{"two documents", "leaf:\n  kind: tor\n  hosts: 4\n---\nleaf: {}\n", "x.yaml:4: a second YAML document"},
		{"list value", "leaf:\n  kind: [tor]\n  hosts: 4\n", "x.yaml:2: leaf.kind must be a single value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("x.yaml", []byte(tc.yaml))
			require.ErrorContains(t, err, tc.want)
		})
	}
	_, err := ReadFile(filepath.Join(t.TempDir(), "none.yaml"))
	require.ErrorContains(t, err, "none.yaml")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("leaf:\n  kind: rail\n  hosts: 32\n  uplinks: 32\nspine:\n  latency_us: 1\nadaptive_routing: true\n"))
	f.Add([]byte("leaf: {kind: tor, hosts: 2}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		fb, err := Parse("fuzz.yaml", data)
		if err != nil {
			return
		}
		require.GreaterOrEqual(t, fb.Leaf.Hosts, 1)
		require.GreaterOrEqual(t, fb.Leaf.Uplinks, 1)
		if fb.Spine != nil {
			_, err := fb.Route(Port{0, 0}, Port{fb.Leaf.Hosts, 1}, 3)
			if fb.Hosts == 0 || fb.Leaf.Hosts < fb.Hosts {
				require.NoError(t, err)
			}
		}
	})
}
