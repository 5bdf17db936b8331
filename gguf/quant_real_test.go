package gguf

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// maxRelRMS bounds the relative RMS error (RMS of the error over RMS of the weights) of each
// type on the Gaussian synth256 weights and on stories260K, with headroom over the measured
// values (in the comments: synth256 / stories260K; a decoder with a wrong layout lands near
// 100% or above).
var maxRelRMS = map[GGMLType]float64{
	TypeF32:  0,      // norms: stored as is
	TypeF16:  0.0004, // 0 / 0.020% (stories260K's ffn_down was F32)
	TypeBF16: 0.0025, // 0.17%
	TypeQ8_0: 0.008,  // 0.53% / 0.55%
	TypeQ6_K: 0.025,  // 1.78%
	TypeQ5_1: 0.05,   // 3.78% / 3.80%
	TypeQ5_0: 0.055,  // 4.26% / 4.29%
	TypeQ5_K: 0.048,  // 3.61%
	TypeQ4_1: 0.105,  // 7.82% / 8.20%
	TypeQ4_0: 0.11,   // 8.59% / 8.50%
	TypeQ4_K: 0.095,  // 7.13%
	TypeQ3_K: 0.20,   // 15.1%
	TypeQ2_K: 0.38,   // 29.6%
	// Encoded by quantize_iq4_nl, quantize_iq4_xs and quantize_mxfp4's searches (7.7%, 11.5% on
	// Gaussian rows).
	TypeIQ4_NL: 0.1,
	TypeIQ4_XS: 0.1,
	TypeMXFP4:  0.15,
}

func openShared(t *testing.T, parts ...string) *File {
	t.Helper()
	f, err := Open(shareddata.Path(t, parts...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tensorF32 decodes an F32 (or any supported) tensor of f.
func tensorF32(t *testing.T, f *File, ti *TensorInfo) []float32 {
	t.Helper()
	out := make([]float32, ti.NumElements())
	if err := Dequantize(ti.Type, f.TensorData(ti), out); err != nil {
		t.Fatalf("%s: %v", ti.Name, err)
	}
	return out
}

// errStats accumulates squared errors per type.
type errStats struct{ errSq, refSq float64 }

func (s *errStats) add(got, want []float32) {
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		s.errSq += d * d
		s.refSq += float64(want[i]) * float64(want[i])
	}
}

func (s errStats) rel() float64 {
	if s.refSq == 0 {
		return 0
	}
	return math.Sqrt(s.errSq / s.refSq)
}

// blockDiff counts the blocks of type typ that differ between a and b.
func blockDiff(typ GGMLType, a, b []byte) (blocks, bytesDiff int) {
	bs := int(typ.TypeSize())
	for off := 0; off < len(a); off += bs {
		if !bytes.Equal(a[off:off+bs], b[off:off+bs]) {
			blocks++
			for i := off; i < off+bs; i++ {
				if a[i] != b[i] {
					bytesDiff++
				}
			}
		}
	}
	return blocks, bytesDiff
}

// checkQuantFile dequantizes every tensor of the quantized file against the same tensor of
// the F32 reference (error bounds per type) and re-quantizes the reference, which must give
// the file's bytes exactly: llama-quantize without an imatrix runs quantize_row_*_ref.
func checkQuantFile(t *testing.T, ref, f *File) map[GGMLType]*errStats {
	stats := map[GGMLType]*errStats{}
	ours := map[GGMLType]*errStats{}
	type mismatch struct{ tensors, blocks, totalBlocks, bytes int }
	diffs := map[GGMLType]*mismatch{}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		ri, ok := ref.Tensor(ti.Name)
		if !ok || !slices.Equal(ri.Shape, ti.Shape) {
			t.Fatalf("%s: not in the reference or another shape", ti.Name)
		}
		want := tensorF32(t, ref, ri)
		got := tensorF32(t, f, ti)
		if stats[ti.Type] == nil {
			stats[ti.Type], ours[ti.Type], diffs[ti.Type] = &errStats{}, &errStats{}, &mismatch{}
		}
		stats[ti.Type].add(got, want)
		round := map[GGMLType]func(float32) float32{
			TypeF32:  func(v float32) float32 { return v },
			TypeF16:  func(v float32) float32 { return F16ToF32(F32ToF16(v)) },
			TypeBF16: func(v float32) float32 { return BF16ToF32(F32ToBF16(v)) },
		}[ti.Type]
		for k, v := range want {
			if round != nil && got[k] != round(v) {
				t.Fatalf("%s[%d] = %g, want %g (%s of %g)", ti.Name, k, got[k], round(v), ti.Type, v)
			}
		}
		q, err := Quantize(ti.Type, want)
		if err != nil {
			t.Fatalf("%s: %v", ti.Name, err)
		}
		data := f.TensorData(ti)
		d := diffs[ti.Type]
		d.totalBlocks += len(data) / int(ti.Type.TypeSize())
		if !bytes.Equal(q, data) {
			nb, nbytes := blockDiff(ti.Type, q, data)
			d.tensors++
			d.blocks += nb
			d.bytes += nbytes
			back := make([]float32, len(want))
			if err := Dequantize(ti.Type, q, back); err != nil {
				t.Fatal(err)
			}
			ours[ti.Type].add(back, want)
		}
	}
	for typ, s := range stats {
		rel := s.rel()
		t.Logf("%-5s relative RMS error %.4f%%", typ, 100*rel)
		if bound, ok := maxRelRMS[typ]; !ok || rel > bound {
			t.Errorf("%s: relative RMS error %.4g exceeds %.4g", typ, rel, bound)
		}
		if d := diffs[typ]; d.tensors > 0 {
			t.Errorf("%s: Quantize differs from llama.cpp in %d tensors, %d of %d blocks, %d bytes (our error %.4f%%, llama.cpp's %.4f%%)",
				typ, d.tensors, d.blocks, d.totalBlocks, d.bytes, 100*ours[typ].rel(), 100*rel)
		}
	}
	return stats
}

func TestQuantSynth256(t *testing.T) {
	ref := openShared(t, "models", "quant", "synth256-F32.gguf")
	for _, name := range []string{"F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M",
		"Q4_1", "Q4_0", "Q3_K_M", "Q3_K_S", "Q2_K"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := openShared(t, "models", "quant", fmt.Sprintf("synth256-%s.gguf", name))
			stats := checkQuantFile(t, ref, f)
			// synth256's weights are float16 values: F16 must reproduce them exactly.
			if s := stats[TypeF16]; s != nil && s.errSq != 0 {
				t.Errorf("F16: squared error %g, want exactly 0", s.errSq)
			}
		})
	}
}

func TestQuantStories260K(t *testing.T) {
	ref := openShared(t, "models", "stories260K.gguf")
	for _, name := range []string{"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q4_K_M", "Q6_K"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := openShared(t, "models", "quant", fmt.Sprintf("stories260K-%s.gguf", name))
			checkQuantFile(t, ref, f)
		})
	}
}
