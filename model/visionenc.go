package model

import (
	"fmt"
	"math"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/model/vision"
)

// VisionEncoder is a multimodal projector (an mmproj GGUF) on the GPU: a ViT (patch
// embedding, position embeddings, pre-norm blocks with bidirectional attention) and the
// projector that turns its output into the text model's input embeddings: gemma3's pooling,
// norm and projection, LLaVA's two-layer MLP (mlp), or SmolVLM's pixel shuffle and projection
// (idefics3). It encodes one ImageSize x ImageSize input (a vision.Input) a pass.
// model/reference.EncodeImage is its plain-Go specification.
type VisionEncoder struct {
	// H are the projector's hyperparameters.
	H vision.Hparams

	dev    *gpu.Device
	l      *loader // owns the weights
	patch  gpu.Weight
	patchB *gpu.Buffer // nil: none (LLaVA's convolution has no bias)
	// pos are the position embeddings in sequence order, the class token's (mlp) last with
	// the class embedding added: llama.cpp appends the class token after the patches.
	pos          *gpu.Buffer
	preW, preB   *gpu.Buffer // pre-norm (mlp), or nil
	layers       []visionLayer
	postW, postB *gpu.Buffer // post-norm, or nil (LLaVA's converter drops it)
	head         visionHead
	s            visionScratch
	// order is the patches' sequence order (vision.PatchOrder), nil for row order.
	order []int
	// nPatch patches and a class token (mlp) make nSeq rows.
	nPatch, nSeq, headDim int
	// qwen is a Qwen projector's encoder, which takes inputs of any size; the fields above
	// are then unused.
	qwen *qwenVision
}

// visionLayer is one pre-norm ViT block.
type visionLayer struct {
	ln1W, ln1B, ln2W, ln2B *gpu.Buffer
	qkv                    []proj      // q, k, v side by side
	qkvB                   *gpu.Buffer // their biases, end to end
	out, up, down          gpu.Weight
	outB, upB, downB       *gpu.Buffer
}

// visionHead is the projector after the ViT.
type visionHead struct {
	softNorm   *gpu.Buffer // gemma3
	proj       gpu.Weight  // gemma3: input_projection transposed; idefics3: mm.model.fc
	mm0, mm2   gpu.Weight  // mlp
	mm0B, mm2B *gpu.Buffer
	hidden     int  // mlp: mm.0's rows
	class      bool // mlp: a class token (v.class_embd) ends the sequence
}

// visionScratch are one encoding's buffers.
type visionScratch struct {
	pix, x, xn, qkv, k, v, attn, ffn, pooled, normed, hidden, out, pos, state *gpu.Buffer
}

// LoadVisionEncoder uploads a projector file's encoder; f may be closed afterwards.
func LoadVisionEncoder(dev *gpu.Device, f *gguf.File) (*VisionEncoder, error) {
	h, err := vision.ReadHparams(f)
	if err != nil {
		return nil, err
	}
	e := &VisionEncoder{H: h, dev: dev, l: &loader{f: f, dev: dev}, headDim: h.NEmbd / h.NHead, nPatch: h.Patches()}
	if h.Qwen() {
		e.qwen = &qwenVision{h: h, dev: dev, headDim: e.headDim}
		if err := e.qwen.load(e.l); err != nil {
			e.l.release()
			return nil, err
		}
		return e, nil
	}
	e.nSeq = e.nPatch
	if h.Projector == vision.ProjectorMLP {
		if _, ok := f.Tensor("v.class_embd"); ok {
			e.head.class = true
			e.nSeq++
		}
	}
	if h.Projector == vision.ProjectorIdefics3 {
		g := h.ImageSize / h.PatchSize
		e.order = vision.PatchOrder(g, g, h.ScaleFactor)
	}
	if err := e.load(); err != nil {
		e.l.release()
		return nil, err
	}
	if err := e.alloc(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// optionalVector loads a vector that a projector may lack, nil without it.
func (l *loader) optionalVector(name string, n int) (*gpu.Buffer, error) {
	if _, ok := l.f.Tensor(name); !ok {
		return nil, nil
	}
	return l.vector(name, n)
}

func (e *VisionEncoder) load() error {
	l, h := e.l, e.H
	d, P := h.NEmbd, h.PatchSize
	var err error
	if e.patch, err = l.patchKernel("v.patch_embd.weight", P, d); err != nil {
		return err
	}
	if e.patchB, err = l.optionalVector("v.patch_embd.bias", d); err != nil {
		return err
	}
	if e.patchB == nil && h.Projector != vision.ProjectorMLP {
		return fmt.Errorf("model: tensor %q missing", "v.patch_embd.bias")
	}
	if err := e.loadPositions(); err != nil {
		return err
	}
	if h.Projector == vision.ProjectorMLP {
		if e.preW, err = l.vector("v.pre_ln.weight", d); err != nil {
			return err
		}
		if e.preB, err = l.vector("v.pre_ln.bias", d); err != nil {
			return err
		}
	}
	e.layers = make([]visionLayer, h.Layers())
	for i := range e.layers {
		if err := e.loadLayer(i); err != nil {
			return err
		}
	}
	if e.postW, err = l.optionalVector("v.post_ln.weight", d); err != nil {
		return err
	}
	if e.postW != nil {
		if e.postB, err = l.vector("v.post_ln.bias", d); err != nil {
			return err
		}
	} else if h.Projector != vision.ProjectorMLP {
		return fmt.Errorf("model: tensor %q missing", "v.post_ln.weight")
	}
	return e.loadHead()
}

// loadPositions uploads the position embeddings in sequence order, with the class token's
// row (class embedding plus its position embedding) last.
func (e *VisionEncoder) loadPositions() error {
	l, d := e.l, e.H.NEmbd
	pe, pos, err := l.floats("v.position_embd.weight", d, e.nSeq)
	if err != nil {
		return err
	}
	seq := make([]float32, len(pos))
	for i := range e.nPatch {
		j := i
		if e.order != nil {
			j = e.order[i]
		}
		copy(seq[j*d:(j+1)*d], pos[i*d:(i+1)*d])
	}
	if e.head.class {
		_, cls, err := l.floats("v.class_embd", d)
		if err != nil {
			return err
		}
		last := seq[e.nPatch*d:]
		for i := range d {
			last[i] = cls[i] + pos[e.nPatch*d+i]
		}
	}
	e.pos, err = l.upload(pe, gpu.Bytes(seq))
	return err
}

func (e *VisionEncoder) loadLayer(i int) error {
	l, h, d := e.l, e.H, e.H.NEmbd
	ly, p := &e.layers[i], fmt.Sprintf("v.blk.%d.", i)
	var err error
	if ly.qkv, err = l.fused([]string{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, []int{d, d, d}, d); err != nil {
		return err
	}
	if ly.qkvB, err = l.concatVectors([]string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, []int{d, d, d}); err != nil {
		return err
	}
	up, down := l.visionFFNNames(p, d, h.NFF)
	for _, m := range []struct {
		name       string
		rows, cols int
		dst        *gpu.Weight
	}{{p + "attn_out.weight", d, d, &ly.out}, {up + ".weight", h.NFF, d, &ly.up}, {down + ".weight", d, h.NFF, &ly.down}} {
		if *m.dst, err = l.matrix(m.name, m.rows, m.cols); err != nil {
			return err
		}
	}
	for _, v := range []struct {
		name string
		n    int
		dst  **gpu.Buffer
	}{
		{p + "ln1.weight", d, &ly.ln1W}, {p + "ln1.bias", d, &ly.ln1B}, {p + "ln2.weight", d, &ly.ln2W}, {p + "ln2.bias", d, &ly.ln2B},
		{p + "attn_out.bias", d, &ly.outB}, {up + ".bias", h.NFF, &ly.upB}, {down + ".bias", d, &ly.downB},
	} {
		if *v.dst, err = l.vector(v.name, v.n); err != nil {
			return err
		}
	}
	return nil
}

// visionFFNNames are the names of a ViT block's (prefix p) up and down projections:
// ffn_up and ffn_down, exchanged as llama.cpp exchanges them when ffn_down's rows have the
// embedding's width (files written with the two swapped).
func (l *loader) visionFFNNames(p string, d, nFF int) (up, down string) {
	up, down = p+"ffn_up", p+"ffn_down"
	if t, ok := l.f.Tensor(down + ".weight"); ok && len(t.Shape) == 2 && t.Shape[0] == uint64(d) && d != nFF {
		up, down = down, up
	}
	return up, down
}

// loadHead loads the projector proper.
func (e *VisionEncoder) loadHead() error {
	l, h, d := e.l, e.H, e.H.NEmbd
	hd := &e.head
	var err error
	switch h.Projector {
	case vision.ProjectorGemma3:
		if hd.softNorm, err = l.vector("mm.soft_emb_norm.weight", d); err != nil {
			return err
		}
		// input_projection is applied as x @ W (ggml ne [ProjDim, d]: d rows of ProjDim), the
		// other way round from every other matrix: transposed here into ProjDim rows of d.
		pj, vals, err := l.floats("mm.input_projection.weight", h.ProjDim, d)
		if err != nil {
			return err
		}
		tr := make([]float32, len(vals))
		for i := range d {
			for j := range h.ProjDim {
				tr[j*d+i] = vals[i*h.ProjDim+j]
			}
		}
		if hd.proj, err = e.dev.UploadWeight(pj.Name, gpu.F32, h.ProjDim, d, gpu.Bytes(tr)); err != nil {
			return fmt.Errorf("model: %w", err)
		}
		l.weights = append(l.weights, hd.proj)
		l.progressed(pj)
	case vision.ProjectorMLP:
		t, ok := l.f.Tensor("mm.0.weight")
		if !ok || len(t.Shape) != 2 {
			return fmt.Errorf("model: tensor %q missing", "mm.0.weight")
		}
		hd.hidden = int(t.Shape[1])
		if hd.mm0, err = l.matrix("mm.0.weight", hd.hidden, d); err != nil {
			return err
		}
		if hd.mm0B, err = l.vector("mm.0.bias", hd.hidden); err != nil {
			return err
		}
		if hd.mm2, err = l.matrix("mm.2.weight", h.ProjDim, hd.hidden); err != nil {
			return err
		}
		if hd.mm2B, err = l.vector("mm.2.bias", h.ProjDim); err != nil {
			return err
		}
	case vision.ProjectorIdefics3:
		s := h.ScaleFactor
		if hd.proj, err = l.matrix("mm.model.fc.weight", h.ProjDim, d*s*s); err != nil {
			return err
		}
	}
	return nil
}

func (e *VisionEncoder) alloc() error {
	h, n := e.H, e.nSeq
	d, s := h.NEmbd, &e.s
	state := 1
	if e.dev.BarrierFree {
		state = gpu.AttentionStateSize(n, h.NHead, e.headDim)
	}
	for _, b := range []struct {
		name string
		n    int
		dst  **gpu.Buffer
	}{
		{"pixels", n * 3 * h.PatchSize * h.PatchSize, &s.pix}, {"x", n * d, &s.x}, {"xn", n * d, &s.xn},
		{"qkv", n * 3 * d, &s.qkv}, {"k", n * d, &s.k}, {"v", n * d, &s.v}, {"attn", n * d, &s.attn},
		{"ffn", n * h.NFF, &s.ffn}, {"pooled", h.Tokens() * d, &s.pooled}, {"normed", h.Tokens() * d, &s.normed},
		{"hidden", max(1, h.Tokens()*e.head.hidden), &s.hidden},
		{"out", h.Tokens() * h.ProjDim, &s.out}, {"pos", 2 * n, &s.pos}, {"attn_state", state, &s.state},
	} {
		buf, err := e.dev.NewBuffer("vision_"+b.name, uint64(4*b.n))
		if err != nil {
			return fmt.Errorf("model: vision scratch %s: %w", b.name, err)
		}
		*b.dst = buf
	}
	pos := make([]int32, 2*n) // positions 0..n-1, then each row's cache base 0
	for i := range n {
		pos[i] = int32(i)
	}
	if err := e.dev.Write(s.pos, 0, gpu.Bytes(pos)); err != nil {
		return err
	}
	// the class token's input row stays zero: its patch product is 0, its embedding is in pos
	return e.dev.Write(s.pix, 0, make([]byte, 4*n*3*h.PatchSize*h.PatchSize))
}

// Encode runs one preprocessed input (vision.Prepare's: ImageSize square, or for Qwen any
// size of whole merged patches) through the encoder in one pass and returns its embeddings of
// ProjDim values, one after another: H.Grid(in)'s tokens, row by row.
func (e *VisionEncoder) Encode(in vision.Input) ([]float32, error) {
	if e.qwen != nil {
		return e.qwen.encode(in)
	}
	h := e.H
	r, x, err := e.trunk(in, len(e.layers))
	if err != nil {
		return nil, err
	}
	e.project(r, x)
	out, err := r.SubmitAndRead(e.s.out, 0, uint64(4*h.Tokens()*h.ProjDim))
	if err != nil {
		return nil, err
	}
	return gpu.Float32s(out), nil
}

// trunk records the ViT on one input up to the output of layer layers-1 (and the post-norm
// after the last layer) and returns the recorder and the buffer holding its rows, in sequence
// order.
func (e *VisionEncoder) trunk(in vision.Input, layers int) (*gpu.Recorder, *gpu.Buffer, error) {
	h, n, s := e.H, e.nSeq, &e.s
	S, d := h.ImageSize, h.NEmbd
	if in.W != S || in.H != S || len(in.Pix) != 3*S*S {
		return nil, nil, fmt.Errorf("model: a %dx%d input of %d values, want %dx%d", in.W, in.H, len(in.Pix), S, S)
	}
	// Each value rounded to f16, as ggml's im2col stores it.
	patches := vision.Patches(in, h.PatchSize, e.order)
	for i, v := range patches {
		patches[i] = gguf.F16ToF32(gguf.F32ToF16(v))
	}
	if err := e.dev.Write(s.pix, 0, gpu.Bytes(patches)); err != nil {
		return nil, nil, err
	}
	r, err := e.dev.Begin()
	if err != nil {
		return nil, nil, err
	}
	x, xn := s.x, s.xn
	r.MatMul(e.patch, s.pix, 0, n, x, false)
	if e.patchB != nil {
		r.BiasAct(x, e.patchB, d, e.nPatch, false)
	}
	r.Add(x, e.pos, n*d)
	if e.preW != nil {
		r.LayerNorm(x, e.preW, e.preB, xn, d, n, h.Eps)
		x, xn = xn, x
	}
	// Every patch sees every patch: the cache holds the n rows at base 0 (AllKeys).
	ap := gpu.AttnParams{Scale: float32(1 / math.Sqrt(float64(e.headDim))), AllKeys: n, MaxKeys: n, Sequences: 1, State: s.state}
	for i := range layers {
		ly := &e.layers[i]
		r.LayerNorm(x, ly.ln1W, ly.ln1B, xn, d, n, h.Eps)
		for _, p := range ly.qkv {
			r.MatMulAt(p.w, gpu.Acts{X: xn}, n, s.qkv, 3*d, p.col, false)
		}
		r.RoPEKV(s.qkv, s.pos, s.k, s.v, ly.qkvB, false, n, h.NHead, h.NHead, e.headDim, gpu.Rope{FreqBase: 1})
		r.Attention(s.qkv, s.k, s.v, s.pos, s.attn, false, 3*d, n, h.NHead, h.NHead, e.headDim, ap)
		r.MatMul(ly.out, s.attn, 0, n, x, true)
		r.BiasAct(x, ly.outB, d, n, false)
		r.LayerNorm(x, ly.ln2W, ly.ln2B, xn, d, n, h.Eps)
		r.MatMul(ly.up, xn, 0, n, s.ffn, false)
		// as llama.cpp's CPU backend, through halves
		if h.Act == vision.ActGELU {
			r.BiasGELUF16(s.ffn, ly.upB, h.NFF, n)
		} else {
			r.BiasGELUQuickF16(s.ffn, ly.upB, h.NFF, n)
		}
		r.MatMul(ly.down, s.ffn, 0, n, x, true)
		r.BiasAct(x, ly.downB, d, n, false)
	}
	if e.postW != nil && layers == len(e.layers) {
		r.LayerNorm(x, e.postW, e.postB, xn, d, n, h.Eps)
		x = xn
	}
	return r, x, nil
}

// project records the projector on the ViT's output x into s.out.
func (e *VisionEncoder) project(r *gpu.Recorder, x *gpu.Buffer) {
	h, s, hd := e.H, &e.s, &e.head
	d := h.NEmbd
	switch h.Projector {
	case vision.ProjectorGemma3:
		r.AvgPool(x, s.pooled, d, h.ImageSize/h.PatchSize, h.ScaleFactor)
		r.RMSNorm(s.pooled, hd.softNorm, s.normed, d, h.Tokens(), h.Eps)
		r.MatMul(hd.proj, s.normed, 0, h.Tokens(), s.out, false)
	case vision.ProjectorMLP:
		// llama.cpp keeps rows 1.. of the sequence: patch 0 is dropped and the class token
		// (last) kept, as its graph (class token appended) selects them.
		row0 := 0
		if hd.class {
			row0 = 1
		}
		r.MatMul(hd.mm0, x, row0, e.nPatch, s.hidden, false)
		r.BiasGELUF16(s.hidden, hd.mm0B, hd.hidden, e.nPatch)
		r.MatMul(hd.mm2, s.hidden, 0, e.nPatch, s.out, false)
		r.BiasAct(s.out, hd.mm2B, h.ProjDim, e.nPatch, false)
	case vision.ProjectorIdefics3:
		// The patches are in blocks (e.order): each token's ScaleFactor^2 rows are its
		// shuffled input row.
		r.MatMul(hd.proj, x, 0, h.Tokens(), s.out, false)
	}
}

// Close releases the encoder's device memory.
func (e *VisionEncoder) Close() {
	e.l.release()
	if e.qwen != nil {
		e.qwen.release()
	}
	s := &e.s
	for _, b := range []*gpu.Buffer{s.pix, s.x, s.xn, s.qkv, s.k, s.v, s.attn, s.ffn, s.pooled, s.normed, s.hidden, s.out, s.pos, s.state} {
		if b != nil {
			b.Release()
		}
	}
}
