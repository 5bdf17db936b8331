package debugview

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/debugview/glyphs"
	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// The dark theme's colours.
var (
	background = canvas.Color{R: 0.075, G: 0.08, B: 0.095, A: 1}
	panelFill  = canvas.Color{R: 0.115, G: 0.12, B: 0.14, A: 1}
	gridLine   = canvas.Color{R: 0.22, G: 0.23, B: 0.26, A: 1}
	textMain   = canvas.Color{R: 0.88, G: 0.89, B: 0.91, A: 1}
	textDim    = canvas.Color{R: 0.56, G: 0.58, B: 0.62, A: 1}
	accent     = canvas.Color{R: 0.98, G: 0.80, B: 0.30, A: 1}
	freeCell   = canvas.Color{R: 0.16, G: 0.17, B: 0.19, A: 1}
	cachedCell = canvas.Color{R: 0.38, G: 0.39, B: 0.42, A: 1}
)

// slotColors tell slots apart in every panel (slot i takes i modulo their number).
var slotColors = []canvas.Color{
	{R: 0.30, G: 0.62, B: 0.96, A: 1}, {R: 0.95, G: 0.45, B: 0.35, A: 1},
	{R: 0.40, G: 0.80, B: 0.45, A: 1}, {R: 0.78, G: 0.50, B: 0.95, A: 1},
	{R: 0.95, G: 0.75, B: 0.25, A: 1}, {R: 0.30, G: 0.85, B: 0.85, A: 1},
	{R: 0.95, G: 0.50, B: 0.75, A: 1}, {R: 0.65, G: 0.70, B: 0.35, A: 1},
}

// slotColor is slot i's colour.
func slotColor(i int) canvas.Color { return slotColors[i%len(slotColors)] }

// rect is a rectangle in framebuffer pixels.
type rect struct{ x, y, w, h float32 }

func (r rect) contains(x, y float32) bool {
	return x >= r.x && x < r.x+r.w && y >= r.y && y < r.y+r.h
}

// inset shrinks r by d on every side.
func (r rect) inset(d float32) rect { return rect{r.x + d, r.y + d, max(0, r.w-2*d), max(0, r.h-2*d)} }

// painter collects one frame's quads; its unit u is one logical pixel in framebuffer pixels
// (the window's content scale), so that layouts keep their proportions on HiDPI screens.
type painter struct {
	quads []canvas.Quad
	font  *glyphs.Atlas
	u     float32
}

// fill draws a solid rectangle, snapped to whole pixels so that edges stay crisp.
func (p *painter) fill(r rect, c canvas.Color) {
	if r.w <= 0 || r.h <= 0 {
		return
	}
	x0, y0 := float32(math.Round(float64(r.x))), float32(math.Round(float64(r.y)))
	x1, y1 := float32(math.Round(float64(r.x+r.w))), float32(math.Round(float64(r.y+r.h)))
	if x1 <= x0 {
		x1 = x0 + 1
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	p.quads = append(p.quads, canvas.Quad{X0: x0, Y0: y0, X1: x1, Y1: y1, Color: c})
}

// text draws s with its top-left corner at (x, y), clipped to maxW pixels (an ellipsis marks
// the cut), and returns the width drawn.
func (p *painter) text(x, y, maxW float32, s string, c canvas.Color) float32 {
	if maxW > 0 && p.font.Width(s) > maxW {
		s = p.clip(s, maxW)
	}
	var end float32
	p.quads, end = p.font.Append(p.quads, x, y+p.font.Ascent, s, c)
	return end - x
}

// textRight draws s ending at x.
func (p *painter) textRight(x, y float32, s string, c canvas.Color) {
	p.text(x-p.font.Width(s), y, 0, s, c)
}

// clip shortens s to fit maxW pixels with a trailing ellipsis.
func (p *painter) clip(s string, maxW float32) string {
	runes := []rune(s)
	for len(runes) > 0 && p.font.Width(string(runes)+"…") > maxW {
		runes = runes[:len(runes)-1]
	}
	return string(runes) + "…"
}

// lineH is the height of a line of text.
func (p *painter) lineH() float32 { return p.font.LineHeight }

// frame draws a panel's background and title and returns the content area below the title.
func (p *painter) frame(r rect, title, note string) rect {
	p.fill(r, panelFill)
	pad := 6 * p.u
	p.text(r.x+pad, r.y+pad, r.w-2*pad, title, accent)
	if note != "" {
		p.textRight(r.x+r.w-pad, r.y+pad, note, textDim)
	}
	top := pad + p.lineH() + 4*p.u
	return rect{r.x + pad, r.y + top, r.w - 2*pad, r.h - top - pad}
}

// axes draws a plot's frame inside area, with the y axis labelled yLabel from 0 to yMax and
// the x axis labelled xLabel, and returns the plot area.
func (p *painter) axes(area rect, xLabel, yLabel string, yMax float64, yFmt string) rect {
	lh := p.lineH()
	labelW := p.font.Width(fmt.Sprintf(yFmt, yMax)) + 6*p.u
	plot := rect{area.x + labelW, area.y + lh, area.w - labelW, area.h - 2*lh - 2*p.u}
	p.text(area.x, area.y, 0, yLabel, textDim)
	p.textRight(plot.x-3*p.u, plot.y-lh/2, fmt.Sprintf(yFmt, yMax), textDim)
	p.textRight(plot.x-3*p.u, plot.y+plot.h-lh/2, fmt.Sprintf(yFmt, 0.0), textDim)
	p.fill(rect{plot.x, plot.y, p.u, plot.h}, gridLine)
	p.fill(rect{plot.x, plot.y + plot.h, plot.w, p.u}, gridLine)
	p.fill(rect{plot.x, plot.y, plot.w, p.u}, gridLine)
	p.textRight(plot.x+plot.w, plot.y+plot.h+2*p.u, xLabel, textDim)
	return plot
}

// niceMax rounds v up to 1, 2 or 5 times a power of ten, so that axes read easily.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

// heat maps 0..1 to a dark-blue-to-yellow ramp.
func heat(v float32) canvas.Color {
	v = min(max(v, 0), 1)
	return canvas.Color{R: 0.10 + 0.88*v, G: 0.12 + 0.70*float32(math.Sqrt(float64(v))), B: 0.35 * (1 - v), A: 1}
}
