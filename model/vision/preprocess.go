package vision

import "math"

// Preprocess turns an image into the encoder's input as llama.cpp's fixed-size preprocessor
// does for gemma3 (tools/mtmd/mtmd-image.cpp): the image scaled, keeping its aspect, to fit
// ImageSize x ImageSize with bilinear interpolation, centred on black, each channel then
// normalised by Mean and Std. The result is planar: [3][ImageSize][ImageSize], R, G, B, each
// row by row. The arithmetic is float32 as llama.cpp's, so the result is bit-exact to it.
func Preprocess(img *RGB, h Hparams) []float32 {
	s := h.ImageSize
	canvas := img
	if img.W != s || img.H != s {
		scale := min(float32(s)/float32(img.W), float32(s)/float32(img.H))
		nw := min(int(math.Ceil(float64(float32(img.W)*scale))), s)
		nh := min(int(math.Ceil(float64(float32(img.H)*scale))), s)
		small := resizeBilinear(img, nw, nh)
		canvas = &RGB{W: s, H: s, Pix: make([]uint8, 3*s*s)} // black
		ox, oy := (s-nw)/2, (s-nh)/2
		for y := range nh {
			copy(canvas.Pix[3*((oy+y)*s+ox):], small.Pix[3*y*nw:3*(y+1)*nw])
		}
	}
	out := make([]float32, 3*s*s)
	for i := 0; i < s*s; i++ {
		for c := range 3 {
			v := float32(canvas.Pix[3*i+c]) / 255
			out[c*s*s+i] = (v - h.Mean[c]) / h.Std[c]
		}
	}
	return out
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

// Patches lays a preprocessed image ([3][ImageSize][ImageSize]) out as the patch
// convolution's input rows, one per patch in row order, each channel, then kernel row, then
// kernel column: the layout of the convolution's weight (ggml ne [P, P, 3, d]) and of ggml's
// im2col.
func Patches(pixels []float32, h Hparams) []float32 {
	S, P := h.ImageSize, h.PatchSize
	g, k := S/P, 3*P*P
	out := make([]float32, g*g*k)
	for py := range g {
		for px := range g {
			row := out[(py*g+px)*k:]
			for c := range 3 {
				for ky := range P {
					for kx := range P {
						row[(c*P+ky)*P+kx] = pixels[c*S*S+(py*P+ky)*S+px*P+kx]
					}
				}
			}
		}
	}
	return out
}
