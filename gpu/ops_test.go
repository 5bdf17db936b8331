package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/gpu/gputest"
)

const (
	tolF32   = 1e-4
	tolQuant = 1e-3
	tolF16   = 1e-2 // half-precision arithmetic
)

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func upload(t testing.TB, d *gpu.Device, v []float32) *gpu.Buffer {
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

// withBase appends each token's first cache row (the same base for all) to its positions,
// the layout the RoPE/KV and attention kernels read.
func withBase(pos []int32, base int32) []int32 {
	out := append([]int32(nil), pos...)
	for range pos {
		out = append(out, base)
	}
	return out
}

func empty(t testing.TB, d *gpu.Device, n int) *gpu.Buffer {
	t.Helper()
	b, err := d.NewBuffer("out", uint64(n*4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// allTypes is every weight format the kernels read.
var allTypes = []gpu.WeightType{gpu.F32, gpu.F16, gpu.BF16, gpu.Q8_0, gpu.Q4_0, gpu.Q4_1, gpu.Q5_0, gpu.Q5_1,
	gpu.Q2_K, gpu.Q3_K, gpu.Q4_K, gpu.Q5_K, gpu.Q6_K}

// weight quantizes a random matrix to typ with the reference quantizer, uploads it, and returns
// the values the reference dequantizer decodes, so the CPU reference uses exactly the weights
// the GPU sees.
func weight(t testing.TB, d *gpu.Device, rng *rand.Rand, typ gpu.WeightType, rows, cols int) (gpu.Weight, []float32) {
	t.Helper()
	gt, ok := gguf.ParseGGMLType(typ.String())
	if !ok {
		t.Fatalf("no ggml type %s", typ)
	}
	w := randVec(rng, rows*cols)
	data, err := gguf.Quantize(gt, w)
	if err != nil {
		t.Fatal(err)
	}
	if err := gguf.Dequantize(gt, data, w); err != nil {
		t.Fatal(err)
	}
	gw, err := d.UploadWeight("w", typ, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Release)
	return gw, w
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

// tolFor is the bound on ||gpu - ref|| / ||ref||: f32 accumulation over exactly the same
// (dequantized) weights, so the only differences are summation order.
func tolFor(typ gpu.WeightType) float64 {
	if typ == gpu.F32 {
		return tolF32
	}
	return tolQuant
}

func TestGetRows(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for _, typ := range allTypes {
		cols := max(typ.BlockSize(), 32) * 2
		w, wv := weight(t, d, rng, typ, 50, cols)
		ids := []int32{3, 49, 0, 7, 7}
		out := empty(t, d, len(ids)*cols)
		got := run(t, d, out, len(ids)*cols, func(r *gpu.Recorder) { r.GetRowsScaled(w, uploadU32(t, d, ids), out, len(ids), 1.5) })
		want := cpuref.GetRows(wv, cols, ids)
		for i := range want {
			want[i] *= 1.5
		}
		check(t, "get_rows "+typ.String(), got, want, tolFor(typ))
	}
}

// TestRMSNorm covers both workgroup widths (CPU adapters' 64, GPUs' 256) against the exact
// norm and against llama.cpp's roundings of it, bit for bit on CPU adapters.
func TestRMSNorm(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		for _, shape := range [][2]int{{64, 5}, {172, 1}, {1000, 3}, {2880, 9}, {4096, 17}} {
			n, rows := shape[0], shape[1]
			x, w := randVec(rng, n*rows), randVec(rng, n)
			out := empty(t, d, n*rows)
			got := run(t, d, out, n*rows, func(r *gpu.Recorder) { r.RMSNorm(upload(t, d, x), upload(t, d, w), out, n, rows, 1e-5) })
			what := fmt.Sprintf("rms_norm %dx%d barrier-free=%v", rows, n, bf)
			check(t, what, got, cpuref.RMSNorm(x, w, n, 1e-5), tolF32)
			checkGGMLRounding(t, d, what, got, cpuref.RMSNormGGML(x, w, n, 1e-5))
			// RMSNormAdd: the same values added to a residual stream, bit for bit what a
			// separate add of RMSNorm's output gives.
			res := randVec(rng, n*rows)
			stream := upload(t, d, res)
			sum := run(t, d, stream, n*rows, func(r *gpu.Recorder) { r.RMSNormAdd(upload(t, d, x), upload(t, d, w), stream, n, rows, 1e-5) })
			for i := range sum {
				if want := res[i] + got[i]; sum[i] != want {
					t.Fatalf("%s, added: element %d is %v, the separate add gives %v", what, i, sum[i], want)
				}
			}
		}
	}
}

// checkGGMLRounding checks a norm's outputs against llama.cpp's roundings of them: bit for bit
// on CPU adapters (correctly rounded division and square root, as the C library's), within
// tolF32 elsewhere (WGSL lets GPUs round both less exactly).
func checkGGMLRounding(t *testing.T, d *gpu.Device, what string, got, want []float32) {
	t.Helper()
	if d.Info.Type != "cpu" {
		check(t, what+" (llama.cpp's rounding)", got, want, tolF32)
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: element %d is %v, llama.cpp rounds to %v (%d of %d differ)", what, i, got[i], want[i], countDiff(got, want), len(got))
			return
		}
	}
}

func countDiff(a, b []float32) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestMatMul covers the matrix-vector, tiled and barrier-free kernels, each weight type, with
// and without the fused residual add.
func TestMatMul(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, f, s bool) { d.BarrierFree, d.F16Math, d.SubgroupMath = v, f, s }(d.BarrierFree, d.F16Math, d.SubgroupMath)
	defer func() { d.RowsPerInvocation = 0 }()
	d.BarrierFree, d.F16Math, d.SubgroupMath = false, false, false
	t.Run("barrier-free=false", func(t *testing.T) { testMatMul(t, d, 1) })
	// The barrier-free kernel with 1 and 4 rows per invocation: rows past the weight's
	// last (all the test shapes leave some) are read clamped and not stored.
	d.BarrierFree = true
	for _, rows := range []int{1, 4} {
		d.RowsPerInvocation = rows
		t.Run(fmt.Sprintf("barrier-free=true/rows=%d", rows), func(t *testing.T) { testMatMul(t, d, 1) })
	}
	d.RowsPerInvocation = 0
	if d.Features.Subgroups {
		d.BarrierFree, d.SubgroupMath = false, true
		t.Run("subgroups", func(t *testing.T) { testMatMul(t, d, 1) })
		d.SubgroupMath = false
	} else {
		t.Log("adapter lacks subgroups: subgroup kernels not tested here")
	}
	if !d.Features.ShaderF16 {
		t.Log("adapter lacks shader-f16: half-precision kernels not tested here")
		return
	}
	d.BarrierFree, d.F16Math = false, true
	t.Run("f16-math", func(t *testing.T) { testMatMul(t, d, tolF16/tolQuant) })
}

// testMatMul checks every type; tolScale widens the bounds for half-precision arithmetic.
func testMatMul(t *testing.T, d *gpu.Device, tolScale float64) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, typ := range allTypes {
		// Row lengths in blocks; row and token counts that are not multiples of the tiles.
		bs := max(typ.BlockSize(), 4)
		for _, c := range []struct{ rows, cols, tokens, row0 int }{
			{64, 2 * bs, 1, 0}, {29, bs, 2, 1}, {43, 3 * bs, 3, 2}, {23, 2 * bs, 4, 0}, {37, bs, 8, 0}, // matrix-vector
			{19, 1280, 2, 0}, {21, 1280, 1, 0}, // the cooperative kernel's unrolled loop and its remainder
			{11, 2304, 1, 0},                    // Q4_K's chunks: more than a row's 64 invocations take in one step
			{33, 2 * bs, 9, 0}, {70, bs, 37, 1}, // tiled (GPUs), matmul_rows (CPU adapters)
			{27, 2 * bs, 6, 1}, // matmul_rows: a partial group of 8 tokens
		} {
			if typ == gpu.F32 || typ == gpu.F16 || typ == gpu.BF16 {
				c.cols = 4 * (c.cols + 40) // odd multiples of 4, not of the 16-wide tile
			}
			// set, add, and (for the LoRA types) add scaled
			modes := []string{"set", "add"}
			if typ == gpu.F32 || typ == gpu.F16 || typ == gpu.BF16 {
				modes = append(modes, "scaled")
			}
			for _, mode := range modes {
				name := fmt.Sprintf("%s %dx%d t=%d row0=%d %s", typ, c.rows, c.cols, c.tokens, c.row0, mode)
				w, wv := weight(t, d, rng, typ, c.rows, c.cols)
				x := randVec(rng, (c.row0+c.tokens)*c.cols)
				y0 := randVec(rng, c.tokens*c.rows)
				out := upload(t, d, y0)
				got := run(t, d, out, len(y0), func(r *gpu.Recorder) {
					if mode == "scaled" {
						r.MatMulScaledAdd(w, gpu.Acts{X: upload(t, d, x), Row0: c.row0}, c.tokens, out, c.rows, 0, -0.375)
					} else {
						r.MatMul(w, upload(t, d, x), c.row0, c.tokens, out, mode == "add")
					}
				})
				want := cpuref.MatMul(wv, c.rows, c.cols, x[c.row0*c.cols:], c.tokens)
				switch mode {
				case "add":
					want = cpuref.Add(y0, want)
				case "scaled":
					for i := range want {
						want[i] = y0[i] + -0.375*want[i]
					}
				}
				check(t, name, got, want, tolFor(typ)*tolScale)
			}
		}
	}
}

// f16Round returns v rounded to half precision, as an f16 cache stores it.
func f16Round(v []float32) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = gguf.F16ToF32(gguf.F32ToF16(x))
	}
	return out
}

// cacheFloats reads n values of a KV cache in either format.
func cacheFloats(t *testing.T, d *gpu.Device, b *gpu.Buffer, n int, f16 bool) []float32 {
	t.Helper()
	if !f16 {
		raw, err := d.Read(b, 0, uint64(n*4))
		if err != nil {
			t.Fatal(err)
		}
		return gpu.Float32s(raw)
	}
	raw, err := d.Read(b, 0, uint64(n*2))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = gguf.F16ToF32(uint16(raw[2*i]) | uint16(raw[2*i+1])<<8)
	}
	return out
}

// TestRoPEKV checks the fused step after the QKV projection: bias added, q rotated in place,
// k rotated into the cache and v copied into it, at the tokens' positions, for both cache
// formats and both pairings (llama's adjacent, GPT-NeoX's halves).
func TestRoPEKV(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(7, 8))
	const nTok, nHead, nKV, headDim, nCtx = 5, 4, 2, 16, 64
	const row = (nHead + 2*nKV) * headDim
	for _, f16 := range []bool{false, true} {
		for _, neox := range []bool{false, true} {
			for _, nRot := range []int{16, 8} {
				name := fmt.Sprintf("f16=%v neox=%v n_rot=%d", f16, neox, nRot)
				qkv := randVec(rng, nTok*row)
				var bias []float32
				var biasBuf *gpu.Buffer
				if neox { // exercise the fused bias on one of the variants
					bias = randVec(rng, row)
					biasBuf = upload(t, d, bias)
				}
				pos := []int32{0, 1, 2, 40, 63}
				var q, k, v []float32
				for tk := 0; tk < nTok; tk++ {
					r := append([]float32(nil), qkv[tk*row:(tk+1)*row]...)
					for i := range bias {
						r[i] += bias[i]
					}
					q = append(q, r[:nHead*headDim]...)
					k = append(k, r[nHead*headDim:(nHead+nKV)*headDim]...)
					v = append(v, r[(nHead+nKV)*headDim:]...)
				}
				rope := cpuref.RoPE
				if neox {
					rope = cpuref.RoPENeoX
				}
				rope(q, pos, nHead, headDim, nRot, 10000)
				rope(k, pos, nKV, headDim, nRot, 10000)

				buf := upload(t, d, qkv)
				elt := 4
				if f16 {
					elt = 2
				}
				base := int32(0)
				if neox { // a sequence whose cache rows start further in
					base = 5
				}
				kc := empty(t, d, (nCtx+int(base))*nKV*headDim*elt/4)
				vc := empty(t, d, (nCtx+int(base))*nKV*headDim*elt/4)
				got := run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
					r.RoPEKV(buf, uploadU32(t, d, withBase(pos, base)), kc, vc, biasBuf, f16, nTok, nHead, nKV, headDim, gpu.Rope{NRot: nRot, FreqBase: 10000, NeoX: neox})
				})
				var gotQ []float32
				for tk := 0; tk < nTok; tk++ {
					gotQ = append(gotQ, got[tk*row:tk*row+nHead*headDim]...)
				}
				check(t, "rope q "+name, gotQ, q, tolF32)
				kAll := cacheFloats(t, d, kc, (nCtx+int(base))*nKV*headDim, f16)
				vAll := cacheFloats(t, d, vc, (nCtx+int(base))*nKV*headDim, f16)
				var gotK, gotV []float32
				for _, p := range pos {
					o := int(base+p) * nKV * headDim
					gotK = append(gotK, kAll[o:o+nKV*headDim]...)
					gotV = append(gotV, vAll[o:o+nKV*headDim]...)
				}
				tol := tolF32
				if f16 {
					tol = 1e-3 // half precision storage
				}
				check(t, "rope k to cache "+name, gotK, k, tol)
				check(t, "v to cache "+name, gotV, v, tol)
			}
		}
	}
}

// TestHeadNorm checks QK-norm: each query and key head vector RMS-normalised with its own
// weight, value heads untouched, or (vNorm, Gemma 4) normalised with no weight; against the
// exact norm and bit for bit against llama.cpp's roundings on CPU adapters.
func TestHeadNorm(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(23, 24))
	const nTok, nHead, nKV, headDim = 3, 4, 2, 26
	const row = (nHead + 2*nKV) * headDim
	ones := make([]float32, headDim)
	for i := range ones {
		ones[i] = 1
	}
	for _, vNorm := range []bool{false, true} {
		qkv := randVec(rng, nTok*row)
		qn, kn := randVec(rng, headDim), randVec(rng, headDim)
		want, ggml := slices.Clone(qkv), slices.Clone(qkv)
		for tk := 0; tk < nTok; tk++ {
			for _, out := range []struct {
				v    []float32
				norm func(x, w []float32, n int, eps float32) []float32
			}{{want, cpuref.RMSNorm}, {ggml, cpuref.RMSNormGGML}} {
				q := out.v[tk*row : tk*row+nHead*headDim]
				k := out.v[tk*row+nHead*headDim : tk*row+(nHead+nKV)*headDim]
				copy(q, out.norm(q, qn, headDim, 1e-6))
				copy(k, out.norm(k, kn, headDim, 1e-6))
				if vNorm {
					v := out.v[tk*row+(nHead+nKV)*headDim : (tk+1)*row]
					copy(v, out.norm(v, ones, headDim, 1e-6))
				}
			}
		}
		buf := upload(t, d, qkv)
		got := run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.HeadNorm(buf, upload(t, d, qn), upload(t, d, kn), nTok, nHead, nKV, headDim, 1e-6, vNorm)
		})
		what := fmt.Sprintf("head norm (values normalised: %v)", vNorm)
		check(t, what, got, want, tolF32)
		checkGGMLRounding(t, d, what, got, ggml)
	}
}

// TestAttention runs the cooperative (and flash) kernels, the barrier-free token-lane kernel
// and, with token lanes off, the barrier-free head-major kernels (chunked past the loop budget).
func TestAttention(t *testing.T) {
	d := gputest.Device(t)
	defer func(v, l bool) { d.BarrierFree, d.TokenLanes = v, l }(d.BarrierFree, d.TokenLanes)
	for _, c := range []struct{ bf, lanes bool }{{false, false}, {true, true}, {true, false}} {
		d.BarrierFree, d.TokenLanes = c.bf, c.lanes
		t.Run(fmt.Sprintf("barrier-free=%v/token-lanes=%v", c.bf, c.lanes), func(t *testing.T) { testAttention(t, d) })
	}
}

// attnCase is one attention shape: window -1 marks the non-causal case (every token sees all
// keys).
type attnCase struct {
	nHead, nKV, headDim, nCtx int
	softCap                   float32
	window                    int
	tokens                    int // prompt tokens at the end of the cache; 0 means 3
	seqs                      int // AttnParams.Sequences (0: not given)
}

func testAttention(t *testing.T, d *gpu.Device) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, c := range []attnCase{{8, 4, 8, 200, 0, 0, 0, 0}, {4, 4, 64, 70, 0, 0, 0, 0}, {6, 2, 128, 130, 0, 0, 0, 0}, {2, 1, 256, 10, 0, 0, 0, 0}, {4, 2, 64, 1000, 0, 0, 0, 0},
		{4, 2, 16, 300, 2, 0, 0, 0}, {4, 2, 16, 300, 0, 40, 0, 0}, {4, 2, 16, 700, 1.5, 300, 0, 0}, {4, 4, 16, 40, 0, -1, 0, 0},
		// Decoding at long contexts on CPU adapters: scores precomputed (a half group too).
		{4, 2, 26, 600, 0, 0, 0, 0}, {8, 2, 64, 4100, 0, 0, 0, 0},
		// A head of 4n + 2 dimensions: the barrier-free kernel's last group is half full.
		{4, 2, 6, 300, 0, 0, 0, 0}, {2, 1, 10, 90, 1.5, 50, 0, 0},
		// Past llvmpipe's loop limit the barrier-free kernel runs in chunks (AttentionChunked).
		{4, 2, 128, 1500, 0, 0, 0, 0}, {2, 1, 64, 2600, 0, 900, 0, 0},
		// Prompts of 16 tokens and more of one sequence: token-lane blocks (the last partly
		// filled) whatever the head, heads of 4n + 2, soft-capping, a window, all keys.
		{4, 2, 64, 60, 0, 0, 20, 1}, {3, 1, 40, 50, 1.5, 0, 17, 1}, {2, 2, 22, 40, 0, 30, 16, 1}, {4, 4, 16, 40, 0, -1, 20, 1}} {
		for _, f16 := range []bool{false, true} {
			checkAttention(t, d, rng, c, f16)
		}
	}
}

// checkAttention runs Attention and AttentionSplit for three prompt tokens at the end of a
// cache of c.nCtx rows and compares both with the reference.
func checkAttention(t *testing.T, d *gpu.Device, rng *rand.Rand, c attnCase, f16 bool) {
	t.Helper()
	// Prompt tokens at the end of the filled cache, each attending causally to its
	// prefix; q rows carry 5 extra floats, as the fused qkv rows carry k and v.
	nt := c.tokens
	if nt == 0 {
		nt = 3
	}
	var pos []int32
	for i := nt; i > 0; i-- {
		pos = append(pos, int32(c.nCtx-i))
	}
	qWidth := c.nHead * c.headDim
	qStride := qWidth + 5
	qRows := randVec(rng, len(pos)*qStride)
	var q []float32
	for i := range pos {
		q = append(q, qRows[i*qStride:i*qStride+qWidth]...)
	}
	k := randVec(rng, c.nCtx*c.nKV*c.headDim)
	v := randVec(rng, c.nCtx*c.nKV*c.headDim)
	if f16 {
		k, v = f16Round(k), f16Round(v)
	}
	// The sequence's rows start after two rows of another sequence, which must be ignored.
	const base = 2
	other := randVec(rng, base*c.nKV*c.headDim)
	kAll, vAll := append(append([]float32(nil), other...), k...), append(append([]float32(nil), other...), v...)
	kb, vb := upload(t, d, kAll), upload(t, d, vAll)
	if f16 {
		kb, vb = uploadF16(t, d, kAll), uploadF16(t, d, vAll)
	}
	posBuf := uploadU32(t, d, withBase(pos, base))
	ap := gpu.AttnParams{Scale: 0.3, SoftCap: c.softCap, Window: c.window, MaxKeys: c.nCtx, Sequences: c.seqs,
		State: empty(t, d, gpu.AttentionStateSize(len(pos), c.nHead, c.headDim))}
	if d.BarrierFree && c.nCtx > 1000 && !d.AttentionChunked(c.nCtx, c.headDim) {
		t.Errorf("%d keys of head_dim %d: not chunked", c.nCtx, c.headDim)
	}
	refPos := pos
	if c.window < 0 { // window -1 marks the non-causal case: every token sees all keys
		ap.Window, ap.AllKeys = 0, c.nCtx
		refPos = make([]int32, nt)
		for i := range refPos {
			refPos[i] = int32(c.nCtx - 1)
		}
	}
	want := cpuref.AttentionOpts(q, k, v, refPos, c.nHead, c.nKV, c.headDim, ap.Scale, c.softCap, ap.Window)
	wantSeq := want
	if f16 && d.BarrierFree {
		// The barrier-free kernel rounds as llama.cpp's flash attention does.
		wantSeq = cpuref.AttentionF16(q, k, v, refPos, c.nHead, c.nKV, c.headDim, ap.Scale, c.softCap, ap.Window)
		if e := cpuref.RelErr(wantSeq, want); e > 1e-2 {
			t.Errorf("f16 rounding moved the reference by %.3g", e)
		}
	}
	out := empty(t, d, len(q))
	got := run(t, d, out, len(q), func(r *gpu.Recorder) {
		r.Attention(upload(t, d, qRows), kb, vb, posBuf, out, f16, qStride, len(pos), c.nHead, c.nKV, c.headDim, ap)
	})
	check(t, fmt.Sprintf("attention %+v f16=%v", c, f16), got, wantSeq, tolF32)
	if d.BarrierFree && !d.TokenLanes && ap.AllKeys == 0 && c.nCtx >= gpu.PrescoreFrom {
		// Decoding's precomputed scores (AttnParams.Scores) change nothing, to the last bit.
		pre := ap
		pre.Scores = empty(t, d, gpu.AttentionScoresSize(len(pos), c.nHead, c.nCtx))
		out3 := empty(t, d, len(q))
		scored := run(t, d, out3, len(q), func(r *gpu.Recorder) {
			r.Attention(upload(t, d, qRows), kb, vb, posBuf, out3, f16, qStride, len(pos), c.nHead, c.nKV, c.headDim, pre)
		})
		if !slices.Equal(scored, got) {
			t.Errorf("attention %+v f16=%v: prescored differs from the kernel that recomputes its scores (%d of %d)", c, f16, countDiff(scored, got), len(got))
		}
	}

	part := empty(t, d, gpu.AttentionSplitSize(len(pos), c.nHead, c.headDim, c.nCtx))
	out2 := empty(t, d, len(q))
	got = run(t, d, out2, len(q), func(r *gpu.Recorder) {
		r.AttentionSplit(upload(t, d, qRows), kb, vb, posBuf, part, out2, f16, qStride, len(pos), c.nHead, c.nKV, c.headDim, c.nCtx, ap)
	})
	check(t, fmt.Sprintf("split attention %+v f16=%v", c, f16), got, want, tolF32)
}

func TestSiLUMulAndAdd(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(13, 14))
	const n, nTok = 1000, 3
	gu := randVec(rng, 2*n*nTok)
	var g, u []float32
	for tk := 0; tk < nTok; tk++ {
		g = append(g, gu[2*n*tk:2*n*tk+n]...)
		u = append(u, gu[2*n*tk+n:2*n*(tk+1)]...)
	}
	out := empty(t, d, n*nTok)
	got := run(t, d, out, n*nTok, func(r *gpu.Recorder) { r.GLU(upload(t, d, gu), out, n, nTok, false) })
	check(t, "silu_mul", got, cpuref.SiLUMul(g, u), tolF32)
	got = run(t, d, out, n*nTok, func(r *gpu.Recorder) { r.GLU(upload(t, d, gu), out, n, nTok, true) })
	check(t, "gelu_mul", got, cpuref.GELUMulF16(g, u), tolF32)
	if e := cpuref.RelErr(cpuref.GELUMulF16(g, u), cpuref.GELUMul(g, u)); e > 1e-3 {
		t.Errorf("geglu's f16 table moves it by %.3g from the exact GELU", e)
	}

	x := randVec(rng, n)
	for i := range x {
		x[i] *= 40 // well into tanh's curve
	}
	xb := upload(t, d, x)
	got = run(t, d, xb, n, func(r *gpu.Recorder) { r.SoftCap(xb, n, 30) })
	check(t, "softcap", got, cpuref.SoftCap(x, 30), tolF32)

	a, b := randVec(rng, n), randVec(rng, n)
	ab := upload(t, d, a)
	got = run(t, d, ab, n, func(r *gpu.Recorder) { r.Add(ab, upload(t, d, b), n) })
	check(t, "add", got, cpuref.Add(a, b), tolF32)

}

// TestLoRA checks the fused LoRA kernel against B·(A·x) in Go for 1, 3 and 8 tokens, ranks
// and widths that are not multiples of the workgroup, into a column range of wider rows, with
// the activations as they are and rounded to halves and bfloat16.
func TestLoRA(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(33, 34))
	for _, c := range []struct {
		tokens, k, rank, out, col, stride int
		act                               gpu.ActQuant
	}{{1, 64, 8, 70, 0, 70, gpu.ActNone}, {3, 172, 24, 130, 5, 140, gpu.ActNone}, {8, 40, 64, 65, 65, 130, gpu.ActNone}, {2, 64, 4, 64, 0, 64, gpu.ActF16}, {2, 64, 4, 64, 0, 64, gpu.ActBF16}} {
		x, a, b := randVec(rng, (1+c.tokens)*c.k), randVec(rng, c.rank*c.k), randVec(rng, c.out*c.rank)
		y0 := randVec(rng, c.tokens*c.stride)
		yb := upload(t, d, y0)
		got := run(t, d, yb, len(y0), func(r *gpu.Recorder) {
			r.LoRA(upload(t, d, x), 1, c.tokens, c.k, upload(t, d, a), upload(t, d, b), c.rank, c.out, yb, c.stride, c.col, 0.75, c.act)
		})
		round := func(v []float32) []float32 { return v }
		switch c.act {
		case gpu.ActF16:
			round = cpuref.ActF16
		case gpu.ActBF16:
			round = cpuref.ActBF16
		}
		tv := round(cpuref.MatMul(a, c.rank, c.k, round(x[c.k:]), c.tokens))
		yv := cpuref.MatMul(b, c.out, c.rank, tv, c.tokens)
		want := append([]float32(nil), y0...)
		for tok := range c.tokens {
			for r := range c.out {
				want[tok*c.stride+c.col+r] += 0.75 * yv[tok*c.out+r]
			}
		}
		check(t, fmt.Sprintf("lora %+v", c), got, want, 1e-5)
	}
}

// TestLoRAFused checks the LoRA split over an RMS norm and a product: RMSNormLoRA's rows and
// A products, and MatMulLoRA adding scale·B·T over a column range in the epilogue of every
// matrix-vector kernel (GPUs' cooperative one, CPU adapters' row-per-thread one and
// matmul_rows), for weights of several types, with and without accumulating.
func TestLoRAFused(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(35, 36))
	const k, rows, rank, col, width = 64, 70, 12, 9, 50
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		for _, typ := range []gpu.WeightType{gpu.F32, gpu.Q8_0, gpu.Q4_K} {
			cols := max(k, typ.BlockSize())
			for _, tokens := range []int{1, 3, 6} {
				if !bf && tokens > gpu.MatVecMaxTokens {
					continue
				}
				x, nw := randVec(rng, tokens*cols), randVec(rng, cols)
				a, b := randVec(rng, rank*cols), randVec(rng, width*rank)
				xn := empty(t, d, tokens*cols)
				tb := empty(t, d, tokens*rank)
				gotXN := run(t, d, xn, tokens*cols, func(r *gpu.Recorder) {
					r.RMSNormLoRA(upload(t, d, x), upload(t, d, nw), xn, cols, tokens, 1e-5, &gpu.LoRAInput{A: upload(t, d, a), T: tb, Rank: rank}, nil)
				})
				wantXN := cpuref.RMSNorm(x, nw, cols, 1e-5)
				check(t, "rms_norm lora rows", gotXN, wantXN, tolF32)
				wantT := cpuref.MatMul(a, rank, cols, wantXN, tokens)
				check(t, "rms_norm lora products", run(t, d, tb, tokens*rank, func(*gpu.Recorder) {}), wantT, 1e-5)
				for _, acc := range []bool{false, true} {
					w, wv := weight(t, d, rng, typ, rows, cols)
					y0 := randVec(rng, tokens*rows)
					yb := upload(t, d, y0)
					got := run(t, d, yb, len(y0), func(r *gpu.Recorder) {
						r.MatMulLoRA(w, gpu.Acts{X: xn}, tokens, yb, rows, 0, acc, gpu.LoRAEpilogue{B: upload(t, d, b), T: tb, Rank: rank, Col: col, Width: width, Scale: -1.5})
					})
					want := cpuref.MatMul(wv, rows, cols, gotXN, tokens)
					if acc {
						want = cpuref.Add(y0, want)
					}
					bt := cpuref.MatMul(b, width, rank, wantT, tokens)
					for tok := range tokens {
						for c := range width {
							want[tok*rows+col+c] += -1.5 * bt[tok*width+c]
						}
					}
					check(t, fmt.Sprintf("matmul lora %s t=%d barrier-free=%v add=%v", typ, tokens, bf, acc), got, want, tolFor(typ))
				}
			}
		}
	}
}

// TestRMSNormLoRAResidual checks the residual adapter term an RMS norm adds to its input in
// place before normalising, alone and with the next group's products, for 1 and 3 rows.
func TestRMSNormLoRAResidual(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(37, 38))
	const n, k, rank, nextRank = 72, 100, 9, 6
	for _, rows := range []int{1, 3} {
		for _, next := range []bool{false, true} {
			x, w, in := randVec(rng, rows*n), randVec(rng, n), randVec(rng, rows*k)
			ra, rb, a := randVec(rng, rank*k), randVec(rng, (n-4)*rank), randVec(rng, nextRank*n)
			xb, out, tb := upload(t, d, x), empty(t, d, rows*n), empty(t, d, rows*nextRank)
			var li *gpu.LoRAInput
			if next {
				li = &gpu.LoRAInput{A: upload(t, d, a), T: tb, Rank: nextRank}
			}
			res := &gpu.LoRAResidual{In: upload(t, d, in), A: upload(t, d, ra), B: upload(t, d, rb), K: k, Rank: rank, Col: 3, Width: n - 4, Scale: 0.6}
			got := run(t, d, out, rows*n, func(r *gpu.Recorder) { r.RMSNormLoRA(xb, upload(t, d, w), out, n, rows, 1e-5, li, res) })
			want := append([]float32(nil), x...)
			term := cpuref.MatMul(rb, n-4, rank, cpuref.MatMul(ra, rank, k, in, rows), rows)
			for r := range rows {
				for c := range n - 4 {
					want[r*n+3+c] += 0.6 * term[r*(n-4)+c]
				}
			}
			name := fmt.Sprintf("rows=%d next=%v", rows, next)
			check(t, "residual lora into x "+name, run(t, d, xb, rows*n, func(*gpu.Recorder) {}), want, 1e-5)
			norm := cpuref.RMSNorm(want, w, n, 1e-5)
			check(t, "residual lora norm "+name, got, norm, 1e-5)
			if next {
				check(t, "residual lora next products "+name, run(t, d, tb, rows*nextRank, func(*gpu.Recorder) {}), cpuref.MatMul(a, nextRank, n, norm, rows), 1e-5)
			}
		}
	}
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

func uploadF16(t *testing.T, d *gpu.Device, v []float32) *gpu.Buffer {
	t.Helper()
	h := make([]uint16, len(v))
	for i, x := range v {
		h[i] = gguf.F32ToF16(x)
	}
	b, err := d.Upload("f16", gpu.Bytes(h))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

func TestDispatchErrors(t *testing.T) {
	d := gputest.Device(t)
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	a := empty(t, d, 4)
	r.Attention(a, a, a, a, a, false, 24, 1, 3, 2, 8, gpu.AttnParams{Scale: 1}) // 3 heads over 2 kv heads
	if err := r.Submit(); err == nil {
		t.Fatal("expected an error for an invalid head grouping")
	}
}

// TestSplitWeight lowers the binding limit so weights split into several buffers, as an 8B
// model's embedding table does on lavapipe, and checks the products and lookups are unchanged,
// including into a column range of a wider output row (the fused qkv layout).
func TestSplitWeight(t *testing.T) {
	d := gputest.Device(t)
	defer func(v uint64, bf bool) { d.MaxBinding, d.BarrierFree = v, bf }(d.MaxBinding, d.BarrierFree)
	rng := rand.New(rand.NewPCG(17, 18))
	const rows, cols = 100, 64
	for _, typ := range []gpu.WeightType{gpu.F32, gpu.Q8_0} {
		d.MaxBinding = 40 * 4 * cols // at most 40 f32 rows a chunk
		w, wv := weight(t, d, rng, typ, rows, cols)
		if typ == gpu.F32 && len(w.Chunks) != 3 {
			t.Fatalf("%s: %d chunks, want 3", typ, len(w.Chunks))
		}
		for _, bf := range []bool{false, true} {
			d.BarrierFree = bf
			for _, nTok := range []int{1, 20} {
				const stride, col = rows + 7, 3
				x := randVec(rng, nTok*cols)
				y0 := randVec(rng, nTok*stride)
				out := upload(t, d, y0)
				got := run(t, d, out, len(y0), func(r *gpu.Recorder) { r.MatMulAt(w, gpu.Acts{X: upload(t, d, x)}, nTok, out, stride, col, false) })
				want := append([]float32(nil), y0...)
				ref := cpuref.MatMul(wv, rows, cols, x, nTok)
				for tk := 0; tk < nTok; tk++ {
					copy(want[tk*stride+col:], ref[tk*rows:(tk+1)*rows])
				}
				tol := tolFor(typ)
				if d.F16Math && !bf {
					tol = tolQuant // the tiled kernel's f16 tiles, on GPUs
				}
				check(t, fmt.Sprintf("split %s barrier-free=%v tokens=%d", typ, bf, nTok), got, want, tol)
			}
		}
		ids := []int32{0, 39, 40, 99, 41}
		out := empty(t, d, len(ids)*cols)
		got := run(t, d, out, len(ids)*cols, func(r *gpu.Recorder) { r.GetRows(w, uploadU32(t, d, ids), out, len(ids)) })
		check(t, "split get_rows "+typ.String(), got, cpuref.GetRows(wv, cols, ids), tolFor(typ))
	}
}

// TestRoPELinearScaling checks FreqScale: positions 2p at scale 0.5 rotate as positions p.
func TestRoPELinearScaling(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(25, 26))
	const nHead, nKV, headDim = 2, 1, 8
	const row = (nHead + 2*nKV) * headDim
	qkv := randVec(rng, 3*row)
	rot := func(pos []int32, scale float32) []float32 {
		buf := upload(t, d, qkv)
		kc, vc := empty(t, d, 64*nKV*headDim), empty(t, d, 64*nKV*headDim)
		return run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.RoPEKV(buf, uploadU32(t, d, withBase(pos, 0)), kc, vc, nil, false, 3, nHead, nKV, headDim, gpu.Rope{NRot: headDim, FreqBase: 10000, FreqScale: scale})
		})
	}
	check(t, "linear rope scaling", rot([]int32{2, 10, 40}, 0.5), rot([]int32{1, 5, 20}, 1), 1e-6)
}

// TestRoPEFactors checks frequency factors: dividing every angle by 2 with factors equals
// halving the positions.
func TestRoPEFactors(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(27, 28))
	const nHead, nKV, headDim = 2, 1, 8
	const row = (nHead + 2*nKV) * headDim
	qkv := randVec(rng, 3*row)
	factors := upload(t, d, []float32{2, 2, 2, 2})
	rot := func(pos []int32, f *gpu.Buffer) []float32 {
		buf := upload(t, d, qkv)
		kc, vc := empty(t, d, 64*nKV*headDim), empty(t, d, 64*nKV*headDim)
		return run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.RoPEKV(buf, uploadU32(t, d, withBase(pos, 0)), kc, vc, nil, false, 3, nHead, nKV, headDim, gpu.Rope{NRot: headDim, FreqBase: 10000, NeoX: true, Factors: f})
		})
	}
	check(t, "rope factors", rot([]int32{2, 10, 40}, factors), rot([]int32{1, 5, 20}, nil), 1e-6)
}

// TestRoPEMulti checks M-RoPE (Qwen2-VL's text sections and its ViT's vision mode) against
// ggml's formula in Go, with a bias, on positions whose components differ; with every
// component equal to the position, the text sections are plain NeoX RoPE.
func TestRoPEMulti(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(31, 32))
	const nTok, nHead, nKV, headDim, nCtx = 5, 3, 1, 24, 16
	const row = (nHead + 2*nKV) * headDim
	mpos := []int32{0, 0, 0, 0, 4, 4, 5, 0, 4, 5, 4, 0, 4, 6, 7, 0, 9, 9, 9, 0}
	rows := []int32{0, 1, 2, 3, 4}
	for _, c := range []struct {
		name     string
		sections [4]int
		vision   bool
		nRot     int
	}{{"text", [4]int{2, 5, 5, 0}, false, headDim}, {"text partial", [4]int{1, 2, 2, 1}, false, 16}, {"vision", [4]int{6, 6, 6, 6}, true, headDim}} {
		qkv, bias := randVec(rng, nTok*row), randVec(rng, row)
		var q, k []float32
		for tk := range nTok {
			r := append([]float32(nil), qkv[tk*row:(tk+1)*row]...)
			for i := range bias {
				r[i] += bias[i]
			}
			q = append(q, r[:nHead*headDim]...)
			k = append(k, r[nHead*headDim:(nHead+nKV)*headDim]...)
		}
		cpuref.RoPEMulti(q, mpos, nHead, headDim, c.nRot, 10000, c.sections, c.vision)
		cpuref.RoPEMulti(k, mpos, nKV, headDim, c.nRot, 10000, c.sections, c.vision)
		buf := upload(t, d, qkv)
		kc, vc := empty(t, d, nCtx*nKV*headDim), empty(t, d, nCtx*nKV*headDim)
		got := run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.RoPEKV(buf, uploadU32(t, d, withBase(rows, 0)), kc, vc, upload(t, d, bias), false, nTok, nHead, nKV, headDim,
				gpu.Rope{NRot: c.nRot, FreqBase: 10000, NeoX: true, MPos: uploadU32(t, d, mpos), Sections: c.sections, Vision: c.vision})
		})
		var gotQ []float32
		for tk := range nTok {
			gotQ = append(gotQ, got[tk*row:tk*row+nHead*headDim]...)
		}
		check(t, "m-rope q "+c.name, gotQ, q, 1e-5)
		check(t, "m-rope k "+c.name, cacheFloats(t, d, kc, nCtx*nKV*headDim, false)[:nTok*nKV*headDim], k, 1e-5)
	}
	// text positions (all components equal) turn as NeoX RoPE
	same := []int32{3, 3, 3, 0, 8, 8, 8, 0}
	x := randVec(rng, 2*row)
	want := append([]float32(nil), x...)
	cpuref.RoPEMulti(want, same, (nHead + 2*nKV), headDim, headDim, 10000, [4]int{2, 5, 5, 0}, false)
	plain := append([]float32(nil), x...)
	cpuref.RoPENeoX(plain, []int32{3, 8}, nHead+2*nKV, headDim, headDim, 10000)
	check(t, "m-rope of text positions is neox", want, plain, 1e-6)
}

// TestRoPEYaRN checks YaRN scaling against ggml's formula in Go, both pairings.
func TestRoPEYaRN(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(29, 30))
	const nTok, nHead, nKV, headDim, nCtx = 3, 2, 1, 32, 8192
	const row = (nHead + 2*nKV) * headDim
	lo, hi := gpu.YaRNCorrDims(headDim, 4096, 10000, 32, 1)
	y := gpu.YaRN{ExtFactor: 1, AttnFactor: 1, CorrLo: lo, CorrHi: hi}
	for _, neox := range []bool{false, true} {
		qkv := randVec(rng, nTok*row)
		pos := []int32{5, 3000, 8000}
		var q []float32
		for tk := 0; tk < nTok; tk++ {
			q = append(q, qkv[tk*row:tk*row+nHead*headDim]...)
		}
		cpuref.RoPEYaRN(q, pos, nHead, headDim, headDim, neox, 10000, 0.25, y.ExtFactor, y.AttnFactor, y.CorrLo, y.CorrHi)
		buf := upload(t, d, qkv)
		kc, vc := empty(t, d, nCtx*nKV*headDim), empty(t, d, nCtx*nKV*headDim)
		got := run(t, d, buf, len(qkv), func(r *gpu.Recorder) {
			r.RoPEKV(buf, uploadU32(t, d, withBase(pos, 0)), kc, vc, nil, false, nTok, nHead, nKV, headDim, gpu.Rope{NRot: headDim, FreqBase: 10000, FreqScale: 0.25, NeoX: neox, YaRN: y})
		})
		var gotQ []float32
		for tk := 0; tk < nTok; tk++ {
			gotQ = append(gotQ, got[tk*row:tk*row+nHead*headDim]...)
		}
		check(t, fmt.Sprintf("yarn neox=%v", neox), gotQ, q, 1e-4)
	}
}

// TestLayerNormAndBiasAct checks BERT's LayerNorm and the bias (+GELU) epilogue.
func TestLayerNormAndBiasAct(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(31, 32))
	for _, shape := range [][2]int{{64, 5}, {384, 3}, {100, 1}} {
		n, rows := shape[0], shape[1]
		x, w, b := randVec(rng, n*rows), randVec(rng, n), randVec(rng, n)
		out := empty(t, d, n*rows)
		got := run(t, d, out, n*rows, func(r *gpu.Recorder) {
			r.LayerNorm(upload(t, d, x), upload(t, d, w), upload(t, d, b), out, n, rows, 1e-12)
		})
		check(t, fmt.Sprintf("layer_norm %dx%d", rows, n), got, cpuref.LayerNorm(x, w, b, n, 1e-12), tolF32)

		for _, gelu := range []bool{false, true} {
			yb := upload(t, d, x)
			got = run(t, d, yb, n*rows, func(r *gpu.Recorder) { r.BiasAct(yb, upload(t, d, b), n, rows, gelu) })
			want := make([]float32, len(x))
			for i := range x {
				want[i] = x[i] + b[i%n]
			}
			if gelu {
				want = cpuref.GELU(want)
			}
			check(t, fmt.Sprintf("bias gelu=%v", gelu), got, want, tolF32)
		}
		// the f16-table GELU, over values that reach both clamps
		big := make([]float32, len(x))
		for i := range x {
			big[i] = x[i] * 12
		}
		yb := upload(t, d, big)
		got = run(t, d, yb, n*rows, func(r *gpu.Recorder) { r.BiasGELUF16(yb, upload(t, d, b), n, rows) })
		want := make([]float32, len(big))
		for i := range big {
			want[i] = big[i] + b[i%n]
		}
		want = cpuref.GELUF16(want)
		var off int
		for i := range want {
			if got[i] != want[i] {
				if off < 3 {
					t.Logf("in %v got %v want %v", big[i]+b[i%n], got[i], want[i])
				}
				off++
			}
		}
		// tanh's last bit may differ between the driver and Go, moving an f16 result by one
		if off > len(want)/100 {
			t.Errorf("bias gelu f16 %dx%d: %d of %d values differ from the table's", rows, n, off, len(want))
		}
		check(t, "bias gelu f16", got, want, 2e-3)

		// the f16-table quick GELU, over the same wide range
		yb = upload(t, d, big)
		got = run(t, d, yb, n*rows, func(r *gpu.Recorder) { r.BiasGELUQuickF16(yb, upload(t, d, b), n, rows) })
		for i := range big {
			want[i] = big[i] + b[i%n]
		}
		want = cpuref.GELUQuickF16(want)
		off = 0
		for i := range want {
			if got[i] != want[i] {
				off++
			}
		}
		if off > len(want)/100 {
			t.Errorf("bias gelu quick f16 %dx%d: %d of %d values differ from the table's", rows, n, off, len(want))
		}
		check(t, "bias gelu quick f16", got, want, 2e-3)
	}
}

// TestAvgPool pools random grids at widths that are not multiples of the workgroup, by 2 and
// by 4 (gemma3's projectors), and a kernel the size of the grid.
func TestAvgPool(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(41, 42))
	for _, c := range []struct{ n, g, s int }{{37, 8, 2}, {70, 8, 4}, {5, 6, 3}, {129, 4, 4}} {
		x := randVec(rng, c.g*c.g*c.n)
		m := (c.g / c.s) * (c.g / c.s) * c.n
		out := empty(t, d, m)
		got := run(t, d, out, m, func(r *gpu.Recorder) { r.AvgPool(upload(t, d, x), out, c.n, c.g, c.s) })
		check(t, fmt.Sprintf("avg_pool n=%d g=%d s=%d", c.n, c.g, c.s), got, cpuref.AvgPool(x, c.n, c.g, c.s), tolF32)
	}
}

// TestProfile checks that a profiled pass gives the same result as an unprofiled one and
// charges every dispatch to its kernel family.
func TestProfile(t *testing.T) {
	d := gputest.Device(t)
	rng := rand.New(rand.NewPCG(9, 9))
	w, _ := weight(t, d, rng, gpu.Q4_K, 40, 512)
	x, norm := upload(t, d, randVec(rng, 2*512)), upload(t, d, randVec(rng, 40))
	mid := upload(t, d, make([]float32, 80))
	pass := func(out *gpu.Buffer) func(r *gpu.Recorder) {
		return func(r *gpu.Recorder) {
			r.MatMul(w, x, 0, 2, mid, false)
			r.RMSNorm(mid, norm, out, 40, 2, 1e-5)
			r.MatMul(w, x, 0, 2, out, true)
		}
	}
	plain := upload(t, d, make([]float32, 80))
	want := run(t, d, plain, 80, pass(plain))
	defer func(v bool) { d.Features.TimestampQuery = v }(d.Features.TimestampQuery)
	for _, stamps := range []bool{true, false} {
		if stamps && !d.Features.TimestampQuery {
			t.Log("adapter lacks timestamp-query: GPU-timed profile not tested here")
			continue
		}
		d.Features.TimestampQuery = stamps
		d.Profile = gpu.NewProfile()
		profiled := upload(t, d, make([]float32, 80))
		got := run(t, d, profiled, 80, pass(profiled))
		prof := d.Profile
		d.Profile = nil
		check(t, fmt.Sprintf("profiled pass (timestamps %v)", stamps), got, want, 0)
		mv, rms := prof.Kernels["matvec"], prof.Kernels["rms_norm"]
		if prof.GPUTimed != stamps || len(prof.Kernels) != 2 || mv == nil || rms == nil || mv.Calls != 2 || rms.Calls != 1 ||
			mv.Time <= 0 || mv.Bytes != 2*uint64(w.Bytes()) {
			t.Fatalf("timestamps %v: profile %+v (GPU-timed %v)", stamps, prof.Kernels, prof.GPUTimed)
		}
		var b strings.Builder
		if err := prof.Write(&b); err != nil || !strings.Contains(b.String(), " matvec ") || !strings.Contains(b.String(), " total ") {
			t.Fatalf("table %q %v", b.String(), err)
		}
	}
}

// TestAddBiased checks the residual add with a projection's bias against the two dispatches
// it replaces (BiasAct, then Add) and the Go sum, bit for bit, at a width that is no multiple
// of the workgroup, on both kinds of kernels.
func TestAddBiased(t *testing.T) {
	d := gputest.Device(t)
	defer func(v bool) { d.BarrierFree = v }(d.BarrierFree)
	rng := rand.New(rand.NewPCG(91, 92))
	for _, bf := range []bool{false, true} {
		d.BarrierFree = bf
		const width, rows = 37, 7
		a, b, bias := randVec(rng, width*rows), randVec(rng, width*rows), randVec(rng, width)
		stream := upload(t, d, a)
		got := run(t, d, stream, width*rows, func(r *gpu.Recorder) { r.AddBiased(stream, upload(t, d, b), upload(t, d, bias), width*rows, width) })
		twoStream, twoB := upload(t, d, a), upload(t, d, b)
		two := run(t, d, twoStream, width*rows, func(r *gpu.Recorder) {
			r.BiasAct(twoB, upload(t, d, bias), width, rows, false)
			r.Add(twoStream, twoB, width*rows)
		})
		for i := range got {
			if want := a[i] + (b[i] + bias[i%width]); got[i] != want || two[i] != want {
				t.Fatalf("barrier-free=%v element %d: %v, the two dispatches %v, want %v", bf, i, got[i], two[i], want)
			}
		}
	}
}
