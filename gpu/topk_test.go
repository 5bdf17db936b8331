package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestTopK checks the candidates, their order and the log-sum-exp against the reference for
// the cooperative and barrier-free kernels, on rows of several vocabulary sizes (shorter than k
// too), with k from 1 to the maximum. Row 0 is random; row 1 is random rounded to halves, so
// ties straddle the k-th place and the lower ids must win; row 2 ascends (the barrier-free
// heap's worst case); row 3 is one value but for a few larger ones, so nearly every candidate
// is a tie, across the barrier-free kernel's spans.
func TestTopK(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		t.Run(fmt.Sprintf("barrier-free=%v", bf), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(11, 12))
			for _, n := range []int{37, 512, 32000, 151936} {
				const rows = 4
				x := randVec(rng, n*rows)
				for i := range x {
					x[i] = 4*x[i] - 1 // mostly negative, as logits often are
				}
				for i := range n {
					x[n+i] = float32(math.Round(float64(x[n+i])*2) / 2)
					x[2*n+i] = float32(i)/64 - 3
					x[3*n+i] = 0.25
				}
				for range 5 {
					x[3*n+rng.IntN(n)] = 1 + rng.Float32()
				}
				logits := upload(t, d, x)
				for _, k := range []int{1, 40, gpu.MaxTopK} {
					checkTopK(t, d, logits, x, n, rows, k)
				}
			}
		})
	}
}

func checkTopK(t *testing.T, d *gpu.Device, logits *gpu.Buffer, x []float32, n, rows, k int) {
	t.Helper()
	stride := gpu.TopKStride(k)
	out := empty(t, d, rows*stride)
	var scratch *gpu.Buffer
	if words := d.TopKScratchWords(n, rows, k); words > 0 {
		scratch = empty(t, d, words)
	}
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.TopK(logits, out, scratch, n, rows, k)
	raw, err := r.SubmitAndRead(out, 0, uint64(rows*stride*4))
	if err != nil {
		t.Fatal(err)
	}
	words := gpu.Float32s(raw)
	wantIDs, wantVals, wantLSE := cpuref.TopK(x, n, k)
	for row := range rows {
		w := words[row*stride:]
		top, sum := w[0], w[1]
		if top != wantVals[row][0] {
			t.Errorf("%dx%d k %d row %d: max %g, want %g", rows, n, k, row, top, wantVals[row][0])
		}
		lse := float64(top) + math.Log(float64(sum))
		if math.Abs(lse-wantLSE[row]) > 1e-4*math.Abs(wantLSE[row]) {
			t.Errorf("%dx%d k %d row %d: log-sum-exp %g, want %g", rows, n, k, row, lse, wantLSE[row])
		}
		for j, id := range wantIDs[row] {
			gotID := int32(math.Float32bits(w[2+j]))
			gotVal := w[2+k+j]
			if gotID != id || gotVal != wantVals[row][j] {
				t.Errorf("%dx%d k %d row %d: candidate %d is %d (%g), want %d (%g)", rows, n, k, row, j, gotID, gotVal, id, wantVals[row][j])
				break
			}
		}
	}
}

// TestTopKRejectsBadK checks that a k outside 1..MaxTopK fails the submit instead of writing
// past the workgroup's arrays, and the barrier-free kernel's limit on rows of many spans.
func TestTopKRejectsBadK(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	x := upload(t, d, []float32{1, 2, 3})
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		for _, k := range []int{0, gpu.MaxTopK + 1} {
			r, err := d.Begin()
			if err != nil {
				t.Fatal(err)
			}
			r.TopK(x, empty(t, d, gpu.TopKStride(gpu.MaxTopK+1)), empty(t, d, gpu.TopKStride(gpu.MaxTopK+1)), 3, 1, k)
			if err := r.Submit(); err == nil {
				t.Errorf("barrier-free=%v k %d: no error", bf, k)
			}
		}
	}
	d.BarrierFree = false
	if got := d.MaxTopKFor(1 << 20); got != gpu.MaxTopK {
		t.Errorf("cooperative kernel: at most %d candidates from rows of 2^20, want %d", got, gpu.MaxTopK)
	}
	d.BarrierFree = true
	for n, want := range map[int]int{151936: gpu.MaxTopK, 262144: gpu.MaxTopK, 500000: 244, 1 << 20: 0} {
		if got := d.MaxTopKFor(n); got != want {
			t.Errorf("barrier-free kernel: at most %d candidates from rows of %d, want %d", got, n, want)
		}
	}
}
