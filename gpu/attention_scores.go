package gpu

import "slices"

// Decoding at long contexts on CPU adapters computes each key's score once
// (attention_scores.wgsl), for the barrier-free kernel to take (attention.wgsl's PRESCORED),
// instead of once per four output dimensions.

// scoreStride is the scores' row length for a prescored pass: its keys.
func (a AttnParams) scoreStride() int { return max(a.MaxKeys, a.AllKeys, 1) }

// AttentionScoresSize is the AttnParams.Scores decoding nTokens tokens of nHead heads at up to
// maxKeys keys needs, in floats.
func AttentionScoresSize(nTokens, nHead, maxKeys int) int { return nTokens * nHead * max(maxKeys, 1) }

// PrescoreFrom is the context from which barrier-free decoding takes AttnParams.Scores: below
// it the scores cost little to recompute. On lavapipe, gen-model qwen35-small Q4_K_M (two
// attention layers of 8 heads of 64) decodes at depth 4096 at 40.8-41.1 tokens/s with them,
// 17.9 without (50.6-50.8 at depth 0).
const PrescoreFrom = 512

// prescored reports whether Attention takes its prescored kernels: a CPU adapter, scores
// scratch big enough, causal keys from PrescoreFrom to what one invocation's loop may run.
func (r *Recorder) prescored(nTokens, nHead int, ap AttnParams) bool {
	keys := ap.scoreStride()
	return r.d.BarrierFree && ap.Scores != nil && ap.AllKeys == 0 && keys >= PrescoreFrom && keys <= loopBudget &&
		ap.Scores.Size() >= uint64(AttentionScoresSize(nTokens, nHead, keys))*4
}

// attentionPrescored is the barrier-free kernel with the scores computed first, once each
// (attention_scores.wgsl), into ap.Scores.
func (r *Recorder) attentionPrescored(q, kCache, vCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim int, ap AttnParams) {
	params := ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride)
	sp := r.kernel("attention_scores", append(slices.Clip(bindAttn), ReadWrite), 64, kvDefines(kvF16)...)
	defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), "ROW_PER_THREAD", "PRESCORED", "SINKS7"), append(slices.Clip(bindAttn), ReadOnly),
		q, kCache, vCache, pos, out, ap.Scores)
	p := r.kernel("attention", bind, 64, defs...)
	if sp == nil || p == nil {
		return
	}
	r.Dispatch(sp, params, r.elementwise(AttentionScoresSize(nTokens, nHead, ap.scoreStride())), q, kCache, vCache, pos, out, ap.Scores)
	r.Dispatch(p, params, r.elementwise(nTokens*nHead*attnGroups(headDim)), bufs...)
}
