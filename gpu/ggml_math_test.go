package gpu

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
	"github.com/wgpu-llama/wgpu-llama/shaders"
)

// TestGGMLMath checks ggml_math.inc's functions on CPU adapters against their Go references
// on random inputs over the range a model's activations take and beyond: ggml_v_expf and its
// silu bit for bit, the C library's tanhf and logf bit for bit (against libm itself), its expf,
// the sigmoid of it, sinf and cosf bit for bit on all
// but a few in a million (where a pair of floats' 45 bits still leave the rounding in doubt).
func TestGGMLMath(t *testing.T) {
	d := cpuAdapter(t)
	rng := rand.New(rand.NewPCG(51, 52))
	const n = 1 << 18
	xs := make([]float32, n)
	for i := range xs {
		switch i % 4 {
		case 0:
			xs[i] = float32(rng.NormFloat64() * 3)
		case 1:
			xs[i] = float32(rng.Float64()*220 - 115) // past both ends of exp's range
		case 2:
			xs[i] = float32(rng.Float64()*40 - 20)
		default:
			xs[i] = float32(rng.NormFloat64() * 1e-3)
		}
	}
	for _, f := range []struct {
		name string
		ref  func(float32) float32
		miss int // values allowed to differ
	}{
		{"exp_v", cpuref.ExpV, 0},
		{"silu_v", cpuref.SiLUV, 0},
		{"exp_c", cpuref.Expf, 2},
		{"tanh_c", LibmTanhf, 0},
		{"sigmoid_c", cpuref.SigmoidC, 2},
		{"log_c(abs(x[i]) + 1e-30)", func(x float32) float32 { return LibmLogf(float32(math.Abs(float64(x))) + 1e-30) }, 2},
		{"sincos_c(x[i]).x", func(x float32) float32 { return float32(math.Sin(float64(x))) }, 2},
		{"sincos_c(x[i]).y", func(x float32) float32 { return float32(math.Cos(float64(x))) }, 2},
	} {
		expr := f.name
		if !strings.Contains(expr, "(") {
			expr += "(x[i])"
		}
		got := evalMathN(t, d, expr, xs, len(xs))
		bad := 0
		for i, x := range xs {
			want := f.ref(x)
			if math.Float32bits(got[i]) != math.Float32bits(want) {
				if bad++; bad <= 3 || math.Abs(float64(want)) > 1e-37 {
					t.Logf("%s(%v) = %v, want %v", f.name, x, got[i], want)
				}
			}
		}
		if bad > f.miss {
			t.Errorf("%s: %d of %d values differ from the reference (at most %d may)", f.name, bad, n, f.miss)
		}
	}
}

// evalMath runs fn of ggml_math.inc over xs on d.
func evalMath(t *testing.T, d *Device, fn string, xs []float32) []float32 {
	t.Helper()
	return evalMathN(t, d, fn+"(x[i])", xs, len(xs))
}

// evalMathN evaluates the WGSL expression expr (of ggml_math.inc's functions, reading x at
// index i) for i < n on d.
func evalMathN(t *testing.T, d *Device, expr string, xs []float32, n int) []float32 {
	t.Helper()
	gm, err := shaders.Source("ggml_math.inc", "CPU_MATH")
	if err != nil {
		t.Fatal(err)
	}
	src := `struct Params { n: u32, zero: u32, }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
` + gm + `
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    ns_zero = p.zero;
    let i = gid.x + gid.y * nwg.x * 64u;
    if (i < p.n) {
        y[i] = ` + expr + `;
    }
}`
	pl, err := d.Pipeline(PipelineKey{Kernel: "ggml_math_test", Variant: expr}, PipelineSpec{
		Source: func() (string, error) { return src, nil }, Entry: "main",
		Bindings: []Access{ReadOnly, ReadWrite}, WorkgroupSize: 64})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 4*len(xs))
	for i, x := range xs {
		binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(x))
	}
	in, err := d.Upload("x", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	out, err := d.NewBuffer("y", uint64(4*n))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	r, err := d.Begin()
	if err != nil {
		t.Fatal(err)
	}
	r.Dispatch(pl, Params(n, 0), r.elementwise(n), in, out)
	b, err := r.SubmitAndRead(out, 0, uint64(4*n))
	if err != nil {
		t.Fatal(err)
	}
	return Float32s(b)
}

// TestFMAOnce checks ggml_math.inc's emulated fused multiply-add (fma1, and fma4's lanes) bit
// for bit against the exactly rounded a*b + c on CPU adapters, on random triples and on ones
// where c nearly cancels a*b.
func TestFMAOnce(t *testing.T) {
	d := cpuAdapter(t)
	rng := rand.New(rand.NewPCG(53, 54))
	const n = 1 << 17
	xs := make([]float32, 3*n)
	for i := 0; i < n; i++ {
		a, b := float32(rng.NormFloat64()), float32(rng.NormFloat64())
		c := float32(rng.NormFloat64() * math.Pow(2, float64(rng.IntN(20)-10)))
		if i%2 == 1 { // cancelling: c is -a*b rounded, nudged by a few ulps
			c = -math.Float32frombits(math.Float32bits(a*b) + uint32(rng.IntN(5)))
		}
		xs[3*i], xs[3*i+1], xs[3*i+2] = a, b, c
	}
	for _, expr := range []string{
		"fma1(x[3u * i], x[3u * i + 1u], x[3u * i + 2u])",
		"fma4(vec4<f32>(x[3u * i]), vec4<f32>(x[3u * i + 1u]), vec4<f32>(x[3u * i + 2u])).z",
	} {
		got := evalMathN(t, d, expr, xs, n)
		bad := 0
		for i := range n {
			if want := cpuref.FMAOnce(xs[3*i], xs[3*i+1], xs[3*i+2]); math.Float32bits(got[i]) != math.Float32bits(want) {
				if bad++; bad <= 3 {
					t.Errorf("%s of (%v, %v, %v) = %v, want %v", expr[:4], xs[3*i], xs[3*i+1], xs[3*i+2], got[i], want)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d differ", expr[:4], bad, n)
		}
	}
}

// cpuAdapter opens a device of its own for a test of ggml_math.inc, which reproduces llama.cpp's
// CPU arithmetic on CPU adapters (skipping elsewhere).
func cpuAdapter(t *testing.T) *Device {
	t.Helper()
	d, err := Open(0)
	if err != nil {
		t.Skipf("no GPU adapter: %v", err)
	}
	t.Cleanup(d.Close)
	if d.Info.Type != "cpu" {
		t.Skip("CPU_MATH reproduces llama.cpp's CPU arithmetic on CPU adapters only")
	}
	return d
}
