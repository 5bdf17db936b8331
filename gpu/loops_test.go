package gpu_test

import (
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestAttentionHalfGroupLong checks barrier-free attention with a head of 4n + 2 dimensions
// at a 32k context: such heads used to take the cooperative kernel on CPU adapters, whose
// loops llvmpipe cuts off after about 28k keys at head_dim 30 (16k at 254). Told the 8 tokens
// are one sequence, the token-lane kernel takes the 32k keys in one pass; not told, eight
// passes would pass the budget and the head-major kernel runs in chunks.
func TestAttentionHalfGroupLong(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	d.BarrierFree = true
	for _, seqs := range []int{1, 0} {
		checkAttention(t, d, rand.New(rand.NewPCG(21, 22)), attnCase{nHead: 2, nKV: 1, headDim: 30, nCtx: 32768, tokens: 8, seqs: seqs}, false)
	}
}
