package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestIntDotMatVec checks GPUs' integer-dot products (Device.IntDot: act_quant's cooperative
// packed rows, matvec's IDOT blocks for up to 8 tokens, matmul_q8's tiles for 70 tokens and 67
// rows, neither a multiple of its 64) against the Go reference of llama.cpp's dot products:
// the weight's values times the Q8-rounded activations (Q8_K for the K-quants and the
// IQ types but IQ4_NL; the grid types' weights random blocks), the Q4_1 and
// Q5_1 minimums times Q8_1's rounded block sums. Row counts are not multiples of the workgroup's 4 rows, block
// counts not of its 64 invocations; activation rows are read from an offset, with and without
// subgroups, set and added, with a LoRA-style scale.
func TestIntDotMatVec(t *testing.T) {
	d := gputest.Device(t)
	defer func(b, i, it, s bool) { d.BarrierFree, d.IntDot, d.IntDotTiles, d.SubgroupMath = b, i, it, s }(d.BarrierFree, d.IntDot, d.IntDotTiles, d.SubgroupMath)
	d.BarrierFree, d.IntDot, d.IntDotTiles = false, true, true
	rng := rand.New(rand.NewPCG(41, 42))
	for _, sub := range []bool{false, true} {
		if sub && !d.Features.Subgroups {
			t.Log("adapter lacks subgroups: the subgroup variant is not tested here")
			continue
		}
		d.SubgroupMath = sub
		for _, typ := range []gpu.WeightType{gpu.Q8_0, gpu.Q4_0, gpu.Q5_0, gpu.Q4_1, gpu.Q5_1, gpu.Q2_K, gpu.Q3_K, gpu.Q4_K, gpu.Q5_K, gpu.Q6_K, gpu.IQ4_NL, gpu.IQ4_XS, gpu.MXFP4,
			gpu.IQ1_S, gpu.IQ1_M, gpu.IQ2_XXS, gpu.IQ2_XS, gpu.IQ2_S, gpu.IQ3_XXS, gpu.IQ3_S} {
			bs, round := 32, cpuref.ActQ8_0
			if gpu.ActFor(typ) == gpu.ActQ8_K {
				bs, round = 256, cpuref.ActQ8_K
			}
			for _, c := range []struct{ rows, blocks, tokens, row0 int }{{37, 7, 1, 0}, {29, 70, 3, 1}, {6, 130, 8, 2}, {67, 9, 70, 1}} {
				if !d.IntDotFor(typ, c.tokens) {
					t.Fatalf("%s: no integer dot products for %d tokens", typ, c.tokens)
				}
				if sub && (c.tokens > gpu.MatVecMaxTokens || gridTypes[typ]) {
					continue // the tiles take no subgroup operations; the grid types' blocks are checked once (their compile is slow on lavapipe)
				}
				if bs == 256 {
					c.blocks = (c.blocks + 7) / 8 // a few superblocks: 1, 9 and 17
				}
				cols := bs * c.blocks
				gt, _ := gguf.ParseGGMLType(typ.String())
				var raw []byte
				if gt.CanQuantize() {
					var err error
					if raw, err = gguf.Quantize(gt, randVec(rng, c.rows*cols)); err != nil {
						t.Fatal(err)
					}
				} else { // the grid types: random blocks
					raw = cpuref.RandomSuperBlocks(rng, gt, c.rows*c.blocks)
				}
				wv := make([]float32, c.rows*cols)
				if err := gguf.Dequantize(gt, raw, wv); err != nil {
					t.Fatal(err)
				}
				mins := make([]float32, c.rows*c.blocks) // the second f16 of Q4_1's and Q5_1's blocks
				if typ == gpu.Q4_1 || typ == gpu.Q5_1 {
					bb := len(raw) / len(mins)
					for b := range mins {
						mins[b] = gguf.F16ToF32(uint16(raw[b*bb+2]) | uint16(raw[b*bb+3])<<8)
					}
				}
				w, err := d.UploadWeight("w", typ, c.rows, cols, raw)
				if err != nil {
					t.Fatal(err)
				}
				x := randVec(rng, (c.row0+c.tokens)*cols)
				src := x[c.row0*cols:]
				xq, sums := round(src), cpuref.ActQ8_1Sums(src)
				y0 := randVec(rng, c.tokens*c.rows)
				for _, add := range []bool{false, true} {
					if c.tokens > gpu.MatVecMaxTokens && add != (typ%2 == 1) {
						continue // the tiles' epilogue is the same for every type: set for some, added for the others
					}
					want := make([]float32, c.tokens*c.rows)
					for tk := range c.tokens {
						for r := range c.rows {
							var acc float64
							for b := range c.blocks {
								mb := mins[r*c.blocks+b]
								for i := range bs {
									acc += float64(wv[r*cols+bs*b+i]-mb) * float64(xq[tk*cols+bs*b+i])
								}
								if mb != 0 {
									acc += float64(mb) * float64(sums[tk*c.blocks+b])
								}
							}
							if add {
								acc += float64(y0[tk*c.rows+r])
							}
							want[tk*c.rows+r] = float32(acc)
						}
					}
					out := upload(t, d, y0)
					xq := empty(t, d, c.tokens*cols)
					xs := empty(t, d, c.tokens*cols/32)
					got := run(t, d, out, c.tokens*c.rows, func(r *gpu.Recorder) {
						acts := r.QuantizeForIntDot(gpu.ActFor(typ), upload(t, d, x), c.row0, c.tokens, cols, xq, xs)
						r.MatMulAt(w, acts, c.tokens, out, c.rows, 0, add)
					})
					check(t, fmt.Sprintf("%s %dx%d t=%d row0=%d add=%v subgroups=%v", typ, c.rows, cols, c.tokens, c.row0, add, sub), got, want, 1e-5)
				}
				w.Release()
			}
		}
	}
}

// gridTypes are the IQ types whose quants index a grid.
var gridTypes = map[gpu.WeightType]bool{gpu.IQ1_S: true, gpu.IQ1_M: true, gpu.IQ2_XXS: true, gpu.IQ2_XS: true,
	gpu.IQ2_S: true, gpu.IQ3_XXS: true, gpu.IQ3_S: true}

// TestIntDotRefusals: packed rows fit only the types and token counts that take integer dot
// products, and CPU adapters do not pack for them.
func TestIntDotRefusals(t *testing.T) {
	d := gputest.Device(t)
	defer func(b, i bool) { d.BarrierFree, d.IntDot = b, i }(d.BarrierFree, d.IntDot)
	d.BarrierFree, d.IntDot = false, true
	if d.IntDotFor(gpu.F16, 1) || d.IntDotFor(gpu.BF16, 70) || d.IntDotFor(gpu.F32, 9) {
		t.Error("integer dot products claimed for F16, BF16 or F32")
	}
	rng := rand.New(rand.NewPCG(43, 44))
	w, _ := weight(t, d, rng, gpu.F16, 8, 64)
	out := empty(t, d, 8)
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	acts := r.QuantizeForIntDot(gpu.ActQ8_0, upload(t, d, randVec(rng, 64)), 0, 1, 64, empty(t, d, 64), empty(t, d, 2))
	r.MatMulAt(w, acts, 1, out, 8, 0, false)
	if err := r.Submit(); err == nil {
		t.Error("packed rows for an F16 weight: no error")
	}
	d.BarrierFree = true
	r, err = d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.QuantizeForIntDot(gpu.ActQ8_0, upload(t, d, randVec(rng, 64)), 0, 1, 64, empty(t, d, 64), empty(t, d, 2))
	if err := r.Submit(); err == nil {
		t.Error("integer-dot rows on a barrier-free adapter: no error")
	}
}

// TestIntDotMatMulID checks the experts' products (MatMulID: one assignment at a time for 1
// and 3 tokens, the plan's tiles of matmul_q8 for 40) with integer dot products on packed rows
// against the Go reference, the gate/up product (a token's row for each of its k experts) and
// the down product (a row per assignment).
func TestIntDotMatMulID(t *testing.T) {
	d := gputest.Device(t)
	defer func(b, i, it bool) { d.BarrierFree, d.IntDot, d.IntDotTiles = b, i, it }(d.BarrierFree, d.IntDot, d.IntDotTiles)
	d.BarrierFree, d.IntDot, d.IntDotTiles = false, true, true
	rng := rand.New(rand.NewPCG(45, 46))
	const experts, k, rows = 7, 2, 45
	for _, typ := range []gpu.WeightType{gpu.Q8_0, gpu.Q4_1, gpu.Q4_K, gpu.MXFP4, gpu.IQ2_XS} {
		cols := 96
		if typ.BlockSize() == 256 {
			cols = 512
		}
		w, wv, raw := expertWeight(t, d, rng, typ, experts, rows, cols)
		for _, tokens := range []int{1, 3, 40} {
			if grouped := d.MoEGrouped(tokens, k, experts); grouped != (tokens == 40) {
				t.Fatalf("%d tokens of %d experts: grouped %v", tokens, experts, grouped)
			}
			for _, down := range []bool{false, true} {
				n := tokens * k
				ids, x, xRows, xPer := idInputs(rng, tokens, k, experts, cols, down)
				xq, sums := actRef(typ, x), cpuref.ActQ8_1Sums(x)
				var want []float32
				if gpu.ActFor(typ) == gpu.ActQ8_1 {
					want = matMulIDSums(wv, blockMins(typ, raw), rows, cols, xq, sums, xPer, ids)
				} else {
					want = cpuref.MatMulID(wv, rows, cols, xq, xPer, ids)
				}
				out := empty(t, d, n*rows)
				b := gpu.MoEBatch{IDs: uploadU32(t, d, ids), Plan: empty(t, d, gpu.MoEPlanSize(n, experts)), Tokens: tokens, K: k, Experts: experts}
				got := run(t, d, out, n*rows, func(r *gpu.Recorder) {
					r.MoEGroup(b) // the plan's tiles, for the grouped batch
					acts := r.QuantizeForIntDot(gpu.ActFor(typ), upload(t, d, x), 0, xRows, cols, empty(t, d, xRows*cols), empty(t, d, xRows*cols/32))
					r.MatMulID(w, acts, b, down, out, rows, 0, false)
				})
				check(t, fmt.Sprintf("%s tokens=%d down=%v", typ, tokens, down), got, want, 1e-5)
			}
		}
	}
}
