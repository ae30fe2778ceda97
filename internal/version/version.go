// Package version says which twinccl build a binary is: the module
// version, the commit it was built from and the NCCL release whose
// behaviour it reproduces, in one line every command prints the same way.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// NCCL is the NCCL release whose rules the model reproduces.
const NCCL = "2.28.9"

// Revision returns the commit a binary was built from: stamp (the
// Makefile's -X main.revision: 12 hex digits, "+modified" where tracked
// files had changes) when set, else Go's own VCS stamp of a build made in a
// git checkout, else "" (go run, -buildvcs=false, no git).
func Revision(stamp string) string {
	if stamp != "" {
		return stamp
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return ""
	}
	rev = rev[:min(len(rev), 12)]
	if modified {
		rev += "+modified"
	}
	return rev
}

// Line is the version line of binary: "replay (github.com/twinccl/twinccl)
// (devel), revision 0123456789ab, go1.26.8; NCCL 2.28.9 model".
func Line(binary, stamp string) string {
	v := "(devel)"
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		v = info.Main.Version
	}
	rev := Revision(stamp)
	if rev == "" {
		rev = "unknown (make stamps it; so does go build in a git checkout)"
	}
	return fmt.Sprintf("%s (github.com/twinccl/twinccl) %s, revision %s, %s; NCCL %s model", binary, v, rev, runtime.Version(), NCCL)
}
