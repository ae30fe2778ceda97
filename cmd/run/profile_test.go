package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCPUProfile: --cpuprofile writes a rank's profile (gzip-compressed
// pprof) under PREFIX.rankR.prof once it stops, and nothing else beside
// it; a prefix in a missing directory fails before the run starts.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "p")
	stop, err := startCPUProfile(prefix, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(profilePath(prefix, 3)); err == nil {
		t.Errorf("the profile is under its name before it stopped")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "p.rank3.prof"))
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile: %d bytes, %v: want a gzip-compressed pprof file", len(b), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files beside the profile: %v", ents)
	}
	if _, err := startCPUProfile(filepath.Join(dir, "no", "such", "p"), 0); err == nil || !strings.Contains(err.Error(), "--cpuprofile") {
		t.Errorf("a prefix in a missing directory: %v", err)
	}
}
