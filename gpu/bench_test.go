package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// BenchmarkSubmitRead is the fixed cost of one pass: n tiny dispatches, one submit, one readback.
func BenchmarkSubmitRead(b *testing.B) {
	for _, n := range []int{1, 10, 60} {
		b.Run(string(rune('0'+n/10))+"x", func(b *testing.B) {
			d := gputest.Device(b)
			a, _ := d.NewBuffer("a", 256)
			c, _ := d.NewBuffer("c", 256)
			defer a.Release()
			defer c.Release()
			for i := 0; i < b.N; i++ {
				r, _ := d.Begin()
				for j := 0; j < n; j++ {
					r.Add(a, c, 64)
				}
				if _, err := r.SubmitAndRead(a, 0, 256); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMatVec reports the decode kernel's weight bandwidth per type on a 2048 x 2048
// matrix (one token), to compare with BenchmarkCopy on the same adapter, for each variant the
// adapter can run: barrier-free, cooperative (workgroup reduction) and subgroup reduction.
func BenchmarkMatVec(b *testing.B) {
	d := gputest.Device(b)
	defer func(v, s bool) { d.BarrierFree, d.SubgroupMath = v, s }(d.BarrierFree, d.SubgroupMath)
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 2048, 2048
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	x, _ := d.NewBuffer("x", cols*4)
	y, _ := d.NewBuffer("y", rows*4)
	variants := []struct {
		name          string
		bf, subgroups bool
	}{{"barrier-free", true, false}, {"cooperative", false, false}}
	if d.Features.Subgroups {
		variants = append(variants, struct {
			name          string
			bf, subgroups bool
		}{"subgroups", false, true})
	}
	for _, typ := range []gpu.WeightType{gpu.F32, gpu.F16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_K, gpu.Q6_K} {
		gt, _ := gguf.ParseGGMLType(typ.String())
		data, err := gguf.Quantize(gt, w)
		if err != nil {
			b.Fatal(err)
		}
		W, err := d.UploadWeight("w", typ, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range variants {
			b.Run(typ.String()+"/"+v.name, func(b *testing.B) {
				d.BarrierFree, d.SubgroupMath = v.bf, v.subgroups
				b.SetBytes(int64(W.Bytes()))
				for i := 0; i < b.N; i++ {
					r, _ := d.Begin()
					r.MatMul(W, x, 0, 1, y, false)
					if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		W.Release()
	}
}

// BenchmarkCopy is the adapter's copy bandwidth (Device.CopyBandwidth: bytes read and written
// per second), the ceiling the matrix-vector kernels are measured against, at two sizes.
func BenchmarkCopy(b *testing.B) {
	d := gputest.Device(b)
	for _, size := range []uint64{64 << 20, 512 << 20} {
		b.Run(fmt.Sprintf("%dMiB", size>>20), func(b *testing.B) {
			gbs := 0.0
			for i := 0; i < b.N; i++ {
				v, err := d.CopyBandwidth(size, 3)
				if err != nil {
					b.Fatal(err)
				}
				gbs = max(gbs, v)
			}
			b.ReportMetric(gbs, "GB/s")
		})
	}
}

// BenchmarkAttentionPrompt is causal attention for a 128-token prompt (stories260K's shape).
func BenchmarkAttentionPrompt(b *testing.B) {
	d := gputest.Device(b)
	defer func(v, l bool) { d.BarrierFree, d.TokenLanes = v, l }(d.BarrierFree, d.TokenLanes)
	const nTok, nHead, nKV = 128, 8, 4
	for _, hd := range []int{8, 64} {
		q, _ := d.NewBuffer("q", uint64(nTok*nHead*hd*4))
		k, _ := d.NewBuffer("k", uint64(nTok*nKV*hd*4))
		v, _ := d.NewBuffer("v", uint64(nTok*nKV*hd*4))
		out, _ := d.NewBuffer("o", uint64(nTok*nHead*hd*4))
		pos := make([]int32, 2*nTok) // positions, then cache row bases (0)
		for i := range nTok {
			pos[i] = int32(i)
		}
		pb, _ := d.Upload("pos", gpu.Bytes(pos))
		// token-lanes and head-major: the CPU adapters' kernels; flash: the GPUs' (forced here).
		for _, c := range []struct {
			name      string
			bf, lanes bool
		}{{"token-lanes", true, true}, {"head-major", true, false}, {"flash", false, false}} {
			b.Run(fmt.Sprintf("head_dim=%d/%s", hd, c.name), func(b *testing.B) {
				d.BarrierFree, d.TokenLanes = c.bf, c.lanes
				for i := 0; i < b.N; i++ {
					r, _ := d.Begin()
					r.Attention(q, k, v, pb, out, false, nHead*hd, nTok, nHead, nKV, hd, gpu.AttnParams{Scale: 0.3, MaxKeys: nTok, Sequences: 1})
					if _, err := r.SubmitAndRead(out, 0, 4); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkMatMulTiled is the GPU prompt kernel (the tiled one, forced on any adapter) and the
// CPU adapters' one (matmul_rows) on a 1024 x 1024 Q4_K weight and 128 tokens, in GFLOP/s.
func BenchmarkMatMulTiled(b *testing.B) {
	d := gputest.Device(b)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	const rows, cols, tokens = 1024, 1024, 128
	rng := rand.New(rand.NewPCG(3, 3))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	data, err := gguf.Quantize(gguf.TypeQ4_K, w)
	if err != nil {
		b.Fatal(err)
	}
	W, err := d.UploadWeight("w", gpu.Q4_K, rows, cols, data)
	if err != nil {
		b.Fatal(err)
	}
	defer W.Release()
	x, _ := d.NewBuffer("x", tokens*cols*4)
	xq, _ := d.NewBuffer("xq", tokens*cols*4)
	y, _ := d.NewBuffer("y", tokens*rows*4)
	// barrier-free-packed: the CPU adapters' kernel on activations rounded and packed as a
	// model's are (QuantizeActivations); the others read f32.
	d.BarrierFree = true
	r, _ := d.Begin()
	packed := r.QuantizeActivations(gpu.ActQ8_K, x, 0, tokens, cols, xq, nil)
	if err := r.Submit(); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		bf   bool
		x    gpu.Acts
	}{{"tiled", false, gpu.Acts{X: x}}, {"barrier-free", true, gpu.Acts{X: x}}, {"barrier-free-packed", true, packed}} {
		b.Run(c.name, func(b *testing.B) {
			d.BarrierFree = c.bf
			for i := 0; i < b.N; i++ {
				r, _ := d.Begin()
				r.MatMulAt(W, c.x, tokens, y, rows, 0, false)
				if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*rows*cols*tokens*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkMatMulPrompt is the CPU adapters' prompt product on a 134M-parameter model's
// shapes (gen-model --preset 134m, Q4_K_M): 128 tokens of random activations, rounded and
// packed as the model packs them, in GFLOP/s.
func BenchmarkMatMulPrompt(b *testing.B) {
	d := gputest.Device(b)
	const tokens = 128
	rng := rand.New(rand.NewPCG(4, 4))
	for _, c := range []struct {
		typ        gpu.WeightType
		rows, cols int
	}{{gpu.Q4_K, 768, 768}, {gpu.Q4_K, 2048, 768}, {gpu.Q6_K, 768, 2048}} {
		w := make([]float32, c.rows*c.cols)
		for i := range w {
			w[i] = float32(rng.NormFloat64())
		}
		gt, _ := gguf.ParseGGMLType(c.typ.String())
		data, err := gguf.Quantize(gt, w)
		if err != nil {
			b.Fatal(err)
		}
		W, err := d.UploadWeight("w", c.typ, c.rows, c.cols, data)
		if err != nil {
			b.Fatal(err)
		}
		xs := make([]float32, tokens*c.cols)
		for i := range xs {
			xs[i] = float32(rng.NormFloat64())
		}
		x, _ := d.Upload("x", gpu.Bytes(xs))
		xq, _ := d.NewBuffer("xq", tokens*uint64(c.cols)*4)
		y, _ := d.NewBuffer("y", tokens*uint64(c.rows)*4)
		r, _ := d.Begin()
		packed := r.QuantizeActivations(gpu.ActFor(c.typ), x, 0, tokens, c.cols, xq, nil)
		if err := r.Submit(); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("%s/%dx%d", c.typ, c.rows, c.cols), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				r, _ := d.Begin()
				r.MatMulAt(W, packed, tokens, y, c.rows, 0, false)
				if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(2*float64(c.rows*c.cols*tokens)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		for _, buf := range []*gpu.Buffer{x, xq, y} {
			buf.Release()
		}
		W.Release()
	}
}
