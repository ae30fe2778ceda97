package hwcmp

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/twinccl/twinccl/exec/sim"
)

// svgSeries is one line of the plot.
type svgSeries struct {
	name   string
	color  string
	dash   string // stroke-dasharray, "" for solid
	marker string // circle, square, triangle, diamond
	x, y   []float64
	// hollow marks the points of disturbed rows (drawn unfilled)
	hollow []bool
}

// plot geometry (pixels).
const (
	svgW      = 820
	svgH      = 653
	svgLeft   = 80
	svgRight  = 24
	svgTop    = 91
	svgMainH  = 330
	svgGap    = 62
	svgErrH   = 110
	svgLegend = 40
)

// WriteSVG writes the report's busbw-vs-size plot (log-log, measured and
// simulated) with a panel of the simulation's error per size underneath.
func WriteSVG(w io.Writer, rep *Report, title string) error {
	gs := rep.Groups
	if len(gs) == 0 {
		return fmt.Errorf("svg: no rows to plot")
	}
	ours, ncclName := "hardware (ours)", "NCCL"
	if rep.Input.Kind == KindTrace {
		ours = "hardware (ours, traced kernel)"
	}
	var ser []svgSeries
	add := func(s svgSeries, get func(g *Group) float64, hollow func(g *Group) bool) {
		for i := range gs {
			if v := get(&gs[i]); v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) {
				s.x = append(s.x, float64(gs[i].Bytes))
				s.y = append(s.y, v)
				s.hollow = append(s.hollow, hollow != nil && hollow(&gs[i]))
			}
		}
		if len(s.x) > 0 {
			ser = append(ser, s)
		}
	}
	disturbed := false // some row was disturbed
	for _, g := range gs {
		disturbed = disturbed || g.Disturbed || g.NCCLDisturbed
	}
	oursDisturbed := func(g *Group) bool { return g.Disturbed }
	ncclDisturbed := func(g *Group) bool { return g.NCCLDisturbed }
	add(svgSeries{name: ours, color: "#1f77b4", marker: "circle"}, func(g *Group) float64 { return g.BusBW }, oursDisturbed)
	add(svgSeries{name: ncclName, color: "#ff7f0e", marker: "square"}, func(g *Group) float64 { return g.NCCLBusBW }, ncclDisturbed)
	differ := false
	for _, g := range gs {
		if g.NCCLUs > 0 && g.SimNCCLUs != g.SimUs {
			differ = true
		}
	}
	simName := "simulation"
	if differ {
		simName = "simulation (our executor's algorithm/protocol/channels)"
	}
	add(svgSeries{name: simName, color: "#2ca02c", dash: "7,4", marker: "triangle"}, func(g *Group) float64 { return g.SimBusBW }, nil)
	if differ {
		add(svgSeries{name: "simulation (tuner's choice, as NCCL runs)", color: "#9467bd", dash: "2,3", marker: "diamond"},
			func(g *Group) float64 {
				if g.NCCLUs > 0 {
					return g.SimNCCLBusBW
				}
				return 0
			}, nil)
	}
	if len(ser) == 0 {
		return fmt.Errorf("svg: no positive busbw to plot")
	}
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, s := range ser {
		for i := range s.x {
			xmin, xmax = math.Min(xmin, s.x[i]), math.Max(xmax, s.x[i])
			ymin, ymax = math.Min(ymin, s.y[i]), math.Max(ymax, s.y[i])
		}
	}
	// x: powers of two around the sizes; y: decades around the busbw.
	lx0, lx1 := math.Floor(math.Log2(xmin)), math.Ceil(math.Log2(xmax))
	if lx1 <= lx0 {
		lx0, lx1 = lx0-1, lx1+1
	}
	ly0, ly1 := math.Floor(math.Log10(ymin)), math.Ceil(math.Log10(ymax))
	if ly1 <= ly0 {
		ly1 = ly0 + 1
	}
	plotW := float64(svgW - svgLeft - svgRight)
	px := func(x float64) float64 { return svgLeft + (math.Log2(x)-lx0)/(lx1-lx0)*plotW }
	py := func(y float64) float64 { return svgTop + (ly1-math.Log10(y))/(ly1-ly0)*svgMainH }

	b := bufio.NewWriter(w)
	p := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	p(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	p(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="Helvetica, Arial, sans-serif" font-size="12">`+"\n", svgW, svgH, svgW, svgH)
	p(`<rect x="0" y="0" width="%d" height="%d" fill="white"/>`+"\n", svgW, svgH)
	p(`<text x="%d" y="24" font-size="%s" font-weight="bold">%s</text>`+"\n", svgLeft, fitFont(title, 16), xmlEscape(title))
	parts, settings := subtitle(rep)
	subLines := []string{strings.Join(parts, "; ")}
	if len(wrapHeader(subLines[0], 11, 2)) > 1 {
		subLines = parts // one line per column rather than a break mid-phrase
	}
	for i, line := range subLines {
		p(`<text x="%d" y="%d" font-size="%s" fill="#444">%s</text>`+"\n", svgLeft, 44+13*i, fitFont(line, 11), xmlEscape(line))
	}
	for i, line := range wrapHeader(settings, svgSettingsPx, 2) {
		p(`<text x="%d" y="%d" font-size="%s" fill="#444">%s</text>`+"\n", svgLeft, 45+13*(len(subLines)+i), fitFont(line, svgSettingsPx), xmlEscape(line))
	}

	// Main panel: grid, ticks, labels.
	x0, x1 := float64(svgLeft), float64(svgLeft)+plotW
	p(`<g stroke="#e4e4e4" stroke-width="1">` + "\n")
	for d := ly0; d <= ly1; d++ {
		for m := 1; m <= 9; m++ {
			v := float64(m) * math.Pow(10, d)
			if math.Log10(v) > ly1+1e-9 {
				break
			}
			col := ""
			if m != 1 {
				col = ` stroke="#f3f3f3"`
			}
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"%s/>`+"\n", x0, py(v), x1, py(v), col)
		}
	}
	step := xStep(lx1 - lx0)
	// Ticks at every step-th power of two from the smallest size, so that
	// they fall on a sweep's sizes.
	tick := func(e float64) bool { return int(e-lx0)%step == 0 }
	for e := lx0; e <= lx1; e++ {
		if tick(e) {
			p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d"/>`+"\n", px(math.Exp2(e)), svgTop, px(math.Exp2(e)), svgTop+svgMainH)
		}
	}
	p("</g>\n")
	p(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="none" stroke="#333"/>`+"\n", x0, svgTop, plotW, svgMainH)
	for d := ly0; d <= ly1; d++ {
		v := math.Pow(10, d)
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x0-5, py(v), x0, py(v))
		p(`<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-8, py(v)+4, decLabel(d))
	}
	p(`<text transform="translate(20,%d) rotate(-90)" text-anchor="middle">bus bandwidth (GB/s, log scale)</text>`+"\n", svgTop+svgMainH/2)

	// Series.
	for _, s := range ser {
		var pts []string
		for i := range s.x {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(s.x[i]), py(s.y[i])))
		}
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		p(`<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", s.color, dash, strings.Join(pts, " "))
		for i := range s.x {
			marker(b, s.marker, s.color, px(s.x[i]), py(s.y[i]), s.hollow[i])
		}
	}

	// Error panel: (sim - measured) / measured per size.
	ey0 := float64(svgTop + svgMainH + svgGap)
	var lim float64 = 10
	for _, g := range gs {
		for _, e := range []float64{g.Err, g.NCCLErr} {
			if !math.IsNaN(e) {
				lim = math.Max(lim, math.Min(100, math.Abs(100*e)))
			}
		}
	}
	lim = math.Ceil(lim/10) * 10
	ey := func(e float64) float64 {
		e = math.Max(-lim, math.Min(lim, e))
		return ey0 + (lim-e)/(2*lim)*svgErrH
	}
	p(`<g stroke="#e4e4e4">` + "\n")
	for _, e := range []float64{-lim, -lim / 2, 0, lim / 2, lim} {
		c := ""
		if e == 0 {
			c = ` stroke="#999"`
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"%s/>`+"\n", x0, ey(e), x1, ey(e), c)
	}
	for e := lx0; e <= lx1; e++ {
		if tick(e) {
			p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f"/>`+"\n", px(math.Exp2(e)), ey0, px(math.Exp2(e)), ey0+svgErrH)
		}
	}
	p("</g>\n")
	p(`<rect x="%.1f" y="%.1f" width="%.1f" height="%d" fill="none" stroke="#333"/>`+"\n", x0, ey0, plotW, svgErrH)
	for _, e := range []float64{-lim, -lim / 2, 0, lim / 2, lim} {
		p(`<text x="%.1f" y="%.1f" text-anchor="end">%+.0f%%</text>`+"\n", x0-8, ey(e)+4, e)
	}
	p(`<text transform="translate(20,%.1f) rotate(-90)" text-anchor="middle">sim error</text>`+"\n", ey0+svgErrH/2)
	caption := "circles vs ours, squares vs NCCL"
	if disturbed {
		caption += "; hollow: disturbed rows"
	}
	p(`<text x="%.1f" y="%.1f" font-size="11" fill="#444">simulation error (sim − hw) / hw, clamped to ±%.0f%%: %s</text>`+"\n", x0, ey0-6, lim, caption)
	for _, es := range []struct {
		color, mark string
		get         func(g *Group) float64
		hollow      func(g *Group) bool
	}{{"#1f77b4", "circle", func(g *Group) float64 { return g.Err }, oursDisturbed}, {"#ff7f0e", "square", func(g *Group) float64 { return g.NCCLErr }, ncclDisturbed}} {
		var pts []string
		for i := range gs {
			e := es.get(&gs[i])
			if math.IsNaN(e) || math.IsInf(e, 0) {
				continue
			}
			x, y := px(float64(gs[i].Bytes)), ey(100*e)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			marker(b, es.mark, es.color, x, y, es.hollow(&gs[i]))
		}
		if len(pts) > 1 {
			p(`<polyline fill="none" stroke="%s" stroke-width="1.2" points="%s"/>`+"\n", es.color, strings.Join(pts, " "))
		}
	}
	// x labels under the error panel (shared axis).
	for e := lx0; e <= lx1; e++ {
		if !tick(e) {
			continue
		}
		x := px(math.Exp2(e))
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x, ey0+svgErrH, x, ey0+svgErrH+5)
		p(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#333"/>`+"\n", x, svgTop+svgMainH, x, svgTop+svgMainH+5)
		p(`<text x="%.1f" y="%d" text-anchor="middle" font-size="11">%s</text>`+"\n", x, svgTop+svgMainH+18, sizeLabel(int(e)))
		p(`<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11">%s</text>`+"\n", x, ey0+svgErrH+18, sizeLabel(int(e)))
	}
	p(`<text x="%.1f" y="%.1f" text-anchor="middle">message size (bytes, log scale; nccl-tests size)</text>`+"\n", x0+plotW/2, ey0+svgErrH+36)

	// Legend, inside the main panel's top left.
	lx, ly := x0+12, float64(svgTop)+16
	lh := 18.0
	lines := len(ser)
	if disturbed {
		lines++
	}
	p(`<rect x="%.1f" y="%.1f" width="%d" height="%.1f" fill="white" fill-opacity="0.85" stroke="#bbb"/>`+"\n", lx-6, ly-12, 420, lh*float64(lines)+6)
	for i, s := range ser {
		y := ly + lh*float64(i)
		dash := ""
		if s.dash != "" {
			dash = fmt.Sprintf(` stroke-dasharray="%s"`, s.dash)
		}
		p(`<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/>`+"\n", lx, y-4, lx+34, y-4, s.color, dash)
		marker(b, s.marker, s.color, lx+17, y-4, false)
		p(`<text x="%.1f" y="%.1f">%s</text>`+"\n", lx+42, y, xmlEscape(s.name))
	}
	if disturbed {
		y := ly + lh*float64(len(ser))
		marker(b, "circle", "#555", lx+10, y-4, true)
		marker(b, "square", "#555", lx+24, y-4, true)
		p(`<text x="%.1f" y="%.1f">disturbed row: median repetition over %gx the best</text>`+"\n", lx+42, y, sim.DisturbedRatio)
	}
	p("</svg>\n")
	return b.Flush()
}

// subtitle states the errors of the report, one part per column (drawn
// on one line where they fit, else one line each), and the topology,
// settings and timing.
func subtitle(rep *Report) ([]string, string) {
	var parts []string
	for _, col := range []string{ColOurs, ColNCCL} {
		if s, ok := rep.Stat(col, "all", BucketAll); ok {
			name := "ours"
			if col == ColNCCL {
				name = "NCCL"
			}
			part := fmt.Sprintf("sim vs %s: median |err| %.1f%%, max %.1f%%, bias %+.1f%%", name, 100*s.MedianAbs, 100*s.MaxAbs, 100*s.Bias)
			if st, ok := rep.Stat(col, "all", BucketSteady); ok {
				part += fmt.Sprintf(" (steady rows %.1f%%, %.1f%%)", 100*st.MedianAbs, 100*st.MaxAbs)
			}
			parts = append(parts, part)
		}
	}
	t := rep.Topology
	if rep.Settings != "" {
		t += ", " + rep.Settings
	}
	if rep.Input.Kind == KindJSON && rep.Input.Medians {
		t += "; CUDA-graph-timed medians of repetitions"
	} else if rep.Input.Kind == KindJSON {
		t += "; CUDA-graph-timed means"
	} else {
		t += "; traced kernel times"
	}
	return parts, t
}

// xStep is the spacing, in powers of two, of the x labels.
func xStep(span float64) int {
	switch {
	case span <= 8:
		return 1
	case span <= 26:
		return 2
	case span <= 40:
		return 4
	}
	return int(math.Ceil(span/40)) * 10
}

// sizeLabel names 2^e bytes.
func sizeLabel(e int) string {
	switch {
	case e < 0:
		return fmt.Sprintf("2^%d B", e)
	case e < 10:
		return fmt.Sprintf("%d B", 1<<e)
	case e < 20:
		return fmt.Sprintf("%d KiB", 1<<(e-10))
	case e < 30:
		return fmt.Sprintf("%d MiB", 1<<(e-20))
	case e < 40:
		return fmt.Sprintf("%d GiB", 1<<(e-30))
	}
	return fmt.Sprintf("2^%d B", e)
}

// decLabel names 10^d.
func decLabel(d float64) string {
	if d >= 0 {
		return fmt.Sprintf("%.0f", math.Pow(10, d))
	}
	return fmt.Sprintf("%.*f", int(-d), math.Pow(10, d))
}

// marker draws one point's marker; hollow draws a circle or square
// unfilled (a disturbed row; triangles and diamonds are always hollow).
func marker(w io.Writer, kind, color string, x, y float64, hollow bool) {
	fill := fmt.Sprintf(`fill="%s"`, color)
	if hollow {
		fill = fmt.Sprintf(`fill="white" stroke="%s" stroke-width="1.5"`, color)
	}
	switch kind {
	case "square":
		fmt.Fprintf(w, `<rect x="%.1f" y="%.1f" width="7" height="7" %s/>`+"\n", x-3.5, y-3.5, fill)
	case "triangle":
		fmt.Fprintf(w, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="white" stroke="%s" stroke-width="1.5"/>`+"\n", x, y-5, x-4.5, y+3.5, x+4.5, y+3.5, color)
	case "diamond":
		fmt.Fprintf(w, `<polygon points="%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f" fill="white" stroke="%s" stroke-width="1.5"/>`+"\n", x, y-5, x+5, y, x, y+5, x-5, y, color)
	default:
		fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="3.5" %s/>`+"\n", x, y, fill)
	}
}

// xmlEscape escapes text for an SVG text node or attribute.
func xmlEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			if r < 0x20 && r != '\t' {
				continue
			}
			b.WriteRune(r)
		}
	}
	return b.String()
}

// svgSettingsPx is the font size of the header's settings lines.
const svgSettingsPx = 10

// The measure of a header line (fitFont, wrapHeader): the width it may
// take, and about how wide a character is, in em.
const (
	headerWidth = float64(svgW - svgLeft - 8)
	headerEm    = 0.62
)

// wrapHeader splits the header text s into at most maxLines lines, at
// spaces, each as long as fits the image's width at px (the measure of
// fitFont), so that a long line of settings (a topology path and a dozen
// NCCL_* variables) stays legible instead of shrinking; the last line
// takes what is left (fitFont draws it smaller if it must).
func wrapHeader(s string, px float64, maxLines int) []string {
	fits := int(headerWidth / (headerEm * px))
	var lines []string
	for len(lines) < maxLines-1 && utf8.RuneCountInString(s) > fits {
		r := []rune(s)
		cut := strings.LastIndex(string(r[:fits+1]), " ")
		if cut <= 0 {
			break
		}
		lines = append(lines, s[:cut])
		s = strings.TrimLeft(s[cut:], " ")
	}
	return append(lines, s)
}

// fitFont is the font size of a header line of text s: px, or less when
// the line, at about 0.62 em per character, would run past the image's
// edge (down to half of px; a longer line is cut).
func fitFont(s string, px float64) string {
	if need := float64(utf8.RuneCountInString(s)) * headerEm * px; need > headerWidth {
		px = max(0.5*px, px*headerWidth/need)
	}
	return strconv.FormatFloat(math.Floor(px*10)/10, 'f', 1, 64) // rounded down: it still fits
}
