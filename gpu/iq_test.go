package gpu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gguf/iqgrid"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

// iqTypes are the IQ types and MXFP4: formats the kernels read that gguf may only decode.
var iqTypes = []gpu.WeightType{gpu.IQ4_NL, gpu.IQ4_XS, gpu.MXFP4, gpu.IQ3_S, gpu.IQ3_XXS, gpu.IQ2_S,
	gpu.IQ2_XS, gpu.IQ2_XXS, gpu.IQ1_M, gpu.IQ1_S}

// iqData is rows x cols of type typ: random floats quantized where gguf encodes the type, else
// random bytes with a sane scale (an f16 d of about 0.05, an MXFP4 exponent of 2^-10 to 2^5):
// every other byte of these types is a valid grid index, sign, delta or sub-block scale
// whatever its value. It returns the bytes and the values gguf decodes from them.
func iqData(t testing.TB, rng *rand.Rand, typ gpu.WeightType, rows, cols int) ([]byte, []float32) {
	t.Helper()
	gt, ok := gguf.ParseGGMLType(typ.String())
	if !ok {
		t.Fatalf("no ggml type %s", typ)
	}
	vals := make([]float32, rows*cols)
	var data []byte
	if gt.CanQuantize() {
		var err error
		if data, err = gguf.Quantize(gt, randVec(rng, rows*cols)); err != nil {
			t.Fatal(err)
		}
	} else {
		ts, n := int(gt.TypeSize()), rows*cols/int(gt.BlockSize())
		data = make([]byte, n*ts)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for b := range n {
			x := data[b*ts : (b+1)*ts]
			d := gguf.F32ToF16(float32(rng.NormFloat64()) * 0.05)
			switch typ {
			case gpu.MXFP4:
				x[0] = byte(118 + rng.IntN(16))
			case gpu.IQ1_M: // d's nibbles top the four scale words
				for i := range 4 {
					x[48+2*i+1] = x[48+2*i+1]&0x0F | byte(d>>(4*i)&0xF)<<4
				}
			default:
				binary.LittleEndian.PutUint16(x, d)
			}
		}
	}
	if err := gguf.Dequantize(gt, data, vals); err != nil {
		t.Fatal(err)
	}
	return data, vals
}

// iqWeight uploads iqData as a weight.
func iqWeight(t testing.TB, d *gpu.Device, rng *rand.Rand, typ gpu.WeightType, rows, cols int) (gpu.Weight, []float32) {
	t.Helper()
	data, vals := iqData(t, rng, typ, rows, cols)
	w, err := d.UploadWeight("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	return w, vals
}

// TestIQGridPack checks the grids Pack appends (what it packs of no blocks) against package
// iqgrid, decoded as dequant.inc.wgsl reads them.
func TestIQGridPack(t *testing.T) {
	for _, typ := range iqTypes {
		g, err := gpu.Pack(typ, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(g) != gpu.GridBytes(typ) {
			t.Fatalf("%s: %d grid bytes, GridBytes says %d", typ, len(g), gpu.GridBytes(typ))
		}
		word := func(i int) uint32 { return binary.LittleEndian.Uint32(g[4*i:]) }
		var n int
		var point func(i int) uint64 // the grid point as the kernels decode it, bytes lowest first
		switch typ {
		case gpu.IQ2_XXS, gpu.IQ2_XS, gpu.IQ2_S:
			n = map[gpu.WeightType]int{gpu.IQ2_XXS: iqgrid.IQ2XXSLen, gpu.IQ2_XS: iqgrid.IQ2XSLen, gpu.IQ2_S: iqgrid.IQ2SLen}[typ]
			point = func(i int) uint64 { return uint64(word(2*i)) | uint64(word(2*i+1))<<32 }
		case gpu.IQ3_XXS, gpu.IQ3_S:
			n = map[gpu.WeightType]int{gpu.IQ3_XXS: iqgrid.IQ3XXSLen, gpu.IQ3_S: iqgrid.IQ3SLen}[typ]
			point = func(i int) uint64 { return uint64(word(i)) }
		case gpu.IQ1_S, gpu.IQ1_M:
			n = iqgrid.IQ1SLen
			point = func(i int) uint64 {
				bits := word(i/2) >> (16 * (i % 2))
				var p uint64
				for e := range 8 {
					p |= uint64(uint8(int8(bits>>(2*e)&3)-1)) << (8 * e)
				}
				return p
			}
		default:
			if len(g) != 0 {
				t.Errorf("%s: %d grid bytes, want none", typ, len(g))
			}
			continue
		}
		if len(g) > 8<<10 {
			t.Errorf("%s: grid of %d bytes", typ, len(g))
		}
		want := map[gpu.WeightType]func(int) uint64{
			gpu.IQ2_XXS: iqgrid.IQ2XXS, gpu.IQ2_XS: iqgrid.IQ2XS, gpu.IQ2_S: iqgrid.IQ2S, gpu.IQ1_S: iqgrid.IQ1S, gpu.IQ1_M: iqgrid.IQ1S,
			gpu.IQ3_XXS: func(i int) uint64 { return uint64(iqgrid.IQ3XXS(i)) }, gpu.IQ3_S: func(i int) uint64 { return uint64(iqgrid.IQ3S(i)) },
		}[typ]
		for i := range n {
			if point(i) != want(i) {
				t.Fatalf("%s point %d: %#x, want %#x", typ, i, point(i), want(i))
			}
		}
	}
}

// TestIQPack checks the padded block layout: every field of a block where dequant.inc.wgsl
// reads it, the pad bytes zero, the grid after the blocks.
func TestIQPack(t *testing.T) {
	for _, typ := range iqTypes {
		gt, _ := gguf.ParseGGMLType(typ.String())
		ts := int(gt.TypeSize())
		data := make([]byte, 3*ts)
		for i := range data {
			data[i] = byte(i*7 + 1)
		}
		p, err := gpu.Pack(typ, data)
		if err != nil {
			t.Fatal(err)
		}
		words := (ts + 3) / 4
		if len(p) != 3*4*words+gpu.GridBytes(typ) {
			t.Fatalf("%s: packed %d bytes, want %d", typ, len(p), 3*4*words+gpu.GridBytes(typ))
		}
		pad := 4*words - ts // bytes inserted after the leading f16 (MXFP4: its scale byte), or none
		lead := 2
		if typ == gpu.MXFP4 {
			lead = 1
		}
		for b := range 3 {
			src, dst := data[b*ts:(b+1)*ts], p[b*4*words:(b+1)*4*words]
			want := append(append(append([]byte(nil), src[:lead]...), make([]byte, pad)...), src[lead:]...)
			if string(dst) != string(want) {
				t.Fatalf("%s block %d: packed % x, want % x", typ, b, dst, want)
			}
		}
	}
	if _, err := gpu.Pack(gpu.IQ2_XS, make([]byte, 75)); err == nil {
		t.Error("75 bytes of IQ2_XS packed without an error")
	}
}

// iqVariant is a shape of the device's matrix kernels.
type iqVariant struct {
	name              string
	bf, sub, f16m     bool
	rowsPerInvocation int
}

// iqVariants are CPU adapters' barrier-free kernels (1 and 4 rows an invocation) and GPUs'
// (cooperative matrix-vector and tiled kernels; with subgroups and half-precision tiles where
// the adapter has them).
func iqVariants(d *gpu.Device) []iqVariant {
	v := []iqVariant{{"cpu-rows=1", true, false, false, 1}, {"cpu-rows=4", true, false, false, 4}, {"gpu", false, false, false, 0}}
	if d.Features.Subgroups {
		v = append(v, iqVariant{"gpu-subgroups", false, true, false, 0})
	}
	if d.Features.ShaderF16 {
		v = append(v, iqVariant{"gpu-f16", false, false, true, 0})
	}
	return v
}

func (v iqVariant) use(t *testing.T, d *gpu.Device) {
	bf, sub, f16m, rows := d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation
	t.Cleanup(func() { d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation = bf, sub, f16m, rows })
	d.BarrierFree, d.SubgroupMath, d.F16Math, d.RowsPerInvocation = v.bf, v.sub, v.f16m, v.rowsPerInvocation
}

// TestIQMatMul checks every kernel shape against dequantize + cpuref for the IQ types and
// MXFP4: 1 to 3 tokens (row-per-thread or cooperative matrix-vector), 5 (matmul_rows or
// cooperative), 9 and 70 (matmul_rows or tiled), with rows and columns that are not multiples
// of the tiles and several blocks a row. (The epilogues, such as the residual add, are the
// same for every type: ops_test.go checks them.)
func TestIQMatMul(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range iqVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			v.use(t, d)
			rng := rand.New(rand.NewPCG(91, 92))
			for _, typ := range iqTypes {
				bs := typ.BlockSize()
				for _, c := range []struct{ rows, cols, tokens int }{
					{37, 3 * bs, 1}, {29, 2 * bs, 2}, {43, bs, 3}, {23, 3 * bs, 5}, {33, 2 * bs, 9}, {70, 3 * bs, 70},
					{21, 9 * bs, 1}, // more than a row's 64 cooperative invocations take in one step
				} {
					w, wv := iqWeight(t, d, rng, typ, c.rows, c.cols)
					x := randVec(rng, (1+c.tokens)*c.cols) // from row 1
					out := empty(t, d, c.tokens*c.rows)
					got := run(t, d, out, c.tokens*c.rows, func(r *gpu.Recorder) { r.MatMul(w, upload(t, d, x), 1, c.tokens, out, false) })
					tol := tolQuant
					if v.f16m && c.tokens > 8 {
						tol = tolF16 // the tiled kernel's half-precision tiles
					}
					check(t, fmt.Sprintf("%s %s %dx%d t=%d", v.name, typ, c.rows, c.cols, c.tokens), got,
						cpuref.MatMul(wv, c.rows, c.cols, x[c.cols:], c.tokens), tol)
				}
			}
		})
	}
}

// TestIQGetRows checks the embedding lookup of every IQ type and MXFP4.
func TestIQGetRows(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(93, 94))
	for _, typ := range iqTypes {
		cols := 2 * typ.BlockSize()
		w, wv := iqWeight(t, d, rng, typ, 50, cols)
		ids := []int32{3, 49, 0, 7, 7}
		out := empty(t, d, len(ids)*cols)
		got := run(t, d, out, len(ids)*cols, func(r *gpu.Recorder) { r.GetRowsScaled(w, uploadU32(t, d, ids), out, len(ids), 1.5) })
		want := cpuref.GetRows(wv, cols, ids)
		for i := range want {
			want[i] *= 1.5
		}
		check(t, "get_rows "+typ.String(), got, want, tolF32)
	}
}

// TestIQPackedActivations checks that CPU adapters' packed activations (act_quant's PACKED
// Q8 blocks, as long as the weight's: Q8_0 for IQ4_NL and MXFP4, Q8_K for the others) give
// the matrix kernels exactly the products of the f32 rounded ones, and that the rounding is
// llama.cpp's vec_dot_type for each type.
func TestIQPackedActivations(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(95, 96))
	const rows, k, row0 = 300, 512, 1
	for _, typ := range iqTypes {
		a := gpu.ActFor(typ)
		want := gpu.ActQ8_K
		if typ == gpu.IQ4_NL || typ == gpu.MXFP4 {
			want = gpu.ActQ8_0
		}
		if a != want {
			t.Errorf("ActFor(%s) = %d, want %d", typ, a, want)
		}
		w, wv := iqWeight(t, d, rng, typ, rows, k)
		for _, nTok := range []int{2, 3, 6, 9} { // row-per-thread lanes 2 and 4, matmul_rows
			xv := randVec(rng, (row0+nTok)*k)
			x := upload(t, d, xv)
			var out [2][]float32
			for i, packed := range []bool{false, true} {
				xq, sums, y := empty(t, d, nTok*k), empty(t, d, nTok*k/32), empty(t, d, nTok*rows)
				out[i] = run(t, d, y, nTok*rows, func(r *gpu.Recorder) {
					d.BarrierFree = packed // f32 or packed rounding
					acts := r.QuantizeActivations(a, x, row0, nTok, k, xq, sums)
					if acts.Packed != gpu.ActNone != packed {
						t.Fatalf("%s t=%d: packed as %d, want packed %v", typ, nTok, acts.Packed, packed)
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
			check(t, fmt.Sprintf("%s t=%d rounded activations", typ, nTok), out[1],
				cpuref.MatMul(wv, rows, k, actRef(typ, xv[row0*k:]), nTok), tolQuant)
		}
	}
}

// TestIQSplitWeight checks a weight split into chunks at the binding limit: each chunk's
// buffer holds whole rows and its own copy of the grid, which the kernels find at its end.
func TestIQSplitWeight(t *testing.T) {
	d := gputest.Device(t)
	defer func(v uint64, bf bool) { d.MaxBinding, d.BarrierFree = v, bf }(d.MaxBinding, d.BarrierFree)
	rng := rand.New(rand.NewPCG(97, 98))
	const rows = 25
	for _, typ := range []gpu.WeightType{gpu.IQ2_S, gpu.IQ1_M, gpu.MXFP4} {
		cols := 2 * typ.BlockSize()
		rowBytes := uint64(len(mustPack(t, typ, cols)) - gpu.GridBytes(typ))
		d.MaxBinding = 10*rowBytes + uint64(gpu.GridBytes(typ)) // 10 rows a chunk, with the grid
		w, wv := iqWeight(t, d, rng, typ, rows, cols)
		if len(w.Chunks) != 3 {
			t.Fatalf("%s: %d chunks, want 3", typ, len(w.Chunks))
		}
		if want := rows*rowBytes + 3*uint64(gpu.GridBytes(typ)); w.Bytes() != want {
			t.Errorf("%s: %d bytes on the device, want %d", typ, w.Bytes(), want)
		}
		for _, bf := range []bool{false, true} {
			d.BarrierFree = bf
			for _, nTok := range []int{1, 20} {
				x := randVec(rng, nTok*cols)
				out := empty(t, d, nTok*rows)
				got := run(t, d, out, nTok*rows, func(r *gpu.Recorder) { r.MatMul(w, upload(t, d, x), 0, nTok, out, false) })
				tol := tolQuant
				if d.F16Math && !bf && nTok > 8 {
					tol = tolF16
				}
				check(t, fmt.Sprintf("split %s barrier-free=%v tokens=%d", typ, bf, nTok), got, cpuref.MatMul(wv, rows, cols, x, nTok), tol)
			}
		}
		ids := []int32{0, 9, 10, 24, 11}
		out := empty(t, d, len(ids)*cols)
		got := run(t, d, out, len(ids)*cols, func(r *gpu.Recorder) { r.GetRows(w, uploadU32(t, d, ids), out, len(ids)) })
		check(t, "split get_rows "+typ.String(), got, cpuref.GetRows(wv, cols, ids), tolF32)
	}
}

// mustPack packs one row of zero blocks of typ (and the grid).
func mustPack(t *testing.T, typ gpu.WeightType, cols int) []byte {
	gt, _ := gguf.ParseGGMLType(typ.String())
	p, err := gpu.Pack(typ, make([]byte, cols/typ.BlockSize()*int(gt.TypeSize())))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestIQMatMulID checks mul_mat_id with experts of the IQ types and MXFP4 (gpt-oss's and
// llama-quantize's MXFP4_MOE experts): UploadExperts' chunks carry the grid as UploadWeight's.
func TestIQMatMulID(t *testing.T) {
	d := gputest.Device(t)
	for _, v := range moeVariants(d) {
		t.Run(v.name, func(t *testing.T) {
			useVariant(t, d, v)
			rng := rand.New(rand.NewPCG(99, 100))
			for _, typ := range []gpu.WeightType{gpu.MXFP4, gpu.IQ4_XS, gpu.IQ2_XXS, gpu.IQ1_S} {
				const experts, k, rows = 7, 2, 70
				cols := 3 * typ.BlockSize()
				data, wv := iqData(t, rng, typ, experts*rows, cols)
				w, err := d.UploadExperts("experts", typ, experts, rows, cols, data)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(w.Release)
				for _, tokens := range []int{1, 3, 5, 9, 70} {
					for _, down := range []bool{false, true} {
						checkMatMulID(t, d, rng, v, typ, w, wv, data, rows, cols, experts, k, tokens, down)
					}
				}
			}
		})
	}
}
