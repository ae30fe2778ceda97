package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
)

// profilePath is where rank rank writes the CPU profile of --cpuprofile
// prefix: PREFIX.rankR.prof, one file per rank process.
func profilePath(prefix string, rank int) string {
	return fmt.Sprintf("%s.rank%d.prof", prefix, rank)
}

// startCPUProfile starts profiling this rank's process (every goroutine:
// the proxy's progress loop, the bootstrap, the host side of the
// collectives) into profilePath(prefix, rank). The profile goes to a
// temporary file beside it, renamed into place by the returned stop, so
// that a run cut short leaves no half-written profile under the name.
func startCPUProfile(prefix string, rank int) (stop func() error, err error) {
	path := profilePath(prefix, rank)
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		err := f.Close()
		if err == nil {
			err = os.Rename(f.Name(), path)
		}
		if err != nil {
			os.Remove(f.Name())
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}
