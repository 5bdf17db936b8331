// Package reference is the plain-Go forward pass of every architecture this project runs: the
// model written out operation by operation with gpu/cpuref's float64-accumulating kernels, for
// clarity rather than speed. It is the specification the GPU forward pass is tested against.
//
// Every architecture is llama's decoder with small differences, taken from llama.cpp's
// build_* graphs (src/llama-model.cpp, src/models/*.cpp), hyperparameters (load_hparams) and
// tensor names (src/llama-arch.cpp):
//
//	x = token_embd[tokens]                                  (* sqrt(n_embd): gemma2, gemma3)
//	for each layer:
//	    h = rmsnorm(x) * attn_norm
//	    q, k, v = h @ attn_q, h @ attn_k, h @ attn_v        (+ biases where present)
//	    q, k = rmsnorm per head * attn_q_norm, attn_k_norm  (qwen3, gemma3)
//	    q, k = rope(q), rope(k)                             (first n_rot dims of each head)
//	    o = attention(q, k, v) @ attn_output                (causal, grouped-query, 1/sqrt(head_dim))
//	    x = x + o                                           (gemma: x + rmsnorm(o) * post_attention_norm)
//	    h = rmsnorm(x) * ffn_norm
//	    f = (silu(h @ ffn_gate) * (h @ ffn_up)) @ ffn_down  (gemma: gelu, tanh approximation)
//	    x = x + f                                           (gemma: x + rmsnorm(f) * post_ffw_norm)
//	logits = (rmsnorm(x) * output_norm) @ output           (token_embd when output is absent)
//
//	llama: RoPE on adjacent pairs (x[2i], x[2i+1]); biases optional.
//	qwen2: NeoX RoPE, pairs (x[i], x[i + n_rot/2]); attn_q/attn_k/attn_v biases.
//	qwen2vl: qwen2's; its M-RoPE turns text, whose position components are all equal, as NeoX
//	       RoPE (Forward takes text only).
//	qwen3: NeoX RoPE; attn_q_norm and attn_k_norm, RMSNorms over each head's head_dim values.
//	phi3:  NeoX RoPE, often on part of each head (rope.dimension_count < head_dim); one fused
//	       attn_qkv matrix whose rows are q's, then k's, then v's; and ffn_up with 2*n_ff rows,
//	       the gate's then the up projection's (no ffn_gate).
//	gemma2: NeoX RoPE; the embedding scale, post-norms and GELU above; output tied to
//	       token_embd; attention scores soft-capped, s = c * tanh(s / c) with c =
//	       attn_logit_softcapping (default 50), and so are the logits (final_logit_softcapping,
//	       default 30); every other layer (il % 2 == 0) attends only to the last
//	       attention.sliding_window positions (default 4096).
//	gemma3: gemma2 without the soft-caps (the logits' only when final_logit_softcapping is
//	       given) and with qwen3's q/k norms; five of every six layers (il % 6 < 5) slide,
//	       when attention.sliding_window is given, and rotate with base 10000 and no scaling,
//	       the others with rope.freq_base and rope.scaling.
//
// The Mixtures of Experts put a router and experts (moe.go's MoE, as llama.cpp's
// build_moe_ffn) in place of the dense FFN; moe_arch.go has each one's settings:
//
//	qwen3moe: qwen3's attention; softmax gating, the chosen weights normalised.
//	qwen2moe: qwen2's attention; softmax gating, weights as they are, plus a shared expert.
//	llama with llama.expert_count > 0 (Mixtral): softmax gating, weights normalised.
//	gpt-oss: NeoX RoPE with YaRN; biases on q/k/v/o; attention sinks (AttentionSinks); every
//	       other layer (il % 2 == 0) slides; post_attention_norm is the FFN's input norm;
//	       router and expert biases, top-k on the raw logits then softmax over those k,
//	       swiglu_oai experts.
//
// Gemma's RMSNorms multiply by 1 + w; the GGUF converter has added the 1, so its norm weights
// are used as they are. Its 27B models (46 layers for gemma2, 62 for gemma3) scale scores by
// 1/sqrt(n_embd / n_head) rather than 1/sqrt(head_dim). Linear RoPE scaling (rope.scaling.factor
// with rope.scaling.type linear or absent) divides positions by the factor, in every
// architecture; YaRN (rope.scaling.type yarn) blends each pair's interpolated and
// extrapolated angles as ggml's rope_yarn does (ropeYaRN), for any architecture.
//
// Forward computes in float32 (accumulating in float64); llamacpp.go follows llama.cpp's CPU
// rounding instead (float16 cache, flash attention, 8-bit activations), for tests comparing
// with its recorded outputs on models that amplify every rounding.
//
// qwen35 (Qwen3.5), a hybrid of Gated DeltaNet recurrent layers and gated attention, is in
// qwen35.go (Qwen35 runs it token by token with its state); Hybrids lists it.
//
// The encoder bert (see bert.go) is no decoder: Embed, not Forward, runs it, and returns a
// pooled, normalised embedding.
package reference

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// Supported lists the architectures Forward runs (decoders; Embed runs the Encoders).
var Supported = []string{"llama", "qwen2", "qwen2vl", "qwen3", "phi3", "gemma2", "gemma3", "qwen3moe", "qwen2moe", "gpt-oss"}

// hparams are the hyperparameters, from the "<arch>.*" metadata keys.
type hparams struct {
	arch     string
	nEmbd    int // embedding_length
	nLayer   int // block_count
	nFF      int // feed_forward_length
	nHead    int // attention.head_count
	nKVHead  int // attention.head_count_kv (default head_count)
	headDim  int // attention.key_length (default nEmbd/nHead)
	nRot     int // rope.dimension_count (default headDim)
	ropeBase float32
	eps      float32 // attention.layer_norm_rms_epsilon
	nVocab   int     // rows of token_embd
	neox     bool    // NeoX RoPE pairing (every architecture but llama)

	ropeScale float32 // multiplies positions: 1/rope.scaling.factor under linear scaling, else 1
	attnScale float32 // multiplies q.k: 1/sqrt(headDim), but for Gemma's 27B models

	// Gemma's differences, zero elsewhere.
	gemma        bool    // embeddings * sqrt(nEmbd), post-norms, GELU
	attnSoftCap  float32 // > 0: attention scores soft-capped (gemma2)
	finalSoftCap float32 // > 0: logits soft-capped (gemma2; gemma3 when the file says)
	window       int     // > 0: the sliding layers see the last window positions
	swaPattern   int     // layer il slides when il % swaPattern < swaPattern-1
	ropeBaseSWA  float32 // the sliding layers' RoPE base and position scale
	ropeScaleSWA float32

	// YaRN (rope.scaling.type yarn): extFactor 1 (0 without YaRN), the dimensions' ramp from
	// nCtxOrig, betaFast and betaSlow, and attnFactor, which multiplies the rotated values
	// (times 1 + 0.1 ln(1/scale) under YaRN).
	extFactor, attnFactor float32
	nCtxOrig              int
	betaFast, betaSlow    float32

	// Mixtures of Experts (qwen3moe, qwen2moe, gpt-oss, and llama with expert_count > 0),
	// zero elsewhere: see moe.go.
	nExpert  int // expert_count
	nFFExp   int // each expert's rows
	nFFShexp int // the shared expert's rows (qwen2moe)
	routing  Routing
	act      Activation
}

// moe says whether the blocks' feed-forward networks are Mixtures of Experts.
func (hp hparams) moe() bool { return hp.nExpert > 0 }

// layerRoPE is layer il's RoPE base and position scale and its attention window (0: none):
// Gemma's sliding layers differ from its global ones.
func (hp hparams) layerRoPE(il int) (base, scale float32, window int) {
	if hp.window > 0 && (hp.swaPattern == 0 || il%hp.swaPattern < hp.swaPattern-1) { // pattern 0: all slide
		return hp.ropeBaseSWA, hp.ropeScaleSWA, hp.window
	}
	return hp.ropeBase, hp.ropeScale, 0
}

// Forward runs tokens through the model at positions 0..len(tokens)-1, with a fresh cache,
// and returns the logits of the last token (one per vocabulary entry). Tensors of any type
// gguf.Dequantize decodes are used as their float32 values.
func Forward(f *gguf.File, tokens []int32) ([]float32, error) {
	return forward(f, tokens, options{})
}

// options change how forward computes, to follow llama.cpp's CPU numerics where tests need
// to (see llamacpp.go).
type options struct {
	// kvF16 rounds keys and values to float16, as llama.cpp's default cache does, and attends
	// as its CPU flash attention does (attentionFlashF16).
	kvF16 bool
	// actQuant rounds every matrix product's input as llama.cpp's CPU does for the weight's
	// type (to 8-bit blocks for quantized weights: actRound).
	actQuant bool
	// trace, when set, sees intermediate values under llama.cpp's names for them (as
	// llama-eval-callback prints them: attn_norm, Qcur, Kcur, Vcur after RoPE, kqv_out,
	// ffn_inp, ffn_norm, ffn_out, l_out), layer il's, all tokens' rows.
	trace func(name string, il int, x []float32)
}

func (o options) tr(name string, il int, x []float32) {
	if o.trace != nil {
		o.trace(name, il, x)
	}
}

// forward is Forward with options.
func forward(f *gguf.File, tokens []int32, o options) ([]float32, error) {
	hp, err := readHparams(f)
	if err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("reference: no tokens")
	}
	if slices.Contains(Hybrids, hp.arch) { // a hybrid with recurrent state: qwen35.go
		return forwardQwen35(f, hp, tokens, o)
	}
	for _, t := range tokens {
		if t < 0 || int(t) >= hp.nVocab {
			return nil, fmt.Errorf("reference: token %d outside the vocabulary of %d", t, hp.nVocab)
		}
	}
	for _, name := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, ok := f.Tensor(name); ok {
			return nil, fmt.Errorf("reference: %s (LongRoPE scaling) not supported", name)
		}
	}
	w := loader{f}
	n := len(tokens)
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = int32(i)
	}
	ropeFreqs, err := w.optional("rope_freqs.weight", hp.nRot/2) // llama 3.1's frequency factors
	if err != nil {
		return nil, err
	}

	embd, err := w.tensor("token_embd.weight", hp.nEmbd, hp.nVocab)
	if err != nil {
		return nil, err
	}
	x := cpuref.GetRows(embd, hp.nEmbd, tokens) // n rows of nEmbd: the residual stream
	if hp.gemma {
		s := float32(math.Sqrt(float64(hp.nEmbd))) // llama.cpp's sqrtf(n_embd)
		for i := range x {
			x[i] *= s
		}
	}

	qDim, kvDim := hp.nHead*hp.headDim, hp.nKVHead*hp.headDim
	for il := range hp.nLayer {
		lw, err := loadLayer(w, hp, il)
		if err != nil {
			return nil, err
		}
		// Attention.
		// mm is linear by block il's tensor, computed as llama.cpp's CPU does under actQuant.
		mm := func(tensor string, w, b []float32, rows, cols int, x []float32, nTokens int) []float32 {
			if !o.actQuant {
				return linear(w, b, rows, cols, x, nTokens)
			}
			name, first := storedRows(f, il, tensor, hp)
			return linearLlamaCpp(f, name, first, w, b, rows, cols, x, nTokens)
		}
		h := cpuref.RMSNorm(x, lw.attnNorm, hp.nEmbd, hp.eps)
		o.tr("attn_norm", il, h)
		q := mm("attn_q.weight", lw.wq, lw.bq, qDim, hp.nEmbd, h, n)
		k := mm("attn_k.weight", lw.wk, lw.bk, kvDim, hp.nEmbd, h, n)
		v := mm("attn_v.weight", lw.wv, lw.bv, kvDim, hp.nEmbd, h, n)
		if lw.qNorm != nil {
			q = headNorm(q, lw.qNorm, hp.headDim, hp.eps)
			k = headNorm(k, lw.kNorm, hp.headDim, hp.eps)
		}
		base, freqScale, window := hp.layerRoPE(il)
		y := hp.yarn(base)
		ropeYaRN(q, pos, hp.nHead, hp.headDim, hp.nRot, base, freqScale, hp.neox, ropeFreqs, y)
		ropeYaRN(k, pos, hp.nKVHead, hp.headDim, hp.nRot, base, freqScale, hp.neox, ropeFreqs, y)
		o.tr("Qcur", il, q)
		o.tr("Kcur", il, k)
		o.tr("Vcur", il, v)
		var att []float32
		if o.kvF16 {
			att = attentionFlashF16(q, cpuref.ActF16(k), cpuref.ActF16(v), pos, hp.nHead, hp.nKVHead, hp.headDim, hp.attnScale, hp.attnSoftCap, window, lw.sinks)
		} else if lw.sinks != nil {
			att = AttentionSinks(q, k, v, pos, hp.nHead, hp.nKVHead, hp.headDim, hp.attnScale, hp.attnSoftCap, window, lw.sinks)
		} else {
			att = cpuref.AttentionOpts(q, k, v, pos, hp.nHead, hp.nKVHead, hp.headDim, hp.attnScale, hp.attnSoftCap, window)
		}
		o.tr("kqv_out", il, att)
		x = residual(x, mm("attn_output.weight", lw.wo, lw.bo, hp.nEmbd, qDim, att, n), lw.postAttnNorm, hp)
		o.tr("ffn_inp", il, x)

		// Feed-forward.
		h = cpuref.RMSNorm(x, lw.ffnNorm, hp.nEmbd, hp.eps)
		o.tr("ffn_norm", il, h)
		if lw.moe != nil {
			if o.actQuant {
				lw.moe.mm = func(tensor string, first int, w, b []float32, rows, cols int, x []float32) []float32 {
					return linearLlamaCpp(f, fmt.Sprintf("blk.%d.%s", il, tensor), first, w, b, rows, cols, x, 1)
				}
			}
			out := lw.moe.Forward(h, n)
			o.tr("ffn_out", il, out)
			x = cpuref.Add(x, out)
			o.tr("l_out", il, x)
			continue
		}
		gate := mm("ffn_gate.weight", lw.gate, nil, hp.nFF, hp.nEmbd, h, n)
		up := mm("ffn_up.weight", lw.up, nil, hp.nFF, hp.nEmbd, h, n)
		act := cpuref.SiLUMul
		if hp.gemma {
			act = cpuref.GELUMul
		}
		x = residual(x, mm("ffn_down.weight", lw.down, nil, hp.nEmbd, hp.nFF, act(gate, up), n), lw.postFFNNorm, hp)
	}

	outNorm, err := w.tensor("output_norm.weight", hp.nEmbd)
	if err != nil {
		return nil, err
	}
	out, err := w.optional("output.weight", hp.nEmbd, hp.nVocab)
	if err != nil {
		return nil, err
	}
	outName := "output.weight"
	if out == nil {
		out, outName = embd, "token_embd.weight" // tied embeddings
	}
	last := cpuref.RMSNorm(x[(n-1)*hp.nEmbd:], outNorm, hp.nEmbd, hp.eps)
	var logits []float32
	if o.actQuant {
		logits = linearLlamaCpp(f, outName, 0, out, nil, hp.nVocab, hp.nEmbd, last, 1)
	} else {
		logits = cpuref.MatMul(out, hp.nVocab, hp.nEmbd, last, 1)
	}
	if hp.finalSoftCap > 0 {
		logits = cpuref.SoftCap(logits, hp.finalSoftCap)
	}
	return logits, nil
}

// residual adds a block's output (rows of nEmbd) to the residual stream x, through Gemma's
// post-norm when postNorm is not nil.
func residual(x, out, postNorm []float32, hp hparams) []float32 {
	if postNorm != nil {
		out = cpuref.RMSNorm(out, postNorm, hp.nEmbd, hp.eps)
	}
	return cpuref.Add(x, out)
}

// layerWeights are one block's tensors as float32, in llama's layout whatever the
// architecture's: a matrix of R rows of C values is the GGUF tensor of shape [C, R].
type layerWeights struct {
	attnNorm     []float32 // [nEmbd]
	wq, wk, wv   []float32 // nHead*headDim, nKVHead*headDim, nKVHead*headDim rows of nEmbd
	bq, bk, bv   []float32 // their biases, nil when absent
	qNorm, kNorm []float32 // [headDim] per-head norms (qwen3, gemma3), nil otherwise
	wo           []float32 // nEmbd rows of nHead*headDim
	bo           []float32 // its bias, nil when absent
	postAttnNorm []float32 // [nEmbd] norm of the attention block's output (gemma), or nil
	ffnNorm      []float32 // [nEmbd]
	gate, up     []float32 // nFF rows of nEmbd
	down         []float32 // nEmbd rows of nFF
	postFFNNorm  []float32 // [nEmbd] norm of the feed-forward block's output (gemma), or nil
	sinks        []float32 // [nHead] attention sinks (gpt-oss), or nil
	moe          *MoE      // the Mixture of Experts in place of gate, up and down, or nil
}

// loadLayer reads block il, splitting phi3's fused matrices by rows into llama's.
func loadLayer(w loader, hp hparams, il int) (layerWeights, error) {
	var lw layerWeights
	var err error
	name := func(s string) string { return fmt.Sprintf("blk.%d.%s", il, s) }
	get := func(dst *[]float32, s string, shape ...int) {
		if err == nil {
			*dst, err = w.tensor(name(s), shape...)
		}
	}
	opt := func(dst *[]float32, s string, shape ...int) {
		if err == nil {
			*dst, err = w.optional(name(s), shape...)
		}
	}
	qDim, kvDim := hp.nHead*hp.headDim, hp.nKVHead*hp.headDim

	get(&lw.attnNorm, "attn_norm.weight", hp.nEmbd)
	if _, fused := w.f.Tensor(name("attn_qkv.weight")); fused {
		var qkv []float32
		get(&qkv, "attn_qkv.weight", hp.nEmbd, qDim+2*kvDim)
		if err == nil {
			lw.wq = qkv[:qDim*hp.nEmbd]
			lw.wk = qkv[qDim*hp.nEmbd : (qDim+kvDim)*hp.nEmbd]
			lw.wv = qkv[(qDim+kvDim)*hp.nEmbd:]
		}
	} else {
		get(&lw.wq, "attn_q.weight", hp.nEmbd, qDim)
		get(&lw.wk, "attn_k.weight", hp.nEmbd, kvDim)
		get(&lw.wv, "attn_v.weight", hp.nEmbd, kvDim)
	}
	if hp.arch == "qwen2" || hp.arch == "qwen2vl" { // required there, optional elsewhere (llama.cpp's build_qkv)
		get(&lw.bq, "attn_q.bias", qDim)
		get(&lw.bk, "attn_k.bias", kvDim)
		get(&lw.bv, "attn_v.bias", kvDim)
	} else {
		opt(&lw.bq, "attn_q.bias", qDim)
		opt(&lw.bk, "attn_k.bias", kvDim)
		opt(&lw.bv, "attn_v.bias", kvDim)
	}
	if hp.arch == "qwen3" || hp.arch == "qwen3moe" || hp.arch == "gemma3" {
		get(&lw.qNorm, "attn_q_norm.weight", hp.headDim)
		get(&lw.kNorm, "attn_k_norm.weight", hp.headDim)
	}
	get(&lw.wo, "attn_output.weight", qDim, hp.nEmbd)
	if hp.arch == "gpt-oss" {
		get(&lw.bo, "attn_output.bias", hp.nEmbd)
		get(&lw.sinks, "attn_sinks.weight", hp.nHead)
	} else {
		opt(&lw.bo, "attn_output.bias", hp.nEmbd)
	}
	if hp.gemma { // llama.cpp's LLM_TENSOR_ATTN_POST_NORM and LLM_TENSOR_FFN_POST_NORM
		get(&lw.postAttnNorm, "post_attention_norm.weight", hp.nEmbd)
		get(&lw.postFFNNorm, "post_ffw_norm.weight", hp.nEmbd)
	}

	if hp.arch == "gpt-oss" { // its FFN norm, despite the name (llama.cpp's LLM_TENSOR_ATTN_POST_NORM)
		get(&lw.ffnNorm, "post_attention_norm.weight", hp.nEmbd)
	} else {
		get(&lw.ffnNorm, "ffn_norm.weight", hp.nEmbd)
	}
	if hp.moe() {
		if err == nil {
			lw.moe, err = loadMoE(w, hp, name)
		}
		return lw, err
	}
	if _, separate := w.f.Tensor(name("ffn_gate.weight")); separate {
		get(&lw.gate, "ffn_gate.weight", hp.nEmbd, hp.nFF)
		get(&lw.up, "ffn_up.weight", hp.nEmbd, hp.nFF)
	} else { // phi3: ffn_up holds the gate's rows, then the up projection's
		var gateUp []float32
		get(&gateUp, "ffn_up.weight", hp.nEmbd, 2*hp.nFF)
		if err == nil {
			lw.gate, lw.up = gateUp[:hp.nFF*hp.nEmbd], gateUp[hp.nFF*hp.nEmbd:]
		}
	}
	get(&lw.down, "ffn_down.weight", hp.nFF, hp.nEmbd)
	return lw, err
}

// linear returns x @ w (+ b): nTokens rows of rows values, from a weight of rows x cols and
// nTokens rows of cols inputs; b, if not nil, is added to every row.
func linear(w, b []float32, rows, cols int, x []float32, nTokens int) []float32 {
	y := cpuref.MatMul(w, rows, cols, x, nTokens)
	if b != nil {
		for t := range nTokens {
			for r := range rows {
				y[t*rows+r] += b[r]
			}
		}
	}
	return y
}

// headNorm is qwen3's and gemma3's q/k norm: every head's headDim values (x holds tokens x
// heads of them) normalised to unit root-mean-square (plus eps) and multiplied by w, of headDim
// values.
func headNorm(x, w []float32, headDim int, eps float32) []float32 {
	return cpuref.RMSNorm(x, w, headDim, eps) // RMSNorm works row by row; a head is a row
}

// rope rotates, in place, the first nRot dimensions of every head of x (tokens x nHeads x
// headDim) by position: pair i (i < nRot/2) turns by the angle pos * scale * base^(-2i/nRot),
// divided by factors[i] when factors is not nil. The pair is (x[2i], x[2i+1]) in llama's
// "normal" RoPE and (x[i], x[i + nRot/2]) in GPT-NeoX's. Dimensions from nRot on are left as
// they are.
func rope(x []float32, pos []int32, nHeads, headDim, nRot int, base, scale float32, neox bool, factors []float32) {
	ropeYaRN(x, pos, nHeads, headDim, nRot, base, scale, neox, factors, yarnParams{attnFactor: 1})
}

// yarnParams are ggml_rope_ext's YaRN arguments: extFactor (0: none), attnFactor and the
// ramp's pair range lo..hi.
type yarnParams struct{ ext, attnFactor, lo, hi float32 }

// yarn is the YaRN parameters of the layers rotating with base (the ramp depends on it).
func (hp hparams) yarn(base float32) yarnParams {
	y := yarnParams{ext: hp.extFactor, attnFactor: hp.attnFactor}
	if y.ext != 0 {
		y.lo, y.hi = yarnCorrDims(hp.nRot, hp.nCtxOrig, base, hp.betaFast, hp.betaSlow)
	}
	return y
}

// yarnCorrDims is ggml_rope_yarn_corr_dims, in float32 as ggml computes it: the pairs whose
// wavelengths make between betaFast and betaSlow turns over the original context,
// floor(d(betaFast)) clamped at 0 to ceil(d(betaSlow)) clamped at nRot-1, where
// d(b) = nRot * ln(nCtxOrig / (2 pi b)) / (2 ln base).
func yarnCorrDims(nRot, nCtxOrig int, base, betaFast, betaSlow float32) (lo, hi float32) {
	logf := func(v float32) float32 { return float32(math.Log(float64(v))) }
	dim := func(beta float32) float32 {
		return float32(nRot) * logf(float32(nCtxOrig)/(beta*2*float32(math.Pi))) / (2 * logf(base))
	}
	lo = max(0, float32(math.Floor(float64(dim(betaFast)))))
	hi = min(float32(nRot-1), float32(math.Ceil(float64(dim(betaSlow)))))
	return lo, hi
}

// ropeYaRN is rope with ggml's YaRN (rope_yarn): pair i's extrapolated angle
// e = pos * base^(-2i/nRot) (/ factors[i]) and interpolated angle scale*e are blended, with
// ramp = ext * (1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)), into
// theta = scale*e*(1 - ramp) + e*ramp, and cos and sin multiplied by attnFactor, and by
// 1 + 0.1 ln(1/scale) when ext is not 0. With ext 0 and attnFactor 1 it is plain RoPE.
func ropeYaRN(x []float32, pos []int32, nHeads, headDim, nRot int, base, scale float32, neox bool, factors []float32, y yarnParams) {
	half := nRot / 2
	mscale := y.attnFactor
	if y.ext != 0 {
		mscale *= 1 + 0.1*float32(math.Log(float64(1/scale)))
	}
	for t, p := range pos {
		for h := range nHeads {
			head := x[(t*nHeads+h)*headDim : (t*nHeads+h+1)*headDim]
			for i := range half {
				extrap := float64(p) * math.Pow(float64(base), -2*float64(i)/float64(nRot))
				if factors != nil {
					extrap /= float64(factors[i])
				}
				theta := float64(scale) * extrap
				if y.ext != 0 {
					r := (float64(i) - float64(y.lo)) / math.Max(0.001, float64(y.hi-y.lo))
					ramp := (1 - math.Min(1, math.Max(0, r))) * float64(y.ext)
					theta = theta*(1-ramp) + extrap*ramp
				}
				a, b := 2*i, 2*i+1
				if neox {
					a, b = i, i+half
				}
				c, s := math.Cos(theta)*float64(mscale), math.Sin(theta)*float64(mscale)
				x0, x1 := float64(head[a]), float64(head[b])
				head[a] = float32(x0*c - x1*s)
				head[b] = float32(x0*s + x1*c)
			}
		}
	}
}

// readHparams reads the hyperparameters of a supported architecture.
func readHparams(f *gguf.File) (hparams, error) {
	arch := f.Architecture()
	if slices.Contains(Encoders, arch) {
		return hparams{}, fmt.Errorf("reference: %s is an encoder, whose output is an embedding, not logits: use Embed", arch)
	}
	if !slices.Contains(Supported, arch) && !slices.Contains(Hybrids, arch) {
		return hparams{}, fmt.Errorf("reference: architecture %q not supported (supported: %s)", arch, strings.Join(slices.Concat(Supported, Hybrids), ", "))
	}
	hp := hparams{arch: arch, neox: arch != "llama"}
	required := func(key string, dst *int) error {
		v, ok := f.Uint(arch + "." + key)
		if !ok || v == 0 || v > 1<<24 {
			return fmt.Errorf("reference: metadata %s.%s missing or invalid", arch, key)
		}
		*dst = int(v)
		return nil
	}
	optional := func(key string, dst *int, def int) {
		*dst = def
		if v, ok := f.Uint(arch + "." + key); ok && v > 0 && v <= 1<<24 {
			*dst = int(v)
		}
	}
	for _, r := range []struct {
		key string
		dst *int
	}{{"embedding_length", &hp.nEmbd}, {"block_count", &hp.nLayer}, {"attention.head_count", &hp.nHead}} {
		if err := required(r.key, r.dst); err != nil {
			return hparams{}, err
		}
	}
	// The MoE architectures' experts have their own size; their feed_forward_length is
	// optional, as it is to llama.cpp.
	if slices.Contains([]string{"qwen3moe", "qwen2moe", "gpt-oss"}, arch) {
		optional("feed_forward_length", &hp.nFF, 0)
	} else if err := required("feed_forward_length", &hp.nFF); err != nil {
		return hparams{}, err
	}
	optional("attention.head_count_kv", &hp.nKVHead, hp.nHead)
	optional("attention.key_length", &hp.headDim, hp.nEmbd/hp.nHead)
	optional("rope.dimension_count", &hp.nRot, hp.headDim)
	hp.ropeBase, hp.eps = 10000, 1e-5
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		hp.ropeBase = float32(v)
	}
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		hp.eps = float32(v)
	}
	// llama.cpp reads the factor (or the older rope.scale_linear) whatever the type, which
	// defaults to linear; type none turns it off (but for gpt-oss's sliding layers), and YaRN
	// adds its blend and magnitude scale (llama_context's yarn_* settings, from llama.cpp's
	// defaults: these architectures read no rope.scaling.yarn_* key).
	factor, ok := f.Float(arch + ".rope.scaling.factor")
	if !ok {
		factor, ok = f.Float(arch + ".rope.scale_linear")
	}
	trainScale := float32(1)
	if ok && factor != 0 {
		trainScale = float32(1 / factor)
	}
	hp.ropeScale, hp.attnFactor = trainScale, 1
	if v, ok := f.Float(arch + ".rope.scaling.attn_factor"); ok {
		hp.attnFactor = float32(v)
	}
	switch typ, _ := f.String(arch + ".rope.scaling.type"); typ {
	case "", "linear":
	case "yarn":
		hp.extFactor, hp.betaFast, hp.betaSlow = 1, 32, 1
		ctx, _ := f.Uint(arch + ".context_length")
		if v, ok := f.Uint(arch + ".rope.scaling.original_context_length"); ok {
			ctx = v
		}
		if ctx == 0 || ctx > 1<<30 {
			return hparams{}, fmt.Errorf("reference: YaRN needs %s.context_length or rope.scaling.original_context_length", arch)
		}
		hp.nCtxOrig = int(ctx)
		// llama_context sets yarn_attn_factor to get_mscale(factor) / (1 + 0.1 ln factor),
		// which cancels (up to rounding) the 1 + 0.1 ln factor ggml's rope_yarn multiplies by.
		fac := 1 / trainScale
		lnf := float32(math.Log(float64(fac)))
		mscale := float32(1) // get_mscale(fac, 1)
		if fac > 1 {
			mscale = 0.1*lnf + 1
		}
		hp.attnFactor *= mscale * (1 / (1 + 0.1*lnf))
	case "none":
		hp.ropeScale = 1
	default:
		return hparams{}, fmt.Errorf("reference: %s.rope.scaling.type %q not supported (supported: none, linear, yarn)", arch, typ)
	}
	hp.attnScale = float32(1 / math.Sqrt(float64(hp.headDim)))
	if arch == "gemma2" || arch == "gemma3" {
		readGemma(f, &hp)
	}
	if arch == "gpt-oss" {
		if err := readGPTOSS(f, &hp, trainScale); err != nil {
			return hparams{}, err
		}
	}
	if err := readMoE(f, &hp); err != nil {
		return hparams{}, err
	}
	if v, ok := f.Uint(arch + ".attention.value_length"); ok && int(v) != hp.headDim {
		return hparams{}, fmt.Errorf("reference: value_length %d differs from key_length %d", v, hp.headDim)
	}
	switch {
	case hp.nHead%hp.nKVHead != 0:
		return hparams{}, fmt.Errorf("reference: head_count_kv %d does not divide head_count %d", hp.nKVHead, hp.nHead)
	case hp.headDim == 0 || hp.nRot%2 != 0 || hp.nRot > hp.headDim:
		return hparams{}, fmt.Errorf("reference: rope.dimension_count %d invalid for head size %d", hp.nRot, hp.headDim)
	}
	embd, ok := f.Tensor("token_embd.weight")
	if !ok || len(embd.Shape) != 2 {
		return hparams{}, fmt.Errorf("reference: token_embd.weight missing or not a matrix")
	}
	hp.nVocab = int(embd.Shape[1])
	return hp, nil
}

// readGemma reads Gemma 2's and 3's settings as llama.cpp's load_hparams does, with its
// defaults where the file is silent.
func readGemma(f *gguf.File, hp *hparams) {
	a := hp.arch
	hp.gemma = true
	// The 27B models (llama.cpp's LLM_TYPE_27B) scale by n_embd/n_head, not the head size.
	if (a == "gemma2" && hp.nLayer == 46) || (a == "gemma3" && hp.nLayer == 62) {
		hp.attnScale = float32(1 / math.Sqrt(float64(hp.nEmbd/hp.nHead)))
	}
	window, hasWindow := f.Uint(a + ".attention.sliding_window")
	if a == "gemma2" {
		// Every other layer slides, with the global layers' RoPE.
		hp.swaPattern, hp.window = 2, 4096
		if hasWindow && window > 0 {
			hp.window = int(window)
		}
		hp.ropeBaseSWA, hp.ropeScaleSWA = hp.ropeBase, hp.ropeScale
		hp.attnSoftCap, hp.finalSoftCap = 50, 30
		if v, ok := f.Float(a + ".attn_logit_softcapping"); ok {
			hp.attnSoftCap = float32(v)
		}
		if v, ok := f.Float(a + ".final_logit_softcapping"); ok {
			hp.finalSoftCap = float32(v)
		}
		return
	}
	// gemma3: five of six layers slide, with RoPE base 10000 unscaled; without a window (as
	// in models derived from Gemma 3 that drop it) every layer is global.
	if hasWindow && window > 0 {
		hp.swaPattern, hp.window = 6, int(window)
		hp.ropeBaseSWA, hp.ropeScaleSWA = 10000, 1
	}
	if v, ok := f.Float(a + ".final_logit_softcapping"); ok {
		hp.finalSoftCap = float32(v)
	}
}

// loader reads tensors as float32.
type loader struct{ f *gguf.File }

// tensor returns the named tensor's values, checking its shape (ggml order: row length first).
func (l loader) tensor(name string, shape ...int) ([]float32, error) {
	t, ok := l.f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("reference: tensor %s missing", name)
	}
	want := make([]uint64, len(shape))
	for i, d := range shape {
		want[i] = uint64(d)
	}
	if !slices.Equal(t.Shape, want) {
		return nil, fmt.Errorf("reference: tensor %s has shape %v, want %v", name, t.Shape, want)
	}
	vals := make([]float32, t.NumElements())
	if err := gguf.Dequantize(t.Type, l.f.TensorData(t), vals); err != nil {
		return nil, fmt.Errorf("reference: tensor %s: %w", name, err)
	}
	return vals, nil
}

// getter returns a tensor reader that stops at the first error, which it keeps in *err: a run
// of reads checked once.
func (l loader) getter(err *error) func(name string, shape ...int) []float32 {
	return func(name string, shape ...int) []float32 {
		if *err != nil {
			return nil
		}
		v, e := l.tensor(name, shape...)
		*err = e
		return v
	}
}

// optional is tensor for a tensor that may be absent: nil, without error, when it is.
func (l loader) optional(name string, shape ...int) ([]float32, error) {
	if _, ok := l.f.Tensor(name); !ok {
		return nil, nil
	}
	return l.tensor(name, shape...)
}
