package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// qwen35Shapes are the head shapes the qwen35 ops are tested at: head sizes 13 (not a multiple
// of 4) and qwen35's 128, 3 and 37 heads, 1, 5 and 70 rows.
var qwen35Shapes = []struct{ rows, heads, dim int }{{1, 3, 13}, {5, 37, 13}, {70, 3, 128}, {5, 37, 128}, {70, 37, 13}}

// refLayout is l as cpuref takes it.
func refLayout(l gpu.HeadLayout) cpuref.HeadLayout {
	return cpuref.HeadLayout{Stride: l.Stride, Col: l.Col, HeadStride: l.HeadStride}
}

// gateLayouts are the layouts a gate operand is tested in for heads of dim: packed rows, and
// qwen35's attn_q output, each head's gate after its q (every other head vector).
func gateLayouts(heads, dim int) []gpu.HeadLayout {
	return []gpu.HeadLayout{{Stride: heads * dim}, {Stride: 2 * heads * dim, Col: dim, HeadStride: 2 * dim}}
}

// TestGatedRMSNorm checks the gated norm against cpuref, in place in rows wider than the heads
// (so the columns around them must stay as they were), with the gate packed and interleaved
// with other heads; the whole buffer is compared.
func TestGatedRMSNorm(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(91, 92))
			for _, c := range qwen35Shapes {
				for _, zl := range gateLayouts(c.heads, c.dim) {
					ol := gpu.HeadLayout{Stride: c.heads*c.dim + 7, Col: 5}
					o := randVec(rng, c.rows*ol.Stride)
					z := randVec(rng, c.rows*zl.Stride)
					w := randVec(rng, c.dim)
					const eps = 1e-6
					ob := upload(t, d, o)
					got := run(t, d, ob, len(o), func(r *gpu.Recorder) {
						r.GatedRMSNorm(ob, ol, upload(t, d, z), zl, upload(t, d, w), c.rows, c.heads, c.dim, eps)
					})
					want := slices.Clone(o)
					cpuref.GatedRMSNorm(want, refLayout(ol), z, refLayout(zl), w, c.rows, c.heads, c.dim, eps)
					checkRec(t, fmt.Sprintf("%s rows=%d heads=%d dim=%d z=%+v", v.name, c.rows, c.heads, c.dim, zl), got, want)
				}
			}
		})
	}
}

// TestSigmoidGate checks the attention output gate against cpuref: o in rows wider than its
// heads, the gate packed and as attn_q's output lays it out; the whole buffer is compared.
func TestSigmoidGate(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(93, 94))
			for _, c := range qwen35Shapes {
				for _, gl := range gateLayouts(c.heads, c.dim) {
					ol := gpu.HeadLayout{Stride: c.heads*c.dim + 3, Col: 2}
					o := randVec(rng, c.rows*ol.Stride)
					gate := randVec(rng, c.rows*gl.Stride)
					for i := range gate {
						gate[i] *= 4 // sigmoids near 0 and 1 too
					}
					ob := upload(t, d, o)
					got := run(t, d, ob, len(o), func(r *gpu.Recorder) { r.SigmoidGate(ob, ol, upload(t, d, gate), gl, c.rows, c.heads, c.dim) })
					want := slices.Clone(o)
					cpuref.SigmoidGate(want, refLayout(ol), gate, refLayout(gl), c.rows, c.heads, c.dim)
					checkRec(t, fmt.Sprintf("%s rows=%d heads=%d dim=%d gate=%+v", v.name, c.rows, c.heads, c.dim, gl), got, want)
				}
			}
		})
	}
}

// TestDeltaGates checks the DeltaNet gates against cpuref: alpha and beta's input in one
// buffer (beta's values then alpha's in each row, as one projection into both would leave
// them) and in two buffers of their own, inputs beyond softplus's threshold of 20 and far
// below 0 among them, ssm_a negative as qwen35's.
func TestDeltaGates(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range recurrentVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(95, 96))
			for _, c := range []struct{ rows, heads int }{{1, 3}, {5, 37}, {70, 16}, {70, 37}} {
				dt := randVec(rng, c.heads)
				ssmA := randVec(rng, c.heads)
				for i, x := range ssmA {
					ssmA[i] = -float32(math.Exp(float64(x)))
				}
				for _, shared := range []bool{true, false} {
					stride := 2*c.heads + 3
					in := randVec(rng, c.rows*stride)
					for i := range in {
						if i%7 == 0 {
							in[i] *= 15 // beyond 20 and below -17 now and then
						}
					}
					bl, al := gpu.HeadLayout{Stride: stride, Col: 1}, gpu.HeadLayout{Stride: stride, Col: 1 + c.heads}
					aIn, bIn := in, in
					if !shared {
						// alpha alone, its heads every other value; beta's input the shared rows.
						al = gpu.HeadLayout{Stride: 2*c.heads + 1, Col: 1, HeadStride: 2}
						aIn = randVec(rng, c.rows*al.Stride)
						for i := range aIn {
							aIn[i] *= 8
						}
					}
					ab, bb := upload(t, d, aIn), upload(t, d, bIn)
					if shared {
						bb = ab
					}
					g, beta := empty(t, d, c.rows*c.heads), empty(t, d, c.rows*c.heads)
					submit(t, d, func(r *gpu.Recorder) {
						r.DeltaGates(ab, al, bb, bl, upload(t, d, dt), upload(t, d, ssmA), g, beta, c.rows, c.heads)
					})
					wantG, wantBeta := cpuref.DeltaGates(aIn, refLayout(al), bIn, refLayout(bl), dt, ssmA, c.rows, c.heads)
					name := fmt.Sprintf("%s rows=%d heads=%d shared=%v", v.name, c.rows, c.heads, shared)
					checkRec(t, name+" g", readFloats(t, d, g, len(wantG)), wantG)
					checkRec(t, name+" beta", readFloats(t, d, beta, len(wantBeta)), wantBeta)
				}
			}
		})
	}
}

// TestQwen35OpsLayouts checks that layouts whose heads leave their rows, or whose written heads
// overlap, fail at Submit.
func TestQwen35OpsLayouts(t *testing.T) {
	d := gputest.Device(t)
	buf := upload(t, d, make([]float32, 256))
	for name, rec := range map[string]func(r *gpu.Recorder){
		"norm past its row": func(r *gpu.Recorder) {
			r.GatedRMSNorm(buf, gpu.HeadLayout{Stride: 20, Col: 1}, buf, gpu.HeadLayout{Stride: 20}, buf, 2, 2, 10, 1e-6)
		},
		"norm overlapping": func(r *gpu.Recorder) {
			r.GatedRMSNorm(buf, gpu.HeadLayout{Stride: 20, HeadStride: 5}, buf, gpu.HeadLayout{Stride: 20}, buf, 2, 2, 10, 1e-6)
		},
		"gate buffer short": func(r *gpu.Recorder) {
			r.SigmoidGate(buf, gpu.HeadLayout{Stride: 10}, buf, gpu.HeadLayout{Stride: 10}, 30, 1, 10)
		},
		"gates past their row": func(r *gpu.Recorder) {
			r.DeltaGates(buf, gpu.HeadLayout{Stride: 4, Col: 2}, buf, gpu.HeadLayout{Stride: 4}, buf, buf, buf, buf, 2, 3)
		},
	} {
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		rec(r)
		if err := r.Submit(); err == nil {
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestRoPEInterleaved checks interleaved M-RoPE (qwen35's IMRoPE) against cpuref, q in place
// and k into the cache, on positions whose four components differ: qwen35's sections (11, 11,
// 10, 0) over 64 rotated dimensions of wider heads, and small sections whose sectors wrap and
// reach e within a head of 26 (24 rotated); with text positions (every component the position,
// e 0) and qwen35's sections it is plain NeoX RoPE.
func TestRoPEInterleaved(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(97, 98))
	for _, c := range []struct {
		nTok, nHead, nKV, headDim, nRot int
		sections                        [4]int
	}{{5, 3, 1, 72, 64, [4]int{11, 11, 10, 0}}, {70, 3, 2, 26, 24, [4]int{3, 2, 2, 1}}} {
		row := (c.nHead + 2*c.nKV) * c.headDim
		mpos := make([]int32, 4*c.nTok)
		rows := make([]int32, c.nTok)
		for i := range c.nTok {
			rows[i] = int32(i)
			for j := range 4 {
				mpos[4*i+j] = int32(rng.IntN(300))
			}
		}
		qkv := randVec(rng, c.nTok*row)
		var q, k []float32
		for tk := range c.nTok {
			q = append(q, qkv[tk*row:tk*row+c.nHead*c.headDim]...)
			k = append(k, qkv[tk*row+c.nHead*c.headDim:tk*row+(c.nHead+c.nKV)*c.headDim]...)
		}
		cpuref.RoPEInterleaved(q, mpos, c.nHead, c.headDim, c.nRot, 10000, c.sections)
		cpuref.RoPEInterleaved(k, mpos, c.nKV, c.headDim, c.nRot, 10000, c.sections)
		buf := upload(t, d, qkv)
		kc, vc := empty(t, d, c.nTok*c.nKV*c.headDim), empty(t, d, c.nTok*c.nKV*c.headDim)
		got := run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.RoPEKV(buf, uploadU32(t, d, withBase(rows, 0)), kc, vc, nil, false, c.nTok, c.nHead, c.nKV, c.headDim,
				gpu.Rope{NRot: c.nRot, FreqBase: 10000, NeoX: true, MPos: uploadU32(t, d, mpos), Sections: c.sections, Interleaved: true})
		})
		var gotQ []float32
		for tk := range c.nTok {
			gotQ = append(gotQ, got[tk*row:tk*row+c.nHead*c.headDim]...)
		}
		name := fmt.Sprintf("imrope head_dim=%d n_rot=%d sections=%v", c.headDim, c.nRot, c.sections)
		t.Logf("%s: relative errors q %.2g, k %.2g", name, cpuref.RelErr(gotQ, q), cpuref.RelErr(cacheFloats(t, d, kc, len(k), false), k))
		check(t, name+" q", gotQ, q, 1e-5)
		check(t, name+" k", cacheFloats(t, d, kc, len(k), false), k, 1e-5)
	}
	const headDim, nRot = 72, 64
	same := []int32{3, 3, 3, 0, 250, 250, 250, 0}
	x := randVec(rng, 2*4*headDim)
	want := slices.Clone(x)
	cpuref.RoPEInterleaved(want, same, 4, headDim, nRot, 10000, [4]int{11, 11, 10, 0})
	plain := slices.Clone(x)
	cpuref.RoPENeoX(plain, []int32{3, 250}, 4, headDim, nRot, 10000)
	check(t, "imrope of text positions is neox", want, plain, 1e-6)

	// Interleaved without MPos, or with the vision mode, fails.
	buf, kc, vc := upload(t, d, make([]float32, 3*headDim)), empty(t, d, headDim), empty(t, d, headDim)
	for _, rope := range []gpu.Rope{{NRot: nRot, FreqBase: 10000, NeoX: true, Sections: [4]int{11, 11, 10, 0}, Interleaved: true},
		{NRot: nRot, FreqBase: 10000, NeoX: true, Sections: [4]int{11, 11, 10, 0}, Interleaved: true, Vision: true, MPos: uploadU32(t, d, make([]int32, 4))}} {
		r, err := d.Begin()
		if err != nil {
			t.Fatal(err)
		}
		r.RoPEKV(buf, uploadU32(t, d, withBase([]int32{0}, 0)), kc, vc, nil, false, 1, 1, 1, headDim, rope)
		if err := r.Submit(); err == nil || !strings.Contains(err.Error(), "interleaved") {
			t.Errorf("rope %+v: error %v, want interleaved M-RoPE's", rope, err)
		}
	}
}
