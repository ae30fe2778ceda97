package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
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
	if !force && !isTerminal(stderr) {
		return nil
	}
	return &progressBar{w: stderr, every: 100 * time.Millisecond}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
