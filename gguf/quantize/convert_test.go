package quantize

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wgpu-llama/wgpu-llama/gguf"
	"github.com/wgpu-llama/wgpu-llama/internal/shareddata"
)

// TestFileMatchesLlamaQuantize converts the sources of shared/models/quant and compares the
// whole output with llama-quantize's: metadata, tensor order, padding and every tensor's bytes.
func TestFileMatchesLlamaQuantize(t *testing.T) {
	cases := []struct{ src, ref string }{
		{"quant/synth256-F16.gguf", "quant/synth256-Q4_K_M.gguf"}, // F16 input gives the same bytes
		{"stories260K.gguf", "quant/stories260K-Q8_0.gguf"},       // llama-quantize needed ffn_down=f16 here
		{"stories260K.gguf", "quant/stories260K-Q4_0.gguf"},
		{"stories260K.gguf", "quant/stories260K-Q4_1.gguf"},
		{"stories260K.gguf", "quant/stories260K-Q5_0.gguf"},
		{"stories260K.gguf", "quant/stories260K-Q5_1.gguf"},
		{"stories260K.gguf", "quant/stories260K-Q4_K_M.gguf"},
		{"stories260K.gguf", "quant/stories260K-Q6_K.gguf"},
	}
	for _, m := range []string{"F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q5_1", "Q5_0", "Q4_K_M", "Q4_1", "Q4_0", "Q3_K_M", "Q3_K_S", "Q2_K"} {
		cases = append(cases, struct{ src, ref string }{"quant/synth256-F32.gguf", "quant/synth256-" + m + ".gguf"})
	}
	for _, c := range cases {
		t.Run(filepath.Base(c.ref), func(t *testing.T) {
			src := openShared(t, append([]string{"models"}, strings.Split(c.src, "/")...)...)
			refPath := shareddata.Path(t, append([]string{"models"}, strings.Split(c.ref, "/")...)...)
			mixName := strings.TrimSuffix(c.ref[strings.LastIndex(c.ref, "-")+1:], ".gguf")
			mix, err := ParseMix(mixName)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := File(src, &buf, mix, nil); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(refPath)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("output differs from llama-quantize's: %s", firstDifference(t, buf.Bytes(), want))
			}
		})
	}
}

// firstDifference names the first tensor or header field where two GGUF images differ.
func firstDifference(t *testing.T, got, want []byte) string {
	g, err := gguf.Parse(got)
	if err != nil {
		return "output does not parse: " + err.Error()
	}
	w, _ := gguf.Parse(want)
	for i := range min(len(g.Tensors), len(w.Tensors)) {
		if !bytes.Equal(g.TensorData(&g.Tensors[i]), w.TensorData(&w.Tensors[i])) {
			return fmt.Sprintf("tensor %d %s (%s)", i, g.Tensors[i].Name, g.Tensors[i].Type)
		}
	}
	return fmt.Sprintf("header or length (%d vs %d bytes, data at %d vs %d)", len(got), len(want), g.DataOffset, w.DataOffset)
}

// TestQ8_0RoundTrip quantizes stories260K to Q8_0 (ffn_down falling back to F16 on its own)
// and checks that every tensor dequantizes close to the original.
func TestQ8_0RoundTrip(t *testing.T) {
	src := openShared(t, "models", "stories260K.gguf")
	var buf bytes.Buffer
	var seen int
	sum, err := File(src, &buf, MixQ8_0, func(p Progress) {
		seen++
		if p.Index != seen || p.Count != len(src.Tensors) {
			t.Errorf("progress %d/%d, want %d/%d", p.Index, p.Count, seen, len(src.Tensors))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 48 || sum.Fallbacks != 5 || sum.OldSize != 1171200 || sum.NewSize == 0 {
		t.Errorf("summary %+v after %d progress calls", sum, seen)
	}
	out, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if ft, _ := out.Uint("general.file_type"); ft != 7 {
		t.Errorf("general.file_type = %d, want 7", ft)
	}
	if qv, _ := out.Uint("general.quantization_version"); qv != 2 {
		t.Errorf("general.quantization_version = %d, want 2", qv)
	}
	for _, ti := range out.Tensors {
		orig, _ := src.Tensor(ti.Name)
		want := make([]float32, orig.NumElements())
		got := make([]float32, ti.NumElements())
		if err := gguf.Dequantize(orig.Type, src.TensorData(orig), want); err != nil {
			t.Fatal(err)
		}
		if err := gguf.Dequantize(ti.Type, out.TensorData(&ti), got); err != nil {
			t.Fatal(err)
		}
		var maxErr, maxAbs float64
		for i := range want {
			maxErr = max(maxErr, math.Abs(float64(got[i]-want[i])))
			maxAbs = max(maxAbs, math.Abs(float64(want[i])))
		}
		limit := map[gguf.GGMLType]float64{gguf.TypeF32: 0, gguf.TypeF16: 1e-3, gguf.TypeQ8_0: 1.0 / 127}[ti.Type]
		if maxErr > limit*maxAbs {
			t.Errorf("%s (%s): max error %g of max %g", ti.Name, ti.Type, maxErr, maxAbs)
		}
		if strings.Contains(ti.Name, "ffn_down") != (ti.Type == gguf.TypeF16) {
			t.Errorf("%s is %s", ti.Name, ti.Type)
		}
	}
}

func TestUnsupportedInput(t *testing.T) {
	kvs := []gguf.KV{{Key: "general.architecture", Type: gguf.TypeString, Value: "llama"}}
	// TQ2_0 neither decodes nor encodes (the IQ types and MXFP4 decode now).
	iq := gguf.TensorData{Name: "blk.0.attn_q.weight", Shape: []uint64{256, 2}, Type: gguf.TypeTQ2_0,
		Data: make([]byte, 2*gguf.TypeTQ2_0.TypeSize())}
	norm := gguf.TensorData{Name: "blk.0.attn_norm.weight", Shape: []uint64{64}, Type: gguf.TypeF32, Data: make([]byte, 256)}
	var img bytes.Buffer
	if err := gguf.Write(&img, kvs, []gguf.TensorData{norm, iq}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(img.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	_, err = File(f, &bytes.Buffer{}, MixQ8_0, nil)
	if err == nil || !strings.Contains(err.Error(), "blk.0.attn_q.weight") || !strings.Contains(err.Error(), "TQ2_0") ||
		!errors.Is(err, gguf.ErrUnsupportedType) {
		t.Errorf("err = %v, want one naming the tensor and its type", err)
	}
}

func TestPathErrors(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	if _, err := Path(filepath.Join(dir, "missing.gguf"), out, MixQ8_0, nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing input: %v", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("output left behind: %v", err)
	}
}

// TestRowsBatches checks that Rows, filling and converting in parallel batches, writes the
// same bytes as one Quantize call over the whole tensor.
func TestRowsBatches(t *testing.T) {
	const rowLen, nrows = 256, 2*partElems/256 + 7
	src := make([]float32, rowLen*nrows)
	for i := range src {
		src[i] = float32(math.Sin(float64(i) * 0.37))
	}
	for _, typ := range []gguf.GGMLType{gguf.TypeQ4_K, gguf.TypeF16} {
		want, err := gguf.Quantize(typ, src)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		err = Rows(&buf, typ, rowLen, nrows, func(dst []float32, row uint64) error {
			copy(dst, src[row*rowLen:])
			return nil
		})
		if err != nil || !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: Rows differs from Quantize (err %v)", typ, err)
		}
	}
	fail := errors.New("fill failed")
	if err := Rows(&bytes.Buffer{}, gguf.TypeQ8_0, 32, 4, func([]float32, uint64) error { return fail }); !errors.Is(err, fail) {
		t.Errorf("fill error: %v", err)
	}
	if err := Rows(&bytes.Buffer{}, gguf.TypeQ8_0, 48, 4, nil); err == nil {
		t.Error("row length 48 accepted for Q8_0")
	}
}
