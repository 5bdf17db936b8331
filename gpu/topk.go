package gpu

// MaxTopK is the most candidates TopK finds per row.
const MaxTopK = 256

// Barrier-free top-k (see shaders/topk.wgsl) splits rows into spans of topKSpan logits, each
// searched by one invocation, and merges at most topKMaxSpans of them per row: llvmpipe stops
// an invocation's loops after 65535 iterations in all, and a merge costs k per span.
const (
	topKSpan     = 2048
	topKMaxSpans = 256
	topKMergeCap = 60000
)

// TopKStride is the number of u32 words TopK writes per row for k candidates: the row's
// maximum, its sum of exponentials, k ids and k logits.
func TopKStride(k int) int { return 2 + 2*k }

// TopKScratchWords is the size (u32 words) of the scratch buffer TopK needs on this device for
// rows of n logits: 0 where a workgroup reduces a row on its own, else room for the best k of
// every span of every row.
func (d *Device) TopKScratchWords(n, rows, k int) int {
	if !d.BarrierFree {
		return 0
	}
	return rows * topKSpans(n) * TopKStride(k)
}

func topKSpans(n int) int { return (n + topKSpan - 1) / topKSpan }

// MaxTopKFor is the most candidates TopK can find per row of n logits on this device:
// MaxTopK, or less (0 for none) where the barrier-free kernel's merge would run too long.
func (d *Device) MaxTopKFor(n int) int {
	if !d.BarrierFree {
		return MaxTopK
	}
	spans := topKSpans(n)
	if spans > topKMaxSpans {
		return 0
	}
	return min(MaxTopK, topKMergeCap/spans)
}

// TopK writes, for each of rows rows of n logits, the k largest (k in 1..MaxTopK; all n when
// n < k) with their ids, ordered by descending logit and then ascending id, plus the row's
// maximum and sum_j exp(x_j - max), into out (u32) at row * TopKStride(k): the maximum's f32
// bits, the sum's, the ids, then the candidates' logits as f32 bits. A sampler then needs only
// those words, not the whole row, and the candidates' full-softmax probabilities follow
// exactly as exp(x - max) / sum. scratch holds TopKScratchWords(n, rows, k) words (nil when
// that is 0).
func (r *Recorder) TopK(logits, out, scratch *Buffer, n, rows, k int) {
	if k < 1 || k > MaxTopK || n < 1 || rows < 1 {
		r.fail("gpu: top-k of %d candidates from %d rows of %d (want 1..%d candidates, rows not empty)", k, rows, n, MaxTopK)
		return
	}
	if need := uint64(rows*TopKStride(k)) * 4; out.Size() < need {
		r.fail("gpu: top-k output of %d bytes, %d needed", out.Size(), need)
		return
	}
	if !r.d.BarrierFree {
		p := r.kernel("topk", []Access{ReadOnly, ReadWrite}, 256)
		if p != nil {
			r.Dispatch(p, Params(n, rows, k, 0, 0), r.grid(rows), logits, out)
		}
		return
	}
	spans := topKSpans(n)
	if k > r.d.MaxTopKFor(n) {
		r.fail("gpu: top-k of %d candidates from rows of %d: this adapter's barrier-free kernel finds at most %d", k, n, r.d.MaxTopKFor(n))
		return
	}
	if need := uint64(r.d.TopKScratchWords(n, rows, k)) * 4; scratch == nil || scratch.Size() < need {
		r.fail("gpu: top-k needs %d bytes of scratch", need)
		return
	}
	params := Params(n, rows, k, topKSpan, spans)
	if p := r.kernel("topk", []Access{ReadOnly, ReadWrite}, 64, "CHUNKS"); p != nil {
		r.Dispatch(p, params, r.elementwise(rows*spans), logits, scratch)
	}
	if p := r.kernel("topk", []Access{ReadOnly, ReadWrite}, 64, "MERGE"); p != nil {
		r.Dispatch(p, params, r.elementwise(rows), scratch, out)
	}
}
