package gpu_test

import (
	"math/rand/v2"
	"testing"

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

// BenchmarkMatVec reports the decode kernel's weight bandwidth.
func BenchmarkMatVec(b *testing.B) {
	d := gputest.Device(b)
	rng := rand.New(rand.NewPCG(1, 1))
	const rows, cols = 2048, 2048
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	W, err := d.UploadWeight("w", gpu.F32, rows, cols, gpu.Bytes(w))
	if err != nil {
		b.Fatal(err)
	}
	x, _ := d.NewBuffer("x", cols*4)
	y, _ := d.NewBuffer("y", rows*4)
	b.SetBytes(rows * cols * 4)
	for i := 0; i < b.N; i++ {
		r, _ := d.Begin()
		r.MatMul(W, x, 0, 1, y, false)
		if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAttentionPrompt is causal attention for a 128-token prompt (stories260K's shape).
func BenchmarkAttentionPrompt(b *testing.B) {
	d := gputest.Device(b)
	const nTok, nHead, nKV, hd = 128, 8, 4, 8
	q, _ := d.NewBuffer("q", nTok*nHead*hd*4)
	k, _ := d.NewBuffer("k", nTok*nKV*hd*4)
	v, _ := d.NewBuffer("v", nTok*nKV*hd*4)
	out, _ := d.NewBuffer("o", nTok*nHead*hd*4)
	pos := make([]int32, nTok)
	for i := range pos {
		pos[i] = int32(i)
	}
	pb, _ := d.Upload("pos", gpu.Bytes(pos))
	for i := 0; i < b.N; i++ {
		r, _ := d.Begin()
		r.Attention(q, k, v, pb, out, false, nHead*hd, nTok, nHead, nKV, hd, 0.3)
		if _, err := r.SubmitAndRead(out, 0, 4); err != nil {
			b.Fatal(err)
		}
	}
}
