package vision

import "math"

// Input is one encoder input: W x H normalised pixels, planar ([3][H][W]: R, G, B, each row
// by row).
type Input struct {
	W, H int
	Pix  []float32
}

// Prepared is an image ready for the encoder: its inputs in llama.cpp's batch order, and the
// grid of tiles a tiled image (idefics3) is cut into: Inputs[0] is then the overview and
// Inputs[1:] the Cols x Rows tiles, row by row. An image that is not tiled has one input and
// no grid.
type Prepared struct {
	Inputs     []Input
	Cols, Rows int
}

// Prepare turns an image into the encoder's inputs as llama.cpp's preprocessor for the
// projector does (tools/mtmd): gemma3 and mlp scale the image, keeping its aspect, to fit
// ImageSize x ImageSize (gemma3 bilinear on black, mlp bicubic on the CLIP mean's grey);
// idefics3 scales it (bicubic, aspect kept, black) to whole ImageSize tiles that fit
// LongestEdge and adds the image stretched (bilinear) to one tile as the overview; Qwen's
// scale it (bilinear, aspect kept, black) to a size of whole merged patches within its token
// bounds (smartSize). The arithmetic is float32 as llama.cpp's, so the pixels are bit-exact
// to it.
func Prepare(img *RGB, h Hparams) Prepared {
	s := h.ImageSize
	if h.Qwen() {
		w, hh := smartSize(img.W, img.H, h)
		return Prepared{Inputs: []Input{normalise(fit(img, w, hh, resizeBilinear, [3]uint8{}), h)}}
	}
	switch h.Projector {
	case ProjectorMLP:
		return Prepared{Inputs: []Input{normalise(fit(img, s, s, resizeBicubic, [3]uint8{122, 116, 104}), h)}}
	case ProjectorIdefics3:
		out := Prepared{Inputs: []Input{normalise(stretch(img, s, s), h)}}
		rw, rh := tiledSize(img.W, img.H, s, h.LongestEdge)
		if rw == 0 {
			return out
		}
		refined := fit(img, rw, rh, resizeBicubic, [3]uint8{})
		out.Cols, out.Rows = rw/s, rh/s
		for y := 0; y < rh; y += s {
			for x := 0; x < rw; x += s {
				out.Inputs = append(out.Inputs, normalise(crop(refined, x, y, s, s), h))
			}
		}
		return out
	}
	return Prepared{Inputs: []Input{normalise(fit(img, s, s, resizeBilinear, [3]uint8{}), h)}}
}

// tiledSize is llama.cpp's calc_size_preserved_ratio: the image scaled to fit longest x
// longest, each side then rounded up to whole tiles; 0 x 0 without a longest edge.
func tiledSize(w, h, tile, longest int) (int, int) {
	if longest <= 0 {
		return 0, 0
	}
	scale := min(float32(longest)/float32(w), float32(longest)/float32(h))
	up := func(v float32) int { return int(math.Ceil(float64(v/float32(tile)))) * tile }
	return up(float32(w) * scale), up(float32(h) * scale)
}

// smartSize is llama.cpp's calc_size_preserved_ratio for Qwen (transformers' smart_resize):
// each side rounded to whole merged patches, then scaled down (sides floored) or up (ceiled)
// keeping the aspect when the area leaves the token bounds.
func smartSize(width, height int, h Hparams) (int, int) {
	align := h.PatchSize * h.Merge
	minPx, maxPx := h.ImageMinTokens*align*align, h.ImageMaxTokens*align*align
	by := func(x float32, f func(float64) float64) int { return int(f(float64(x/float32(align)))) * align }
	wBar, hBar := max(align, by(float32(width), math.Round)), max(align, by(float32(height), math.Round))
	switch {
	case wBar*hBar > maxPx:
		beta := float32(math.Sqrt(float64(float32(width*height) / float32(maxPx))))
		wBar, hBar = max(align, by(float32(width)/beta, math.Floor)), max(align, by(float32(height)/beta, math.Floor))
	case wBar*hBar < minPx:
		beta := float32(math.Sqrt(float64(float32(minPx) / float32(width*height))))
		wBar, hBar = by(float32(width)*beta, math.Ceil), by(float32(height)*beta, math.Ceil)
	}
	return wBar, hBar
}

// fit scales img into w x h keeping its aspect (llama.cpp's img_tool::resize with padding):
// the scaled image centred on pad. An image of that size already is taken as it is.
func fit(img *RGB, w, h int, resize func(*RGB, int, int) *RGB, pad [3]uint8) *RGB {
	if img.W == w && img.H == h {
		return img
	}
	scale := min(float32(w)/float32(img.W), float32(h)/float32(img.H))
	nw := min(int(math.Ceil(float64(float32(img.W)*scale))), w)
	nh := min(int(math.Ceil(float64(float32(img.H)*scale))), h)
	small := resize(img, nw, nh)
	canvas := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for i := 0; i < w*h; i++ {
		copy(canvas.Pix[3*i:], pad[:])
	}
	ox, oy := (w-nw)/2, (h-nh)/2
	for y := range nh {
		copy(canvas.Pix[3*((oy+y)*w+ox):], small.Pix[3*y*nw:3*(y+1)*nw])
	}
	return canvas
}

// stretch scales img to w x h, bilinear, without keeping its aspect.
func stretch(img *RGB, w, h int) *RGB {
	if img.W == w && img.H == h {
		return img
	}
	return resizeBilinear(img, w, h)
}

// crop cuts the w x h rectangle at (x, y) out of img.
func crop(img *RGB, x, y, w, h int) *RGB {
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	for i := range h {
		copy(out.Pix[3*i*w:3*(i+1)*w], img.Pix[3*((y+i)*img.W+x):])
	}
	return out
}

// normalise turns 8-bit RGB into the encoder's planar input: (v/255 - mean) / std.
func normalise(img *RGB, h Hparams) Input {
	n := img.W * img.H
	out := make([]float32, 3*n)
	for i := range n {
		for c := range 3 {
			v := float32(img.Pix[3*i+c]) / 255
			out[c*n+i] = (v - h.Mean[c]) / h.Std[c]
		}
	}
	return Input{W: img.W, H: img.H, Pix: out}
}

// resizeBilinear scales img to w x h, corners aligned, in float32 with truncation to 8 bits
// (llama.cpp's img_tool::resize_bilinear at the build the server follows).
func resizeBilinear(img *RGB, w, h int) *RGB {
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	ratio := func(src, dst int) float32 {
		if dst <= 1 {
			return 0
		}
		return float32(src-1) / float32(dst-1)
	}
	xr, yr := ratio(img.W, w), ratio(img.H, h)
	at := func(x, y, c int) float32 { return float32(img.Pix[3*(y*img.W+x)+c]) }
	for y := range h {
		py := float32(y) * yr
		y0 := min(int(py), img.H-1)
		y1 := min(y0+1, img.H-1)
		yf := py - float32(y0)
		for x := range w {
			px := float32(x) * xr
			x0 := min(int(px), img.W-1)
			x1 := min(x0+1, img.W-1)
			xf := px - float32(x0)
			for c := range 3 {
				// float32(...) around each product keeps it from fusing into an FMA, which
				// would round differently from llama.cpp on some machines.
				top := at(x0, y0, c) + float32((at(x1, y0, c)-at(x0, y0, c))*xf)
				bottom := at(x0, y1, c) + float32((at(x1, y1, c)-at(x0, y1, c))*xf)
				out.Pix[3*(y*w+x)+c] = uint8(top + float32((bottom-top)*yf))
			}
		}
	}
	return out
}

// resizeBicubic scales img to w x h as llama.cpp's img_tool::resize_bicubic: sample (j, i)
// at source (j*W/w, i*H/h), no half-pixel offset, through the cubic through the four
// neighbours (edges clamped) along x, then along y, rounded (halves away from zero) and
// clamped to 8 bits. The cubic's coefficients are computed in double and kept as float, the
// polynomials in float, as there.
func resizeBicubic(img *RGB, w, h int) *RGB {
	out := &RGB{W: w, H: h, Pix: make([]uint8, 3*w*h)}
	clampTo := func(v, hi int) int { return max(0, min(v, hi)) }
	// cubic is the interpolation through p(-1), p(0), p(1), p(2) at t in [0, 1).
	cubic := func(pm, p0, p1, p2, t float32) float32 {
		d0, d2, d3 := float64(pm-p0), float64(p1-p0), float64(p2-p0)
		a1 := float32(float64(-1.0/3*d0) + d2 - float64(1.0/6*d3))
		a2 := float32(float64(1.0/2*d0) + float64(1.0/2*d2))
		a3 := float32(float64(-1.0/6*d0) - float64(1.0/2*d2) + float64(1.0/6*d3))
		// float32(...) around each product keeps Go from fusing it into an FMA
		return p0 + float32(a1*t) + float32(float32(a2*t)*t) + float32(float32(float32(a3*t)*t)*t)
	}
	tx, ty := float32(img.W)/float32(w), float32(img.H)/float32(h)
	var col [4]float32
	for i := range h {
		sy := float32(ty * float32(i))
		y := int(sy)
		dy := sy - float32(y)
		for j := range w {
			sx := float32(tx * float32(j))
			x := int(sx)
			dx := sx - float32(x)
			for c := range 3 {
				for k := range 4 {
					row := 3 * clampTo(y-1+k, img.H-1) * img.W
					at := func(xx int) float32 { return float32(img.Pix[row+3*clampTo(xx, img.W-1)+c]) }
					col[k] = cubic(at(x-1), at(x), at(x+1), at(x+2), dx)
				}
				v := math.Round(float64(cubic(col[0], col[1], col[2], col[3], dy)))
				out.Pix[3*(i*w+j)+c] = uint8(max(0, min(v, 255)))
			}
		}
	}
	return out
}
