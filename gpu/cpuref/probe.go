package cpuref

// AttentionWeights is the softmax AttentionOpts puts on the cache rows for token t's query
// head h (q, k, pos and the options laid out as there): weights over rows 0..pos[t], 0 before
// a sliding window's start, so a probe of the GPU's attention can be checked row by row.
func AttentionWeights(q, k []float32, pos []int32, t, h, nHead, nKVHead, headDim int, scale, softCap float32, window int) []float32 {
	return AttentionWeightsWith(q, k, pos, t, h, nHead, nKVHead, headDim, AttnOpts{Scale: scale, SoftCap: softCap, Window: window})
}

// AttentionWeightsWith is AttentionWeights with its options in an AttnOpts: with sinks, the
// head's sink takes its share, so the weights sum to less than 1.
func AttentionWeightsWith(q, k []float32, pos []int32, t, h, nHead, nKVHead, headDim int, o AttnOpts) []float32 {
	scores, first, sum := attentionScores(q, k, pos, t, h, nHead, nKVHead, headDim, o)
	out := make([]float32, len(scores))
	for j := first; j < len(scores); j++ {
		out[j] = float32(scores[j] / sum)
	}
	return out
}
