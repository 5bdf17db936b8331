package gguf

import (
	"bytes"
	"math"
	"slices"
	"testing"
)

// iqEncodeTypes are the IQ types and MXFP4 that Quantize writes (quant_iq_encode.go), with
// bounds on their relative RMS error for Gaussian rows (measured: IQ4_NL 7.7%, IQ4_XS 7.8%,
// MXFP4 11.5%).
var iqEncodeTypes = map[GGMLType]float64{TypeIQ4_NL: 0.1, TypeIQ4_XS: 0.1, TypeMXFP4: 0.15}

func TestIQEncodeRoundTrip(t *testing.T) {
	for typ, bound := range iqEncodeTypes {
		if !typ.CanQuantize() || !typ.CanDequantize() {
			t.Fatalf("%s: CanQuantize %v, CanDequantize %v", typ, typ.CanQuantize(), typ.CanDequantize())
		}
		for _, scale := range []float64{0.02, 1, 300} {
			x := gaussian(uint64(typ)*7+uint64(scale), 8*512, scale)
			var s errStats
			s.add(roundTrip(t, typ, x), x)
			t.Logf("%-6s scale %g: relative RMS error %.4f%%", typ, scale, 100*s.rel())
			if s.rel() > bound {
				t.Errorf("%s scale %g: relative RMS error %.4g exceeds %.4g", typ, scale, s.rel(), bound)
			}
		}
	}
}

// TestIQEncodeEdgeBlocks mixes all-zero blocks (and, for IQ4_XS, all-zero sub-blocks inside a
// super-block) with random ones, and blocks where one value dwarfs the others: zero blocks of 32
// stay zeros (and MXFP4, which has a zero level, keeps every zero), the huge value comes back
// within the type's precision, nothing is NaN.
func TestIQEncodeEdgeBlocks(t *testing.T) {
	for typ := range iqEncodeTypes {
		x := gaussian(uint64(typ)+99, 4*256, 1)
		zero := func(from, to int) { clear(x[from:to]) }
		zero(256, 512) // a whole super-block (8 IQ4_NL / MXFP4 blocks)
		zero(512, 544) // one sub-block of 32
		zero(600, 640) // straddling two sub-blocks
		const hugeAt, huge = 700, 5000
		x[hugeAt] = huge
		x[900] = -huge / 3
		y := roundTrip(t, typ, x)
		for i, v := range y {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("%s: element %d = %g", typ, i, v)
			}
			zeroBlock := !slices.ContainsFunc(x[i/32*32:i/32*32+32], func(v float32) bool { return v != 0 })
			if x[i] == 0 && (zeroBlock || typ == TypeMXFP4) && v != 0 {
				t.Errorf("%s: zero element %d came back as %g", typ, i, v)
			}
		}
		tol := 0.01 // IQ4: the largest value is a level times the (f16) scale
		if typ == TypeMXFP4 {
			tol = 0.25 // E2M1 has 1 mantissa bit: 5000 is 8 (or 12) times 1024
		}
		for _, i := range []int{hugeAt, 900} {
			if rel := math.Abs(float64(y[i]-x[i])) / math.Abs(float64(x[i])); rel > tol {
				t.Errorf("%s: element %d = %g, want %g within %g%%", typ, i, y[i], x[i], 100*tol)
			}
		}
		// The block holding the huge value keeps its other values within its step.
		bs := 32
		if typ == TypeIQ4_XS {
			bs = 256
		}
		b0 := hugeAt / bs * bs
		for i := b0; i < b0+bs; i++ {
			if math.Abs(float64(y[i]-x[i])) > huge/4 {
				t.Errorf("%s: element %d = %g, want %g", typ, i, y[i], x[i])
			}
		}
	}
}

// TestIQ4EncodeLevels encodes values that are exactly a scale times the IQ4 levels: the 4-bit
// indices must come back in the layout of ggml-common.h (element j < 16 in the low nibble of
// byte j, element 16 + j in its high nibble).
func TestIQ4EncodeLevels(t *testing.T) {
	x := make([]float32, 512)
	want := func(j int) uint8 { return uint8((j + j/32) % 16) }
	for j := range x {
		x[j] = 0.01 * float32(iq4nlValues[want(j)])
	}
	for _, typ := range []GGMLType{TypeIQ4_NL, TypeIQ4_XS} {
		q, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		bs, ts, qsAt := 32, sizeIQ4_NL, 2
		if typ == TypeIQ4_XS {
			bs, ts, qsAt = 256, sizeIQ4_XS, 8
		}
		for j := range x {
			blk := q[j/bs*ts : (j/bs+1)*ts]
			k := j % bs
			b := blk[qsAt+k/32*16+k%16]
			got := b & 0x0F
			if k%32 >= 16 {
				got = b >> 4
			}
			if got != want(j) {
				t.Fatalf("%s: element %d has index %d, want %d", typ, j, got, want(j))
			}
		}
		y := make([]float32, len(x))
		if err := Dequantize(typ, q, y); err != nil {
			t.Fatal(err)
		}
		for j := range x {
			if math.Abs(float64(y[j]-x[j])) > 0.002*math.Abs(float64(x[j]))+1e-7 {
				t.Fatalf("%s: element %d = %g, want %g", typ, j, y[j], x[j])
			}
		}
	}
}

// TestMXFP4EncodeBlock checks one block by hand: the largest magnitude 6 gives the exponent
// byte floor(log2 6) - 2 + 127 = 127, so the levels are the E2M1 values (half of mxfp4Values,
// times 2^(127-127)); a value halfway between two levels takes the first in table order.
func TestMXFP4EncodeBlock(t *testing.T) {
	x := make([]float32, 32)
	copy(x, []float32{6, -3, 0.5, 1.25, -0.25, 5, 100.0 / 1024})
	x[16], x[17], x[31] = -6, 2, -1.75
	q, err := Quantize(TypeMXFP4, x)
	if err != nil {
		t.Fatal(err)
	}
	if q[0] != 127 {
		t.Fatalf("exponent byte %d, want 127", q[0])
	}
	// indices: 6 -> 7 (12/2); -3 -> 13 (-6/2); 0.5 -> 1; 1.25 between 1 and 1.5 -> 2 (1);
	// -0.25 between 0 and -0.5 -> 0; 5 between 4 and 6 -> 6 (4), tie to the first;
	// 0.098 -> 0; zeros -> 0; -6 -> 15; 2 -> 4; -1.75 between -1.5 and -2 -> 11 (-1.5).
	lo := []uint8{7, 13, 1, 2, 0, 6, 0}
	hi := map[int]uint8{0: 15, 1: 4, 15: 11}
	for j := range 16 {
		wl, wh := uint8(0), hi[j]
		if j < len(lo) {
			wl = lo[j]
		}
		if got := q[1+j]; got != wl|wh<<4 {
			t.Errorf("byte %d = %#02x, want %#02x", j, got, wl|wh<<4)
		}
	}
}

// TestIQ4EncodeImatrixMatchesLlamaQuantize checks the encoders with importance weights against
// shared/models/iq/dense256-IQ4_{NL,XS}.gguf, which llama-quantize made with
// --imatrix dense256.imatrix: each IQ4 tensor, encoded from dense256-F32.gguf with the weights
// llama-quantize derives from the imatrix (in_sum2 / counts per column), must give the file's
// bytes. token_embd has no imatrix entry and is encoded without weights, as there.
func TestIQ4EncodeImatrixMatchesLlamaQuantize(t *testing.T) {
	src := openShared(t, "models", "iq", "dense256-F32.gguf")
	im := openShared(t, "models", "iq", "dense256.imatrix")
	weights := func(name string) []float32 {
		sums, ok1 := im.Tensor(name + ".in_sum2")
		counts, ok2 := im.Tensor(name + ".counts")
		if !ok1 || !ok2 {
			return nil
		}
		s, c := tensorF32(t, im, sums), tensorF32(t, im, counts)
		ne0 := len(s) / len(c)
		w := make([]float32, len(s))
		for j, cf := range c {
			count := float32(math.Round(float64(cf))) // lround, then back to float
			for i := range ne0 {
				if count > 0 {
					w[j*ne0+i] = s[j*ne0+i] / count
				} else {
					w[j*ne0+i] = 1
				}
			}
		}
		return w
	}
	for _, typ := range []GGMLType{TypeIQ4_NL, TypeIQ4_XS} {
		f := openShared(t, "models", "iq", "dense256-"+typ.String()+".gguf")
		n, withWeights := 0, 0
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if ti.Type != typ {
				continue
			}
			ri, ok := src.Tensor(ti.Name)
			if !ok {
				t.Fatalf("%s: not in dense256-F32.gguf", ti.Name)
			}
			x := tensorF32(t, src, ri)
			qw := weights(ti.Name)
			rowLen := int(ti.Shape[0])
			if qw != nil && len(qw) != rowLen {
				t.Fatalf("%s: %d weights for rows of %d", ti.Name, len(qw), rowLen)
			}
			size, _ := typ.RowSize(uint64(len(x)))
			got := make([]byte, size)
			if typ == TypeIQ4_NL {
				encodeIQ4NLWeighted(x, got, rowLen, qw)
			} else {
				encodeIQ4XSWeighted(x, got, rowLen, qw)
			}
			if want := f.TensorData(ti); !bytes.Equal(got, want) {
				nb, nbytes := blockDiff(typ, got, want)
				t.Errorf("%s %s (imatrix %v): %d blocks, %d bytes differ from llama-quantize's", typ, ti.Name, qw != nil, nb, nbytes)
			}
			n++
			if qw != nil {
				withWeights++
			}
		}
		if n == 0 || withWeights == 0 {
			t.Errorf("%s: %d tensors checked, %d with weights", typ, n, withWeights)
		}
	}
}

// TestIQEncodeWeightedNil checks that the weighted encoders without weights are the plain ones
// and that weights shared by every row apply per column.
func TestIQEncodeWeightedNil(t *testing.T) {
	x := gaussian(5, 2*512, 1)
	for _, c := range []struct {
		typ GGMLType
		enc func([]float32, []byte, int, []float32)
	}{{TypeIQ4_NL, encodeIQ4NLWeighted}, {TypeIQ4_XS, encodeIQ4XSWeighted}} {
		plain, _ := Quantize(c.typ, x)
		got := make([]byte, len(plain))
		c.enc(x, got, 512, nil)
		if !bytes.Equal(got, plain) {
			t.Errorf("%s: weighted encoder without weights differs from Quantize", c.typ)
		}
		qw := make([]float32, 512)
		for i := range qw {
			qw[i] = float32(1 + i%7)
		}
		c.enc(x, got, 512, qw)
		one := make([]byte, len(plain)/2)
		c.enc(x[512:], one, 512, qw)
		if !bytes.Equal(got[len(plain)/2:], one) {
			t.Errorf("%s: the second row encodes differently alone", c.typ)
		}
		if slices.Equal(got, plain) {
			t.Errorf("%s: weights changed nothing", c.typ)
		}
	}
}
