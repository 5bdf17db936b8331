package reference

// The vision encoders and projectors, in plain Go, following llama.cpp's tools/mtmd graphs
// (clip.cpp build_vit; models/siglip.cpp for gemma3 and idefics3, models/llava.cpp for mlp),
// on one input from vision.Prepare:
//
//	x = patches(pixels) @ patch_embd (+ bias)            (P x P patches, row by row; f16 operands)
//	mlp: the class embedding appended as one more row
//	x += position_embd
//	mlp: x = layernorm(x) * pre_ln + bias
//	for each layer run (mlp: all but the file's last):
//	    h = layernorm(x) * ln1 + bias
//	    x += attention(h @ q + b, h @ k + b, h @ v + b) @ attn_out + b    (every row sees every row)
//	    h = layernorm(x) * ln2 + bias
//	    x += act(h @ ffn_up + b) @ ffn_down + b          (GELU or quick GELU, through f16)
//	x = layernorm(x) * post_ln + bias                    (when the file has post_ln)
//	gemma3:   embeddings = rmsnorm(avgpool(x, scale_factor)) * soft_emb_norm @ input_projection
//	mlp:      embeddings = gelu(x[1:] @ mm.0 + b) @ mm.2 + b   (rows 1..: patch 0 dropped, class kept)
//	idefics3: embeddings = pixel_shuffle(x, scale_factor) @ mm.model.fc
//
// The sums are float64; the roundings are llama.cpp's: its patch embedding is an im2col to f16
// (pixels and kernel rounded to halves, on every backend), and its CPU backend takes GELU from
// a table of halves (cpuref.GELUF16, GELUQuickF16). Without them gemma3's embeddings move by
// about 2e-4.

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// EncodeImage runs a projector file's encoder on one preprocessed input (vision.Prepare's)
// and returns its Tokens() embeddings of ProjDim values, one after another.
func EncodeImage(f *gguf.File, in vision.Input) ([]float32, error) {
	x, err := VisionTrunk(f, in, -1)
	if err != nil {
		return nil, err
	}
	h, _ := vision.ReadHparams(f)
	if h.Qwen() {
		return qwenMerge(f, h, x)
	}
	return project(loader{f}, h, x)
}

// VisionTrunk runs the encoder's ViT on one input up to the output of layer layers-1 (all the
// layers run, and the post-norm, when layers < 0; the embeddings before layer 0 when layers
// is 0): the rows the projector takes, for checking an encoder layer by layer. mlp's class
// token is the last row; Qwen's rows are in 2 x 2 block order (vision.PatchOrder by 2).
func VisionTrunk(f *gguf.File, in vision.Input, layers int) ([]float32, error) {
	h, err := vision.ReadHparams(f)
	if err != nil {
		return nil, err
	}
	if h.Qwen() {
		return qwenTrunk(f, h, in, layers)
	}
	S, P, d := h.ImageSize, h.PatchSize, h.NEmbd
	if in.W != S || in.H != S || len(in.Pix) != 3*S*S {
		return nil, fmt.Errorf("reference: a %dx%d input of %d values, want %dx%d", in.W, in.H, len(in.Pix), S, S)
	}
	l := loader{f}
	get := l.getter(&err)
	n, k := h.Patches(), 3*P*P
	wPatch := get("v.patch_embd.weight", P, P, 3, d)
	bPatch, bErr := l.optional("v.patch_embd.bias", d)
	if err == nil {
		err = bErr
	}
	if err != nil {
		return nil, err
	}
	if bPatch == nil {
		bPatch = make([]float32, d)
	}
	x := linear(cpuref.ActF16(wPatch), bPatch, d, k, cpuref.ActF16(vision.Patches(in, P, nil)), n)
	cls, err := l.optional("v.class_embd", d)
	if err != nil {
		return nil, err
	}
	if h.Projector == vision.ProjectorMLP && cls != nil {
		x = append(x, cls...) // after the patches, as llama.cpp's concat
		n++
	}
	posEmbd := get("v.position_embd.weight", d, n)
	var preW, preB []float32
	if h.Projector == vision.ProjectorMLP {
		preW, preB = get("v.pre_ln.weight", d), get("v.pre_ln.bias", d)
	}
	if err != nil {
		return nil, err
	}
	x = cpuref.Add(x, posEmbd)
	if preW != nil {
		x = cpuref.LayerNorm(x, preW, preB, d, h.Eps)
	}
	every := make([]int32, n) // every row sees all n (see bert.go)
	for i := range every {
		every[i] = int32(n - 1)
	}
	headDim := d / h.NHead
	scale := float32(1 / math.Sqrt(float64(headDim)))
	act := cpuref.GELUF16
	if h.Act == vision.ActGELUQuick {
		act = cpuref.GELUQuickF16
	}
	run := h.Layers()
	if layers >= 0 {
		run = min(layers, run)
	}
	for il := range run {
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
		x = cpuref.Add(x, linear(down, bDown, d, h.NFF, act(linear(up, bUp, h.NFF, d, a, n)), n))
	}
	if layers >= 0 && layers < h.Layers() {
		return x, nil
	}
	postW, err := l.optional("v.post_ln.weight", d)
	if err != nil || postW == nil {
		return x, err
	}
	postB := get("v.post_ln.bias", d)
	if err != nil {
		return nil, err
	}
	return cpuref.LayerNorm(x, postW, postB, d, h.Eps), nil
}

// project is the projector on the ViT's output rows x.
func project(l loader, h vision.Hparams, x []float32) ([]float32, error) {
	d, g := h.NEmbd, h.ImageSize/h.PatchSize
	switch h.Projector {
	case vision.ProjectorMLP:
		hidden := 0
		if t, ok := l.f.Tensor("mm.0.weight"); ok && len(t.Shape) == 2 {
			hidden = int(t.Shape[1])
		}
		w0, err := l.tensor("mm.0.weight", d, hidden)
		if err != nil {
			return nil, err
		}
		b0, err := l.tensor("mm.0.bias", hidden)
		if err != nil {
			return nil, err
		}
		w2, err := l.tensor("mm.2.weight", hidden, h.ProjDim)
		if err != nil {
			return nil, err
		}
		b2, err := l.tensor("mm.2.bias", h.ProjDim)
		if err != nil {
			return nil, err
		}
		rows := x
		if len(x) > h.Patches()*d { // a class token: llama.cpp takes rows 1..n
			rows = x[d:]
		}
		return linear(w2, b2, h.ProjDim, hidden, cpuref.GELUF16(linear(w0, b0, hidden, d, rows, h.Patches())), h.Patches()), nil
	case vision.ProjectorIdefics3:
		s := h.ScaleFactor
		w, err := l.tensor("mm.model.fc.weight", d*s*s, h.ProjDim)
		if err != nil {
			return nil, err
		}
		// llama.cpp's build_patch_merge_permute: token (ty, tx) of the (g/s)^2 grid is the
		// s x s block's rows end to end, row by row.
		shuffled := make([]float32, 0, len(x))
		for ty := range g / s {
			for tx := range g / s {
				for ym := range s {
					for xm := range s {
						p := (ty*s+ym)*g + tx*s + xm
						shuffled = append(shuffled, x[p*d:(p+1)*d]...)
					}
				}
			}
		}
		return cpuref.MatMul(w, h.ProjDim, d*s*s, shuffled, h.Tokens()), nil
	}
	softNorm, err := l.tensor("mm.soft_emb_norm.weight", d)
	if err != nil {
		return nil, err
	}
	proj, err := l.tensor("mm.input_projection.weight", h.ProjDim, d)
	if err != nil {
		return nil, err
	}
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
