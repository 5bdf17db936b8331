package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/gpu"
	"github.com/wgpu-llama/wgpu-llama/gpu/cpuref"
)

// TestGELUTableIsGlibcs checks GELUTable's Go port of fdlibm's tanhf against this machine's C
// library on every half in the table's range, where llama.cpp's table takes it from: bit for
// bit where the C library is glibc 2.36's (Debian 12), whose tanhf the port follows.
func TestGELUTableIsGlibcs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the port follows glibc's tanhf")
	}
	// tanhf is reached through GELUTable: compare the table with one built from the C
	// library's tanhf the same way.
	const coefA, sqrt2OverPi = float32(0.044715), float32(0.79788456080286535587989211986876)
	table := gpu.GELUTable()
	bad := 0
	for h := range 1 << 16 {
		x := gguf.F16ToF32(uint16(h))
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			continue
		}
		inner := float32(math.FMA(float64(coefA*x), float64(x), 1))
		want := gguf.F32ToF16(float32(0.5*x) * (1 + gpu.LibmTanhf(sqrt2OverPi*x*inner)))
		if table[h] != want {
			if bad++; bad <= 3 {
				t.Errorf("half %#04x (%v): table %#04x, the C library's tanhf gives %#04x", h, x, table[h], want)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of 65536 entries differ", bad)
	}
}

// TestGLUCPUExact checks the gated units with llama.cpp's arithmetic (CPUMath) bit for bit:
// SiLU as ggml_vec_swiglu_f32 (ggml_v_expf in runs of 8 from a row's start, expf after them;
// rows of a width that leaves a tail) and GELU from its table.
func TestGLUCPUExact(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(15, 16))
	const n, nTok = 203, 3
	gu := randVec(rng, 2*n*nTok)
	for i := range gu {
		gu[i] *= 6
	}
	out := empty(t, d, n*nTok)
	for _, gelu := range []bool{false, true} {
		got := run(t, d, out, n*nTok, func(r *gpu.Recorder) { r.GLU(upload(t, d, gu), out, n, nTok, gelu) })
		table := gpu.GELUTable()
		want := make([]float32, n*nTok)
		for tk := range nTok {
			for c := range n {
				g, u := gu[2*n*tk+c], gu[2*n*tk+n+c]
				var a float32
				switch {
				case gelu && g <= -10:
				case gelu && g >= 10:
					a = g
				case gelu:
					a = gguf.F16ToF32(table[gguf.F32ToF16(g)])
				case c < n&^7:
					a = cpuref.SiLUV(g)
				default:
					a = g / (1 + cpuref.Expf(-g))
				}
				want[tk*n+c] = a * u
			}
		}
		checkBits(t, fmt.Sprintf("glu gelu=%v", gelu), got, want)
	}
}

// TestRoPETable checks rope_kv turning by a RoPE table (CPUMath) bit for bit against the table
// built on the host from the C library's cosf and sinf: every pair x0 cos - x1 sin and x0 sin +
// x1 cos with the first products fused, for both pairings, positions inside the table.
func TestRoPETable(t *testing.T) {
	d := laneOrderDevice(t)
	rng := rand.New(rand.NewPCG(17, 18))
	const nTok, nHead, nKV, headDim, rows = 3, 2, 1, 16, 64
	const row = (nHead + 2*nKV) * headDim
	for _, neox := range []bool{false, true} {
		rope := gpu.Rope{NRot: headDim, FreqBase: 10000, NeoX: neox}
		table, err := d.RoPETable(rope, nil, rows)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(table.Release)
		rope.Table, rope.TableRows = table, rows
		qkv := randVec(rng, nTok*row)
		pos := []int32{0, 7, 63}
		posBuf := uploadU32(t, d, append(pos, 0, 0, 0))
		kc, vc := empty(t, d, rows*nKV*headDim), empty(t, d, rows*nKV*headDim)
		qb := upload(t, d, qkv)
		got := run(t, d, qb, nTok*row, func(r *gpu.Recorder) {
			r.RoPEKV(qb, posBuf, kc, vc, nil, false, nTok, nHead, nKV, headDim, rope)
		})
		ts := float32(math.Pow(10000, float64(float32(-2)/headDim)))
		for tk, p := range pos {
			for h := range nHead {
				for i := range headDim / 2 {
					theta := float32(p)
					for range i {
						theta *= ts
					}
					s, c := gpu.LibmSinCos(theta)
					a, b := 2*i, 2*i+1
					if neox {
						a, b = i, i+headDim/2
					}
					o := tk*row + h*headDim
					x0, x1 := qkv[o+a], qkv[o+b]
					w0 := cpuref.FMAOnce(x0, c, -(x1 * s))
					w1 := cpuref.FMAOnce(x0, s, x1*c)
					if got[o+a] != w0 || got[o+b] != w1 {
						t.Fatalf("neox=%v token %d head %d pair %d: (%v, %v), want (%v, %v)", neox, tk, h, i, got[o+a], got[o+b], w0, w1)
					}
				}
			}
		}
	}
}
