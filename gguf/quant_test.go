package gguf

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

var supportedTypes = []GGMLType{TypeF32, TypeF16, TypeBF16, TypeQ8_0, TypeQ4_0, TypeQ4_1, TypeQ5_0,
	TypeQ5_1, TypeQ2_K, TypeQ3_K, TypeQ4_K, TypeQ5_K, TypeQ6_K, TypeIQ4_NL, TypeIQ4_XS, TypeMXFP4}

func gaussian(seed uint64, n int, scale float64) []float32 {
	rng := rand.New(rand.NewPCG(seed, seed^0x9E3779B97F4A7C15))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	return x
}

func roundTrip(t testing.TB, typ GGMLType, x []float32) []float32 {
	t.Helper()
	q, err := Quantize(typ, x)
	if err != nil {
		t.Fatal(err)
	}
	if size, _ := typ.RowSize(uint64(len(x))); uint64(len(q)) != size {
		t.Fatalf("%s: %d bytes, want %d", typ, len(q), size)
	}
	y := make([]float32, len(x))
	if err := Dequantize(typ, q, y); err != nil {
		t.Fatal(err)
	}
	return y
}

// TestRoundTripRandom quantizes seeded Gaussian rows of several blocks and bounds the error by
// the same per-type limits as llama.cpp's own files.
func TestRoundTripRandom(t *testing.T) {
	for _, typ := range supportedTypes {
		t.Run(typ.String(), func(t *testing.T) {
			x := gaussian(uint64(typ)+1, 8*512, 0.02)
			var s errStats
			s.add(roundTrip(t, typ, x), x)
			bound := maxRelRMS[typ]
			if typ == TypeF16 {
				bound = 0.0004
			}
			t.Logf("%-5s relative RMS error %.4f%%", typ, 100*s.rel())
			if s.rel() > bound {
				t.Errorf("relative RMS error %.4g exceeds %.4g", s.rel(), bound)
			}
		})
	}
}

// TestQuantizeBlocksIndependent checks that a row quantizes as the concatenation of its
// blocks, which is what lets callers quantize tensors row by row or in chunks; the row's
// second block starts with 32 zeros (a whole zero block, or a zero sub-block of 256).
func TestQuantizeBlocksIndependent(t *testing.T) {
	for _, typ := range supportedTypes {
		bs := int(typ.BlockSize())
		x := gaussian(7, 4*max(bs, 32), 1)
		clear(x[max(bs, 32) : max(bs, 32)+32])
		whole, err := Quantize(typ, x)
		if err != nil {
			t.Fatal(err)
		}
		var parts []byte
		for i := 0; i < len(x); i += bs {
			p, err := Quantize(typ, x[i:i+bs])
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, p...)
		}
		if !bytes.Equal(whole, parts) {
			t.Errorf("%s: row and per-block quantization differ", typ)
		}
	}
}

// TestQuantizeSpecialBlocks feeds zeros, constants, a lone spike and huge and tiny magnitudes:
// no NaN may appear and zeros must stay zeros.
func TestQuantizeSpecialBlocks(t *testing.T) {
	const n = 512
	cases := map[string][]float32{
		"zeros":    make([]float32, n),
		"constant": constRow(n, 0.75),
		"negative": constRow(n, -3),
		"spike":    spike(n),
		"huge":     gaussian(11, n, 1e4),
		"tiny":     gaussian(12, n, 1e-6),
		"ramp":     ramp(n),
	}
	for _, typ := range supportedTypes {
		for name, x := range cases {
			y := roundTrip(t, typ, x)
			for i, v := range y {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("%s %s: element %d = %g", typ, name, i, v)
				}
				if name == "zeros" && v != 0 {
					t.Fatalf("%s zeros: element %d = %g", typ, i, v)
				}
			}
			if name == "spike" && math.Abs(float64(y[100])-1) > 0.01 {
				t.Errorf("%s spike: element 100 = %g, want 1 within 1%%", typ, y[100])
			}
		}
	}
}

func constRow(n int, v float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = v
	}
	return x
}

func spike(n int) []float32 {
	x := make([]float32, n)
	x[100] = 1
	return x
}

func ramp(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i-n/2) / float32(n)
	}
	return x
}

func TestQuantLengthErrors(t *testing.T) {
	for _, typ := range supportedTypes {
		bs := int(typ.BlockSize())
		if bs > 1 {
			_, err := Quantize(typ, make([]float32, bs+1))
			if err == nil || !strings.Contains(err.Error(), typ.String()) || !strings.Contains(err.Error(), "block size") {
				t.Errorf("%s: Quantize of %d elements: %v", typ, bs+1, err)
			}
			err = Dequantize(typ, make([]byte, typ.TypeSize()), make([]float32, bs-1))
			if err == nil || !strings.Contains(err.Error(), "not a multiple of the block size") {
				t.Errorf("%s: Dequantize to %d elements: %v", typ, bs-1, err)
			}
		}
		for _, extra := range []int{-1, 1} {
			data := make([]byte, int(typ.TypeSize())*2+extra)
			err := Dequantize(typ, data, make([]float32, 2*bs))
			if err == nil || !strings.Contains(err.Error(), "data is") || !strings.Contains(err.Error(), typ.String()) {
				t.Errorf("%s: Dequantize of %d bytes: %v", typ, len(data), err)
			}
		}
		if err := Dequantize(typ, nil, nil); err != nil {
			t.Errorf("%s: empty Dequantize: %v", typ, err)
		}
		if q, err := Quantize(typ, nil); err != nil || len(q) != 0 {
			t.Errorf("%s: empty Quantize: %v, %d bytes", typ, err, len(q))
		}
	}
}

func TestUnsupportedTypes(t *testing.T) {
	for _, typ := range supportedTypes {
		if !typ.CanDequantize() || !typ.CanQuantize() {
			t.Errorf("%s: CanDequantize %v CanQuantize %v", typ, typ.CanDequantize(), typ.CanQuantize())
		}
	}
	for _, typ := range iqTypes {
		if slices.Contains(supportedTypes, typ) {
			continue
		}
		if !typ.CanDequantize() || typ.CanQuantize() {
			t.Errorf("%s: CanDequantize %v CanQuantize %v, want decode only", typ, typ.CanDequantize(), typ.CanQuantize())
		}
		_, err := Quantize(typ, make([]float32, typ.BlockSize()))
		checkUnsupported(t, typ, "quantize", err)
	}
	for _, typ := range []GGMLType{TypeTQ1_0, TypeTQ2_0, TypeNVFP4, TypeQ8_K, TypeQ8_1, TypeI8, TypeF64, GGMLType(4), GGMLType(1000)} {
		if typ.CanDequantize() || typ.CanQuantize() {
			t.Errorf("%s: reported as supported", typ)
		}
		bs := max(int(typ.BlockSize()), 1)
		derr := Dequantize(typ, make([]byte, typ.TypeSize()), make([]float32, bs))
		_, qerr := Quantize(typ, make([]float32, bs))
		checkUnsupported(t, typ, "dequantize", derr)
		checkUnsupported(t, typ, "quantize", qerr)
	}
}

// checkUnsupported checks err is ErrUnsupportedType naming the type and, after "supported: ",
// exactly the types that op handles, the always-supported ones first.
func checkUnsupported(t *testing.T, typ GGMLType, op string, err error) {
	t.Helper()
	if !errors.Is(err, ErrUnsupportedType) {
		t.Fatalf("%s %s: %v, want ErrUnsupportedType", op, typ, err)
	}
	msg := err.Error()
	head := "type " + typ.String() + " not supported yet (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K"
	i := strings.Index(msg, head)
	if i < 0 || !strings.HasSuffix(msg, ")") {
		t.Fatalf("%s message %q lacks %q", op, msg, head)
	}
	listed := strings.Split(msg[strings.Index(msg, "(supported: ")+len("(supported: "):len(msg)-1], ", ")
	for id := GGMLType(0); id < 64; id++ {
		can := id.CanDequantize()
		if op == "quantize" {
			can = id.CanQuantize()
		}
		if can != slices.Contains(listed, id.String()) {
			t.Errorf("%s message %q: %s listed %v, handled %v", op, msg, id, !can, can)
		}
	}
}

// TestNearestInt checks the float-trick rounding against round-half-to-even.
func TestNearestInt(t *testing.T) {
	for _, f := range []float32{0, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 4194303, -4194303, 3.7, -3.7, 1e-30} {
		if got, want := nearestInt(f), int32(math.RoundToEven(float64(f))); got != want {
			t.Errorf("nearestInt(%g) = %d, want %d", f, got, want)
		}
	}
}

func benchData(typ GGMLType) ([]float32, []byte) {
	x := gaussian(42, 64*1024, 0.02)
	q, err := Quantize(typ, x)
	if err != nil {
		panic(err)
	}
	return x, q
}

// BenchmarkDequantize reports throughput in MB/s of float32 output.
func BenchmarkDequantize(b *testing.B) {
	for _, typ := range supportedTypes {
		b.Run(typ.String(), func(b *testing.B) {
			x, q := benchData(typ)
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if err := Dequantize(typ, q, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkQuantize reports throughput in MB/s of float32 input.
func BenchmarkQuantize(b *testing.B) {
	for _, typ := range supportedTypes {
		b.Run(typ.String(), func(b *testing.B) {
			x, _ := benchData(typ)
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				if _, err := Quantize(typ, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
