package reference

// The gemma3 vision encoder and projector, in plain Go: llama.cpp's tools/mtmd build_vit
// (clip.cpp) and the gemma3 projector (models/siglip.cpp), on pixels from vision.Preprocess:
//
//	x = patches(pixels) @ patch_embd + bias + position_embd     (P x P patches, row by row; f16 operands)
//	for each layer (pre-norm):
//	    h = layernorm(x) * ln1 + bias
//	    x += attention(h @ q + b, h @ k + b, h @ v + b) @ attn_out + b    (every patch sees every patch)
//	    h = layernorm(x) * ln2 + bias
//	    x += gelu(h @ ffn_up + b) @ ffn_down + b         (GELU through f16, as llama.cpp's CPU)
//	x = layernorm(x) * post_ln + bias
//	g = the patch grid average-pooled by scale_factor (kernel = stride), row by row
//	embeddings = rmsnorm(g) * soft_emb_norm @ input_projection
//
// The sums are float64; the roundings are llama.cpp's: its patch embedding is an im2col to f16
// (pixels and kernel rounded to halves, on every backend), and its CPU backend takes GELU from
// a table of halves (cpuref.GELUF16). Without them the embeddings move by about 2e-4.

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// EncodeImage runs a projector file's encoder on preprocessed pixels ([3][S][S], as
// vision.Preprocess gives them) and returns its Tokens() embeddings of ProjDim values, one
// after another.
func EncodeImage(f *gguf.File, pixels []float32) ([]float32, error) {
	h, err := vision.ReadHparams(f)
	if err != nil {
		return nil, err
	}
	S, P, d := h.ImageSize, h.PatchSize, h.NEmbd
	if len(pixels) != 3*S*S {
		return nil, fmt.Errorf("reference: %d pixel values, want 3x%dx%d", len(pixels), S, S)
	}
	l := loader{f}
	get := func(name string, shape ...int) []float32 {
		if err != nil {
			return nil
		}
		var v []float32
		v, err = l.tensor(name, shape...)
		return v
	}
	g, n, k := S/P, h.Patches(), 3*P*P
	wPatch, bPatch := get("v.patch_embd.weight", P, P, 3, d), get("v.patch_embd.bias", d)
	posEmbd := get("v.position_embd.weight", d, n)
	if err != nil {
		return nil, err
	}
	patches := vision.Patches(pixels, h)
	x := cpuref.Add(linear(cpuref.ActF16(wPatch), bPatch, d, k, cpuref.ActF16(patches), n), posEmbd)

	every := make([]int32, n) // every patch sees all n (see bert.go)
	for i := range every {
		every[i] = int32(n - 1)
	}
	headDim := d / h.NHead
	scale := float32(1 / math.Sqrt(float64(headDim)))
	for il := range h.NLayer {
		p := fmt.Sprintf("v.blk.%d.", il)
		ln1W, ln1B, ln2W, ln2B := get(p+"ln1.weight", d), get(p+"ln1.bias", d), get(p+"ln2.weight", d), get(p+"ln2.bias", d)
		wq, bq := get(p+"attn_q.weight", d, d), get(p+"attn_q.bias", d)
		wk, bk := get(p+"attn_k.weight", d, d), get(p+"attn_k.bias", d)
		wv, bv := get(p+"attn_v.weight", d, d), get(p+"attn_v.bias", d)
		wo, bo := get(p+"attn_out.weight", d, d), get(p+"attn_out.bias", d)
		up, bUp, down, bDown, ffErr := visionFFN(l, p, d, h.NFF)
		if err == nil {
			err = ffErr
		}
		if err != nil {
			return nil, err
		}
		a := cpuref.LayerNorm(x, ln1W, ln1B, d, h.Eps)
		att := cpuref.AttentionOpts(linear(wq, bq, d, d, a, n), linear(wk, bk, d, d, a, n), linear(wv, bv, d, d, a, n), every, h.NHead, h.NHead, headDim, scale, 0, 0)
		x = cpuref.Add(x, linear(wo, bo, d, d, att, n))
		a = cpuref.LayerNorm(x, ln2W, ln2B, d, h.Eps)
		x = cpuref.Add(x, linear(down, bDown, d, h.NFF, cpuref.GELUF16(linear(up, bUp, h.NFF, d, a, n)), n))
	}
	postW, postB := get("v.post_ln.weight", d), get("v.post_ln.bias", d)
	softNorm := get("mm.soft_emb_norm.weight", d)
	proj := get("mm.input_projection.weight", h.ProjDim, d)
	if err != nil {
		return nil, err
	}
	x = cpuref.LayerNorm(x, postW, postB, d, h.Eps)
	pooled := cpuref.AvgPool(x, d, g, h.ScaleFactor)
	// input_projection is used as x @ W (ggml ne [ProjDim, d]: d rows of ProjDim), unlike the
	// other matrices: transposed, it is a rows x cols weight as linear takes it.
	projT := make([]float32, len(proj))
	for i := range d {
		for j := range h.ProjDim {
			projT[j*d+i] = proj[i*h.ProjDim+j]
		}
	}
	return cpuref.MatMul(projT, h.ProjDim, d, cpuref.RMSNorm(pooled, softNorm, d, h.Eps), h.Tokens()), nil
}

// visionFFN reads a block's feed-forward weights. llama.cpp swaps up and down when ffn_down's
// rows have the embedding's width (files written with the two exchanged); so does this.
func visionFFN(l loader, p string, d, nFF int) (up, bUp, down, bDown []float32, err error) {
	upName, downName := p+"ffn_up", p+"ffn_down"
	if t, ok := l.f.Tensor(downName + ".weight"); ok && len(t.Shape) == 2 && t.Shape[0] == uint64(d) && d != nFF {
		upName, downName = downName, upName
	}
	if up, err = l.tensor(upName+".weight", d, nFF); err != nil {
		return
	}
	if bUp, err = l.tensor(upName+".bias", nFF); err != nil {
		return
	}
	if down, err = l.tensor(downName+".weight", nFF, d); err != nil {
		return
	}
	bDown, err = l.tensor(downName+".bias", d)
	return
}
