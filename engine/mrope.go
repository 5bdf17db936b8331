package engine

import "github.com/wgpu-llama/wgpu-llama/model"

// M-RoPE positions (Qwen2-VL), as llama.cpp's mtmd gives them: a text token turns by its
// position in all of t, h and w; an image of gw x gh rows starting at position p0 turns its
// row (y, x) by (p0, p0+y, p0+x), and the text after it goes on from p0 + max(gw, gh), not
// from the image's last row. The rows of the cache still follow one another: only the angles
// move, so a sequence's cache, masks and prefix reuse are those of any other model.

// appendMRoPE appends to mpos the M-RoPE positions (t, h, w, e each) of the tokens add, which
// follow cached in their sequence; for a model without M-RoPE it returns mpos as it is (nil).
func (e *Engine) appendMRoPE(mpos []int32, cached, add []int32) []int32 {
	if !e.model.Config.MRoped() {
		return mpos
	}
	return append(mpos, mropePositions(cached, add, e.media.grid)...)
}

// mropePositions returns the M-RoPE positions of the tokens add that follow cached in their
// sequence; grid names the image input a placeholder belongs to (its first placeholder and
// token grid).
func mropePositions(cached, add []int32, grid func(id int32) (base int32, gw, gh int, ok bool)) []int32 {
	from, n := len(cached), len(cached)+len(add)
	at := func(i int) int32 {
		if i < from {
			return cached[i]
		}
		return add[i-from]
	}
	out := make([]int32, 0, 4*len(add))
	shift := int32(0) // how many rows the images so far took beyond the positions they advance
	for i := 0; i < n; i++ {
		id := at(i)
		if id < model.MediaToken {
			if i >= from {
				p := int32(i) - shift
				out = append(out, p, p, p, 0)
			}
			continue
		}
		base, gw, gh, ok := grid(id)
		if !ok || gw < 1 {
			// an image the engine no longer holds: the batch fails on it (attachMedia)
			base, gw, gh = id, 1, 1
		}
		p0 := int32(i) - int32(id-base) - shift // the image's first row's position
		rows := gw * gh
		end := min(n, i+rows-int(id-base))
		for ; i < end; i++ {
			k := int(at(i) - base)
			if i >= from {
				out = append(out, p0, p0+int32(k/gw), p0+int32(k%gw), 0)
			}
		}
		i--
		shift += int32(rows - max(gw, gh))
	}
	return out
}
