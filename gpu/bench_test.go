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
	wb, _ := d.Upload("w", gpu.Bytes(w))
	x, _ := d.NewBuffer("x", cols*4)
	y, _ := d.NewBuffer("y", rows*4)
	W := gpu.Weight{Buf: wb, Type: gpu.F32, Rows: rows, Cols: cols}
	b.SetBytes(rows * cols * 4)
	for i := 0; i < b.N; i++ {
		r, _ := d.Begin()
		r.MatMul(W, x, 0, 1, y, false)
		if _, err := r.SubmitAndRead(y, 0, 4); err != nil {
			b.Fatal(err)
		}
	}
}
