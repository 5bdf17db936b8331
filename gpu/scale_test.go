package gpu_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestScale checks the in-place scaling of a buffer's first n values, bit for bit (one f32
// product each), leaving the rest alone.
func TestScale(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const n, extra, s = 1000, 7, float32(0.7321)
	x := randVec(rng, n+extra)
	want := slices.Clone(x)
	for i := range n {
		want[i] *= s
	}
	buf := upload(t, d, x)
	got := run(t, d, buf, len(x), func(r *gpu.Recorder) { r.Scale(buf, n, s) })
	if !slices.Equal(got, want) {
		t.Errorf("scaled values differ from x*s (%d of %d)", countDiff(got, want), len(want))
	}
}

// TestScaleRows checks (x * s) * w over rows, bit for bit (two f32 products each).
func TestScaleRows(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(53, 54))
	const rows, n, s = 3, 70, float32(0.125)
	x, w := randVec(rng, rows*n), randVec(rng, n)
	want := slices.Clone(x)
	for i := range want {
		want[i] = (want[i] * s) * w[i%n]
	}
	buf := upload(t, d, x)
	got := run(t, d, buf, len(x), func(r *gpu.Recorder) { r.ScaleRows(buf, upload(t, d, w), rows, n, s) })
	if !slices.Equal(got, want) {
		t.Errorf("scaled rows differ from (x*s)*w (%d of %d)", countDiff(got, want), len(want))
	}
}
