package model

import (
	"fmt"

	"github.com/wgpu-llama/wgpu-llama/gpu"
)

// The self-attention building block of the decoders: the q, k, v projections (separate or
// fused), their optional biases and per-head norms, RoPE with the cache write, attention over
// the cache, and the output projection into the residual stream.

// layer holds one block's weights on the device; which of them a block has depends on its
// architecture.
type layer struct {
	attnNorm, ffnNorm *gpu.Buffer
	qkv               []proj      // into rows of [q | k | v]
	qkvBias           *gpu.Buffer // q, k and v projections' biases (Qwen2, gpt-oss), or nil
	qNorm, kNorm      *gpu.Buffer // per-head RMSNorm weights of q and k (Qwen3, Gemma 3), or nil
	postAttn, postFFN *gpu.Buffer // RMSNorm weights applied to the block outputs (Gemma), or nil
	attnGate          []proj      // the attention output's gate rows of attn_q (GatedAttn), or nil
	wo                []proj
	woBias            *gpu.Buffer // the output projection's bias (gpt-oss), or nil
	sinks             *gpu.Buffer // attention sinks, one logit per head (gpt-oss), or nil
	gateUp            []proj      // into rows of [gate | up]; a dense feed-forward's
	ffnDown           []proj
	moe               *moeLayer       // the experts, for a Mixture-of-Experts block; else nil
	rec               *recurrentLayer // a Gated DeltaNet block's mixer (block_recurrent.go), else nil
	outScale          float32         // multiplies the block's output (Gemma 4's layer_output_scale); 0: none
}

// loadAttention loads block il's attention: its input norm, q, k, v projections (separate or
// Phi-3's fused attn_qkv; Gemma 4's global layers take k for v, its layers that read an
// earlier layer's cache q alone), their optional biases (Qwen2, gpt-oss) and per-head norms
// (Qwen3), and the output projection with its optional bias.
func loadAttention(l *loader, c *Config, ly *layer, il int) error {
	p := blk(il)
	sh := c.attnShape(il)
	hd := sh.headDim
	qDim, kvDim := sh.qDim(), sh.kvHeads*hd
	var err error
	if !c.Encoder {
		if ly.attnNorm, err = l.vector(p+"attn_norm.weight", c.NEmbd); err != nil {
			return err
		}
	}
	switch {
	case sh.kvHeads == 0: // keys and values from an earlier layer's cache (Gemma 4)
		ly.qkv, err = l.fused([]string{p + "attn_q.weight"}, []int{qDim}, c.NEmbd)
	case c.VNorm && !l.hasTensor(p+"attn_v.weight"): // Gemma 4's K=V: the values are the keys' projection
		k := rowsOf{name: p + "attn_k.weight", rows: kvDim}
		again := k
		again.repeat = true
		ly.qkv, err = l.fusedRows([]rowsOf{{name: p + "attn_q.weight", rows: qDim}, k, again}, c.NEmbd)
	case c.GatedAttn: // attn_q: per head, its q rows then its gate rows
		q := rowsOf{name: p + "attn_q.weight", rows: qDim, of: 2 * qDim, run: hd, every: 2 * hd}
		if ly.qkv, err = l.fusedRows([]rowsOf{q, {name: p + "attn_k.weight", rows: kvDim}, {name: p + "attn_v.weight", rows: kvDim}}, c.NEmbd); err != nil {
			return err
		}
		q.from = hd
		ly.attnGate, err = l.fusedRows([]rowsOf{q}, c.NEmbd)
	case l.hasTensor(p + "attn_qkv.weight"):
		var w gpu.Weight
		w, err = l.matrix(p+"attn_qkv.weight", qDim+2*kvDim, c.NEmbd)
		ly.qkv = []proj{{w: w}}
	default:
		ly.qkv, err = l.fused([]string{p + "attn_q.weight", p + "attn_k.weight", p + "attn_v.weight"}, []int{qDim, kvDim, kvDim}, c.NEmbd)
	}
	if err != nil {
		return err
	}
	if l.hasTensor(p + "attn_q.bias") {
		if ly.qkvBias, err = l.concatVectors([]string{p + "attn_q.bias", p + "attn_k.bias", p + "attn_v.bias"}, []int{qDim, kvDim, kvDim}); err != nil {
			return err
		}
	}
	if l.hasTensor(p + "attn_q_norm.weight") {
		if ly.qkvBias != nil {
			return fmt.Errorf("model: %sattn_q_norm with q/k/v biases is not supported", p)
		}
		if ly.qNorm, err = l.vector(p+"attn_q_norm.weight", hd); err != nil {
			return err
		}
		ly.kNorm = ly.qNorm // unread where the layer writes no keys
		if sh.kvHeads > 0 {
			if ly.kNorm, err = l.vector(p+"attn_k_norm.weight", hd); err != nil {
				return err
			}
		}
	}
	wo, err := l.matrix(p+"attn_output.weight", c.NEmbd, qDim)
	if err != nil {
		return err
	}
	ly.wo = []proj{{w: wo}}
	if !c.Encoder && l.hasTensor(p+"attn_output.bias") {
		if ly.woBias, err = l.vector(p+"attn_output.bias", c.NEmbd); err != nil {
			return err
		}
	}
	return nil
}

// blk is the name prefix of block il's tensors.
func blk(il int) string { return fmt.Sprintf("blk.%d.", il) }

// layerAttention is layer il's RoPE and attention settings: sliding-window layers see the
// window, and Gemma's use their own RoPE base and unscaled positions (and no frequency
// factors: Gemma 4's proportional RoPE is its global layers').
func (m *Model) layerAttention(il int) (gpu.Rope, gpu.AttnParams) {
	c := m.Config
	rope := gpu.Rope{NRot: c.attnShape(il).nRot, FreqBase: c.RopeBase, FreqScale: c.RopeScale, NeoX: c.RopeNeoX, Factors: m.ropeFreqs, YaRN: c.YaRN}
	if c.MRoped() {
		rope.MPos, rope.Sections, rope.Interleaved = m.scratch.mpos, c.MRope, c.IMRoPE
	}
	ap := gpu.AttnParams{Scale: c.AttnScale, SoftCap: c.AttnSoftCap}
	if il < len(m.layers) {
		ap.Sinks = m.layers[il].sinks
	}
	if c.SlidingLayer(il) {
		ap.Window = c.SlidingWindow
		if c.RopeBaseSWA > 0 {
			rope.FreqBase, rope.FreqScale, rope.YaRN, rope.Factors = c.RopeBaseSWA, 1, gpu.YaRN{}, nil
		}
	}
	return m.withTable(rope), ap
}

// attentionBlock records block il's attention: norm, projections, per-head norms, RoPE and the
// cache write, attention, qwen35's output gate, and the output projection added to the
// residual stream (through Gemma's post-norm when the block has one). A layer that reads an
// earlier layer's cache (Gemma 4) projects and turns its queries alone and attends over that
// layer's keys and values.
func (m *Model) attentionBlock(p *pass, il int) {
	c, s, r, n, kv := m.Config, &m.scratch, p.r, p.n, p.kv
	ly := &m.layers[il]
	sh := c.attnShape(il)
	qkvW, qDim, hd := sh.qkvWidth(), sh.qDim(), sh.headDim
	if ly.attnGate != nil || !m.normProjectFused(r, ly.attnNorm, ly.qkv, m.layerLora[il].qkv, n, s.qkv, qkvW) {
		m.normProject(r, ly.attnNorm, ly.qkv, m.layerLora[il].qkv, n, s.qkv, qkvW) // the gate reads s.xn
	}
	if ly.attnGate != nil {
		m.project(r, ly.attnGate, s.xn, 0, n, c.NEmbd, s.gate, qDim, false)
	}
	if ly.qNorm != nil {
		r.HeadNorm(s.qkv, ly.qNorm, ly.kNorm, n, sh.heads, sh.kvHeads, hd, c.RMSEps, c.VNorm)
	}
	rope, ap := m.layerAttention(il)
	rope.PageBits, ap.PageBits = p.pageBits, p.pageBits
	ap.MaxKeys, ap.Sequences, ap.State = p.maxKeys, p.seqs, s.attnState
	ap.Scores = m.attentionScores(n, p.maxKeys)
	src := c.kvSource(il)
	r.RoPEKV(s.qkv, s.pos, kv.k[src], kv.v[src], ly.qkvBias, m.kvF16, n, sh.heads, sh.kvHeads, hd, rope)
	if kv.part != nil && n == 1 && p.maxKeys >= splitAttentionFrom {
		r.AttentionSplit(s.qkv, kv.k[src], kv.v[src], s.pos, kv.part, s.attn, m.kvF16, qkvW, n, sh.heads, c.NKVHead, hd, p.maxKeys, ap)
	} else {
		r.Attention(s.qkv, kv.k[src], kv.v[src], p.attnPos, s.attn, m.kvF16, qkvW, n, sh.heads, c.NKVHead, hd, ap)
	}
	m.recordProbe(r, kv, il, n, p.attnPos, ap) // Batch.Probe's layer only
	if ly.attnGate != nil {
		r.SigmoidGate(s.attn, gpu.HeadLayout{Stride: qDim}, s.gate, gpu.HeadLayout{Stride: qDim}, n, sh.heads, hd)
	}
	m.residual(r, ly.wo, m.layerLora[il].wo, s.attn, qDim, ly.woBias, ly.postAttn, n)
}

// prescoreTokens bounds the batches whose attention takes precomputed scores on CPU adapters
// (gpu.AttnParams.Scores): decoding, a draft's verification, a few slots at once.
const prescoreTokens = 16

// attentionScores is the scores scratch of a pass of n tokens at up to maxKeys keys on a CPU
// adapter, grown as contexts grow; nil where the pass does not take it (or it cannot be had:
// the kernels then recompute the scores).
func (m *Model) attentionScores(n, maxKeys int) *gpu.Buffer {
	if !m.dev.BarrierFree || n > prescoreTokens || maxKeys < gpu.PrescoreFrom {
		return nil
	}
	if err := ensureWords(m.dev, &m.scratch.attnScores, "attn_scores", gpu.AttentionScoresSize(n, m.Config.NHead, maxKeys)); err != nil {
		return nil
	}
	return m.scratch.attnScores
}
