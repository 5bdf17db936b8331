package vision

// PatchOrder is the sequence position of every patch of a gw x gh patch grid, row by row,
// when the encoder takes its patches in blocks of g x g: block by block (row by row), each
// block's patches row by row. g = 1 is plain row order. A ViT's blocks do not depend on the
// order (attention is over all patches), so an encoder whose projector merges g x g blocks
// (idefics3's pixel shuffle) takes them in this order, and each block's g*g rows then lie
// end to end: the merged token's input, with no shuffle. gw and gh must be multiples of g.
func PatchOrder(gw, gh, g int) []int {
	out := make([]int, gw*gh)
	bw := gw / g
	for y := range gh {
		for x := range gw {
			block := (y/g)*bw + x/g
			out[y*gw+x] = block*g*g + (y%g)*g + x%g
		}
	}
	return out
}

// Patches lays an input out as the patch convolution's input rows, one per P x P patch (the
// patch at (x, y) of the grid at row order[y*gw+x]; nil order is row order), each channel,
// then kernel row, then kernel column: the layout of the convolution's weight (ggml ne
// [P, P, 3, d]) and of ggml's im2col.
func Patches(in Input, P int, order []int) []float32 {
	gw, gh, k := in.W/P, in.H/P, 3*P*P
	plane := in.W * in.H
	out := make([]float32, gw*gh*k)
	for py := range gh {
		for px := range gw {
			i := py*gw + px
			if order != nil {
				i = order[i]
			}
			row := out[i*k : (i+1)*k]
			for c := range 3 {
				for ky := range P {
					for kx := range P {
						row[(c*P+ky)*P+kx] = in.Pix[c*plane+(py*P+ky)*in.W+px*P+kx]
					}
				}
			}
		}
	}
	return out
}

// WindowOrder is the sequence order of a Qwen encoder's gw x gh patch grid, merged 2 x 2 into
// tokens, whose attention keeps within windows of win x win tokens (0: one window, the whole
// grid): windows row by row, each window's tokens row by row, each token's four patches row
// by row, so a window's patches, and a token's, lie end to end. It returns each patch's
// sequence position (row order in, as PatchOrder), the raster index of the token at each
// sequence place (to put the merged tokens back in row order), and the windows' lengths in
// tokens, in order.
func WindowOrder(gw, gh, win int) (patches, tokens, windows []int) {
	pw, ph := gw/2, gh/2
	if win <= 0 {
		win = max(pw, ph)
	}
	seqOf := make([]int, pw*ph) // a token's place in the sequence
	for wy := 0; wy < ph; wy += win {
		for wx := 0; wx < pw; wx += win {
			n := 0
			for ty := wy; ty < min(wy+win, ph); ty++ {
				for tx := wx; tx < min(wx+win, pw); tx++ {
					seqOf[ty*pw+tx] = len(tokens)
					tokens = append(tokens, ty*pw+tx)
					n++
				}
			}
			windows = append(windows, n)
		}
	}
	patches = make([]int, gw*gh)
	for y := range gh {
		for x := range gw {
			patches[y*gw+x] = 4*seqOf[(y/2)*pw+x/2] + (y%2)*2 + x%2
		}
	}
	return patches, tokens, windows
}
