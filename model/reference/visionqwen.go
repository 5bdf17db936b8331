package reference

// Qwen2-VL's and Qwen2.5-VL's encoders, in plain Go, as llama.cpp's graph
// (tools/mtmd/models/qwen2vl.cpp) on one input of whole merged patches:
//
//	x = patches @ patch_embd + patches @ patch_embd.1     (the 3D convolution's two frames; f16 operands)
//	    patches in llama.cpp's order: 2 x 2 blocks row by row, each block's four row by row
//	for each layer (pre-norm: LayerNorm, Qwen2.5-VL RMS norm):
//	    h = norm(x) * ln1 (+ bias)
//	    q, k = rope2d(h @ q + b), rope2d(h @ k + b)       (ggml's vision M-RoPE: the first half of
//	                                                      each head's pairs turn by the patch's
//	                                                      row, the second by its column)
//	    x += attention(q, k, h @ v + b) @ attn_out + b    (every patch sees every patch; in
//	                                                      Qwen2.5-VL's window layers only those
//	                                                      of its window of merged tokens)
//	    h = norm(x) * ln2 (+ bias)
//	    x += ffn(h)                                       (quick GELU, or silu(gate) * up; biases)
//	x = norm(x) * post_ln (+ bias)
//	embeddings = gelu(rows of 4 patches end to end @ mm.0 + b) @ mm.2 + b, put in row order

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// qwenTrunk runs a Qwen encoder's ViT up to the output of layer layers-1 (all of them and the
// post-norm when layers < 0) and returns the rows in llama.cpp's patch order
// (vision.PatchOrder by 2).
func qwenTrunk(f *gguf.File, h vision.Hparams, in vision.Input, layers int) ([]float32, error) {
	P, d := h.PatchSize, h.NEmbd
	if in.W%(2*P) != 0 || in.H%(2*P) != 0 || len(in.Pix) != 3*in.W*in.H {
		return nil, fmt.Errorf("reference: a %dx%d input of %d values is not whole merged patches", in.W, in.H, len(in.Pix))
	}
	l := loader{f}
	var err error
	get := l.getter(&err)
	gw, gh := in.W/P, in.H/P
	n, k := gw*gh, 3*P*P
	order := vision.PatchOrder(gw, gh, 2)
	patches := cpuref.ActF16(vision.Patches(in, P, order))
	w0, w1 := get("v.patch_embd.weight", P, P, 3, d), get("v.patch_embd.weight.1", P, P, 3, d)
	if err != nil {
		return nil, err
	}
	zero := make([]float32, d)
	x := cpuref.Add(linear(cpuref.ActF16(w0), zero, d, k, patches, n), linear(cpuref.ActF16(w1), zero, d, k, patches, n))
	// each row's 2D position, and its window (of merged tokens) for Qwen2.5-VL
	mpos, window := make([]int32, 4*n), make([]int, n)
	win := max(gw, gh)
	if h.WindowPattern > 0 {
		win = h.WindowTokens()
	}
	for y := range gh {
		for xx := range gw {
			i := order[y*gw+xx]
			mpos[4*i], mpos[4*i+1], mpos[4*i+2], mpos[4*i+3] = int32(y), int32(xx), int32(y), int32(xx)
			window[i] = (y/2/win)*(gw/2) + xx/2/win
		}
	}
	norm := func(x []float32, name string) []float32 {
		w := get(name+".weight", d)
		if h.RMSNorm {
			if err != nil {
				return nil
			}
			return cpuref.RMSNorm(x, w, d, h.Eps)
		}
		b := get(name+".bias", d)
		if err != nil {
			return nil
		}
		return cpuref.LayerNorm(x, w, b, d, h.Eps)
	}
	hd := d / h.NHead
	sections := [4]int{hd / 4, hd / 4, hd / 4, hd / 4}
	run := h.NLayer
	if layers >= 0 {
		run = min(layers, run)
	}
	for il := range run {
		p := fmt.Sprintf("v.blk.%d.", il)
		a := norm(x, p+"ln1")
		wq, bq := get(p+"attn_q.weight", d, d), get(p+"attn_q.bias", d)
		wk, bk := get(p+"attn_k.weight", d, d), get(p+"attn_k.bias", d)
		wv, bv := get(p+"attn_v.weight", d, d), get(p+"attn_v.bias", d)
		wo, bo := get(p+"attn_out.weight", d, d), get(p+"attn_out.bias", d)
		up, bUp, down, bDown, ffErr := visionFFN(l, p, d, h.NFF)
		var gate, bGate []float32
		if h.Act == vision.ActSiLU {
			gate, bGate = get(p+"ffn_gate.weight", d, h.NFF), get(p+"ffn_gate.bias", h.NFF)
		}
		if err == nil {
			err = ffErr
		}
		if err != nil {
			return nil, err
		}
		q, kk := linear(wq, bq, d, d, a, n), linear(wk, bk, d, d, a, n)
		cpuref.RoPEMulti(q, mpos, h.NHead, hd, hd, 10000, sections, true)
		cpuref.RoPEMulti(kk, mpos, h.NHead, hd, hd, 10000, sections, true)
		sees := func(i, j int) bool { return true }
		if h.WindowPattern > 0 && (il+1)%h.WindowPattern != 0 {
			sees = func(i, j int) bool { return window[i] == window[j] }
		}
		att := maskedAttention(q, kk, linear(wv, bv, d, d, a, n), n, h.NHead, hd, sees)
		x = cpuref.Add(x, linear(wo, bo, d, d, att, n))
		a = norm(x, p+"ln2")
		if err != nil {
			return nil, err
		}
		var ff []float32
		switch h.Act {
		case vision.ActSiLU:
			ff = cpuref.SiLUMul(linear(gate, bGate, h.NFF, d, a, n), linear(up, bUp, h.NFF, d, a, n))
		case vision.ActGELU:
			ff = cpuref.GELUF16(linear(up, bUp, h.NFF, d, a, n))
		default:
			ff = cpuref.GELUQuickF16(linear(up, bUp, h.NFF, d, a, n))
		}
		x = cpuref.Add(x, linear(down, bDown, d, h.NFF, ff, n))
	}
	if layers >= 0 && layers < h.NLayer {
		return x, nil
	}
	x = norm(x, "v.post_ln")
	return x, err
}

// qwenMerge is the merger on the trunk's rows (in 2 x 2 block order): each block's four rows
// end to end through mm.0, GELU and mm.2, the tokens in row order (the blocks' order).
func qwenMerge(f *gguf.File, h vision.Hparams, x []float32) ([]float32, error) {
	l, d := loader{f}, h.NEmbd
	w0, err := l.tensor("mm.0.weight", 4*d, 4*d)
	if err != nil {
		return nil, err
	}
	b0, err := l.tensor("mm.0.bias", 4*d)
	if err != nil {
		return nil, err
	}
	w2, err := l.tensor("mm.2.weight", 4*d, h.ProjDim)
	if err != nil {
		return nil, err
	}
	b2, err := l.tensor("mm.2.bias", h.ProjDim)
	if err != nil {
		return nil, err
	}
	n := len(x) / (4 * d)
	return linear(w2, b2, h.ProjDim, 4*d, cpuref.GELUF16(linear(w0, b0, 4*d, 4*d, x, n)), n), nil
}

// maskedAttention is softmax(q k^T / sqrt(headDim)) v per head over n rows, row i seeing row
// j where sees says, in float64.
func maskedAttention(q, k, v []float32, n, nHead, headDim int, sees func(i, j int) bool) []float32 {
	out := make([]float32, len(q))
	scale := 1 / math.Sqrt(float64(headDim))
	w := nHead * headDim
	scores := make([]float64, n)
	for hh := range nHead {
		for i := range n {
			qi := q[i*w+hh*headDim : i*w+(hh+1)*headDim]
			best := math.Inf(-1)
			for j := range n {
				scores[j] = math.Inf(-1)
				if !sees(i, j) {
					continue
				}
				kj := k[j*w+hh*headDim : j*w+(hh+1)*headDim]
				var s float64
				for c := range headDim {
					s += float64(qi[c]) * float64(kj[c])
				}
				scores[j] = s * scale
				best = max(best, scores[j])
			}
			var sum float64
			acc := make([]float64, headDim)
			for j := range n {
				if math.IsInf(scores[j], -1) {
					continue
				}
				e := math.Exp(scores[j] - best)
				sum += e
				vj := v[j*w+hh*headDim : j*w+(hh+1)*headDim]
				for c := range headDim {
					acc[c] += e * float64(vj[c])
				}
			}
			for c := range headDim {
				out[i*w+hh*headDim+c] = float32(acc[c] / sum)
			}
		}
	}
	return out
}
