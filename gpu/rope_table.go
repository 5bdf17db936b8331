package gpu

/*
#cgo LDFLAGS: -lm
#include <math.h>
static float libm_sinf(float x) { return sinf(x); }
static float libm_cosf(float x) { return cosf(x); }
static float libm_powf(float x, float y) { return powf(x, y); }
static float libm_tanhf(float x) { return tanhf(x); }
static float libm_logf(float x) { return logf(x); }
*/
import "C"

import (
	"encoding/binary"
	"fmt"
	"math"
)

// powf is the C library's powf, as llama.cpp's CPU rope takes its theta_scale from it.
func powf(x, y float32) float32 { return float32(C.libm_powf(C.float(x), C.float(y))) }

// LibmTanhf is the C library's tanhf (GELUTable's reference, which llama.cpp's table takes).
func LibmTanhf(x float32) float32 { return float32(C.libm_tanhf(C.float(x))) }

// LibmLogf is the C library's logf (ggml_math.inc's log_c reproduces it).
func LibmLogf(x float32) float32 { return float32(C.libm_logf(C.float(x))) }

// LibmSinCos is the C library's sinf and cosf of x (RoPETable's).
func LibmSinCos(x float32) (float32, float32) {
	return float32(C.libm_sinf(C.float(x))), float32(C.libm_cosf(C.float(x)))
}

// RoPETableMaxBytes bounds a RoPE table (RoPETable): past it, rope_kv computes its angles.
const RoPETableMaxBytes = 64 << 20

// RoPETable is rope's cos and sin for every pair at positions 0 .. rows-1, as ggml's CPU rope
// takes them (ggml_rope_cache_init, rope_yarn): the angle the position times theta_scale once
// per pair before it (each product rounded), divided by the pair's frequency factor (factors,
// or none), scaled and blended as YaRN asks, and the C library's cosf and sinf of it times the
// magnitude scale. Computed here with this machine's C library, which llama.cpp's CPU backend
// calls too: glibc's sinf and cosf differ from the correctly rounded values on 1.3% of angles,
// which no kernel of ours reproduces. A CPU adapter reproducing llama.cpp (CPUMath) turns
// keys and queries by it (Rope.Table). Layout: (rows, NRot/2) pairs of f32 (cos, sin).
// Vision-mode M-RoPE has no table.
func (d *Device) RoPETable(rope Rope, factors []float32, rows int) (*Buffer, error) {
	pairs := rope.NRot / 2
	switch {
	case rope.Vision:
		return nil, fmt.Errorf("gpu: rope table: vision-mode M-RoPE turns by its own angles")
	case factors != nil && len(factors) != pairs:
		return nil, fmt.Errorf("gpu: rope table: %d frequency factors for %d pairs", len(factors), pairs)
	case rows < 1 || pairs < 1 || rows*pairs*8 > RoPETableMaxBytes:
		return nil, fmt.Errorf("gpu: rope table: %d positions of %d pairs (at most %d bytes)", rows, pairs, RoPETableMaxBytes)
	}
	scale, attn := rope.scales()
	y := rope.YaRN
	mscale := attn
	if y.ExtFactor != 0 { // rope_yarn's mscale *= 1.0f + 0.1f * logf(1.0f / freq_scale), contracted
		lf := float32(C.libm_logf(C.float(1 / scale)))
		mscale *= float32(math.FMA(float64(float32(0.1)), float64(lf), 1))
	}
	ts := rope.thetaScale()
	b := make([]byte, rows*pairs*8)
	for pos := range rows {
		theta := float32(pos)
		for i := range pairs {
			extrap := theta
			if factors != nil {
				extrap = theta / factors[i]
			}
			th := scale * extrap
			if y.ExtFactor != 0 {
				yv := (float32(i) - y.CorrLo) / max(0.001, y.CorrHi-y.CorrLo)
				ramp := (1 - min(1, max(0, yv))) * y.ExtFactor
				th = float32(math.FMA(float64(th), float64(1-ramp), float64(extrap*ramp)))
			}
			o := (pos*pairs + i) * 8
			sn, cs := LibmSinCos(th)
			binary.LittleEndian.PutUint32(b[o:], math.Float32bits(cs*mscale))
			binary.LittleEndian.PutUint32(b[o+4:], math.Float32bits(sn*mscale))
			theta *= ts
		}
	}
	return d.Upload("rope table", b)
}
