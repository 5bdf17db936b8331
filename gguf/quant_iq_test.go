package gguf

import (
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// iqTypes are the types of quant_iq*.go. They decode; those supportedTypes lists encode too.
var iqTypes = []GGMLType{TypeIQ4_NL, TypeIQ4_XS, TypeMXFP4, TypeIQ3_S, TypeIQ3_XXS, TypeIQ2_S,
	TypeIQ2_XS, TypeIQ2_XXS, TypeIQ1_M, TypeIQ1_S}

// randomIQBlocks is n blocks of type t of random bytes with a sane scale (an f16 d of about
// 2^-8, an MXFP4 exponent near 2^-8), the scale fields placed as the type keeps them: every
// other byte of these types is a valid quant, sign or sub-block scale whatever its value.
func randomIQBlocks(seed uint64, t GGMLType, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 77))
	ts := int(t.TypeSize())
	out := make([]byte, n*ts)
	for i := range out {
		out[i] = byte(rng.Uint32())
	}
	for b := range n {
		x := out[b*ts : (b+1)*ts]
		d := F32ToF16(float32(rng.NormFloat64()) * 0x1p-8)
		switch t {
		case TypeMXFP4:
			x[0] = byte(120 + rng.IntN(16))
		case TypeIQ1_M: // d's nibbles at the top of the four scale words
			for i := range 4 {
				x[48+2*i+1] = x[48+2*i+1]&0x0F | byte(d>>(4*i)&0xF)<<4
			}
		default:
			binary.LittleEndian.PutUint16(x, d)
		}
	}
	return out
}

func TestE8M0ToF32Half(t *testing.T) {
	for e := range 256 {
		got := e8m0ToF32Half(uint8(e))
		if want := float32(math.Ldexp(1, e-128)); got != want {
			t.Errorf("e8m0ToF32Half(%d) = %g, want 2^%d", e, got, e-128)
		}
	}
}

// TestIQDecodeFinite decodes random blocks of every IQ type: finite values, zero for a zero
// scale, and each block's values a fixed set of levels times its scale.
func TestIQDecodeFinite(t *testing.T) {
	for _, typ := range iqTypes {
		const n = 8
		data := randomIQBlocks(uint64(typ)+100, typ, n)
		y := make([]float32, n*int(typ.BlockSize()))
		if err := Dequantize(typ, data, y); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		nonzero := 0
		for i, v := range y {
			if !isFinite(v) {
				t.Fatalf("%s element %d = %g", typ, i, v)
			}
			if v != 0 {
				nonzero++
			}
		}
		if nonzero < len(y)/2 {
			t.Errorf("%s: only %d of %d values non-zero", typ, nonzero, len(y))
		}
	}
}

// TestDequantizeLikeLlamaCpp turns each shared IQ and MXFP4 model into F32 with llama.cpp's
// own dequantizers (llama-quantize --allow-requantize FILE OUT F32) and checks that Dequantize
// gives every tensor bit for bit. Between them the files hold every IQ type and MXFP4 (see
// the shared models/iq/README.md).
func TestDequantizeLikeLlamaCpp(t *testing.T) {
	dir := shareddata.Dir()
	if dir == "" {
		t.Skipf("shared test data not configured: set %s to the shared/ directory (e.g. ../shared)", shareddata.EnvVar)
	}
	tool := filepath.Join(dir, "llama.cpp", "llama-quantize")
	if _, err := os.Stat(tool); err != nil {
		t.Skipf("llama.cpp's llama-quantize is not in the shared data: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "models", "iq", "dense256-*.gguf"))
	moe, _ := filepath.Glob(filepath.Join(dir, "models", "moe", "*-MXFP4_MOE.gguf"))
	files = slices.DeleteFunc(append(files, moe...), func(p string) bool { return strings.HasSuffix(p, "-F32.gguf") })
	if len(files) == 0 {
		t.Skipf("no IQ or MXFP4 models in %s/models", dir)
	}
	seen := map[GGMLType]int{}
	checked := 0 // files checked to the end
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "f32.gguf")
			cmd := exec.Command(tool, "--allow-requantize", path, out, "F32")
			if msg, err := cmd.CombinedOutput(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.ExitCode() == 126 || ee.ExitCode() == 127 {
					t.Skipf("llama-quantize does not run here: %v\n%s", err, msg)
				}
				t.Fatalf("llama-quantize: %v\n%s", err, msg)
			}
			src, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			ref, err := Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer ref.Close()
			for i := range src.Tensors {
				ti := &src.Tensors[i]
				ri, ok := ref.Tensor(ti.Name)
				if !ok || ri.Type != TypeF32 || !slices.Equal(ri.Shape, ti.Shape) {
					t.Fatalf("%s: not an F32 tensor of the same shape in llama-quantize's output", ti.Name)
				}
				want := tensorF32(t, ref, ri)
				got := tensorF32(t, src, ti)
				for k := range want {
					if math.Float32bits(got[k]) != math.Float32bits(want[k]) {
						t.Fatalf("%s (%s) element %d: %g (%#08x), llama.cpp %g (%#08x)", ti.Name, ti.Type, k,
							got[k], math.Float32bits(got[k]), want[k], math.Float32bits(want[k]))
					}
				}
				seen[ti.Type]++
			}
			checked++
		})
	}
	t.Logf("tensors checked by type: %v", seen)
	if checked == len(files) && len(files) >= 12 { // 9 in models/iq, 3 in models/moe
		for _, typ := range iqTypes {
			if seen[typ] == 0 {
				t.Errorf("no %s tensor in the shared models", typ)
			}
		}
	}
}
