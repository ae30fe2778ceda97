package fabric

import (
	"slices"
	"strings"
)

// sortedKeys lists a key set in order, so that messages are deterministic.
func sortedKeys(keys map[string]bool) []string {
	out := make([]string, 0, len(keys))
	for k := range keys {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func known(keys map[string]bool) string { return strings.Join(sortedKeys(keys), ", ") }
