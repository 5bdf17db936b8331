package gpu

import (
	"fmt"
	"math"
	"slices"
)

// The attention's recorder ops: RoPE with the cache write, per-head norms, and attention over
// the cache (whole, in key chunks, or split over workgroups for long contexts).

// kvDefines selects the KV cache format.
func kvDefines(f16 bool) []string {
	if f16 {
		return []string{"KV_F16"}
	}
	return nil
}

// Rope describes rotary position embedding: nRot dimensions of each head rotate by
// pos * FreqBase^(-2i/nRot), pairing adjacent elements (llama) or, with NeoX, element i with
// i + nRot/2 (GPT-NeoX, Qwen, Phi-3).
type Rope struct {
	NRot      int     // rotated dimensions per head: even, at most head_dim (a multiple of 4 with NeoX)
	FreqBase  float32 // theta base, llama.cpp's rope.freq_base (e.g. 10000)
	FreqScale float32 // linear scaling: positions are multiplied by it (0 means 1)
	NeoX      bool    // pair i with i + NRot/2 instead of adjacent elements
	// Factors, when set, divides pair i's angle by Factors[i] (NRot/2 f32; Llama 3.1).
	Factors *Buffer
	// YaRN, when ExtFactor > 0, blends interpolated (FreqScale) and extrapolated angles over
	// the pair range CorrLo..CorrHi and scales by AttnFactor, as ggml's rope_yarn.
	YaRN YaRN
	// PageBits says how pos addresses the cache (see RoPEKV); it is the KV cache's, carried
	// here because RoPEKV writes the cache.
	PageBits int
	// MPos, when set, makes this ggml's multi-section RoPE (M-RoPE, Qwen2-VL; NeoX pairs):
	// it holds four position components per token (t, h, w, e), and pair i turns by the one
	// its section names: i modulo the Sections' total falls in section 0 (t), 1 (h), 2 (w)
	// or 3 (e). The token's position in pos still names its cache row.
	MPos     *Buffer
	Sections [4]int
	// Vision is ggml's vision mode of M-RoPE (a ViT's 2D RoPE): each section's frequencies
	// restart at its first pair and spread over NRot/2 dimensions.
	Vision bool
	// Interleaved is ggml's interleaved M-RoPE (GGML_ROPE_TYPE_IMROPE: Qwen3-VL, qwen35;
	// with MPos, not Vision): the components take turns instead of spans, pair i turning by
	// the component of its sector s = i modulo the Sections' total: h when s%3 == 1 and s <
	// 3·Sections[1], w when s%3 == 2 and s < 3·Sections[2], t when s%3 == 0 and s <
	// 3·Sections[0], e otherwise.
	Interleaved bool
	// Table, when set, holds the cos and sin of every pair at positions 0 .. TableRows-1 as
	// llama.cpp's CPU rope takes them (Device.RoPETable); a CPU adapter reproducing llama.cpp
	// (CPUMath) turns by it.
	Table     *Buffer
	TableRows int
}

// YaRN holds ggml's YaRN RoPE parameters; see YaRNCorrDims for the range.
type YaRN struct {
	// ExtFactor weighs extrapolation at the ramp's low end (0: plain RoPE, no YaRN);
	// AttnFactor scales the rotated values (0 means 1); CorrLo..CorrHi is the pair range
	// over which the blend ramps from extrapolated to interpolated angles.
	ExtFactor, AttnFactor, CorrLo, CorrHi float32
}

// YaRNCorrDims is ggml's ggml_rope_yarn_corr_dims: the rotated dimensions (of nRot) whose
// wavelengths fall between betaFast and betaSlow rotations over the original context.
func YaRNCorrDims(nRot, nCtxOrig int, freqBase, betaFast, betaSlow float64) (lo, hi float32) {
	dim := func(rot float64) float64 {
		return float64(nRot) * math.Log(float64(nCtxOrig)/(rot*2*math.Pi)) / (2 * math.Log(freqBase))
	}
	return float32(max(0, math.Floor(dim(betaFast)))), float32(min(float64(nRot-1), math.Ceil(dim(betaSlow))))
}

// RoPEKV takes the fused qkv rows of nTokens tokens (nHead query heads, then nKVHead key and
// value heads), adds the projection bias when bias is not nil, rotates q in place, and writes
// rotated k and plain v into the caches, in f16 when kvF16. pos holds each token's position,
// then one u32 per token saying where its sequence lives in the cache: with rope.PageBits 0,
// the sequence's first cache row (token t goes to row base[t] + pos[t]); otherwise the index in
// pos of the sequence's page table, which lists the cache pages (2^PageBits rows each) holding
// its positions in order. Either way sequences of one batch keep apart in one cache.
func (r *Recorder) RoPEKV(qkv, pos, kCache, vCache, bias *Buffer, kvF16 bool, nTokens, nHead, nKVHead, headDim int, rope Rope) {
	if headDim%2 != 0 || rope.NRot > headDim || rope.NRot%2 != 0 || (rope.NeoX && rope.NRot%4 != 0) {
		r.fail("gpu: rope: head_dim %d, n_rot %d (neox %v) unsupported", headDim, rope.NRot, rope.NeoX)
		return
	}
	defs := kvDefines(kvF16)
	bind := []Access{ReadWrite, ReadOnly, ReadWrite, ReadWrite}
	bufs := []*Buffer{qkv, pos, kCache, vCache}
	if rope.NeoX {
		defs = append(defs, "NEOX")
	}
	switch {
	case bias != nil && rope.Factors != nil, rope.MPos != nil && rope.Factors != nil:
		r.fail("gpu: rope: frequency factors with a projection bias or M-RoPE are not supported")
		return
	case bias != nil:
		defs, bind, bufs = append(defs, "BIAS"), append(bind, ReadOnly), append(bufs, bias)
	case rope.Factors != nil:
		defs, bind, bufs = append(defs, "FACTORS"), append(bind, ReadOnly), append(bufs, rope.Factors)
	}
	sect := rope.Sections
	if rope.MPos != nil {
		if !rope.NeoX || sect[0]+sect[1]+sect[2]+sect[3] == 0 {
			r.fail("gpu: rope: M-RoPE takes NeoX pairs and sections, not %v", sect)
			return
		}
		defs, bind, bufs = append(defs, "MROPE"), append(bind, ReadOnly), append(bufs, rope.MPos)
		if rope.Interleaved {
			defs = append(defs, "IMROPE")
		}
	}
	if rope.Interleaved && (rope.MPos == nil || rope.Vision) {
		r.fail("gpu: rope: interleaved M-RoPE takes MPos and not the vision mode")
		return
	}
	if rope.Table != nil && r.d.CPUMath {
		// The table has the frequency factors in it: it takes their binding's place.
		if i := slices.Index(defs, "FACTORS"); i >= 0 {
			defs, bind, bufs = slices.Delete(defs, i, i+1), slices.Delete(bind, 4, 5), slices.Delete(bufs, 4, 5)
		}
		defs, bind, bufs = append(defs, "ROPE_TABLE"), append(bind, ReadOnly), append(bufs, rope.Table)
	}
	p := r.kernel("rope_kv", bind, 64, defs...)
	if p == nil {
		return
	}
	pairs := nTokens * (nHead + 2*nKVHead) * headDim / 2
	scale, attn := rope.scales()
	y := rope.YaRN
	vision := 0
	if rope.Vision {
		vision = 1
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, rope.NRot, rope.FreqBase, scale, y.ExtFactor, attn, y.CorrLo, y.CorrHi, rope.PageBits,
		sect[0], sect[1], sect[2], sect[3], vision, rope.thetaScale(), rope.TableRows), r.elementwise(pairs), bufs...)
}

// scales is the RoPE's linear position scale and YaRN magnitude factor, 1 where unset.
func (rope Rope) scales() (freqScale, attnFactor float32) {
	freqScale, attnFactor = rope.FreqScale, rope.YaRN.AttnFactor
	if freqScale == 0 {
		freqScale = 1
	}
	if attnFactor == 0 {
		attnFactor = 1
	}
	return freqScale, attnFactor
}

// thetaScale is ggml's factor between neighbouring pairs' angles, powf(freq_base, -2.0f/n_rot)
// from the C library as ggml takes it (CPU_MATH's rope_turn, RoPETable).
func (rope Rope) thetaScale() float32 {
	return powf(rope.FreqBase, float32(-2)/float32(rope.NRot))
}

// HeadNorm RMS-normalises every query and key head vector of the fused qkv rows in place,
// multiplying by qNorm or kNorm (headDim values each): QK-norm. With vNorm the value heads are
// normalised too, with no weight (Gemma 4).
func (r *Recorder) HeadNorm(qkv, qNorm, kNorm *Buffer, nTokens, nHead, nKVHead, headDim int, eps float32, vNorm bool) {
	p := r.kernel("head_norm", []Access{ReadWrite, ReadOnly, ReadOnly}, 64)
	if p == nil {
		return
	}
	vHeads := 0
	if vNorm {
		vHeads = nKVHead
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, eps, 0, vHeads), r.elementwise(nTokens*(nHead+nKVHead+vHeads)), qkv, qNorm, kNorm)
}

// AttnParams are attention's options beyond its shapes.
type AttnParams struct {
	Scale   float32 // multiplies q.k, usually 1/sqrt(head_dim)
	SoftCap float32 // > 0: scores pass through SoftCap * tanh(score / SoftCap) (Gemma 2)
	Window  int     // > 0: each token sees only the last Window positions (sliding window)
	AllKeys int     // > 0: not causal, every token sees cache rows 0..AllKeys-1 (BERT)
	// PageBits says how pos addresses the cache, as Rope.PageBits does for RoPEKV.
	PageBits int
	// MaxKeys is the most keys any token of the batch attends to (0: not known, taken as
	// few). On CPU adapters a long range runs in chunks that carry their running softmax in
	// State (AttentionStateSize floats), which the caller must then provide.
	MaxKeys int
	// Sequences is how many sequences the batch's tokens belong to (0: not known, taken as
	// one per token). CPU adapters' token-lane kernel reads each sequence's keys in its own
	// pass, so this bounds its loops.
	Sequences int
	State     *Buffer // chunked attention's running softmax; nil unless AttentionChunked
	// Scores, on CPU adapters, is scratch for decoding at long contexts
	// (AttentionScoresSize floats): each key's score is computed once for all of a head's
	// invocations instead of once per four output dimensions. nil: they are recomputed.
	Scores *Buffer
	// Sinks holds one f32 per query head (n_head): attention sinks (gpt-oss), a virtual key
	// per head whose score is that value, counted in the softmax's sum but contributing no
	// value. nil: none (the kernels without them run, unchanged).
	Sinks *Buffer
}

// withSinks adds a.Sinks, when set, to a kernel's defines (SINKS), bindings (one more
// read-only binding after bind's) and buffers; without sinks all three are returned as given.
func (a AttnParams) withSinks(defs []string, bind []Access, bufs ...*Buffer) ([]string, []Access, []*Buffer) {
	if a.Sinks == nil {
		return defs, bind, bufs
	}
	return append(slices.Clip(defs), "SINKS"), append(slices.Clip(bind), ReadOnly), append(bufs, a.Sinks)
}

// sinksOK reports, recording the failure, whether a.Sinks (when set) holds nHead floats.
func (r *Recorder) sinksOK(a AttnParams, nHead int) bool {
	if a.Sinks != nil && a.Sinks.Size() < uint64(nHead)*4 {
		r.fail("gpu: attention sinks: %d bytes for %d heads", a.Sinks.Size(), nHead)
		return false
	}
	return true
}

func (a AttnParams) params(base ...any) []uint32 {
	return a.chunkParams(0, math.MaxUint32, 1, base...)
}

func (a AttnParams) chunkParams(lo, hi uint32, last int, base ...any) []uint32 {
	return Params(append(base, a.SoftCap, a.Window, a.AllKeys, a.PageBits, lo, hi, last, a.scoreStride(), 0)...)
}

// AttentionStateSize is the State (in floats) Attention needs for nTokens tokens.
func AttentionStateSize(nTokens, nHead, headDim int) int {
	return nTokens * nHead * attnGroups(headDim) * 6
}

// attnGroups is how many invocations the barrier-free kernel gives each head: one per 4
// dimensions, the last taking 2 when headDim is not a multiple of 4.
func attnGroups(headDim int) int { return (headDim + 3) / 4 }

// attnLanesBlock is the token-lane attention kernel's workgroup: tokens of one head
// (attention_lanes.wgsl's RWG). Batches with fewer tokens per sequence take it only for heads
// of at least attnLanesHeadDim: on lavapipe, stories260K (head 8) decoding after 1000 tokens
// runs at 315 tokens/s head-major against 160 token-lane; the 134M model (head 64) after 512
// at 6.9 against 9.9.
const attnLanesBlock, attnLanesHeadDim = 8, 64

// attnLanes reports whether barrier-free attention takes the token-lane kernel: for a batch
// of whole blocks of tokens per sequence, or heads wide enough, and only where its loops stay
// within loopBudget (per sequence in a block a pass over its keys and over the block's
// tokens, and the scans that find each pass's sequence: at most a block's tokens per token).
func attnLanes(nTokens, headDim int, ap AttnParams) bool {
	seqs := ap.Sequences
	if seqs <= 0 {
		seqs = nTokens
	}
	if nTokens < attnLanesBlock*seqs && headDim < attnLanesHeadDim {
		return false
	}
	keys := max(ap.MaxKeys, ap.AllKeys, 1)
	return min(seqs, attnLanesBlock)*(keys+attnLanesBlock)+attnLanesBlock*attnLanesBlock <= loopBudget
}

// AttentionChunked reports whether Attention on this device needs AttnParams.State for
// maxKeys keys of headDim: the barrier-free kernel loops over the keys and, for each, over
// half the head, and llvmpipe allows an invocation loopBudget iterations.
func (d *Device) AttentionChunked(maxKeys, headDim int) bool {
	return d.BarrierFree && maxKeys > attnChunkKeys(headDim)
}

// attnChunkKeys is how many keys one chunk of the barrier-free kernel takes.
func attnChunkKeys(headDim int) int { return loopBudget / (headDim/2 + 1) }

// Attention computes causal grouped-query attention of q (rows of qStride floats, heads first)
// against its sequence's cache rows up to its position, writing nTokens x nHead x headDim to
// out; pos is laid out as for RoPEKV (positions, then where each sequence lives in the cache).
func (r *Recorder) Attention(q, kCache, vCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim int, ap AttnParams) {
	if headDim > 256 || headDim%2 != 0 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	if !r.sinksOK(ap, nHead) {
		return
	}
	// CPU adapters always take a barrier-free kernel, decode included (they round as
	// llama.cpp's CPU flash attention), whatever the head size: the cooperative kernel's
	// loops would run past llvmpipe's limit beyond about 16k keys (see loopBudget).
	if r.prescored(nTokens, nHead, ap) {
		r.attentionPrescored(q, kCache, vCache, pos, out, kvF16, qStride, nTokens, nHead, nKVHead, headDim, ap)
		return
	}
	if r.d.BarrierFree && r.d.TokenLanes && attnLanes(nTokens, headDim, ap) {
		// Invocations take neighbouring tokens of one head, so the keys and values a
		// workgroup reads have shared addresses (attention_lanes.wgsl).
		defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), fmt.Sprintf("HEAD_DIM=%d", headDim)), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention_lanes", bind, attnLanesBlock, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride),
				[3]uint32{uint32((nTokens + attnLanesBlock - 1) / attnLanesBlock), uint32(nHead), 1}, bufs...)
		}
		return
	}
	if r.d.AttentionChunked(ap.MaxKeys, headDim) {
		r.attentionChunks(q, kCache, vCache, pos, out, kvF16, qStride, nTokens, nHead, nKVHead, headDim, ap)
		return
	}
	if r.d.BarrierFree {
		groups := attnGroups(headDim)
		defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), "ROW_PER_THREAD"), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention", bind, 64, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride), r.elementwise(nTokens*nHead*groups), bufs...)
		}
		return
	}
	if nTokens >= flashMinTokens && headDim <= flashMaxHeadDim {
		// A prompt: flash attention reads each key and value tile once per block of queries.
		defs, bind, bufs := ap.withSinks(kvDefines(kvF16), bindAttn, q, kCache, vCache, pos, out)
		p := r.kernel("attention_flash", bind, 256, defs...)
		if p != nil {
			r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride),
				[3]uint32{uint32(nHead), uint32((nTokens + flashBlock - 1) / flashBlock), 1}, bufs...)
		}
		return
	}
	defs, bind, bufs := ap.withSinks(kvDefines(kvF16), bindAttn, q, kCache, vCache, pos, out)
	p := r.kernel("attention", bind, 64, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride), [3]uint32{uint32(nHead), uint32(nTokens), 1}, bufs...)
}

// Flash attention (GPU prompts): queries per workgroup, the largest head it takes, and the
// batch from which it replaces the one-workgroup-per-token kernel.
const (
	flashBlock      = 16
	flashMaxHeadDim = 128
	flashMinTokens  = 8
)

// attentionChunks runs the barrier-free kernel over ap.MaxKeys keys in chunks small enough for
// llvmpipe's loop limit, one dispatch each, the running softmax kept in ap.State.
func (r *Recorder) attentionChunks(q, kCache, vCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim int, ap AttnParams) {
	if ap.State == nil || ap.State.Size() < uint64(AttentionStateSize(nTokens, nHead, headDim))*4 {
		r.fail("gpu: attention over %d keys on a CPU adapter needs a state buffer of %d floats", ap.MaxKeys, AttentionStateSize(nTokens, nHead, headDim))
		return
	}
	// The sink, when given, is the binding after the state; only the last chunk applies it.
	defs, bind, bufs := ap.withSinks(append(kvDefines(kvF16), "ROW_PER_THREAD", "CHUNKED", "SINKS7"), append(slices.Clip(bindAttn), ReadWrite),
		q, kCache, vCache, pos, out, ap.State)
	p := r.kernel("attention", bind, 64, defs...)
	if p == nil {
		return
	}
	chunk := attnChunkKeys(headDim)
	for lo := 0; lo < ap.MaxKeys; lo += chunk {
		hi, last := lo+chunk, 0
		if hi >= ap.MaxKeys {
			hi, last = math.MaxUint32, 1 // the last chunk takes whatever keys remain
		}
		params := ap.chunkParams(uint32(lo), uint32(hi), last, nTokens, nHead, nKVHead, headDim, ap.Scale, qStride)
		r.Dispatch(p, params, r.elementwise(nTokens*nHead*attnGroups(headDim)), bufs...)
	}
}

// splitChunk is the keys per workgroup of split-K decode attention.
const splitChunk = 256

// AttentionSplitSize is the scratch AttentionSplit needs, in floats, for nTokens tokens at up
// to nKeys keys.
func AttentionSplitSize(nTokens, nHead, headDim, nKeys int) int {
	return nTokens * nHead * ((nKeys + splitChunk - 1) / splitChunk) * (headDim + 2)
}

// AttentionSplit is Attention for decoding at long contexts: the nKeys keys (at most, over
// the tokens) are split in 256-key ranges handled by separate workgroups, whose partial
// softmax results land in part (AttentionSplitSize floats) and are merged by a second kernel,
// which also adds ap.Sinks when given.
func (r *Recorder) AttentionSplit(q, kCache, vCache, pos, part, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim, nKeys int, ap AttnParams) {
	if headDim > 256 || headDim%2 != 0 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	if !r.sinksOK(ap, nHead) {
		return
	}
	nSplit := (nKeys + splitChunk - 1) / splitChunk
	params := ap.params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride, nSplit, splitChunk)
	p := r.kernel("attention_split", bindAttn, 64, kvDefines(kvF16)...)
	mdefs, mbind, mbufs := ap.withSinks([]string{"MERGE"}, []Access{ReadOnly, ReadWrite}, part, out)
	merge := r.kernel("attention_split", mbind, 64, mdefs...)
	if p == nil || merge == nil {
		return
	}
	r.Dispatch(p, params, [3]uint32{uint32(nHead), uint32(nSplit), uint32(nTokens)}, q, kCache, vCache, pos, part)
	r.Dispatch(merge, params, [3]uint32{uint32(nHead), uint32(nTokens), 1}, mbufs...)
}
