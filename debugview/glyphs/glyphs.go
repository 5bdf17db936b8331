// Package glyphs rasterises Go's own font (goregular, compiled into the binary, so the debug
// view needs no system fonts) into a coverage atlas for gpu/canvas, and lays out strings as
// textured quads over it. Glyphs sit at whole pixels and advances are hinted to whole pixels,
// so text stays crisp with the canvas's nearest sampling.
package glyphs

import (
	"fmt"
	"image"
	"math"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

// extras are the non-ASCII runes the atlas holds besides printable ASCII (the debug view's
// separators, ellipsis, units and bars).
var extras = []rune{'·', '…', '×', '°', '█'}

// Atlas is one font size's glyphs packed into a coverage image, with their metrics.
type Atlas struct {
	// Image is the coverage atlas to hand to canvas.SetAtlas.
	Image *image.Alpha
	// Size is the pixel size the glyphs were rasterised at.
	Size float64
	// Ascent and Descent are the distances from the baseline up to the top and down to the
	// bottom of a line, LineHeight the baseline-to-baseline distance, all in pixels.
	Ascent, Descent, LineHeight float32

	ascii    [128]int32     // index into glyphs + 1 for runes < 128; 0: not in the atlas
	other    map[rune]int32 // the same for extras
	glyphs   []glyph
	fallback int32 // '?'
}

// glyph is one rune's bitmap in the atlas and its placement relative to the pen.
type glyph struct {
	src     image.Rectangle // bitmap in Image; empty for blank glyphs (space)
	off     image.Point     // bitmap's top-left relative to the pen on the baseline
	advance float32
}

// New rasterises printable ASCII (32..126) and '·', '…', '×', '°', '█' at sizePx pixels (for
// HiDPI the caller passes its size times the content scale); any other rune draws as '?'.
func New(sizePx float64) (*Atlas, error) {
	if !(sizePx >= 1 && sizePx <= 512) {
		return nil, fmt.Errorf("glyphs: font size %v px outside 1..512", sizePx)
	}
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		return nil, fmt.Errorf("glyphs: parse goregular: %w", err)
	}
	// At 72 DPI a point is a pixel. Full hinting rounds advances and metrics to whole pixels,
	// which keeps every glyph at an integer offset from the first and makes widths additive.
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: sizePx, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		return nil, fmt.Errorf("glyphs: goregular face: %w", err)
	}
	defer face.Close()
	m := face.Metrics()
	a := &Atlas{
		Size:       sizePx,
		Ascent:     fixedToF32(m.Ascent),
		Descent:    fixedToF32(m.Descent),
		LineHeight: fixedToF32(m.Height),
		other:      map[rune]int32{},
	}

	runes := make([]rune, 0, 95+len(extras))
	for r := rune(32); r <= 126; r++ {
		runes = append(runes, r)
	}
	runes = append(runes, extras...)

	// Rasterise each glyph into its own image first (the face reuses one mask buffer), then
	// pack them.
	bitmaps := make([]*image.Alpha, len(runes))
	area := 0
	maxW := 0
	for i, r := range runes {
		dr, mask, mp, adv, ok := face.Glyph(fixed.Point26_6{}, r)
		if !ok && r != ' ' {
			return nil, fmt.Errorf("glyphs: goregular has no glyph for %q", r)
		}
		g := glyph{off: dr.Min, advance: fixedToF32(adv)}
		if !dr.Empty() {
			bm := image.NewAlpha(image.Rect(0, 0, dr.Dx(), dr.Dy()))
			for y := range dr.Dy() {
				for x := range dr.Dx() {
					_, _, _, al := mask.At(mp.X+x, mp.Y+y).RGBA()
					bm.Pix[y*bm.Stride+x] = uint8(al >> 8)
				}
			}
			bitmaps[i] = bm
			area += (dr.Dx() + 1) * (dr.Dy() + 1)
			maxW = max(maxW, dr.Dx())
		}
		a.glyphs = append(a.glyphs, g)
		if r < 128 {
			a.ascii[r] = int32(i + 1)
		} else {
			a.other[r] = int32(i + 1)
		}
	}
	a.fallback = a.ascii['?']

	a.Image = pack(a.glyphs, bitmaps, max(maxW+2, int(math.Ceil(math.Sqrt(float64(area)*1.2)))))
	return a, nil
}

// pack places the bitmaps in rows (shelves) of an atlas width pixels wide, with 1px of empty
// padding around each so no glyph can ever pick up a neighbour's coverage, and records each
// glyph's source rectangle.
func pack(glyphs []glyph, bitmaps []*image.Alpha, width int) *image.Alpha {
	x, y, rowH := 1, 1, 0
	for i, bm := range bitmaps {
		if bm == nil {
			continue
		}
		w, h := bm.Rect.Dx(), bm.Rect.Dy()
		if x+w+1 > width {
			x, y, rowH = 1, y+rowH+1, 0
		}
		glyphs[i].src = image.Rect(x, y, x+w, y+h)
		x += w + 1
		rowH = max(rowH, h)
	}
	img := image.NewAlpha(image.Rect(0, 0, width, y+rowH+1))
	for i, bm := range bitmaps {
		if bm == nil {
			continue
		}
		s := glyphs[i].src
		for row := range s.Dy() {
			copy(img.Pix[(s.Min.Y+row)*img.Stride+s.Min.X:], bm.Pix[row*bm.Stride:row*bm.Stride+s.Dx()])
		}
	}
	return img
}

func fixedToF32(v fixed.Int26_6) float32 { return float32(v) / 64 }

// lookup returns r's glyph, or '?' for a rune not in the atlas.
func (a *Atlas) lookup(r rune) *glyph {
	var i int32
	if r >= 0 && r < 128 {
		i = a.ascii[r]
	} else {
		i = a.other[r]
	}
	if i == 0 {
		i = a.fallback
	}
	return &a.glyphs[i-1]
}

// Width returns the advance width of s in pixels (no kerning, so it is the sum of the runes'
// advances: the width of a concatenation is the sum of the widths).
func (a *Atlas) Width(s string) float32 {
	var w float32
	for _, r := range s {
		w += a.lookup(r).advance
	}
	return w
}

// Append appends the quads drawing s with its baseline's left end at (x, y) in colour c and
// returns them and the pen's x after s. Blank glyphs (space) only advance the pen; the pen is
// rounded to whole pixels for each glyph so the atlas maps texel for pixel.
func (a *Atlas) Append(quads []canvas.Quad, x, y float32, s string, c canvas.Color) ([]canvas.Quad, float32) {
	by := float32(math.Round(float64(y)))
	for _, r := range s {
		g := a.lookup(r)
		if !g.src.Empty() {
			px := float32(math.Round(float64(x))) + float32(g.off.X)
			py := by + float32(g.off.Y)
			w, h := float32(g.src.Dx()), float32(g.src.Dy())
			quads = append(quads, canvas.Quad{
				X0: px, Y0: py, X1: px + w, Y1: py + h,
				U0: float32(g.src.Min.X), V0: float32(g.src.Min.Y),
				U1: float32(g.src.Max.X), V1: float32(g.src.Max.Y),
				Color: c, Textured: true,
			})
		}
		x += g.advance
	}
	return quads, x
}
