package vision

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// filled is a w x h image whose pixel (x, y) is f(x, y) in every channel.
func filled(w, h int, f func(x, y int) uint8) *RGB {
	img := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for y := range h {
		for x := range w {
			v := f(x, y)
			copy(img.Pix[3*(y*w+x):], []uint8{v, v, v})
		}
	}
	return img
}

// The bicubic resize keeps a flat image flat, reproduces a ramp exactly away from the clamped
// edges (the cubic through four points of a line is the line), and rounds and clamps.
func TestResizeBicubic(t *testing.T) {
	flat := resizeBicubic(filled(7, 5, func(int, int) uint8 { return 77 }), 13, 9)
	for i, v := range flat.Pix {
		if v != 77 {
			t.Fatalf("flat image: value %d is %d", i, v)
		}
	}
	ramp := resizeBicubic(filled(20, 3, func(x, _ int) uint8 { return uint8(10 * x) }), 40, 3)
	for j := 2; j < 36; j++ { // source x = j/2, with neighbours x-1..x+2 inside the image
		want := uint8(5 * j) // 10 * j/2
		if got := ramp.Pix[3*(40+j)]; got != want {
			t.Errorf("ramp at %d: %d, want %d", j, got, want)
		}
	}
	// overshoot beyond 255 is clamped: a step from 0 to 255 rings above and below
	step := resizeBicubic(filled(4, 1, func(x, _ int) uint8 { return []uint8{0, 0, 255, 255}[x] }), 16, 1)
	if step.Pix[0] != 0 || step.Pix[3*15] != 255 {
		t.Errorf("step ends %d %d", step.Pix[0], step.Pix[3*15])
	}
}

// mlp fits an image bicubically on CLIP's mean grey, centred; a square image of the input's
// size is taken as it is.
func TestPrepareMLP(t *testing.T) {
	h := Hparams{Projector: ProjectorMLP, ImageSize: 30, PatchSize: 6, Mean: [3]float32{0, 0, 0}, Std: [3]float32{1, 1, 1}}
	p := Prepare(filled(60, 30, func(int, int) uint8 { return 255 }), h)
	if len(p.Inputs) != 1 || p.Cols != 0 {
		t.Fatalf("%d inputs, grid %dx%d", len(p.Inputs), p.Cols, p.Rows)
	}
	in := p.Inputs[0]
	// 60 x 30 scaled to 30 x 15, placed at row 7: rows 0..6 and 22..29 are the pad colour
	for y, want := range map[int][3]float32{0: {122, 116, 104}, 6: {122, 116, 104}, 7: {255, 255, 255}, 21: {255, 255, 255}, 22: {122, 116, 104}, 29: {122, 116, 104}} {
		for c := range 3 {
			if got := in.Pix[c*900+y*30+11] * 255; got < want[c]-0.01 || got > want[c]+0.01 {
				t.Errorf("row %d channel %d: %v, want %v", y, c, got, want[c])
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	same := filled(30, 30, func(int, int) uint8 { return uint8(rng.IntN(256)) })
	got := Prepare(same, h).Inputs[0]
	for i := range 900 {
		if got.Pix[i]*255 != float32(same.Pix[3*i]) {
			t.Fatalf("a 30x30 image was resampled: pixel %d", i)
		}
	}
}

// idefics3 scales an image to whole tiles within the longest edge, cuts it row by row after
// an overview of the whole image, and lays the tiles out with their row and column tokens.
func TestPrepareIdefics3(t *testing.T) {
	h := Hparams{Projector: ProjectorIdefics3, ImageSize: 36, PatchSize: 6, ScaleFactor: 2, LongestEdge: 72, Mean: [3]float32{0, 0, 0}, Std: [3]float32{1, 1, 1}}
	for _, c := range []struct {
		w, h, cols, rows int
	}{{100, 50, 2, 1}, {20, 20, 2, 2}, {50, 100, 1, 2}, {72, 30, 2, 1}, {300, 10, 2, 1}} {
		img := filled(c.w, c.h, func(x, y int) uint8 { return uint8(x*7 + y*3) })
		p := Prepare(img, h)
		if p.Cols != c.cols || p.Rows != c.rows || len(p.Inputs) != 1+c.cols*c.rows {
			t.Errorf("%dx%d: %d inputs, grid %dx%d, want %dx%d", c.w, c.h, len(p.Inputs), p.Cols, p.Rows, c.cols, c.rows)
			continue
		}
		for _, in := range p.Inputs {
			if in.W != 36 || in.H != 36 || len(in.Pix) != 3*36*36 {
				t.Fatalf("%dx%d: an input of %dx%d", c.w, c.h, in.W, in.H)
			}
		}
		// the tiles are the refined image's pieces, row by row
		rw, rh := 36*c.cols, 36*c.rows
		refined := normalise(fit(img, rw, rh, resizeBicubic, [3]uint8{}), h)
		for ty := range c.rows {
			for tx := range c.cols {
				tile := p.Inputs[1+ty*c.cols+tx]
				for _, at := range [][2]int{{0, 0}, {35, 35}, {17, 5}} {
					got, want := tile.Pix[at[1]*36+at[0]], refined.Pix[(ty*36+at[1])*rw+tx*36+at[0]]
					if got != want {
						t.Errorf("%dx%d: tile (%d, %d) at %v: %v, want %v", c.w, c.h, tx, ty, at, got, want)
					}
				}
			}
		}
	}
	// no longest edge: the overview alone
	if p := Prepare(filled(50, 40, func(int, int) uint8 { return 1 }), Hparams{Projector: ProjectorIdefics3, ImageSize: 36}); len(p.Inputs) != 1 || p.Cols != 0 {
		t.Errorf("without a longest edge: %d inputs", len(p.Inputs))
	}
	var sb strings.Builder
	for _, pc := range h.Layout(2, 2) {
		if pc.Input >= 0 {
			fmt.Fprintf(&sb, "[%d]", pc.Input)
		} else {
			sb.WriteString(pc.Text)
		}
	}
	want := "<fake_token_around_image><row_1_col_1>[1]<fake_token_around_image><row_1_col_2>[2]\n" +
		"<fake_token_around_image><row_2_col_1>[3]<fake_token_around_image><row_2_col_2>[4]" +
		"\n\n<fake_token_around_image><global-img>[0]<fake_token_around_image>"
	if sb.String() != want {
		t.Errorf("layout\n%q\nwant\n%q", sb.String(), want)
	}
}

// The patch order puts each g x g block's patches end to end, blocks row by row.
func TestPatchOrder(t *testing.T) {
	got := fmt.Sprint(PatchOrder(4, 2, 2))
	if got != "[0 1 4 5 2 3 6 7]" {
		t.Errorf("4x2 grid in 2x2 blocks: %s", got)
	}
	if got := fmt.Sprint(PatchOrder(3, 2, 1)); got != "[0 1 2 3 4 5]" {
		t.Errorf("row order: %s", got)
	}
}

// Qwen's window order: a 6 x 4 patch grid is 3 x 2 tokens; windows of 2 tokens take tokens
// (0, 1, 3, 4) then (2, 5); one window is the 2 x 2 block order.
func TestWindowOrder(t *testing.T) {
	patches, tokens, windows := WindowOrder(6, 4, 2)
	if fmt.Sprint(tokens) != "[0 1 3 4 2 5]" || fmt.Sprint(windows) != "[4 2]" {
		t.Errorf("tokens %v, windows %v", tokens, windows)
	}
	// patch (4, 0) is token 2's first, the fifth token of the sequence
	if patches[4] != 16 || patches[1*6+5] != 19 || patches[3*6+0] != 10 {
		t.Errorf("patches %v", patches)
	}
	whole, tokens, windows := WindowOrder(6, 4, 0)
	if fmt.Sprint(whole) != fmt.Sprint(PatchOrder(6, 4, 2)) || fmt.Sprint(tokens) != "[0 1 2 3 4 5]" || fmt.Sprint(windows) != "[6]" {
		t.Errorf("one window: %v %v %v", whole, tokens, windows)
	}
}

// Qwen scales an image to whole merged patches within its token bounds (transformers'
// smart_resize as llama.cpp computes it) and fits it there on black.
func TestPrepareQwen(t *testing.T) {
	h := Hparams{Projector: ProjectorQwen2VL, PatchSize: 14, Merge: 2, ImageMinTokens: 8, ImageMaxTokens: 4096}
	for _, c := range []struct {
		w, h, max, wantW, wantH int
	}{
		{50, 30, 4096, 112, 84},      // 56 x 28 is under 8 tokens: scaled up
		{1000, 700, 4096, 1008, 700}, // rounded to 28s
		{900, 600, 16, 112, 84},      // over 16 tokens: scaled down, sides floored
		{10, 2000, 4096, 28, 1988},   // a side never below one merged patch
	} {
		h.ImageMaxTokens = c.max
		if w, hh := smartSize(c.w, c.h, h); w != c.wantW || hh != c.wantH {
			t.Errorf("%dx%d (max %d tokens): %dx%d, want %dx%d", c.w, c.h, c.max, w, hh, c.wantW, c.wantH)
		}
	}
	h.ImageMaxTokens = 4096
	p := Prepare(filled(50, 30, func(int, int) uint8 { return 255 }), Hparams{Projector: ProjectorQwen2VL, PatchSize: 14, Merge: 2, ImageMinTokens: 8, ImageMaxTokens: 4096, Std: [3]float32{1, 1, 1}})
	in := p.Inputs[0]
	if len(p.Inputs) != 1 || in.W != 112 || in.H != 84 {
		t.Fatalf("%d inputs, %dx%d", len(p.Inputs), in.W, in.H)
	}
	// 50 x 30 scaled by 2.24 to 112 x 68, centred: rows 0..7 and 76..83 black
	for y, want := range map[int]float32{0: 0, 7: 0, 8: 1, 75: 1, 76: 0, 83: 0} {
		if got := in.Pix[y*112+50]; got != want {
			t.Errorf("row %d: %v, want %v", y, got, want)
		}
	}
	if gw, gh := h.Grid(in); gw != 4 || gh != 3 {
		t.Errorf("grid %dx%d", gw, gh)
	}
}
