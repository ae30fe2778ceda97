package cuda

import (
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// LibraryCandidates lists the paths to try, in order, when opening a shared
// library that may come from the system or from a Python wheel:
//
//  1. the value of the environment variable env, when env is not "" and the
//     variable is set (then it is the only candidate);
//  2. each of sonames, for the dynamic loader's own search;
//  3. each of sonames inside each of pyDirs (e.g. "nvidia/cu13/lib") under
//     every Python site-packages or dist-packages directory found (the
//     active virtual or conda environment, $PYTHONPATH, the user's and the
//     system's), and under /usr/local/cuda/lib64.
//
// Only files that exist are listed in step 3.
func LibraryCandidates(env string, sonames, pyDirs []string) []string {
	if env != "" {
		if p := os.Getenv(env); p != "" {
			return []string{p}
		}
	}
	out := append([]string(nil), sonames...)
	seen := map[string]bool{}
	add := func(p string) {
		if seen[p] {
			return
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, dir := range pythonLibRoots() {
		for _, sub := range pyDirs {
			for _, so := range sonames {
				add(filepath.Join(dir, sub, so))
			}
		}
	}
	for _, so := range sonames {
		add(filepath.Join("/usr/local/cuda/lib64", so))
	}
	return out
}

// pythonLibRoots returns the site-packages and dist-packages directories
// that may hold NVIDIA's wheels (nvidia/...), most specific first.
func pythonLibRoots() []string {
	var roots []string
	for _, p := range filepath.SplitList(os.Getenv("PYTHONPATH")) {
		if p != "" {
			roots = append(roots, p)
		}
	}
	var prefixes []string
	for _, env := range []string{"VIRTUAL_ENV", "CONDA_PREFIX"} {
		if p := os.Getenv(env); p != "" {
			prefixes = append(prefixes, p)
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		prefixes = append(prefixes, filepath.Join(home, ".local"))
	}
	prefixes = append(prefixes, "/usr/local", "/usr", "/opt/conda")
	for _, pre := range prefixes {
		for _, lib := range []string{"lib", "lib64"} {
			matches, _ := filepath.Glob(filepath.Join(pre, lib, "python3*"))
			// Newest Python first.
			sort.Sort(sort.Reverse(sort.StringSlice(matches)))
			for _, m := range matches {
				if strings.HasSuffix(m, "-config") {
					continue
				}
				roots = append(roots, filepath.Join(m, "site-packages"), filepath.Join(m, "dist-packages"))
			}
		}
	}
	if runtime.GOOS != "linux" {
		return nil
	}
	return roots
}
