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

const (
	tolF32 = 1e-4
	tolF16 = 1e-2
)

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func upload(t *testing.T, d *gpu.Device, v []float32) *gpu.Buffer {
	t.Helper()
	b, err := d.Upload("test", gpu.Bytes(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func uploadU32(t *testing.T, d *gpu.Device, v []int32) *gpu.Buffer {
	t.Helper()
	b, err := d.Upload("ids", gpu.Bytes(v))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func empty(t *testing.T, d *gpu.Device, n int) *gpu.Buffer {
	t.Helper()
	b, err := d.NewBuffer("out", uint64(n*4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// weight uploads a random matrix in the given format and returns it with the values the GPU
// sees (f16-rounded for F16), so the reference uses exactly the same weights.
func weight(t *testing.T, d *gpu.Device, rng *rand.Rand, typ gpu.WeightType, rows, cols int) (gpu.Weight, []float32) {
	t.Helper()
	w := randVec(rng, rows*cols)
	if typ == gpu.F32 {
		return gpu.Weight{Buf: upload(t, d, w), Type: typ, Rows: rows, Cols: cols}, w
	}
	h := make([]uint16, len(w))
	for i, v := range w {
		h[i] = gguf.F32ToF16(v)
		w[i] = gguf.F16ToF32(h[i])
	}
	b, err := d.Upload("w16", gpu.Bytes(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return gpu.Weight{Buf: b, Type: typ, Rows: rows, Cols: cols}, w
}

// run records fn into one pass, submits, and reads n floats of out.
func run(t *testing.T, d *gpu.Device, out *gpu.Buffer, n int, fn func(r *gpu.Recorder)) []float32 {
	t.Helper()
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	fn(r)
	b, err := r.SubmitAndRead(out, 0, uint64(n*4))
	if err != nil {
		t.Fatal(err)
	}
	return gpu.Float32s(b)
}

func check(t *testing.T, name string, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d values, want %d", name, len(got), len(want))
	}
	if e := cpuref.RelErr(got, want); e > tol {
		t.Errorf("%s: relative error %.3g > %.0g", name, e, tol)
	}
}

func tolFor(typ gpu.WeightType) float64 {
	if typ == gpu.F16 {
		return tolF16
	}
	return tolF32
}

func TestGetRows(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range []gpu.WeightType{gpu.F32, gpu.F16} {
		w, wv := weight(t, d, rng, typ, 50, 24)
		ids := []int32{3, 49, 0, 7, 7}
		out := empty(t, d, len(ids)*24)
		got := run(t, d, out, len(ids)*24, func(r *gpu.Recorder) { r.GetRows(w, uploadU32(t, d, ids), out, len(ids)) })
		check(t, "get_rows "+typ.String(), got, cpuref.GetRows(wv, 24, ids), tolFor(typ))
	}
}

func TestRMSNorm(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shape := range [][2]int{{64, 5}, {172, 1}, {1000, 3}} {
		n, rows := shape[0], shape[1]
		x, w := randVec(rng, n*rows), randVec(rng, n)
		out := empty(t, d, n*rows)
		got := run(t, d, out, n*rows, func(r *gpu.Recorder) { r.RMSNorm(upload(t, d, x), upload(t, d, w), out, n, rows, 1e-5) })
		check(t, fmt.Sprintf("rms_norm %dx%d", rows, n), got, cpuref.RMSNorm(x, w, n, 1e-5), tolF32)
	}
}

// TestMatMul covers the matrix-vector, tiled and barrier-free kernels, each weight type, with
// and without the fused residual add.
func TestMatMul(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		t.Run(fmt.Sprintf("barrier-free=%v", bf), func(t *testing.T) { testMatMul(t, d) })
	}
}

func testMatMul(t *testing.T, d *gpu.Device) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range []gpu.WeightType{gpu.F32, gpu.F16} {
		for _, c := range []struct{ rows, cols, tokens, row0 int }{
			{64, 64, 1, 0}, {172, 64, 3, 2}, {64, 172, 8, 0}, {512, 64, 1, 4}, // matrix-vector
			{64, 64, 9, 0}, {100, 172, 37, 1}, {33, 48, 16, 0}, // tiled
		} {
			for _, acc := range []bool{false, true} {
				name := fmt.Sprintf("%s %dx%d t=%d row0=%d add=%v", typ, c.rows, c.cols, c.tokens, c.row0, acc)
				w, wv := weight(t, d, rng, typ, c.rows, c.cols)
				x := randVec(rng, (c.row0+c.tokens)*c.cols)
				y0 := randVec(rng, c.tokens*c.rows)
				out := upload(t, d, y0)
				got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
					r.MatMul(w, upload(t, d, x), c.row0, c.tokens, out, acc)
				})
				want := cpuref.MatMul(wv, c.rows, c.cols, x[c.row0*c.cols:], c.tokens)
				if acc {
					want = cpuref.Add(y0, want)
				}
				check(t, name, got, want, tolFor(typ))
			}
		}
	}
}

func TestRoPE(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const nTok, nHeads, headDim = 5, 4, 16
	for _, nRot := range []int{16, 8} {
		x := randVec(rng, nTok*nHeads*headDim)
		pos := []int32{0, 1, 2, 100, 2047}
		want := append([]float32(nil), x...)
		cpuref.RoPE(want, pos, nHeads, headDim, nRot, 10000)

		buf := upload(t, d, x)
		got := run(t, d, buf, len(x), func(r *gpu.Recorder) { r.RoPE(buf, uploadU32(t, d, pos), nTok, nHeads, headDim, nRot, 10000) })
		check(t, fmt.Sprintf("rope n_rot=%d", nRot), got, want, tolF32)

		// The cache variant writes row t to row pos[t] of a larger buffer.
		const nCtx = 2048
		cache := empty(t, d, nCtx*nHeads*headDim)
		gotC := run(t, d, cache, nCtx*nHeads*headDim, func(r *gpu.Recorder) {
			r.RoPEToCache(upload(t, d, x), uploadU32(t, d, pos), cache, nTok, nHeads, headDim, nRot, 10000)
		})
		var picked []float32
		for _, p := range pos {
			row := int(p) * nHeads * headDim
			picked = append(picked, gotC[row:row+nHeads*headDim]...)
		}
		check(t, fmt.Sprintf("rope to cache n_rot=%d", nRot), picked, want, tolF32)
	}
}

func TestSetRows(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(9, 10))
	const width, nCtx = 24, 16
	src := randVec(rng, 3*width)
	pos := []int32{5, 0, 15}
	dst0 := randVec(rng, nCtx*width)
	dst := upload(t, d, dst0)
	got := run(t, d, dst, nCtx*width, func(r *gpu.Recorder) { r.SetRows(upload(t, d, src), uploadU32(t, d, pos), dst, width, 3) })
	want := append([]float32(nil), dst0...)
	for i, p := range pos {
		copy(want[int(p)*width:], src[i*width:(i+1)*width])
	}
	check(t, "set_rows", got, want, tolF32)
}

func TestAttention(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct{ nHead, nKV, headDim, nCtx int }{{8, 4, 8, 200}, {4, 4, 64, 70}, {6, 2, 128, 130}, {2, 1, 256, 10}} {
		// Prompt tokens at the end of the filled cache, each attending causally to its prefix.
		pos := []int32{int32(c.nCtx - 3), int32(c.nCtx - 2), int32(c.nCtx - 1)}
		q := randVec(rng, len(pos)*c.nHead*c.headDim)
		k := randVec(rng, c.nCtx*c.nKV*c.headDim)
		v := randVec(rng, c.nCtx*c.nKV*c.headDim)
		scale := float32(0.3)
		out := empty(t, d, len(q))
		got := run(t, d, out, len(q), func(r *gpu.Recorder) {
			r.Attention(upload(t, d, q), upload(t, d, k), upload(t, d, v), uploadU32(t, d, pos), out, len(pos), c.nHead, c.nKV, c.headDim, scale)
		})
		check(t, fmt.Sprintf("attention %+v", c), got, cpuref.Attention(q, k, v, pos, c.nHead, c.nKV, c.headDim, scale), tolF32)
	}
}

func TestSiLUMulAndAdd(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const n = 1000
	g, u := randVec(rng, n), randVec(rng, n)
	gb := upload(t, d, g)
	got := run(t, d, gb, n, func(r *gpu.Recorder) { r.SiLUMul(gb, upload(t, d, u), n) })
	check(t, "silu_mul", got, cpuref.SiLUMul(g, u), tolF32)

	a, b := randVec(rng, n), randVec(rng, n)
	ab := upload(t, d, a)
	got = run(t, d, ab, n, func(r *gpu.Recorder) { r.Add(ab, upload(t, d, b), n) })
	check(t, "add", got, cpuref.Add(a, b), tolF32)
}

// TestLargeGrid covers the 2-D workgroup grid used when a dimension would exceed the limit.
func TestLargeGrid(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(15, 16))
	n := int(d.Limits.MaxComputeWorkgroupsPerDimension)*64 + 1000
	a, b := randVec(rng, n), randVec(rng, n)
	ab := upload(t, d, a)
	got := run(t, d, ab, n, func(r *gpu.Recorder) { r.Add(ab, upload(t, d, b), n) })
	check(t, "add 2-D grid", got, cpuref.Add(a, b), tolF32)
}

func TestDispatchErrors(t *testing.T) {
	d := gputest.Device(t)
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	a := empty(t, d, 4)
	r.Attention(a, a, a, a, a, 1, 3, 2, 8, 1) // 3 heads over 2 kv heads
	if err := r.Submit(); err == nil {
		t.Fatal("expected an error for an invalid head grouping")
	}
}
