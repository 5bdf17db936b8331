package glyphs

import (
	"image"
	"math"
	"testing"

	"golang.org/x/image/font"
	"golang.org/x/image/font/gofont/goregular"
	"golang.org/x/image/font/opentype"
	"golang.org/x/image/math/fixed"

	"github.com/wgpu-llama/wgpu-llama/gpu/canvas"
)

func newAtlas(t *testing.T, size float64) *Atlas {
	t.Helper()
	a, err := New(size)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestEveryRuneHasABitmap(t *testing.T) {
	for _, size := range []float64{9, 13, 26} {
		a := newAtlas(t, size)
		if a.Ascent <= 0 || a.Descent <= 0 || a.LineHeight < a.Ascent+a.Descent-1 {
			t.Errorf("size %v: metrics ascent %v descent %v line %v", size, a.Ascent, a.Descent, a.LineHeight)
		}
		runes := []rune(" ")
		for r := rune(33); r <= 126; r++ {
			runes = append(runes, r)
		}
		runes = append(runes, extras...)
		for _, r := range runes {
			g := a.lookup(r)
			if g.advance <= 0 {
				t.Errorf("size %v %q: advance %v", size, r, g.advance)
			}
			if g.advance != float32(math.Round(float64(g.advance))) {
				t.Errorf("size %v %q: advance %v not whole pixels", size, r, g.advance)
			}
			if r == ' ' {
				if !g.src.Empty() {
					t.Errorf("size %v: space has a bitmap %v", size, g.src)
				}
				continue
			}
			if g.src.Empty() || !g.src.In(a.Image.Bounds()) {
				t.Errorf("size %v %q: bitmap %v (atlas %v)", size, r, g.src, a.Image.Bounds())
				continue
			}
			ink := 0
			for y := g.src.Min.Y; y < g.src.Max.Y; y++ {
				for x := g.src.Min.X; x < g.src.Max.X; x++ {
					ink += int(a.Image.AlphaAt(x, y).A)
				}
			}
			if ink == 0 {
				t.Errorf("size %v %q: blank bitmap", size, r)
			}
		}
	}
}

// TestPacking checks the 1px padding: no two glyph rectangles, each grown by one pixel,
// overlap, and nothing touches the atlas edge.
func TestPacking(t *testing.T) {
	a := newAtlas(t, 15)
	inner := a.Image.Bounds().Inset(1)
	var rects []image.Rectangle
	for _, g := range a.glyphs {
		if g.src.Empty() {
			continue
		}
		if !g.src.In(inner) {
			t.Errorf("glyph %v touches the atlas edge %v", g.src, a.Image.Bounds())
		}
		for _, o := range rects {
			if g.src.Inset(-1).Overlaps(o) {
				t.Errorf("glyphs %v and %v are not padded apart", g.src, o)
			}
		}
		rects = append(rects, g.src)
	}
}

func TestWidthIsAdditive(t *testing.T) {
	a := newAtlas(t, 14)
	if got, want := a.Width("ab"), a.Width("a")+a.Width("b"); got != want {
		t.Errorf("Width(ab) = %v, want %v", got, want)
	}
	if a.Width("") != 0 {
		t.Errorf("Width(\"\") = %v", a.Width(""))
	}
	s := "Hello, wörld… 12×3°"
	var sum float32
	for _, r := range s {
		sum += a.Width(string(r))
	}
	if a.Width(s) != sum {
		t.Errorf("Width(%q) = %v, sum of runes %v", s, a.Width(s), sum)
	}
	if a.Width("\u4e16") != a.Width("?") {
		t.Errorf("unknown rune width %v, want '?' %v", a.Width("\u4e16"), a.Width("?"))
	}
}

// reference rasterises r the way New does, for comparing against the atlas.
func reference(t *testing.T, size float64, r rune) (image.Rectangle, *image.Alpha) {
	t.Helper()
	f, err := opentype.Parse(goregular.TTF)
	if err != nil {
		t.Fatal(err)
	}
	face, err := opentype.NewFace(f, &opentype.FaceOptions{Size: size, DPI: 72, Hinting: font.HintingFull})
	if err != nil {
		t.Fatal(err)
	}
	dr, mask, mp, _, ok := face.Glyph(fixed.Point26_6{}, r)
	if !ok {
		t.Fatalf("no glyph for %q", r)
	}
	out := image.NewAlpha(image.Rect(0, 0, dr.Dx(), dr.Dy()))
	for y := range dr.Dy() {
		for x := range dr.Dx() {
			_, _, _, al := mask.At(mp.X+x, mp.Y+y).RGBA()
			out.Pix[y*out.Stride+x] = uint8(al >> 8)
		}
	}
	return dr, out
}

func TestAppendPlacesGlyphs(t *testing.T) {
	const size = 17
	a := newAtlas(t, size)
	col := canvas.Color{R: 1, G: 0.5, B: 0, A: 1}
	prefix := []canvas.Quad{{X0: 1, Y0: 2, X1: 3, Y1: 4}}
	const s = "Ag j\u4e16?"
	x0, y0 := float32(10.4), float32(30.6) // not whole pixels: glyphs must land on them
	quads, end := a.Append(prefix, x0, y0, s, col)
	if len(quads) != len(prefix)+5 { // space draws nothing
		t.Fatalf("%d quads, want %d", len(quads), len(prefix)+5)
	}
	if quads[0] != prefix[0] {
		t.Error("Append changed the quads it appended to")
	}
	if want := x0 + a.Width(s); math.Abs(float64(end-want)) > 1e-4 {
		t.Errorf("pen after = %v, want %v", end, want)
	}
	pen := x0
	qi := len(prefix)
	var prevX float32 = -1e9
	for _, r := range s {
		want := r
		if r == '\u4e16' {
			want = '?'
		}
		adv := a.Width(string(r))
		if r == ' ' {
			pen += adv
			continue
		}
		q := quads[qi]
		qi++
		if !q.Textured || q.Color != col {
			t.Errorf("%q: quad %+v not textured in the colour", r, q)
		}
		if q.X0 <= prevX {
			t.Errorf("%q: quad at x %v not right of the previous at %v", r, q.X0, prevX)
		}
		prevX = q.X0
		for _, v := range []float32{q.X0, q.Y0, q.X1, q.Y1, q.U0, q.V0, q.U1, q.V1} {
			if v != float32(math.Round(float64(v))) {
				t.Errorf("%q: quad %+v not on whole pixels", r, q)
				break
			}
		}
		dr, bm := reference(t, size, want)
		if wantX := float32(math.Round(float64(pen))) + float32(dr.Min.X); q.X0 != wantX {
			t.Errorf("%q: X0 = %v, want %v", r, q.X0, wantX)
		}
		if wantY := float32(math.Round(float64(y0))) + float32(dr.Min.Y); q.Y0 != wantY {
			t.Errorf("%q: Y0 = %v, want %v", r, q.Y0, wantY)
		}
		if q.X1-q.X0 != float32(dr.Dx()) || q.Y1-q.Y0 != float32(dr.Dy()) ||
			q.U1-q.U0 != float32(dr.Dx()) || q.V1-q.V0 != float32(dr.Dy()) {
			t.Errorf("%q: quad %+v, want a %dx%d glyph mapped texel for pixel", r, q, dr.Dx(), dr.Dy())
			continue
		}
		for y := range dr.Dy() {
			for x := range dr.Dx() {
				got := a.Image.AlphaAt(int(q.U0)+x, int(q.V0)+y).A
				if exp := bm.AlphaAt(x, y).A; got != exp {
					t.Fatalf("%q: atlas (%d,%d) of the glyph = %d, rasterised %d", r, x, y, got, exp)
				}
			}
		}
		pen += adv
	}
	// The unknown rune and '?' map to the same atlas rectangle.
	if u, q := quads[len(quads)-2], quads[len(quads)-1]; u.U0 != q.U0 || u.V0 != q.V0 || u.U1 != q.U1 || u.V1 != q.V1 {
		t.Errorf("unknown rune maps to %v, '?' to %v", u, q)
	}
}

func TestNewRejectsBadSizes(t *testing.T) {
	for _, s := range []float64{0, -3, math.NaN(), 1e6} {
		if _, err := New(s); err == nil {
			t.Errorf("New(%v): expected an error", s)
		}
	}
}
