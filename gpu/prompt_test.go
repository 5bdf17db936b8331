package gpu_test

// Tests of the prompt kernels: attention over blocks that mix sequences, and the barrier-free
// matrix product over a long prompt.

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestAttentionSequencesInBlocks checks attention for a batch whose tokens come from two
// sequences, interleaved, so that the flash kernel's query blocks mix them: each token must see
// only its own sequence's cache rows (the token-lane kernel's blocks too, in two passes).
// Every kernel family runs it.
func TestAttentionSequencesInBlocks(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, l bool) { d.BarrierFree, d.TokenLanes = v, l }(d.BarrierFree, d.TokenLanes)
	rng := rand.New(rand.NewPCG(21, 22))
	const nHead, nKV, headDim = 4, 2, 48
	type seq struct {
		base, rows int
		k, v       []float32
	}
	seqs := []seq{{base: 0, rows: 40}, {base: 40, rows: 30}}
	var kAll, vAll []float32
	for i := range seqs {
		seqs[i].k = randVec(rng, seqs[i].rows*nKV*headDim)
		seqs[i].v = randVec(rng, seqs[i].rows*nKV*headDim)
		kAll, vAll = append(kAll, seqs[i].k...), append(vAll, seqs[i].v...)
	}
	// 22 tokens: the last 11 positions of each sequence, alternating.
	var pos, bases []int32
	var which []int
	for i := 0; i < 11; i++ {
		for s := range seqs {
			pos = append(pos, int32(seqs[s].rows-11+i))
			bases = append(bases, int32(seqs[s].base))
			which = append(which, s)
		}
	}
	n := len(pos)
	qWidth := nHead * headDim
	q := randVec(rng, n*qWidth)
	// The reference, one sequence at a time.
	want := make([]float32, n*qWidth)
	for s := range seqs {
		var qs []float32
		var ps []int32
		var rows []int
		for i := range pos {
			if which[i] == s {
				qs = append(qs, q[i*qWidth:(i+1)*qWidth]...)
				ps = append(ps, pos[i])
				rows = append(rows, i)
			}
		}
		ref := cpuref.AttentionOpts(qs, seqs[s].k, seqs[s].v, ps, nHead, nKV, headDim, 0.3, 0, 0)
		for j, i := range rows {
			copy(want[i*qWidth:(i+1)*qWidth], ref[j*qWidth:(j+1)*qWidth])
		}
	}
	posBuf := uploadU32(t, d, append(append([]int32(nil), pos...), bases...))
	for _, c := range []struct{ bf, lanes bool }{{false, false}, {true, true}, {true, false}} {
		d.BarrierFree, d.TokenLanes = c.bf, c.lanes
		ap := gpu.AttnParams{Scale: 0.3, MaxKeys: 40, Sequences: 2, State: empty(t, d, gpu.AttentionStateSize(n, nHead, headDim))}
		out := empty(t, d, len(q))
		got := run(t, d, out, len(q), func(r *gpu.Recorder) {
			r.Attention(upload(t, d, q), upload(t, d, kAll), upload(t, d, vAll), posBuf, out, false, qWidth, n, nHead, nKV, headDim, ap)
		})
		check(t, fmt.Sprintf("two sequences, barrier-free=%v, token lanes=%v", c.bf, c.lanes), got, want, tolF32)
	}
}

// TestMatMulLongPromptCPU checks CPU adapters' batch kernel (matmul_rows) over a long prompt:
// 17 groups of 8 tokens in the grid, the last partial.
func TestMatMulLongPromptCPU(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	d.BarrierFree = true
	rng := rand.New(rand.NewPCG(23, 24))
	const rows, cols, tokens = 70, 512, 130
	for _, typ := range []gpu.WeightType{gpu.Q4_K, gpu.Q8_0, gpu.F16} {
		w, wv := weight(t, d, rng, typ, rows, cols)
		x := randVec(rng, tokens*cols)
		out := upload(t, d, make([]float32, tokens*rows))
		got := run(t, d, out, tokens*rows, func(r *gpu.Recorder) { r.MatMul(w, upload(t, d, x), 0, tokens, out, false) })
		check(t, fmt.Sprintf("%s %dx%d t=%d", typ, rows, cols, tokens), got, cpuref.MatMul(wv, rows, cols, x, tokens), tolFor(typ))
	}
}
