package gpu

// probeWG is attention_probe.wgsl's workgroup size: its invocations stride over the keys.
const probeWG = 256

// AttentionProbe writes to out the attention weights of query head head of batch row row over
// the keys that row attends to, for a debug view of what a layer looks at: out[j] =
// softmax_j(scale·q·k_j), soft-capped as ap says, for cache positions j up to the row's key end
// (its position in pos, or ap.AllKeys), 0 before a sliding window's start. q, kCache, pos,
// qStride and the head counts are laid out as for Attention, which it mirrors (the same key
// range, addressing and soft-capping) without touching its values; out must hold the row's
// key end floats. With ap.Sinks the head's sink counts in the softmax's sum, as in Attention,
// so the weights sum to less than 1 by the sink's share. It is one workgroup, so it costs one
// dispatch wherever it is recorded.
//
// Its scores are f32 products with q as it is: GPUs' attention kernels compute them so, while
// CPU adapters' round q to f16 over an f16 cache, a difference far below what a view shows.
func (r *Recorder) AttentionProbe(q, kCache, pos, out *Buffer, kvF16 bool, qStride, nTokens, nHead, nKVHead, headDim, row, head int, ap AttnParams) {
	if headDim > 256 || headDim%2 != 0 || nKVHead == 0 || nHead%nKVHead != 0 {
		r.fail("gpu: attention probe: head_dim %d (max 256), %d heads over %d kv heads unsupported", headDim, nHead, nKVHead)
		return
	}
	if row < 0 || row >= nTokens || head < 0 || head >= nHead {
		r.fail("gpu: attention probe of row %d, head %d in a batch of %d tokens and %d heads", row, head, nTokens, nHead)
		return
	}
	if r.d.BarrierFree {
		// llvmpipe cuts an invocation's loops off at loopBudget iterations: refuse rather than
		// show a partial softmax. Per invocation: its keys' scores (a loop over half the head
		// each), the zeros before a window, the normalisation, a few for q and the reduction.
		keys := max(ap.MaxKeys, ap.AllKeys, 1)
		if iters := (keys+probeWG-1)/probeWG*(headDim/2+3) + 16; iters > loopBudget {
			r.fail("gpu: attention probe over %d keys of head_dim %d passes this adapter's loop limit", keys, headDim)
			return
		}
	}
	if !r.sinksOK(ap, nHead) {
		return
	}
	defs, bind, bufs := ap.withSinks(kvDefines(kvF16), []Access{ReadOnly, ReadOnly, ReadOnly, ReadWrite}, q, kCache, pos, out)
	p := r.kernel("attention_probe", bind, probeWG, defs...)
	if p == nil {
		return
	}
	r.Dispatch(p, Params(nTokens, nHead, nKVHead, headDim, ap.Scale, qStride, ap.SoftCap, ap.Window, ap.AllKeys, ap.PageBits, row, head),
		[3]uint32{1, 1, 1}, bufs...)
}
