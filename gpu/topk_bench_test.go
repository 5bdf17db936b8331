package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// BenchmarkTopK times one submit that finds the best k of one row of logits and reads back the
// candidates, against one that reads back the whole row (what the host then searches), for a
// 32000- and a 151936-token vocabulary, on both kernel families.
func BenchmarkTopK(b *testing.B) {
	d := gputest.Device(b)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{32000, 151936} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * 3
		}
		logits, err := d.Upload("logits", gpu.Bytes(x))
		if err != nil {
			b.Fatal(err)
		}
		defer logits.Release()
		b.Run(fmt.Sprintf("n=%d/read-row", n), func(b *testing.B) {
			for range b.N {
				r, _ := d.Begin()
				if _, err := r.SubmitAndRead(logits, 0, uint64(n*4)); err != nil {
					b.Fatal(err)
				}
			}
		})
		for _, bf := range []bool{false, true} {
			d.BarrierFree = bf
			for _, k := range []int{1, 40} {
				out, _ := d.NewBuffer("out", uint64(gpu.TopKStride(k)*4))
				scratch, _ := d.NewBuffer("part", uint64(max(d.TopKScratchWords(n, 1, k), 1)*4))
				b.Run(fmt.Sprintf("n=%d/k=%d/barrier-free=%v", n, k, bf), func(b *testing.B) {
					d.BarrierFree = bf
					for range b.N {
						r, _ := d.Begin()
						r.TopK(logits, out, scratch, n, 1, k)
						if _, err := r.SubmitAndRead(out, 0, uint64(gpu.TopKStride(k)*4)); err != nil {
							b.Fatal(err)
						}
					}
				})
				out.Release()
				scratch.Release()
			}
		}
	}
}
