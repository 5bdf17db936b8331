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
