package traces

import (
	"fmt"
	"strconv"
	"strings"
)

// Dep is one dependency of a call (CallRow.Deps): the call Call of
// communicator Comm, on the same process, must have ended GapNs
// nanoseconds (host work between them, e.g. a Chakra compute node) before
// the dependent call may start.
type Dep struct {
	Comm  uint64
	Call  int64
	GapNs int64
}

// maxDeps bounds the dependencies of one call that ParseDeps accepts.
const maxDeps = 1 << 12

// FormatDeps writes deps as CallRow.Deps holds them: "COMM:CALL" with the
// communicator in hex, "+GAP" (ns) when the gap is not 0, comma-separated,
// in the order given.
func FormatDeps(deps []Dep) string {
	var b strings.Builder
	for i, d := range deps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%#x:%d", d.Comm, d.Call)
		if d.GapNs != 0 {
			fmt.Fprintf(&b, "+%d", d.GapNs)
		}
	}
	return b.String()
}

// ParseDeps reads CallRow.Deps ("" is no dependency).
func ParseDeps(s string) ([]Dep, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) > maxDeps {
		return nil, fmt.Errorf("deps: %d dependencies, at most %d", len(parts), maxDeps)
	}
	deps := make([]Dep, 0, len(parts))
	for _, p := range parts {
		ref, gap, hasGap := strings.Cut(p, "+")
		c, n, ok := strings.Cut(ref, ":")
		comm, err1 := strconv.ParseUint(c, 0, 64)
		call, err2 := strconv.ParseInt(n, 10, 64)
		if !ok || err1 != nil || err2 != nil || call < 0 {
			return nil, fmt.Errorf("deps: %q is not COMM:CALL[+GAP_NS]", p)
		}
		d := Dep{Comm: comm, Call: call}
		if hasGap {
			g, err := strconv.ParseInt(gap, 10, 64)
			if err != nil || g < 0 {
				return nil, fmt.Errorf("deps: %q: gap %q is not a duration in ns", p, gap)
			}
			d.GapNs = g
		}
		deps = append(deps, d)
	}
	return deps, nil
}
