package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/twinccl/twinccl/internal/progress"
)

// progressBar draws a one-line progress bar on a terminal (carriage
// returns, no newlines until done). A nil *progressBar draws nothing, so
// callers need not check whether one is on.
type progressBar struct {
	w     io.Writer
	label string
	last  time.Time
	drawn bool
	every time.Duration
}

// newProgressBar returns a bar on stderr when forced (--progress) or when
// stderr is a terminal, else nil.
func newProgressBar(stderr io.Writer, force bool) *progressBar {
	if !force && !progress.IsTerminal(stderr) {
		return nil
	}
	return &progressBar{w: stderr, every: 100 * time.Millisecond}
}

// setLabel names what the bar measures now (for example the current call).
func (b *progressBar) setLabel(s string) {
	if b != nil {
		b.label = s
	}
}

// update draws done of total, at most every b.every.
func (b *progressBar) update(done, total int64) {
	if b == nil || total <= 0 {
		return
	}
	now := time.Now()
	if b.drawn && now.Sub(b.last) < b.every {
		return
	}
	b.last = now
	b.drawn = true
	f := min(max(float64(done)/float64(total), 0), 1)
	const width = 30
	n := int(f * width)
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%% %s\x1b[K", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*f, b.label)
}

// done clears the bar's line.
func (b *progressBar) done() {
	if b != nil && b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
}

// progressLine reports on stderr what a long command is doing ("calibrate:
// evaluation 120 of at most 3000, loss 0.034900, 35 s"), never on stdout,
// whose output is parsed. On a terminal it redraws one line in place
// (carriage returns) at most every 100 ms; where stderr is no terminal
// and --progress forces it, it writes whole lines, at most one a second
// (the first report of every stage always). A nil *progressLine reports nothing, so
// callers need not check whether one is on.
type progressLine struct {
	w      io.Writer
	tty    bool
	prefix string
	start  time.Time
	last   time.Time
	every  time.Duration
	shown  bool   // some report was written
	drawn  bool   // a line is drawn in place (tty) and not cleared
	format string // of the last report written
}

// newProgressLine returns a progress reporter on stderr, its reports
// prefixed with "cmd: ", when forced (--progress) or when stderr is a
// terminal, else nil.
func newProgressLine(stderr io.Writer, force bool, cmd string) *progressLine {
	tty := progress.IsTerminal(stderr)
	if !force && !tty {
		return nil
	}
	p := &progressLine{w: stderr, tty: tty, prefix: cmd + ": ", start: time.Now(), every: time.Second}
	if tty {
		p.every = 100 * time.Millisecond
	}
	return p
}

// report says what the command is doing now, unless it reported the
// same kind of thing (the same format) less than the interval ago: the
// first report of a new stage (a new format) is always written.
func (p *progressLine) report(format string, args ...any) {
	if p == nil {
		return
	}
	now := time.Now()
	if p.shown && format == p.format && now.Sub(p.last) < p.every {
		return
	}
	p.last, p.shown, p.format = now, true, format
	msg := p.prefix + fmt.Sprintf(format, args...)
	if p.tty {
		fmt.Fprintf(p.w, "\r%s\x1b[K", msg)
		p.drawn = true
		return
	}
	fmt.Fprintln(p.w, msg)
}

// elapsed is the time since the reporter started, as reports give it.
func (p *progressLine) elapsed() string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf("%.0f s", time.Since(p.start).Seconds())
}

// Write writes b to stderr below the progress: it clears a line drawn in
// place first, so that notes and warnings keep lines of their own.
func (p *progressLine) Write(b []byte) (int, error) {
	p.clear()
	return p.w.Write(b)
}

// writer is where a command that reports progress writes its other
// notes on stderr: through p (which clears its line first), or stderr
// itself without progress.
func (p *progressLine) writer(stderr io.Writer) io.Writer {
	if p == nil {
		return stderr
	}
	return p
}

// clear removes a line drawn in place.
func (p *progressLine) clear() {
	if p != nil && p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// done ends the reports: a line drawn in place is cleared.
func (p *progressLine) done() { p.clear() }
