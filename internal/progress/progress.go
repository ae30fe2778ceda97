// Package progress draws a one-line progress bar on a terminal, in the
// style of "replay sim": carriage returns and no newline until the bar is
// cleared, at most one redraw per interval. A nil *Bar draws nothing, so
// callers need not check whether progress is on.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Bar is a progress bar on one writer (stderr). Its methods may be called
// from several goroutines.
type Bar struct {
	mu    sync.Mutex
	w     io.Writer
	label string
	last  time.Time
	drawn bool
	every time.Duration
	done  int64
	total int64
}

// New returns a bar on w when forced (a --progress flag) or when w is a
// terminal, else nil.
func New(w io.Writer, force bool) *Bar {
	if !force && !IsTerminal(w) {
		return nil
	}
	return &Bar{w: w, every: 100 * time.Millisecond}
}

// IsTerminal reports whether w is a character device (a terminal).
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// Update sets the bar to done of total with label (what is being done
// now) and draws it, at most once per interval unless the bar was cleared
// since its last drawing.
func (b *Bar) Update(done, total int64, label string) {
	if b == nil || total <= 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done, b.total, b.label = done, total, label
	now := time.Now()
	if b.drawn && now.Sub(b.last) < b.every {
		return
	}
	b.last = now
	b.draw()
}

func (b *Bar) draw() {
	f := min(max(float64(b.done)/float64(b.total), 0), 1)
	const width = 30
	n := int(f * width)
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%% %s\x1b[K", strings.Repeat("#", n), strings.Repeat(".", width-n), 100*f, b.label)
	b.drawn = true
}

// Print clears the bar, writes line (a whole line, newline included) and
// draws the bar again below it, so that other output interleaves with it.
func (b *Bar) Print(w io.Writer, line string) {
	if b == nil {
		io.WriteString(w, line)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	wasDrawn := b.drawn
	if wasDrawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
	io.WriteString(w, line)
	if wasDrawn && b.total > 0 {
		b.draw()
	}
}

// Done clears the bar's line.
func (b *Bar) Done() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.drawn {
		fmt.Fprint(b.w, "\r\x1b[K")
		b.drawn = false
	}
}
