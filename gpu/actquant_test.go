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

// TestQuantizeActivations checks each activation rounding against its Go reference, on rows
// read from an offset, in both kernels: the cooperative one of GPUs (rows of a length that
// leaves its last workgroup part full) and the per-block one of CPU adapters (one row, which
// they do not pack but for the Q8 roundings with CPUMath: their packed blocks are read back
// as values).
func TestQuantizeActivations(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, m bool) { d.BarrierFree, d.CPUMath = v, m }(d.BarrierFree, d.CPUMath)
	d.SetCPUMath(true) // Q8_0's and Q8_1's one row packed too on a CPU adapter
	rng := rand.New(rand.NewPCG(19, 20))
	for _, c := range []struct {
		a   gpu.ActQuant
		ref func([]float32) []float32
	}{{gpu.ActQ8_0, cpuref.ActQ8_0}, {gpu.ActQ8_1, cpuref.ActQ8_0}, {gpu.ActQ8_K, cpuref.ActQ8_K}, {gpu.ActF16, cpuref.ActF16}, {gpu.ActBF16, cpuref.ActBF16}} {
		k := 800 // 3 workgroups of 256 and 32 values
		if c.a == gpu.ActQ8_K {
			k = 768
		}
		for _, v := range []struct {
			barrierFree bool
			nRows       int
		}{{false, 3}, {true, 1}} {
			d.BarrierFree = v.barrierFree
			const row0 = 2
			x := randVec(rng, (row0+v.nRows)*k)
			x[row0*k+5] = 0 // a zero, an all-zero block, and a largest magnitude held twice
			for i := 0; i < 32; i++ {
				x[(row0+v.nRows-1)*k+i] = 0
			}
			x[row0*k+40], x[row0*k+200] = 1.5, -1.5
			src := x[row0*k:]
			out := empty(t, d, v.nRows*k)
			sums := empty(t, d, v.nRows*k/32)
			var acts gpu.Acts
			got := run(t, d, out, v.nRows*k, func(r *gpu.Recorder) { acts = r.QuantizeActivations(c.a, upload(t, d, x), row0, v.nRows, k, out, sums) })
			if acts.Packed != gpu.ActNone {
				got = unpackQ8(got, v.nRows*k, acts.Packed.Block())
			}
			name := fmt.Sprintf("act %d barrier-free=%v", c.a, v.barrierFree)
			check(t, name, got, c.ref(src), 1e-6)
			if c.a == gpu.ActQ8_1 {
				got, err := d.Read(sums, 0, uint64(v.nRows*k/32*4))
				if err != nil {
					t.Fatal(err)
				}
				check(t, name+" sums", gpu.Float32s(got), cpuref.ActQ8_1Sums(src), 1e-6)
			}
		}
	}
}

// TestF16RoundingEdges checks the kernels' own f32 -> f16 rounding bit for bit against ggml's
// (nearest, ties to even) where drivers differ: exact ties, carries into the exponent,
// subnormals, overflow to infinity and negative values. Mesa 25's pack2x16float rounds
// toward zero and fails this.
func TestF16RoundingEdges(t *testing.T) {
	d := gputest.Device(t)
	ulp := float32(1.0 / 1024)
	x := []float32{
		1 + ulp/2, 1 + 3*ulp/2, 1 + ulp/2 + 1e-7, -(1 + 3*ulp/2), // ties to even, just past a tie
		2 - ulp/4, 65504, 65519.99, 65520, -70000, // carry into the exponent, the largest half, overflow
		0x1p-25, 3 * 0x1p-25, 0x1p-24 * 1.5, 0x1p-14 - 0x1p-26, -0x1p-20 * 1.3, // subnormal halves
		0, float32(math.Copysign(0, -1)), 0.1, -0.3, 3.14159, 1e-5, 1234.567,
	}
	for len(x)%4 != 0 {
		x = append(x, float32(len(x))*0.377)
	}
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	d.BarrierFree = false // f32 output
	out := empty(t, d, len(x))
	got := run(t, d, out, len(x), func(r *gpu.Recorder) {
		r.QuantizeActivations(gpu.ActF16, upload(t, d, x), 0, 1, len(x), out, nil)
	})
	want := cpuref.ActF16(x)
	for i := range x {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Errorf("f16(%g) = %g (%#08x), want %g (%#08x)", x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestMatVecBlockSums checks the Q4_1/Q5_1 product that applies each block minimum to the Q8_1
// block sum (as ggml_vec_dot_q4_1_q8_1 does) rather than to every rounded activation.
func TestMatVecBlockSums(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(21, 22))
	const rows, cols = 37, 96
	for _, typ := range []gpu.WeightType{gpu.Q4_1, gpu.Q5_1} {
		gt, _ := gguf.ParseGGMLType(typ.String())
		raw, err := gguf.Quantize(gt, randVec(rng, rows*cols))
		if err != nil {
			t.Fatal(err)
		}
		wv := make([]float32, rows*cols)
		if err := gguf.Dequantize(gt, raw, wv); err != nil {
			t.Fatal(err)
		}
		blockBytes := len(raw) / (rows * cols / 32)
		mins := make([]float32, rows*cols/32) // m is the second f16 of each block
		for b := range mins {
			mins[b] = gguf.F16ToF32(uint16(raw[b*blockBytes+2]) | uint16(raw[b*blockBytes+3])<<8)
		}
		w, err := d.UploadWeight("w", typ, rows, cols, raw)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Release)
		for _, bf := range []bool{false, true} {
			d.BarrierFree = bf
			for _, nTok := range []int{1, 3, 11} { // 11: CPU adapters' matmul_rows
				if nTok > 8 && !bf {
					continue // GPUs take the tiled kernel there, which applies no block sums
				}
				x := randVec(rng, nTok*cols)
				xq, sums := cpuref.ActQ8_0(x), cpuref.ActQ8_1Sums(x)
				want := make([]float32, nTok*rows)
				for tk := 0; tk < nTok; tk++ {
					for r := 0; r < rows; r++ {
						var acc float64
						for b := 0; b < cols/32; b++ {
							mb := mins[r*cols/32+b]
							for i := 0; i < 32; i++ {
								acc += float64(wv[r*cols+32*b+i]-mb) * float64(xq[tk*cols+32*b+i])
							}
							acc += float64(mb) * float64(sums[tk*cols/32+b])
						}
						want[tk*rows+r] = float32(acc)
					}
				}
				out := empty(t, d, nTok*rows)
				got := run(t, d, out, nTok*rows, func(r *gpu.Recorder) {
					r.MatMulAt(w, gpu.Acts{X: upload(t, d, xq), Sums: upload(t, d, sums)}, nTok, out, rows, 0, false)
				})
				check(t, fmt.Sprintf("%s block sums barrier-free=%v tokens=%d", typ, bf, nTok), got, want, 1e-5)
			}
		}
	}
}

// TestPackedActivations checks that CPU adapters' packed activations (act_quant's PACKED
// layouts, for batches) give the matrix kernel exactly the products of the f32 rounded ones,
// bit for bit, for every weight type that rounds its input, rows per invocation picked by
// size; and that one token's activations stay f32. (With CPUMath, Q8_0 weights take
// matvec_lanes.wgsl on packed rows alone, one token's too: TestMatMulLaneOrder.)
func TestPackedActivations(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(23, 24))
	const rows, k, row0 = 300, 512, 1
	for _, typ := range allTypes {
		a := gpu.ActFor(typ)
		if a == gpu.ActNone {
			continue
		}
		w, _ := weight(t, d, rng, typ, rows, k)
		for _, nTok := range []int{1, 2, 6, 9} { // 6 and 9: matmul_rows, a partial group of 8
			x := upload(t, d, randVec(rng, (row0+nTok)*k))
			var out [2][]float32
			for i, packed := range []bool{false, true} {
				xq, sums, y := empty(t, d, nTok*k), empty(t, d, nTok*k/32), empty(t, d, nTok*rows)
				out[i] = run(t, d, y, nTok*rows, func(r *gpu.Recorder) {
					d.BarrierFree = packed // f32 or packed rounding
					acts := r.QuantizeActivations(a, x, row0, nTok, k, xq, sums)
					if want := packed && nTok > 1; acts.Packed != gpu.ActNone != want {
						t.Fatalf("%s t=%d: packed as %d, want packed %v", typ, nTok, acts.Packed, want)
					}
					d.BarrierFree = true
					r.MatMulAt(w, acts, nTok, y, rows, 0, false)
				})
			}
			for i := range out[0] {
				if math.Float32bits(out[0][i]) != math.Float32bits(out[1][i]) {
					t.Errorf("%s t=%d: y[%d] = %g from packed activations, %g from f32", typ, nTok, i, out[1][i], out[0][i])
					break
				}
			}
		}
	}
}

// unpackQ8 is the values of act_quant's PACKED Q8 blocks of bs values in words: per block its
// scale (f32 bits) and then its int8 four to a word, lowest first.
func unpackQ8(words []float32, n, bs int) []float32 {
	out := make([]float32, n)
	for i := range out {
		blk := words[i/bs*(1+bs/4):]
		q := int8(math.Float32bits(blk[1+i%bs/4]) >> (8 * (i % 4)))
		out[i] = blk[0] * float32(q)
	}
	return out
}

// TestFusedIntDotActs checks GPUs' fused roundings for integer dot products against the two
// dispatches they replace, word for word (packed values, scales and Q8_1's sums): the RMS norm
// (RMSNorm, then QuantizeForIntDot) and the gated unit (GLU with SiLU and with GELU, then
// QuantizeForIntDot), for every Q8 rounding, three rows, rows of a length that leaves the last
// of act_quant's 256-wide workgroups part full where the block allows.
func TestFusedIntDotActs(t *testing.T) {
	d := gputest.Device(t)
	defer func(b, i bool) { d.BarrierFree, d.IntDot = b, i }(d.BarrierFree, d.IntDot)
	d.BarrierFree, d.IntDot = false, true
	rng := rand.New(rand.NewPCG(21, 22))
	const rows = 3
	for _, a := range []gpu.ActQuant{gpu.ActQ8_0, gpu.ActQ8_1, gpu.ActQ8_K} {
		k := 800
		if a == gpu.ActQ8_K {
			k = 768
		}
		words := rows * k / a.Block() * (1 + a.Block()/4)
		both := func(name string, unfused, fused func(r *gpu.Recorder, out, sums *gpu.Buffer)) {
			t.Helper()
			var got [2][]float32
			var sums [2][]float32
			for i, record := range []func(r *gpu.Recorder, out, sums *gpu.Buffer){unfused, fused} {
				out, s := empty(t, d, words), empty(t, d, rows*k/32)
				got[i] = run(t, d, out, words, func(r *gpu.Recorder) { record(r, out, s) })
				b, err := d.Read(s, 0, uint64(rows*k/32*4))
				if err != nil {
					t.Fatal(err)
				}
				sums[i] = gpu.Float32s(b)
			}
			for i := range got[0] {
				if math.Float32bits(got[0][i]) != math.Float32bits(got[1][i]) {
					t.Fatalf("%s as %d: word %d is %08x, unfused %08x", name, a, i, math.Float32bits(got[1][i]), math.Float32bits(got[0][i]))
				}
			}
			if a == gpu.ActQ8_1 {
				checkBits(t, name+" sums", sums[1], sums[0])
			}
		}
		x, w := upload(t, d, randVec(rng, rows*k)), upload(t, d, randVec(rng, k))
		both("rms norm", func(r *gpu.Recorder, out, sums *gpu.Buffer) {
			xn := empty(t, d, rows*k)
			r.RMSNorm(x, w, xn, k, rows, 1e-5)
			r.QuantizeForIntDot(a, xn, 0, rows, k, out, sums)
		}, func(r *gpu.Recorder, out, sums *gpu.Buffer) {
			if acts := r.RMSNormForIntDot(x, w, k, rows, 1e-5, a, out, sums); acts.Packed != a || acts.X != out {
				t.Fatalf("fused norm: activations %+v", acts)
			}
		})
		gu := upload(t, d, randVec(rng, rows*2*k))
		for _, gelu := range []bool{false, true} {
			both(fmt.Sprintf("glu gelu=%v", gelu), func(r *gpu.Recorder, out, sums *gpu.Buffer) {
				f := empty(t, d, rows*k)
				r.GLU(gu, f, k, rows, gelu)
				r.QuantizeForIntDot(a, f, 0, rows, k, out, sums)
			}, func(r *gpu.Recorder, out, sums *gpu.Buffer) {
				r.GLUForIntDot(gu, k, rows, gelu, a, out, sums)
			})
		}
	}
}
