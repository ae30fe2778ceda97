package progress

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNilBar: a nil bar (progress off) draws nothing and still passes
// lines through.
func TestNilBar(t *testing.T) {
	var b *Bar
	var out bytes.Buffer
	b.Update(1, 2, "x")
	b.Print(&out, "line\n")
	b.Done()
	assert.Equal(t, "line\n", out.String())
	assert.Nil(t, New(&out, false), "a buffer is no terminal: no bar unless forced")
}

// TestBarDrawsAndClears: a forced bar draws done/total with its label on
// one line, clears itself around printed lines and draws itself again
// below them, and Done clears it.
func TestBarDrawsAndClears(t *testing.T) {
	var w bytes.Buffer
	b := New(&w, true)
	require.NotNil(t, b)
	b.Update(1, 4, "size 2 of 4")
	s := w.String()
	assert.True(t, strings.HasPrefix(s, "\r["), "a bar starts with a carriage return: %q", s)
	assert.Contains(t, s, " 25.0% size 2 of 4")
	assert.NotContains(t, s, "\n")
	w.Reset()
	var out bytes.Buffer
	b.Print(&out, "row\n")
	assert.Equal(t, "row\n", out.String())
	assert.True(t, strings.HasPrefix(w.String(), "\r\x1b[K"), "cleared before the line: %q", w.String())
	assert.Contains(t, w.String(), "size 2 of 4", "drawn again after the line")
	w.Reset()
	b.Done()
	assert.Equal(t, "\r\x1b[K", w.String())
	w.Reset()
	b.Done()
	assert.Empty(t, w.String(), "a cleared bar is not cleared twice")
}
