package main

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twinccl/twinccl/internal/progress"
)

// Ranks started by the local launcher talk to it through control lines on
// their stderr: a line starting with ctlPrefix is not printed but read.
//
//	<ctlPrefix>progress DONE TOTAL LABEL   (rank 0, when envProgress is set)
//	<ctlPrefix>error CODE LOST MESSAGE      (a failing rank's last line)
//
// CODE is the rank's exit status, LOST 1 when the error is the loss of a
// peer (the consequence of another rank's failure), MESSAGE one line.
const ctlPrefix = "\x1etwinccl:"

// envProgress asks rank 0 of the local launcher for progress lines.
const envProgress = "TWINCCL_BENCH_PROGRESS"

// sweepProgress shows rank 0's progress through a sweep: a bar on its
// stderr (a rank of Slurm, Open MPI or torchrun on a terminal, or with
// --progress), or progress lines for the local launcher, which draws the
// bar. A nil *sweepProgress shows nothing.
type sweepProgress struct {
	bar   *progress.Bar
	relay io.Writer
	start time.Time
}

// newSweepProgress returns rank 0's progress, nil when it is off: a rank
// of the local launcher relays when the launcher asks (envProgress), any
// other rank 0 draws when force is set or stderr is a terminal.
func newSweepProgress(stderr io.Writer, force bool) *sweepProgress {
	if os.Getenv(envUID) != "" {
		if os.Getenv(envProgress) != "1" {
			return nil
		}
		return &sweepProgress{relay: stderr, start: time.Now()}
	}
	bar := progress.New(stderr, force)
	if bar == nil {
		return nil
	}
	return &sweepProgress{bar: bar, start: time.Now()}
}

// step says that done of total steps are done and what runs now.
func (p *sweepProgress) step(done, total int, what string) {
	if p == nil {
		return
	}
	label := fmt.Sprintf("size %d of %d (%s), %.1f s elapsed", done+1, total, what, time.Since(p.start).Seconds())
	if p.relay != nil {
		fmt.Fprintf(p.relay, "%sprogress %d %d %s\n", ctlPrefix, done, total, label)
		return
	}
	p.bar.Update(int64(done), int64(total), label)
}

// finish clears the bar.
func (p *sweepProgress) finish() {
	if p != nil && p.bar != nil {
		p.bar.Done()
	}
}

// writer is w with the bar cleared before each write (and drawn again
// after it), for output that goes to the same terminal.
func (p *sweepProgress) writer(w io.Writer) io.Writer {
	if p == nil || p.bar == nil {
		return w
	}
	return barWriter{p.bar, w}
}

type barWriter struct {
	bar *progress.Bar
	w   io.Writer
}

func (b barWriter) Write(s []byte) (int, error) {
	b.bar.Print(b.w, string(s))
	return len(s), nil
}

// parseProgress reads a progress control line's payload ("DONE TOTAL LABEL").
func parseProgress(s string) (done, total int64, label string, ok bool) {
	f := strings.SplitN(s, " ", 3)
	if len(f) < 2 {
		return 0, 0, "", false
	}
	d, err1 := strconv.ParseInt(f[0], 10, 64)
	t, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, "", false
	}
	if len(f) == 3 {
		label = f[2]
	}
	return d, t, label, true
}
