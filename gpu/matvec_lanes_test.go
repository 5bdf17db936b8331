package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// TestMatMulLaneOrder checks CPU adapters' Q8_0, Q5_0, Q4_1 and Q5_1 products
// (matvec_lanes.wgsl) bit for bit against llama.cpp's CPU order (cpuref.MatMulQ8_0Lanes and
// the others; Q4_1 and Q5_1 with Q8_1 activations and their block sums), for one token
// and batches that leave partial groups of token lanes, rows that leave a partial workgroup,
// with the residual add and from an offset row of the activations.
func TestMatMulLaneOrder(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(41, 42))
	const rows, cols, row0 = 45, 32 * 13, 1
	for _, c := range []struct {
		typ gpu.WeightType
		gt  gguf.GGMLType
		ref func([]byte, int, int, []float32, int) []float32
	}{{gpu.Q8_0, gguf.TypeQ8_0, cpuref.MatMulQ8_0Lanes}, {gpu.Q5_0, gguf.TypeQ5_0, cpuref.MatMulQ5_0Lanes},
		{gpu.Q4_1, gguf.TypeQ4_1, cpuref.MatMulQ4_1Lanes}, {gpu.Q5_1, gguf.TypeQ5_1, cpuref.MatMulQ5_1Lanes}} {
		for _, nTok := range []int{1, 2, 3, 6, 9} {
			for _, add := range []bool{false, true} {
				name := fmt.Sprintf("%s t=%d add=%v", c.typ, nTok, add)
				raw, err := gguf.Quantize(c.gt, randVec(rng, rows*cols))
				if err != nil {
					t.Fatal(err)
				}
				w := uploadWeight(t, d, c.typ, rows, cols, raw)
				x := randVec(rng, (row0+nTok)*cols)
				y0 := randVec(rng, nTok*rows)
				out := upload(t, d, y0)
				xq, sums := empty(t, d, nTok*cols), empty(t, d, nTok*cols/32)
				got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
					a := gpu.ActFor(c.typ)
					acts := r.QuantizeActivations(a, upload(t, d, x), row0, nTok, cols, xq, sums)
					if acts.Packed != a {
						t.Fatalf("%s: activations packed as %d, want %d", name, acts.Packed, a)
					}
					r.MatMulAt(w, acts, nTok, out, rows, 0, add)
				})
				want := c.ref(raw, rows, cols, x[row0*cols:], nTok)
				if add {
					want = cpuref.Add(y0, want)
				}
				checkBits(t, name, got, want)
			}
		}
	}
}

// TestMatMulSuperLaneOrder checks CPU adapters' products of the superblock types llama.cpp's
// x86 build does not repack (the K-quants, Q4_K here as 45 rows are not a multiple of 8, and
// the IQ types but IQ4_NL) bit for bit against
// cpuref.MatMulSuperLanes, the Go model of its AVX2 vec_dots (itself checked against
// llama.cpp's own library by cpuref's TestSuperLanesAreGGMLs): random blocks, 45 rows (not a
// multiple of the 32-row workgroup), batches of 1 to 9 tokens from an offset row.
func TestMatMulSuperLaneOrder(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(45, 46))
	const rows, cols = 45, 256 * 3
	types := map[gguf.GGMLType]gpu.WeightType{gguf.TypeQ2_K: gpu.Q2_K, gguf.TypeQ3_K: gpu.Q3_K,
		gguf.TypeQ4_K: gpu.Q4_K, gguf.TypeQ5_K: gpu.Q5_K,
		gguf.TypeQ6_K: gpu.Q6_K, gguf.TypeIQ2_XXS: gpu.IQ2_XXS, gguf.TypeIQ2_XS: gpu.IQ2_XS,
		gguf.TypeIQ2_S: gpu.IQ2_S, gguf.TypeIQ3_XXS: gpu.IQ3_XXS, gguf.TypeIQ3_S: gpu.IQ3_S,
		gguf.TypeIQ4_XS: gpu.IQ4_XS, gguf.TypeIQ1_S: gpu.IQ1_S, gguf.TypeIQ1_M: gpu.IQ1_M}
	for _, gt := range cpuref.SuperLaneTypes {
		typ := types[gt]
		raw := cpuref.RandomSuperBlocks(rng, gt, rows*cols/256)
		w := uploadWeight(t, d, typ, rows, cols, raw)
		checkLaneProducts(t, d, rng, typ, w, rows, cols, 0, func(x []float32, nTok int) []float32 {
			want, err := cpuref.MatMulSuperLanes(gt, raw, rows, cols, x, nTok)
			if err != nil {
				t.Fatal(err)
			}
			return want
		})
	}
}

// TestMatMulRepackedOrder checks CPU adapters' products of the types llama.cpp's x86 build
// repacks eight rows to a block (Q4_0, IQ4_NL, MXFP4, Q4_K; 40 rows, a multiple of 8 but not
// of the 32-row workgroup) bit for bit against cpuref.MatMulRepacked8: batches of 1 to 9
// tokens (9: Q4_K's gemm order for the first 8, its gemv order for the last).
func TestMatMulRepackedOrder(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(47, 48))
	const rows, cols = 40, 256 * 3
	for _, c := range []struct {
		typ gpu.WeightType
		gt  gguf.GGMLType
	}{{gpu.Q4_0, gguf.TypeQ4_0}, {gpu.IQ4_NL, gguf.TypeIQ4_NL}, {gpu.MXFP4, gguf.TypeMXFP4}, {gpu.Q4_K, gguf.TypeQ4_K}} {
		raw, err := gguf.Quantize(c.gt, randVec(rng, rows*cols))
		if err != nil {
			t.Fatal(err)
		}
		w := uploadWeight(t, d, c.typ, rows, cols, raw)
		checkLaneProducts(t, d, rng, c.typ, w, rows, cols, 1, func(x []float32, nTok int) []float32 {
			want, err := cpuref.MatMulRepacked8(c.gt, raw, rows, cols, x, nTok, nTok-nTok%4)
			if err != nil {
				t.Fatal(err)
			}
			return want
		})
	}
}

// checkLaneProducts runs w's product (typ, rows x cols) with batches of 1 to 9 tokens from
// row 1 of random activations, rounded as llama.cpp rounds them for typ and packed, set or
// added (every other batch, from addParity) into random outputs, and checks them bit for bit
// against ref of the batch's activations.
func checkLaneProducts(t *testing.T, d *gpu.Device, rng *rand.Rand, typ gpu.WeightType, w gpu.Weight, rows, cols, addParity int, ref func(x []float32, nTok int) []float32) {
	t.Helper()
	const row0 = 1
	a := gpu.ActFor(typ)
	for _, nTok := range []int{1, 2, 3, 6, 9} {
		add := nTok%2 == addParity
		name := fmt.Sprintf("%s t=%d add=%v", typ, nTok, add)
		x := randVec(rng, (row0+nTok)*cols)
		y0 := randVec(rng, nTok*rows)
		out := upload(t, d, y0)
		xq := empty(t, d, nTok*cols)
		got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
			acts := r.QuantizeActivations(a, upload(t, d, x), row0, nTok, cols, xq, nil)
			if acts.Packed != a {
				t.Fatalf("%s: activations packed as %d, want %d", name, acts.Packed, a)
			}
			r.MatMulAt(w, acts, nTok, out, rows, 0, add)
		})
		want := ref(x[row0*cols:], nTok)
		if add {
			want = cpuref.Add(y0, want)
		}
		checkBits(t, name, got, want)
	}
}

// checkBits fails on the first value that differs from want in any bit.
func checkBits(t *testing.T, name string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", name, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("%s: value %d is %v, want %v (%d of %d differ)", name, i, got[i], want[i], countDiff(got, want), len(got))
			return
		}
	}
}

// laneOrderDevice is the shared device as a CPU adapter reproducing llama.cpp's arithmetic
// (matvec_lanes.wgsl's products), restored after the test.
func laneOrderDevice(t *testing.T) *gpu.Device {
	d := gputest.Device(t)
	if d.Info.Type != "cpu" {
		t.Skip("llama.cpp's CPU order is reproduced on CPU adapters only (CPUMath)")
	}
	bf, exact := d.BarrierFree, d.CPUMath
	t.Cleanup(func() { d.BarrierFree, d.CPUMath = bf, exact })
	d.BarrierFree = true
	d.SetCPUMath(true)
	return d
}

// TestMatMulF32LaneOrder checks CPU adapters' F32 products bit for bit against llama.cpp's:
// ggml_vec_dot_f32's order for one token and for shapes tinyBLAS refuses (rows of a length not
// a multiple of 8, here with a tail past the runs of 32; a weight of 45 rows, not a multiple of
// 4), llamafile's tinyBLAS for other batches (the 512x128 weight at 9 tokens met the one case
// in 10^4 where an fma emulated as s + (t + e) rounds wrong).
func TestMatMulF32LaneOrder(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(43, 44))
	const row0 = 2
	for _, shape := range [][2]int{{44, 32 * 13}, {44, 32*13 + 12}, {45, 32 * 13}, {512, 128}, {256, 128}, {128, 256}, {384, 128}} {
		rows, cols := shape[0], shape[1]
		for _, nTok := range []int{1, 2, 3, 6, 9} {
			name := fmt.Sprintf("%dx%d t=%d", rows, cols, nTok)
			wv := randVec(rng, rows*cols)
			w := uploadWeight(t, d, gpu.F32, rows, cols, gpu.Bytes(wv))
			x := randVec(rng, (row0+nTok)*cols)
			y0 := randVec(rng, nTok*rows)
			out := upload(t, d, y0)
			got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
				r.MatMul(w, upload(t, d, x), row0, nTok, out, true)
			})
			want := make([]float32, len(y0))
			for tk := range nTok {
				xr := x[(row0+tk)*cols : (row0+tk+1)*cols]
				for r := range rows {
					wr := wv[r*cols : (r+1)*cols]
					v := cpuref.DotF32TinyBLAS(wr, xr)
					if nTok == 1 || cols%8 != 0 || rows%4 != 0 {
						v = cpuref.DotF32VecDot(wr, xr)
					}
					want[tk*rows+r] = y0[tk*rows+r] + v
				}
			}
			checkBits(t, name, got, want)
		}
	}
}

// uploadWeight uploads a weight of ggml's bytes, released when the test ends.
func uploadWeight(t *testing.T, d *gpu.Device, typ gpu.WeightType, rows, cols int, data []byte) gpu.Weight {
	t.Helper()
	w, err := d.UploadWeight("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return w
}
